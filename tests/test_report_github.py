"""``--format github`` (issue 10 §3): GitHub Actions annotations at the expectation a failed
check comes from, at admission problems, run errors and interruptions, escaped so that no
text can end a command or start another."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrunner.model import AdmissionError, CaseReport, GradeResult, RunRefused, SuiteReport
from evalrunner.report import github_annotations, render_github, render_table
from evalrunner.report.github import annotation, escape_data, escape_property
from evalrunner.session import run_suite
from evalrunner.text import printable, printable_path


def parse(line: str) -> tuple[dict[str, str], str]:
    """An ``::error`` command read back as the Actions runner reads it."""
    assert line.startswith("::error")
    assert "\n" not in line and "\r" not in line
    head, message = line[2:].split("::", 1)
    _, _, props = head.partition(" ")
    properties = dict(p.split("=", 1) for p in props.split(",")) if props else {}
    return {k: unescape(v) for k, v in properties.items()}, unescape(message)


def unescape(text: str) -> str:
    for escaped, raw in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(escaped, raw)
    return text


FAILING = CaseReport(
    "reply-shape",
    "reply.yaml",
    None,
    (
        GradeResult('response_contains("Tuesday")', False, 'not found in response: "Monday"'),
        GradeResult("max_tool_calls(0)", True),
        GradeResult("exact_tool_calls(2)", False, ""),
    ),
    path="evals/reply.yaml",
    positions={"name": (1, 1), "expects.response_contains": (12, 3)},
)
ERRORED = CaseReport(
    "short",
    "short.toml",
    None,
    (),
    error="timed out",
    path="evals/short.toml",
    positions={"name": (3, 1)},
)
PASSING = CaseReport("ok", "ok.json", None, (GradeResult("x", True),), path="evals/ok.json")


def report(*cases: CaseReport, interrupted: int | None = None) -> SuiteReport:
    return SuiteReport("evals", "replay", cases, duration_ms=5, interrupted=interrupted)


def test_escaping_follows_githubs_rules() -> None:
    assert escape_data("100%\r\nok: a,b") == "100%25%0D%0Aok: a,b"
    assert escape_property("100%\r\nok: a,b") == "100%25%0D%0Aok%3A a%2Cb"
    assert escape_data("%0A") == "%250A"  # an escape in the text is not taken as one


def test_failed_checks_point_at_their_expectation() -> None:
    lines = github_annotations(report(PASSING, FAILING))
    assert lines == [
        "::error file=evals/reply.yaml,line=12,col=3,title=reply-shape::"
        'response_contains("Tuesday"): not found in response: "Monday"',
        # no position for this kind: the case's name
        "::error file=evals/reply.yaml,line=1,col=1,title=reply-shape::exact_tool_calls(2) failed",
    ]


def test_run_errors_point_at_the_case_name() -> None:
    assert github_annotations(report(ERRORED)) == [
        "::error file=evals/short.toml,line=3,col=1,title=short::run error: timed out"
    ]


def test_without_positions_or_path_the_annotation_names_less() -> None:
    no_positions = CaseReport("c", "c.yaml", None, (GradeResult("x", False),), path="d/c.yaml")
    no_path = CaseReport("c", "c.yaml", None, (GradeResult("x", False),))
    assert github_annotations(report(no_positions, no_path)) == [
        "::error file=d/c.yaml,title=c::x failed",
        "::error title=c::x failed",
    ]


def test_an_interrupted_run_is_annotated() -> None:
    assert github_annotations(report(PASSING, interrupted=15)) == [
        "::error title=evalrunner%3A run interrupted::run interrupted by SIGTERM after 1 "
        "finished case(s); the rest did not run"
    ]


def test_a_refused_run_annotates_each_problem_where_it_is() -> None:
    refused = RunRefused(
        ("live mode is not implemented yet (replay only)",),
        (
            AdmissionError("evals/a.yaml", "turns needs at least 1 item(s), got none", 2, 8),
            AdmissionError("evals/b.json", "invalid JSON: Expecting value", 1, None),
            AdmissionError("evals/c.toml", "cannot read: Permission denied"),
        ),
    )
    assert github_annotations(refused) == [
        "::error title=evalrunner%3A run refused::live mode is not implemented yet (replay only)",
        "::error file=evals/a.yaml,line=2,col=8,title=evalrunner%3A fixture refused::"
        "turns needs at least 1 item(s), got none",
        "::error file=evals/b.json,line=1,title=evalrunner%3A fixture refused::"
        "invalid JSON: Expecting value",
        "::error file=evals/c.toml,title=evalrunner%3A fixture refused::"
        "cannot read: Permission denied",
    ]
    assert render_github(refused) == "".join(line + "\n" for line in github_annotations(refused))


def test_the_github_format_is_the_annotations_then_the_table() -> None:
    run = report(PASSING, FAILING)
    text = render_github(run)
    annotations = github_annotations(run)
    assert text == "".join(f"{line}\n" for line in annotations) + render_table(run)
    assert text.splitlines()[-1] == "1/2 cases passed (1 failed) in 5 ms"


def test_a_passing_run_has_no_annotations() -> None:
    assert github_annotations(report(PASSING)) == []


# --- hostile text ---------------------------------------------------------------------------

HOSTILE = "x::error file=/etc/passwd::owned\r\n::warning::%0A, a:b \x1b[2J\ud800\u202e"


def test_no_text_can_end_the_command_or_start_another() -> None:
    case = CaseReport(
        HOSTILE,
        "f.yaml",
        None,
        (GradeResult(HOSTILE, False, HOSTILE),),
        path=HOSTILE + ".yaml",
        positions={"name": (1, 1)},
    )
    errored = CaseReport(HOSTILE, "e.yaml", None, (), error=HOSTILE, path="e.yaml")
    lines = github_annotations(report(case, errored))
    assert len(lines) == 2
    for line in lines:
        line.encode("utf-8")
        assert "\x1b" not in line and "\u202e" not in line
        properties, message = parse(line)
        assert properties["title"] == printable(HOSTILE)
        # the forged "file=" and "::warning::" stay text inside the one command
        assert set(properties) <= {"file", "line", "col", "title"}
        assert "owned" in message
    properties, message = parse(lines[0])
    assert properties["file"] == printable(HOSTILE + ".yaml")
    assert message == printable(f"{HOSTILE}: {HOSTILE}")


def test_a_line_break_in_a_file_name_is_sent_as_github_escapes_it() -> None:
    # GitHub undoes %0A in a property, so the annotation lands on the real file; an escaped
    # "\\n" would name a file that does not exist.
    line = annotation("x", file="evals/two\nlines.yaml", line=3)
    assert line == "::error file=evals/two%0Alines.yaml,line=3::x"
    assert parse(line)[0]["file"] == "evals/two\nlines.yaml"
    # any other control character cannot be sent: shown escaped, as everywhere else
    assert parse(annotation("x", file="a\x1b[2J\n.yaml"))[0]["file"] == "a\\x1b[2J\\n.yaml"


def test_huge_text_is_cut_to_a_readable_annotation() -> None:
    case = CaseReport("n" * 100_000, "f", None, (GradeResult("c", False, "d" * 100_000),))
    (line,) = github_annotations(report(case))
    properties, message = parse(line)
    for shown, limit, length in ((properties["title"], 200, 100_000), (message, 4000, 100_003)):
        assert len(shown) <= limit
        kept, _, rest = shown.partition("… (")
        assert rest.endswith(" more characters)")
        assert len(kept) + int(rest.split()[0]) == length  # "c: " + 100,000 characters


@settings(deadline=None)
@given(name=st.text(), detail=st.text(), path=st.text(), line=st.integers(1, 10**6))
def test_any_text_round_trips_through_one_command(
    name: str, detail: str, path: str, line: int
) -> None:
    properties, message = parse(annotation(detail, file=path, line=line, col=2, title=name))
    assert (properties["line"], properties["col"]) == (str(line), "2")
    bare = path.replace("\r", "").replace("\n", "")
    assert properties["file"] == (path if printable_path(bare) == bare else printable_path(path))
    title, text = printable(name), printable(detail)
    assert properties["title"] == title if len(title) <= 200 else len(properties["title"]) <= 200
    assert message == text if len(text) <= 4000 else len(message) <= 4000


# --- end to end: positions from real fixtures ---------------------------------------------

YAML = """\
name: yaml-case
turns:
  - user_input: hi
    steps:
      - response: {type: text, content: hello}
