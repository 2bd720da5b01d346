"""The echo tool both SDK agents offer, with the result texts evalrunner's reference agent
uses, so the same fixtures give the same verdicts whichever agent runs them.

:func:`dispatch` runs one tool call and returns its entry for the reply line's ``tool_calls``
(``schemas/agent-command/reply.schema.json``): the agent feeds ``result`` back to the model and
prints the entry, so the runner sees exactly what the model was shown. :class:`CaseTools` adds
the case's tool doubles (a fixture's ``tools:``, listed on turn 1's line) to echo.
"""

from __future__ import annotations

import json
import re
from typing import Any

NAME = "echo"
DESCRIPTION = "Echo back the given message."
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "Text to echo back."}},
    "required": ["message"],
}

_JSON_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class _NotJSON(ValueError):
    """Argument text that Python's ``json`` accepts but JSON (RFC 8259) does not."""


def _reject_constant(name: str) -> Any:
    # Python's json reads NaN, Infinity and -Infinity; JSON has no such values.
    raise _NotJSON(f"{name} is not valid JSON")


def parse_arguments(argument_text: str) -> dict[str, Any] | str:
    """The arguments object, or a string: why the text is not a JSON object.

    Strict JSON, as evalrunner's reference agent reads it: no NaN/Infinity, no lone
    surrogate escapes; duplicate keys are allowed and the last one wins.
    """
    try:
        arguments = json.loads(argument_text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return exc.msg
    except RecursionError:
        return "nesting too deep"
    except _NotJSON as exc:
        return str(exc)
    if not isinstance(arguments, dict):
        kind = "null" if arguments is None else _JSON_NAMES.get(type(arguments), "value")
        return f"expected a JSON object, got {kind}"
    if _has_lone_surrogate(arguments):
        # "\ud800" decodes to half a UTF-16 pair, which is not text; strict parsers refuse it.
        return "a string holds a lone surrogate escape (not a Unicode scalar value)"
    return arguments


def _has_lone_surrogate(value: object) -> bool:
    """Whether any string (key or value) holds an unpaired surrogate; iterative, as the
    data may be nested deeper than Python's recursion limit allows."""
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


def echo(arguments: dict[str, Any]) -> str:
    """The tool itself: ``message`` when it is a string, else ``(empty)``."""
    message = arguments.get("message")
    return message if isinstance(message, str) else "(empty)"


def dispatch(call_id: str, name: str, argument_text: str) -> dict[str, Any]:
    """Run one tool call; its ``tool_calls`` entry: id, name, arguments, result, success.

    ``arguments`` is the parsed object when the text is a JSON object, else the raw text.
    The result texts are the reference agent's: ``Unknown tool: <name>``, ``Invalid
    arguments for <name>: <reason>``, ``Error: <message>``, ``(no output)`` when empty.
    """
    parsed = parse_arguments(argument_text)
    arguments: dict[str, Any] | str = parsed if isinstance(parsed, dict) else argument_text

    def entry(result: str, success: bool) -> dict[str, Any]:
        return {
            "id": call_id,
            "name": name,
            "arguments": arguments,
            "result": result,
            "success": success,
        }

    # Checked in the reference agent's order: an unknown tool is reported as such even when
    # its arguments are malformed too.
    if name != NAME:
        return entry(f"Unknown tool: {name}", False)
    if not isinstance(parsed, dict):
        return entry(f"Invalid arguments for {name}: {parsed}", False)
    try:
        result = echo(parsed)
    except Exception as exc:  # a failing tool is a failed call the model is told about
        return entry(f"Error: {exc}", False)
    return entry(result or "(no output)", True)


# --- the case's tool doubles ---------------------------------------------------------------------


class CaseTools:
    """The tools of one case: echo, and the tool doubles the runner lists on turn 1's line
    (``"tools"``, ``schemas/agent-command/turn.schema.json``), a double replacing echo if it
    takes its name. Results follow evalrunner's reference agent, so verdicts agree."""

    def __init__(self, doubles: list[dict[str, Any]]) -> None:
        self.doubles = {double["name"]: double for double in doubles}

    def specs(self) -> list[tuple[str, str, dict[str, Any]]]:
        """Each tool as (name, description, parameters), to offer the model."""
        out = [] if NAME in self.doubles else [(NAME, DESCRIPTION, PARAMETERS)]
        for double in self.doubles.values():
            parameters = double["parameters"] or {"type": "object", "properties": {}}
            out.append((double["name"], double["description"], parameters))
        return out

    def dispatch(self, call_id: str, name: str, argument_text: str) -> dict[str, Any]:
        """Run one tool call; its ``tool_calls`` entry (see :func:`dispatch`)."""
        double = self.doubles.get(name)
        if double is None:
            return dispatch(call_id, name, argument_text)
        parsed = parse_arguments(argument_text)
        entry: dict[str, Any] = {
            "id": call_id,
            "name": name,
            "arguments": parsed if isinstance(parsed, dict) else argument_text,
        }
        if not isinstance(parsed, dict):
            return {**entry, "result": f"Invalid arguments for {name}: {parsed}", "success": False}
        problem = _argument_problem(double["parameters"], parsed)
        if problem is not None:
            failed = f"Error: Invalid arguments for {name}: {problem}"
            return {**entry, "result": failed, "success": False}
        for rule in double["results"]:
            if "when" in rule and not holds(parsed, rule["when"]):
                continue
            if "error" in rule:
                return {**entry, "result": f"Error: {rule['error']}", "success": False}
            returns = rule["returns"]
            text = returns if isinstance(returns, str) else _compact(returns)
            return {**entry, "result": text or "(no output)", "success": True}
        # The fixture scripts no answer: the call fails, and the runner, which knows the
        # doubles too, makes that the case's error.
        unanswered = f"Error: the tool double {name} has no result for {_compact(parsed)}"
        return {**entry, "result": unanswered, "success": False}


def holds(value: Any, pattern: Any) -> bool:
    """Whether JSON ``value`` holds ``pattern``: objects as subsets (recursively), anything
    else equal as JSON values (a boolean is never a number)."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            key in value and holds(value[key], want) for key, want in pattern.items()
        )
    return _json_equal(value, pattern)


def _json_equal(left: Any, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return bool(left == right)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_json_equal, left, right))
    return type(left) is type(right) and bool(left == right)


def _compact(value: Any) -> str:
    """JSON as evalrunner writes argument text: compact, keys sorted, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _argument_problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` break the double's ``parameters`` schema, worded as evalrunner words
    it, or ``None``."""
    if not schema:
        return None
    from jsonschema import Draft202012Validator, FormatChecker
    from jsonschema.exceptions import best_match

    # The formats evalrunner asserts in a fixture's schema (admission refuses any other).
    formats = FormatChecker(["date", "email", "idn-email", "ipv4", "ipv6", "uuid"])
    validator = Draft202012Validator(schema, format_checker=formats)
    error = best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    at = "".join(
        f"[{p}]" if isinstance(p, int) else f".{p}" if p.isidentifier() else f"[{json.dumps(p)}]"
        for p in error.absolute_path
    )
    return f"{error.message} (at ${at})" if at else error.message
