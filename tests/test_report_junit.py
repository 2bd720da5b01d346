"""The JUnit XML report (issue 10 §3): one testcase per case, failures and run errors, refused
and interrupted runs, and always a document the Jenkins JUnit schema accepts, whatever text
the cases carry."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.junit_xsd import junit_schema

from evalrunner.model import AdmissionError, CaseReport, GradeResult, RunRefused, SuiteReport
from evalrunner.report import render_junit
from evalrunner.session import run_suite

ROOT = Path(__file__).resolve().parent.parent

PASSING = CaseReport(
    "echo-roundtrip",
    "echo.yaml",
    "positive",
    (GradeResult('tools_used("echo")', True),),
    duration_ms=3,
    path="evals/echo.yaml",
)
FAILING = CaseReport(
    "reply-shape",
    "reply.json",
    None,
    (
        GradeResult('response_contains("Tuesday")', False, 'not found in response: "Monday"'),
        GradeResult("max_tool_calls(0)", True),
        GradeResult("exact_tool_calls(2)", False, '1 tool call(s): ["echo"]'),
    ),
    duration_ms=1500,
    path="evals/reply.json",
)
ERRORED = CaseReport(
    "short-script",
    "short.toml",
    None,
    (),
    error="turn 1 requested more model responses\nthan the fixture scripts",
    duration_ms=61_234,
    path="evals/short.toml",
)


def report(*cases: CaseReport, interrupted: int | None = None) -> SuiteReport:
    return SuiteReport(
        "evals", "replay", cases, duration_ms=62_737, interrupted=interrupted, agent="reference"
    )


def parsed(text: str) -> ET.Element:
    """The document, after checking it is well-formed XML 1.0 in UTF-8 and schema-valid."""
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(text.encode("utf-8"))  # expat refuses characters XML cannot hold
    junit_schema().validate(text)
    return root


def test_one_testcase_per_case_with_failures_and_errors() -> None:
    root = parsed(render_junit(report(PASSING, FAILING, ERRORED)))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    (suite,) = root
    assert suite.get("name") == "evals"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    assert suite.get("time") == "62.737"
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties == {"agent": "reference", "mode": "replay", "trimmed_history": "false"}
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name"), c.get("time")) for c in cases] == [
        ("evals/echo.yaml", "echo-roundtrip", "0.003"),
        ("evals/reply.json", "reply-shape", "1.500"),
        ("evals/short.toml", "short-script", "61.234"),
    ]
    assert list(cases[0]) == []
    (failure,) = cases[1]
    assert failure.tag == "failure"
    assert failure.get("type") == "checks"
    assert failure.get("message") == (
        '2 of 3 checks failed: response_contains("Tuesday"), exact_tool_calls(2)'
    )
    assert failure.text == (
        'response_contains("Tuesday"): not found in response: "Monday"\n'
        'exact_tool_calls(2): 1 tool call(s): ["echo"]'
    )
    (error,) = cases[2]
    assert error.tag == "error"
    assert error.get("type") == "run error"
    assert error.get("message") == "turn 1 requested more model responses"
    assert error.text == ERRORED.error


def test_classname_falls_back_to_the_file_name() -> None:
    bare = CaseReport("x", "x.yaml", None, (GradeResult("c", True),))
    (case,) = parsed(render_junit(report(bare))).iter("testcase")
    assert case.get("classname") == "x.yaml"


def test_an_empty_run_is_a_valid_document() -> None:
    root = parsed(render_junit(SuiteReport("evals", "replay", ())))
    assert root.get("tests") == "0"
    # no agent said: no agent property
    assert [p.get("name") for p in root.iter("property")] == ["mode", "trimmed_history"]


def test_an_interrupted_run_says_so_in_a_testcase_of_its_own() -> None:
    root = parsed(render_junit(report(PASSING, interrupted=2)))
    cases_suite, run_suite_element = root
    assert cases_suite.get("tests") == "1"
    assert run_suite_element.get("name") == "evalrunner"
    (case,) = run_suite_element
    assert (case.get("classname"), case.get("name")) == ("evalrunner", "run interrupted")
    (error,) = case
    assert error.get("type") == "SIGINT"
    assert error.get("message") == (
        "run interrupted by SIGINT after 1 finished case(s); the rest did not run"
    )
    assert (root.get("tests"), root.get("errors")) == ("2", "1")


def test_a_refused_run_has_a_testcase_per_refused_fixture() -> None:
    refused = RunRefused(
        admission_errors=(
            AdmissionError("evals/a.yaml", "turns needs at least 1 item(s), got none", 2, 8),
            AdmissionError("evals/a.yaml", "expects declares no checks", 3, 1),
            AdmissionError("evals/b.json", "invalid JSON", None, None),
        )
    )
    root = parsed(render_junit(refused))
    (suite,) = root
    assert suite.get("name") == "admission"
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("2", "2", "0")
    a, b = suite.findall("testcase")
    assert (a.get("classname"), a.get("name")) == ("evals/a.yaml", "admission")
    (error,) = a
    assert error.get("type") == "admission"
    assert error.get("message") == (
        "refused, 2 problem(s); nothing was run: 2:8: turns needs at least 1 item(s), got none"
    )
    assert error.text == (
        "evals/a.yaml:2:8: turns needs at least 1 item(s), got none\n"
        "evals/a.yaml:3:1: expects declares no checks"
    )
    (b_error,) = b
    assert b_error.get("message") == "refused, 1 problem(s); nothing was run: invalid JSON"


def test_a_run_refused_for_other_reasons() -> None:
    root = parsed(render_junit(RunRefused(("evals: suite directory not found",))))
    (suite,) = root
    (case,) = suite
    assert (case.get("classname"), case.get("name")) == ("evalrunner", "run refused")
    assert case[0].get("message") == "evals: suite directory not found"


def test_the_schema_test_can_fail() -> None:
    # The validator used above does refuse what Jenkins would not read.
    good = render_junit(report(FAILING))
    assert junit_schema().is_valid(good)
    assert not junit_schema().is_valid(good.replace('time="1.500"', 'time="1.5000"'))
    assert not junit_schema().is_valid(good.replace(' tests="1" failures', " failures", 2))
    assert not junit_schema().is_valid(
        good.replace("<testcase ", "<case ").replace("</testcase>", "</case>")
    )


# --- hostile text ---------------------------------------------------------------------------

HOSTILE = "a\x00b\x1b[2J\x07\r\n\t\x7f\x9b\u202e\ud800\udfff\ufffe\uffff\U0001f600]]>&<\"'"


def test_characters_xml_cannot_hold_are_written_as_escapes() -> None:
    case = CaseReport(
        HOSTILE,
        "f.yaml",
        None,
        (GradeResult(HOSTILE, False, HOSTILE),),
        path=HOSTILE + ".yaml",
    )
    errored = CaseReport("e", "e.yaml", None, (), error=HOSTILE)
    text = render_junit(SuiteReport(HOSTILE, HOSTILE, (case, errored), agent=HOSTILE))
    text.encode("utf-8")  # no lone surrogate left
    root = parsed(text)
    first, second = root.iter("testcase")
    escaped = "a\\x00b\\x1b[2J\\x07\\r\\n\\t\\x7f\\x9b\\u202e\\ud800\\udfff\\ufffe\\uffff😀]]>&<\"'"
    assert first.get("name") == escaped
    assert first.get("classname") == escaped + ".yaml"
    # element text keeps its line breaks; everything else is escaped as in attributes
    assert second[0].text == escaped.replace("\\n", "\n")


def test_a_huge_name_and_detail_stay_valid_and_the_message_stays_short() -> None:
    name = "n" * 200_000
    case = CaseReport(name, "f.yaml", None, (GradeResult("c" * 5000, False, "d" * 300_000),))
    root = parsed(render_junit(report(case)))
    (testcase,) = root.iter("testcase")
    assert testcase.get("name") == name
    message = testcase[0].get("message")
    assert message is not None and len(message) == 1000 and message.endswith("…")
    assert testcase[0].text is not None and len(testcase[0].text) > 300_000


@settings(deadline=None)
@given(
    name=st.text(min_size=1),
    detail=st.text(),
    error=st.text(),
    path=st.text(),
    ms=st.integers(min_value=0, max_value=10**12),
)
def test_any_text_gives_a_valid_document(
    name: str, detail: str, error: str, path: str, ms: int
) -> None:
    cases = (
        CaseReport(name, path, None, (GradeResult(name, False, detail),), duration_ms=ms),
        CaseReport(name, path, None, (), error=error, duration_ms=ms, path=path),
    )
    parsed(render_junit(SuiteReport(path, "replay", cases, duration_ms=ms, agent=name)))
    refused = RunRefused((error,), (AdmissionError(path, detail, 1, 1),))
    parsed(render_junit(refused))


# --- a real run -------------------------------------------------------------------------------


def test_the_junit_report_of_a_real_run_is_valid() -> None:
    outcome = run_suite(ROOT / "evals" / "regression")
    assert isinstance(outcome, SuiteReport)
    root = parsed(render_junit(outcome))
    cases = list(root.iter("testcase"))
    assert len(cases) == len(outcome.cases)
    assert [c.get("name") for c in cases] == [c.name for c in outcome.cases]
    assert all(Path(str(c.get("classname"))).exists() for c in cases)


@pytest.mark.parametrize("ms", [0, 1, 999, 1000, 123_456_789])
def test_times_are_seconds_with_three_decimals(ms: int) -> None:
    case = CaseReport("c", "c.yaml", None, (GradeResult("x", True),), duration_ms=ms)
    (testcase,) = parsed(render_junit(report(case))).iter("testcase")
    assert testcase.get("time") == f"{ms // 1000}.{ms % 1000:03d}"


def test_what_the_agent_raised_is_in_the_text_of_its_testcase() -> None:
    from dataclasses import replace

    trace = "Traceback (most recent call last):\n  File \"agent.py\", line 3\nKeyError: 'x'\n"
    errored = replace(ERRORED, tracebacks=(trace,))
    failing = replace(FAILING, tracebacks=(trace, trace))
    root = parsed(render_junit(report(failing, errored)))
    failure, error = (case[0] for case in root.iter("testcase"))
    assert error.text == f"{ERRORED.error}\n\nraised in the agent or its tools:\n{trace.rstrip()}"
    assert error.get("message") == "turn 1 requested more model responses"
    assert failure.text is not None and failure.text.count("KeyError: 'x'") == 2
    assert failure.get("message", "").startswith("2 of 3 checks failed")
