"""``evalrunner merge`` (issue 10 §4): the union of ``--shard 1/N`` … ``N/N``, merged, is the
unsharded report (verdicts, checks and order; timings aside), and shards that are not the
complete, non-overlapping shards of one run are refused with a reason."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.schemas import report_validator

runner = CliRunner()

PASSING = """\
name: {name}
class: positive
turns:
  - user_input: say hi
    steps:
      - response: {{type: text, content: hi there}}
expects:
  response_contains: [hi]
"""
FAILING = PASSING.replace("[hi]", "[hello]")
ERRORING = """\
name = "{name}"
[[turns]]
user_input = "say hi"
[[turns.steps]]
response = {{ type = "text", content = "hi" }}
[[turns.steps]]
response = {{ type = "text", content = "left over" }}
[expects]
response_contains = ["hi"]
"""

FILES = {
    "a/x.yaml": PASSING.format(name="a-x"),
    "b/x.yaml": FAILING.format(name="b-x"),  # the same file name in another directory
    "b/y.toml": ERRORING.format(name="b-y"),
    "c.yaml": PASSING.format(name="c"),
    "d/e/f.yaml": PASSING.format(name="d-e-f"),
    "z.yaml": FAILING.format(name="z"),
    **{f"many/m{i:02d}.yaml": PASSING.format(name=f"many-{i:02d}") for i in range(14)},
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for relative, text in FILES.items():
        path = tmp_path / "evals" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text('[eval]\nsuite_dir = "evals"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={"EVALRUNNER_SUITE_DIR": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def run_to(path: Path, *args: str) -> dict[str, Any]:
    code, out, err = invoke("run", "--format", "json", *args)
    assert code in (0, 1, 2), err
    path.write_text(out, encoding="utf-8")
    data: dict[str, Any] = json.loads(out)
    return data


def shards(directory: Path, count: int, *args: str) -> list[Path]:
    paths = []
    for index in range(1, count + 1):
        path = Path(f"shard-{index}-of-{count}.json")  # in the working directory, as shown
        run_to(directory / path, "--shard", f"{index}/{count}", *args)
        paths.append(path)
    return paths


def timeless(report: dict[str, Any]) -> dict[str, Any]:
    """A report without its timings, the one thing that differs between runs."""
    data = copy.deepcopy(report)
    data.pop("duration_ms")
    for case in data["cases"]:
        case.pop("duration_ms")
    return data


_DURATION = re.compile(r"\b\d+(?:\.\d+)? (?:ms|s)\b|\b\d+ min \d+ s\b")


def timeless_table(text: str) -> str:
    return _DURATION.sub("<time>", text)


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


# --- the union equals the unsharded run --------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 3, 5, 25])
def test_merged_shards_equal_the_unsharded_report(project: Path, count: int) -> None:
    whole = run_to(project / "whole.json")
    assert whole["total"] == len(FILES)
    parts = shards(project, count)
    sizes = [read(p)["total"] for p in parts]
    assert sum(sizes) == len(FILES) and max(sizes) - min(sizes) <= 1
    code, out, err = invoke("merge", *map(str, parts), "--json", "merged.json")
    assert (code, err) == (1, "")  # some cases fail, as in the whole run
    merged = read(project / "merged.json")
    assert not list(report_validator().iter_errors(merged))
    assert timeless(merged) == timeless(whole)
    assert merged["duration_ms"] == sum(read(p)["duration_ms"] for p in parts)
    # the table on stdout is the whole run's table, timings aside, the recap's path:line too
    _, table, _ = invoke("run")
    assert ".yaml:1)" in table
    assert timeless_table(out) == timeless_table(table)


def test_the_order_of_the_shard_files_does_not_matter(project: Path) -> None:
    whole = run_to(project / "whole.json")
    parts = shards(project, 3)
    invoke("merge", *map(str, reversed(parts)), "--json", "merged.json")
    assert timeless(read(project / "merged.json")) == timeless(whole)


def test_merge_with_k_and_paths_and_jobs(project: Path) -> None:
    selection = ("evals/b", "evals/many", "evals/c.yaml", "-k", "not m03 and not m07")
    whole = run_to(project / "whole.json", *selection)
    assert whole["keyword"] == "not m03 and not m07"
    parts = shards(project, 3, *selection, "--jobs", "2")
    code, _, _ = invoke("merge", *map(str, parts), "--json", "merged.json")
    assert code == 1
    assert timeless(read(project / "merged.json")) == timeless(whole)


def test_merge_exits_0_when_every_case_passed(project: Path) -> None:
    parts = shards(project, 2, "-k", "many")
    code, out, _ = invoke("merge", *map(str, parts))
    assert code == 0
    assert out.splitlines()[-1].startswith("14/14 cases passed in ")


def test_merge_keeps_refused_files_and_exit_2(project: Path) -> None:
    (project / "evals" / "broken.yaml").write_text("name: [\n", encoding="utf-8")
    whole = run_to(project / "whole.json", "--continue-on-admission-errors", "-k", "many")
    parts = shards(project, 2, "--continue-on-admission-errors", "-k", "many")
    code, _, err = invoke("merge", *map(str, parts), "--json", "merged.json")
    assert code == 2
    assert err.splitlines()[0].startswith("evals/broken.yaml:")
    assert err.splitlines()[-1].startswith("--continue-on-admission-errors: 1 problem(s) in 1")
    assert timeless(read(project / "merged.json")) == timeless(whole)


# --- refusals ----------------------------------------------------------------------------------


def refused(*args: str) -> str:
    code, out, err = invoke("merge", *args)
    assert (code, out) == (2, ""), err
    assert err.splitlines()[-1].endswith("nothing was merged")
    return err


def test_a_missing_shard_is_refused(project: Path) -> None:
    parts = shards(project, 4)
    err = refused(str(parts[0]), str(parts[2]))
    assert "shard(s) 2/4, 4/4 missing: give the report of every shard, 1/4 to 4/4" in err
    assert not (project / "merged.json").exists()


def test_a_shard_given_twice_is_refused(project: Path) -> None:
    parts = shards(project, 2)
    err = refused(*map(str, parts), str(parts[1]))
    assert f"{parts[1]}: shard 2/2 is also {parts[1]}; give each shard once" in err


def test_overlapping_shards_are_refused(project: Path) -> None:
    parts = shards(project, 2)
    first, second = read(parts[0]), read(parts[1])
    second["cases"].append(first["cases"][0])
    second["total"] += 1
    second["passed" if first["cases"][0]["passed"] else "failed"] += 1
    second["all_passed"] = second["failed"] == 0
    parts[1].write_text(json.dumps(second), encoding="utf-8")
    err = refused(*map(str, parts))
    name = first["cases"][0]["name"]
    assert f"{parts[1]}: case '{name}' is also in {parts[0]}; shards must not overlap" in err


def _move(case: dict[str, Any], source: dict[str, Any], target: dict[str, Any]) -> None:
    source["cases"].remove(case)
    target["cases"].append(case)
    for data, sign in ((source, -1), (target, 1)):
        data["total"] += sign
        data["passed" if case["passed"] else "failed"] += sign
        data["all_passed"] = data["failed"] == 0 and not data.get("admission_errors")


def test_a_case_in_the_wrong_shard_is_refused(project: Path) -> None:
    # Swapping one case each way keeps every count right: only the deal can tell.
    parts = shards(project, 2)
    first, second = read(parts[0]), read(parts[1])
    a, b = first["cases"][0], second["cases"][0]
    _move(a, first, second)
    _move(b, second, first)
    parts[0].write_text(json.dumps(first), encoding="utf-8")
    parts[1].write_text(json.dumps(second), encoding="utf-8")
    err = refused(*map(str, parts))
    assert (
        f"{parts[1]}: case {a['name']!r} is in shard 2/2, but dealing the merged cases puts it "
        "in 1/2; a report was edited, or the shards come from different runs"
    ) in err
    assert f"{parts[0]}: case {b['name']!r} is in shard 1/2, but dealing the merged" in err


def test_shards_that_differ_only_in_k_say_so_and_nothing_else(project: Path) -> None:
    one = Path("k1.json")
    two = Path("k2.json")
    run_to(project / one, "--shard", "1/2")
    run_to(project / two, "--shard", "2/2", "-k", "many")
    err = refused(str(one), str(two))
    assert err.splitlines()[0] == (
        f"{two}: its -k expression is 'many', but {one}'s is none; merge the shards of one run"
    )
    assert "different suites" not in err


def test_a_case_twice_in_one_report_is_refused(project: Path) -> None:
    (only,) = shards(project, 1)
    data = read(only)
    data["cases"].append(data["cases"][0])
    data["total"] += 1
    data["passed"] += 1
    only.write_text(json.dumps(data), encoding="utf-8")
    assert "is twice in this report; shards must not overlap" in refused(str(only))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("suite", "other", "its suite is 'other', but {first}'s is 'evals'"),
        ("mode", "live", "its mode is 'live', but {first}'s is 'replay'"),
        ("keyword", "many", "its -k expression is 'many', but {first}'s is none"),
        ("trimmed_history", True, "its trimmed_history setting is true, but {first}'s is false"),
        ("framed_results", True, "its framed_results setting is true, but {first}'s is false"),
        ("shard", {"index": 2, "count": 3, "selected": 20}, "shard 2/3 is one of 3, but"),
        ("shard", {"index": 2, "count": 2, "selected": 19}, "its run selected 19 case(s)"),
    ],
)
def test_shards_of_different_runs_are_refused(
    project: Path, field: str, value: object, message: str
) -> None:
    parts = shards(project, 2)
    data = read(parts[1])
    data[field] = value
    parts[1].write_text(json.dumps(data), encoding="utf-8")
    err = refused(*map(str, parts))
    assert err.startswith(f"{parts[1]}: ")
    assert message.format(first=parts[0]) in err


def test_refused_files_that_differ_between_shards_are_refused(project: Path) -> None:
    parts = shards(project, 2)
    data = read(parts[1])
    data["admission_errors"] = [
        {"path": "evals/x.yaml", "line": 1, "col": 1, "message": "bad", "json_path": []}
    ]
    data["all_passed"] = False
    parts[1].write_text(json.dumps(data), encoding="utf-8")
    assert "its refused files differ from" in refused(*map(str, parts))


def test_an_unsharded_or_interrupted_report_is_refused(project: Path) -> None:
    whole = Path("whole.json")
    run_to(whole)
    parts = shards(project, 2)
    err = refused(str(whole), *map(str, parts))
    assert f"{whole}: the report of an unsharded run, not of a shard" in err
    data = read(parts[0])
    data["interrupted"] = True
    data["all_passed"] = False
    parts[0].write_text(json.dumps(data), encoding="utf-8")
    assert f"{parts[0]}: the shard's run was interrupted; rerun that shard" in refused(
        *map(str, parts)
    )


def test_a_report_that_does_not_add_up_is_refused(project: Path) -> None:
    parts = shards(project, 2)
    data = read(parts[0])
    data["passed"] += 1
    data["cases"][0]["passed"] = not data["cases"][0]["passed"]
    parts[0].write_text(json.dumps(data), encoding="utf-8")
    err = refused(*map(str, parts))
    assert f"{parts[0]}: at $.cases[0].passed:" in err
    assert f"{parts[0]}: at $.passed:" in err
    assert f"{parts[0]}: the report does not add up; rerun the shard" in err


def test_a_shard_number_beyond_the_count_is_refused(project: Path) -> None:
    parts = shards(project, 2)
    data = read(parts[1])
    data["shard"]["index"] = 5
    parts[1].write_text(json.dumps(data), encoding="utf-8")
    assert f"{parts[1]}: shard 5/2 does not exist" in refused(*map(str, parts))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", ":1:1: not JSON (Expecting value); give a JSON report"),
        (b"{", ":1:2: not JSON"),
        (b"\xff\xfe{}", ": not UTF-8 text (byte 0); give a JSON report"),
        (b"[]", ": at $: [] is not of type 'object'; not a valid evalrunner report"),
        (b'{"schema": "evalrunner/report/v1"}', ": at $: 'suite' is a required property"),
        (b"NaN", ": not a JSON report evalrunner wrote"),
        (b'{"a": ' + b"9" * 5000 + b"}", ": not a JSON report evalrunner wrote"),
        (b"[" * 100_000 + b"]" * 100_000, ": not a JSON report evalrunner wrote"),
        (b'{"schema": "\x1b[2J"}', ":1:13: not JSON (Invalid control character); give a"),
        (b'{"schema": "evalrunner', ":1:12: not JSON (Unterminated string); give a"),
        (b'{"schema": "\\u001b[2J"}', "at $: 'suite' is a required property"),
    ],
)
def test_what_is_not_a_report_is_refused(project: Path, content: bytes, message: str) -> None:
    bad = Path("bad.json")
    bad.write_bytes(content)
    err = refused(str(bad))
    assert err.startswith(f"{bad}")
    assert message in err
    assert "\x1b" not in err and len(err) < 1000


def test_a_schema_invalid_case_names_its_place(project: Path) -> None:
    (only,) = shards(project, 1)
    data = read(only)
    data["cases"][3]["grades"] = "none"
    only.write_text(json.dumps(data), encoding="utf-8")
    assert "at $.cases[3].grades: 'none' is not of type 'array'" in refused(str(only))


def test_paths_that_are_not_report_files_are_refused(project: Path) -> None:
    os.mkfifo(project / "pipe.json")
    (project / "dir.json").mkdir()
    err = refused("pipe.json", "dir.json", "nope.json", os.fsdecode(b"bad\xff\x1b.json"))
    assert err.splitlines()[:4] == [
        "pipe.json: is a FIFO (named pipe), not a regular file; give a report file",
        "dir.json: is a directory, not a regular file; give a report file",
        "nope.json: cannot read: No such file or directory",
        "bad\\xff\\x1b.json: cannot read: No such file or directory",
    ]


def test_merge_needs_at_least_one_report(project: Path) -> None:
    code, _, err = invoke("merge")
    assert code == 2
    assert "Missing argument" in err


def test_an_unwritable_json_target_is_exit_2(project: Path) -> None:
    parts = shards(project, 2)
    (project / "out").mkdir()
    code, _, err = invoke("merge", *map(str, parts), "--json", "out")
    assert code == 2
    assert err.startswith("out: cannot write report: is a directory, not a regular file")
    code, _, err = invoke("merge", *map(str, parts), "--json", "r\r.json")
    assert code == 2
    assert err.startswith("r\\r.json: cannot write report: the file name holds U+000D")


def test_merge_writes_junit_xml_that_validates(project: Path) -> None:
    import xmlschema

    parts = shards(project, 3)
    code, _, _ = invoke("merge", *map(str, parts), "--junit-xml", "out/j.xml", "--json", "m.json")
    assert code == 1
    schema = xmlschema.XMLSchema(Path(__file__).parent / "data" / "jenkins-junit.xsd")
    schema.validate(str(project / "out" / "j.xml"))  # its directory was made
    xml = (project / "out" / "j.xml").read_text(encoding="utf-8")
    names = [case["name"] for case in read(project / "m.json")["cases"]]
    assert [xml.index(f'name="{name}"') for name in names] == sorted(
        xml.index(f'name="{name}"') for name in names
    )  # suite order


def test_merge_refuses_two_reports_into_one_file_before_reading(project: Path) -> None:
    code, out, err = invoke("merge", "nope.json", "--json", "x.json", "--junit-xml", "x.json")
    assert (code, out) == (2, "")
    assert (
        err == "x.json: --junit-xml names the file --json writes; give each report its own file\n"
    )


def test_a_pattern_no_shard_wrote_says_so(project: Path) -> None:
    err = refused("reports/shard-*.json")
    assert err.splitlines()[0] == (
        "reports/shard-*.json: no file matches this pattern; no shard wrote its report (a "
        "shard refused at admission writes none without --continue-on-admission-errors: see "
        "the shards' logs)"
    )


def test_shards_of_two_versions_of_the_suite_are_refused_naming_the_case(
    project: Path,
) -> None:
    """Shard 1/2 of one version and shard 2/2 of another, in which a case now fails, would
    merge to a green verdict that no run gave: the fingerprints tell them apart."""
    first = Path("v1-shard-1.json")
    run_to(project / first, "--shard", "1/2")
    data = read(first)
    in_first = {case["name"] for case in data["cases"]}
    assert data["shard"]["suite_fingerprint"]["cases"]  # every selected case, of both shards
    # A case of shard 2 changes: it now fails.
    name = next(f"many-{i:02d}" for i in range(14) if f"many-{i:02d}" not in in_first)
    changed = project / "evals" / "many" / f"m{name[-2:]}.yaml"
    changed.write_text(FAILING.format(name=name), encoding="utf-8")
    second = Path("v2-shard-2.json")
    assert run_to(project / second, "--shard", "2/2")["all_passed"] is False
    err = refused(str(first), str(second))
    assert (
        f"{second}: case '{name}' (many/m{name[-2:]}.yaml) has other content than in "
        f"{first}'s suite (its fixture changed); the shards were dealt from different versions "
        "of the suite: rerun every shard on one"
    ) in err


def test_a_shard_report_without_a_fingerprint_is_refused(project: Path) -> None:
    one, two = shards(project, 2)
    data = read(two)
    del data["shard"]["suite_fingerprint"]
    two.write_text(json.dumps(data), encoding="utf-8")
    assert f"{two}: its shard carries no suite_fingerprint" in refused(str(one), str(two))


def test_an_unsharded_report_carries_no_fingerprint(project: Path) -> None:
    assert "shard" not in run_to(project / "all.json")


def test_merge_annotates_for_github_as_the_unsharded_run_does(project: Path) -> None:
    """Sharded CI jobs merge their reports, and the merged run annotates the pull request:
    the same annotations, at the same fixture lines, as the unsharded run's."""
    parts = []
    for index in (1, 2, 3):
        part = project / f"shard-{index}.json"
        run_to(part, "--shard", f"{index}/3")
        parts.append(str(part))
    code, merged, _ = invoke("merge", *parts, "--format", "github")
    whole_code, whole, _ = invoke("run", "--format", "github")
    annotations = [line for line in merged.splitlines() if line.startswith("::")]
    assert annotations, merged
    assert annotations == [line for line in whole.splitlines() if line.startswith("::")]
    assert "::error file=evals/b/x.yaml,line=" in merged
    assert code == whole_code == 1
    code, table, _ = invoke("merge", *parts)
    assert not [line for line in table.splitlines() if line.startswith("::")]
    # merge reads the reports alone: each says where its failed cases and checks were when
    # its shard ran, so with the fixtures gone the merged run annotates and recaps the same.
    shutil.rmtree(project / "evals")
    assert invoke("merge", *parts, "--format", "github")[1] == merged
    assert invoke("merge", *parts)[1] == table


