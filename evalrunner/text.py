"""Text that is safe to show: on a terminal, in a report file, in a one-line message.

Case names, agent replies, tool results and file names come from outside. Printed raw, a
carriage return, a newline or an ANSI escape in one of them can overwrite or forge lines of
the report (a fake ``✓`` line, a fake summary), and a bidi override can make text read in a
different order than it is stored. A lone surrogate (from an agent's ``\\ud800`` escape, or a
file name that is not UTF-8) cannot be encoded at all and would crash the writer. So every
piece of outside text is passed through :func:`printable` (or :func:`printable_path`) before
it is shown, and case names holding such characters are refused at admission
(:func:`control_character`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from functools import cache

# C0 controls, DEL, C1 controls, the bidi embeddings and overrides (U+202A-U+202E) and the
# bidi isolates (U+2066-U+2069): the characters that change how a terminal draws what follows.
_CONTROL = "\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_UNSAFE_RE = re.compile(f"[{_CONTROL}\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def control_character(text: str) -> str | None:
    """The first character of ``text`` that may not appear in a name, or ``None``.

    That is a control character (C0, DEL, C1), a bidi override or isolate, or a lone
    surrogate (text that is not valid Unicode, such as a file name that is not UTF-8).
    """
    found = _UNSAFE_RE.search(text)
    return found.group() if found else None


def name_problem(name: str) -> str | None:
    """What is wrong with the characters of a case name, or ``None``: the rule ``evalrunner
    new`` and admission share. Names are printed in every report, so a name may hold no
    control character or bidi override (it could forge or reorder report lines) and must be
    valid Unicode text."""
    bad = control_character(name)
    if bad is None:
        return None
    if 0xD800 <= ord(bad) <= 0xDFFF:
        return f"holds bytes that are not UTF-8 ({printable_path(bad)}); names must be UTF-8 text"
    return (
        f"holds {describe_character(bad)}, a control character or bidi override, which could "
        "change how reports print; use plain text"
    )


def describe_character(char: str) -> str:
    """``"\\r"`` → ``U+000D (\\r)``: how a message names a character it refuses."""
    return f"U+{ord(char):04X} ({_escape(char)})"


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character, bidi override, line or paragraph separator
    (U+2028, U+2029) and lone surrogate written as an escape (``\\r``, ``\\x1b``, ``\\u202e``,
    ``\\u2028``, ``\\ud800``), so it is one line, shows as stored and can be encoded as UTF-8.
    Text without such characters is returned unchanged."""
    if "\u2028" in text or "\u2029" in text:  # line breaks to splitlines() and JavaScript
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    if not _UNSAFE_RE.search(text):
        return text
    return _UNSAFE_RE.sub(lambda m: _escape(m.group()), text)


def printable_path(path: str | os.PathLike[str]) -> str:
    """A path as messages and reports show it: bytes of a file name that are not UTF-8 (held
    by Python as surrogate escapes) are written ``\\xff``, and control characters escaped as
    by :func:`printable`."""
    return printable(encodable_path(path))


@cache
def compiled(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(source, flags)``, compiled on first use and kept: a pattern only unusual
    input meets (a non-ASCII name, a position in a refused fixture) costs a start nothing.
    Compiling is not free: a character class of surrogates alone is costly to build."""
    return re.compile(source, flags)


_SURROGATE = "[\ud800-\udfff]"
_UNDECODABLE = "[\udc80-\udcff]"


def encodable(text: str) -> str:
    """``text`` with each lone surrogate written as an escape (``\\ud800``), so that it can be
    encoded as UTF-8; everything else is kept as it is. For data (the JSON report), where
    control characters are escaped by the JSON encoder instead."""
    if text.isascii():  # isascii reads a flag: no scan
        return text
    surrogate = compiled(_SURROGATE)
    if not surrogate.search(text):
        return text
    return surrogate.sub(lambda m: _escape(m.group()), text)


def encodable_path(path: str | os.PathLike[str]) -> str:
    """A path as data shows it: bytes of a file name that are not UTF-8 written ``\\xff``, as
    by :func:`printable_path`, and nothing else changed."""
    text = os.fspath(path)
    if text.isascii():  # the common case: nothing to escape, and nothing scanned to know it
        return text
    text = compiled(_UNDECODABLE).sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text)
    return encodable(text)


def short(value: object) -> str:
    """A value from a document as a one-line message quotes it: as JSON (a string in double
    quotes), :func:`printable`, cut after its first characters when long."""
    text = json.dumps(value, ensure_ascii=False)
    return printable(text if len(text) <= 60 else text[:57] + "...")


def json_reason(exc: json.JSONDecodeError) -> str:
    """What the JSON decoder says is wrong, without the position: a message says where itself
    (``line:col``). A few of the decoder's messages end in " at", written to be followed by
    the position (``Invalid control character at``, ``Unterminated string starting at``);
    that ending is dropped, so no message is left dangling."""
    return exc.msg.removesuffix(" at").removesuffix(" starting")


def pointer(path: Sequence[str | int]) -> str:
    """``path`` as a JSON Pointer (RFC 6901): ``~`` and ``/`` in a key escaped."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def dotted(path: Sequence[str | int]) -> str:
    """A path into a document as people write it: ``('turns', 0, 'steps')`` is
    ``turns[0].steps``; the root is the empty string.

    A key that is not a plain name (a JSON Pointer such as ``/gust``, a key with a dot, a
    space or a quote in it, an empty key, a key of digits that would read as an index) is
    shown quoted in brackets, ``equals["/gust"]``, so the path still reads as one path. Keys
    come from the document, so a quoted key is also :func:`printable`: a message naming
    ``eval["\\n"]`` stays one line."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _plain_key(part):
            out += f".{part}" if out else part
        else:
            out += f"[{printable(json.dumps(part, ensure_ascii=False))}]"
    return out


def _plain_key(key: str) -> bool:
    """Whether ``key`` reads unambiguously after a dot: letters, digits, ``_``, ``$`` and
    ``-``, not starting with a digit or ``-``."""
    return compiled(_PLAIN_KEY).fullmatch(key) is not None


_PLAIN_KEY = r"[^\W\d][\w$-]*|\$[\w$-]*"
