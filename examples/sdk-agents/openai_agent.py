"""An agent built on the official ``openai`` SDK (chat completions with tools), run by
evalrunner as an external command:

    evalrunner run --agent-command "python examples/sdk-agents/openai_agent.py [--stream]"

(``--per-case`` declines protocol 2: one process per case, as protocol 1 runs it.)

It speaks evalrunner's agent-command protocol (``agent_protocol.py``; version 2 when the
runner offers it, so that one process, one SDK import and one client serve every case of the
run): one JSON line per turn on stdin
(``{"turn": 1, "user_input": "..."}``), one JSON line back on stdout: ``{"reply": "...",
"tool_calls": [...]}``, where ``tool_calls`` lists every tool dispatch of the turn (id, name,
arguments, the result text fed back to the model, success), so the runner can grade what
happened at the tool boundary. The SDK finds the replay endpoint through ``OPENAI_BASE_URL``
and ``OPENAI_API_KEY``, which evalrunner sets; nothing here knows it is being replayed.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import agent_protocol
import echo_tool
from openai import OpenAI

MODEL = "any-model"  # the replay endpoint serves the fixture whatever the model is called


def offered(tools: echo_tool.CaseTools) -> list[dict[str, Any]]:
    """The case's tools, as chat completions takes them."""
    return [
        {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        }
        for name, description, parameters in tools.specs()
    ]


def complete(
    client: OpenAI, messages: list[dict[str, Any]], tools: list[dict[str, Any]], stream: bool
) -> Any:
    """One model call; the assistant message of its answer."""
    if stream:
        with client.chat.completions.stream(
            model=MODEL, messages=messages, tools=tools  # type: ignore[arg-type]
        ) as events:
            return events.get_final_completion().choices[0].message
    answer = client.chat.completions.create(
        model=MODEL, messages=messages, tools=tools  # type: ignore[arg-type]
    )
    return answer.choices[0].message


def respond(
    client: OpenAI,
    messages: list[dict[str, Any]],
    tools: echo_tool.CaseTools,
    user_input: str,
    *,
    stream: bool,
) -> dict[str, Any]:
    """Handle one turn, calling the model until it answers with text; the turn's reply line."""
    messages.append({"role": "user", "content": user_input})
    dispatched: list[dict[str, Any]] = []
    while True:
        message = complete(client, messages, offered(tools), stream)
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
            entry = tools.dispatch(call.id, call.function.name, call.function.arguments)
            dispatched.append(entry)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": entry["result"]})


def main() -> None:
    stream = "--stream" in sys.argv[1:]
    # Made once: the replay endpoint keeps its address for the life of the process.
    client = OpenAI(max_retries=0)

    def start_case(doubles: list[dict[str, Any]]) -> agent_protocol.TurnHandler:
        messages: list[dict[str, Any]] = []  # this case's conversation, and only this case's
        tools = echo_tool.CaseTools(doubles)
        return functools.partial(respond, client, messages, tools, stream=stream)

    # --per-case declines protocol 2 (one process per case, as before), for comparison.
    agent_protocol.serve(start_case, persistent="--per-case" not in sys.argv[1:])

if __name__ == "__main__":
    main()
