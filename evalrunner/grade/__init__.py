"""Stage 4, grade: a case's expectations against a run record, as :class:`GradeResult` values.

Pure: no I/O, no clock. One module per family of kinds; this module ties each kind's name to
its grader in :data:`KINDS`, in the grading order of SPEC §6 (the field order of
:class:`~evalrunner.model.Expectations`). Tests hold ``KINDS``, the schema files in
``schemas/expects/`` and the README's kind table to the same set of names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from evalrunner.grade import counts, payloads, response, response_json, tools, trajectory
from evalrunner.model import Expectations, GradeResult, RunRecord

__all__ = ["EVIDENCE", "KINDS", "NO_EVIDENCE", "Kind", "grade"]


@dataclass(frozen=True, slots=True)
class Kind:
    """One expectation kind: its name (the key in ``expects``) and its grader."""

    name: str
    grader: Callable[[Any, RunRecord], list[GradeResult]]


_GRADERS: dict[str, Callable[[Any, RunRecord], list[GradeResult]]] = {
    "response_contains": response.response_contains,
    "response_not_contains": response.response_not_contains,
    "response_matches": response.response_matches,
    "tools_used": tools.tools_used,
    "tools_not_used": tools.tools_not_used,
    "max_tool_calls": counts.max_tool_calls,
    "min_tool_calls": counts.min_tool_calls,
    "exact_tool_calls": counts.exact_tool_calls,
    "all_tools_succeeded": tools.all_tools_succeeded,
    "tool_arguments_contain": payloads.tool_arguments_contain,
    "tool_results_contain": payloads.tool_results_contain,
    "tool_calls_match": trajectory.tool_calls_match,
    "response_json": response_json.response_json,
}

KINDS: tuple[Kind, ...] = tuple(Kind(f.name, _GRADERS[f.name]) for f in fields(Expectations))
"""Every expectation kind, in grading order. Built from the fields of ``Expectations``, so a
kind without a grader fails at import."""


EVIDENCE: dict[str, str] = {
    "tool_arguments_contain": "arguments",
    "all_tools_succeeded": "success",
}
"""Kinds that read a dispatch field some agent paths cannot observe (see
:attr:`RunRecord.unobserved`); ``tool_calls_match`` reads them when its calls give
``arguments``, ``arguments_schema`` or ``succeeded`` (:func:`trajectory.evidence`). Every
other kind reads what every path observes: the final reply, and the tool calls whose results
were fed back to the model."""

NO_EVIDENCE: dict[str, str] = {
    "arguments": (
        "no evidence of the arguments the tool received: this agent does not report its "
        'dispatches. A command agent reports them in its reply line, "tool_calls": [{"id", '
        '"name", "arguments", "result", "success"}] (schemas/agent-command/reply.schema.json)'
    ),
    "success": (
        "no evidence of whether each tool call succeeded: the OpenAI wires (chat completions, "
        "Responses) have no error flag on a tool result, and this agent does not report "
        '"success" for its dispatches. Report them in the reply line\'s "tool_calls" '
        "(schemas/agent-command/reply.schema.json), or assert the failure text with "
        "tool_results_contain"
    ),
}
"""Why a check fails when its evidence is missing, and how to supply it."""


def grade(expects: Expectations, run: RunRecord) -> tuple[GradeResult, ...]:
    """One result per declared check, in the order of :data:`KINDS` then declaration order.

    A check whose evidence this run could not observe fails with :data:`NO_EVIDENCE`'s
    message: it never passes on scripted data.
    """
    results: list[GradeResult] = []
    for kind in KINDS:
        value = getattr(expects, kind.name)
        if value is None:
            continue
        graded = kind.grader(value, run)
        needs = (
            trajectory.evidence(value)
            if kind.name == "tool_calls_match"
            else (EVIDENCE[kind.name],)
            if kind.name in EVIDENCE
            else ()
        )
        missing = next((need for need in needs if need in run.unobserved), None)
        if missing is not None:
            graded = [GradeResult(r.check, False, NO_EVIDENCE[missing]) for r in graded]
        results.extend(graded)
    return tuple(results)
