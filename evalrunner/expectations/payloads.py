"""Graders of what crossed the tool boundary: ``tool_arguments_contain`` (argument text the
tool received) and ``tool_results_contain`` (result text the model was shown).

Needle and payload are compared in Unicode NFC, like the response checks; failure details show
the payloads as they were, with look-alike differences escaped."""

from __future__ import annotations

from collections.abc import Callable

from evalrunner.expectations._format import listing, nfc, nfc_note, quote
from evalrunner.model import GradeResult, PayloadNeedle, RunRecord, ToolCallRecord


def _payload_checks(
    kind: str,
    what: str,
    needles: tuple[PayloadNeedle, ...],
    run: RunRecord,
    payload: Callable[[ToolCallRecord], str],
) -> list[GradeResult]:
    results = []
    for entry in needles:
        target = quote(entry.tool)
        if entry.call_index is not None:
            target += f"[{entry.call_index}]"
        check = f"{kind}({target}, {quote(entry.needle)})"
        calls = [call for call in run.tool_calls if call.name == entry.tool]
        if not calls:
            detail = (
                f"{quote(entry.tool)} was never called; tools called: {listing(run.tools_called)}"
            )
            results.append(GradeResult(check, False, detail))
            continue
        needle = nfc(entry.needle)
        # Details are written only for a failed check: quoting payloads costs more than the
        # check itself, and a passing check shows none.
        if entry.call_index is None:
            observed = [payload(call) for call in calls]
            passed = any(needle in nfc(text) for text in observed)
            detail = (
                ""
                if passed
                else f"{what} of {quote(entry.tool)}: {listing(observed)}{nfc_note(observed)}"
            )
        elif entry.call_index >= len(calls):
            passed = False
            detail = (
                f"no call {entry.call_index} to {quote(entry.tool)}; only {len(calls)} call(s) "
                f"observed: {listing(payload(call) for call in calls)}"
            )
        else:
            text = payload(calls[entry.call_index])
            passed = needle in nfc(text)
            detail = (
                ""
                if passed
                else f"{what} of call {entry.call_index} to {quote(entry.tool)}: "
                f"{quote(text)}{nfc_note(text)}"
            )
        results.append(GradeResult(check, passed, detail))
    return results


def tool_arguments_contain(needles: tuple[PayloadNeedle, ...], run: RunRecord) -> list[GradeResult]:
    """The argument text of a call to the tool (or of its ``call_index``-th call) has the needle."""
    return _payload_checks(
        "tool_arguments_contain", "arguments", needles, run, lambda call: call.arguments
    )


def tool_results_contain(needles: tuple[PayloadNeedle, ...], run: RunRecord) -> list[GradeResult]:
    """The result text of a call to the tool (or of its ``call_index``-th call) has the needle."""
    return _payload_checks(
        "tool_results_contain", "results", needles, run, lambda call: call.result
    )
