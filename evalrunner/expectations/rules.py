"""Admission rules a schema cannot express, one function per rule, each named by the kind
whose entry it points at in :data:`evalrunner.expectations.kinds.KINDS` (SPEC §4 rules 4 and 5, and
the stricter rules of issue 8: no pattern that matches every reply, no checks that contradict
each other).

Pure: a rule reads one level of a case's checks, an :class:`Expectations` and the path it is
at (``("expects",)`` for the case's, ``("turns", i, "expects")`` for a turn's), and yields
:class:`Refusal` values, each placed at a path inside the case and naming the checks by that
path; admission turns them into positioned errors. A rule runs only when its kind is declared,
and may read the other kinds it is about. The walks the rules share (:func:`tools_needed`,
:func:`count_refusals`, :func:`listed_in_both`, :func:`needs_forbidden`,
:func:`text_conflicts`) take what a level is held to, so admission holds a turn's checks
against the case's, and a level against its script, with the same code and words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from evalrunner.expectations._format import nfc, quote
from evalrunner.expectations.response import PatternError, compile_pattern, matches_every_text
from evalrunner.model import Expectations, JSONPath, PayloadNeedle
from evalrunner.text import dotted

__all__ = [
    "Bound",
    "Need",
    "Refusal",
    "Rule",
    "calls_needed",
    "cap_below_need",
    "count_refusals",
    "exact_against_bounds",
    "listed_in_both",
    "min_above_max",
    "needs_forbidden",
    "patterns_compile_and_can_fail",
    "required_text_forbidden",
    "required_tool_forbidden",
    "text_conflicts",
    "tools_needed",
]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an admission rule refuses a case: the message, and where in the case it points.

    ``key``: point at the key of ``at`` rather than at its value. ``ungradable``: the check
    cannot be graded as written (a pattern RE2 refuses), or already says why the case can never
    fail, so admission does not also ask whether the case passes on an empty run. ``about``:
    the other kinds of the same level the refusal is about (the checks it contradicts), which
    admission then does not judge again against the script.
    """

    message: str
    at: JSONPath
    key: bool = False
    ungradable: bool = False
    about: tuple[str, ...] = ()


Rule = Callable[[Expectations, JSONPath], Iterator[Refusal]]
"""An admission rule: one level of a case's checks and the path of that level (its ``expects``)
→ every refusal it finds in them."""


def min_above_max(expects: Expectations, base: JSONPath) -> Iterator[Refusal]:
    """SPEC §4 rule 4: ``min_tool_calls`` above ``max_tool_calls``, which no count satisfies."""
    low, high = expects.min_tool_calls, expects.max_tool_calls
    if low is not None and high is not None and low > high:
        label = dotted(base)
        yield Refusal(
            f"{label}.min_tool_calls ({low}) is greater than {label}.max_tool_calls ({high}); "
            "no run can satisfy both",
            base + ("min_tool_calls",),
            about=("max_tool_calls",),
        )


def exact_against_bounds(expects: Expectations, base: JSONPath) -> Iterator[Refusal]:
    """SPEC §4 rule 4: ``exact_tool_calls`` outside ``min``/``max_tool_calls``."""
    low, high, exact = expects.min_tool_calls, expects.max_tool_calls, expects.exact_tool_calls
    if exact is None:
        return
    label = dotted(base)
    if low is not None and exact < low:
        yield Refusal(
            f"{label}.exact_tool_calls ({exact}) is below {label}.min_tool_calls ({low}); "
            "drop one of them or make them agree",
            base + ("exact_tool_calls",),
            about=("min_tool_calls",),
        )
    if high is not None and exact > high:
        yield Refusal(
            f"{label}.exact_tool_calls ({exact}) is above {label}.max_tool_calls ({high}); "
            "drop one of them or make them agree",
            base + ("exact_tool_calls",),
            about=("max_tool_calls",),
        )


