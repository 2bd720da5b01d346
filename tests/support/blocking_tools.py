"""A tool for fault tests, plugged in through ``[eval] tools = ["blocking_tools:BlockTool"]``.

``block`` writes the file named by ``$EVALRUNNER_TEST_READY`` (so the test knows a case is in
flight), then waits forever: a stand-in for a hung tool or agent.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, ClassVar


class BlockTool:
    """Signals that it was called, then never returns."""

    name = "block"
    description = "Hangs."
    parameters: ClassVar[dict[str, Any]] = {"type": "object"}

    def call(self, arguments: dict[str, Any]) -> str:
        Path(os.environ["EVALRUNNER_TEST_READY"]).write_text("in flight", encoding="utf-8")
        threading.Event().wait()
        return "unreachable"
