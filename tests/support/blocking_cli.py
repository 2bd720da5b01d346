"""The evalrunner command line with one extra built-in tool, ``block``, for fault tests.

``block`` writes the file named by ``$EVALRUNNER_TEST_READY`` (so the test knows a case is in
flight), then waits forever: a stand-in for a hung tool or agent. Everything else is the real
command line.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, ClassVar

import evalrunner.replay
from evalrunner.cli import main
from evalrunner.model import JSONValue
from evalrunner.tools import Tool, builtin_tools


class BlockTool:
    """Signals that it was called, then never returns."""

    name = "block"
    description = "Hangs."
    parameters: ClassVar[dict[str, JSONValue]] = {"type": "object"}

    def call(self, arguments: dict[str, Any]) -> str:
        Path(os.environ["EVALRUNNER_TEST_READY"]).write_text("in flight", encoding="utf-8")
        threading.Event().wait()
        return "unreachable"


def tools_with_block() -> dict[str, Tool]:
    return {**builtin_tools(), "block": BlockTool()}


evalrunner.replay.builtin_tools = tools_with_block  # type: ignore[assignment]

if __name__ == "__main__":
    main()
