"""The live progress line a run shows on a terminal (stderr), rendered from plain values."""

from __future__ import annotations

import unicodedata

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
