"""The request parameters an agent sends (sampling, limits, tool choice, output format), and
how live mode passes them on to the model.

An agent's request is read by the replay endpoint (:mod:`evalrunner.wire.endpoint`); the
parameters it carries are kept as sent, under its API's names (:data:`WIRE_PARAMETERS`), in
:attr:`~evalrunner.model.ModelRequest.parameters`. In live mode they go to the model as they
are when the agent speaks the live model's API, and translated where the APIs differ
(:func:`translated`): a parameter the live API has no counterpart for (``seed`` on
Anthropic, say) is not sent. ``[eval.live]``'s ``temperature`` and ``max_tokens`` are
defaults the agent's own values override, unless the config names them in ``pin``
(:func:`live_options`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from evalrunner.model import JSONValue
from evalrunner.wire import ANTHROPIC, OPENAI, OPENAI_RESPONSES

WIRE_PARAMETERS: dict[str, tuple[str, ...]] = {
    OPENAI: (
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
    ),
    OPENAI_RESPONSES: (
        "temperature",
        "top_p",
        "max_output_tokens",
        "tool_choice",
        "parallel_tool_calls",
        "text",
    ),
    ANTHROPIC: ("temperature", "top_p", "top_k", "max_tokens", "stop_sequences", "tool_choice"),
}
"""The parameters of each API that live mode translates for another API, by their names there.
Between agent and model of one API, every parameter passes (:data:`WRITTEN`)."""

WRITTEN: dict[str, frozenset[str]] = {
    OPENAI: frozenset(
        {"model", "messages", "tools", "stream", "stream_options", "functions", "function_call"}
    ),
    OPENAI_RESPONSES: frozenset(
        {
            "model",
            "input",
            "instructions",
            "tools",
            "stream",
            "stream_options",
            "store",
            "previous_response_id",
            "conversation",
            "background",
        }
    ),
    ANTHROPIC: frozenset({"model", "messages", "system", "tools", "stream"}),
}
"""The fields of each API's request that live mode writes itself (the model, the conversation
as the monitor holds it, the tools, streaming, no stored state): an agent's own values of
these are not passed on. Every other field an agent sends is one of its parameters."""

_MAX_TOKENS = {
    OPENAI: ("max_tokens", "max_completion_tokens"),
    OPENAI_RESPONSES: ("max_output_tokens",),
    ANTHROPIC: ("max_tokens",),
}


def sent_parameters(api: str, body: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """Every field ``body`` (a request of ``api``) sets besides those of :data:`WRITTEN`,
    in its order (a null counts as not set)."""
    written = WRITTEN[api]
    return {
        name: value for name, value in body.items() if name not in written and value is not None
    }


def untranslatable(
    parameters: Mapping[str, JSONValue], from_api: str | None, to_api: str
) -> list[str]:
    """The parameters of a ``from_api`` request that a ``to_api`` request cannot carry (no
    counterpart there, or a value of a shape not known here); none between one API and
    itself. A value that asks for what ``to_api`` does anyway (``parallel_tool_calls: true``,
    ``response_format`` of type ``text``) is carried by leaving it out."""
    if from_api is None or from_api == to_api:
        return []
    lost = []
    for name, value in parameters.items():
        if translated({name: value}, from_api, to_api):
            continue
        if _default_everywhere(name, value):
            continue
        lost.append(name)
    return lost


def _default_everywhere(name: str, value: JSONValue) -> bool:
    if name == "parallel_tool_calls":
        return value is True
    if name == "response_format":
        return isinstance(value, dict) and value.get("type") == "text"
    if name == "text":
        fmt = value.get("format") if isinstance(value, dict) else None
        return isinstance(fmt, dict) and fmt.get("type") == "text"
    return False


def live_options(
    api: str,
    parameters: Mapping[str, JSONValue],
    from_api: str | None,
    *,
    temperature: float,
    max_tokens: int,
    pin: Sequence[str],
) -> dict[str, JSONValue]:
    """What a live request to ``api`` carries besides the conversation: the agent's
    ``parameters`` (sent on ``from_api``; translated when that differs), over the config's
    ``temperature`` and ``max_tokens``, which win only where ``pin`` names them."""
    given = dict(parameters) if from_api in (None, api) else translated(parameters, from_api, api)
    limit = _MAX_TOKENS[api]
    options: dict[str, JSONValue] = {"temperature": temperature, limit[0]: max_tokens}
    if "temperature" in pin:
        given.pop("temperature", None)
    if "max_tokens" in pin:
        for name in limit:
            given.pop(name, None)
    elif any(name in given for name in limit):
        del options[limit[0]]  # the agent's own limit, under whichever name it used
    options.update(given)
    return options


class BudgetProblem(NamedTuple):
    """Why an agent's output limit cannot pass under the budget, and what would fix it."""

    text: str
    fix: str


def over_budget(
    parameters: Mapping[str, JSONValue], from_api: str | None, budget: int | None
) -> BudgetProblem | None:
    """Why the agent's output limit (``max_tokens`` or its API's name for it, as the agent
    sent it) cannot pass through under a token budget of ``budget`` tokens: it asks for more
    than the whole budget, so one answer could spend past it. ``None`` when it can (or there
    is no budget, or no limit was sent). A value of a shape no API takes is the API's to
    refuse."""
    if budget is None:
        return None
    for name in _MAX_TOKENS.get(from_api or "", ("max_tokens",)):
        value = parameters.get(name)
        if value is None:
            continue
        if not whole_tokens(value):
            # Not compared, so not guarded: a string or a fraction might still be taken by
            # a lenient server, as a limit no budget check has seen.
            return BudgetProblem(
                f"the agent's request gives {name} = {_shown(value)}, which is not a whole "
                "number of tokens (at least 1), so the token budget (max_total_tokens = "
                f"{budget}) cannot be checked against it",
                "send a whole number",
            )
        if isinstance(value, int | float) and value > budget:
            return BudgetProblem(
                f"the agent's request asks for {name} = {json.dumps(value)} output tokens, "
                f"more than the whole token budget (max_total_tokens = {budget})",
                "lower it",
            )
    return None


