"""An agent built on the official ``openai`` SDK (chat completions with tools), run by
evalrunner as an external command:

    evalrunner run --agent-command "python examples/sdk-agents/openai_agent.py [--stream]"

It speaks evalrunner's agent-command protocol: one JSON line per turn on stdin
(``{"turn": 1, "user_input": "..."}``), one JSON line back on stdout (``{"reply": "..."}``).
The SDK finds the replay endpoint through ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``, which
evalrunner sets; nothing here knows it is being replayed.
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


def respond(client: OpenAI, messages: list[dict[str, Any]], user_input: str, stream: bool) -> str:
    messages.append({"role": "user", "content": user_input})
    while True:
        message = complete(client, messages, stream)
        if not message.tool_calls:
            messages.append({"role": "assistant", "content": message.content or ""})
            return message.content or ""
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
            messages.append({"role": "tool", "tool_call_id": call.id, "content": entry["result"]})


def main() -> None:
    stream = "--stream" in sys.argv[1:]
    client = OpenAI(max_retries=0)
    messages: list[dict[str, Any]] = []
    for line in sys.stdin:
        turn = json.loads(line)
        reply = respond(client, messages, turn["user_input"], stream)
        print(json.dumps({"reply": reply}, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
