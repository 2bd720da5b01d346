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
from evalrunner.text import printable

REDACTED = "[redacted]"
"""What each match is replaced by."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would otherwise print every bad pattern to stderr


KEY_FRAGMENT_CHARS = 8
"""A piece of the API key this long or longer is struck out too: a quoted excerpt may cut
the key in two. A key shorter than this is not taken for a secret: local servers take
placeholders (``EMPTY``, ``ollama``), and striking every ``EMPTY`` would mangle what is
written."""


def strike_key(text: str, key: str) -> str:
    """``text`` with the key, and every piece of it of :data:`KEY_FRAGMENT_CHARS` or more
    characters, replaced by :data:`REDACTED` (a server may echo what it was sent; a model may
    repeat what it read). One pass over ``text``: each of its windows of that many characters
    is looked up among the key's, and a hit is extended as far as text and key agree."""
    size = KEY_FRAGMENT_CHARS
    if len(key) < size or len(text) < size or not key.strip():
        return text
    starts = _windows(key)
    struck: list[tuple[int, int]] = []
    position = 0
    while position <= len(text) - size:
        found = starts.get(text[position : position + size])
        if found is None:
            position += 1
            continue
        longest = size
        for start in found:
            length = size
            while (
                position + length < len(text)
                and start + length < len(key)
                and text[position + length] == key[start + length]
            ):
                length += 1
            longest = max(longest, length)
        if struck and position <= struck[-1][1]:
            struck[-1] = (struck[-1][0], max(struck[-1][1], position + longest))
        else:
            struck.append((position, position + longest))
        position += 1
    if not struck:
        return text
    pieces, last = [], 0
    for start, end in struck:
        pieces += [text[last:start], REDACTED]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


@lru_cache(maxsize=8)
def _windows(key: str) -> dict[str, tuple[int, ...]]:
    """Each piece of ``key`` of :data:`KEY_FRAGMENT_CHARS` characters, and where it starts."""
    found: dict[str, list[int]] = {}
    for start in range(len(key) - KEY_FRAGMENT_CHARS + 1):
        found.setdefault(key[start : start + KEY_FRAGMENT_CHARS], []).append(start)
    return {window: tuple(starts) for window, starts in found.items()}


def url_secrets(url: str) -> list[str]:
    """What in ``url`` may be a secret: the user and password before its host, and each
    query value (some gateways take their key there); longest first."""
    from urllib.parse import parse_qsl, unquote, urlsplit

    try:
        parts = urlsplit(url)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return []
    found = [value for _, value in pairs if value]
    found += [key for key, value in pairs if key and not value]  # a bare token: ?sk-123
    credentials, at, _ = parts.netloc.rpartition("@")
    if at:
        found += [unquote(piece) for piece in credentials.split(":", 1) if piece]
        found += [piece for piece in credentials.split(":", 1) if piece]
    return sorted(set(found), key=len, reverse=True)


def strike_url_secrets(text: str, url: str) -> str:
    """``text`` with each of ``url``'s :func:`url_secrets` replaced by :data:`REDACTED`."""
    for secret in url_secrets(url):
        text = text.replace(secret, REDACTED)
    return text


def shown_url(url: str) -> str:
    """``url`` as a message may show it: without the user and password it may carry, and
    with each query value (or bare query token) replaced, since some gateways take their
    key there. Works on any text, a URL the config refuses included."""
    from urllib.parse import SplitResult, parse_qsl, quote, urlsplit

    try:
        parts = urlsplit(url)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "the configured base_url"
    _, at, host = parts.netloc.rpartition("@")
    netloc = f"{REDACTED}@{host}" if at else host
    query = "&".join(
        f"{quote(key, safe='')}={REDACTED}" if value else REDACTED for key, value in pairs
    )
    return SplitResult(parts.scheme, netloc, parts.path, query, "").geturl()


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
        shown = printable(pattern if len(pattern) <= 60 else pattern[:57] + "...")
        raise RedactionError(
            f"pattern '{shown}' is not valid RE2: {printable(str(reason))}; redact patterns "
            "use the RE2 "
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
        model's :meth:`~evalrunner.live.provider.LiveModel.without_secrets`: the key is struck
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
            # A match of the empty string is replaced by itself: nothing.
            value = regex.sub(lambda match: REDACTED if match.group() else "", value)
        return value

    def value(self, value: JSONValue, *, keys: bool = False) -> JSONValue:
        """Every string of ``value`` redacted, and with ``keys`` its objects' keys too (two
        keys that redact alike become one, with the first one's value; the recording's replay
        check then says whether the agent still does what it did live). Walked without
        recursion: a model's arguments may nest deeper than Python's stack."""
        out: list[JSONValue] = [None]
        # Each job: (a value to copy, the container it goes into, and the index or key).
        jobs: list[tuple[JSONValue, Any, Any]] = [(value, out, 0)]
        while jobs:
            item, into, at = jobs.pop()
            if isinstance(item, str):
                copied: JSONValue = self.text(item)
            elif isinstance(item, list):
                copied = [None] * len(item)
                jobs.extend((child, copied, index) for index, child in enumerate(item))
            elif isinstance(item, dict):
                copied = {}
                for key, child in item.items():
                    name = self.text(key) if keys else key
                    if name not in copied:
                        copied[name] = None
                        jobs.append((child, copied, name))
            else:
                copied = item
            into[at] = copied
        return out[0]
