"""Graders of which tools were dispatched: ``tools_used``, ``tools_not_used``,
``all_tools_succeeded``."""

from __future__ import annotations

import difflib
import json

from evalrunner.expectations._format import listing, quote
from evalrunner.model import GradeResult, RunRecord, ToolCallsResponse


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
    """No listed tool was dispatched.

    A name that no request offered and the script never calls cannot be dispatched, so the
    check could not fail: next to an offered name it looks like a typo of (``send_emial``
    against ``send_email``), it fails with a suggestion; otherwise it passes with a note.
    """
    results = []
    for name in names:
        label = f"tools_not_used({quote(name)})"
        times = run.tools_called.count(name)
        if times:
            results.append(GradeResult(label, False, f"unexpectedly called {times} time(s)"))
            continue
        offered = _offered(run)
        if offered is None or name in offered or name in _scripted(run):
            results.append(GradeResult(label, True))
            continue
        similar = difflib.get_close_matches(name, sorted(offered), n=1, cutoff=0.8)
        if similar:
            results.append(
                GradeResult(
                    label,
                    False,
                    f"no model request offered {quote(name)} and the script never calls it, so "
                    f"this check cannot fail; did you mean `{similar[0]}`?",
                )
            )
        else:
            results.append(
                GradeResult(
                    label,
                    True,
                    f"note: no model request offered {quote(name)} (offered: "
                    f"{listing(sorted(offered))}): the agent does not have this tool, so this "
                    "check cannot fail",
                )
            )
    return results


def _offered(run: RunRecord) -> frozenset[str] | None:
    """The tool names the run's model requests offered; None when it sent none (nothing is
    known of its tools)."""
    if not run.requests:
        return None
    return frozenset(spec.name for request in run.requests for spec in request.tools)


def _scripted(run: RunRecord) -> frozenset[str]:
    """The tool names the model's responses called."""
    return frozenset(
        call.name
        for _, response in run.responses
        if isinstance(response, ToolCallsResponse)
        for call in response.tool_calls
    )


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
