"""How strings and lists appear in check labels and failure details (SPEC §6)."""

from __future__ import annotations

import json
from collections.abc import Iterable


def quote(text: str) -> str:
    """A string as a JSON string literal, non-ASCII kept readable."""
    return json.dumps(text, ensure_ascii=False)


def listing(items: Iterable[str]) -> str:
    """A list of strings as a JSON array, e.g. ``["echo", "echo"]``."""
    return json.dumps(list(items), ensure_ascii=False)
