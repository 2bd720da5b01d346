"""--repeat K: each case run K times; passes out of K, pass^k, pass@k and a Wilson interval per
case and per suite; flaky cases marked in every format; every run must pass for exit 0; K = 1
leaves every report as it was; bad values refused in one line; shards of a repeated run merge."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from support.junit_xsd import junit_schema
from support.tiers import first_by_default
from typer.testing import CliRunner

from evalrunner import run_suite
from evalrunner.cli import app
from evalrunner.config import ConfigError, load_config
from evalrunner.fixture.schemas import report_validator
from evalrunner.model import CaseReport, GradeResult, SuiteReport
from evalrunner.repeats import combine_runs
from evalrunner.report import render_table
from evalrunner.report.stats import RepeatStats, case_stats, suite_stats, wilson_interval

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "evals" / "regression"
FLAKY = ROOT / "examples" / "flaky-agent"


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"NO_COLOR": "1", **(env or {})})
    return result.exit_code, result.stdout, result.stderr


def flaky_run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    command = shlex.join([sys.executable, str(FLAKY / "flaky_agent.py")])
    state = tmp_path / "flaky.state"
    state.unlink(missing_ok=True)
    return cli(
        "run",
        str(FLAKY / "evals"),
        "--repeat",
        "5",
        "--agent-command",
        command,
        *args,
        env={"FLAKY_AGENT_STATE": str(state)},
    )


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    def case(data: dict[str, Any]) -> dict[str, Any]:
        runs = [dict(run, duration_ms=0) for run in data.get("runs", [])]
        return dict(data, duration_ms=0, **({"runs": runs} if runs else {}))

    return dict(report, duration_ms=0, cases=[case(c) for c in report["cases"]])


# --- the statistics ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("passes", "runs", "lower", "upper"),
    [
        (8, 10, 0.490, 0.943),
        (5, 10, 0.237, 0.763),
        (0, 10, 0.0, 0.278),
        (10, 10, 0.722, 1.0),
        (1, 1, 0.207, 1.0),
        (0, 1, 0.0, 0.793),
        (3, 5, 0.231, 0.882),
        (95, 100, 0.888, 0.978),
    ],
)
def test_the_wilson_interval_gives_the_published_values(
    passes: int, runs: int, lower: float, upper: float
) -> None:
    low, high = wilson_interval(passes, runs)
    assert (round(low, 3), round(high, 3)) == (lower, upper)


def test_the_wilson_interval_is_exact_at_the_edges_and_wide_open_without_runs() -> None:
    assert wilson_interval(0, 7)[0] == 0.0
    assert wilson_interval(7, 7)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    for runs in range(1, 60):
        for passes in range(runs + 1):
            low, high = wilson_interval(passes, runs)
            assert 0.0 <= low <= passes / runs <= high <= 1.0


@pytest.mark.parametrize(
    ("passes", "pass_all", "pass_any", "flaky"),
    [(0, False, False, False), (2, False, True, True), (5, True, True, False)],
)
def test_pass_hat_k_pass_at_k_and_flaky(
    passes: int, pass_all: bool, pass_any: bool, flaky: bool
) -> None:
    stats = RepeatStats(runs=5, passes=passes)
    assert (stats.pass_all, stats.pass_any, stats.flaky) == (pass_all, pass_any, flaky)


def test_a_case_shows_its_first_failed_run_and_passes_only_when_every_run_did() -> None:
    def run(passed: bool, detail: str, ms: int) -> CaseReport:
        grade = GradeResult('response_contains("x")', passed, detail)
        return CaseReport("c", "c.yaml", None, (grade,), llm_calls=1, duration_ms=ms)

    runs = [run(True, "", 1), run(False, "second", 2), run(False, "third", 4)]
    case = combine_runs(runs)
    assert not case.passed
    assert case.grades[0].detail == "second"
    assert (case.llm_calls, case.duration_ms, case.runs) == (3, 7, tuple(runs))
    assert case_stats(case) == RepeatStats(runs=3, passes=1)
    assert combine_runs(runs[:1]) is runs[0]  # K = 1: the run is the case
    report = SuiteReport("s", "replay", (case, combine_runs([runs[0], runs[0]])), repeat=3)
    stats = suite_stats(report)
    assert (stats.pass_all, stats.pass_any, stats.flaky) == (1, 2, ("c",))


# --- a deliberately flaky agent, in every format ----------------------------------------------


# Serially by default; in workers in the slow tier (repeats in workers give the serial report,
# by default, in test_repeats_in_workers_give_the_serial_report).
@pytest.mark.parametrize("jobs", first_by_default(["1", "2"]))
def test_a_flaky_agent_is_reported_flaky_with_its_numbers_in_every_format(
    tmp_path: Path, jobs: str
) -> None:
    junit, report = tmp_path / "report.xml", tmp_path / "report.json"
    code, out, err = flaky_run(
        tmp_path, "--jobs", jobs, "--junit-xml", str(junit), "--json", str(report)
    )
    assert code == 1, err
    line = next(row for row in out.splitlines() if row.startswith("✗ ping-answers-pong"))
    assert "3/5 runs passed  FLAKY  pass^5 no  pass@5 yes  Wilson 95% [0.231, 0.882]" in line
    assert "each case run 5 times" in out.splitlines()[0]
    # Serially, run n is the agent's n-th run; in workers, which run the agent gets wrong
    # depends on which worker asked first (the agent's state, not the runner's): the
    # numbers are the same, the failed runs' places may differ.
    serial = jobs == "1"
    assert re.search(r"\n    3/5 runs passed, flaky; failed runs: \d, \d; run \d shown\n", out)
    assert not serial or "failed runs: 2, 4; run 2 shown" in out
    assert (
        "repeats: 3/5 runs passed · pass^5 0/1 cases · pass@5 1/1 cases · pass rate 0.600, "
        "Wilson 95% [0.231, 0.882] · 1 flaky"
    ) in out
    assert out.rstrip().splitlines()[-1].startswith("0/1 cases passed (1 failed)")

    data = json.loads(report.read_text("utf-8"))
    assert not list(report_validator().iter_errors(data))
    assert data["repeat"] == {
        "k": 5,
        "runs": 5,
        "passes": 3,
        "not_run": 0,
        "pass_rate": 0.6,
        "wilson_95": [0.230724, 0.882379],
        "pass_hat_k": 0.0,
        "pass_at_k": 1.0,
        "cases_pass_hat_k": 0,
        "cases_pass_at_k": 1,
        "flaky": 1,
    }
    (case,) = data["cases"]
    assert case["repeat"] == {
        "runs": 5,
        "passes": 3,
        "not_run": 0,
        "pass_rate": 0.6,
        "wilson_95": [0.230724, 0.882379],
        "pass_hat_k": False,
        "pass_at_k": True,
        "flaky": True,
    }
    verdicts = [run["passed"] for run in case["runs"]]
    assert verdicts.count(True) == 3
    assert not serial or verdicts == [True, False, True, False, True]
    assert case["passed"] is False and data["all_passed"] is False
    assert case["grades"][0]["detail"] == 'not found in response: "I forgot"'

    xml = junit.read_text("utf-8")
    junit_schema().validate(xml)
    summary = "3/5 runs passed, flaky; pass^5 no, pass@5 yes, Wilson 95% [0.231, 0.882]"
    assert f'<failure message="{summary}; run ' in xml
    assert not serial or f'<failure message="{summary}; run 2: 1 of 1 checks failed' in xml
    assert f"<system-out>{summary}</system-out>" in xml
    assert '<property name="repeat" value="5" />' in xml
    assert '<property name="flaky" value="1" />' in xml

    code, out, _ = flaky_run(tmp_path, "--jobs", jobs, "--format", "github")
    assert code == 1
    (annotation,) = [row for row in out.splitlines() if row.startswith("::error ")]
    assert re.search(
        r"::3/5 runs passed, flaky; pass\^5 no, pass@5 yes, Wilson 95%25 \[0.231, 0.882\]; run "
        r'\d: response_contains\("pong"\): not found in response: "I forgot"$',
        annotation,
    )
    assert "title=ping-answers-pong" in annotation
    assert "FLAKY" in out


def test_a_flaky_python_agent_is_flaky_in_the_library_too() -> None:
    from evalrunner.agents.reference import reference_agent

    calls = iter(range(1000))

    def every_third_run_forgets(context: Any) -> Any:
        agent = reference_agent(context)
        if next(calls) % 3 == 2:
            raise RuntimeError("forgot how to start")
        return agent

    report = run_suite(
        [REGRESSION / "echo_token_roundtrip.yaml"], agent_factory=every_third_run_forgets, repeat=6
    )
    assert isinstance(report, SuiteReport)
    (case,) = report.cases
    assert case_stats(case) == RepeatStats(runs=6, passes=4)
    assert case_stats(case).flaky and not case.passed
    assert case.error is not None and "forgot how to start" in case.error


# --- the exit rule, K = 1, jobs ---------------------------------------------------------------


def test_every_run_must_pass_a_stable_suite_repeated_exits_0() -> None:
    code, out, err = cli("run", "--suite", str(REGRESSION), "--repeat", "3")
    assert code == 0, err
    assert "repeats: 54/54 runs passed · pass^3 18/18 cases · pass@3 18/18 cases" in out
    assert "flaky" not in out.lower()


def test_repeat_1_leaves_every_report_as_it_was(tmp_path: Path) -> None:
    reports = []
    for extra in ([], ["--repeat", "1"]):
        junit = tmp_path / f"r{len(reports)}.xml"
        code, out, _ = cli(
            "run",
            "--suite",
            str(REGRESSION),
            "--format",
            "json",
            "--junit-xml",
            str(junit),
            *extra,
            env={"EVALRUNNER_REPEAT": ""},
        )
        assert code == 0
        reports.append((json.loads(out), re.sub(r'time="[^"]*"', "", junit.read_text("utf-8"))))
    (first, first_xml), (second, second_xml) = reports
    assert without_timings(first) == without_timings(second)
    assert "repeat" not in first and all("runs" not in case for case in first["cases"])
    assert first_xml == second_xml and "repeat" not in first_xml
    table = render_table(SuiteReport("s", "replay", ()))
    assert "repeat" not in table and "each case run" not in table


@pytest.mark.parametrize("jobs", ["2", "3"])
def test_repeats_in_workers_give_the_serial_report(jobs: str) -> None:
    serial = cli("run", "--suite", str(REGRESSION), "--format", "json", "--repeat", "3")
    parallel = cli(
        "run", "--suite", str(REGRESSION), "--format", "json", "--repeat", "3", "-j", jobs
    )
    assert serial[0] == parallel[0] == 0
    assert without_timings(json.loads(serial[1])) == without_timings(json.loads(parallel[1]))


def test_a_failing_case_fails_every_run_and_is_not_flaky(tmp_path: Path) -> None:
    failing = json.loads((REGRESSION / "forbidden_tool_not_used.json").read_text("utf-8"))
    failing["expects"]["response_contains"] = ["not in the reply"]
    (tmp_path / "fail.json").write_text(json.dumps(failing), encoding="utf-8")
    code, out, _ = cli("run", str(tmp_path / "fail.json"), "--repeat", "4", "--format", "json")
    assert code == 1
    (case,) = json.loads(out)["cases"]
    assert case["repeat"]["passes"] == 0
    assert case["repeat"]["flaky"] is False and case["repeat"]["pass_at_k"] is False
    assert case["repeat"]["wilson_95"] == [0.0, 0.489891]  # z² / (K + z²)


# --- hostile values ---------------------------------------------------------------------------

BAD = [
    "0",
    "-1",
    "1001",
    "99999999999",
    "1.5",
    "1e3",
    "1_0",
    "²",
    "١٢",
    " ",
    "",
    "5 5",
    "x",
    "\x1b[31m",
    "0x10",
    "+5",
]


@pytest.mark.parametrize("value", BAD)
def test_a_bad_repeat_flag_is_refused_in_one_line(value: str) -> None:
    code, out, err = cli("run", "--suite", str(REGRESSION), "--repeat", value)
    assert code == 2 and out == ""
    assert err.startswith("--repeat: must be a whole number from 1 to 1000, got ")
    assert err.count("\n") == 1 and "Traceback" not in err and "\x1b" not in err


@pytest.mark.parametrize("value", [v for v in BAD if v])  # empty counts as unset
def test_a_bad_repeat_variable_is_refused_naming_it(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(cwd=tmp_path, env={"EVALRUNNER_REPEAT": value})
    (problem,) = refused.value.problems
    assert problem.startswith("EVALRUNNER_REPEAT: must be a whole number from 1 to 1000, got ")
    code, out, err = cli("run", "--suite", str(REGRESSION), env={"EVALRUNNER_REPEAT": value})
    assert code == 2 and out == "" and err.count("\n") == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "eval.repeat must be at least 1, got integer 0"),
        ("-3", "eval.repeat must be at least 1, got integer -3"),
        ("1001", "eval.repeat must be at most 1000, got integer 1001"),
        ("99999999999", "eval.repeat must be at most 1000, got integer 99999999999"),
        ('"5"', "eval.repeat must be a whole number (written without a decimal point), got string"),
        ("5.0", "eval.repeat must be a whole number (written without a decimal point), got float"),
        ("true", "eval.repeat must be a whole number (written without a decimal point), got bool"),
        ("[5]", "eval.repeat must be a whole number (written without a decimal point), got array"),
        ("1_0", ""),  # TOML's own underscore: the integer 10, a valid count
    ],
)
def test_a_bad_repeat_in_the_config_file_is_a_positioned_message(
    tmp_path: Path, value: str, message: str
) -> None:
    (tmp_path / "evalrunner.toml").write_text(f"[eval]\nrepeat = {value}\n", encoding="utf-8")
    if not message:
        assert load_config(cwd=tmp_path, env={}).repeat == 10
        return
    code, out, err = cli("config", "--config", str(tmp_path / "evalrunner.toml"))
    assert code == 2 and out == ""
    assert f"evalrunner.toml:2:10: {message}" in err
    assert err.count("\n") == 1


def test_the_flag_beats_the_variable_which_beats_the_file(tmp_path: Path) -> None:
    (tmp_path / "evalrunner.toml").write_text("[eval]\nrepeat = 4\n", encoding="utf-8")
    assert load_config(cwd=tmp_path, env={}).repeat == 4
    assert load_config(cwd=tmp_path, env={"EVALRUNNER_REPEAT": " 7 "}).repeat == 7
    assert load_config(cwd=tmp_path, env={"EVALRUNNER_REPEAT": "7"}, repeat=2).repeat == 2
    code, out, _ = cli("config", "--config", str(tmp_path / "evalrunner.toml"), "--repeat", "3")
    assert code == 0 and "repeat = 3  # --repeat" in out
    code, out, _ = cli("config", "--config", str(tmp_path / "evalrunner.toml"))
    assert code == 0 and re.search(r"repeat = 4  # .*evalrunner\.toml:2", out)


# --- shards ------------------------------------------------------------------------------------


def test_the_shards_of_a_repeated_run_merge_into_the_unsharded_report(tmp_path: Path) -> None:
    shards = []
    for index in (1, 2, 3):
        path = tmp_path / f"shard-{index}.json"
        code, _, err = cli(
            "run",
            "--suite",
            str(REGRESSION),
            "--repeat",
            "2",
            "--shard",
            f"{index}/3",
            "--json",
            str(path),
        )
        assert code == 0, err
        shards.append(str(path))
    merged = tmp_path / "merged.json"
    code, out, err = cli("merge", *shards, "--json", str(merged))
    assert code == 0, err
    assert "repeats: 36/36 runs passed" in out
    code, whole, _ = cli("run", "--suite", str(REGRESSION), "--repeat", "2", "--format", "json")
    merged_data = json.loads(merged.read_text("utf-8"))
    assert not list(report_validator().iter_errors(merged_data))
    assert without_timings(merged_data) == without_timings(json.loads(whole))


def test_shards_of_different_repeat_counts_are_not_merged(tmp_path: Path) -> None:
    paths = []
    for index, repeat in ((1, "2"), (2, "1")):
        path = tmp_path / f"shard-{index}.json"
        cli(
            "run",
            "--suite",
            str(REGRESSION),
            "--repeat",
            repeat,
            "--shard",
            f"{index}/2",
            "--json",
            str(path),
        )
        paths.append(str(path))
    code, out, err = cli("merge", *paths)
    assert code == 2 and out == ""
    assert "its repeat count (--repeat) is '1', but " in err
    assert "merge the shards of one run" in err


def test_a_repeated_report_whose_runs_do_not_add_up_is_not_merged(tmp_path: Path) -> None:
    paths = []
    for index in (1, 2):
        path = tmp_path / f"shard-{index}.json"
        cli(
            "run",
            "--suite",
            str(REGRESSION),
            "--repeat",
            "2",
            "--shard",
            f"{index}/2",
            "--json",
            str(path),
        )
        paths.append(path)
    data = json.loads(paths[0].read_text("utf-8"))
    data["cases"][0]["runs"][1]["passed"] = False  # a run edited to fail, the case still passed
    paths[0].write_text(json.dumps(data), encoding="utf-8")
    code, _, err = cli("merge", *map(str, paths))
    assert code == 2
    assert "runs[1].passed: False does not follow from its error and grades" in err
    data["cases"][0]["runs"][1]["passed"] = True
    data["cases"][0]["runs"].append(data["cases"][0]["runs"][0])
    paths[0].write_text(json.dumps(data), encoding="utf-8")
    code, _, err = cli("merge", *map(str, paths))
    assert code == 2
    assert ".runs: 3 run(s), but each case ran 2 times" in err


# --- runs that never ran ----------------------------------------------------------------------

LIVE_CASE = """\
name: live_echo
turns:
  - user_input: say hi through echo
