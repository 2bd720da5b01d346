"""The tool side of the agent's boundary: the :class:`Tool` interface, the built-in ``echo``
tool, and :func:`dispatch`, which turns one tool call into exactly the record the model sees
next (SPEC §5)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NoReturn, Protocol, runtime_checkable

from evalrunner.model import JSONValue, ToolCall, ToolCallRecord, ToolSpec


@runtime_checkable
class Tool(Protocol):
    """A tool an agent can call. ``call`` returns text or raises; raising is a failed call."""

    @property
    def name(self) -> str:
        """The name the model calls it by."""
        ...

    @property
    def description(self) -> str:
        """What it does, as offered to the model."""
        ...

    @property
    def parameters(self) -> dict[str, JSONValue]:
        """JSON Schema of its arguments object."""
        ...

    def call(self, arguments: dict[str, Any]) -> str:
        """Run the tool on parsed arguments."""
        ...


class EchoTool:
    """Returns its ``message`` argument when that is a string, else ``(empty)``; never fails."""

    name = "echo"
    description = "Echo back the given message."
    parameters: ClassVar[dict[str, JSONValue]] = {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "Text to echo back."}},
        "required": ["message"],
    }

    def call(self, arguments: dict[str, Any]) -> str:
        """Echo ``message``."""
        message = arguments.get("message")
        return message if isinstance(message, str) else "(empty)"


ToolSource = Mapping[str, Tool] | Callable[[], Mapping[str, Tool]]
"""Tools for a run: a mapping used as is, or a function called once per case for fresh ones
(so that a tool with state cannot carry it from one case into the next)."""


def fresh_tools(source: ToolSource | None) -> dict[str, Tool]:
    """The tools for one case: the built-in ones when ``source`` is None."""
    if source is None:
        return builtin_tools()
    return dict(source() if callable(source) else source)


def builtin_tools() -> dict[str, Tool]:
    """Fresh instances of the built-in tools, by name."""
    return {"echo": EchoTool()}


def tool_spec(tool: Tool) -> ToolSpec:
    """How a tool is offered to the model."""
    return ToolSpec(tool.name, tool.description, dict(tool.parameters))


def dispatch(tools: Mapping[str, Tool], call: ToolCall) -> ToolCallRecord:
    """Run one tool call and record it exactly as the model will be shown it.

    Unknown tool, arguments that are not a JSON object, and a raising tool are failed calls
    with fixed result texts; an empty result becomes ``(no output)``.
    """
    tool = tools.get(call.name)
    if tool is None:
        return _record(call, f"Unknown tool: {call.name}", success=False)
    try:
        arguments = json.loads(call.arguments, parse_constant=_reject_constant)
    except (json.JSONDecodeError, RecursionError) as exc:
        reason = getattr(exc, "msg", None) or "nesting too deep"
        return _record(call, f"Invalid arguments for {call.name}: {reason}", success=False)
    except _NotJSON as exc:
        return _record(call, f"Invalid arguments for {call.name}: {exc}", success=False)
    if not isinstance(arguments, dict):
        kind = type(arguments).__name__ if arguments is not None else "null"
        reason = f"expected a JSON object, got {_JSON_NAMES.get(kind, kind)}"
        return _record(call, f"Invalid arguments for {call.name}: {reason}", success=False)
    if _has_lone_surrogate(arguments):
        reason = "a string holds a lone surrogate escape (not a Unicode scalar value)"
        return _record(call, f"Invalid arguments for {call.name}: {reason}", success=False)
    try:
        result = tool.call(arguments)
    except Exception as exc:
        return _record(call, f"Error: {exc}", success=False)
    if not isinstance(result, str):
        return _record(
            call, f"Error: tool returned {type(result).__name__}, not text", success=False
        )
    return _record(call, result or "(no output)", success=True)


_JSON_NAMES = {
    "list": "array",
    "str": "string",
    "int": "number",
    "float": "number",
    "bool": "boolean",
}


class _NotJSON(ValueError):
    """Argument text that Python's ``json`` accepts but JSON (RFC 8259) does not."""


def _reject_constant(name: str) -> NoReturn:
    raise _NotJSON(f"{name} is not valid JSON")


def _has_lone_surrogate(value: object) -> bool:
    """True when a decoded string (key or value) holds an unpaired UTF-16 surrogate.

    Python's ``json`` decodes an escape like ``\\ud800`` to a lone surrogate, which is not text
    (it cannot be encoded as UTF-8, so a report showing it could not be written); a strict
    parser such as serde_json refuses it. Walked iteratively: the data may be deeply nested.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _record(call: ToolCall, result: str, *, success: bool) -> ToolCallRecord:
    return ToolCallRecord(call.name, call.arguments, result, success, call.id)
