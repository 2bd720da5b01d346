"""Striking secrets out of what ``evalrunner record`` writes (``[eval.record] redact``).

Patterns are RE2 (the dialect of Go and Rust's regex crate, linear time), matched against the
text as it is (not normalised: a secret is bytes, not prose). Every non-empty match becomes
:data:`REDACTED`; a match of the empty string replaces nothing, so ``x*`` strikes runs of
``x`` and does not sprinkle markers between every character. Patterns apply one after another,
in the order configured.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import re2

from evalrunner.model import JSONValue

REDACTED = "[redacted]"
"""What each match is replaced by."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would otherwise print every bad pattern to stderr


class RedactionError(ValueError):
    """A ``redact`` pattern that RE2 cannot compile; the message says why and what to do."""


@lru_cache(maxsize=256)
def compile_redaction(pattern: str) -> Any:
    """The compiled RE2 pattern; :class:`RedactionError` with RE2's reason if it is not one."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
        raise RedactionError(
            f"pattern {shown!r} is not valid RE2: {reason}; redact patterns use the RE2 "
            "syntax of Go and Rust's regex crate (no backreferences or lookaround)"
        ) from None


class Redactor:
    """Applies a list of redact patterns to text, and to every string in a JSON value."""

    def __init__(self, patterns: Sequence[str] = ()) -> None:
        self.patterns = tuple(patterns)
        self._compiled = [compile_redaction(pattern) for pattern in self.patterns]

    def __bool__(self) -> bool:
        return bool(self._compiled)

    def text(self, value: str) -> str:
        """``value`` with every non-empty match of every pattern replaced by ``[redacted]``."""
        for regex in self._compiled:
            pieces: list[str] = []
            last = 0
            for match in regex.finditer(value):
                start, end = match.span()
                if start == end:
                    continue
                pieces.append(value[last:start])
                pieces.append(REDACTED)
                last = end
            if pieces:
                pieces.append(value[last:])
                value = "".join(pieces)
        return value

    def value(self, value: JSONValue, *, keys: bool = False) -> JSONValue:
        """Every string of ``value`` redacted, and with ``keys`` its objects' keys too (two
        keys that redact alike become one, with the first one's value; the recording's replay
        check then says whether the agent still does what it did live)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item, keys=keys) for item in value]
        if isinstance(value, dict):
            out: dict[str, JSONValue] = {}
            for key, item in value.items():
                name = self.text(key) if keys else key
                out.setdefault(name, self.value(item, keys=keys))
            return out
        return value
