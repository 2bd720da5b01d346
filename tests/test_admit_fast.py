"""The compiled schema check (admission's fast path) against jsonschema, the reference.

Admission skips jsonschema when :func:`evalrunner.schemas.case_check` says a document is valid,
so that check must never say "valid" where jsonschema finds an error; here it must give the
very same verdict, both ways, on every fixture in the repository, on generated valid cases and
on mutations of them. A schema keyword the compiler does not know makes it refuse to compile
(admission then asks jsonschema about everything), and a test here fails so that the drift is
seen.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from referencing import Registry
from referencing.jsonschema import DRAFT202012

import evalrunner.admit as admission
from evalrunner.admit import admit, admit_documents
from evalrunner.load import RawDocument, iter_documents, load_document
from evalrunner.model import Case
from evalrunner.schemas import (
    BASE_URI,
    CASE_ID,
    TYPE_CHECKS,
    TreeResolver,
    UnresolvedRef,
    UnsupportedSchema,
    case_check,
    case_validator,
    compile_check,
    config_check,
    config_validator,
    schema_tree,
    strict_validator,
)

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = settings(
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def fast() -> Any:
    check = case_check()
    assert check is not None, "the case schema does not compile: see test_the_case_schema_compiles"
    return check


def same_verdict(data: object) -> None:
    expected = case_validator().is_valid(data)
    assert fast()(data) is expected, f"jsonschema says valid={expected} for {data!r}"


# --- the check is there, and knows what it decides ---------------------------------------------


def test_the_case_schema_compiles() -> None:
    """Fails when a keyword (or a form of one) enters the case schema that the compiled check
    does not implement: admission stays correct, asking jsonschema about every document, but
    loses its fast path until the compiler learns the keyword (with a test here)."""
    assert case_check() is not None


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"type": "string", "format": "email"},
        {"properties": {"a": {"type": "integer", "multipleOf": 2}}},
        {"enum": ["a", 1]},
        {"const": True},
        {"type": "money"},
        {"items": {"prefixItems": [{"type": "string"}]}},
        {"$ref": "https://example.invalid/nowhere.json"},
        {"unevaluatedProperties": False},
        {"minLength": 1.5},
        {"$schema": "https://json-schema.org/draft/2020-12/schema"},
    ],
)
def test_a_keyword_it_does_not_know_makes_it_refuse_to_compile(schema: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedSchema):
        compile_check(schema, TreeResolver({}, BASE_URI))


def test_a_schema_tree_with_an_unknown_keyword_has_no_fast_check() -> None:
    tree = schema_tree()
    documents = copy.deepcopy(tree.documents)
    documents["case.schema.json"]["properties"]["name"]["format"] = "hostname"
    assert replace(tree, documents=documents).check(CASE_ID) is None


def _tree_with_a_new_kind(kind_schema: dict[str, Any]) -> Any:
    """The shipped schema tree, with one more expectation kind, ``response_length``."""
    tree = schema_tree()
    documents = copy.deepcopy(tree.documents)
    documents["case.schema.json"]["$defs"]["expects"]["properties"]["response_length"] = kind_schema
    return replace(tree, documents=documents)


def test_a_kind_added_to_the_schema_is_checked_as_the_schema_says() -> None:
    tree = _tree_with_a_new_kind({"type": "integer", "minimum": 1})
    check = tree.check(CASE_ID)
    assert check is not None
    reference = tree.validator(CASE_ID)
    seed = copy.deepcopy(SEEDS[0])
    for value in [0, 1, 7, 1.0, True, "3", None]:
        seed["expects"]["response_length"] = value
        assert check(seed) is reference.is_valid(seed), value
    seed["expects"]["response_length"] = 0
    assert check(seed) is False


def test_a_kind_added_with_a_keyword_it_does_not_know_leaves_no_fast_check() -> None:
    assert _tree_with_a_new_kind({"type": "integer", "multipleOf": 2}).check(CASE_ID) is None


def test_the_type_checks_are_the_strict_validators() -> None:
    checker = strict_validator().TYPE_CHECKER
    # The seven types of JSON Schema, each defined by the validator's checker.
    assert set(TYPE_CHECKS) == {"array", "boolean", "integer", "null", "number", "object", "string"}
    samples: list[object] = [
        None,
        True,
        False,
        0,
        1,
        -3,
        2**70,
        0.0,
        1.0,
        1.5,
        math.nan,
        math.inf,
        "",
        "x",
        [],
        [1],
        {},
        {"a": 1},
        (),
        b"x",
        1j,
        object(),
    ]
    for name, check in TYPE_CHECKS.items():
        for value in samples:
            assert check(value) is checker.is_type(value, name), (name, value)


# --- same verdict as jsonschema ------------------------------------------------------------------


def _fixture_files() -> list[Path]:
    """Every fixture file of the repository: the broken ones, the examples, the suite."""
    suffixes = {".json", ".yaml", ".yml", ".toml"}
    roots = [ROOT / "tests", ROOT / "evals", ROOT / "examples"]
    return sorted(
        path
        for root in roots
        for path in root.rglob("*")
        if path.suffix in suffixes
        and path.is_file()
        and "node_modules" not in path.parts
        and path.name not in {"package.json", "package-lock.json", "evalrunner.toml"}
    )


def test_there_are_fixtures_to_compare() -> None:
    names = {path.name for path in _fixture_files()}
    assert {"r2_unknown_key.json", "r2_wrong_type.toml", "multi_turn_tool_loop.toml"} <= names


@pytest.mark.parametrize("path", _fixture_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_same_verdict_on_every_fixture_file(path: Path) -> None:
    document = load_document(path)
    if isinstance(document, RawDocument):
        same_verdict(document.data)


SEEDS = [
    document.data
    for document in iter_documents([ROOT / "evals" / "regression", ROOT / "examples"])
    if isinstance(document, RawDocument)
]

# Values chosen to sit on each keyword's edge: the wrong JSON type, integers that are floats or
# booleans, empty and blank strings (including whitespace \S refuses but other engines accept),
# values outside an enum, bounds.
TRICKY: list[object] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    1.0,
    0.0,
    -0.0,
    2.5,
    math.nan,
    2**64,
    "",
    " ",
    "\t",
    "\x1c",
    "\u3000",
    "\u200b",
    "x",
    "text",
    "tool_calls",
    "positive",
    "TEXT",
    [],
    [""],
    ["x"],
    [1],
    {},
    {"type": "text"},
    {"type": "text", "content": "x"},
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, prefix + (index,))
    return found


def _replaced(data: Any, path: tuple[Any, ...], value: object) -> Any:
    if not path:
        return value
    out = copy.deepcopy(data)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


def test_same_verdict_with_each_tricky_value_at_each_place() -> None:
    """Every place of every seed fixture, given each edge value in turn (deterministic)."""
    compared = 0
    for seed in SEEDS:
        for path in _paths(seed):
            for value in TRICKY:
                same_verdict(_replaced(seed, path, value))
                compared += 1
    assert compared > 1000


def test_same_verdict_with_each_key_dropped_or_doubled() -> None:
    for seed in SEEDS:
        for path in _paths(seed):
            if not path:
                continue
            parent = path[:-1]
            container = seed
            for part in parent:
                container = container[part]
            if isinstance(container, dict):
                dropped = copy.deepcopy(seed)
                target = dropped
                for part in parent:
                    target = target[part]
                del target[path[-1]]
                same_verdict(dropped)
                same_verdict(_replaced(seed, parent, {**container, "model_name": "m"}))
                same_verdict(_replaced(seed, parent, {**container, path[-1] + "_": 1}))
            else:
                same_verdict(_replaced(seed, parent, [*container, container[path[-1]]]))
                same_verdict(_replaced(seed, parent, []))


# A generator of cases from the schema's own vocabulary: valid by construction, and then
# mutated by the draw.

# Names, needles and tool names must hold a character that is not whitespace (the schema's "\S",
# in Python's sense of whitespace).
_names = st.text(min_size=1, max_size=12).filter(lambda text: re.search(r"\S", text) is not None)
_needles = st.one_of(_names, st.sampled_from([" ", "\u3000", "\x1c", "a b", "\u200b"]))
_counts = st.one_of(st.integers(min_value=-1, max_value=4), st.sampled_from([1.0, 0.0, True]))


@st.composite
def _tool_call(draw: st.DrawFn) -> dict[str, Any]:
    call: dict[str, Any] = {
        "id": draw(_names),
        "name": draw(_names),
        "arguments": draw(
            st.one_of(st.text(max_size=8), st.dictionaries(_names, st.integers(), max_size=2))
        ),
    }
    return call


@st.composite
def _response(draw: st.DrawFn) -> dict[str, Any]:
    response: dict[str, Any]
    if draw(st.booleans()):
        response = {"type": "text", "content": draw(st.text(max_size=10))}
    else:
        response = {
            "type": "tool_calls",
            "tool_calls": draw(st.lists(_tool_call(), min_size=1, max_size=2)),
        }
    for key in ("input_tokens", "output_tokens"):
        if draw(st.booleans()):
            response[key] = draw(st.integers(min_value=0, max_value=100))
    return response


@st.composite
def _payloads(draw: st.DrawFn) -> list[dict[str, Any]]:
    entries = []
    for _ in range(draw(st.integers(min_value=0, max_value=2))):
        entry: dict[str, Any] = {"tool": draw(_names), "needle": draw(_names)}
        if draw(st.booleans()):
            entry["call_index"] = draw(st.integers(min_value=0, max_value=3))
        entries.append(entry)
    return entries


@st.composite
def _expects(draw: st.DrawFn) -> dict[str, Any]:
    makers: dict[str, st.SearchStrategy[Any]] = {
        "response_contains": st.lists(_names, max_size=2),
        "response_not_contains": st.lists(_names, max_size=2),
        "response_matches": st.lists(_names, max_size=2),
        "tools_used": st.lists(_names, max_size=2),
        "tools_not_used": st.lists(_names, max_size=2),
        "max_tool_calls": st.integers(min_value=0, max_value=5),
        "min_tool_calls": st.integers(min_value=1, max_value=5),
        "exact_tool_calls": st.integers(min_value=0, max_value=5),
        "all_tools_succeeded": st.booleans(),
        "tool_arguments_contain": _payloads(),
        "tool_results_contain": _payloads(),
    }
    kinds = draw(st.lists(st.sampled_from(sorted(makers)), unique=True, max_size=5))
    return {kind: draw(makers[kind]) for kind in kinds}


@st.composite
def valid_cases(draw: st.DrawFn) -> dict[str, Any]:
    case: dict[str, Any] = {draw(st.sampled_from(["name", "model_name"])): draw(_names)}
    if draw(st.booleans()):
        case["description"] = draw(st.text(max_size=10))
    if draw(st.booleans()):
        case["class"] = draw(st.sampled_from(["positive", "negative"]))
    if draw(st.booleans()):
        case["$schema"] = "../schemas/case.schema.json"
    case["turns"] = [
        {
            "user_input": draw(_names),
            "steps": [{"response": r} for r in draw(st.lists(_response(), min_size=1, max_size=3))],
        }
        for _ in range(draw(st.integers(min_value=1, max_value=2)))
    ]
    case["expects"] = draw(_expects())
    return case


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    )


_any_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=6),
        st.sampled_from(TRICKY),
    ),
    _containers,
    max_leaves=6,
)


@st.composite
def mutated_cases(draw: st.DrawFn) -> Any:
    data = draw(st.one_of(valid_cases(), st.sampled_from(SEEDS).map(copy.deepcopy)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(_paths(data)))
        operation = draw(st.sampled_from(["replace", "drop", "add", "needle", "count"]))
        parent: Any = data
        for part in path[:-1]:
            parent = parent[part]
        # Copies of the drawn values: TRICKY's lists and objects are shared between
        # examples, and a later "drop" or "add" of this draw edits what it was given.
        if operation == "replace":
            data = _replaced(data, path, copy.deepcopy(draw(_any_json)))
        elif operation == "drop" and path:
            del parent[path[-1]]
        elif operation == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from([*TRICKY[17:20], "name", "model_name", "type", "id"]))] = (
                copy.deepcopy(draw(_any_json))
            )
        elif operation == "needle":
            data = _replaced(data, path, draw(_needles))
        elif operation == "count":
            data = _replaced(data, path, draw(_counts))
    return data


@SETTINGS
@given(data=valid_cases())
def test_generated_cases_are_valid_for_both(data: dict[str, Any]) -> None:
    assert case_validator().is_valid(data), data  # the generator's own promise
    assert fast()(data) is True


@SETTINGS
@given(data=mutated_cases())
def test_same_verdict_on_mutated_cases(data: Any) -> None:
    same_verdict(data)


@SETTINGS
@given(data=st.one_of(valid_cases(), mutated_cases()))
def test_same_verdict_after_a_round_trip_through_json(data: Any) -> None:
    """What a loader hands admission: JSON types only (tuples become lists, and so on)."""
    try:
        text = json.dumps(data)
    except ValueError:
        return
    same_verdict(json.loads(text))


# --- admission is the same with and without the fast path -----------------------------------


def _check_admission_is_unchanged(path: Path) -> None:
    document = load_document(path)
    if not isinstance(document, RawDocument):
        return
    outcome = admit(document)
    reference = _admit_with_jsonschema_only(load_document(path))
    assert _comparable(outcome) == _comparable(reference)


def _admit_with_jsonschema_only(document: Any) -> Any:
    original = admission.case_check
    admission.case_check = lambda: None  # type: ignore[assignment]
    try:
        return admit(document)
    finally:
        admission.case_check = original  # type: ignore[assignment]


def _comparable(outcome: Any) -> Any:
    if isinstance(outcome, Case):
        return outcome, dict(outcome.positions)
    return outcome


@pytest.mark.parametrize("path", _fixture_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_admission_is_the_same_with_the_fast_path(path: Path) -> None:
    _check_admission_is_unchanged(path)


def test_the_whole_broken_suite_is_refused_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = sorted((ROOT / "tests" / "data" / "broken").iterdir())
    with_fast = admit_documents(iter_documents(broken))
    monkeypatch.setattr(admission, "case_check", lambda: None)
    without = admit_documents(iter_documents(broken))
    assert with_fast == without
    assert with_fast.errors


# --- the argument text is what json.dumps writes ---------------------------------------------

_arguments = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6)),
    _containers,
    max_leaves=10,
)


@SETTINGS
@given(arguments=st.dictionaries(st.text(max_size=6), _arguments, max_size=4))
def test_argument_text_is_compact_sorted_json(arguments: dict[str, Any]) -> None:
    expected = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert admission.argument_text(arguments) == expected


# --- the compiler on its own: any schema of the keywords it knows ----------------------------

_PATTERNS = ["\\S", "^a", "b$", "^[a-z]+$", "x|", ""]
_TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]
_KEYS = ["a", "b", "type", "name"]


def _schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keyword = st.one_of(
        st.builds(
            lambda t: {"type": t},
            st.one_of(
                st.sampled_from(_TYPES),
                st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3, unique=True),
            ),
        ),
        st.builds(lambda v: {"enum": v}, st.lists(st.sampled_from(_KEYS), min_size=1)),
        st.builds(lambda v: {"const": v}, st.sampled_from(_KEYS)),
        st.builds(lambda n: {"minLength": n}, st.integers(0, 3)),
        st.builds(lambda n: {"maxLength": n}, st.integers(0, 3)),
        st.builds(lambda p: {"pattern": p}, st.sampled_from(_PATTERNS)),
        st.builds(lambda n: {"minimum": n}, st.one_of(st.integers(-2, 2), st.floats(-2, 2))),
        st.builds(lambda n: {"maximum": n}, st.one_of(st.integers(-2, 2), st.floats(-2, 2))),
        st.builds(
            lambda n: {"exclusiveMinimum": n}, st.one_of(st.integers(-2, 2), st.floats(-2, 2))
        ),
        st.builds(
            lambda n: {"exclusiveMaximum": n}, st.one_of(st.integers(-2, 2), st.floats(-2, 2))
        ),
        st.builds(lambda n: {"minItems": n}, st.integers(0, 2)),
        st.builds(lambda n: {"maxItems": n}, st.integers(0, 2)),
        st.builds(lambda r: {"required": r}, st.lists(st.sampled_from(_KEYS), unique=True)),
        st.builds(lambda p: {"properties": p}, st.dictionaries(st.sampled_from(_KEYS), inner)),
        st.builds(lambda a: {"additionalProperties": a}, inner),
        st.builds(lambda i: {"items": i}, inner),
        st.builds(lambda c: {"allOf": c}, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda c: {"anyOf": c}, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda c: {"oneOf": c}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda n: {"not": n}, inner),
        st.builds(lambda i, t, e: {"if": i, "then": t, "else": e}, inner, inner, inner),
        st.builds(lambda t: {"then": t}, inner),
    )
    return st.lists(keyword, min_size=1, max_size=4).map(
        lambda parts: {k: v for part in parts for k, v in part.items()}
    )


_any_schema = st.recursive(st.one_of(st.booleans(), st.just({})), _schemas, max_leaves=8)
_instances = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.floats(-3, 3),
        st.sampled_from(
            [1.0, 0.0, -0.0, math.nan, "", " ", "\x1c", "a", "ab", "b", "abc", "type", "name"]
        ),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(SETTINGS)
@given(schema=_any_schema, instances=st.lists(_instances, min_size=1, max_size=5))
def test_any_schema_of_known_keywords_gets_the_same_verdicts(
    schema: Any, instances: list[Any]
) -> None:
    check = compile_check(schema, TreeResolver({}, BASE_URI))
    reference = strict_validator()(schema, registry=Registry())
    for instance in instances:
        assert check(instance) is reference.is_valid(instance), (schema, instance)


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "object", "items": {"type": "string"}}, "x"),
        ({"type": "integer", "minLength": 1}, "x"),
        ({"type": "string", "minimum": 1}, 5),
        ({"type": "array", "required": ["a"]}, {"a": 1}),
    ],
)
def test_a_declared_type_is_checked_beside_other_types_keywords(
    schema: dict[str, Any], instance: object
) -> None:
    assert compile_check(schema, TreeResolver({}, BASE_URI))(instance) is False
    assert not strict_validator()(schema, registry=Registry()).is_valid(instance)


# --- TreeResolver: the compiled checks' own $ref resolution ----------------------------------

_DOC = BASE_URI + "doc.schema.json"


@pytest.mark.parametrize(
    "ref",
    [
        "missing.schema.json",  # no such document
        "#/$defs/absent",  # nothing at the pointer
        "#/$defs/list/7",  # past the end of an array
        "#named",  # an anchor, which it does not index
        "https://elsewhere.example/x.schema.json",  # not in the tree: never fetched
    ],
)
def test_a_ref_it_cannot_resolve_makes_it_refuse_to_compile(ref: str) -> None:
    documents = {_DOC: {"$id": _DOC, "$defs": {"list": [{"type": "string"}]}}}
    with pytest.raises(UnsupportedSchema):
        compile_check({"$ref": ref}, TreeResolver(documents, _DOC))


def test_an_id_inside_a_document_makes_it_refuse_to_compile() -> None:
    # An embedded $id starts a resource of its own; rather than guess, leave it to jsonschema.
    inner = {"$id": "inner.schema.json", "type": "string"}
    documents = {_DOC: {"$id": _DOC, "properties": {"a": inner}}}
    with pytest.raises(UnsupportedSchema):
        compile_check({"$ref": _DOC}, TreeResolver(documents, _DOC))


def test_pointer_escapes_resolve_as_referencing_resolves_them() -> None:
    schema = {
        "$id": _DOC,
        "$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "string"}, "e f": {"minimum": 3}},
    }
    registry = Registry().with_resource(_DOC, DRAFT202012.create_resource(schema))
    ours = TreeResolver({_DOC: schema}, _DOC)
    for ref in ["#/$defs/a~1b", "#/$defs/c~0d", "#/$defs/e%20f", "#"]:
        assert ours.lookup(ref).contents == registry.resolver(_DOC).lookup(ref).contents, ref
    check = compile_check({"$ref": "#/$defs/a~1b"}, ours)
    assert check(3) is True and check("3") is False


# --- the configuration's compiled check, against its validator --------------------------------

_CONFIG_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 5),
    st.sampled_from([0, 1, 10_000, 10_001, 86_400, 86_401, 3600, 3601, 2**63, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 0.5, 120.0, 86400.0, 86400.0000001]),
    st.sampled_from(["", "x", "replay", "live", "openai", "anthropic", "openai-responses"]),
    st.lists(st.sampled_from(["echo", "", 1]), max_size=2),
)
_EVAL_KEYS = [
    "suite_dir", "mode", "max_tool_iterations", "case_timeout_secs", "agent", "tools",
    "builtin_tools", "trimmed_history", "repeat", "agent_command", "unknown",
]  # fmt: skip
_LIVE_KEYS = [
    "wire", "model", "base_url", "api_key_env", "max_tokens", "timeout_secs", "max_retries",
    "temperature", "max_concurrency", "stream", "max_total_tokens", "unknown",
]  # fmt: skip


@settings(SETTINGS)
@given(
    values=st.dictionaries(st.sampled_from(_EVAL_KEYS), _CONFIG_VALUES, max_size=4),
    live=st.one_of(
        st.none(), st.dictionaries(st.sampled_from(_LIVE_KEYS), _CONFIG_VALUES, max_size=4)
    ),
)
def test_the_config_check_agrees_with_the_config_validator(
    values: dict[str, Any], live: dict[str, Any] | None
) -> None:
    # Bounds included (exclusiveMinimum: 0 for the timeouts): the fast path may only say
    # "valid" where jsonschema does, and must say it there, or a valid config pays its import.
    check = config_check()
    assert check is not None
    section: dict[str, Any] = {"eval": dict(values)}
    if live is not None:
        section["eval"]["live"] = live
    assert check(section) is config_validator().is_valid(section), section


_POINTER_KEYS = st.sampled_from(
    ["a", "b", "a/b", "~", "~1", "%", "%2F", "0", "1", "01", "", "allOf", "oneOf"]
)
_POINTER_DOCS = st.recursive(
    st.sampled_from([{"type": "string"}, {"type": "integer"}, {"minimum": 1}]),
    lambda inner: st.one_of(
        st.dictionaries(_POINTER_KEYS, inner, max_size=3), st.lists(inner, max_size=3)
    ),
    max_leaves=8,
)


@SETTINGS
@example(document=[{"type": "string"}], path=["0"], escape="json-pointer")  # a list in $defs
@example(document={"allOf": [{"type": "string"}]}, path=["allOf", "0"], escape="raw")
@given(
    document=_POINTER_DOCS,
    path=st.lists(_POINTER_KEYS, max_size=4),
    escape=st.sampled_from(["json-pointer", "percent", "raw"]),
)
def test_tree_resolver_lands_where_referencing_lands_or_declines(
    document: Any, path: list[str], escape: str
) -> None:
    # Whatever the pointer and however it is escaped, TreeResolver either declines (the
    # compiled check then leaves the verdict to jsonschema) or finds what referencing finds.
    from urllib.parse import quote

    schema = {"$id": _DOC, "$defs": {"x": document}}
    tokens = ["$defs", "x", *path]
    if escape == "json-pointer":
        tokens = [t.replace("~", "~0").replace("/", "~1") for t in tokens]
    elif escape == "percent":
        tokens = [quote(t.replace("~", "~0").replace("/", "~1"), safe="") for t in tokens]
    ref = "#/" + "/".join(tokens)
    registry = Registry().with_resource(_DOC, DRAFT202012.create_resource(schema))
    try:
        theirs = registry.resolver(_DOC).lookup(ref).contents
    except Exception:
        theirs = None
    try:
        mine = TreeResolver({_DOC: schema}, _DOC).lookup(ref).contents
    except UnresolvedRef:
        return
    if not isinstance(mine, dict):
        return  # not a schema (a list): the compiler refuses it, whatever referencing says
    assert theirs is not None and mine == theirs, (ref, mine, theirs)
