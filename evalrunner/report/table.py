"""The table: what a person reads after ``evalrunner run`` (SPEC §7).

A header naming the suite and the agent under test, one line per case with its duration, a
recap of every failed or errored case with its failed checks, and the summary line with the
total duration. ``quiet`` keeps the recap and the summary; ``verbose`` adds every check under
its case.

Outside text (case names, file names, replies, run errors) is escaped by
:func:`evalrunner.text.printable`, so no reply can draw over the report's lines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import IntEnum

from evalrunner.model import CaseReport, SuiteReport
from evalrunner.report.outcome import (
    duration,
    failed_grades,
    failures,
    interruption,
    late_exits,
)
from evalrunner.text import printable, printable_path

# evalrunner.report.stats is imported where a repeated run (--repeat K) needs it: building its
# dataclasses would cost every start time that a plain run never uses.

_GREEN = "\x1b[32m"
_RED = "\x1b[31m"
_RESET = "\x1b[0m"


class Verbosity(IntEnum):
    """How much of a run the table shows."""

    QUIET = -1
    """The recap of failures and the summary line."""
    NORMAL = 0
    """Also the header and one line per case."""
    VERBOSE = 1
    """Also every check of every case, passed or not."""


def render_table(
    report: SuiteReport,
    *,
    color: bool = False,
    verbosity: Verbosity = Verbosity.NORMAL,
    tracebacks: bool = False,
) -> str:
    """The table as text, newline-terminated; ``color`` adds ANSI colours and nothing else.

    ``tracebacks`` shows, under each failed case of the recap, the full traceback of what its
    agent or tools raised (otherwise one line says ``--traceback`` would).
    """

    def paint(text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if color else text

    def mark(passed: bool) -> str:
        return paint("✓", _GREEN) if passed else paint("✗", _RED)

    def case_mark(case: CaseReport) -> str:
        # Not run is neither a pass nor a failure: its own mark, so no one reads it as green.
        return "-" if case.skipped is not None else mark(case.passed)

    lines: list[str] = []
    if verbosity > Verbosity.QUIET:
        lines.append(header(report))
        for case in report.cases:
            lines.append(f"{case_mark(case)} {_case_line(case, report.repeat)}")
            if verbosity >= Verbosity.VERBOSE:
                lines.extend(
                    f"    {mark(g.passed)} {_check_line(g.check, g.detail, g.passed)}"
                    for g in case.grades
                )
    failed = failures(report)
    notes = _repeated_details(failed)
    if failed:
        if lines:
            lines.append("")
        lines.append(paint("failures:", _RED))
        for case in failed:
            lines.append(f"{mark(False)} {printable(case.name)} ({_where(case)})")
            if report.repeat > 1:
                lines.append(f"    {_failed_runs_line(case)}")
            if case.error is not None:
                # An error may carry lines of its own (a command's stderr tail): each is
                # shown, indented, and escaped on its own, so none can pass for a report line.
                first, *more = case.error.split("\n")
                lines.append(f"    run error: {printable(first)}")
                lines.extend(f"      {printable(line)}" for line in more)
            for g in failed_grades(case):
                if g.detail in notes:
                    shown = f"{printable(g.check)}: see note {notes[g.detail][0]}"
                else:
                    shown = _check_line(g.check, g.detail, False)
                lines.append(f"    {mark(False)} {shown}")
            if case.tracebacks and tracebacks:
                for trace in case.tracebacks:
                    lines.extend(f"    | {printable(row)}" for row in trace.rstrip().splitlines())
            elif case.tracebacks:
                count = len(case.tracebacks)
                lines.append(f"    ({count} traceback(s) from the agent or its tools: --traceback)")
    for detail, (number, count) in notes.items():
        lines.append(f"note {number} ({count} checks): {printable(detail)}")
    if report.repeat > 1:
        lines.append(repeat_summary(report, paint_flaky=lambda text: paint(text, _RED)))
    lines.append(summary(report, paint_failed=lambda text: paint(text, _RED)))
    if report.budget_spent is not None:
        lines.append(paint(f"run stopped: {report.budget_spent}", _RED))
    if report.live_stopped is not None:
        lines.append(paint(f"run stopped: {report.live_stopped}", _RED))
    late = late_exits(report)
    if late is not None:
        lines.append(paint(f"error: {late}", _RED))
    stopped = interruption(report)
    if stopped is not None:
        lines.append(paint(stopped, _RED))
    return "\n".join(lines) + "\n"


def header(report: SuiteReport) -> str:
    """``suite evals/regression · agent reference · replay mode``."""
    parts = [f"suite {printable_path(report.suite)}"]
    if report.agent is not None:
        parts.append(f"agent {printable(report.agent)}")
    parts.append(f"{printable(report.mode)} mode")
    if report.trimmed_history:
        parts.append("trimmed history allowed")
    if report.repeat > 1:
        parts.append(f"each case run {report.repeat} times")
    return " · ".join(parts)


def repeat_summary(report: SuiteReport, *, paint_flaky: Callable[[str], str] = str) -> str:
    """``repeats: 8/10 runs passed · pass^5 1/2 cases · pass@5 2/2 cases · pass rate 0.800,
    Wilson 95% [0.490, 0.943] · 1 flaky``."""
    from evalrunner.report.stats import shown_interval, suite_stats

    stats = suite_stats(report)
    k = report.repeat
    text = (
        f"repeats: {stats.runs.passes}/{stats.runs.runs} runs passed · pass^{k} "
        f"{stats.pass_all}/{stats.cases} cases · pass@{k} {stats.pass_any}/{stats.cases} "
        "cases · "
    )
    if stats.runs.ran:
        text += (
            f"pass rate {stats.runs.pass_rate:.3f}, Wilson 95% "
            f"{shown_interval(stats.runs.interval)}"
        )
    else:
        text += "no pass rate (no run ran)"
    if stats.flaky:
        text += " · " + paint_flaky(f"{len(stats.flaky)} flaky")
    if stats.runs.not_run:
        # Never-run runs are neither passes nor failures: counted apart, out of the rate.
        count = stats.runs.not_run
        text += f" · {count} run{'s' if count != 1 else ''} not run (left out)"
    return text


def summary(report: SuiteReport, *, paint_failed: Callable[[str], str] = str) -> str:
    """``1/4 cases passed (2 failed, 1 errored, 1 file refused) in 1.20 s``.

    A case that errored did not fail a check: it is counted apart, so the line tells a broken
    agent from a wrong answer. Files refused while the rest ran
    (``--continue-on-admission-errors``) are counted too, and a process of the run that ended
    outside its cases (:attr:`SuiteReport.late_exits`) is said: the run is not green."""
    text = f"{report.passed}/{len(report.cases)} cases passed"
    errored = sum(1 for case in report.cases if case.error is not None)
    refused = len({error.path for error in report.admission_errors})
    counts = [
        f"{report.failed - errored} failed" if report.failed - errored else "",
        f"{errored} errored" if errored else "",
        f"{report.skipped} not run" if report.skipped else "",
        f"{refused} file{'s' if refused > 1 else ''} refused" if refused else "",
        # Every case may have passed while the run did not: said here, not only on stderr.
        "the run failed: a process ended outside its cases" if report.late_exits else "",
    ]
    shown = ", ".join(count for count in counts if count)
    if shown:
        text += " " + paint_failed(f"({shown})")
    if report.mode == "live":
        spent_in = sum(case.input_tokens for case in report.cases)
        spent_out = sum(case.output_tokens for case in report.cases)
        if spent_in + spent_out == 0:
            # No answer counted a token (usage left out, an answer refused for lacking it
            # under a budget, or no answer at all, as under a refused key): "0 tokens" would
            # read as a measurement.
            text += ", token usage not reported by the model"
        else:
            text += f", {spent_in} input + {spent_out} output tokens"
    return f"{text} in {duration(report.duration_ms)}"


def _case_line(case: CaseReport, repeat: int = 1) -> str:
    head = f"{printable(case.name)} ({printable_path(case.source)})"
    if repeat > 1:
        from evalrunner.report.stats import case_stats, shown_interval, yes_no

        stats = case_stats(case)
    if case.skipped is not None and (repeat == 1 or not stats.ran):
        return f"{head}  skipped: {printable(case.skipped)}"
    if repeat > 1:
        flaky = "  FLAKY" if stats.flaky else ""
        skipped = f" ({stats.not_run} not run)" if stats.not_run else ""
        return (
            f"{head}  {stats.passes}/{stats.runs} runs passed{skipped}{flaky}  pass^{repeat} "
            f"{yes_no(stats.pass_all)}  pass@{repeat} {yes_no(stats.pass_any)}  Wilson 95% "
            f"{shown_interval(stats.interval)}  {duration(case.duration_ms)}"
        )
    if case.error is not None:
        return f"{head}  run error  {duration(case.duration_ms)}"
    passed = sum(1 for g in case.grades if g.passed)
    return f"{head}  {passed}/{len(case.grades)} checks  {duration(case.duration_ms)}"


def _failed_runs_line(case: CaseReport) -> str:
    """Under a failed case of a repeated run: which runs failed, which never ran, and which
    one is shown (the same figures as the case's row)."""
    from evalrunner.report.stats import runs_line

    return runs_line(case)


LONG_DETAIL = 120
"""A failure detail at least this long, found under several failed checks, is printed once as
a numbered note (a message about the agent path repeats on every case)."""


def _repeated_details(failed: Sequence[CaseReport]) -> dict[str, tuple[int, int]]:
    """Long details that repeat across the failed checks: detail → (note number, count)."""
    counts: dict[str, int] = {}
    for case in failed:
        for g in failed_grades(case):
            if len(g.detail) >= LONG_DETAIL:
                counts[g.detail] = counts.get(g.detail, 0) + 1
    repeated = [detail for detail, count in counts.items() if count > 1]
    return {detail: (n, counts[detail]) for n, detail in enumerate(repeated, start=1)}


def _check_line(check: str, detail: str, passed: bool) -> str:
    if passed or not detail:
        return printable(check)
    return f"{printable(check)}: {printable(detail)}"


def _where(case: CaseReport) -> str:
    """The fixture a case comes from, with the line of its name where known: editors and
    terminals open ``path:line``."""
    where = printable_path(case.path or case.source)
    line = case.positions.get("name", (None, None))[0]
    return where if line is None else f"{where}:{line}"
