"""The echo tool both SDK agents offer, with the result texts evalrunner's reference agent
uses, so the same fixtures give the same verdicts whichever agent runs them."""

from __future__ import annotations

import json
from typing import Any

NAME = "echo"
DESCRIPTION = "Echo back the given message."
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "Text to echo back."}},
    "required": ["message"],
}

_JSON_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def run(name: str, argument_text: str) -> tuple[str, bool]:
    """Dispatch one call: (result text the model is shown, whether the call succeeded)."""
    if name != NAME:
        return f"Unknown tool: {name}", False
    try:
        arguments = json.loads(argument_text)
    except json.JSONDecodeError as exc:
        return f"Invalid arguments for {name}: {exc.msg}", False
    if not isinstance(arguments, dict):
        kind = "null" if arguments is None else _JSON_NAMES.get(type(arguments), "value")
        return f"Invalid arguments for {name}: expected a JSON object, got {kind}", False
    message = arguments.get("message")
    result = message if isinstance(message, str) else "(empty)"
    return result or "(no output)", True
