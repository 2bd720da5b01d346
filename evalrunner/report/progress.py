"""The live progress line a run shows on a terminal (stderr), rendered from plain values."""

from __future__ import annotations

from evalrunner.text import printable

CLEAR = "\r\x1b[2K"
"""Return to the start of the line and erase it: each redraw replaces the last."""


def progress_line(
    done: int, total: int, passed: int, elapsed: float, current: str | None, width: int
) -> str:
    """``[done/total] P passed, F failed · 3.2 s · running: case``, cut to ``width``."""
    failed = done - passed
    line = f"[{done}/{total}] {passed} passed, {failed} failed · {elapsed:.1f} s"
    if current is not None:
        line += f" · running: {printable(current)}"
    if len(line) > width - 1:
        line = line[: max(0, width - 2)] + "…"
    return CLEAR + line
