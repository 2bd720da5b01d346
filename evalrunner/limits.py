"""The limits every fixture parser enforces (SPEC §4 rule 1), the words for a number beyond
them, and the two ways a parser stops.

Shared by :mod:`evalrunner.load` and :mod:`evalrunner.load_yaml`, which both import it and not
each other.
"""

from __future__ import annotations

from typing import NamedTuple

from evalrunner.model import AdmissionError, JSONValue

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays a fixture may have; real fixtures need about 10."""

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""The integers a fixture may hold: 64-bit signed, as TOML 1.0 requires, in every format. Far
beyond any count or index, and every JSON consumer of a report can read them exactly."""

MAX_INT_DIGITS = 64
"""More significant digits than this cannot be a 64-bit integer in any base (64 binary
digits). Checked before ``int()`` runs: Python refuses to convert more than 4,300 decimal
digits (and, without that limit, would take quadratic time over a megabyte of them)."""

NO_KEY = object()
"""Stands for "no key": a mapping whose next key is still due, a problem with a value."""


class Parsed(NamedTuple):
    """What a format's parser gives for text it did not refuse outright."""

    data: JSONValue
    checked: bool = False
    """Whether the parse itself proved the data holds only what fixtures may (YAML built
    from libyaml's events, JSON whose hooks met no number beyond the limits); otherwise it is
    still to be walked for values JSON cannot hold, which places each."""


class Refused(Exception):
    """A parser's way out: the document is refused for these reasons."""

    def __init__(self, errors: list[AdmissionError]) -> None:
        super().__init__(errors)
        self.errors = errors


class NotPlain(Exception):
    """The YAML built from libyaml's events met something only the strict pure-Python loader
    may judge and word (a duplicate key, a tag, a date, ...)."""


def out_of_range(literal: str) -> str:
    """Why an integer literal is refused: it needs more than 64 bits."""
    digits = literal.lstrip("+-").replace("_", "")
    if digits[:2].lower() in ("0x", "0o", "0b"):
        digits = digits[2:]
    shown = f"integer {literal}" if len(digits) <= 30 else f"an integer of {len(digits)} digits"
    return (
        f"{shown} is out of range: integers must be between {INT_MIN} and {INT_MAX} "
        "(64 bits); quote it to make it a string"
    )


def no_digits(literal: str) -> str:
    """Why a number literal without digits (``+_``, ``0x_``) is refused."""
    shown = literal if len(literal) <= 30 else literal[:27] + "..."
    return f"number {shown} has no digits; quote it to make it a string"


def too_large(literal: str) -> str:
    """Why a float literal that overflows to infinity is refused."""
    shown = literal if len(literal) <= 30 else literal[:27] + "..."
    return (
        f"number {shown} is too large for a 64-bit float (at most about 1.8e308); "
        "quote it to make it a string"
    )


def significant_digits(literal: str) -> int:
    """The digits of an integer literal that count, without sign, base prefix, underscores
    and leading zeros."""
    body = literal.lstrip("+-").replace("_", "").lower()
    if body[:2] in ("0x", "0o", "0b"):
        body = body[2:]
    return len(body.lstrip("0"))
