"""How strings and lists appear in check labels and failure details (SPEC §6), and the Unicode
normal form text checks compare in."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

# Characters that render as nothing (Default_Ignorable_Code_Point) or as blank space although
# their category is a letter, symbol or mark; every other invisible one is caught by category.
_INVISIBLE = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x2800, 0x3164]
    + [0xFFA0, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]
)
_BASE, _OTHER, _MARK, _HIDDEN = range(4)  # how a character is shown; see _kind
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]+")
_JSON_STRING = json.encoder.encode_basestring_ascii


def nfc(text: str) -> str:
    """``text`` in Unicode NFC, the form every text check compares in, so that a reply written
    "cafe" + U+0301 and a needle written "café" are the same text."""
    return unicodedata.normalize("NFC", text)


@lru_cache(maxsize=4096)
def _kind(ch: str) -> int:
    """_BASE: shown, and a combining mark may sit on it; _OTHER: shown; _MARK: a combining
    mark; _HIDDEN: always escaped."""
    category = unicodedata.category(ch)
    if ord(ch) in _INVISIBLE or ch == "\x7f":
        return _HIDDEN
    if category[0] == "M":
        return _MARK
    if ch.isascii():
        return _BASE if ch.isalnum() or category[0] == "S" else _OTHER
    if category[0] in "CZ":  # controls, format (zero-width, bidi), unassigned, odd spaces
        return _HIDDEN
    return _BASE if category[0] in "LNS" else _OTHER


def quote(text: str) -> str:
    """A string as a JSON string literal: non-ASCII letters kept readable, anything that could
    make two different strings look the same escaped (``\\u0301``).

    Escaped: controls, format characters (zero-width, bidi controls, BOM), separators and
    spaces other than U+0020, private-use, unassigned and invisible characters, and combining
    marks unless the text is in NFC and the mark sits on a visible base character. So "café"
    (NFC) shows as ``"café"`` but "cafe" + U+0301 as ``"cafe\\u0301"``, while NFC text in
    scripts built on marks (Devanagari, Arabic, Hebrew) stays readable.
    """
    if text.isascii() and "\x7f" not in text:
        # What json.dumps(text) returns, without its argument handling (a check label
        # quotes two or three strings, and passing cases are all labels).
        return _JSON_STRING(text)
    composed = unicodedata.is_normalized("NFC", text)
    parts = []
    on_base = False  # whether a combining mark here would attach to a visible character
    done = 0
    # Runs of printable ASCII need no decision; a reply is mostly those.
    for special in _NOT_PRINTABLE_ASCII.finditer(text):
        if special.start() > done:
            parts.append(json.dumps(text[done : special.start()])[1:-1])
            on_base = _kind(text[special.start() - 1]) == _BASE
        for ch in special.group():
            kind = _kind(ch)
            if kind == _MARK:
                keep = on_base = composed and on_base
            else:
                keep, on_base = kind != _HIDDEN, kind == _BASE
            # json.dumps leaves non-ASCII as is, so only what is escaped goes through it
            parts.append(ch if keep and ch > "\x7f" else json.dumps(ch)[1:-1])
        done = special.end()
    parts.append(json.dumps(text[done:])[1:-1])
    return '"' + "".join(parts) + '"'


def listing(items: Iterable[str]) -> str:
    """A list of strings as a JSON array quoted like :func:`quote`, e.g. ``["echo", "echo"]``."""
    return "[" + ", ".join(quote(item) for item in items) + "]"


def nfc_note(observed: str | Sequence[str]) -> str:
    """For a failure detail quoting ``observed`` text (one string, or a list of them): what it
    was compared as, when that differs from what it is (empty otherwise), so a verdict on
    look-alike text is explained."""
    if isinstance(observed, str):
        normal = nfc(observed)
        return "" if normal == observed else f" (compared in Unicode NFC form: {quote(normal)})"
    normals = [nfc(text) for text in observed]
    if normals == list(observed):
        return ""
    return f" (compared in Unicode NFC form: {listing(normals)})"


def normalization_note(expected: object, actual: object, compared: str) -> str:
    """When two JSON values differ only in Unicode normalization they print alike, so the
    note shows them with every non-ASCII character escaped (``compared``, such as
    ``arguments``, are compared exactly); empty otherwise."""
    from evalrunner.model import argument_json

    want, got = argument_json(expected), argument_json(actual)
    if want == got or nfc(want) != nfc(got):
        return ""
    want, got = (json.dumps(v, separators=(",", ":")) for v in (expected, actual))
    return (
        f"; they differ only in Unicode normalization: expected {want}, got {got}, and "
        f"{compared} are compared exactly"
    )