expects:
  response_contains: [hello]
"""
SCRIPTED_CASE = """\
name: scripted_hi
turns:
  - user_input: say hi
    steps:
      - response: {type: text, content: hi there}
expects:
  response_contains: [hi]
"""


def test_runs_that_never_ran_are_left_out_of_the_repeat_statistics(tmp_path: Path) -> None:
    suite = tmp_path / "evals"
    suite.mkdir()
    (suite / "live_echo.yaml").write_text(LIVE_CASE, encoding="utf-8")
    (suite / "scripted_hi.yaml").write_text(SCRIPTED_CASE, encoding="utf-8")
    code, out, err = cli("run", str(suite), "--repeat", "3", env={"EVALRUNNER_MODE": "replay"})
    assert code == 0, err
    assert "1/2 cases passed (1 not run)" in out
    # The skipped case's runs are neither passes nor failures: 3/3, rate 1, not 3/6 and 0.5.
    assert (
        "repeats: 3/3 runs passed · pass^3 1/1 cases · pass@3 1/1 cases · pass rate 1.000, "
        "Wilson 95% [0.439, 1.000] · 3 runs not run (left out)"
    ) in out
    code, out, _ = cli(
        "run", str(suite), "--repeat", "3", "--format", "json", env={"EVALRUNNER_MODE": "replay"}
    )
    report = json.loads(out)
    assert list(report_validator().iter_errors(report)) == []
    assert report["repeat"]["runs"] == 3 and report["repeat"]["not_run"] == 3
    assert report["repeat"]["pass_rate"] == 1.0
    assert report["repeat"]["cases_pass_hat_k"] == 1 and report["repeat"]["pass_hat_k"] == 1.0
    live = next(case for case in report["cases"] if case["name"] == "live_echo")
    assert live["repeat"]["runs"] == 0 and live["repeat"]["not_run"] == 3
    assert live["repeat"]["pass_rate"] is None and live["repeat"]["wilson_95"] is None
    assert live["repeat"]["pass_hat_k"] is False and live["repeat"]["flaky"] is False


def test_a_case_partly_run_counts_only_its_runs_that_ran() -> None:
    ran = CaseReport("c", "c.json", None, (GradeResult("x", True),))
    skipped = CaseReport("c", "c.json", None, (), skipped="not run: the token budget is spent")
    case = combine_runs([ran, ran, skipped])
    stats = case_stats(case)
    assert (stats.runs, stats.passes, stats.not_run) == (2, 2, 1)
    # Not every one of the 3 runs passed: one never ran, so no pass^3.
    assert stats.pass_rate == 1.0 and not stats.pass_all and not stats.flaky
    table = render_table(SuiteReport("s", "replay", (case,), repeat=3))
    assert "2/2 runs passed (1 not run)" in table and "pass^3 no" in table


def test_a_case_with_runs_that_never_ran_is_no_pass_hat_k() -> None:
    # Two of three runs passed and the third never ran (the token budget stopped it): the
    # case was not shown to pass every run, so pass^3 is "no", while pass@3 holds.
    from evalrunner.report.stats import RepeatStats

    stats = RepeatStats(runs=2, passes=2, not_run=1)
    assert not stats.pass_all and stats.pass_any
    assert RepeatStats(runs=3, passes=3).pass_all


# --- one set of numbers for a case some of whose runs never ran (issue 27) ---------------------

BUDGET_SKIP = "not run: the token budget (max_total_tokens) was spent before this case"


def _run(passed: bool | None) -> CaseReport:
    """A run that passed, failed (False) or never ran (None)."""
    if passed is None:
        return CaseReport("c", "c.yaml", None, (), skipped=BUDGET_SKIP, path="evals/c.yaml")
    grade = GradeResult('response_contains("x")', passed, "" if passed else "not found")
    return CaseReport("c", "c.yaml", None, (grade,), llm_calls=1, path="evals/c.yaml")


def _every_format(case: CaseReport) -> tuple[str, dict[str, Any], str, str]:
    from evalrunner.report import github_annotations, render_junit, report_data

    report = SuiteReport("s", "live", (case,), repeat=3, budget_spent="the token budget is spent")
    table = render_table(report, color=False)
    return table, report_data(report), render_junit(report), "\n".join(github_annotations(report))


def test_a_failed_run_before_runs_that_never_ran_gives_one_set_of_numbers() -> None:
    # Run 1 failed; the budget left runs 2 and 3 unrun. The row said "0/1 runs passed (2 not
    # run)", the failure block "0/3 runs passed; failed runs: 1, 2, 3".
    case = combine_runs([_run(False), _run(None), _run(None)])
    table, data, junit, github = _every_format(case)
    assert "0/1 runs passed (2 not run)" in table
    assert "0/1 runs passed (2 not run); failed runs: 1; runs not run: 2, 3; run 1 shown" in table
    assert "0/3" not in table and "failed runs: 1, 2" not in table
    assert data["cases"][0]["repeat"]["runs"] == 1 and data["cases"][0]["repeat"]["not_run"] == 2
    for text in (junit, github):
        assert "0/1 runs passed (2 not run)" in text and "run 1: " in text
    assert "0/1 cases passed (1 failed)" in table


def test_a_case_whose_runs_that_ran_all_passed_is_not_counted_as_not_run() -> None:
    # Runs 1 and 2 ran and passed, run 3 never ran: the case was graded twice, so it is not
    # "not run"; nor is it a pass (pass^3 needs every run). It has no verdict: an error that
    # names the run that never ran, in every format.
    case = combine_runs([_run(True), _run(True), _run(None)])
    assert case.skipped is None and not case.passed
    assert case.error == (
        "run 3 of 3 did not run: the token budget (max_total_tokens) was spent before this "
        "case; the case passes only when every run does"
    )
    table, data, junit, github = _every_format(case)
    assert "0/1 cases passed (1 errored)" in table
    assert "2/2 runs passed (1 not run); runs not run: 3; run 3 shown" in table
    assert "run error: run 3 of 3 did not run" in table
    assert data["cases"][0]["skipped"] is None and data["cases"][0]["error"] == case.error
    assert data["cases"][0]["repeat"] == {
        "runs": 2,
        "passes": 2,
        "not_run": 1,
        "pass_rate": 1.0,
        "wilson_95": data["cases"][0]["repeat"]["wilson_95"],
        "pass_hat_k": False,
        "pass_at_k": True,
        "flaky": False,
    }
    for text in (junit, github):
        assert "2/2 runs passed (1 not run)" in text and "run 3: " in text
    assert 'skipped="1"' not in junit


def test_a_flaky_case_with_a_run_that_never_ran_reads_the_same_everywhere() -> None:
    case = combine_runs([_run(True), _run(False), _run(None)])
    table, _, junit, github = _every_format(case)
    for text in (table, junit, github):
        assert "1/2 runs passed (1 not run), flaky" in text
    assert "failed runs: 2; runs not run: 3; run 2 shown" in table


def test_a_case_none_of_whose_runs_ran_is_not_run() -> None:
    case = combine_runs([_run(None)] * 3)
    assert case.skipped == BUDGET_SKIP and case.error is None
    table, _, _, github = _every_format(case)
    assert "0/1 cases passed (1 not run)" in table and "c (c.yaml)" in table
    assert github == "" or "c.yaml" not in github


def test_a_budget_that_stops_a_repeated_case_midway_gives_one_set_of_numbers(
    tmp_path: Path,
) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.live_project import CALL, TEXT, project
    from support.live_project import cli as live_cli
    from support.model_server import ModelServer, Reply

    from evalrunner.model import TextResponse

    def run(name: str, replies: list[Reply], budget: int) -> tuple[int, str]:
        (tmp_path / name).mkdir()
        with ModelServer("openai", replies) as server:
            cwd = project(tmp_path / name, "openai", server.base_url)
            with (cwd / "evalrunner.toml").open("a", encoding="utf-8") as toml:
                toml.write(f"max_total_tokens = {budget}\n")
            done = live_cli(cwd, "run", "--mode", "live", "--repeat", "3")
        return done.returncode, done.stdout + done.stderr

    # Run 1 fails and spends the budget: runs 2 and 3 never run.
    code, out = run("failed", [Reply(TextResponse("no tools here", 50, 50))] * 3, 60)
    assert code == 3, out
    assert "0/1 runs passed (2 not run)" in out and "0/3 runs passed" not in out
    # Runs 1 and 2 pass and spend the budget: run 3 never runs.
    code, out = run("passed", [Reply(CALL), Reply(TEXT)] * 3, 100)
    assert code == 3, out
    assert "2/2 runs passed (1 not run)" in out
    assert "0/1 cases passed (1 errored)" in out and "1 not run," not in out


def test_a_run_the_budget_cut_short_is_not_run_not_failed() -> None:
    # Before: the cut run counted as a failed run, and the case read "1/2 runs passed, flaky".
    cut = CaseReport(
        "c",
        "c.yaml",
        None,
        (),
        error="turn 1, model request 2: the token budget is spent (84 of max_total_tokens = "
        "70 tokens used): no further model request was sent",
        input_tokens=20,
        output_tokens=5,
        path="evals/c.yaml",
        budget_cut=True,  # as the run that the budget refused a request says
    )
    case = combine_runs([_run(True), cut, _run(None)])
    stats = case_stats(case)
    assert (stats.runs, stats.passes, stats.not_run) == (1, 1, 2) and not stats.flaky
    assert case.runs[1].skipped == (
        "not run to its end, the token budget stopped it: turn 1, model request 2: the token "
        "budget is spent (84 of max_total_tokens = 70 tokens used): no further model request "
        "was sent"
    )
    assert case.runs[1].error is None and case.input_tokens == 20  # its tokens were spent
    # The last run cut: the case's error reads flat, one bracket from the budget's message.
    assert combine_runs([_run(True), _run(True), cut]).error == (
        "run 3 of 3 did not run to its end: the token budget stopped it: turn 1, model request "
        "2: the token budget is spent (84 of max_total_tokens = 70 tokens used): no further "
        "model request was sent; the case passes only when every run does"
    )
    table, _, junit, github = _every_format(case)
    for text in (table, junit, github):
        assert "1/1 runs passed (2 not run)" in text and ", flaky" not in text


def test_a_failed_run_whose_error_only_quotes_the_budget_is_a_failed_run() -> None:
    """What the budget cut is said by the run the budget refused, not read from an error's
    words: an agent's own error that quotes the budget's message (a budget of its own, say)
    is a failed run. Read from the words, it was "not run", and a failing case passed."""
    quoted = CaseReport(
        "c",
        "c.yaml",
        None,
        (),
        error="RuntimeError: the token budget is spent (the agent's own: 3 of 3 calls)",
        path="evals/c.yaml",
    )
    case = combine_runs([_run(True), quoted, _run(True)])
    stats = case_stats(case)
    assert (stats.runs, stats.passes, stats.not_run) == (3, 2, 0) and stats.flaky
    assert case.runs[1].skipped is None and not case.passed
    assert case.error == quoted.error


def test_a_budget_that_cuts_a_repeated_run_midway_is_no_flake(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.live_project import CALL, TEXT, project
    from support.live_project import cli as live_cli
    from support.model_server import ModelServer, Reply

    # Run 1 passes (59 tokens); run 2's first answer spends past 70, so its second request is
    # refused; run 3 never starts.
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)] * 3) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        with (cwd / "evalrunner.toml").open("a", encoding="utf-8") as toml:
            toml.write("max_total_tokens = 70\n")
        done = live_cli(cwd, "run", "--mode", "live", "--repeat", "3", "--json", "out.json")
    out = done.stdout + done.stderr
    assert done.returncode == 3, out
    assert "1/1 runs passed (2 not run)" in out and "flaky" not in out
    case = json.loads((cwd / "out.json").read_text(encoding="utf-8"))["cases"][0]
    assert case["repeat"]["flaky"] is False and case["repeat"]["not_run"] == 2
    assert case["input_tokens"] == 70  # 20 + 30 in run 1, and run 2's 20
