"""Fuzzed admission: whatever the bytes, load + admit end in a Case or positioned errors.

Two generators: arbitrary bytes under each fixture extension, and structure-aware mutations of
the valid regression fixtures (keys dropped, added, renamed, retyped; values swapped between
fields; unicode, control characters, very long strings, deep nesting), written out in every
format. Any other exception is a bug. The example database is off so no failing-example files
land in the repository; a failure prints its reproducing example instead.

How many examples each test draws is the hypothesis profile's (tests/conftest.py).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_suite, parse_document
from evalrunner.fixture.schemas import case_validator
from evalrunner.model import AdmissionError, Case, Format

pytestmark = pytest.mark.fuzz

ROOT = Path(__file__).resolve().parent.parent
FUZZ = settings(
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FORMATS: list[Format] = ["json", "yaml", "toml"]
SEEDS = [document.data for document in load_suite(ROOT / "evals" / "regression").documents]


def check_outcome(raw: bytes, fmt: Format) -> Case | list[AdmissionError]:
    """Load and admit; assert the outcome is one of the two allowed shapes."""
    path = Path(f"fuzzed.{fmt}")
    document = parse_document(raw, fmt, path)
    if not isinstance(document, list):
        # Admission trusts jsonschema-rs when it says valid: jsonschema must say so too.
        validator = case_validator()
        assert validator.fast is not None
        try:
            valid = validator.fast.is_valid(document.data)
        except ValueError:  # what it cannot read (a TOML date), jsonschema judges
            valid = False
        assert not valid or validator.reference.is_valid(document.data)
    outcome = document if isinstance(document, list) else admit(document)
    if isinstance(outcome, Case):
        return outcome
    assert outcome, "refused without a reason"
    for error in outcome:
        assert isinstance(error, AdmissionError)
        assert error.path == str(path)
        assert error.message and "Traceback" not in error.message
        assert error.line is not None or error.json_path, f"no position: {error}"
        if error.line is not None:
            assert error.line >= 1 and (error.col is None or error.col >= 1)
    return outcome


@FUZZ
@given(raw=st.binary(max_size=2048), fmt=st.sampled_from(FORMATS))
def test_arbitrary_bytes(raw: bytes, fmt: Format) -> None:
    check_outcome(raw, fmt)


_TEXT_TOKENS = st.sampled_from(
    [
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        '"',
        "'",
        "\n",
        "  ",
        "- ",
        "name",
        "turns",
        "expects",
        "steps",
        "response",
        "=",
        "[[turns]]",
        "[expects]",
        "&a",
        "*a",
        "!!str",
        "%YAML 1.1",
        "---",
        "\t",
        "#",
        "null",
        "true",
        "1e999",
        "NaN",
        "\\u0000",
        "\x00",
        "\ufeff",
        "é",
        "🚀",
    ]
)


@FUZZ
@given(parts=st.lists(_TEXT_TOKENS, max_size=60), fmt=st.sampled_from(FORMATS))
def test_syntax_shaped_noise(parts: list[str], fmt: Format) -> None:
    check_outcome("".join(parts).encode("utf-8", "surrogatepass"), fmt)


# --- structure-aware mutations -----------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1000, max_size=5000),
    st.sampled_from(["", " ", "\x00\x01\x1f", "\u202e", "no", "1e3", "null", "~", "\r\n", "é🚀"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, prefix + (index,))
    return found


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(root, path[:-1])[path[-1]] = value
    return root


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    data = json.loads(json.dumps(draw(st.sampled_from(SEEDS))))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = _paths(data)
        path = draw(st.sampled_from(paths))
        target = _get(data, path)
        op = draw(st.sampled_from(["drop", "add", "rename", "retype", "swap", "nest", "text"]))
        if op == "drop" and path:
            parent = _get(data, path[:-1])
            if isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent.pop(path[-1])
        elif op == "add" and isinstance(target, dict):
            target[draw(st.text(max_size=12))] = draw(_values)
        elif op == "add" and isinstance(target, list):
            target.append(draw(_values))
        elif op == "rename" and path and isinstance(_get(data, path[:-1]), dict):
            parent = _get(data, path[:-1])
            parent[draw(st.text(max_size=12)) + str(path[-1])[1:]] = parent.pop(path[-1])
        elif op == "retype":
            data = _set(data, path, draw(_values))
        elif op == "swap":
            other = draw(st.sampled_from(paths))
            if other[: len(path)] != path and path[: len(other)] != other:
                first, second = _get(data, path), _get(data, other)
                data = _set(data, path, second)
                data = _set(data, other, first)
        elif op == "nest":
            depth = draw(st.integers(min_value=1, max_value=200))
            wrapped: Any = target
            for _ in range(depth):
                wrapped = [wrapped]
            data = _set(data, path, wrapped)
        elif op == "text":
            data = _set(data, path, draw(_scalars))
    return data


def _serialize(data: Any, fmt: Format) -> bytes | None:
    if fmt == "json":
        return json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if fmt == "yaml":
        stream = io.StringIO()
        yaml = YAML(typ="safe", pure=True)
        yaml.dump(data, stream)
        return stream.getvalue().encode("utf-8", "surrogatepass")
    try:
        return tomli_w.dumps(data).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError, AttributeError):
        return None  # TOML cannot hold this shape (null, a non-table root): nothing to test


@FUZZ
@given(data=mutated(), fmt=st.sampled_from(FORMATS))
def test_structure_aware_mutations(data: Any, fmt: Format) -> None:
    try:
        raw = _serialize(data, fmt)
    except RecursionError:
        return  # the serializer itself cannot write it; the loader's depth cap is tested elsewhere
    if raw is not None:
        check_outcome(raw, fmt)


def test_every_seed_is_admitted_unchanged() -> None:
    for data in SEEDS:
        for fmt in FORMATS:
            raw = _serialize(data, fmt)
            assert raw is not None
            assert isinstance(check_outcome(raw, fmt), Case)