expects:
  max_tool_calls: 0
  response_contains:
    - goodbye
"""
JSON = """\
{
  "name": "json-case",
  "turns": [{"user_input": "hi", "steps": [{"response": {"type": "text", "content": "hello"}}]}],
  "expects": {
    "max_tool_calls": 0,
      "response_contains": ["goodbye"]
  }
}
"""
TOML = """\
name = "toml-case"

[[turns]]
user_input = "hi"
[[turns.steps]]
response = { type = "text", content = "hello" }

[expects]
response_contains = ["goodbye"]
"""
FLOW_YAML = """\
name: flow-case
turns: [{user_input: hi, steps: [{response: {type: text, content: hello}}]}]
expects: {max_tool_calls: 0,
  response_contains: [goodbye]}
"""


@pytest.mark.parametrize(
    ("file", "text", "where"),
    [
        ("a.yaml", YAML, (8, 3)),
        ("b.json", JSON, (6, 7)),
        ("c.toml", TOML, (9, 1)),
        ("d.yaml", FLOW_YAML, (4, 3)),
    ],
)
def test_a_failed_check_points_at_its_line_in_the_fixture(
    tmp_path: Path, file: str, text: str, where: tuple[int, int]
) -> None:
    (tmp_path / file).write_text(text, encoding="utf-8")
    outcome = run_suite(tmp_path)
    assert isinstance(outcome, SuiteReport)
    (line,) = github_annotations(outcome)
    properties, message = parse(line)
    assert properties["file"] == str(tmp_path / file)
    assert (int(properties["line"]), int(properties["col"])) == where
    assert message == 'response_contains("goodbye"): not found in response: "hello"'
