"""What the agent reports while it runs: messages and tool dispatches.

The runner hands every agent a fresh :class:`RecordingObserver`; what it records becomes the run
record's history and tool calls, the ground truth that boundary expectations grade.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from evalrunner.model import Message, ToolCallRecord


@runtime_checkable
class Observer(Protocol):
    """Receives what crossed the agent's boundaries, in order."""

    def on_message(self, message: Message) -> None:
        """A message was appended to the conversation."""

    def on_tool_call(self, call: ToolCallRecord) -> None:
        """A tool call was dispatched; ``call`` holds its exact arguments and result."""


class RecordingObserver:
    """Keeps everything it is told, for the run record."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.tool_calls: list[ToolCallRecord] = []

    def on_message(self, message: Message) -> None:
        """Record a message."""
        self.messages.append(message)

    def on_tool_call(self, call: ToolCallRecord) -> None:
        """Record a dispatch."""
        self.tool_calls.append(call)
