"""The agent interface and the reference agent loop (SPEC §5).

An :class:`Agent` takes one turn's user input and returns its reply. The runner builds a fresh
one per case from an :data:`AgentFactory`, handing it an :class:`AgentContext`: the model
provider, the tools, the observer and a private workspace. A user's own agent plugs in as
another factory; the stages do not change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from evalrunner.model import Message, ModelRequest, RunError, TextResponse
from evalrunner.observer import Observer
from evalrunner.provider import ModelProvider
from evalrunner.tools import Tool, dispatch, tool_spec

DEFAULT_MAX_TOOL_ITERATIONS = 10


@runtime_checkable
class Agent(Protocol):
    """Something that holds a conversation: one call per user turn, returning the reply.

    ``respond`` may be a coroutine function (``async def``): the runner awaits it, on one event
    loop per case. An optional ``close()`` method is called when the case ends (or times out),
    to release what the agent holds.
    """

    def respond(self, user_input: str) -> str | Awaitable[str]:
        """Handle one user message; return (or resolve to) the reply text for this turn."""
        ...


@dataclass(frozen=True)
class AgentContext:
    """Everything an agent gets for one case. Nothing in it is shared between cases."""

    provider: ModelProvider
    tools: Mapping[str, Tool]
    observer: Observer
    workspace: Path
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS


AgentFactory = Callable[[AgentContext], Agent]
"""Builds a fresh agent for one case."""


class ReferenceAgent:
    """The agent loop evalrunner ships: call the model, dispatch tool calls, feed results back.

    Per turn: append the user message; call the model; on tool calls dispatch each in order,
    record it and append its result, then call the model again; on text, that is the reply.
    More than ``max_tool_iterations`` tool-call responses in one turn is a run error.
    """

    def __init__(self, context: AgentContext) -> None:
        self._context = context
        self._history: list[Message] = []
        self._specs = tuple(tool_spec(tool) for tool in context.tools.values())

    def _append(self, message: Message) -> None:
        self._history.append(message)
        self._context.observer.on_message(message)

    def respond(self, user_input: str) -> str:
        """Run one turn of the loop."""
        context = self._context
        self._append(Message("user", user_input))
        tool_rounds = 0
        while True:
            response = context.provider.complete(ModelRequest(tuple(self._history), self._specs))
            if isinstance(response, TextResponse):
                self._append(Message("assistant", response.content))
                return response.content
            tool_rounds += 1
            if tool_rounds > context.max_tool_iterations:
                raise RunError(
                    f"more than {context.max_tool_iterations} model calls returned tool calls "
                    "in one turn (max_tool_iterations); the agent was stopped as looping"
                )
            self._append(Message("assistant", "", tool_calls=response.tool_calls))
            for call in response.tool_calls:
                record = dispatch(context.tools, call)
                context.observer.on_tool_call(record)
                self._append(Message("tool", record.result, tool_call_id=call.id))


def reference_agent(context: AgentContext) -> Agent:
    """The default :data:`AgentFactory`."""
    return ReferenceAgent(context)
