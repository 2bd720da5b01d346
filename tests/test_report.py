"""Report (SPEC §7): exit codes, the JSON report and its schema, the table (header, recap,
durations, -q and -v), atomic writes and readying report paths before a run."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from evalrunner.fixture.schemas import report_validator
from evalrunner.model import (
    AdmissionError,
    CaseReport,
    GradeResult,
    RunRefused,
    SuiteReport,
)
from evalrunner.report import (
    REPORT_SCHEMA,
    UnsafeOutput,
    Verbosity,
    agent_label,
    exit_code,
    prepare_output,
    render_json,
    render_table,
    report_data,
    write_atomic,
)
from evalrunner.report.outcome import duration
from evalrunner.session import run_suite

REGRESSION = Path(__file__).resolve().parent.parent / "evals" / "regression"

PASSING = CaseReport(
    name="echo-roundtrip",
    source="echo_roundtrip.yaml",
    case_class="positive",
    grades=(
        GradeResult('tools_used("echo")', True),
        GradeResult("exact_tool_calls(1)", True),
    ),
    input_tokens=80,
    output_tokens=21,
    llm_calls=2,
    duration_ms=3,
)
FAILING = CaseReport(
    name="reply-shape",
    source="reply_shape.json",
    case_class="negative",
    grades=(
        GradeResult('response_contains("Tuesday")', False, 'not found in response: "Monday"'),
        GradeResult("max_tool_calls(0)", True),
        GradeResult("exact_tool_calls(2)", False, '1 tool call(s): ["echo"]'),
    ),
    input_tokens=10,
    output_tokens=5,
    llm_calls=1,
    duration_ms=1500,
    path="evals/regression/reply_shape.json",
    positions={"name": (2, 3), "expects.response_contains": (9, 5)},
)
ERRORED = CaseReport(
    name="short-script",
    source="short_script.toml",
    case_class=None,
    grades=(),
    error="turn 1 requested more model responses than the fixture scripts for it",
    llm_calls=1,
    duration_ms=61_400,
)


def suite(*cases: CaseReport, agent: str | None = "reference") -> SuiteReport:
    return SuiteReport(
        suite="evals/regression", mode="replay", cases=cases, duration_ms=12, agent=agent
    )


def validate(data: Any) -> list[str]:
    return [error.message for error in report_validator().iter_errors(data)]


# --- exit codes --------------------------------------------------------------------------------


def test_exit_code_all_passed() -> None:
    assert exit_code(suite(PASSING, PASSING)) == 0


def test_exit_code_a_failed_case() -> None:
    assert exit_code(suite(PASSING, FAILING)) == 1


def test_exit_code_a_run_error() -> None:
    assert exit_code(suite(PASSING, ERRORED)) == 1


def test_exit_code_run_error_even_without_grades() -> None:
    # An errored case has no grades; "all grades passed" must not make it pass.
    assert ERRORED.passed is False
    assert exit_code(suite(ERRORED)) == 1


def test_exit_code_refused() -> None:
    assert exit_code(RunRefused(("live mode is not implemented yet (replay only)",))) == 2
    refused = RunRefused(admission_errors=(AdmissionError("a.json", "bad", 1, 2),))
    assert exit_code(refused) == 2
    assert exit_code(RunRefused()) == 2


def test_exit_code_of_the_gated_suite_is_zero() -> None:
    outcome = run_suite(REGRESSION)
    assert isinstance(outcome, SuiteReport)
    assert exit_code(outcome) == 0


def test_suite_counts() -> None:
    report = suite(PASSING, FAILING, ERRORED)
    assert (report.passed, report.failed, report.all_passed) == (1, 2, False)


# --- JSON --------------------------------------------------------------------------------------

TOP_KEYS = [
    "schema",
    "suite",
    "mode",
    "agent",
    "passed",
    "failed",
    "skipped",
    "total",
    "all_passed",
    "interrupted",
    "budget_spent",
    "trimmed_history",
    "duration_ms",
    "cases",
]
CASE_KEYS = [
    "name",
    "source",
    "path",
    "class",
    "passed",
    "error",
    "skipped",
    "grades",
    "input_tokens",
    "output_tokens",
    "llm_calls",
    "duration_ms",
]


def test_json_key_order_is_the_spec_order() -> None:
    text = render_json(suite(PASSING, FAILING, ERRORED))
    data = json.loads(text)
    assert list(data) == TOP_KEYS
    # Where a failed case and a failed check are (when known) comes after the rest.
    placed = ([], ["line", "col"])
    for case in data["cases"]:
        assert list(case)[: len(CASE_KEYS)] == CASE_KEYS
        assert list(case)[len(CASE_KEYS) :] in (placed[:1] if case["passed"] else placed)
        for grade in case["grades"]:
            assert list(grade)[:3] == ["check", "passed", "detail"]
            assert list(grade)[3:] in (placed[:1] if grade["passed"] else placed)
    # the text itself is in that order, not just the parsed dict
    positions = [text.index(f'"{key}":') for key in TOP_KEYS]
    assert positions == sorted(positions)


def test_json_values() -> None:
    data = json.loads(render_json(suite(PASSING, FAILING, ERRORED)))
    assert data["schema"] == REPORT_SCHEMA == "evalrunner/report/v1"
    assert data["suite"] == "evals/regression"
    assert data["mode"] == "replay"
    assert data["agent"] == "reference"
    assert (data["passed"], data["failed"], data["total"]) == (1, 2, 3)
    assert data["all_passed"] is False
    assert data["duration_ms"] == 12
    passing, failing, errored = data["cases"]
    assert passing == {
        "name": "echo-roundtrip",
        "source": "echo_roundtrip.yaml",
        "path": "echo_roundtrip.yaml",  # no path known: the file name
        "class": "positive",
        "passed": True,
        "error": None,
        "skipped": None,
        "grades": [
            {"check": 'tools_used("echo")', "passed": True, "detail": ""},
            {"check": "exact_tool_calls(1)", "passed": True, "detail": ""},
        ],
        "input_tokens": 80,
        "output_tokens": 21,
        "llm_calls": 2,
        "duration_ms": 3,
    }
    assert failing["passed"] is False
    assert failing["path"] == "evals/regression/reply_shape.json"
    assert failing["grades"][0]["detail"] == 'not found in response: "Monday"'
    assert errored["class"] is None
    assert errored["passed"] is False
    assert errored["grades"] == []
    assert errored["error"] == ERRORED.error


def test_json_validates_against_the_report_schema() -> None:
    for report in (suite(PASSING, FAILING, ERRORED), suite(PASSING), suite(agent=None)):
        assert validate(json.loads(render_json(report))) == []


def test_json_agent_is_null_when_no_one_said() -> None:
    assert report_data(suite(PASSING, agent=None))["agent"] is None


@pytest.mark.parametrize(
    ("agent", "command", "label"),
    [
        (None, None, "reference"),
        ("my_agents.hooks:make_agent", None, "python:my_agents.hooks:make_agent"),
        (None, "python3 agent.py --fast", "command:python3 agent.py --fast"),
    ],
)
def test_agent_label(agent: str | None, command: str | None, label: str) -> None:
    assert agent_label(agent, command) == label


def test_json_of_a_real_run_validates() -> None:
    outcome = run_suite(REGRESSION)
    assert isinstance(outcome, SuiteReport)
    data = json.loads(render_json(outcome))
    assert validate(data) == []
    assert data["all_passed"] is True
    assert data["total"] == len(outcome.cases)
    assert all(case["source"] == Path(case["source"]).name for case in data["cases"])
    # the path is where the run found the fixture
    assert all(Path(case["path"]).resolve().parent == REGRESSION for case in data["cases"])
    assert data["agent"] is None  # run_suite is not told; the command line says


def test_report_schema_rejects_what_the_report_never_has() -> None:
    data = report_data(suite(PASSING))
    assert validate(data) == []
    assert validate({**data, "extra": 1})
    assert validate({**data, "schema": "evalrunner/report/v2"})
    broken_case = {**data["cases"][0], "passed": "yes"}
    assert validate({**data, "cases": [broken_case]})
    missing = dict(data)
    del missing["total"]
    assert validate(missing)


def test_json_keeps_non_ascii_and_ends_with_newline() -> None:
    case = CaseReport(
        "東京-case", "tokyo.yaml", None, (GradeResult('response_contains("✓")', True),)
    )
    text = render_json(suite(case))
    assert "東京-case" in text and "✓" in text
    assert text.endswith("}\n")
    assert json.loads(text)["cases"][0]["name"] == "東京-case"


# --- table -------------------------------------------------------------------------------------


def test_table_lines() -> None:
    table = render_table(suite(PASSING, FAILING, ERRORED), color=False)
    assert table.splitlines() == [
        "suite evals/regression · agent reference · replay mode",
        "✓ echo-roundtrip (echo_roundtrip.yaml)  2/2 checks  3 ms",
        "✗ reply-shape (reply_shape.json)  1/3 checks  1.50 s",
        "✗ short-script (short_script.toml)  run error  1 min 1 s",
        "",
        "failures:",
        "✗ reply-shape (evals/regression/reply_shape.json:2)",
        '    ✗ response_contains("Tuesday"): not found in response: "Monday"',
        '    ✗ exact_tool_calls(2): 1 tool call(s): ["echo"]',
        "✗ short-script (short_script.toml)",
        "    run error: turn 1 requested more model responses than the fixture scripts for it",
        "1/3 cases passed (1 failed, 1 errored) in 12 ms",
    ]
    assert table.endswith("\n")


def test_table_quiet_shows_the_failures_and_the_summary_only() -> None:
    full = render_table(suite(PASSING, FAILING, ERRORED)).splitlines()
    quiet = render_table(suite(PASSING, FAILING, ERRORED), verbosity=Verbosity.QUIET)
    assert quiet.splitlines() == full[5:]
    assert render_table(suite(PASSING, PASSING), verbosity=Verbosity.QUIET) == (
        "2/2 cases passed in 12 ms\n"
    )


def test_table_verbose_shows_every_check() -> None:
    table = render_table(suite(PASSING, FAILING, ERRORED), verbosity=Verbosity.VERBOSE)
    assert table.splitlines()[:9] == [
        "suite evals/regression · agent reference · replay mode",
        "✓ echo-roundtrip (echo_roundtrip.yaml)  2/2 checks  3 ms",
        '    ✓ tools_used("echo")',
        "    ✓ exact_tool_calls(1)",
        "✗ reply-shape (reply_shape.json)  1/3 checks  1.50 s",
        '    ✗ response_contains("Tuesday"): not found in response: "Monday"',
        "    ✓ max_tool_calls(0)",
        '    ✗ exact_tool_calls(2): 1 tool call(s): ["echo"]',
        "✗ short-script (short_script.toml)  run error  1 min 1 s",
    ]
    # the recap follows, as without -v
    assert table.splitlines()[9:] == render_table(suite(PASSING, FAILING, ERRORED)).splitlines()[4:]


def test_table_header_names_what_was_run() -> None:
    report = SuiteReport(
        "my suite", "replay", (PASSING,), agent="command:./agent --x", trimmed_history=True
    )
    assert render_table(report).splitlines()[0] == (
        "suite my suite · agent command:./agent --x · replay mode · trimmed history allowed"
    )
    anonymous = render_table(suite(PASSING, agent=None)).splitlines()[0]
    assert anonymous == "suite evals/regression · replay mode"


def test_table_all_passed_has_no_failed_count_and_no_recap() -> None:
    table = render_table(suite(PASSING, PASSING), color=False)
    assert table.splitlines()[-1] == "2/2 cases passed in 12 ms"
    assert "fail" not in table
    assert "✗" not in table


def test_table_passing_case_lists_no_checks() -> None:
    lines = render_table(suite(PASSING), color=False).splitlines()
    assert len(lines) == 3


def test_table_without_colour_has_no_ansi_codes() -> None:
    table = render_table(suite(PASSING, FAILING, ERRORED), color=False)
    assert "\x1b" not in table
    assert "\x1b" not in render_table(suite(PASSING, FAILING, ERRORED))  # default is no colour


@pytest.mark.parametrize("verbosity", list(Verbosity))
def test_table_with_colour_only_adds_codes(verbosity: Verbosity) -> None:
    report = suite(PASSING, FAILING, ERRORED)
    plain = render_table(report, color=False, verbosity=verbosity)
    coloured = render_table(report, color=True, verbosity=verbosity)
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain


def test_table_of_an_interrupted_run() -> None:
    report = SuiteReport("s", "replay", (PASSING,), duration_ms=5, interrupted=2)
    assert render_table(report).splitlines()[-2:] == [
        "1/1 cases passed in 5 ms",
        "run interrupted by SIGINT after 1 finished case(s); the rest did not run",
    ]


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        (0, "0 ms"),
        (999, "999 ms"),
        (1000, "1.00 s"),
        (59_994, "59.99 s"),
        (60_000, "1 min 0 s"),
        (3_600_000, "60 min 0 s"),
    ],
)
def test_durations(ms: int, shown: str) -> None:
    assert duration(ms) == shown


def test_table_of_a_real_run() -> None:
    outcome = run_suite(REGRESSION)
    assert isinstance(outcome, SuiteReport)
    lines = render_table(outcome, color=False).splitlines()
    assert len(lines) == len(outcome.cases) + 2
    assert lines[0] == f"suite {outcome.suite} · replay mode"
    case_line = re.compile(r"✓ \S+ \(\S+\)  (\d+)/\1 checks  \d+(?: ms|\.\d\d s)")
    assert all(case_line.fullmatch(line) for line in lines[1:-1]), lines
    assert re.fullmatch(rf"{len(outcome.cases)}/{len(outcome.cases)} cases passed in .+", lines[-1])


# --- atomic writes -----------------------------------------------------------------------------


def test_write_atomic_creates_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    write_atomic(target, "first\n")
    assert target.read_text(encoding="utf-8") == "first\n"
    write_atomic(target, "second — 東京\n")
    assert target.read_text(encoding="utf-8") == "second — 東京\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_write_atomic_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_atomic(Path("out.json"), "x")
    assert (tmp_path / "out.json").read_text(encoding="utf-8") == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


@pytest.mark.parametrize("failing_call", ["replace", "fsync"])
def test_write_atomic_failure_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_call: str
) -> None:
    target = tmp_path / "report.json"
    target.write_text("old report\n", encoding="utf-8")

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing_call, boom)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(target, "new report that must not appear\n")
    monkeypatch.undo()
    assert target.read_text(encoding="utf-8") == "old report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


@pytest.mark.parametrize("failing_call", ["replace", "fsync"])
def test_write_atomic_failure_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_call: str
) -> None:
    target = tmp_path / "report.json"

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, failing_call, boom)
    with pytest.raises(OSError):
        write_atomic(target, "new\n")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_interrupted_write_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    target.write_text("old\n", encoding="utf-8")

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, "new\n")
    monkeypatch.undo()
    assert target.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_write_atomic_new_file_gets_default_permissions(tmp_path: Path) -> None:
    # Not mkstemp's private 0600: a report is an artifact other CI steps read.
    old_umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "report.json", "x")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "report.json").stat().st_mode) == 0o644


def test_write_atomic_keeps_the_replaced_file_permissions(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o640)
    write_atomic(target, "new")
    assert target.read_text(encoding="utf-8") == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


# --- outside text is made safe on the way out (issue 9, classes 3 and 6) -----------------------

FORGED = "\x1b[2K\r\x1b[32m✓\x1b[0m forged (ok.yaml)  4/4 checks\n1/1 cases passed"
HOSTILE = CaseReport(
    name="hostile\u202eeman",
    source=os.fsdecode(b"caf\xe9.yaml"),
    case_class="negative",
    grades=(
        GradeResult('response_contains("x")', False, f"not found in response: {FORGED}"),
        GradeResult('tool_results_contain("t", "\x9b2J")', False, "half an emoji: \ud83d!"),
    ),
)
HOSTILE_ERROR = CaseReport(
    name="errored",
    source="e.json",
    case_class=None,
    grades=(),
    error="agent raised: \ud800\x07\x7f\u2066",
)
_TERMINAL_ACTS_ON = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


HOSTILE_RECAP = [
    "failures:",
    "✗ hostile\\u202eeman (caf\\xe9.yaml)",
    '    ✗ response_contains("x"): not found in response: '
    "\\x1b[2K\\r\\x1b[32m✓\\x1b[0m forged (ok.yaml)  4/4 checks\\n1/1 cases passed",
    '    ✗ tool_results_contain("t", "\\x9b2J"): half an emoji: \\ud83d!',
    "✗ errored (e.json)",
    "    run error: agent raised: \\ud800\\x07\\x7f\\u2066",
    "0/2 cases passed (1 failed, 1 errored) in 0 ms",
]


@pytest.mark.parametrize("verbosity", list(Verbosity))
def test_the_table_escapes_what_a_terminal_would_act_on(verbosity: Verbosity) -> None:
    report = SuiteReport("s\x1b[2J", "replay", (HOSTILE, HOSTILE_ERROR), agent="command:a\rb")
    table = render_table(report, verbosity=verbosity)
    table.encode("utf-8")  # a lone surrogate used to crash here (or in the writer)
    assert not _TERMINAL_ACTS_ON.search(table)
    lines = table.splitlines()
    assert lines[-len(HOSTILE_RECAP) :] == HOSTILE_RECAP
    if verbosity == Verbosity.NORMAL:
        assert lines[: -len(HOSTILE_RECAP)] == [
            "suite s\\x1b[2J · agent command:a\\rb · replay mode",
            "✗ hostile\\u202eeman (caf\\xe9.yaml)  0/2 checks  0 ms",
            "✗ errored (e.json)  run error  0 ms",
            "",
        ]
    elif verbosity == Verbosity.QUIET:
        assert lines == HOSTILE_RECAP


def test_the_json_report_keeps_text_exact_but_encodable_and_terminal_safe() -> None:
    rendered = render_json(suite(HOSTILE, HOSTILE_ERROR))
    rendered.encode("utf-8")
    assert not _TERMINAL_ACTS_ON.search(rendered.replace("\n", ""))
    data = json.loads(rendered)
    assert validate(data) == []
    hostile, errored = data["cases"]
    assert hostile["name"] == "hostile\u202eeman"  # escaped in the text, exact once decoded
    assert hostile["source"] == "caf\\xe9.yaml"  # bytes that are not UTF-8, shown as bytes
    assert hostile["grades"][0]["detail"] == f"not found in response: {FORGED}"
    assert hostile["grades"][1]["check"] == 'tool_results_contain("t", "\x9b2J")'
    assert hostile["grades"][1]["detail"] == "half an emoji: \\ud83d!"  # UTF-8 cannot hold it
    assert errored["error"] == "agent raised: \\ud800\x07\x7f\u2066"


# --- what --output may name (issue 9, class 5) -------------------------------------------------


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_write_atomic_writes_to_a_character_device_in_place(tmp_path: Path) -> None:
    # Our own /dev/null: as root, the old rename replaced the device with a regular file.
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root")
    write_atomic(device, "report\n")
    assert stat.S_ISCHR(device.stat().st_mode)
    assert device.stat().st_rdev == os.makedev(1, 3)
    assert _leftovers(tmp_path) == []


def test_write_atomic_refuses_a_fifo_no_process_reads(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeOutput) as caught:
        write_atomic(fifo, "report\n")  # would block forever on a plain open
    assert caught.value.strerror == "is a FIFO that no process is reading; start the reader first"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert _leftovers(tmp_path) == []


def test_write_atomic_writes_into_a_fifo_that_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_atomic(fifo, "report ✓\n")
        assert os.read(reader, 1024) == "report ✓\n".encode()
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_write_atomic_follows_a_symlink_and_replaces_its_target(tmp_path: Path) -> None:
    real = tmp_path / "reports" / "latest.json"
    real.parent.mkdir()
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "report.json"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and link.resolve() == real
    assert real.read_text(encoding="utf-8") == "new"
    assert _leftovers(real.parent) == [] and _leftovers(tmp_path) == []


def test_write_atomic_through_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "report.json"
    link.symlink_to("made.json")
    write_atomic(link, "new")
    assert link.is_symlink()
    assert (tmp_path / "made.json").read_text(encoding="utf-8") == "new"


def test_write_atomic_refuses_a_directory_and_a_socket(tmp_path: Path) -> None:
    directory = tmp_path / "out"
    directory.mkdir()
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "out.sock"))
        messages = []
        for target in (directory, tmp_path / "out.sock"):
            with pytest.raises(UnsafeOutput) as caught:
                write_atomic(target, "report")
            messages.append(caught.value.strerror)
    finally:
        server.close()
    assert messages == [
        "is a directory, not a regular file; give the path of a regular file (or of a FIFO or "
        "a terminal)",
        "is a socket, not a regular file; give the path of a regular file (or of a FIFO or "
        "a terminal)",
    ]
    assert list(directory.iterdir()) == []


@pytest.mark.parametrize("name", ["report.json\r", "rep\x1bort.json", "report\u202e.json"])
def test_write_atomic_refuses_a_file_name_with_control_characters(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(UnsafeOutput) as caught:
        write_atomic(tmp_path / name, "report")
    assert "a control character; give a name without it" in str(caught.value.strerror)
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_accepts_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    target = tmp_path / os.fsdecode(b"r\xe9port.json")
    write_atomic(target, "report")
    assert os.listdir(os.fsencode(tmp_path)) == [b"r\xe9port.json"]


# --- readying a report's path before the run ---------------------------------------------------


def test_prepare_output_creates_missing_directories_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "report.xml"
    prepare_output(target)
    assert target.parent.is_dir()
    assert list(target.parent.iterdir()) == []


def test_prepare_output_leaves_an_existing_report_alone(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("previous", encoding="utf-8")
    prepare_output(target)
    assert target.read_text(encoding="utf-8") == "previous"


def test_prepare_output_follows_a_symlink_to_where_the_report_will_go(tmp_path: Path) -> None:
    link = tmp_path / "latest.json"
    link.symlink_to(tmp_path / "runs" / "1" / "report.json")
    prepare_output(link)
    assert (tmp_path / "runs" / "1").is_dir()


def test_prepare_output_accepts_a_fifo_whose_reader_may_start_later(tmp_path: Path) -> None:
    fifo = tmp_path / "r.fifo"
    os.mkfifo(fifo)
    prepare_output(fifo)


@pytest.mark.parametrize("parent", ["file", "file/sub"])
def test_prepare_output_refuses_a_parent_that_is_a_file(tmp_path: Path, parent: str) -> None:
    (tmp_path / "file").write_text("", encoding="utf-8")
    with pytest.raises(UnsafeOutput) as caught:
        prepare_output(tmp_path / parent / "report.json")
    assert caught.value.strerror == (
        f"{tmp_path / 'file'} is not a directory, so no directory can be made there; give a "
        "path whose parents are directories or do not exist yet"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_prepare_output_refuses_what_write_atomic_refuses(tmp_path: Path) -> None:
    with pytest.raises(UnsafeOutput, match="is a directory, not a regular file"):
        prepare_output(tmp_path)
    with pytest.raises(UnsafeOutput, match="a control character"):
        prepare_output(tmp_path / "new" / "r.json\r")
    assert list(tmp_path.iterdir()) == []  # refused before making "new"


def test_prepare_output_refuses_a_directory_it_cannot_write(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root may write anywhere")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(UnsafeOutput, match="not writable"):
        prepare_output(locked / "r.json")


# --- something ended a process of the run outside its cases ------------------------------------


def test_late_exits_fail_the_run_and_every_format_says_so() -> None:
    """A run whose cases all passed, while a thread one of them left called os._exit(0)
    after it: no case carries it, so the run is not a pass (exit 1), and every format shows
    it where it shows the run's other run-level problems."""
    from evalrunner.report import github_annotations, render_junit
    from evalrunner.session import run_exit_code

    report = SuiteReport(
        suite="evals/regression",
        mode="replay",
        cases=(PASSING,),
        late_exits=("os._exit(0)",),
    )
    said = (
        "an agent or tool ended, or tried to end, a process of the run outside any case "
        "(os._exit(0)), from a thread that outlived its case or between cases; the run is "
        "not a pass"
    )
    assert not report.all_passed and exit_code(report) == run_exit_code(report) == 1
    table = render_table(report, color=False)
    assert f"error: {said}" in table
    # The summary line, the one a reader looks at last, does not read as a green run.
    assert "1/1 cases passed (the run failed: a process ended outside its cases)" in table
    title = "evalrunner%3A process ended outside a case"  # escaped as a property's value
    assert f"::error title={title}::{said}" in github_annotations(report)
    junit = render_junit(report)
    assert 'name="late exit"' in junit and said in junit
    data = report_data(report)
    assert data["late_exits"] == ["os._exit(0)"] and data["all_passed"] is False
    assert not validate(data)
    assert "late_exits" not in report_data(suite(PASSING))  # the shape of a run without any
