"""The echo agent on LangGraph's prebuilt ReAct agent (``create_react_agent``), run by evalrunner
as an external command:

    evalrunner run --agent-command "python examples/framework-agents/langgraph_agent.py openai"
    evalrunner run --agent-command "python examples/framework-agents/langgraph_agent.py anthropic"

``openai`` is ``ChatOpenAI(use_responses_api=False)`` (Chat Completions), ``anthropic`` is
``ChatAnthropic`` (Messages); ``--stream`` makes the chat model stream. The tool is a
LangChain ``@tool`` (``message: str``) run by the graph's ``ToolNode``, whose own texts answer
unknown tools and invalid arguments. Turns carry on with the graph state's messages. Each
turn's dispatches are read from its new messages (the AI message's tool calls, the
``ToolMessage`` and its status), with the result text as the request carried it.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from _common import FED_BACK, argument_entry, echo_tool, echo_value, install_request_log, serve
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

install_request_log()
warnings.filterwarnings("ignore")  # create_react_agent's deprecation notice

from langgraph.prebuilt import create_react_agent  # noqa: E402

KIND = sys.argv[1] if len(sys.argv) > 1 else "openai"
STREAM = "--stream" in sys.argv[2:]


def build_model(kind: str) -> Any:
    if kind == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model="any-model", use_responses_api=False, streaming=STREAM, max_retries=0
        )
    if kind == "anthropic":
        from langchain_anthropic import ChatAnthropic

        return ChatAnthropic(model="any-model", streaming=STREAM, max_retries=0)
    raise SystemExit(f"usage: langgraph_agent.py openai|anthropic [--stream] (got {kind!r})")


@tool(echo_tool.NAME, description=echo_tool.DESCRIPTION)
def echo(message: str) -> str:
    """Echo back the given message."""
    return echo_value(message)


GRAPH = create_react_agent(build_model(KIND), [echo], prompt="You can echo text.")


class Conversation:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    def respond(self, user_input: str) -> dict[str, Any]:
        start = len(self.messages)
        state = GRAPH.invoke({"messages": [*self.messages, HumanMessage(user_input)]})
        self.messages = state["messages"]
        calls: dict[str, dict[str, Any]] = {}
        dispatched: list[dict[str, Any]] = []
        reply = ""
        for message in self.messages[start:]:
            if isinstance(message, AIMessage):
                for call in message.tool_calls:
                    calls[call["id"]] = {"name": call["name"], "arguments": call["args"]}
                for bad in message.invalid_tool_calls:
                    calls[bad["id"]] = {"name": bad["name"], "arguments": bad["args"] or ""}
                reply = message.text if isinstance(message.text, str) else message.text()
            elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
                call = calls[message.tool_call_id]
                dispatched.append(
                    {
                        "id": message.tool_call_id,
                        "name": call["name"],
                        "arguments": argument_entry(call["arguments"]),
                        "result": FED_BACK.get(message.tool_call_id, ""),
                        "success": message.status == "success",
                    }
                )
        return {"reply": reply, "tool_calls": dispatched}


if __name__ == "__main__":
    serve(Conversation().respond)
