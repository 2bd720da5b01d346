"""Graders of the final response: ``response_contains``, ``response_not_contains``,
``response_matches``.

Text is compared in Unicode NFC (needle, pattern and response alike), so text that is the same
but encoded differently ("é" as one code point, or as "e" plus a combining accent) is treated
as the same; failure details show the response as it was, with such differences escaped.
"""

from __future__ import annotations

from functools import lru_cache

import re2

from evalrunner.grade._format import nfc, nfc_note, quote
from evalrunner.model import GradeResult, RunRecord

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would otherwise print every bad pattern to stderr


class PatternError(ValueError):
    """A ``response_matches`` pattern that RE2 cannot compile."""


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re2._Regexp[str]:
    """Compile an RE2 pattern, in NFC like the text it searches; raises :class:`PatternError`
    with RE2's reason."""
    try:
        return re2.compile(nfc(pattern), _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternError(str(reason)) from None


def response_contains(needles: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """Each string occurs in the final response (both in NFC)."""
    response = nfc(run.final_response)
    results = []
    for needle in needles:
        found = nfc(needle) in response
        detail = "" if found else f"not found in response: {_shown(run.final_response)}"
        results.append(GradeResult(f"response_contains({quote(needle)})", found, detail))
    return results


def response_not_contains(needles: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """No string occurs in the final response (both in NFC)."""
    response = nfc(run.final_response)
    results = []
    for needle in needles:
        found = nfc(needle) in response
        detail = f"unexpectedly present in response: {_shown(run.final_response)}" if found else ""
        results.append(GradeResult(f"response_not_contains({quote(needle)})", not found, detail))
    return results


def response_matches(patterns: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """Each RE2 pattern matches somewhere in the final response (linear time; both in NFC)."""
    response = nfc(run.final_response)
    results = []
    for pattern in patterns:
        found = compile_pattern(pattern).search(response) is not None
        detail = "" if found else f"no match in response: {_shown(run.final_response)}"
        results.append(GradeResult(f"response_matches({quote(pattern)})", found, detail))
    return results


def _shown(response: str) -> str:
    return quote(response) + nfc_note(response)