def cap_below_need(kind: str) -> Rule:
    """SPEC §4 rule 4: the count kind ``kind`` (a cap: ``max`` or ``exact_tool_calls``) below
    the calls the other checks need."""

    def rule(expects: Expectations, base: JSONPath) -> Iterator[Refusal]:
        needed, reasons = calls_needed(expects, dotted(base))
        needing = [n.kind for n in tools_needed(expects)]
        if expects.all_tools_succeeded is False:
            needing.append("all_tools_succeeded")
        need = Bound(
            needed,
            lambda: f"the other checks need ({'; '.join(reasons())})",
            "no run can satisfy them all",
            "drop one of those checks",
            tuple(dict.fromkeys(needing)),
        )
        yield from count_refusals(expects, base, fewest=need, kinds=(kind,))

    rule.__name__ = rule.__qualname__ = f"{kind}_below_need"
    return rule


@dataclass(frozen=True, slots=True)
class Bound:
    """A number of tool calls that a level's count checks are held to from outside them, and
    how a refusal words it: ``what`` those calls are (worded only for a refusal), ``because``
    no run can pass, and the ``fix`` other than changing the count; ``about``: the other kinds
    of the level that set it (:attr:`Refusal.about`)."""

    calls: int
    what: Callable[[], str]
    because: str
    fix: str
    about: tuple[str, ...] = ()


def count_refusals(
    expects: Expectations,
    base: JSONPath,
    *,
    fewest: Bound | None = None,
    most: Bound | None = None,
    kinds: tuple[str, ...] = ("exact_tool_calls", "max_tool_calls", "min_tool_calls"),
) -> Iterator[Refusal]:
    """The count checks (of ``kinds``) at ``base`` that no run can pass when it makes at least
    ``fewest`` calls (a cap, ``exact`` or ``max_tool_calls``, below it) or at most ``most`` (a
    floor, ``exact`` or ``min_tool_calls``, above it)."""
    for kind in kinds:
        value = getattr(expects, kind)
        if value is None:
            continue
        if fewest is not None and kind != "min_tool_calls" and value < fewest.calls:
            yield _beyond(base + (kind,), value, "below", "raise", fewest)
        if most is not None and kind != "max_tool_calls" and value > most.calls:
            yield _beyond(base + (kind,), value, "above", "lower", most)


def _beyond(at: JSONPath, value: int, side: str, verb: str, bound: Bound) -> Refusal:
    return Refusal(
        f"{dotted(at)} ({value}) is {side} the {bound.calls} tool call(s) {bound.what()}; "
        f"{bound.because}; {verb} it to {bound.calls} or {bound.fix}",
        at,
        about=bound.about,
    )


def calls_needed(expects: Expectations, label: str = "") -> tuple[int, Callable[[], list[str]]]:
    """The fewest dispatches a run needs to pass the checks that name tools (or that need a
    failed call), and a function that words the reasons (``label``: the level's path).

    Each tool needs as many calls as its most demanding check (one for ``tools_used`` or a
    payload check, ``call_index + 1`` with an index); calls to different tools are different
    dispatches. ``all_tools_succeeded: false`` needs one call that failed.
    """
    # tool → the check that needs the most calls of it.
    most: dict[str, Need] = {}
    for need in tools_needed(expects):
        if need.calls > (most[need.tool].calls if need.tool in most else 0):
            most[need.tool] = need
    total = sum(need.calls for need in most.values())
    if total == 0 and expects.all_tools_succeeded is False:
        return 1, lambda: [f"a failed one for {label}.all_tools_succeeded: false"]

    def reasons() -> list[str]:
        return [
            f"{need.calls} to {quote(need.tool)} for {label}.{dotted(need.at)}"
            + ("" if need.call_index is None else f" with call_index {need.call_index}")
            for need in most.values()
        ]

    return total, reasons


