"""Stage 2, admit: a parsed document becomes a :class:`Case`, or is refused with reasons.

Fail-closed (SPEC §4): the document is validated against the published case schema, then the
rules a schema cannot express are checked here as plain functions — at least one effective
check, coherent bounds, RE2 patterns that compile and do not match every reply, no checks that
contradict each other, unique tool-call ids, falsifiability against the empty run, and
(suite-wide) unique case names. Every problem of every document is reported.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError


from evalrunner.grade import KINDS, grade
from evalrunner.grade._format import listing, nfc, quote
from evalrunner.grade._json import pointer_problem, schema_problems
from evalrunner.grade.response import PatternError, compile_pattern, matches_every_text
from evalrunner.grade.trajectory import differences
from evalrunner.grade.trajectory import match as trajectory_match
from evalrunner.load import KeyPositions, LoadedSuite, RawDocument
from evalrunner.model import (
    AdmissionError,
    Case,
    CaseClass,
    Expectations,
    ExpectedCall,
    JSONPath,
    ModelResponse,
    PayloadNeedle,
    ResponseJson,
    RunRecord,
    TextResponse,
    ToolCall,
    ToolCallsMatch,
    ToolCallsResponse,
    Turn,
    argument_json,
)
from evalrunner.schemas import case_validator
from evalrunner.text import dotted, name_problem, printable, printable_path


@dataclass(frozen=True, slots=True)
class Admission:
    """The outcome of admitting a suite: the admitted cases and every refusal, sorted."""

    cases: tuple[Case, ...]
    errors: tuple[AdmissionError, ...]

    @property
    def ok(self) -> bool:
        """True when nothing was refused."""
        return not self.errors


def admit_suite(loaded: LoadedSuite) -> Admission:
    """Admit every document of a loaded suite; load errors are carried over."""
    return admit_documents([*loaded.documents, list(loaded.errors)])


@dataclass(frozen=True, slots=True)
class Admitted:
    """A case admitted by an earlier run (the admission cache): there is no document to
    admit, but ``document`` loads it again should its name turn out to be taken."""

    case: Case
    document: Callable[[], RawDocument | list[AdmissionError]]


def admit_documents(
    outcomes: Iterable[RawDocument | Admitted | list[AdmissionError]],
    *,
    remember: Callable[[RawDocument, Case | list[AdmissionError]], None] | None = None,
) -> Admission:
    """Admit a stream of loaded documents (or their load errors, or cases admitted before),
    one at a time; ``remember`` hears what admitting each document gave.

    Only admitted cases and errors are kept, not the parsed documents nor their text (a
    report that needs a position reads the file again: :class:`KeyPositions`). Case names
    must be unique across the stream (SPEC §4 rule 8).
    """
    errors: list[AdmissionError] = []
    cases: list[Case] = []
    # Name → a one-element tuple made for the document that used it first: identity tells the
    # first use from a repeat even when the same document comes twice, and the path is only
    # made printable when there is a repeat to report.
    named: dict[str, tuple[Path]] = {}
    for document in outcomes:
        if isinstance(document, list):
            errors.extend(document)
            continue
        if isinstance(document, Admitted):
            outcome: Case | list[AdmissionError] = document.case
            mine = (document.case.source,)
        else:
            outcome = admit(document)
            mine = (document.path,)
            if remember is not None:
                remember(document, outcome)
        if isinstance(outcome, Case):
            first = named.setdefault(outcome.name, mine)
            if first is not mine:
                errors.extend(_taken(outcome.name, first[0], document))
            else:
                cases.append(outcome)
        else:
            errors.extend(outcome)
    return Admission(tuple(cases), tuple(sorted(errors, key=AdmissionError.sort_key)))


def _taken(name: str, first: Path, document: RawDocument | Admitted) -> list[AdmissionError]:
    """The refusal of a case whose name an earlier file took, at the name in its text."""
    loaded = document.document() if isinstance(document, Admitted) else document
    if isinstance(loaded, list):  # changed on disk since it was admitted: its own errors
        return loaded
    message = (
        f"case name {json.dumps(name, ensure_ascii=False)} is already used by "
        f"{printable_path(first)}; names must be unique in a suite"
    )
    return [loaded.error(message, (_name_key(loaded.data),))]


def _name_key(data: object) -> str:
    return "model_name" if isinstance(data, dict) and "model_name" in data else "name"


def admit(document: RawDocument) -> Case | list[AdmissionError]:
    """Admit one document: a :class:`Case`, or the sorted list of everything wrong with it."""
    # jsonschema words every error; for a valid case it is not even imported.
    schema_errors = [
        problem
        for error in case_validator().iter_errors(document.data)
        for problem in _explain(document, error)
    ]
    errors = list(schema_errors) + _name_characters(document)
    data = document.data
    expects: Expectations | None = None
    if isinstance(data, dict):
        # The rules beyond the schema need well-formed input; each part that is well-formed is
        # still checked, so one pass reports every problem.
        def clean(key: str) -> bool:
            # (A valid case has no schema errors to look through: no generator built for it.)
            return key in data and not (
                schema_errors and any(e.json_path[:1] == (key,) for e in schema_errors)
            )

        if clean("expects"):
            # Casts name their types as strings on this path: a subscripted type is built
            # anew on every call (a Union costs a microsecond and a half), for nothing.
            declared = cast("dict[str, Any]", data["expects"])
            expects = _expectations(declared)
            errors.extend(_check_expects(expects, declared, document, partial=False))
        elif isinstance(data.get("expects"), dict):
            # Some kinds are malformed: the well-formed ones are still checked among
            # themselves; the rules about the case as a whole wait for the rest.
            broken = {
                e.json_path[1]
                for e in schema_errors
                if e.json_path[:1] == ("expects",) and len(e.json_path) > 1
            }
            if ("expects",) not in {e.json_path for e in schema_errors}:
                sound = {
                    k: v
                    for k, v in cast(dict[str, Any], data["expects"]).items()
                    if k not in broken and k in _KIND_NAMES
                }
                errors.extend(check_expects(sound, document, partial=True))
        if clean("turns"):
            turns = cast("list[Any]", data["turns"])
            errors.extend(_duplicate_ids(turns, document))
            errors.extend(_mixed_turns(turns, document))
            if all("steps" in turn for turn in turns):
                errors.extend(_turns_without_reply(turns, document))
                # Checks refused among themselves already say why the case cannot pass.
                if expects is not None and not errors:
                    errors.extend(unsatisfiable(expects, _scripted_calls(turns), document))
    if errors:
        return _unique_sorted(errors)
    return build_case(cast("dict[str, Any]", data), document, expects)


_KIND_NAMES = frozenset(f.name for f in fields(Expectations))


def _name_characters(document: RawDocument) -> list[AdmissionError]:
    """Case names are printed in every report: a ``\\r``, a newline, an ANSI escape or a bidi
    override in one could forge or reorder report lines. Refused here, with the rule
    ``evalrunner new`` applies (:func:`evalrunner.text.name_problem`)."""
    data = document.data
    if not isinstance(data, dict):
        return []
    errors = []
    for key in ("name", "model_name"):
        value = data.get(key)
        if not isinstance(value, str):
            continue  # a missing or non-string name is a schema error
        problem = name_problem(value)
        if problem is not None:
            errors.append(document.error(f'case name "{printable(value)}" {problem}', (key,)))
    return errors


def _unique_sorted(errors: Iterable[AdmissionError]) -> list[AdmissionError]:
    return sorted(set(errors), key=AdmissionError.sort_key)


# --- building the case -------------------------------------------------------------------------


def build_case(
    data: Mapping[str, Any], document: RawDocument, expects: Expectations | None = None
) -> Case:
    """Normalize schema-valid fixture data into a :class:`Case` (``expects``: its
    expectations, when already built from ``data["expects"]``)."""
    turns = tuple(
        Turn(
            user_input=turn["user_input"],
            responses=tuple(_response(step["response"]) for step in turn.get("steps", ())),
        )
        for turn in data["turns"]
    )
    return Case(
        name=data["name"] if "name" in data else data["model_name"],
        turns=turns,
        expects=_expectations(data["expects"]) if expects is None else expects,
        description=data.get("description"),
        case_class=cast("CaseClass | None", data.get("class")),
        source=document.path,
        positions=KeyPositions(document.path, _name_key(data), data["expects"]),
    )


def _response(raw: Mapping[str, Any]) -> ModelResponse:
    input_tokens = raw.get("input_tokens", 0)
    output_tokens = raw.get("output_tokens", 0)
    if raw["type"] == "text":
        return TextResponse(raw["content"], input_tokens, output_tokens)
    calls = [
        ToolCall(call["id"], call["name"], argument_text(call["arguments"]))
        for call in raw["tool_calls"]
    ]
    return ToolCallsResponse(tuple(calls), input_tokens, output_tokens)


def argument_text(arguments: object) -> str:
    """The argument text a scripted call hands the agent (SPEC §5).

    An object becomes compact JSON with sorted keys and non-ASCII kept; a string is verbatim.
    """
    if isinstance(arguments, str):
        return arguments
    return argument_json(arguments)


def _expectations(raw: Mapping[str, Any]) -> Expectations:
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in {"tool_arguments_contain", "tool_results_contain"}:
            values[key] = tuple(
                PayloadNeedle(e["tool"], e["needle"], e.get("call_index")) for e in value
            )
        elif key == "tool_calls_match":
            values[key] = tool_calls_match_value(value)
        elif key == "response_json":
            values[key] = response_json_value(value)
        elif isinstance(value, list):
            values[key] = tuple(value)
        else:
            values[key] = value
    return Expectations(**values)


def _json_text(value: object) -> str | None:
    return None if value is None else argument_json(value)


def tool_calls_match_value(raw: Mapping[str, Any]) -> ToolCallsMatch:
    """A schema-valid ``tool_calls_match`` as its frozen value (JSON values as JSON text)."""
    calls = tuple(
        ExpectedCall(
            call["tool"],
            _json_text(call.get("arguments")),
            _json_text(call.get("arguments_schema")),
            call.get("result_contains"),
            call.get("succeeded"),
        )
        for call in raw["calls"]
    )
    return ToolCallsMatch(calls, raw.get("order", "in_order"), raw.get("extras", "forbid"))


def response_json_value(raw: Mapping[str, Any]) -> ResponseJson:
    """A schema-valid ``response_json`` as its frozen value (JSON values as JSON text)."""
    equals = tuple((pointer, argument_json(v)) for pointer, v in raw.get("equals", {}).items())
    return ResponseJson(_json_text(raw.get("schema")), equals)


# --- rules beyond the schema -------------------------------------------------------------------


def check_expects(
    declared: Mapping[str, Any], document: RawDocument, *, partial: bool = False
) -> list[AdmissionError]:
    """SPEC §4 rules 3, 4, 5 and 7 on a schema-valid ``expects`` object, and the stricter rules
    of issue 8: no pattern that matches every reply, no checks that contradict each other.

    ``partial``: ``declared`` holds only the well-formed kinds of an ``expects`` with schema
    errors; the rules about the whole case (at least one check, falsifiability) are left out.
    """
    return _check_expects(_expectations(declared), declared, document, partial=partial)


def _check_expects(
    expects: Expectations, declared: Mapping[str, Any], document: RawDocument, *, partial: bool
) -> list[AdmissionError]:
    here = ("expects",)
    errors: list[AdmissionError] = []

    effective = [k for k, v in declared.items() if not (isinstance(v, list) and not v)]
    if not effective and not partial:
        what = "no checks" if not declared else "only empty lists, which check nothing"
        # Point at the (first) empty list, the part to fill in; at expects when it is empty.
        at, on_key = (here + (next(iter(declared)),), False) if declared else (here, True)
        errors.append(
            document.error(
                f"expects declares {what}; add at least one check, "
                "e.g. response_contains or exact_tool_calls",
                at,
                key=on_key,
            )
        )

    errors.extend(_incoherent_bounds(expects, document))
    errors.extend(_fixture_schemas(declared, document))
    pattern_errors = _bad_patterns(expects, document)
    errors.extend(pattern_errors)
    errors.extend(_contradictions(expects, document))

    # A refused pattern already says why the case cannot fail (or cannot be graded at all), so
    # the whole-case verdict below waits until the patterns are good.
    if effective and not partial and not pattern_errors and _passes_on_the_empty_run(expects):
        errors.append(
            document.error(
                "every check passes on a run that did nothing (no reply, no tool calls), so this "
                "case can never fail; add a check the scripted run must satisfy, such as "
                "response_contains, tools_used or exact_tool_calls",
                here,
                key=True,
            )
        )
    return errors


def _passes_on_the_empty_run(expects: Expectations) -> bool:
    """Whether every check passes on :meth:`RunRecord.empty`, as grading the whole
    ``expects`` against it would say; graded kind by kind (a kind's results depend on it
    alone), stopping at the first failure, which for nearly every case is the first kind."""
    for kind in KINDS:
        value = getattr(expects, kind.name)
        if value is not None and not _passes_alone_on_the_empty_run(kind.name, value):
            return False
    return True


@lru_cache(maxsize=1024)
def _passes_alone_on_the_empty_run(kind: str, value: Any) -> bool:
    """Whether the one check ``kind: value`` passes on :meth:`RunRecord.empty`. Grading is
    pure, so the verdict depends on these two alone; suites repeat their first checks (an
    ``exact_tool_calls: 1`` decides most cases), and grading one costs more than admitting
    the rest of a case. The values are frozen, and each kind has values of one type, so no
    two different checks share a key."""
    alone = Expectations(**{kind: value})
    return all(g.passed for g in grade(alone, RunRecord.empty()))


def _incoherent_bounds(expects: Expectations, document: RawDocument) -> list[AdmissionError]:
    """SPEC §4 rule 4: ``min``/``max``/``exact_tool_calls`` that no count satisfies, and a
    ``max`` or ``exact`` below the calls the other checks need."""
    here = ("expects",)
    errors = []
    low, high, exact = expects.min_tool_calls, expects.max_tool_calls, expects.exact_tool_calls
    if low is not None and high is not None and low > high:
        errors.append(
            document.error(
                f"min_tool_calls ({low}) is greater than max_tool_calls ({high}); "
                "no run can satisfy both",
                here + ("min_tool_calls",),
            )
        )
    if exact is not None:
        if low is not None and exact < low:
            errors.append(
                document.error(
                    f"exact_tool_calls ({exact}) is below min_tool_calls ({low}); "
                    "drop one of them or make them agree",
                    here + ("exact_tool_calls",),
                )
            )
        if high is not None and exact > high:
            errors.append(
                document.error(
                    f"exact_tool_calls ({exact}) is above max_tool_calls ({high}); "
                    "drop one of them or make them agree",
                    here + ("exact_tool_calls",),
                )
            )
    if high is None and exact is None:
        return errors  # nothing caps the calls, so no other check can need too many
    needed, reasons = _calls_needed(expects)
    for kind, limit in (("max_tool_calls", high), ("exact_tool_calls", exact)):
        if limit is not None and limit < needed:
            errors.append(
                document.error(
                    f"{kind} ({limit}) is below the {needed} tool call(s) the other checks need "
                    f"({'; '.join(reasons())}); no run can satisfy them all; "
                    f"raise it to {needed} or drop one of those checks",
                    here + (kind,),
                )
            )
    return errors


def _calls_needed(expects: Expectations) -> tuple[int, Callable[[], list[str]]]:
    """The fewest dispatches a run needs to pass the checks that name tools, and a function
    that words the reasons (called only when a cap is below the need).

    Each tool needs as many calls as its most demanding check (one for ``tools_used`` or a
    payload check, ``call_index + 1`` with an index); calls to different tools are different
    dispatches. ``all_tools_succeeded: false`` needs one call that failed.
    """
    # tool → (calls, kind, index, call_index) of the check that needs the most calls of it.
    need: dict[str, tuple[int, str, int, int | None]] = {}
    for i, name in enumerate(expects.tools_used or ()):
        need.setdefault(name, (1, "tools_used", i, None))
    for kind, i, entry in _payload_entries(expects):
        calls = (entry.call_index or 0) + 1
        if calls > need.get(entry.tool, (0,))[0]:
            need[entry.tool] = (calls, kind, i, entry.call_index)
    counted: dict[str, int] = {}
    for i, call in enumerate(expects.tool_calls_match.calls if expects.tool_calls_match else ()):
        counted[call.tool] = counted.get(call.tool, 0) + 1
        if counted[call.tool] > need.get(call.tool, (0,))[0]:
            need[call.tool] = (counted[call.tool], "tool_calls_match.calls", i, None)
    total = sum(needed[0] for needed in need.values())
    if total == 0 and expects.all_tools_succeeded is False:
        return 1, lambda: ["a failed one for expects.all_tools_succeeded: false"]

    def reasons() -> list[str]:
        worded = []
        for tool, (calls, kind, i, call_index) in need.items():
            index = "" if call_index is None else f" with call_index {call_index}"
            worded.append(f"{calls} to {quote(tool)} for expects.{kind}[{i}]{index}")
        return worded

    return total, reasons


def _payload_entries(expects: Expectations) -> Iterator[tuple[str, int, PayloadNeedle]]:
    """Every ``tool_arguments_contain`` and ``tool_results_contain`` entry, with its kind and
    index."""
    for kind, entries in (
        ("tool_arguments_contain", expects.tool_arguments_contain),
        ("tool_results_contain", expects.tool_results_contain),
    ):
        for index, entry in enumerate(entries or ()):
            yield kind, index, entry


def _bad_patterns(expects: Expectations, document: RawDocument) -> list[AdmissionError]:
    """SPEC §4 rule 5 (patterns compile as RE2), and no pattern that matches every reply."""
    errors = []
    for index, pattern in enumerate(expects.response_matches or ()):
        where = ("expects", "response_matches", index)
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            errors.append(document.error(_pattern_message(pattern, str(exc)), where))
            continue
        if _matches_every_text(pattern):
            errors.append(
                document.error(
                    f"pattern {quote(pattern)} matches every reply, because it can match the "
                    "empty string somewhere in any text, so this check can never fail; require at "
                    'least one character (e.g. "x+" rather than "x*", no empty alternative as in '
                    '"a|"), or anchor it (e.g. "^$" to match only an empty reply)',
                    where,
                )
            )
    return errors


_matches_every_text = lru_cache(maxsize=1024)(matches_every_text)
"""Suites repeat their patterns; each verdict takes several RE2 searches (bounded like the
compiled patterns :func:`compile_pattern` keeps)."""


def _contradictions(expects: Expectations, document: RawDocument) -> list[AdmissionError]:
    """Checks that no run can pass together, each reported at the entry that forbids what
    another one requires. (Count bounds are :func:`_incoherent_bounds`.)"""
    errors: list[AdmissionError] = []
    # Every contradiction involves a "not" kind: without one (most cases), nothing to look at.
    if not expects.tools_not_used and not expects.response_not_contains:
        return errors
    used: dict[str, int] = {}
    for i, name in enumerate(expects.tools_used or ()):
        used.setdefault(name, i)
    forbidden: dict[str, int] = {}
    for j, name in enumerate(expects.tools_not_used or ()):
        forbidden.setdefault(name, j)
        if name in used:
            errors.append(
                document.error(
                    f"{quote(name)} is in both expects.tools_used[{used[name]}] and "
                    f"expects.tools_not_used[{j}]; no run can both call it and not call it; "
                    "remove it from one of the lists",
                    ("expects", "tools_not_used", j),
                )
            )
    match = expects.tool_calls_match
    for i, call in enumerate(match.calls if match else ()):
        if call.tool in forbidden:
            errors.append(
                document.error(
                    f"expects.tool_calls_match.calls[{i}] needs a call to {quote(call.tool)}, "
                    f"which expects.tools_not_used[{forbidden[call.tool]}] forbids; no run can "
                    "satisfy both; drop one of them",
                    ("expects", "tool_calls_match", "calls", i, "tool"),
                )
            )
    for kind, i, entry in _payload_entries(expects):
        if entry.tool in forbidden:
            errors.append(
                document.error(
                    f"expects.{kind}[{i}] needs a call to {quote(entry.tool)}, which "
                    f"expects.tools_not_used[{forbidden[entry.tool]}] forbids; no run can "
                    "satisfy both; drop one of them",
                    ("expects", kind, i, "tool"),
                )
            )
    required = expects.response_contains or ()
    wanted = [nfc(text) for text in required]
    for j, banned in enumerate(expects.response_not_contains or ()):
        normal = nfc(banned)
        i = next((k for k, text in enumerate(wanted) if normal in text), -1)
        if i < 0:
            continue
        if normal == wanted[i]:
            relation, as_written = "is the same text as", banned == required[i]
            outcome = "no reply can both contain it and not contain it"
        else:
            relation, as_written = "occurs inside", banned in required[i]
            outcome = f"a reply that contains {quote(required[i])} always contains {quote(banned)}"
        # Say so when the two only meet once normalised, as the checks compare them.
        nfc_part = "" if as_written else " (in Unicode NFC, the form checks compare in)"
        errors.append(
            document.error(
                f"expects.response_not_contains[{j}] {quote(banned)} {relation} "
                f"expects.response_contains[{i}] {quote(required[i])}{nfc_part}; {outcome}, so "
                "no reply can pass both; remove or change one of them",
                ("expects", "response_not_contains", j),
            )
        )
    return errors


def _fixture_schemas(declared: Mapping[str, Any], document: RawDocument) -> list[AdmissionError]:
    """JSON Schemas written in the fixture are valid Draft 2020-12 schemas with no unknown
    keyword, and ``response_json.equals`` keys are JSON Pointers."""
    schemas: list[tuple[JSONPath, object]] = []
    match = declared.get("tool_calls_match")
    for i, call in enumerate(match.get("calls", ()) if isinstance(match, dict) else ()):
        if isinstance(call, dict) and "arguments_schema" in call:
            at: JSONPath = ("expects", "tool_calls_match", "calls", i, "arguments_schema")
            schemas.append((at, call["arguments_schema"]))
    reply = declared.get("response_json")
    errors = []
    if isinstance(reply, dict):
        if "schema" in reply:
            schemas.append((("expects", "response_json", "schema"), reply["schema"]))
        for pointer in reply.get("equals", {}):
            problem = pointer_problem(pointer)
            if problem is not None:
                errors.append(
                    document.error(
                        f"{quote(pointer)} is not a JSON Pointer: {problem}",
                        ("expects", "response_json", "equals", pointer),
                        key=True,
                    )
                )
    for at, schema in schemas:
        for inner, message in schema_problems(schema):
            errors.append(document.error(message, at + inner, key=bool(inner)))
    return errors


def _turns_without_reply(turns: list[Any], document: RawDocument) -> list[AdmissionError]:
    """A turn whose last step is a tool call never ends in a reply: after dispatching, the
    agent asks the model again, and the script has nothing left to answer."""
    return [
        document.error(
            f"turn {t + 1} ends with a tool_calls step, so it can never end in a reply: the "
            "agent asks the model again after the calls and the script has no response left; "
            "add a step after it such as {type: text, content: ...}",
            ("turns", t, "steps", len(turn["steps"]) - 1),
        )
        for t, turn in enumerate(turns)
        if turn["steps"][-1]["response"].get("type") == "tool_calls"
    ]


def _scripted_calls(turns: list[Any]) -> list[ToolCall]:
    """Every tool call the script hands out, in order: what a correct agent dispatches."""
    return [
        ToolCall(call["id"], call["name"], argument_text(call["arguments"]))
        for turn in turns
        for step in turn["steps"]
        for call in step["response"].get("tool_calls", ())
    ]


def unsatisfiable(
    expects: Expectations,
    scripted: Sequence[ToolCall],
    document: RawDocument,
    at: JSONPath = ("expects",),
) -> list[AdmissionError]:
    """Checks at ``at`` that no correct run of the script can pass: a correct agent dispatches
    every scripted call, with the scripted arguments, in order (issue 26)."""
    errors = []
    count = len(scripted)
    names = [call.name for call in scripted]
    called = f"the script calls {listing(names)}" if names else "the script calls no tool"
    for kind in ("exact_tool_calls", "max_tool_calls"):
        limit = getattr(expects, kind)
        if limit is not None and limit < count:
            errors.append(
                document.error(
                    f"{kind} ({limit}) is below the {count} tool call(s) the script hands out "
                    f"({called}); a correct agent dispatches every one, so this check always "
                    f"fails; raise it to {count} or script fewer calls",
                    at + (kind,),
                )
            )
    low = expects.min_tool_calls
    if low is not None and low > count:
        errors.append(
            document.error(
                f"min_tool_calls ({low}) is above the {count} tool call(s) the script hands out "
                f"({called}); no correct run makes more, so this check always fails; lower it "
                f"to {count} or script more calls",
                at + ("min_tool_calls",),
            )
        )
    for i, name in enumerate(expects.tools_used or ()):
        if name not in names:
            errors.append(
                document.error(
                    f"tools_used names {quote(name)}, but {called}{_did_you_mean(name, names)}; "
                    "this check always fails; script a call to it or remove it",
                    at + ("tools_used", i),
                )
            )
    if expects.tool_calls_match is not None:
        errors.extend(
            _unmatchable(expects.tool_calls_match, scripted, document, at + ("tool_calls_match",))
        )
    return errors


def _did_you_mean(name: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, sorted(set(names)), n=1, cutoff=0.8)
    return f" (did you mean {quote(close[0])}?)" if close else ""


def _unmatchable(
    match: ToolCallsMatch, scripted: Sequence[ToolCall], document: RawDocument, at: JSONPath
) -> list[AdmissionError]:
    """A ``tool_calls_match`` that the scripted calls, dispatched as scripted, cannot match."""
    errors = []
    names = [call.name for call in scripted]
    called = f"the script calls {listing(names)}" if names else "the script calls no tool"
    seen: dict[str, int] = {}
    for j, wanted in enumerate(match.calls):
        here = at + ("calls", j)
        seen[wanted.tool] = seen.get(wanted.tool, 0) + 1
        made = names.count(wanted.tool)
        if not made:
            errors.append(
                document.error(
                    f"expects a call to {quote(wanted.tool)}, but {called}"
                    f"{_did_you_mean(wanted.tool, names)}; no correct run can match it; script "
                    "the call or remove this entry",
                    here + ("tool",),
                )
            )
            continue
        if seen[wanted.tool] == made + 1:
            errors.append(
                document.error(
                    f"expects {seen[wanted.tool]} or more calls to {quote(wanted.tool)}, but the "
                    f"script makes {made}; each expected call needs a dispatch of its own; "
                    "remove this entry or script another call",
                    here,
                )
            )
        for matcher in ("arguments", "arguments_schema"):
            if getattr(wanted, matcher) is None:
                continue
            alone = ExpectedCall(wanted.tool, **{matcher: getattr(wanted, matcher)})
            reasons = [
                differences(alone, call.arguments) for call in scripted if call.name == wanted.tool
            ]
            if all(reasons):
                errors.append(
                    document.error(
                        f"{matcher} rejects every scripted call to {quote(wanted.tool)} "
                        f"({'; '.join(dict.fromkeys(r[0] for r in reasons))}); no correct "
                        "run can match it",
                        here + (matcher,),
                    )
                )
    if match.extras == "forbid" and len(match.calls) < len(scripted):
        errors.append(
            document.error(
                f"with extras: forbid every dispatch must be matched, but {len(match.calls)} "
                f"call(s) are expected and the script makes {len(scripted)} ({called}); expect "
                "each scripted call, or set extras: allow",
                at,
                key=True,
            )
        )
    if errors:
        return errors
    # Each entry could match some scripted call: the assignment must exist too.
    fits = [
        [call.name == wanted.tool and not differences(wanted, call.arguments) for call in scripted]
        for wanted in match.calls
    ]
    if len(trajectory_match(match, fits)) < len(match.calls):
        order = "in the scripted order " if match.order == "in_order" else ""
        errors.append(
            document.error(
                f"no assignment of the scripted calls {order}matches every expected call, so no "
                "correct run can pass; compare each entry's tool and arguments with the script"
                + (" or set order: any" if match.order == "in_order" else ""),
                at,
                key=True,
            )
        )
    return errors


def _pattern_message(pattern: str, reason: str) -> str:
    hint = ""
    if any(
        s in reason for s in ("invalid escape sequence: \\1", "invalid perl operator: (?")
    ) or any(f"\\{d}" in pattern for d in "123456789"):
        hint = " (RE2 has no backreferences or lookaround)"
    return (
        f"pattern {quote(pattern)} is not valid RE2: {reason}{hint}; "
        "patterns use the RE2 syntax of Go and Rust's regex crate"
    )


def _mixed_turns(turns: list[Any], document: RawDocument) -> list[AdmissionError]:
    """A case is scripted (steps in every turn) or live (steps in none): a turn without steps
    in a scripted case is a step forgotten, and would silently send that turn to nobody."""
    scripted = ["steps" in turn for turn in turns]
    if all(scripted) or not any(scripted):
        return []
    return [
        document.error(
            f"turn {t + 1} has no steps, but other turns of this case script theirs; give "
            "every turn steps (a replayed case) or none (a live case, answered by the real "
            "model in --mode live)",
            ("turns", t),
        )
        for t, has in enumerate(scripted)
        if not has
    ]


def _duplicate_ids(turns: list[Any], document: RawDocument) -> list[AdmissionError]:
    """SPEC §4 rule 6: tool-call ids are unique within a case."""
    seen: dict[str, JSONPath] = {}
    errors = []
    for t, turn in enumerate(turns):
        for s, step in enumerate(turn.get("steps", ())):
            for c, call in enumerate(step["response"].get("tool_calls", ())):
                path: JSONPath = ("turns", t, "steps", s, "response", "tool_calls", c, "id")
                first = seen.setdefault(call["id"], path)
                if first is not path:
                    errors.append(
                        document.error(
                            f"tool-call id {json.dumps(call['id'], ensure_ascii=False)} is "
                            f"already used at {_describe(first[:-1])}; "
                            "ids must be unique within a case",
                            path,
                        )
                    )
    return errors


# --- schema errors, explained ------------------------------------------------------------------

_JSON_TYPE = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def _json_type(value: object) -> str:
    return _JSON_TYPE.get(type(value), type(value).__name__)


def _describe(path: Sequence[str | int]) -> str:
    """``('turns', 0, 'steps')`` → ``turns[0].steps``; the root is "the case"."""
    return dotted(path) if path else "the case"


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _explain(document: RawDocument, error: ValidationError) -> list[AdmissionError]:
    """Turn one jsonschema error into messages that say what is wrong and what would be right."""
    path: JSONPath = tuple(error.absolute_path)
    where = _describe(path)
    keyword = error.validator
    instance = error.instance
    schema = error.schema if isinstance(error.schema, dict) else {}

    if _is_step(path) and isinstance(instance, dict) and "response" not in instance:
        # One error for a step without its response key, however many keys it has instead.
        return [] if keyword != "required" else [_no_response(document, path, instance)]
    if keyword == "additionalProperties" and isinstance(instance, dict):
        allowed = sorted(schema.get("properties", {}))
        return [
            document.error(_unknown_key(key, where, allowed), path + (key,), key=True)
            for key in instance
            if key not in schema.get("properties", {})
        ]
    if keyword == "required" and isinstance(instance, dict):
        return [
            document.error(f"missing required key {key!r} in {where}", path)
            for key in cast(list[str], error.validator_value)
            if key not in instance
        ]
    if keyword == "oneOf" and not path and not isinstance(instance, dict):
        return []  # not an object at all: the "type" error says so
    if keyword == "oneOf" and not path and isinstance(instance, dict):
        if "name" in instance and "model_name" in instance:
            return [
                document.error(
                    "the case has both 'name' and 'model_name'; keep one (name is preferred)",
                    ("model_name",),
                    key=True,
                )
            ]
        return [document.error("missing required key 'name' in the case", ())]
    if keyword == "type":
        expected = error.validator_value
        names = [str(n) for n in (expected if isinstance(expected, list) else [expected])]
        if not path:
            return [
                document.error(
                    "a fixture must be an object (a mapping or table) at the top level, "
                    f"got {_json_type(instance)}",
                    path,
                )
            ]
        # null is its own text: "got null", never "got null null".
        got = _json_type(instance)
        if instance is not None:
            got += f" {_short(instance)}"
        elif instance is None and path and isinstance(path[-1], str):
            got += f"; write its value after {path[-1]!r}"
        return [
            document.error(
                f"{where} must be {' or '.join(_article(n) for n in names)}, got {got}", path
            )
        ]
    if keyword == "minLength":
        return [document.error(f"{where} must not be empty", path)]
    if keyword == "pattern" and error.validator_value == "\\S" and instance == "":
        return []  # empty, not just blank: the "minLength" error says so
    if keyword == "pattern" and error.validator_value == "\\S":
        return [
            document.error(
                f"{where} must not be blank (it is only whitespace); {_blank_hint(path)}", path
            )
        ]
    if keyword == "pattern" and path[-2:] == ("recorded", "date"):
        return [
            document.error(
                f"{where} must be a UTC time to the second, as evalrunner record writes it "
                f"(for example 2026-12-01T09:00:00Z), got {_short(instance)}",
                path,
            )
        ]
    if keyword == "minItems":
        count = error.validator_value
        return [document.error(f"{where} needs at least {count} item(s), got none", path)]
    if keyword == "minimum":
        return [
            document.error(
                f"{where} must be at least {error.validator_value}, got {_short(instance)}", path
            )
        ]
    if keyword == "enum":
        options = " or ".join(_short(v) for v in cast(list[object], error.validator_value))
        if path[-1:] == ("type",) and "response" in path:
            return [
                document.error(
                    f"unknown response type {_short(instance)}; expected {options}", path
                )
            ]
        return [document.error(f"{where} must be {options}, got {_short(instance)}", path)]
    return [document.error(f"{where}: {error.message}", path)]


def _is_step(path: JSONPath) -> bool:
    return len(path) == 4 and path[0] == "turns" and path[2] == "steps"


def _no_response(document: RawDocument, path: JSONPath, step: dict[str, Any]) -> AdmissionError:
    """A step without ``response``: what it holds instead, and how a step is written."""
    message = f"{_describe(path)} has no 'response' key"
    misplaced = [key for key in step if key in {"type", "content", "tool_calls"}]
    typo = [k for k in step if difflib.get_close_matches(k, ["response"], n=1, cutoff=0.6)]
    if misplaced:
        message += (
            f": {', '.join(repr(k) for k in misplaced)} belong inside it; indent them under "
            "a 'response:' key"
        )
    elif typo:
        message += f" (did you mean 'response' for {typo[0]!r}?)"
    return document.error(
        message + "; a step is written - response: {type: text, content: ...} or "
        "- response: {type: tool_calls, tool_calls: [...]}",
        path,
    )


def _blank_hint(path: JSONPath) -> str:
    """What to write instead of a blank string at ``path`` (every place the schema refuses one)."""
    field = next((part for part in reversed(path) if isinstance(part, str)), "")
    if field in {"response_contains", "response_not_contains"}:
        return "give the text to look for, or check for whitespace with response_matches and \\s"
    if field == "needle":
        return "give the text to look for in the payload"
    if field == "user_input":
        return "write what the user says"
    if field == "result_contains":
        return "give the text to look for in the result"
    return "give the tool's name"


def _article(type_name: str) -> str:
    return f"an {type_name}" if type_name[0] in "aeiou" else f"a {type_name}"


def _unknown_key(key: str, where: str, allowed: list[str]) -> str:
    message = f"unknown key {key!r} in {where}"
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"{message} (did you mean {close[0]!r}?)"
    return f"{message} (allowed: {', '.join(allowed)})"
