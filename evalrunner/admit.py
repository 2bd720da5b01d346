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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError


from evalrunner.grade import KINDS, grade
from evalrunner.grade.kinds import BY_NAME
from evalrunner.load import KeyPositions, LoadedSuite, RawDocument
from evalrunner.model import (
    AdmissionError,
    Case,
    CaseClass,
    Expectations,
    JSONPath,
    ModelResponse,
    RunRecord,
    TextResponse,
    ToolCall,
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
    if errors:
        return _unique_sorted(errors)
    return build_case(cast("dict[str, Any]", data), document, expects)


_KIND_NAMES = frozenset(BY_NAME)


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
    """Schema-valid ``expects`` as typed values, each parsed by its kind."""
    return Expectations(**{key: BY_NAME[key].parse(value) for key, value in raw.items()})


# --- rules beyond the schema -------------------------------------------------------------------


def check_expects(
    declared: Mapping[str, Any], document: RawDocument, *, partial: bool = False
) -> list[AdmissionError]:
    """SPEC §4 rules 3, 4, 5 and 7 on a schema-valid ``expects`` object, and the stricter rules
    of issue 8: no pattern that matches every reply, no checks that contradict each other.
    The rules about one kind and its neighbours are each declared kind's ``rules``
    (:mod:`evalrunner.grade.kinds`); at least one check, and falsifiability, are checked here.

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

    refusals = [
        refusal
        for kind in KINDS
        if getattr(expects, kind.name) is not None
        for rule in kind.rules
        for refusal in rule(expects)
    ]
    errors.extend(document.error(r.message, r.at, key=r.key) for r in refusals)

    # A refused pattern already says why the case cannot fail (or cannot be graded at all), so
    # the whole-case verdict below waits until the patterns are good.
    ungradable = any(r.ungradable for r in refusals)
    if effective and not partial and not ungradable and _passes_on_the_empty_run(expects):
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
        return [
            document.error(
                f"{where} must be {' or '.join(_article(n) for n in names)}, "
                f"got {_json_type(instance)} {_short(instance)}",
                path,
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


def _blank_hint(path: JSONPath) -> str:
    """What to write instead of a blank string at ``path`` (every place the schema refuses one)."""
    field = next((part for part in reversed(path) if isinstance(part, str)), "")
    if field in {"response_contains", "response_not_contains"}:
        return "give the text to look for, or check for whitespace with response_matches and \\s"
    if field == "needle":
        return "give the text to look for in the payload"
    if field == "user_input":
        return "write what the user says"
    return "give the tool's name"


def _article(type_name: str) -> str:
    return f"an {type_name}" if type_name[0] in "aeiou" else f"a {type_name}"


def _unknown_key(key: str, where: str, allowed: list[str]) -> str:
    message = f"unknown key {key!r} in {where}"
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"{message} (did you mean {close[0]!r}?)"
    return f"{message} (allowed: {', '.join(allowed)})"
