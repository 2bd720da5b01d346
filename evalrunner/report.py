"""Stage 5, report: render a :class:`SuiteReport` as a table or JSON, and decide the exit code.

Rendering and the exit code are pure functions of values; :func:`write_atomic` is the one
writer, used for ``--output``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import tempfile
from pathlib import Path
from typing import Any

from evalrunner.model import CaseReport, RunRefused, SuiteReport

REPORT_SCHEMA = "evalrunner/report/v1"

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2


def exit_code(outcome: SuiteReport | RunRefused) -> int:
    """0 when every case passed, 1 when any failed or errored, 2 when the run could not start,
    128 + the signal number when a signal stopped it (130 for SIGINT, 143 for SIGTERM)."""
    if isinstance(outcome, RunRefused):
        return EXIT_REFUSED
    if outcome.interrupted is not None:
        return 128 + outcome.interrupted
    return EXIT_PASSED if outcome.all_passed else EXIT_FAILED


_GREEN = "\x1b[32m"
_RED = "\x1b[31m"
_DIM = "\x1b[2m"
_RESET = "\x1b[0m"


def render_table(report: SuiteReport, *, color: bool = False) -> str:
    """One line per case, failing checks indented below, and a summary line (SPEC §7)."""

    def paint(text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if color else text

    lines: list[str] = []
    for case in report.cases:
        mark = paint("✓", _GREEN) if case.passed else paint("✗", _RED)
        head = f"{mark} {case.name} ({case.source})"
        if case.error is not None:
            lines.append(f"{head}  —  run error: {case.error}")
            continue
        passed = sum(1 for g in case.grades if g.passed)
        lines.append(f"{head}  {passed}/{len(case.grades)} checks")
        for grade in case.grades:
            if not grade.passed:
                lines.append(f"    {paint('✗', _RED)} {grade.check}: {grade.detail}")
    summary = f"{report.passed}/{len(report.cases)} cases passed"
    if report.failed:
        summary += " " + paint(f"({report.failed} failed)", _RED)
    lines.append(summary)
    if report.interrupted is not None:
        lines.append(
            paint(f"run interrupted by {signal_name(report.interrupted)}", _RED)
            + f" after {len(report.cases)} finished case(s); the rest did not run"
        )
    return "\n".join(lines) + "\n"


def signal_name(signum: int) -> str:
    """``2`` → ``SIGINT``."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def report_data(report: SuiteReport) -> dict[str, Any]:
    """The JSON report as plain data, keys in the documented order."""
    return {
        "schema": REPORT_SCHEMA,
        "suite": report.suite,
        "mode": report.mode,
        "passed": report.passed,
        "failed": report.failed,
        "total": len(report.cases),
        "all_passed": report.all_passed,
        "interrupted": report.interrupted is not None,
        "duration_ms": report.duration_ms,
        "cases": [_case_data(case) for case in report.cases],
    }


def _case_data(case: CaseReport) -> dict[str, Any]:
    return {
        "name": case.name,
        "source": case.source,
        "class": case.case_class,
        "passed": case.passed,
        "error": case.error,
        "grades": [{"check": g.check, "passed": g.passed, "detail": g.detail} for g in case.grades],
        "input_tokens": case.input_tokens,
        "output_tokens": case.output_tokens,
        "llm_calls": case.llm_calls,
        "duration_ms": case.duration_ms,
    }


def render_json(report: SuiteReport) -> str:
    """The JSON report (validates against ``schemas/report.schema.json``), newline-terminated."""
    return json.dumps(report_data(report), indent=2, ensure_ascii=False) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one.

    The text goes to a temporary file in the same directory, is flushed to disk, then renamed
    over ``path``; on any failure the temporary file is removed and ``path`` is untouched.
    The file gets the permissions a plain write would give it: those of the file it replaces,
    else the default for new files (``0o666`` less the umask), not ``mkstemp``'s private 0600.
    """
    directory = path.parent if str(path.parent) else Path(".")
    mode = _file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _file_mode(path: Path) -> int:
    """Permission bits for a report written to ``path``."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
