"""The live progress line a run shows on a terminal (stderr): :class:`RunProgress` draws it,
:func:`progress_line` renders it from plain values."""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
import time
import unicodedata
from collections.abc import Sequence

from evalrunner.model import CaseReport
from evalrunner.text import printable

CLEAR = "\r\x1b[2K"
"""Return to the start of the line and erase it: each redraw replaces the last."""


def progress_line(
    done: int,
    total: int,
    passed: int,
    elapsed: float,
    current: str | None,
    width: int,
    skipped: int = 0,
) -> str:
    """``[done/total] P passed, F failed · 3.2 s · running: case``, cut to ``width``;
    ``, S not run`` after the failures when cases were skipped."""
    failed = done - passed - skipped
    line = f"[{done}/{total}] {passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} not run"
    line += f" · {elapsed:.1f} s"
    if current is not None:
        line += f" · running: {printable(current)}"
    if _columns(line) > width - 1:
        line = _cut(line, max(0, width - 2)) + "…"
    return CLEAR + line


def _columns(text: str) -> int:
    """Terminal cells ``text`` takes: wide (East Asian) characters take two, combining
    marks none. A line longer than the terminal wraps, and the erase that starts the next
    redraw then clears only its last row."""
    return sum(_cell_width(character) for character in text)


def _cell_width(character: str) -> int:
    if unicodedata.combining(character):
        return 0
    return 2 if unicodedata.east_asian_width(character) in ("W", "F") else 1


def _cut(text: str, cells: int) -> str:
    """The longest start of ``text`` that fits in ``cells`` terminal cells."""
    used = 0
    for index, character in enumerate(text):
        used += _cell_width(character)
        if used > cells:
            return text[:index]
    return text


class RunProgress:
    """The live progress line on stderr, for a run that takes more than about a second.

    Drawn by a daemon thread four times a second, only when stderr is a terminal; erased
    on leaving the ``with`` block, before the report is printed. Nothing of it exists when
    stderr is a file, a pipe, or closed. Give :meth:`start` and :meth:`case_done` to
    :func:`~evalrunner.session.run_suite` as ``on_start`` and ``on_case``.
    """

    DELAY_SECS = 1.0
    PERIOD_SECS = 0.25

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._names: Sequence[str] = ()
        self._done = 0
        self._passed = 0
        self._skipped = 0
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._drawn = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_stderr(cls) -> RunProgress:
        """Enabled when stderr is a terminal (whatever stdout is)."""
        try:
            return cls(sys.stderr.isatty())
        except (AttributeError, ValueError):  # closed (None), or its file closed
            return cls(False)

    def start(self, names: Sequence[str]) -> None:
        """The run begins with these cases, in order."""
        self._names = names
        self._started = time.monotonic()
        if self._enabled and names:
            self._thread = threading.Thread(target=self._draw, name="evalrunner progress")
            self._thread.daemon = True
            self._thread.start()

    def case_done(self, report: CaseReport) -> None:
        """One more case finished (reports arrive in suite order)."""
        with self._lock:
            self._done += 1
            self._passed += report.passed
            self._skipped += report.skipped is not None

    def _draw(self) -> None:
        if self._stop.wait(self.DELAY_SECS):
            return
        while True:
            with self._lock:
                done, passed, skipped = self._done, self._passed, self._skipped
            current = self._names[done] if done < len(self._names) else None
            width = shutil.get_terminal_size((80, 24)).columns
            elapsed = time.monotonic() - self._started
            line = progress_line(
                done, len(self._names), passed, elapsed, current, width, skipped=skipped
            )
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(line)
                sys.stderr.flush()
                self._drawn = True
            if self._stop.wait(self.PERIOD_SECS):
                return

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
        if self._drawn:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(CLEAR)
                sys.stderr.flush()