class Need(NamedTuple):
    """A check's need of calls to one tool: the check (its entry, inside its level), the tool,
    how many calls of it the check needs, and the ``call_index`` it names, if any."""

    at: JSONPath
    tool: str
    calls: int
    call_index: int | None = None

    @property
    def kind(self) -> str:
        """The kind of the check."""
        return str(self.at[0])

    @property
    def tool_at(self) -> JSONPath:
        """Where the entry names the tool."""
        return self.at if self.kind == "tools_used" else self.at + ("tool",)


def tools_needed(expects: Expectations) -> Iterator[Need]:
    """Each check of ``expects`` that needs a call to a tool: one for ``tools_used`` or a
    payload check, ``call_index + 1`` with an index, and the n-th entry of
    ``tool_calls_match.calls`` that names a tool needs n of it."""
    for i, name in enumerate(expects.tools_used or ()):
        yield Need(("tools_used", i), name, 1)
    for kind in ("tool_arguments_contain", "tool_results_contain"):
        entries: tuple[PayloadNeedle, ...] = getattr(expects, kind) or ()
        for i, entry in enumerate(entries):
            yield Need((kind, i), entry.tool, (entry.call_index or 0) + 1, entry.call_index)
    counted: dict[str, int] = {}
    for i, call in enumerate(expects.tool_calls_match.calls if expects.tool_calls_match else ()):
        counted[call.tool] = counted.get(call.tool, 0) + 1
        yield Need(("tool_calls_match", "calls", i), call.tool, counted[call.tool])


def patterns_compile_and_can_fail(expects: Expectations, base: JSONPath) -> Iterator[Refusal]:
    """SPEC §4 rule 5 (patterns compile as RE2), and no pattern that matches every reply."""
    for index, pattern in enumerate(expects.response_matches or ()):
        where = base + ("response_matches", index)
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            yield Refusal(_pattern_message(where, pattern, str(exc)), where, ungradable=True)
            continue
        if _matches_every_text(pattern):
            yield Refusal(
                f"{dotted(where)} {quote(pattern)} matches every reply, because it can match the "
                "empty string somewhere in any text, so this check can never fail; require at "
                'least one character (e.g. "x+" rather than "x*", no empty alternative as in '
                '"a|"), or anchor it (e.g. "^$" to match only an empty reply)',
                where,
                ungradable=True,
            )


_matches_every_text = lru_cache(maxsize=1024)(matches_every_text)
"""Suites repeat their patterns; each verdict takes several RE2 searches (bounded like the
compiled patterns :func:`compile_pattern` keeps)."""


def _pattern_message(where: JSONPath, pattern: str, reason: str) -> str:
    hint = ""
    if any(
        s in reason for s in ("invalid escape sequence: \\1", "invalid perl operator: (?")
    ) or any(f"\\{d}" in pattern for d in "123456789"):
        hint = " (RE2 has no backreferences or lookaround)"
    return (
        f"{dotted(where)} {quote(pattern)} is not valid RE2: {reason}{hint}; "
        "patterns use the RE2 syntax of Go and Rust's regex crate"
    )


def required_tool_forbidden(expects: Expectations, base: JSONPath) -> Iterator[Refusal]:
    """A tool that ``tools_not_used`` forbids and another check needs a call to: reported at
    the ``tools_not_used`` entry when ``tools_used`` names it, else at the check needing it."""
    why = "no run can both call it and not call it"
    yield from listed_in_both(expects, base, "tools_not_used", expects, base, "tools_used", why)
    yield from needs_forbidden(expects, base, expects, base)


def listed_in_both(
    named: Expectations,
    base: JSONPath,
    kind: str,
    other: Expectations,
    other_base: JSONPath,
    other_kind: str,
    why: str,
) -> Iterator[Refusal]:
    """Each name in ``kind`` of the checks at ``base`` that ``other_kind`` of the checks at
    ``other_base`` lists too, where the two cannot both pass (``why``): reported at the first."""
    first: dict[str, int] = {}
    for i, name in enumerate(getattr(other, other_kind) or ()):
        first.setdefault(name, i)
    for j, name in enumerate(getattr(named, kind) or ()):
        if name in first:
            yield Refusal(
                f"{dotted(base + (kind, j))} {quote(name)} is also in "
                f"{dotted(other_base + (other_kind, first[name]))}; {why}; remove it from one "
                "of the lists",
                base + (kind, j),
                about=(other_kind,) if other_base == base else (),
            )


