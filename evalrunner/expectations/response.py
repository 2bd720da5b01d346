"""Graders of the final response: ``response_contains``, ``response_not_contains``,
``response_matches``.

Text is compared in Unicode NFC (needle, pattern and response alike), so text that is the same
but encoded differently ("é" as one code point, or as "e" plus a combining accent) is treated
as the same; failure details show the response as it was, with such differences escaped.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import TYPE_CHECKING

from evalrunner.expectations._format import nfc, nfc_note, quote
from evalrunner.model import GradeResult, RunRecord

if TYPE_CHECKING:
    import re2


@cache
def _options() -> re2.Options:
    """RE2's options for every pattern. RE2 is imported at the first pattern, not with this
    module: loading its library is a large part of a run's start, which a suite with no
    ``response_matches`` need not pay."""
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would otherwise print every bad pattern to stderr
    return options


class PatternError(ValueError):
    """A ``response_matches`` pattern that RE2 cannot compile."""


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re2._Regexp[str]:
    """Compile an RE2 pattern, in NFC like the text it searches; raises :class:`PatternError`
    with RE2's reason."""
    import re2

    try:
        return re2.compile(nfc(pattern), _options())
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternError(str(reason)) from None


# What RE2's empty-width assertions (^ $ \A \z \b \B, with or without (?m)) can see around a
# position: whether there is a character on that side, and if so whether it is a newline, an
# ASCII word character, or anything else. One representative character of each class.
_NEIGHBOURS = ("", "\n", "a", " ")


def matches_every_text(pattern: str) -> bool:
    """True when the (compilable) pattern is sure to match every possible response, so a
    ``response_matches`` check of it can never fail.

    The rule: the pattern can match the empty string at some position of every text. Whether
    it can match empty at a position depends only on the characters either side of it (RE2's
    assertions look no further, and treat every non-ASCII character as a non-word character),
    so it is decided for each of the 16 pairs of neighbour classes; then a text that avoids all
    of those positions exists exactly when a path of such positions leads from the start of a
    text to its end. ``a*``, ``foo|``, ``^``, ``$`` and ``\\b|\\B`` match every text; ``^$``,
    ``\\b`` and ``^foo`` do not. Sound, not complete: a pattern that covers every text with
    non-empty matches only (``^$|(?s).``) is not detected here, but is still refused by the
    empty-run rule when nothing else in the case can fail.
    """
    regex = compile_pattern(pattern)

    def empty_between(before: str, after: str) -> bool:
        # RE2 sees the whole text as context even when the match is confined to [i, i].
        at = len(before)
        return regex.search(before + after, at, at) is not None

    if not empty_between("", ""):
        return False  # it does not even match the empty text
    # Walk the texts that avoid every empty match: from the start, through characters whose
    # boundaries all refuse one, to the end. None reachable means every text has one.
    classes = [c for c in _NEIGHBOURS if c]
    reachable = [c for c in classes if not empty_between("", c)]
    seen = set(reachable)
    while reachable:
        last = reachable.pop()
        if not empty_between(last, ""):
            return False
        for following in classes:
            if following not in seen and not empty_between(last, following):
                seen.add(following)
                reachable.append(following)
    return True


def response_contains(needles: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """Each string occurs in the final response (both in NFC)."""
    return _containment(needles, run, wanted=True)


def response_not_contains(needles: tuple[str, ...], run: RunRecord) -> list[GradeResult]:
    """No string occurs in the final response (both in NFC)."""
    return _containment(needles, run, wanted=False)


def _containment(needles: tuple[str, ...], run: RunRecord, *, wanted: bool) -> list[GradeResult]:
    """Each needle is present in the final response (``wanted``) or absent from it."""
    kind, why = (
        ("response_contains", "not found in")
        if wanted
        else ("response_not_contains", "unexpectedly present in")
    )
    response = nfc(run.final_response)
    results = []
    for needle in needles:
        passed = (nfc(needle) in response) == wanted
        detail = "" if passed else f"{why} response: {_shown(run.final_response)}"
        results.append(GradeResult(f"{kind}({quote(needle)})", passed, detail))
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
