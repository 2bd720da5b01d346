"""The JUnit XML report (``--junit-xml FILE``), in the shape of the Jenkins / Ant JUnit schema
that CI systems read (``tests/data/jenkins-junit.xsd`` holds it to that).

One ``testsuite`` for the cases: a ``testcase`` per case (``classname`` the fixture's path,
``name`` the case's name, ``time`` in seconds), with a ``failure`` listing the failed checks
or an ``error`` holding the run error. What kept cases from running is said in a testsuite
of its own, so a CI page shows it where it shows failures: a refused run gets a testcase per
refused fixture (``admission``), each with an ``error`` listing its problems with their
positions; an interrupted run gets a ``run interrupted`` testcase with an ``error``.

XML 1.0 cannot hold every character, not even escaped: control characters, lone surrogates
and U+FFFE/U+FFFF from a reply or a name are written as visible escapes (``\\x1b``,
``\\ud800``), as the table writes them.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, replace

from evalrunner.model import AdmissionError, CaseReport, RunRefused, SuiteReport
from evalrunner.report.outcome import failed_grades, interruption, late_exits, signal_name
from evalrunner.report.stats import case_runs, case_summary, suite_stats
from evalrunner.text import printable, printable_path

_MESSAGE_LIMIT = 1000
"""Characters of a ``message`` attribute: a line for a list view; the element's text holds
everything."""

_NOT_XML = re.compile("[\ufffe\uffff]")  # what printable() keeps but XML 1.0 cannot hold


def render_junit(outcome: SuiteReport | RunRefused) -> str:
    """The JUnit XML document for a run, or for a run that was refused, newline-terminated."""
    if isinstance(outcome, RunRefused):
        suites = _refused(outcome)
    else:
        suites = [_cases_suite(outcome)]
        if outcome.admission_errors:  # --continue-on-admission-errors: the files left out
            left_out = RunRefused(admission_errors=outcome.admission_errors)
            suites.extend(_refused(left_out, consequence="the file was skipped"))
        if outcome.budget_spent is not None:
            error = _Problem("budget spent", outcome.budget_spent, outcome.budget_spent)
            suites.append(_Suite("evalrunner", [_Test("evalrunner", "token budget", error)]))
        if outcome.live_stopped is not None:
            error = _Problem("run stopped", outcome.live_stopped, outcome.live_stopped)
            suites.append(_Suite("evalrunner", [_Test("evalrunner", "live model", error)]))
        late = late_exits(outcome)
        if late is not None:
            error = _Problem("process ended outside a case", late, late)
            suites.append(_Suite("evalrunner", [_Test("evalrunner", "late exit", error)]))
        stopped = interruption(outcome)
        if stopped is not None and outcome.interrupted is not None:
            error = _Problem(signal_name(outcome.interrupted), stopped, stopped)
            suites.append(_Suite("evalrunner", [_Test("evalrunner", "run interrupted", error)]))
    root = ET.Element("testsuites", {"name": "evalrunner"})
    _counts(root, suites)
    root.set("time", _seconds(sum(s.ms for s in suites)))
    for suite in suites:
        root.append(suite.element())
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


@dataclass(frozen=True, slots=True)
class _Problem:
    """A ``failure`` or ``error``: its type, one-line message and full text."""

    type: str
    message: str
    text: str


@dataclass(frozen=True, slots=True)
class _Test:
    classname: str
    name: str
    error: _Problem | None = None
    failure: _Problem | None = None
    ms: int = 0
    skipped: str | None = None
    output: str | None = None
    """The testcase's ``system-out`` (how a repeated case's runs went)."""

    def element(self) -> ET.Element:
        case = ET.Element(
            "testcase",
            {
                "classname": _attr(self.classname),
                "name": _attr(self.name),
                "time": _seconds(self.ms),
            },
        )
        # The schema's order within a testcase: skipped, error, failure, system-out, system-err.
        if self.skipped is not None:
            ET.SubElement(case, "skipped", {"message": _message(self.skipped)})
        for tag, problem in (("error", self.error), ("failure", self.failure)):
            if problem is not None:
                child = ET.SubElement(
                    case, tag, {"message": _message(problem.message), "type": _attr(problem.type)}
                )
                child.text = _text(problem.text)
        if self.output is not None:
            ET.SubElement(case, "system-out").text = _text(self.output)
        return case


@dataclass(frozen=True, slots=True)
class _Suite:
    name: str
    tests: Sequence[_Test]
    properties: Sequence[tuple[str, str]] = ()
    ms: int = 0

    def element(self) -> ET.Element:
        suite = ET.Element("testsuite", {"name": _attr(self.name)})
        _counts(suite, [self])
        suite.set("skipped", str(sum(1 for t in self.tests if t.skipped is not None)))
        suite.set("time", _seconds(self.ms))
        if self.properties:
            properties = ET.SubElement(suite, "properties")
            for name, value in self.properties:
                ET.SubElement(properties, "property", {"name": name, "value": _attr(value)})
        suite.extend(test.element() for test in self.tests)
        return suite


def _counts(element: ET.Element, suites: Sequence[_Suite]) -> None:
    tests = [test for suite in suites for test in suite.tests]
    element.set("tests", str(len(tests)))
    element.set("failures", str(sum(1 for t in tests if t.failure is not None)))
    element.set("errors", str(sum(1 for t in tests if t.error is not None)))


def _cases_suite(report: SuiteReport) -> _Suite:
    properties = [("mode", report.mode), ("trimmed_history", str(report.trimmed_history).lower())]
    if report.agent is not None:
        properties.insert(0, ("agent", report.agent))
    tests = [_case_test(case) for case in report.cases]
    if report.repeat > 1:
        properties.append(("repeat", str(report.repeat)))
        stats = suite_stats(report)
        properties.append(("runs_passed", f"{stats.runs.passes}/{stats.runs.runs}"))
        properties.append(("flaky", str(len(stats.flaky))))
        tests = [
            _repeated(test, case, report.repeat)
            for test, case in zip(tests, report.cases, strict=True)
        ]
    return _Suite(
        report.suite,
        tests,
        properties,
        report.duration_ms,
    )


def _case_test(case: CaseReport) -> _Test:
    classname = printable_path(case.path or case.source)
    # What the agent or its tools raised goes in the text: a CI page is where it is read, and
    # no --traceback flag can be given after the fact.
    raised = "".join(
        f"\n\nraised in the agent or its tools:\n{trace.rstrip()}" for trace in case.tracebacks
    )
    if case.skipped is not None:
        return _Test(classname, case.name, skipped=case.skipped)
    if case.error is not None:
        problem = _Problem("run error", case.error.split("\n", 1)[0], case.error + raised)
        return _Test(classname, case.name, error=problem, ms=case.duration_ms)
    failed = failed_grades(case)
    if not failed:
        return _Test(classname, case.name, ms=case.duration_ms)
    checks = ", ".join(g.check for g in failed)
    message = f"{len(failed)} of {len(case.grades)} checks failed: {checks}"
    text = "\n".join(f"{g.check}: {g.detail}" if g.detail else g.check for g in failed)
    return _Test(
        classname,
        case.name,
        failure=_Problem("checks", message, text + raised),
        ms=case.duration_ms,
    )


def _repeated(test: _Test, case: CaseReport, repeat: int) -> _Test:
    """A repeated case's testcase: its runs' numbers lead the message and fill system-out;
    the failure or error shown is its first failed run's."""
    numbers = case_summary(case, repeat)
    lead = numbers if case.passed else f"{numbers}; run {case_runs(case).shown}"

    def led(problem: _Problem | None) -> _Problem | None:
        if problem is None:
            return None
        return replace(
            problem, message=f"{lead}: {problem.message}", text=f"{lead}\n{problem.text}"
        )

    return replace(test, error=led(test.error), failure=led(test.failure), output=numbers)


