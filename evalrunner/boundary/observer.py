"""What the agent reports while it runs: messages and tool dispatches.

The runner hands every agent a fresh :class:`RecordingObserver`. The dispatches it is told of
are reconciled, turn by turn, with the results the agent fed back to the model and with what the
tools themselves received (:mod:`evalrunner.boundary.conformance`); the reported arguments and
success
flags are then what ``tool_arguments_contain`` and ``all_tools_succeeded`` grade.
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

from evalrunner.model import Message, RunError, ToolCallRecord


@runtime_checkable
class Observer(Protocol):
    """Receives what crossed the agent's boundaries, in order."""

    def on_message(self, message: Message) -> None:
        """A message was appended to the conversation (informational: the history graded is
        what the agent sent the model)."""

    def on_tool_call(self, call: ToolCallRecord) -> None:
        """A tool call was dispatched; ``call`` holds its exact arguments and result."""


_RECORD_FIELDS: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("name", str, "the tool's name, a string"),
    ("arguments", str, "the argument text the tool was given, a string"),
    ("result", str, "the result text fed back to the model, a string"),
    ("success", bool, "true or false"),
    ("id", (str, type(None)), "the model's tool call id, a string"),
)


def record_problem(call: object) -> str | None:
    """Why ``call`` is not a well-formed dispatch report, naming the field; or None."""
    if not isinstance(call, ToolCallRecord):
        return f"on_tool_call was given a {type(call).__name__}, not a ToolCallRecord"
    for name, kind, expected in _RECORD_FIELDS:
        value = getattr(call, name)
        if not isinstance(value, kind):
            return (
                f"on_tool_call was given a ToolCallRecord whose {name} is a "
                f"{type(value).__name__}; {name} must be {expected}"
            )
    if not call.name:
        return "on_tool_call was given a ToolCallRecord with an empty name"
    return None


class RecordingObserver:
    """Keeps everything it is told, checking each report as it arrives.

    A malformed report raises :class:`RunError` in the agent and is remembered in
    :attr:`violation`, so that an agent catching the error still fails its case.
    """

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.tool_calls: list[ToolCallRecord] = []
        self.violation: str | None = None
        self._taken = 0
        self._lock = threading.Lock()

    def on_message(self, message: Message) -> None:
        """Record a message."""
        if not isinstance(message, Message) or not isinstance(message.content, str):
            self._refuse(f"on_message was given a {type(message).__name__}, not a Message")
        with self._lock:
            self.messages.append(message)

    def on_tool_call(self, call: ToolCallRecord) -> None:
        """Record a dispatch."""
        problem = record_problem(call)
        if problem is not None:
            self._refuse(problem)
        with self._lock:
            self.tool_calls.append(call)

    def take(self) -> list[ToolCallRecord]:
        """The dispatches reported since the last take (one turn's worth)."""
        with self._lock:
            taken = self.tool_calls[self._taken :]
            self._taken = len(self.tool_calls)
            return taken

    def _refuse(self, problem: str) -> None:
        with self._lock:
            self.violation = self.violation or problem
        raise RunError(problem)
