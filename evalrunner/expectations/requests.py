"""Graders of what the agent asked the model: ``tools_offered``, ``tools_not_offered``,
``system_prompt_contains``.

They read every :class:`~evalrunner.model.ModelRequest` of the run (of the turn, for a turn's
checks): in-process the request the agent built, over a wire the request as the endpoint parsed
it (its ``tools``, its ``tool_choice``, its system content: system and developer messages and
Responses ``instructions`` on the OpenAI wires, ``system`` on Anthropic). A tool is offered by a
request when the model may call it there: it is among the request's tools, and ``tool_choice``
neither forbids every call (``none``) nor forces another tool.
"""

from __future__ import annotations

from evalrunner.expectations._format import listing, nfc, nfc_note, quote
from evalrunner.model import GradeResult, ModelRequest, RunRecord

NO_REQUEST = (
    "no evidence: the agent sent no model request, so there is no request to read; an agent "
    "must ask the model at least once for this check to pass"
)
"""Why ``tools_offered`` and ``system_prompt_contains`` fail on a run without requests."""


def offered(request: ModelRequest) -> tuple[str, ...]:
    """The tools the model may call under ``request``, in the order it lists them."""
    if request.tool_choice == "none":
        return ()
    names = tuple(spec.name for spec in request.tools)
    if request.tool_choice == "tool":
        return tuple(name for name in names if name == request.forced_tool)
    return names


def system_prompt(request: ModelRequest) -> str:
    """The request's system content: its system messages, joined by newlines."""
    return "\n".join(m.content for m in request.messages if m.role == "system")


def _shown_offer(request: ModelRequest) -> str:
    """What a request offered, for a failure detail, with the ``tool_choice`` that narrowed
    it when one did."""
    listed = listing(spec.name for spec in request.tools)
    if request.tool_choice == "none":
        return f"it lists {listed} under tool_choice none, which lets the model call none"
    if request.tool_choice == "tool":
        return f"it lists {listed} but forces a call to {quote(request.forced_tool or '')}"
    return f"it offered {listed}"


def tools_offered(names: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """Every model request offers each tool."""
    return _offer_checks(names, run, offer=True)


def tools_not_offered(names: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """No model request offers any of the tools (a run without requests offers none)."""
    return _offer_checks(names, run, offer=False)


def _offer_checks(names: tuple[str, ...], run: RunRecord, *, offer: bool) -> list[GradeResult]:
    """Each tool is offered by every request (``offer``) or by none; the detail names the
    first request that does otherwise. Without requests nothing is offered, which is no
    evidence that a tool would be."""
    kind, did, beside = (
        ("tools_offered", "did not offer", "without")
        if offer
        else ("tools_not_offered", "offered", "with")
    )
    results = []
    for name in names:
        check = f"{kind}({quote(name)})"
        if offer and not run.requests:
            results.append(GradeResult(check, False, NO_REQUEST))
            continue
        wrong = [i for i, request in enumerate(run.requests) if (name in offered(request)) != offer]
        if not wrong:
            results.append(GradeResult(check, True))
            continue
        detail = (
            f"model request {wrong[0] + 1} of {len(run.requests)} {did} {quote(name)} "
            f"({len(wrong)} request(s) {beside} it); {_shown_offer(run.requests[wrong[0]])}"
        )
        results.append(GradeResult(check, False, detail))
    return results


def system_prompt_contains(needles: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """Every model request's system prompt holds each needle (both in NFC)."""
    prompts = [system_prompt(request) for request in run.requests]
    normal = [nfc(prompt) for prompt in prompts]
    results = []
    for needle in needles:
        check = f"system_prompt_contains({quote(needle)})"
        if not prompts:
            results.append(GradeResult(check, False, NO_REQUEST))
            continue
        wanted = nfc(needle)
        missing = [i for i, prompt in enumerate(normal) if wanted not in prompt]
        if not missing:
            results.append(GradeResult(check, True))
            continue
        prompt = prompts[missing[0]]
        shown = (
            f"its system prompt is {quote(prompt)}{nfc_note(prompt)}"
            if prompt
            else "it has no system prompt (no system or developer message, no instructions)"
        )
        detail = (
            f"not found in the system prompt of model request {missing[0] + 1} of "
            f"{len(prompts)} ({len(missing)} request(s) without it); {shown}"
        )
        results.append(GradeResult(check, False, detail))
    return results
