"""``--format github``: GitHub Actions workflow commands that annotate the fixture at the
expectation a failed check comes from, then the table.

``::error file=F,line=L,col=C,title=T::MESSAGE`` is one line of the job's log; GitHub shows
it on the file's line in the pull request. Admission errors point at their problem, failed
checks at their expectation's key in ``expects``, run errors at the case's name. Paths are
those the run used (relative to the working directory when the suite is under it): run
from the repository root so they match the repository's.

Outside text is escaped twice: by :func:`evalrunner.text.printable`, so no control character
reaches the log, then by GitHub's rules, so no text can end the command or start another:
``%`` ``\\r`` ``\\n`` in the message, and also ``:`` ``,`` in properties.
"""

from __future__ import annotations

from evalrunner.model import CaseReport, RunRefused, SuiteReport
from evalrunner.report.outcome import failed_grades, interruption, late_exits, position_key
from evalrunner.report.stats import case_runs, case_summary
from evalrunner.report.table import Verbosity, render_table
from evalrunner.text import printable, printable_path

_MESSAGE_LIMIT = 4000
_TITLE_LIMIT = 200


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as :func:`escape_data`, and ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _file_property(path: str) -> str:
    """A file name as GitHub should find it in the repository: a line break is sent escaped
    by GitHub's own rules (``%0A``), which GitHub undoes; a name with any other control
    character, or one that is not valid Unicode, cannot be sent safely and is shown escaped
    as in the table."""
    bare = path.replace("\r", "").replace("\n", "")
    return escape_property(path if printable_path(bare) == bare else printable_path(path))


def annotation(
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    col: int | None = None,
    title: str | None = None,
) -> str:
    """One ``::error`` command; the text given is outside text, made safe here."""
    properties = []
    if file is not None:
        properties.append(f"file={_file_property(file)}")
        if line is not None:
            properties.append(f"line={line}")
            if col is not None:
                properties.append(f"col={col}")
    if title is not None:
        properties.append(f"title={escape_property(_cap(printable(title), _TITLE_LIMIT))}")
    head = "::error " + ",".join(properties) if properties else "::error"
    return f"{head}::{escape_data(_cap(printable(message), _MESSAGE_LIMIT))}"


def github_annotations(outcome: SuiteReport | RunRefused) -> list[str]:
    """Every annotation of a run (failed checks, run errors, an interruption) or of a
    refused run (each admission error, each reason)."""
    refused = [
        annotation(
            e.message, file=e.path, line=e.line, col=e.col, title="evalrunner: fixture refused"
        )
        for e in outcome.admission_errors
    ]
    if isinstance(outcome, RunRefused):
        lines = [annotation(reason, title="evalrunner: run refused") for reason in outcome.reasons]
        return lines + refused
    lines = refused  # --continue-on-admission-errors: the files left out, then the cases
    for case in outcome.cases:
        lines.extend(_case_annotations(case, outcome.repeat))
    if outcome.budget_spent is not None:
        lines.append(annotation(outcome.budget_spent, title="evalrunner: token budget spent"))
    if outcome.live_stopped is not None:
        lines.append(annotation(outcome.live_stopped, title="evalrunner: run stopped"))
    late = late_exits(outcome)
    if late is not None:
        lines.append(annotation(late, title="evalrunner: process ended outside a case"))
    stopped = interruption(outcome)
    if stopped is not None:
        lines.append(annotation(stopped, title="evalrunner: run interrupted"))
    return lines


def _case_annotations(case: CaseReport, repeat: int = 1) -> list[str]:
    file = case.path or None
    name_at = case.positions.get("name")
    if case.skipped is not None:
        return []  # not a problem of the case: the table and the summary say it was not run
    # A repeated case's numbers lead each message of its first failed run, which is shown.
    lead = f"{case_summary(case, repeat)}; run {_first_failed(case)}: " if repeat > 1 else ""
    if case.error is not None:
        line, col = name_at if name_at is not None else (None, None)
        return [
            annotation(
                f"{lead}run error: {case.error}", file=file, line=line, col=col, title=case.name
            )
        ]
    out = []
    for grade in failed_grades(case):
        spot = case.positions.get(position_key(grade.check), name_at)
        line, col = spot if spot is not None else (None, None)
        message = f"{grade.check}: {grade.detail}" if grade.detail else f"{grade.check} failed"
        message = lead + message
        out.append(annotation(message, file=file, line=line, col=col, title=case.name))
    return out


def _first_failed(case: CaseReport) -> int:
    return case_runs(case).shown


def render_github(
    outcome: SuiteReport | RunRefused,
    *,
    verbosity: Verbosity = Verbosity.NORMAL,
    tracebacks: bool = False,
) -> str:
    """The annotations, then (for a run) the table with its summary line, uncoloured."""
    lines = github_annotations(outcome)
    text = "".join(line + "\n" for line in lines)
    if isinstance(outcome, SuiteReport):
        text += render_table(outcome, color=False, verbosity=verbosity, tracebacks=tracebacks)
    return text


def _cap(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    keep = limit - len(f"… ({len(text)} more characters)")
    return f"{text[:keep]}… ({len(text) - keep} more characters)"
