"""An agent built on the official ``anthropic`` SDK (messages with tools), run by evalrunner
as an external command:

    evalrunner run --agent-command "python examples/sdk-agents/anthropic_agent.py [--stream]"

(``--per-case`` declines protocol 2: one process per case, as protocol 1 runs it.)

It speaks evalrunner's agent-command protocol (``agent_protocol.py``; version 2 when the
runner offers it, so that one process, one SDK import and one client serve every case of the
run): one JSON line per turn on stdin
(``{"turn": 1, "user_input": "..."}``), one JSON line back on stdout: ``{"reply": "...",
"tool_calls": [...]}``, where ``tool_calls`` lists every tool dispatch of the turn (id, name,
arguments, the result text fed back to the model, success), so the runner can grade what
happened at the tool boundary. The SDK finds the replay endpoint through
``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``, which evalrunner sets. Failed tool calls are
sent back with ``is_error: true``.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import agent_protocol
import echo_tool
from anthropic import Anthropic

MODEL = "any-model"


def offered(tools: echo_tool.CaseTools) -> list[dict[str, Any]]:
    """The case's tools, as the messages API takes them."""
    return [
        {"name": name, "description": description, "input_schema": parameters}
        for name, description, parameters in tools.specs()
    ]


def complete(
    client: Anthropic, messages: list[dict[str, Any]], tools: list[dict[str, Any]], stream: bool
) -> Any:
    """One model call; the assistant message it returns."""
    request: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": messages,
        "tools": tools,
    }
    if stream:
        with client.messages.stream(**request) as events:
            return events.get_final_message()
    return client.messages.create(**request)


def respond(
    client: Anthropic,
    messages: list[dict[str, Any]],
    tools: echo_tool.CaseTools,
    user_input: str,
    *,
    stream: bool,
) -> dict[str, Any]:
    """Handle one turn, calling the model until it stops asking for tools; the reply line."""
    messages.append({"role": "user", "content": user_input})
    dispatched: list[dict[str, Any]] = []
    while True:
        message = complete(client, messages, offered(tools), stream)
        blocks = [block.model_dump(exclude_none=True) for block in message.content]
        messages.append({"role": "assistant", "content": blocks})
        calls = [block for block in message.content if block.type == "tool_use"]
        if not calls:
            text = "".join(block.text for block in message.content if block.type == "text")
            return {"reply": text, "tool_calls": dispatched}
        results = []
        for call in calls:
            # The wire carries the arguments as an object; the tool reads them as JSON text.
            entry = tools.dispatch(call.id, call.name, json.dumps(call.input, ensure_ascii=False))
            dispatched.append(entry)
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": call.id,
                    "content": entry["result"],
                    "is_error": not entry["success"],
                }
            )
        messages.append({"role": "user", "content": results})


def main() -> None:
    stream = "--stream" in sys.argv[1:]
    # Made once: the replay endpoint keeps its address for the life of the process.
    client = Anthropic(max_retries=0)

    def start_case(doubles: list[dict[str, Any]]) -> agent_protocol.TurnHandler:
        messages: list[dict[str, Any]] = []  # this case's conversation, and only this case's
        tools = echo_tool.CaseTools(doubles)
        return functools.partial(respond, client, messages, tools, stream=stream)

    # --per-case declines protocol 2 (one process per case, as before), for comparison.
    agent_protocol.serve(start_case, persistent="--per-case" not in sys.argv[1:])


if __name__ == "__main__":
    main()