def extra_choices(parameters: Mapping[str, JSONValue]) -> str | None:
    """Why the agent's ``n`` (answers per request) cannot pass through, or ``None`` when it
    is absent or 1."""
    choices = parameters.get("n")
    if choices is None or (choices == 1 and not isinstance(choices, bool)):
        return None
    # Each extra choice is billed output that no limit or budget check counts, and only the
    # first choice is graded: the others are spend without a verdict.
    return (
        f"the agent's request asks for n = {_shown(choices)} answers (choices) per request: "
        "nothing was sent, since every choice is billed while only the first is graded, and "
        "the output limit and token budget are checked for one answer; leave n out of the "
        "agent's request, or send n = 1"
    )


def whole_tokens(value: JSONValue) -> bool:
    """Whether ``value`` is a count of tokens an output limit can be: a whole number, at
    least 1 (``100.0`` is one; ``"100"``, ``99.5`` and ``true`` are not)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 1
    return isinstance(value, float) and value.is_integer() and value >= 1


def _shown(value: JSONValue) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 60 else text[:57] + "..."


def translated(
    parameters: Mapping[str, JSONValue], from_api: str, to_api: str
) -> dict[str, JSONValue]:
    """``parameters`` of a ``from_api`` request as a ``to_api`` request carries them; what
    ``to_api`` has no counterpart for, or a value of a shape not known here, is left out."""
    neutral = _neutral(parameters, from_api)
    return _written(neutral, to_api)


def _neutral(parameters: Mapping[str, JSONValue], api: str) -> dict[str, JSONValue]:
    """The parameters in one vocabulary: chat completions' names, ``tool_choice`` as
    ``auto``/``none``/``required`` or ``{"name": ...}``, ``stop`` a list."""
    out: dict[str, JSONValue] = {}
    for name in ("temperature", "top_p", "seed", "parallel_tool_calls", "response_format"):
        if name in parameters:
            out[name] = parameters[name]
    for name in _MAX_TOKENS[api]:
        if name in parameters:
            out["max_tokens"] = parameters[name]
    stop = parameters.get("stop", parameters.get("stop_sequences"))
    if isinstance(stop, str):
        out["stop"] = [stop]
    elif isinstance(stop, list):
        out["stop"] = stop
    choice = parameters.get("tool_choice")
    if isinstance(choice, str) and choice in ("auto", "none", "required"):
        out["tool_choice"] = choice
    elif isinstance(choice, dict):
        kind = choice.get("type")
        function = choice.get("function")
        chosen = function.get("name") if isinstance(function, dict) else choice.get("name")
        if kind in ("function", "tool") and isinstance(chosen, str):
            out["tool_choice"] = {"name": chosen}
        elif kind == "auto" or kind == "none":
            out["tool_choice"] = str(kind)
        elif kind == "any":
            out["tool_choice"] = "required"
        if choice.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False
    text = parameters.get("text")
    given = text.get("format") if isinstance(text, dict) else None
    if isinstance(given, dict):
        fmt: dict[str, JSONValue] = dict(given)
        if fmt.get("type") == "json_schema":
            del fmt["type"]
            out["response_format"] = {"type": "json_schema", "json_schema": fmt}
        else:
            out["response_format"] = fmt
    return out


def _written(neutral: Mapping[str, JSONValue], api: str) -> dict[str, JSONValue]:
    out: dict[str, JSONValue] = {}
    for name in ("temperature", "top_p"):
        if name in neutral:
            out[name] = neutral[name]
    if "max_tokens" in neutral:
        out[_MAX_TOKENS[api][0]] = neutral["max_tokens"]
    choice = neutral.get("tool_choice")
    parallel = neutral.get("parallel_tool_calls")
    if api == OPENAI:
        for name in ("stop", "seed", "parallel_tool_calls", "response_format"):
            if name in neutral:
                out[name] = neutral[name]
        if isinstance(choice, dict):
            out["tool_choice"] = {"type": "function", "function": choice}
        elif choice is not None:
            out["tool_choice"] = choice
    elif api == OPENAI_RESPONSES:
        if "parallel_tool_calls" in neutral:
            out["parallel_tool_calls"] = parallel
        if isinstance(choice, dict):
            out["tool_choice"] = {"type": "function", **choice}
        elif choice is not None:
            out["tool_choice"] = choice
        fmt = neutral.get("response_format")
        if isinstance(fmt, dict):
            schema = fmt.get("json_schema")
            if fmt.get("type") == "json_schema" and isinstance(schema, dict):
                out["text"] = {"format": {"type": "json_schema", **schema}}
            else:
                out["text"] = {"format": fmt}
    else:
        if "stop" in neutral:
            out["stop_sequences"] = neutral["stop"]
        anthropic: dict[str, JSONValue] | None = None
        if isinstance(choice, dict):
            anthropic = {"type": "tool", **choice}
        elif choice is not None:
            anthropic = {"type": {"required": "any"}.get(str(choice), str(choice))}
        if parallel is False:
            anthropic = anthropic or {"type": "auto"}
            anthropic["disable_parallel_tool_use"] = True
        if anthropic is not None:
            out["tool_choice"] = anthropic
    return out
