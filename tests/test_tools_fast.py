"""The shortcuts of a tool call decide what the long way decides: the arguments' snapshot is
their deep copy, and the lone-surrogate refusal is made whenever the full walk would make it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalrunner.boundary import tools
from evalrunner.model import ToolCall

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


class Text(str):
    pass


@given(arguments=st.dictionaries(st.text(max_size=4), _JSON, max_size=4))
def test_snapshot_is_a_deep_copy(arguments: dict[str, Any]) -> None:
    snapshot = tools._snapshot(arguments)[0]
    assert snapshot is not arguments
    assert repr(snapshot) == repr(copy.deepcopy(arguments))
    for key, value in arguments.items():
        if isinstance(value, list | dict):
            assert snapshot[key] is not value  # nested values are copied, not shared


def test_snapshot_of_unusual_values_is_deepcopys() -> None:
    shared: list[int] = [1]
    for arguments in ({Text("k"): "v"}, {"k": Text("v")}, {"a": shared, "b": shared}, {1: 2}):
        snapshot = tools._snapshot(arguments)[0]
        assert repr(snapshot) == repr(copy.deepcopy(arguments))
        assert [type(k) for k in snapshot] == [type(k) for k in arguments]
    aliased = tools._snapshot({"a": shared, "b": shared})[0]
    assert aliased["a"] is aliased["b"]  # deepcopy keeps what is shared


@pytest.mark.parametrize(
    "text",
    [
        '{"message": "\\ud800"}',
        '{"\\udc00": "x"}',
        '{"message": ["a", {"b": "\\uDBFF"}]}',
        '{"message": "\ud800"}',
        '{"message": "\\\\ud800"}',
        '{"message": "\\ud83d\\ude00"}',
        '{"message": "plain"}',
    ],
)
def test_surrogate_refusal_is_the_walks(text: str) -> None:
    walked = tools._has_lone_surrogate(json.loads(text))
    record = tools.dispatch(tools.builtin_tools(), ToolCall("c1", "echo", text))
    assert ("lone surrogate" in record.result) == walked
    subclassed = tools.dispatch(tools.builtin_tools(), ToolCall("c1", "echo", Text(text)))
    assert ("lone surrogate" in subclassed.result) == walked
