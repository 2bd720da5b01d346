"""An agent built on the official ``openai`` SDK (chat completions with tools), run by
evalrunner as an external command:

    evalrunner run --agent-command "python examples/sdk-agents/openai_agent.py [--stream]"

It speaks evalrunner's agent-command protocol: one JSON line per turn on stdin
(``{"turn": 1, "user_input": "..."}``), one JSON line back on stdout: ``{"reply": "...",
"tool_calls": [...]}``, where ``tool_calls`` lists every tool dispatch of the turn (id, name,
arguments, the result text fed back to the model, success), so the runner can grade what
happened at the tool boundary. The SDK finds the replay endpoint through ``OPENAI_BASE_URL``
and ``OPENAI_API_KEY``, which evalrunner sets; nothing here knows it is being replayed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import echo_tool
from openai import OpenAI

MODEL = "any-model"  # the replay endpoint serves the fixture whatever the model is called
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": echo_tool.NAME,
            "description": echo_tool.DESCRIPTION,
            "parameters": echo_tool.PARAMETERS,
        },
    }
]


def complete(client: OpenAI, messages: list[dict[str, Any]], stream: bool) -> Any:
    """One model call; the assistant message of its answer."""
    if stream:
        with client.chat.completions.stream(
            model=MODEL, messages=messages, tools=TOOLS  # type: ignore[arg-type]
        ) as events:
            return events.get_final_completion().choices[0].message
    answer = client.chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS  # type: ignore[arg-type]
    )
    return answer.choices[0].message


def respond(
    client: OpenAI, messages: list[dict[str, Any]], user_input: str, stream: bool
) -> dict[str, Any]:
    """Handle one turn, calling the model until it answers with text; the turn's reply line."""
    messages.append({"role": "user", "content": user_input})
    dispatched: list[dict[str, Any]] = []
    while True:
        message = complete(client, messages, stream)
        if not message.tool_calls:
            messages.append({"role": "assistant", "content": message.content or ""})
            return {"reply": message.content or "", "tool_calls": dispatched}
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                    for call in message.tool_calls
                ],
            }
        )
        for call in message.tool_calls:
            entry = echo_tool.dispatch(call.id, call.function.name, call.function.arguments)
            dispatched.append(entry)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": entry["result"]})


def main() -> None:
    stream = "--stream" in sys.argv[1:]
    client = OpenAI(max_retries=0)
    messages: list[dict[str, Any]] = []
    for line in sys.stdin:
        turn = json.loads(line)
        reply_line = respond(client, messages, turn["user_input"], stream)
        # ASCII-escaped, so that any string (even a lone surrogate) can be written to stdout.
        print(json.dumps(reply_line), flush=True)


if __name__ == "__main__":
    main()
