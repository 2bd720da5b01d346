"""The echo agent on the OpenAI Agents SDK (``openai-agents``), run by evalrunner as an external
command:

    evalrunner run --agent-command \
        "python examples/framework-agents/openai_agents_agent.py [--stream] [--chat-completions]"

By default the SDK speaks its default API, the Responses API (``POST /v1/responses``);
``--chat-completions`` forces it onto Chat Completions instead.

The tool is the SDK's natural ``@function_tool`` (``message: str``, strict schema), so invalid
arguments get the SDK's own error text. Unknown tools are returned to the model
(``tool_not_found_behavior="return_error_to_model"``) with the reference text through
``tool_error_formatter``. Turns carry on with ``result.to_input_list()``. Each turn's
dispatches are read from the run's items: the call as the model sent it, and the output the
SDK fed back.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from _common import echo_tool, echo_value, install_request_log, serve
from agents import (
    Agent,
    RunConfig,
    Runner,
    function_tool,
    set_default_openai_api,
    set_tracing_disabled,
)
from agents.items import ToolCallItem, ToolCallOutputItem
from agents.tool_context import ToolContext

install_request_log()
if "--chat-completions" in sys.argv[1:]:
    set_default_openai_api("chat_completions")
set_tracing_disabled(True)

STREAM = "--stream" in sys.argv[1:]
SUCCEEDED: set[str] = set()  # call ids whose tool body ran to completion


@function_tool(name_override=echo_tool.NAME, description_override=echo_tool.DESCRIPTION)
def echo(ctx: ToolContext[Any], message: str) -> str:
    """Echo back the given message.

    Args:
        message: Text to echo back.
    """
    SUCCEEDED.add(ctx.tool_call_id)
    return echo_value(message)


def format_tool_error(args: Any) -> str | None:
    if args.kind == "tool_not_found":
        return f"Unknown tool: {args.tool_name}"
    return None  # the SDK's own text


AGENT = Agent(name="echo-agent", instructions="You can echo text.", tools=[echo], model="any-model")
CONFIG = RunConfig(
    tool_not_found_behavior="return_error_to_model", tool_error_formatter=format_tool_error
)


def _arguments(text: str) -> Any:
    parsed = echo_tool.parse_arguments(text)
    return parsed if isinstance(parsed, dict) else text


async def _streamed(items: list[Any]) -> Any:
    result = Runner.run_streamed(AGENT, items, run_config=CONFIG)
    async for _ in result.stream_events():
        pass
    return result


class Conversation:
    def __init__(self) -> None:
        self.items: list[Any] = []

    def respond(self, user_input: str) -> dict[str, Any]:
        self.items.append({"role": "user", "content": user_input})
        if STREAM:
            result = asyncio.run(_streamed(self.items))
        else:
            result = Runner.run_sync(AGENT, self.items, run_config=CONFIG)
        self.items = result.to_input_list()
        calls: dict[str, Any] = {}
        dispatched: list[dict[str, Any]] = []
        for item in result.new_items:
            if isinstance(item, ToolCallItem):
                raw = item.raw_item
                calls[raw.call_id] = raw
            elif isinstance(item, ToolCallOutputItem):
                raw_out = item.raw_item
                call_id = raw_out["call_id"] if isinstance(raw_out, dict) else raw_out.call_id
                output = raw_out["output"] if isinstance(raw_out, dict) else raw_out.output
                call = calls[call_id]
                dispatched.append(
                    {
                        "id": call_id,
                        "name": call.name,
                        "arguments": _arguments(call.arguments),
                        "result": output if isinstance(output, str) else json.dumps(output),
                        "success": call_id in SUCCEEDED,
                    }
                )
        return {"reply": str(result.final_output or ""), "tool_calls": dispatched}


if __name__ == "__main__":
    serve(Conversation().respond)
