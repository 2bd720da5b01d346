"""A small agent of its own, in plain Python, tested with evalrunner.

It is not evalrunner's reference agent: it keeps its own conversation, runs its own tool loop
(asynchronously, to show that ``respond`` may be a coroutine), and has two tools of its own,
``convert_temperature`` and ``word_count``. evalrunner replays each fixture's scripted model
responses through it and grades what it dispatched.

Wired up in ``evalrunner.toml`` beside this file:

    agent = "units_agent:make_agent"
    tools = ["units_agent:ConvertTemperature", "units_agent:WordCount"]
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from evalrunner import (
    AgentContext,
    Message,
    ModelRequest,
    RunError,
    TextResponse,
    ToolCallRecord,
    ToolSpec,
)

MAX_TOOL_ROUNDS = 4


class ConvertTemperature:
    """Converts between Celsius and Fahrenheit."""

    name = "convert_temperature"
    description = "Convert a temperature between Celsius (C) and Fahrenheit (F)."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "value": {"type": "number"},
            "to": {"enum": ["C", "F"]},
        },
        "required": ["value", "to"],
    }

    def call(self, arguments: dict[str, Any]) -> str:
        value, to = arguments.get("value"), arguments.get("to")
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError("value must be a number")
        if to == "F":
            return f"{value * 9 / 5 + 32:g} F"
        if to == "C":
            return f"{(value - 32) * 5 / 9:g} C"
        raise ValueError("to must be 'C' or 'F'")


class WordCount:
    """Counts the words of a text."""

    name = "word_count"
    description = "Count the words in a text."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    def call(self, arguments: dict[str, Any]) -> str:
        text = arguments.get("text")
        if not isinstance(text, str):
            raise ValueError("text must be a string")
        return str(len(text.split()))


class UnitsAgent:
    """Answers with the model's help, running tool calls until the model replies with text."""

    def __init__(self, context: AgentContext) -> None:
        self.model = context.provider
        self.tools = context.tools
        self.observer = context.observer
        self.history: list[Message] = []
        self.offered = tuple(
            ToolSpec(t.name, t.description, dict(t.parameters)) for t in self.tools.values()
        )

    async def respond(self, user_input: str) -> str:
        self.history.append(Message("user", user_input))
        for _ in range(MAX_TOOL_ROUNDS + 1):
            response = self.model.complete(ModelRequest(tuple(self.history), self.offered))
            if isinstance(response, TextResponse):
                self.history.append(Message("assistant", response.content))
                return response.content
            self.history.append(Message("assistant", "", tool_calls=response.tool_calls))
            for call in response.tool_calls:
                result, ok = self.run_tool(call.name, call.arguments)
                # Reporting each dispatch is what lets evalrunner grade the tool boundary.
                self.observer.on_tool_call(
                    ToolCallRecord(call.name, call.arguments, result, ok, call.id)
                )
                self.history.append(Message("tool", result, tool_call_id=call.id))
        raise RunError(f"more than {MAX_TOOL_ROUNDS} tool rounds in one turn")

    def run_tool(self, name: str, argument_text: str) -> tuple[str, bool]:
        tool = self.tools.get(name)
        if tool is None:
            return f"no such tool: {name}", False
        try:
            arguments = json.loads(argument_text)
            if not isinstance(arguments, dict):
                raise ValueError("arguments must be an object")
            return tool.call(arguments), True
        except (ValueError, TypeError) as exc:
            return f"tool error: {exc}", False


def make_agent(context: AgentContext) -> UnitsAgent:
    """The factory evalrunner calls once per case."""
    return UnitsAgent(context)
