"""A breaker's cases against the invocation log's lazily written argument text (176c996).

The claim: every verdict and every error message is the same as when the text was written at
the call. A plain dict's snapshot is a ``copy.deepcopy``, but deepcopy hands back some
objects themselves (enum members, classes, functions, weakrefs, anything whose
``__deepcopy__``/``__reduce__`` says so), so the snapshot is not entirely the log's own: what
the tool (or the agent) does to those objects after the call shows in the message. And an
encoding or ``repr`` that raises used to fail the call at the tool boundary, before the tool
ran; now the tool runs, and the exception comes out of the monitor later (a run error blamed
on the agent) or never (the case passes).

Each test states the pre-change behaviour (6abd7a0), which the claim promises unchanged.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

from evalrunner import AgentContext, Message, ModelRequest, TextResponse, ToolCallRecord
from evalrunner.boundary.tools import tool_spec
from evalrunner.fixture.admit import admit_documents
from evalrunner.fixture.load import discover, iter_documents
from evalrunner.session import evaluate_case

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    case.name: case
    for case in admit_documents(iter_documents(discover(ROOT / "evals" / "regression"))).cases
}
ECHO = "echo-token-roundtrip"
SORTED = "object-arguments-compact-sorted"


def agent_passing(make_arguments: Any, after: Any = None) -> Any:
    """An agent that calls the tool with ``make_arguments(call)`` (an object of its own, not
    the parsed argument text), catches what the call raises as a failed call (as the
    README's agent does), and reports the model's argument text. ``after(arguments)`` runs
    once the call has returned."""

    class Agent:
        def __init__(self, context: AgentContext) -> None:
            self.context = context
            self.history: list[Message] = []

        def respond(self, user_input: str) -> str:
            self.history.append(Message("user", user_input))
            offered = tuple(tool_spec(t) for t in self.context.tools.values())
            while True:
                response = self.context.provider.complete(
                    ModelRequest(tuple(self.history), offered)
                )
                if isinstance(response, TextResponse):
                    self.history.append(Message("assistant", response.content))
                    return response.content
                self.history.append(Message("assistant", "", tool_calls=response.tool_calls))
                for call in response.tool_calls:
                    tool = self.context.tools[call.name]
                    arguments = make_arguments(call)
                    try:
                        result, ok = tool.call(arguments) or "(no output)", True
                    except Exception as exc:
                        result, ok = f"Error: {exc}", False
                    if after is not None:
                        after(arguments)
                    self.context.observer.on_tool_call(
                        ToolCallRecord(call.name, call.arguments, result, ok, call.id)
                    )
                    self.history.append(Message("tool", result, tool_call_id=call.id))

    return Agent


class Echo:
    name = "echo"
    description = "Echoes its message; may edit its arguments first."
    parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012

    def __init__(self, edit: Any = None) -> None:
        self.edit = edit
        self.calls = 0

    def call(self, arguments: dict[str, Any]) -> str:
        self.calls += 1
        if self.edit is not None:
            self.edit(arguments)
        message = arguments.get("message")
        return message if isinstance(message, str) else "(empty)"


# --- what the tool does after the call shows in the message ------------------------------------


class SharedList(list):  # type: ignore[type-arg]
    """A list that deepcopy hands back as itself (as a cache, a registry, a singleton does)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedList:
        return self


def test_the_message_quotes_a_shared_nested_list_as_the_tool_received_it() -> None:
    # Before: 'but the echo tool received "{\"items\":[1],\"message\":\"m\"}"'.
    # Now the text is written after the tool appended to the list: [1,"MUTATED"].
    def edit(arguments: dict[str, Any]) -> None:
        arguments["items"].append("MUTATED")

    report = evaluate_case(
        CASES[ECHO],
        agent_factory=agent_passing(lambda call: {"message": "m", "items": SharedList([1])}),
        tools={"echo": Echo(edit)},
    )
    assert report.error is not None
    assert "MUTATED" not in report.error, report.error
    assert 'the echo tool received "{\\"items\\":[1],\\"message\\":\\"m\\"}"' in report.error


class Unit(enum.Enum):
    """An enum member is deepcopied as itself (Enum.__deepcopy__ returns self)."""

    CELSIUS = ["C"]  # noqa: RUF012


def test_the_message_quotes_an_enum_member_as_the_tool_received_it() -> None:
    # Before: "... received \"{'unit': <Unit.CELSIUS: ['C']>}\""; now ['C', 'F'].
    def edit(arguments: dict[str, Any]) -> None:
        arguments["unit"].value.append("F")

    try:
        report = evaluate_case(
            CASES[ECHO],
            agent_factory=agent_passing(lambda call: {"unit": Unit.CELSIUS}),
            tools={"echo": Echo(edit)},
        )
    finally:
        del Unit.CELSIUS.value[1:]
    assert report.error is not None
    assert "<Unit.CELSIUS: ['C']>" in report.error, report.error


class Box:
    """Deepcopied as itself; its repr shows its state."""

    def __init__(self) -> None:
        self.state = "before"

    def __deepcopy__(self, memo: dict[int, Any]) -> Box:
        return self

    def __repr__(self) -> str:
        return f"Box({self.state})"


def test_an_agent_editing_a_shared_object_after_the_call_changes_nothing() -> None:
    # The agent, not the tool, edits the object once the call has returned. Before:
    # "... received \"{'box': Box(before)}\""; now Box(after).
    def edit(arguments: dict[str, Any]) -> None:
        arguments["box"].state = "after"

    report = evaluate_case(
        CASES[ECHO],
        agent_factory=agent_passing(lambda call: {"box": Box()}, after=edit),
        tools={"echo": Echo()},
    )
    assert report.error is not None
    assert "Box(before)" in report.error and "Box(after)" not in report.error, report.error


# --- an encoding or repr that raises: the call no longer fails at the boundary ------------------


class UnorderedKey(str):
    """A key that refuses to be ordered (sort_keys compares keys)."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        raise RuntimeError("keys cannot be ordered")


def test_arguments_whose_text_cannot_be_written_still_fail_the_call() -> None:
    # Before: the log's encoding raised in RecordedTool.call, before the tool ran: the call
    # failed ("Error: keys cannot be ordered"), all_tools_succeeded failed, the case failed.
    # Now nothing is written (no message needs it): the tool runs and the case passes.
    tool = Echo()
    report = evaluate_case(
        CASES[SORTED],
        agent_factory=agent_passing(
            lambda call: {UnorderedKey(k): v for k, v in json.loads(call.arguments).items()}
        ),
        tools={"echo": tool},
    )
    assert tool.calls == 0, "the tool ran on arguments the log could not write"
    assert report.error is None
    assert report.passed is False


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr exploded")


def test_a_repr_that_raises_is_not_a_run_error_blamed_on_the_agent() -> None:
    # Before: repr raised at the call, the tool did not run, the agent reported a failed call,
    # and the case was graded (failed, no run error). Now the monitor's own message raises
    # while the agent waits on the model: "the agent raised RuntimeError: repr exploded".
    tool = Echo()
    report = evaluate_case(
        CASES[ECHO],
        agent_factory=agent_passing(lambda call: {"x": BadRepr()}),
        tools={"echo": tool},
    )
    assert report.error is None, report.error
    assert tool.calls == 0
