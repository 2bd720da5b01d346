"""The echo agent on the Anthropic SDK's beta tool runner (``client.beta.messages.tool_runner``),
run by evalrunner as an external command:

    evalrunner run --agent-command \
        "python examples/framework-agents/anthropic_tool_runner_agent.py [--stream]"

The tool is a ``@beta_tool`` function (``message: str``); the runner validates the input, runs
the tool, and answers unknown tools and failures with its own texts (``is_error: true``). The
runner is given the whole history each turn (``thread=False``: the replay endpoint has no
server-side threads), and the history is kept as the documented loop builds it: each message
the runner yields, then ``runner.generate_tool_call_response()``. Each turn's dispatches come
from those tool results.
"""

from __future__ import annotations

import sys
from typing import Any

from _common import FED_BACK, argument_entry, echo_tool, echo_value, install_request_log, serve
from anthropic import Anthropic, beta_tool

install_request_log()
STREAM = "--stream" in sys.argv[1:]


@beta_tool(name=echo_tool.NAME, description=echo_tool.DESCRIPTION)
def echo(message: str) -> str:
    """Echo back the given message.

    Args:
        message: Text to echo back.
    """
    return echo_value(message)


class Conversation:
    def __init__(self) -> None:
        self.client = Anthropic(max_retries=0)
        self.messages: list[Any] = []

    def respond(self, user_input: str) -> dict[str, Any]:
        self.messages.append({"role": "user", "content": user_input})
        runner = self.client.beta.messages.tool_runner(
            model="any-model",
            max_tokens=1024,
            messages=list(self.messages),
            tools=[echo],
            stream=STREAM,
            thread=False,
        )
        dispatched: list[dict[str, Any]] = []
        reply = ""
        for item in runner:
            message = item.get_final_message() if STREAM else item
            self.messages.append(
                {
                    "role": "assistant",
                    "content": [b.model_dump(exclude_none=True) for b in message.content],
                }
            )
            reply = "".join(b.text for b in message.content if b.type == "text")
            calls = {b.id: b for b in message.content if b.type == "tool_use"}
            results = runner.generate_tool_call_response()
            if results is None:
                continue
            self.messages.append(results)
            for block in results["content"]:
                call = calls[block["tool_use_id"]]
                dispatched.append(
                    {
                        "id": call.id,
                        "name": call.name,
                        "arguments": argument_entry(call.input),
                        "result": FED_BACK.get(call.id, ""),
                        "success": not block.get("is_error", False),
                    }
                )
        # Results of the last round were sent with the final request: FED_BACK now has them.
        for entry in dispatched:
            entry["result"] = FED_BACK.get(entry["id"], entry["result"])
        return {"reply": reply, "tool_calls": dispatched}


if __name__ == "__main__":
    serve(Conversation().respond)