def _refused(outcome: RunRefused, consequence: str = "nothing was run") -> list[_Suite]:
    suites = []
    if outcome.reasons:
        reasons = "\n".join(outcome.reasons)
        error = _Problem("run refused", outcome.reasons[0], reasons)
        suites.append(_Suite("evalrunner", [_Test("evalrunner", "run refused", error)]))
    by_file: dict[str, list[AdmissionError]] = {}
    for problem in outcome.admission_errors:
        by_file.setdefault(problem.path, []).append(problem)
    if by_file:
        tests = []
        for path, problems in by_file.items():
            first = problems[0]
            message = f"refused, {len(problems)} problem(s); {consequence}: {_position(first)}"
            text = "\n".join(str(p) for p in problems)
            tests.append(_Test(path, "admission", error=_Problem("admission", message, text)))
        suites.append(_Suite("admission", tests))
    return suites


def _position(error: AdmissionError) -> str:
    """``3:5: message`` (the error without its path, which is the testcase's classname)."""
    where = "".join(f"{n}:" for n in (error.line, error.col) if n is not None)
    return f"{where} {error.message}" if where else error.message


def _seconds(ms: int) -> str:
    # At most three decimals: the Jenkins schema's time pattern allows no more.
    return f"{max(ms, 0) / 1000:.3f}"


def _attr(text: str) -> str:
    """One line of XML-safe text: every control character, bidi override, lone surrogate
    and XML non-character written as an escape."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", printable(text))


def _message(text: str) -> str:
    text = _attr(text)
    if len(text) <= _MESSAGE_LIMIT:
        return text
    return text[: _MESSAGE_LIMIT - 1] + "…"


def _text(text: str) -> str:
    """Element text: line breaks kept, everything else made safe as by :func:`_attr`."""
    return "\n".join(_attr(line) for line in text.split("\n"))
