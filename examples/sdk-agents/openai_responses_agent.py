"""An agent built on the official ``openai`` SDK's Responses API (``client.responses.create``
with function tools), run by evalrunner as an external command:

    evalrunner run --agent-command \
        "python examples/sdk-agents/openai_responses_agent.py [--stream] [--previous-response]"

(``--per-case`` declines protocol 2: one process per case, as protocol 1 runs it.)

By default it keeps the conversation itself, as input items: each response's output items are
appended as they came, then one ``function_call_output`` item per call. With
``--previous-response`` it lets the server keep it instead, sending only the new items with
``previous_response_id`` (the replay endpoint resolves the id against the responses it served
in the case, as the real API does). With ``--stream`` each call is a stream of events, whose
``response.completed`` event carries the response.

It speaks evalrunner's agent-command protocol (``agent_protocol.py``) and reports every
dispatch in its reply line, as ``openai_agent.py`` does: the Responses API has no error flag on
a tool result, so the reported ``success`` is the only evidence ``all_tools_succeeded`` can
grade. The SDK finds the replay endpoint through ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``,
which evalrunner sets.
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
    """The case's tools, as the Responses API takes them."""
    return [
        {"type": "function", "name": name, "description": description, "parameters": parameters}
        for name, description, parameters in tools.specs()
    ]


class Conversation:
    """One case's conversation: the input items so far, and the latest response's id."""

    def __init__(self, tools: echo_tool.CaseTools) -> None:
        self.tools = tools
        self.items: list[Any] = []
        self.last_id: str | None = None


def complete(
    client: OpenAI, conversation: Conversation, new: list[Any], *, stream: bool, previous: bool
) -> Any:
    """One model call sending ``new`` items; the response, its output kept in the
    conversation."""
    request: dict[str, Any] = {"model": MODEL, "tools": offered(conversation.tools)}
    if previous and conversation.last_id is not None:
        request.update(input=new, previous_response_id=conversation.last_id)
    else:
        request["input"] = conversation.items + new
    if stream:
        response = None
        for event in client.responses.create(**request, stream=True):
            if event.type == "response.completed":
                response = event.response
        if response is None:
            raise RuntimeError("the stream ended without response.completed")
    else:
        response = client.responses.create(**request)
    conversation.items += new
    conversation.items += [item.model_dump(exclude_none=True) for item in response.output]
    conversation.last_id = response.id
    return response


def respond(
    client: OpenAI, conversation: Conversation, user_input: str, *, stream: bool, previous: bool
) -> dict[str, Any]:
    """Handle one turn, calling the model until it answers with text; the turn's reply line."""
    new: list[Any] = [{"role": "user", "content": user_input}]
    dispatched: list[dict[str, Any]] = []
    while True:
        response = complete(client, conversation, new, stream=stream, previous=previous)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return {"reply": response.output_text, "tool_calls": dispatched}
        new = []
        for call in calls:
            entry = conversation.tools.dispatch(call.call_id, call.name, call.arguments)
            dispatched.append(entry)
            new.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": entry["result"]}
            )


def main() -> None:
    flags = sys.argv[1:]
    # Made once: the replay endpoint keeps its address for the life of the process.
    client = OpenAI(max_retries=0)

    def start_case(doubles: list[dict[str, Any]]) -> agent_protocol.TurnHandler:
        conversation = Conversation(echo_tool.CaseTools(doubles))  # this case's, and only its
        return functools.partial(
            respond,
            client,
            conversation,
            stream="--stream" in flags,
            previous="--previous-response" in flags,
        )

    agent_protocol.serve(start_case, persistent="--per-case" not in flags)


if __name__ == "__main__":
    main()
