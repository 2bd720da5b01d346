"""The JSON report's own indenting writer writes what ``json.dumps(indent=2,
ensure_ascii=False)`` writes, character for character, for any data, and refuses what it
refuses."""

from __future__ import annotations

import json
import math
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrunner.report.json import indented_json


def _stdlib(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


class Colour(StrEnum):
    RED = "red\u2028"


class Level(IntEnum):
    HIGH = 3


LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(codec=None), max_size=20)  # surrogates and controls too
    | st.sampled_from(
        [Colour.RED, Level.HIGH, "\x00\x1b[2J\x7f\x85\u202e\u2029", "", -0.0, 1e300, 5e-324]
    )
)

DATA = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(deadline=None)
@given(DATA)
def test_the_same_text_as_the_standard_library(data: Any) -> None:
    assert indented_json(data) == _stdlib(data)


@pytest.mark.parametrize(
    "data",
    [
        {1: "int key"},
        {"a": {None: 1, True: 2, 2.5: 3}},
        [{"ok": 1}, {3: "late"}],
    ],
)
def test_keys_that_are_not_strings_are_written_as_the_standard_library_writes_them(
    data: Any,
) -> None:
    assert indented_json(data) == _stdlib(data)


@pytest.mark.parametrize("data", [{"a": object()}, [1, {2, 3}], {"b": b"bytes"}, {(1,): 1}])
def test_what_the_standard_library_refuses_is_refused(data: Any) -> None:
    with pytest.raises(TypeError) as theirs:
        _stdlib(data)
    with pytest.raises(TypeError) as mine:
        indented_json(data)
    assert str(mine.value) == str(theirs.value)


def test_every_float_the_report_can_hold() -> None:
    # Rates are floats; a nan or an infinity must read as the standard library writes it.
    data = [math.nan, math.inf, -math.inf, -0.0, 0.1, 1e16, 1.5e-7, 2**0.5]
    assert indented_json(data) == _stdlib(data)
    assert indented_json({"r": -math.inf}) == '{\n  "r": -Infinity\n}'


def test_deep_data_is_written_too() -> None:
    data: Any = "leaf"
    for _ in range(200):
        data = {"k": [data]}
    assert indented_json(data) == _stdlib(data)


def test_a_cycle_is_refused_as_the_standard_library_refuses_it() -> None:
    data: list[Any] = [1]
    data.append({"again": data})
    with pytest.raises(ValueError, match="Circular reference detected"):
        indented_json(data)
