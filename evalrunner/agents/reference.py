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

from evalrunner.boundary.observer import Observer
from evalrunner.boundary.provider import ModelProvider
from evalrunner.boundary.tools import Tool, dispatch, tool_spec
from evalrunner.model import DEFAULT_MAX_TOOL_ITERATIONS as DEFAULT_MAX_TOOL_ITERATIONS
from evalrunner.model import (
    Message,
    ModelRequest,
    ModelResponse,
    RunError,
    TextResponse,
    ToolCall,
    ToolCallRecord,
    ToolDouble,
)


@runtime_checkable
class Agent(Protocol):
    """Something that holds a conversation: one call per user turn, returning the reply.

    ``respond`` may be a coroutine function (``async def``): the runner awaits it, on one event
    loop per case. An optional ``close()`` method is called when the case ends (or times out),
    to release what the agent holds; a :class:`RunError` it raises fails the case.

    Two optional attributes tell the runner what evidence the agent gives:
    ``reports_dispatches`` (default true: every dispatch is reported to the observer; read
    after each turn) and ``runs_own_tools`` (default false: the agent runs the tools of its
    context, whose invocations are checked against its reports). An agent that says it runs
    its own tools but calls its context's is held to them all the same, in the turns it does.
    """

    def respond(self, user_input: str) -> str | Awaitable[str]:
        """Handle one user message; return (or resolve to) the reply text for this turn."""
        ...


class _Workspace:
    """The ``workspace`` field of :class:`AgentContext`: a directory, or a function that
    makes one, called once, the first time the agent asks for it.

    The runner passes a function, so a case whose agent never touches its workspace costs no
    directory to make and remove (on some file systems that is most of a cheap case's time).
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}_source"

    def __get__(self, instance: object, owner: type | None = None) -> Path:
        if instance is None:
            raise AttributeError(self._slot)  # tells dataclasses the field has no default
        source: Path | Callable[[], Path] = instance.__dict__[self._slot]
        if not isinstance(source, Path):
            source = source()
            instance.__dict__[self._slot] = source
        return source

    def __set__(self, instance: object, value: Path | Callable[[], Path]) -> None:
        if self._slot in instance.__dict__:
            raise AttributeError("an agent's workspace cannot be changed")
        instance.__dict__[self._slot] = value


@dataclass(frozen=True)  # no slots: the workspace descriptor keeps its source in __dict__
class AgentContext:
    """Everything an agent gets for one case. Nothing in it is shared between cases.

    ``workspace`` is a private directory for the case; it is made the first time it is read
    (a function that makes it may be given instead of a path).
    """

    provider: ModelProvider
    tools: Mapping[str, Tool]
    observer: Observer
    workspace: _Workspace = _Workspace()
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS
    doubles: tuple[ToolDouble, ...] = ()
    """The case's tool doubles (``tools:`` in the fixture). In-process agents get them among
    ``tools`` already; an agent that runs its own tools serves them from here."""


AgentFactory = Callable[[AgentContext], Agent]
"""Builds a fresh agent for one case."""


class ReferenceAgent:
    """The agent loop evalrunner ships: call the model, dispatch tool calls, feed results back.

    Per turn: append the user message; call the model; on tool calls dispatch each in order,
    report it and append its result, then call the model again; on text, that is the reply.
    More than ``max_tool_iterations`` tool-call responses in one turn is a run error.

    ``system_prompt``, when given, is sent as a system message at the head of every model
    request (it is not part of the conversation's history): a factory such as
    ``lambda context: ReferenceAgent(context, system_prompt="...")`` is the reference loop
    under a prompt of your own. By default no system prompt is sent.

    Each step is a method of its own (``_ask``, ``_order``, ``_dispatch``, ``_report``,
    ``_feed``) so that the mutants of :mod:`evalrunner.mutation.mutants` can break exactly one.
    """

    def __init__(self, context: AgentContext, *, system_prompt: str | None = None) -> None:
        self._context = context
        self._history: list[Message] = []
        self._specs = tuple(tool_spec(tool) for tool in context.tools.values())
        self.system_prompt = system_prompt

    def _append(self, message: Message) -> None:
        self._history.append(message)
        self._context.observer.on_message(message)

    def respond(self, user_input: str) -> str:
        """Run one turn of the loop."""
        context = self._context
        self._append(Message("user", user_input))
        tool_rounds = 0
        while True:
            response = self._ask()
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
            for call in self._order(response.tool_calls):
                record = self._dispatch(call)
                self._report(record)
                self._feed(call, record)

    def _ask(self) -> ModelResponse:
        """One model request: the system prompt, if any, the whole history and the tools on
        offer."""
        head = () if self.system_prompt is None else (Message("system", self.system_prompt),)
        request = ModelRequest((*head, *self._history), self._specs)
        return self._context.provider.complete(request)

    def _order(self, calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
        """The order to dispatch one response's calls in: the model's."""
        return calls

    def _dispatch(self, call: ToolCall) -> ToolCallRecord:
        """Run one call on the case's tools."""
        return dispatch(self._context.tools, call)

    def _report(self, record: ToolCallRecord) -> None:
        """Tell the observer of one dispatch."""
        self._context.observer.on_tool_call(record)

    def _feed(self, call: ToolCall, record: ToolCallRecord) -> None:
        """Add one call's result to the history, for the next model request."""
        self._append(
            Message("tool", record.result, tool_call_id=call.id, is_error=not record.success)
        )


def reference_agent(context: AgentContext) -> Agent:
    """The default :data:`AgentFactory`."""
    return ReferenceAgent(context)
