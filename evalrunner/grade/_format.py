"""How strings and lists appear in check labels and failure details (SPEC §6)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from evalrunner.model import RunRecord


def quote(text: str) -> str:
    """A string as a JSON string literal, non-ASCII kept readable."""
    return json.dumps(text, ensure_ascii=False)


def listing(items: Iterable[str]) -> str:
    """A list of strings as a JSON array, e.g. ``["echo", "echo"]``."""
    return json.dumps(list(items), ensure_ascii=False)


def unreported_note(run: RunRecord) -> str:
    """For a failure detail: scripted calls the agent was handed but never reported
    dispatching (empty when there are none), so the detail says why a call is missing."""
    if not run.unreported_calls:
        return ""
    calls = ", ".join(f"{quote(call.name)} ({call.id})" for call in run.unreported_calls)
    return f"; the agent never reported dispatching scripted call(s): {calls}"
