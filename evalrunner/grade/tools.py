"""Graders of which tools were dispatched: ``tools_used``, ``tools_not_used``,
``all_tools_succeeded``."""

from __future__ import annotations

import json

from evalrunner.grade._format import listing, quote
from evalrunner.model import GradeResult, RunRecord


def tools_used(names: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """Each tool was dispatched at least once."""
    called = run.tools_called
    return [
        GradeResult(
            f"tools_used({quote(name)})",
            name in called,
            "" if name in called else f"not called; tools called: {listing(called)}",
        )
        for name in names
    ]


def tools_not_used(names: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """No listed tool was dispatched."""
    results = []
    for name in names:
        times = run.tools_called.count(name)
        results.append(
            GradeResult(
                f"tools_not_used({quote(name)})",
                times == 0,
                "" if times == 0 else f"unexpectedly called {times} time(s)",
            )
        )
    return results


def all_tools_succeeded(expected: bool, run: RunRecord) -> list[GradeResult]:
    """The derived all-succeeded flag equals the expected value."""
    actual = run.all_tools_succeeded
    failed = [call.name for call in run.tool_calls if not call.success]
    return [
        GradeResult(
            f"all_tools_succeeded({json.dumps(expected)})",
            actual == expected,
            ""
            if actual == expected
            else f"actual all_tools_succeeded = {json.dumps(actual)}; failed: {listing(failed)}",
        )
    ]
