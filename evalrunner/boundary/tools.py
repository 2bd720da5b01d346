"""The tool side of the agent's boundary: the :class:`Tool` interface, the built-in ``echo``
tool, and :func:`dispatch`, which turns one tool call into exactly the record the model sees
next (SPEC §5)."""

from __future__ import annotations

import copy
import json
import re
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NoReturn, Protocol, runtime_checkable

from evalrunner.model import (
    DoubleRule,
    JSONValue,
    ToolCall,
    ToolCallRecord,
    ToolDouble,
    ToolSpec,
    argument_json,
    json_equal,
)


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
    text = call.arguments
    try:
        arguments = parse_arguments(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        reason = getattr(exc, "msg", None) or "nesting too deep"
        return _record(call, f"Invalid arguments for {call.name}: {reason}", success=False)
    except ValueError as exc:  # NaN or Infinity; an integer of more digits than Python converts
        return _record(call, f"Invalid arguments for {call.name}: {exc}", success=False)
    if not isinstance(arguments, dict):
        kind = type(arguments).__name__ if arguments is not None else "null"
        reason = f"expected a JSON object, got {_JSON_NAMES.get(kind, kind)}"
        return _record(call, f"Invalid arguments for {call.name}: {reason}", success=False)
    # A decoded string holds a surrogate only if the text does, or a \u escape makes one:
    # without either, the walk over every string has nothing to find.
    maybe = type(text) is not str or "\\u" in text or _SURROGATE.search(text) is not None
    if maybe and _has_lone_surrogate(arguments):
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


def reject_constant(name: str) -> NoReturn:
    """JSON's ``parse_constant`` hook for strict JSON: ``NaN`` and ``Infinity``, which
    Python's json accepts but JSON (RFC 8259) does not, are a ``ValueError``."""
    raise ValueError(f"{name} is not valid JSON")


# One decoder for every call: json.loads with an option builds a new one each time.
_STRICT_JSON = json.JSONDecoder(parse_constant=reject_constant)


def parse_arguments(text: str) -> object:
    """Argument text as a JSON value, strictly (no ``NaN``), or ``ValueError`` or
    ``RecursionError``: what tools are called with, and what the monitor compares by."""
    if isinstance(text, str) and not text.startswith("\ufeff"):
        return _STRICT_JSON.decode(text)
    # json.loads itself for what it treats apart (bytes, a leading byte-order mark), so that
    # every message stays its own.
    return json.loads(text, parse_constant=reject_constant)


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


# --- evidence: what the tools themselves received ------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolInvocation:
    """One call a tool received, as the tool saw it (not as the agent says it called it)."""

    tool: str
    arguments: Mapping[str, Any]
    """What it received, copied before it ran (not an object: held under the key ``""``)."""
    raised: bool = False
    """The tool raised: the dispatch failed, whatever the agent says."""
    traceback: str | None = None
    """What it raised, in full (for ``--traceback``)."""
    written: str | None = None
    """The arguments' text, when written as the call was received (anything but a flat
    object of plain values, whose copy is the invocation's own and is written when asked
    for)."""
    returned: object = None
    """What the tool returned (``None`` when it raised): the result the agent must feed
    back."""
    message: str = ""
    """What it raised, as ``str(exception)``: the text a failed call's result must hold."""

    @property
    def arguments_text(self) -> str:
        """The arguments as text, for the monitor's messages. Only a message reads it, so a
        flat object of plain values is written when one does, not at every call (an encoding
        per tool call that a passing case would never read)."""
        return self.written if self.written is not None else _written(self.arguments)


def _flat_and_plain(value: object) -> bool:
    """Whether ``value`` is a plain dict of string keys and immutable JSON values: a shallow
    copy of it is a deep one, and its text can neither change nor fail to be written (an int
    within 64 bits: a longer one may be past the conversion limit)."""
    if type(value) is not dict:
        return False
    for key, item in value.items():
        kind = type(item)
        if (
            type(key) is not str
            or kind not in _ATOMS
            or (kind is int and not -(2**63) <= item < 2**63)
        ):
            return False
    return True


def _written(value: object) -> str:
    try:
        return argument_json(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


class InvocationLog:
    """What the case's tools received, in order; shared by the tools of one case.

    The runner takes each turn's invocations to check them against the dispatches the agent
    reported: an agent that reports other arguments than its tool got, or that calls a tool
    the model did not ask for, is caught.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)
        self._invocations: list[ToolInvocation] = []
        self._traces: list[str] = []
        self._lock = threading.Lock()

    def add(self, invocation: ToolInvocation) -> None:
        """Log one call (from whichever thread the agent runs its tools on)."""
        with self._lock:
            self._invocations.append(invocation)
            if invocation.traceback is not None:
                self._traces.append(invocation.traceback)

    def tracebacks(self) -> tuple[str, ...]:
        """Every traceback a tool raised during the case, in order (kept past take())."""
        with self._lock:
            return tuple(self._traces)

    @property
    def pending(self) -> bool:
        """Whether a call was logged since the last take."""
        with self._lock:
            return bool(self._invocations)

    def take(self) -> list[ToolInvocation]:
        """The calls logged since the last take."""
        with self._lock:
            taken, self._invocations = self._invocations, []
            return taken


class RecordedTool:
    """A tool that logs every call it receives, then runs the tool it wraps unchanged."""

    def __init__(self, tool: Tool, log: InvocationLog) -> None:
        self._tool = tool
        self._log = log

    @property
    def name(self) -> str:
        """The wrapped tool's name."""
        return self._tool.name

    @property
    def description(self) -> str:
        """The wrapped tool's description."""
        return self._tool.description

    @property
    def parameters(self) -> dict[str, JSONValue]:
        """The wrapped tool's argument schema."""
        return self._tool.parameters

    def call(self, arguments: dict[str, Any]) -> str:
        """Run the tool, and log the call: a snapshot of its arguments taken before it ran,
        and what it returned or raised."""
        # A flat object of plain values is the log's own copy, whose text cannot fail: it waits
        # until a message needs it. Anything else is written now: deepcopy hands back some
        # objects themselves (enum members, anything its __deepcopy__ says), which may change
        # once the tool has them, and an encoding or repr that raises must fail the call here,
        # before the tool runs, as it always did.
        snapshot, plain = _snapshot(arguments)
        text = None if plain else _written(snapshot)
        received = snapshot if isinstance(snapshot, dict) else {"": snapshot}
        try:
            result = self._tool.call(arguments)
        except BaseException as exc:
            trace = "".join(traceback.format_exception(exc))
            message = _message(exc)
            self._log.add(
                ToolInvocation(self._tool.name, received, True, trace, text, message=message)
            )
            raise
        self._log.add(ToolInvocation(self._tool.name, received, written=text, returned=result))
        return result


_ATOMS = frozenset({str, int, float, bool, type(None)})


def _message(exc: BaseException) -> str:
    """``str(exc)``, or nothing when even that raises (the failed call then need only be
    fed back as failed)."""
    try:
        return str(exc)
    except Exception:
        return ""


def _snapshot(arguments: object) -> tuple[Any, bool]:
    """The arguments as ``copy.deepcopy`` copies them (a dict; anything else as it is), and
    whether they are flat and plain (:func:`_flat_and_plain`). Most calls' arguments are one
    such object, whose deep copy is a copy of the dict holding the same values (deepcopy
    returns these immutable values themselves), made without deepcopy's walk and memo."""
    if _flat_and_plain(arguments):
        return dict(arguments), True  # type: ignore[call-overload]
    return (copy.deepcopy(arguments) if isinstance(arguments, dict) else arguments), False


def recorded_tools(tools: Mapping[str, Tool]) -> tuple[dict[str, Tool], InvocationLog]:
    """The case's tools, each logging what it receives into one fresh :class:`InvocationLog`."""
    log = InvocationLog(tools)
    return {name: RecordedTool(tool, log) for name, tool in tools.items()}, log


# --- tool doubles: tools a fixture declares ------------------------------------------------------


class DoubleError(Exception):
    """A tool double's call failed: its arguments break ``parameters``, or the rule that
    answered it is an ``error`` rule. ``str()`` is the text the call fails with."""


class UnansweredCall(DoubleError):
    """No rule of a tool double answered a call: a run error of the case (the fixture must
    script every answer)."""


class DoubleTool:
    """A fixture's :class:`~evalrunner.model.ToolDouble` as a :class:`Tool`.

    A call whose arguments break ``parameters`` raises ``Invalid arguments for NAME: ...``;
    otherwise the first rule whose ``when`` the arguments hold (:func:`holds`) answers: its
    ``returns`` (text verbatim, another JSON value as compact JSON with sorted keys), or its
    ``error`` raised. A call no rule answers raises :class:`UnansweredCall`, and is first
    handed to ``unanswered`` (the case's monitor makes it the case's sticky run error, so an
    agent that catches the exception cannot hide it).
    """

    def __init__(
        self, double: ToolDouble, unanswered: Callable[[str], object] | None = None
    ) -> None:
        self.double = double
        self._unanswered = unanswered

    @property
    def name(self) -> str:
        """The double's name."""
        return self.double.name

    @property
    def description(self) -> str:
        """The double's description (empty when the fixture gives none)."""
        return self.double.description

    @property
    def parameters(self) -> dict[str, JSONValue]:
        """The double's argument schema; an object of any properties when it gives none."""
        if not self.double.parameters:
            return {"type": "object", "properties": {}}
        return copy.deepcopy(dict(self.double.parameters))

    def call(self, arguments: dict[str, Any]) -> str:
        """Answer one call by the double's rules."""
        answered = answer(self.double, arguments)
        if answered is None:
            message = unanswered_message(self.double.name, arguments)
            if self._unanswered is not None:
                self._unanswered(message)
            raise UnansweredCall(message)
        kind, text = answered
        if kind != "returns":
            raise DoubleError(text)
        return text


DoubleAnswer = tuple[Literal["returns", "error", "invalid"], str]
"""How a double answers a call: a result (``returns``), or a failure with its text (an
``error`` rule, or ``invalid`` arguments)."""


def answer(double: ToolDouble, arguments: object) -> DoubleAnswer | None:
    """How ``double`` answers a call with ``arguments`` (see :class:`DoubleTool`); ``None``
    when no rule does."""
    name = double.name
    if double.parameters:
        from evalrunner.schema_check import argument_problem

        problem = argument_problem(double.parameters, arguments)
        if problem is not None:
            return "invalid", f"Invalid arguments for {name}: {problem}"
    for rule in double.results:
        if rule.when is None or holds(arguments, rule.when):
            if rule.error is not None:
                return "error", rule.error
            return "returns", rule.result_text
    return None


def unanswered_message(name: str, arguments: object) -> str:
    """The run error of a call to the double ``name`` that no rule answers."""
    return (
        f"the tool double {name} has no result for the call with arguments "
        f"{_written(arguments)}: no rule of its results matches them; a fixture scripts "
        "every answer: add a rule whose `when` these arguments hold, or one without `when`"
    )


def with_doubles(
    tools: Mapping[str, Tool],
    doubles: Iterable[ToolDouble],
    unanswered: Callable[[str], object] | None = None,
) -> dict[str, Tool]:
    """``tools`` with the case's doubles among them, each replacing a tool of its name."""
    out = dict(tools)
    for double in doubles:
        out[double.name] = DoubleTool(double, unanswered)
    return out


def double_json(double: ToolDouble) -> dict[str, JSONValue]:
    """A double as the fixture writes it (``name``, ``description``, ``parameters``,
    ``results``), for an agent that runs its own tools (the command agent's case line)."""
    results: list[JSONValue] = []
    for rule in double.results:
        entry: dict[str, JSONValue] = {}
        if rule.when is not None:
            entry["when"] = dict(rule.when)
        if rule.error is not None:
            entry["error"] = rule.error
        else:
            entry["returns"] = rule.returns
        results.append(entry)
    return {
        "name": double.name,
        "description": double.description,
        "parameters": dict(double.parameters),
        "results": results,
    }


def holds(value: object, pattern: object) -> bool:
    """Whether JSON ``value`` holds ``pattern``: an object holds each key of an object
    pattern with a value that holds it (recursively); anything else equals it as a JSON
    value (arrays whole, numbers by value, a boolean never a number)."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            key in value and holds(value[key], want) for key, want in pattern.items()
        )
    return json_equal(value, pattern)


def double_from_json(data: Mapping[str, Any]) -> ToolDouble:
    """A double as :func:`double_json` writes it (a command agent's turn-1 line), back as a
    :class:`~evalrunner.model.ToolDouble`."""
    rules = tuple(
        DoubleRule(rule.get("when"), rule.get("returns"), rule.get("error"))
        for rule in data["results"]
    )
    return ToolDouble(data["name"], rules, data.get("description", ""), data.get("parameters", {}))
