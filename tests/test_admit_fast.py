"""jsonschema-rs, admission's fast yes/no, against jsonschema, the reference.

Validation skips jsonschema when jsonschema-rs says a document is valid (on the bundled schema,
with Python's ``re`` for ``pattern``), so it must never say "valid" where jsonschema finds an
error; here it must give the very same verdict, both ways, on every fixture in the repository
and on edge values at each place of them (a NaN aside: jsonschema-rs calls it invalid, and
jsonschema then decides). Without jsonschema-rs, admission is the same.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import evalrunner.fixture.admit as admission
from evalrunner.fixture.admit import admit, admit_documents
from evalrunner.fixture.load import RawDocument, iter_documents, load_document
from evalrunner.fixture.schemas import SchemaValidator, case_validator, config_validator
from evalrunner.model import Case

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = settings(
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _has_nan(node: object) -> bool:
    if isinstance(node, dict):
        return any(_has_nan(value) for value in node.values())
    if isinstance(node, list):
        return any(_has_nan(value) for value in node)
    return isinstance(node, float) and math.isnan(node)


def agrees(validator: SchemaValidator, data: object) -> None:
    """jsonschema-rs's verdict is jsonschema's (what it cannot read, jsonschema judges)."""
    assert validator.fast is not None, "jsonschema-rs is a dependency"
    expected = validator.reference.is_valid(data)
    try:
        verdict = validator.fast.is_valid(data)
    except ValueError:
        return
    if verdict is not expected:
        assert not verdict and _has_nan(data), f"jsonschema says valid={expected} for {data!r}"


def same_verdict(data: object) -> None:
    agrees(case_validator(), data)


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

SAMPLE = SEEDS[::9]
"""A few seeds, each place of which gets every edge value (jsonschema judges each one)."""

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
    for seed in SAMPLE:
        for path in _paths(seed):
            for value in TRICKY:
                same_verdict(_replaced(seed, path, value))
                compared += 1
    assert compared > 500


def test_same_verdict_with_each_key_dropped_or_doubled() -> None:
    for seed in SAMPLE:
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


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    )


# --- admission is the same with and without the fast path -----------------------------------


def _check_admission_is_unchanged(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = load_document(path)
    if not isinstance(document, RawDocument):
        return
    outcome = admit(document)
    reference = _admit_with_jsonschema_only(load_document(path), monkeypatch)
    assert _comparable(outcome) == _comparable(reference)


def _admit_with_jsonschema_only(document: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patch:
        patch.setattr(case_validator(), "fast", None)  # as without jsonschema-rs installed
        return admit(document)


def _comparable(outcome: Any) -> Any:
    if isinstance(outcome, Case):
        return outcome, dict(outcome.positions)
    return outcome


@pytest.mark.parametrize("path", _fixture_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_admission_is_the_same_without_jsonschema_rs(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check_admission_is_unchanged(path, monkeypatch)


def test_the_whole_broken_suite_is_refused_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = sorted((ROOT / "tests" / "data" / "broken").iterdir())
    with_fast = admit_documents(iter_documents(broken))
    monkeypatch.setattr(case_validator(), "fast", None)
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


# --- the configuration: jsonschema-rs against jsonschema ---------------------------------------

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
def test_jsonschema_rs_agrees_with_jsonschema_on_configs(
    values: dict[str, Any], live: dict[str, Any] | None
) -> None:
    # Bounds included (exclusiveMinimum: 0 for the timeouts): jsonschema-rs may only say
    # "valid" where jsonschema does, and must say it there, or a valid config pays its import.
    section: dict[str, Any] = {"eval": dict(values)}
    if live is not None:
        section["eval"]["live"] = live
    agrees(config_validator(), section)
