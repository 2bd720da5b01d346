"""Graders of how many tool calls were dispatched: ``max_tool_calls``, ``min_tool_calls``,
``exact_tool_calls``. Every attempted dispatch counts, unknown tools and failures included."""

from __future__ import annotations

from collections.abc import Callable

from evalrunner.expectations._format import listing
from evalrunner.model import GradeResult, RunRecord


def _count_check(
    kind: str, limit: int, run: RunRecord, holds: Callable[[int, int], bool]
) -> list[GradeResult]:
    count = len(run.tool_calls)
    passed = holds(count, limit)
    detail = "" if passed else f"{count} tool call(s): {listing(run.tools_called)}"
    return [GradeResult(f"{kind}({limit})", passed, detail)]


def max_tool_calls(limit: int, run: RunRecord) -> list[GradeResult]:
    """At most ``limit`` dispatches."""
    return _count_check("max_tool_calls", limit, run, lambda n, k: n <= k)


def min_tool_calls(limit: int, run: RunRecord) -> list[GradeResult]:
    """At least ``limit`` dispatches."""
    return _count_check("min_tool_calls", limit, run, lambda n, k: n >= k)


def exact_tool_calls(limit: int, run: RunRecord) -> list[GradeResult]:
    """Exactly ``limit`` dispatches."""
    return _count_check("exact_tool_calls", limit, run, lambda n, k: n == k)
