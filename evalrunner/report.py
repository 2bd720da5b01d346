"""Stage 5, report: render a :class:`SuiteReport` as a table or JSON, and decide the exit code.

Rendering and the exit code are pure functions of values; :func:`write_atomic` is the one
writer, used for ``--output``.

Everything in a report that came from outside (case names, file names, replies, tool output,
run errors) is made safe on the way out: the table escapes control characters, bidi overrides
and lone surrogates (:func:`evalrunner.text.printable`), so no reply can draw over the report's
lines; the JSON report keeps the text exact but escapes what a terminal would act on, and
writes a lone surrogate (which UTF-8 cannot hold) as the text ``\\ud800``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import signal
import stat
import tempfile
from pathlib import Path
from typing import Any

from evalrunner.load import file_kind
from evalrunner.model import CaseReport, RunRefused, SuiteReport
from evalrunner.select import report_fields
from evalrunner.text import (
    control_character,
    describe_character,
    encodable,
    encodable_path,
    printable,
    printable_path,
)

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
        head = f"{mark} {printable(case.name)} ({printable_path(case.source)})"
        if case.error is not None:
            lines.append(f"{head}  —  run error: {printable(case.error)}")
            continue
        passed = sum(1 for g in case.grades if g.passed)
        lines.append(f"{head}  {passed}/{len(case.grades)} checks")
        for grade in case.grades:
            if not grade.passed:
                check, detail = printable(grade.check), printable(grade.detail)
                lines.append(f"    {paint('✗', _RED)} {check}: {detail}")
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
        "suite": encodable_path(report.suite),
        "mode": report.mode,
        "passed": report.passed,
        "failed": report.failed,
        "total": len(report.cases),
        "all_passed": report.all_passed,
        "interrupted": report.interrupted is not None,
        "trimmed_history": report.trimmed_history,
        **report_fields(report),  # keyword, shard, admission_errors: only when used
        "duration_ms": report.duration_ms,
        "cases": [_case_data(case) for case in report.cases],
    }


def _case_data(case: CaseReport) -> dict[str, Any]:
    return {
        "name": encodable(case.name),
        "source": encodable_path(case.source),
        "class": case.case_class,
        "passed": case.passed,
        "error": None if case.error is None else encodable(case.error),
        "grades": [
            {"check": encodable(g.check), "passed": g.passed, "detail": encodable(g.detail)}
            for g in case.grades
        ],
        "input_tokens": case.input_tokens,
        "output_tokens": case.output_tokens,
        "llm_calls": case.llm_calls,
        "duration_ms": case.duration_ms,
    }


# Characters the JSON encoder leaves raw with ensure_ascii=False that a terminal acts on (DEL,
# C1 controls, bidi overrides and isolates) or that end a line in JavaScript (U+2028/9).
_JSON_RAW_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def render_json(report: SuiteReport) -> str:
    """The JSON report (validates against ``schemas/report.schema.json``), newline-terminated.

    Printed to a terminal it is as safe as the table: the characters a terminal would act on
    are written as ``\\uXXXX`` escapes, which decode to the same strings.
    """
    text = json.dumps(report_data(report), indent=2, ensure_ascii=False)
    # Such characters can only occur inside JSON strings, where an escape means the same.
    return _JSON_RAW_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


class UnsafeOutput(OSError):
    """An output path that is refused: it names something that is neither a regular file nor
    a stream, or its file name holds a control character."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one.

    The text goes to a temporary file in the same directory, is flushed to disk, then renamed
    over ``path``; on any failure the temporary file is removed and ``path`` is untouched.
    The file gets the permissions a plain write would give it: those of the file it replaces,
    else the default for new files (``0o666`` less the umask), not ``mkstemp``'s private 0600.

    What ``path`` may name, and what happens:

    * a regular file, or nothing: replaced (or created) atomically, as above;
    * a symbolic link: followed, as a shell redirection would; the file it points at (all
      links resolved) is replaced atomically and the link itself stays. A dangling link
      creates its target;
    * a FIFO, a pipe (``/dev/fd/N``, ``>(...)``) or a character device (``/dev/null``, a
      terminal): written directly, in place; a stream has no old version to keep, and a
      device must never be replaced by a file (as root, a rename would do exactly that).
      A FIFO that no process reads is refused rather than waited on;
    * anything else (a directory, a block device, a socket): refused with
      :class:`UnsafeOutput`, nothing written.

    A file name holding a control character or a bidi override is refused too: it is far more
    likely a stray ``\\r`` from a script with CRLF line endings than a name anyone wants.
    """
    # Bytes that are not UTF-8 are a valid name, just shown escaped; control characters not.
    bad = control_character(encodable_path(path.name))
    if bad is not None:
        raise UnsafeOutput(
            errno.EINVAL,
            f"the file name holds {describe_character(bad)}, a control character; give a "
            "name without it (a script with CRLF line endings adds a \\r)",
        )
    try:
        mode: int | None = os.stat(path).st_mode  # through any symlinks
    except FileNotFoundError:
        mode = None  # nothing there yet, or a dangling link: its target is created
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            # Opened by the given name: /dev/fd/N resolves to no path a process could open.
            _write_stream(path, text)
            return
        raise UnsafeOutput(errno.EINVAL, f"{_is_a(mode)}; {_WHAT_OUTPUT_CAN_BE}")
    _replace_file(Path(os.path.realpath(path)), text)


_WHAT_OUTPUT_CAN_BE = "give the path of a regular file (or of a FIFO or a terminal)"


def _is_a(mode: int) -> str:
    return f"is {file_kind(mode)}, not a regular file"


def _write_stream(target: Path, text: str) -> None:
    """Write to a FIFO, pipe or character device in place, never blocking on the open."""
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO with no reader: opening it would block
            raise UnsafeOutput(
                errno.ENXIO, "is a FIFO that no process is reading; start the reader first"
            ) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):  # swapped since the stat
            raise UnsafeOutput(errno.EAGAIN, "changed while it was being opened; try again")
        # Blocking again for the writes: a pipe that is momentarily full must be waited on.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def _replace_file(path: Path, text: str) -> None:
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