def test_reports_of_an_earlier_version_without_places_still_merge(project: Path) -> None:
    """A shard report written before reports said where failed cases are (no line and col)
    merges; its annotations name the file alone, as they do for a place not known."""
    parts = shards(project, 2)
    for part in parts:
        data = read(project / part)
        for case in data["cases"]:
            for placed in (case, *case["grades"]):
                placed.pop("line", None)
                placed.pop("col", None)
        (project / part).write_text(json.dumps(data), encoding="utf-8")
    code, merged, err = invoke("merge", *map(str, parts), "--format", "github")
    assert (code, err) == (1, "")
    assert "::error file=evals/b/x.yaml,title=b-x::" in merged


CRASHING_AGENT = """
def helper():
    raise RuntimeError("the agent crashed in its helper")


class Agent:
    def respond(self, user_input):
        helper()


def make(context):
    return Agent()
"""


def test_a_merge_keeps_the_agents_tracebacks(project: Path) -> None:
    """A sharded run's JUnit and table keep the traceback the unsharded run's do: the shard's
    JSON report carries it."""
    (project / "crashing_agent.py").write_text(CRASHING_AGENT, encoding="utf-8")
    (project / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "evals"\nagent = "crashing_agent:make"\n', encoding="utf-8"
    )
    parts = []
    for index in (1, 2):
        part = project / f"shard-{index}.json"
        result = runner.invoke(app, ["run", "--shard", f"{index}/2", "--json", str(part)])
        assert result.exit_code == 1, result.output
        parts.append(str(part))
    first = read(project / parts[0])
    assert not list(report_validator().iter_errors(first))
    assert "the agent crashed in its helper" in first["cases"][0]["tracebacks"][-1]
    code, out, _ = invoke("merge", *parts, "--junit-xml", "merged.xml")
    assert code == 1  # the hint alone: no traceback without --traceback
    assert "(1 traceback(s) from the agent or its tools: --traceback)" in out
    junit = (project / "merged.xml").read_text(encoding="utf-8")
    assert 'crashing_agent.py", line 3, in helper' in junit
    assert "RuntimeError: the agent crashed in its helper" in junit
    merged = runner.invoke(app, ["merge", *parts, "--traceback"])
    out = merged.stdout
    assert merged.exit_code == 1
    assert "    | RuntimeError: the agent crashed in its helper" in out
    # as the unsharded run shows it, timings aside
    whole = runner.invoke(app, ["run", "--traceback"]).stdout
    assert timeless_table(out) == timeless_table(whole)


def test_a_position_without_its_column_is_refused(project: Path) -> None:
    # line and col come together: a report holding one alone was edited, and merge refuses
    # it as it refuses any report its schema does not hold (it read it as a traceback).
    parts = shards(project, 2)
    for part in parts:
        data = read(part)
        failed = [case for case in data["cases"] if "line" in case]
        if failed:
            del failed[0]["col"]
            part.write_text(json.dumps(data), encoding="utf-8")
            err = refused(*map(str, parts))
            assert f"{part}: at $.cases[" in err
            assert "'col' is a dependency of 'line'" in err
            return
    raise AssertionError("no shard holds a failed case")


def test_the_merged_report_keeps_framed_results(project: Path) -> None:
    parts = shards(project, 2)
    for part in parts:
        data = read(part)
        data["framed_results"] = True
        part.write_text(json.dumps(data), encoding="utf-8")
    code, _, _ = invoke("merge", *map(str, parts), "--json", "merged.json")
    assert read(Path("merged.json"))["framed_results"] is True, code
