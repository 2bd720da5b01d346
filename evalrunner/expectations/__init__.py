"""Stage 4, grade: a case's expectations against a run record, as :class:`GradeResult` values.

Pure: no I/O, no clock. One module per family of kinds; :mod:`evalrunner.expectations.kinds` defines
each kind once (name, parser, grader, admission rules, evidence, doc) in :data:`KINDS`, in the
grading order of SPEC §6.
"""

from __future__ import annotations

from evalrunner.expectations.kinds import KINDS, Kind
from evalrunner.model import Case, Expectations, GradeResult, RunRecord

__all__ = ["EVIDENCE", "KINDS", "NO_EVIDENCE", "Kind", "grade", "grade_case"]


EVIDENCE: dict[str, str] = {
    kind.name: kind.evidence for kind in KINDS if isinstance(kind.evidence, str)
}
"""Kinds that read a dispatch field some agent paths cannot observe (see
:attr:`RunRecord.unobserved`), from each kind's ``evidence``. Every other kind reads what
every path observes: the final reply, and the tool calls whose results were fed back to the
model."""

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
        missing = next((need for need in kind.needs(value) if need in run.unobserved), None)
        if missing is not None:
            graded = [GradeResult(r.check, False, NO_EVIDENCE[missing]) for r in graded]
        results.extend(graded)
    return tuple(results)


def grade_case(case: Case, run: RunRecord) -> tuple[GradeResult, ...]:
    """Every declared check of ``case``: its ``expects`` against the whole run, then each
    turn's ``expects`` against that turn (:meth:`RunRecord.turn`), its checks named
    ``turns[i].<check>`` (0-based, as the fixture's path to them)."""
    results = grade(case.expects, run)
    for index, turn in enumerate(case.turns):
        if turn.expects is not None:
            prefix = f"turns[{index}]."
            results += tuple(
                GradeResult(prefix + r.check, r.passed, r.detail)
                for r in grade(turn.expects, run.turn(index))
            )
    return results
