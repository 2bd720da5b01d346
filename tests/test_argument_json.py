"""Argument text (SPEC §5) is written by one function: a fixture's object arguments, the
monitor's comparison of a re-serialised or Anthropic-wire call, the invocation log and the
Anthropic wire's calls all agree, because they all call it."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from evalrunner.fixture.admit import argument_text
from evalrunner.model import argument_json

PACKAGE = Path(__file__).resolve().parent.parent / "evalrunner"

OBJECTS = st.dictionaries(
    st.text(max_size=6),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=8,
    ),
    max_size=4,
)


@given(OBJECTS)
def test_every_writer_of_argument_text_writes_the_same(value: dict[str, object]) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert argument_json(value) == argument_text(value) == expected


def test_a_string_argument_is_kept_verbatim() -> None:
    assert argument_text('{"b": 1,  "a": 2}') == '{"b": 1,  "a": 2}'


def test_argument_text_is_defined_once_in_the_package() -> None:
    # Sorted-key JSON written anywhere else would be a second definition, free to drift (the
    # schema export sorts its keys too, but indents: a file for people, not argument text).
    writers = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "sort_keys=True" in path.read_text(encoding="utf-8")
    )
    assert writers == ["model.py", "toolbox/export.py"], writers