def needs_forbidden(
    needing: Expectations,
    base: JSONPath,
    forbidding: Expectations,
    forbidding_base: JSONPath,
    scope: str = "",
) -> Iterator[Refusal]:
    """Each check at ``base`` that needs a call to a tool the ``tools_not_used`` at
    ``forbidding_base`` forbids (``scope``: where). Within one level, a name in ``tools_used``
    and ``tools_not_used`` is :func:`listed_in_both`'s."""
    forbidden: dict[str, int] = {}
    for j, name in enumerate(forbidding.tools_not_used or ()):
        forbidden.setdefault(name, j)
    for need in tools_needed(needing):
        if need.tool in forbidden and (base != forbidding_base or need.kind != "tools_used"):
            yield Refusal(
                f"{dotted(base + need.at)} needs a call to {quote(need.tool)}, which "
                f"{dotted(forbidding_base)}.tools_not_used[{forbidden[need.tool]}] forbids"
                f"{scope}; no run can pass both; drop one of them",
                base + need.tool_at,
                about=("tools_not_used",) if forbidding_base == base else (),
            )


def required_text_forbidden(expects: Expectations, base: JSONPath) -> Iterator[Refusal]:
    """A ``response_not_contains`` entry that some ``response_contains`` entry contains,
    reported at the entry that forbids it."""
    yield from text_conflicts(expects, base, "response_not_contains", expects, base)


def text_conflicts(
    named: Expectations,
    base: JSONPath,
    kind: str,
    other: Expectations,
    other_base: JSONPath,
    note: str = "",
) -> Iterator[Refusal]:
    """Each entry of ``kind`` (``response_contains`` or ``response_not_contains``) at ``base``
    that an entry of the opposite kind at ``other_base`` contradicts, in NFC as the checks
    compare: one requires text the other forbids (``note``: why they read the same reply)."""
    forbids = kind == "response_not_contains"
    other_kind = "response_contains" if forbids else "response_not_contains"
    theirs: tuple[str, ...] = getattr(other, other_kind) or ()
    normal = [nfc(text) for text in theirs]
    for j, text in enumerate(getattr(named, kind) or ()):
        mine = nfc(text)
        i = next((k for k, o in enumerate(normal) if (mine in o if forbids else o in mine)), -1)
        if i < 0:
            continue
        required, banned = (theirs[i], text) if forbids else (text, theirs[i])
        if mine == normal[i]:
            relation, as_written = "is the same text as", text == theirs[i]
            outcome = "no reply can both contain it and not contain it"
        else:
            relation = "occurs inside" if forbids else "contains"
            as_written = banned in required
            outcome = f"a reply that contains {quote(required)} always contains {quote(banned)}"
        # Say so when the two only meet once normalised, as the checks compare them.
        nfc_part = "" if as_written else " (in Unicode NFC, the form checks compare in)"
        yield Refusal(
            f"{dotted(base + (kind, j))} {quote(text)} {relation} "
            f"{dotted(other_base + (other_kind, i))} {quote(theirs[i])}{nfc_part}{note}; "
            f"{outcome}, so no reply can pass both; remove or change one of them",
            base + (kind, j),
            about=(other_kind,) if other_base == base else (),
        )


def offered_and_not_offered(expects: Expectations, base: JSONPath) -> Iterator[Refusal]:
    """A tool in both ``tools_offered`` and ``tools_not_offered``: no request can both offer
    it and not offer it. Reported at the ``tools_not_offered`` entry."""
    why = "no model request can both offer it and not offer it"
    yield from listed_in_both(
        expects, base, "tools_not_offered", expects, base, "tools_offered", why
    )
