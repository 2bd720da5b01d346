"""Graders of the final response: ``response_contains``, ``response_not_contains``,
``response_matches``."""

from __future__ import annotations

from functools import lru_cache

import re2

from evalrunner.grade._format import quote
from evalrunner.model import GradeResult, RunRecord

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would otherwise print every bad pattern to stderr


class PatternError(ValueError):
    """A ``response_matches`` pattern that RE2 cannot compile."""


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re2._Regexp[str]:
    """Compile an RE2 pattern; raises :class:`PatternError` with RE2's reason."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternError(str(reason)) from None


def response_contains(needles: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """Each string occurs in the final response."""
    return [
        GradeResult(
            f"response_contains({quote(s)})",
            s in run.final_response,
            ""
            if s in run.final_response
            else f"not found in response: {quote(run.final_response)}",
        )
        for s in needles
    ]


def response_not_contains(needles: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """No string occurs in the final response."""
    return [
        GradeResult(
            f"response_not_contains({quote(s)})",
            s not in run.final_response,
            ""
            if s not in run.final_response
            else f"unexpectedly present in response: {quote(run.final_response)}",
        )
        for s in needles
    ]


def response_matches(patterns: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """Each RE2 pattern matches somewhere in the final response (linear time)."""
    results = []
    for pattern in patterns:
        found = compile_pattern(pattern).search(run.final_response) is not None
        results.append(
            GradeResult(
                f"response_matches({quote(pattern)})",
                found,
                "" if found else f"no match in response: {quote(run.final_response)}",
            )
        )
    return results
