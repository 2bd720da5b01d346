"""The echo agent on pydantic-ai, run by evalrunner as an external command:

    evalrunner run --agent-command "python examples/framework-agents/pydantic_ai_agent.py openai"
    evalrunner run --agent-command "python examples/framework-agents/pydantic_ai_agent.py anthropic"

``openai`` is ``OpenAIChatModel`` (Chat Completions), ``anthropic`` is ``AnthropicModel``
(Messages). The tool is pydantic-ai's natural ``tool_plain`` (``message: str``): arguments
that fail validation and unknown tools go back to the model as pydantic-ai's own retry prompts.
Turns carry on through ``message_history=result.all_messages()``. Each turn's dispatches are
read from its new messages (calls from ``ToolCallPart``, success from the return part), with
the result text exactly as the request carried it (``_common.FED_BACK``).
"""

from __future__ import annotations

import sys
from typing import Any

from _common import FED_BACK, argument_entry, echo_tool, echo_value, install_request_log, serve
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
)

install_request_log()


def build_model(kind: str) -> Any:
    if kind == "openai":
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        return OpenAIChatModel("any-model", provider=OpenAIProvider())
    if kind == "anthropic":
        import os

        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        return AnthropicModel(
            "any-model", provider=AnthropicProvider(base_url=os.environ["ANTHROPIC_BASE_URL"])
        )
    raise SystemExit(f"usage: pydantic_ai_agent.py openai|anthropic (got {kind!r})")


KIND = sys.argv[1] if len(sys.argv) > 1 else "openai"
STREAM = "--stream" in sys.argv[2:]
AGENT = Agent(build_model(KIND), instructions="You can echo text.")


@AGENT.tool_plain(name=echo_tool.NAME, description=echo_tool.DESCRIPTION)
def echo(message: str) -> str:
    """Echo back the given message."""
    return echo_value(message)


def _entry(call: ToolCallPart, result: ToolReturnPart | RetryPromptPart) -> dict[str, Any]:
    """The reply line's entry: a tool return part that succeeded is a success; a retry prompt
    (unknown tool, invalid arguments) or an errored return is a failure."""
    ok = isinstance(result, ToolReturnPart) and getattr(result, "outcome", "success") == "success"
    return {
        "id": call.tool_call_id,
        "name": call.tool_name,
        "arguments": argument_entry(call.args if call.args is not None else ""),
        "result": FED_BACK.get(call.tool_call_id, ""),
        "success": ok,
    }


class Conversation:
    def __init__(self) -> None:
        self.history: list[Any] = []

    def respond(self, user_input: str) -> dict[str, Any]:
        if STREAM:
            with AGENT.run_stream_sync(user_input, message_history=self.history) as run:
                reply = run.get_output()
                messages = run.all_messages()
                new = run.new_messages()
        else:
            result = AGENT.run_sync(user_input, message_history=self.history)
            reply, messages, new = result.output, result.all_messages(), result.new_messages()
        self.history = messages
        calls: dict[str, ToolCallPart] = {}
        dispatched: list[dict[str, Any]] = []
        for message in new:
            if isinstance(message, ModelResponse):
                for part in message.parts:
                    if isinstance(part, ToolCallPart):
                        calls[part.tool_call_id] = part
            elif isinstance(message, ModelRequest):
                for result in message.parts:
                    if isinstance(result, ToolReturnPart | RetryPromptPart):
                        call = calls.get(result.tool_call_id)
                        if call is not None:
                            dispatched.append(_entry(call, result))
        return {"reply": str(reply), "tool_calls": dispatched}


if __name__ == "__main__":
    serve(Conversation().respond)
