"""Fuzzed answers: whatever a model API's body or stream holds, the three readers give a
response or a :class:`WireResponseError` (a "live model: the answer is malformed" run error),
never another exception.

The seeds are valid bodies and streams of each wire, written by the wires' own server side;
each example replaces one field anywhere in them (or an event's name, or drops a key) with an
arbitrary JSON value, infinities, NaN and numbers too large for a float among them.
Bounded: ``EVALRUNNER_FUZZ_EXAMPLES`` examples per test (default 300);
the example database is off so no files land in the repository.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalrunner.model import ModelResponse, TextResponse, ToolCall, ToolCallsResponse
from evalrunner.wire.anthropic import AnthropicMessages
from evalrunner.wire.client import ClientWire
from evalrunner.wire.common import SseEvent, WireResponseError, body_json
from evalrunner.wire.openai_chat import OpenAIChat
from evalrunner.wire.openai_responses import OpenAIResponses

EXAMPLES = int(os.environ.get("EVALRUNNER_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
WIRES: dict[str, Any] = {
    "openai": OpenAIChat(),
    "openai-responses": OpenAIResponses(),
    "anthropic": AnthropicMessages(),
}
RESPONSES: list[ModelResponse] = [
    TextResponse("hello there, a reply long enough to be streamed in pieces", 11, 5),
    ToolCallsResponse(
        (
            ToolCall("call_1", "echo", '{"text": "hi", "n": [1, 2.5, null]}'),
            ToolCall("call_2", "add", '{"a": 1}'),
        ),
        7,
        3,
    ),
]
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    # Numbers a JSON text may spell that a float cannot hold or compare: infinities, NaN
    # (json.dumps writes them as Infinity and NaN, which Python's decoder would take),
    # integers of hundreds of digits and floats at the edge of the range.
    | st.floats()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.sampled_from([10**400, -(10**400), 2**1024, 1.7976931348623157e308, 5e-324, -0.0])
    | st.text(max_size=12)
    | st.sampled_from(
        [
            "text",
            "tool_use",
            "message",
            "function_call",
            "output_text",
            "text_delta",
            "input_json_delta",
            "response.completed",
            "response.output_item.added",
            "response.output_text.delta",
            "response.function_call_arguments.delta",
            "content_block_start",
            "content_block_delta",
            "message_stop",
            "[DONE]",
            "completed",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*at, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*at, index))
    return found


def _mutated(value: Any, data: st.DataObject) -> Any:
    """``value`` with one field replaced by arbitrary JSON (or dropped, from an object)."""
    copy = json.loads(json.dumps(value))
    path = data.draw(st.sampled_from(_paths(copy)))
    if not path:
        return data.draw(JSON)
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    if isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(JSON)
    return copy


def _frames(wire: Any, response: ModelResponse) -> list[tuple[str | None, Any]]:
    events: list[tuple[str | None, Any]] = []
    for frame in wire.stream_events(response, response_id="r1", model="m", usage=True):
        name: str | None = None
        payload = ""
        for line in frame.splitlines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                payload = line.removeprefix("data: ")
        events.append((name, payload if payload == "[DONE]" else json.loads(payload)))
    return events


def _outcome(read: Any, value: Any) -> None:
    try:
        result = read(value)
    except WireResponseError as exc:
        assert str(exc)
        return
    assert isinstance(result, ModelResponse)


@pytest.mark.fuzz
@pytest.mark.parametrize("name", list(WIRES))
@given(data=st.data(), response=st.sampled_from(RESPONSES))
@FUZZ
def test_a_fuzzed_body_is_read_or_malformed(
    name: str, data: st.DataObject, response: ModelResponse
) -> None:
    wire: ClientWire = WIRES[name]
    body = WIRES[name].response_body(response, response_id="r1", model="m")
    mutated = _mutated(body, data)
    _outcome(wire.read_response, mutated)
    # And as the live path reads it: the bytes through the body decoder first.
    _outcome(lambda text: wire.read_response(body_json(text)), json.dumps(mutated).encode())


@pytest.mark.fuzz
@pytest.mark.parametrize("name", list(WIRES))
@given(data=st.data(), response=st.sampled_from(RESPONSES))
@FUZZ
def test_a_fuzzed_stream_is_read_or_malformed(
    name: str, data: st.DataObject, response: ModelResponse
) -> None:
    wire: ClientWire = WIRES[name]
    frames = _frames(WIRES[name], response)
    for _ in range(data.draw(st.integers(min_value=1, max_value=2))):
        index = data.draw(st.integers(min_value=0, max_value=len(frames) - 1))
        event, payload = frames[index]
        if data.draw(st.integers(min_value=0, max_value=5)) == 0:
            event = data.draw(st.none() | st.sampled_from([e for e, _ in frames if e] or ["x"]))
        elif payload != "[DONE]":
            payload = _mutated(payload, data)
        frames[index] = (event, payload)
    events = [
        SseEvent(event, payload if payload == "[DONE]" else json.dumps(payload))
        for event, payload in frames
    ]
    _outcome(wire.read_stream, iter(events))
