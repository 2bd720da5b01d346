"""Striking secrets out of what ``evalrunner record`` writes (``[eval.record] redact``).

Patterns are RE2 (the dialect of Go and Rust's regex crate, linear time), matched against the
text as it is (not normalised: a secret is bytes, not prose). Every non-empty match becomes
:data:`REDACTED`; a match of the empty string replaces nothing, so ``x*`` strikes runs of
``x`` and does not sprinkle markers between every character. Patterns apply one after another,
in the order configured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import re2

from evalrunner.model import JSONValue

REDACTED = "[redacted]"
"""What each match is replaced by."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would otherwise print every bad pattern to stderr


KEY_FRAGMENT_CHARS = 8
"""A piece of the API key this long or longer is struck out too: a quoted excerpt may cut
the key in two."""


def strike_key(text: str, key: str) -> str:
    """``text`` with the key, and any piece of it of :data:`KEY_FRAGMENT_CHARS` or more
    characters, replaced by :data:`REDACTED` (a server may echo what it was sent; a model may
    repeat what it read)."""
    if not key.strip():
        return text
    text = text.replace(key, REDACTED)
    for length in range(len(key) - 1, KEY_FRAGMENT_CHARS - 1, -1):
        for start in range(len(key) - length + 1):
            piece = key[start : start + length]
            if piece in text:
                text = text.replace(piece, REDACTED)
    return text


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

    def __init__(
        self, patterns: Sequence[str] = (), *, first: Callable[[str], str] | None = None
    ) -> None:
        self.patterns = tuple(patterns)
        self._compiled = [compile_redaction(pattern) for pattern in self.patterns]
        self._first = first

    def striking(self, first: Callable[[str], str]) -> Redactor:
        """The same patterns, with ``first`` applied to every text before them (the live
        model's :meth:`~evalrunner.wire.live.LiveModel.without_key`: the key is struck
        from a recording whatever the patterns say)."""
        return Redactor(self.patterns, first=first)

    def __bool__(self) -> bool:
        """Whether any pattern is configured (the key alone does not count)."""
        return bool(self._compiled)

    def text(self, value: str) -> str:
        """``value`` without the key, and with every non-empty match of every pattern replaced
        by ``[redacted]``."""
        if self._first is not None:
            value = self._first(value)
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
