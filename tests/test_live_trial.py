"""Live mode against misbehaving servers (issue 27): a line that never ends, a line past the
cap, a redirect, a key no header can carry, an answer without usage under a budget. Each
server is a loopback :class:`~support.model_server.ModelServer`."""

from __future__ import annotations

import json
import sys

import pytest

from evalrunner.config import LiveConfig
from evalrunner.live.provider import MAX_LINE_BYTES, BudgetSpent, LiveModel, unsendable_key
from evalrunner.model import Message, ModelRequest, RunError, TextResponse

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from support.model_server import WIRES as SERVER_WIRES
from support.model_server import ModelServer, Reply

KEY = "sk-test-KNOWN-SECRET-31337"
WIRES = ["openai", "openai-responses", "anthropic"]
REQUEST = ModelRequest(messages=(Message("user", "say hi"),))
TEXT = TextResponse("hello there", 11, 5)


def model(
    server: ModelServer, key: str = KEY, **overrides: object
) -> tuple[LiveModel, list[float]]:
    waits: list[float] = []
    settings = {
        "wire": server.wire,
        "base_url": server.base_url,
        "model": "test-model",
        "api_key_env": "TEST_KEY",
        "timeout_secs": 2.0,
        **overrides,
    }
    live = LiveModel(
        LiveConfig(**settings),  # type: ignore[arg-type]
        environ={"TEST_KEY": key},
        sleep=waits.append,
    )
    return live, waits


@pytest.mark.parametrize("wire", WIRES)
def test_a_never_ending_streamed_line_is_cut_at_the_deadline_and_retried(wire: str) -> None:
    with ModelServer(wire, [Reply(trickle_line=True), Reply(TEXT)]) as server:
        live, waits = model(server, timeout_secs=0.3, max_retries=1, stream=True)
        assert live.complete(REQUEST) == TEXT
        # The client cut the line off, not the server's own limit (seconds later).
        assert server.given_up.wait(5)
    assert len(waits) == 1 and len(server.seen) == 2


@pytest.mark.parametrize("stream", [False, True])
def test_a_trickling_server_that_never_answers_is_a_timeout(stream: bool) -> None:
    with ModelServer("anthropic", [Reply(trickle_line=True)]) as server:
        live, _ = model(server, timeout_secs=0.3, max_retries=0, stream=stream)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
        assert server.given_up.wait(5)
    assert str(caught.value) == "live model: no answer within timeout_secs = 0.3"


def test_a_streamed_line_past_the_cap_is_a_clear_run_error() -> None:
    raw = b"data: " + b"x" * (MAX_LINE_BYTES + 1) + b"\n\n"
    reply = Reply(status=200, headers={"Content-Type": "text/event-stream"}, raw=raw)
    with ModelServer("openai", [reply]) as server:
        live, waits = model(server, stream=True)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert str(caught.value) == (
        "live model: the answer is malformed: a line of the stream is longer than "
        f"{MAX_LINE_BYTES} bytes (the most one may hold)"
    )
    assert waits == []


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_names_its_status_and_target_and_is_not_followed(status: int) -> None:
    target = "https://api.example.test/v1/chat/completions?key=hidden-value"
    with ModelServer("openai", [Reply(status=status, headers={"Location": target})]) as server:
        live, _ = model(server)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
        assert len(server.seen) == 1
    message = str(caught.value)
    assert f"HTTP {status}" in message
    assert "https://api.example.test/v1/chat/completions" in message
    assert "hidden-value" not in message
    assert "redirects are not followed" in message and "base_url" in message
    assert "not valid JSON" not in message


def test_a_redirect_without_a_location_says_so() -> None:
    with ModelServer("anthropic", [Reply(status=302)]) as server:
        live, _ = model(server)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert "HTTP 302, a redirect to no Location given; redirects are not followed" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("key", "named"),
    [
        (KEY + "\r", "a line break"),
        (KEY + "\n", "a line break"),
        ("sk-\x01" + KEY, "a control character"),
        (KEY + "é", "a character outside ASCII"),
        (KEY + " ", "a space or tab at its start or end"),
    ],
)
def test_a_key_no_header_can_carry_names_the_variable_and_the_class(key: str, named: str) -> None:
    with ModelServer("anthropic", [Reply(TEXT)]) as server:
        live, _ = model(server, key=key)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
        assert server.seen == []
    message = str(caught.value)
    assert "TEST_KEY" in message and named in message
    assert KEY not in message and "KNOWN-SECRET" not in message


def test_a_sendable_key_is_accepted() -> None:
    assert unsendable_key(KEY) is None
    assert unsendable_key("sk a b") is None


NO_USAGE_BODIES = {
    "openai": {"choices": [{"message": {"role": "assistant", "content": "hi"}}]},
    "openai-responses": {
        "object": "response",
        "status": "completed",
        "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "hi"}]},
        ],
    },
    "anthropic": {"type": "message", "content": [{"type": "text", "text": "hi"}]},
}


@pytest.mark.parametrize("wire", WIRES)
def test_a_budget_refuses_an_answer_without_usage_and_sends_no_more(wire: str) -> None:
    body = json.dumps(NO_USAGE_BODIES[wire]).encode()
    with ModelServer(wire, [Reply(raw=body), Reply(TEXT)]) as server:
        live, _ = model(server, max_total_tokens=1000)
        with pytest.raises(BudgetSpent) as caught:
            live.complete(REQUEST)
        assert "carries no token usage, so max_total_tokens cannot be enforced" in str(caught.value)
        with pytest.raises(BudgetSpent):
            live.complete(REQUEST)
        assert len(server.seen) == 1
    assert live.budget.exhausted
    assert "cannot be enforced" in live.budget.message()


def test_without_a_budget_an_answer_without_usage_is_fine() -> None:
    body = json.dumps(NO_USAGE_BODIES["openai"]).encode()
    with ModelServer("openai", [Reply(raw=body)]) as server:
        live, _ = model(server)
        assert live.complete(REQUEST) == TextResponse("hi")


def _sse(*events: tuple[str | None, object]) -> bytes:
    frames = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        frames.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(frames).encode()


GARBLED_STREAMS = {
    "anthropic": _sse(
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": None},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "hi"},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ),
    "openai-responses": _sse(
        (None, {"type": ["response.output_text.delta"], "output_index": 0, "delta": "hi"}),
    ),
}
GARBLED_WHERE = {
    "anthropic": "stream event 2: content_block.text must be a string",
    "openai-responses": "stream event 1: type must be a string",
}


@pytest.mark.parametrize("wire", list(GARBLED_STREAMS))
def test_a_garbled_stream_is_a_malformed_answer_not_a_crash(wire: str) -> None:
    reply = Reply(headers={"Content-Type": "text/event-stream"}, raw=GARBLED_STREAMS[wire])
    with ModelServer(wire, [reply]) as server:
        live, waits = model(server, stream=True)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert str(caught.value) == f"live model: the answer is malformed: {GARBLED_WHERE[wire]}"
    assert waits == []


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"])
def test_a_stream_with_any_line_end_the_format_allows_is_read(end: str) -> None:
    frames = SERVER_WIRES["anthropic"].stream_events(TEXT, response_id="r1", model="m", usage=True)
    raw = "".join(frames).replace("\n", end).encode()
    reply = Reply(headers={"Content-Type": "text/event-stream"}, raw=raw)
    with ModelServer("anthropic", [reply]) as server:
        live, _ = model(server, stream=True)
        assert live.complete(REQUEST) == TEXT


HUGE_NUMBER_BODY = (
    b'{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1",'
    b'"name":"echo","input":{"message":1e400}}],"stop_reason":"tool_use",'
    b'"usage":{"input_tokens":3,"output_tokens":2}}'
)
HUGE_NUMBER_STREAM = (
    b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
    b'{"input_tokens":3}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"tool_use","id":"toolu_1","name":"echo","input":{}}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"input_json_delta","partial_json":"{\\"message\\": 1e400}"}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


@pytest.mark.parametrize("stream", [False, True])
def test_a_number_too_large_for_a_float_is_a_malformed_answer(stream: bool) -> None:
    # 1e400 parses to infinity, which no JSON text can carry to the agent or the next request:
    # it must be the answer's fault, named as such, never "the agent raised ValueError".
    reply = (
        Reply(headers={"Content-Type": "text/event-stream"}, raw=HUGE_NUMBER_STREAM)
        if stream
        else Reply(raw=HUGE_NUMBER_BODY)
    )
    with ModelServer("anthropic", [reply]) as server:
        live, _ = model(server, stream=stream)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert str(caught.value).startswith("live model: the answer is malformed: "), caught.value


def _empty_call_bodies(field: str) -> dict[str, dict[str, object]]:
    call = {"id": "call_1", "name": "echo"} | {field: ""}
    return {
        "openai": {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["name"], "arguments": "{}"},
                            }
                        ],
                    }
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        },
        "openai-responses": {
            "object": "response",
            "status": "completed",
            "output": [
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["name"],
                    "arguments": "{}",
                }
            ],
            "usage": {"input_tokens": 3, "output_tokens": 2},
        },
        "anthropic": {
            "type": "message",
            "content": [{"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}],
            "usage": {"input_tokens": 3, "output_tokens": 2},
        },
    }


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("field", ["id", "name"])
def test_a_tool_call_with_an_empty_id_or_name_is_a_malformed_answer(wire: str, field: str) -> None:
    body = json.dumps(_empty_call_bodies(field)[wire]).encode()
    with ModelServer(wire, [Reply(raw=body)]) as server:
        live, _ = model(server)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    message = str(caught.value)
    assert message.startswith("live model: the answer is malformed: ") and "empty" in message


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("slow", ["head", "body"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_trickling_answer_on_a_kept_alive_connection_is_cut_at_the_deadline_and_retried(
    wire: str, stream: bool, slow: str
) -> None:
    """timeout_secs bounds the attempt as a whole, also on a request after an earlier one
    (once sent on a connection kept alive, where no new socket was opened for the deadline
    to see)."""
    trickle = Reply(trickle_head=slow == "head", trickle_body=slow == "body")
    with ModelServer(wire, [Reply(TEXT), trickle, Reply(TEXT)]) as server:
        live, waits = model(server, timeout_secs=0.5, max_retries=1, stream=stream)
        provider = live.provider()
        assert provider.complete(REQUEST) == TEXT
        assert provider.complete(REQUEST) == TEXT
        assert server.given_up.wait(5)  # the client cut it, before the server's own limit
        provider.close()
    # No connection is kept alive any more (issue 27, third trial: bytes past one answer
    # were read as the next one's), so each request has a connection of its own.
    assert server.seen[0].peer != server.seen[1].peer
    assert len(waits) == 1 and len(server.seen) == 3


@pytest.mark.parametrize("wire", WIRES)
def test_a_json_body_where_a_stream_was_asked_for_says_a_stream_was_expected(wire: str) -> None:
    body = json.dumps(SERVER_WIRES[wire].response_body(TEXT, response_id="r1", model="m"))
    reply = Reply(headers={"Content-Type": "application/json"}, raw=body.encode())
    with ModelServer(wire, [reply]) as server:
        live, waits = model(server, stream=True)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert str(caught.value) == (
        "live model: the answer is malformed: an event stream (text/event-stream) was "
        "expected, since stream = true in [eval.live], but the server answered "
        "application/json; set stream = false, or use a server that streams"
    )
    assert waits == []


def test_a_stream_where_a_json_body_was_asked_for_says_a_body_was_expected() -> None:
    raw = b'data: {"choices": []}\n\ndata: [DONE]\n\n'
    reply = Reply(headers={"Content-Type": "text/event-stream; charset=utf-8"}, raw=raw)
    with ModelServer("openai", [reply]) as server:
        live, _ = model(server, stream=False)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert str(caught.value) == (
        "live model: the answer is malformed: a JSON body (application/json) was expected, "
        "since stream = false in [eval.live], but the server answered text/event-stream; "
        "set stream = true, or use a server that answers in one body"
    )


def _answer_to(status: int, headers: dict[str, str]) -> str:
    with ModelServer("openai", [Reply(status=status, headers=headers)]) as server:
        live, _ = model(server)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
        assert len(server.seen) == 1
    return str(caught.value)


def test_a_redirect_to_an_unreadable_location_says_so_not_base_url() -> None:
    message = _answer_to(303, {"Location": "http://[::1/v1?key=hidden-value"})
    assert message.startswith(
        "live model: HTTP 303, a redirect to a Location that is not a valid URL; redirects "
        "are not followed"
    )
    assert "configured base_url" not in message and "hidden-value" not in message


@pytest.mark.parametrize(
    ("status", "named"),
    [
        (300, "live model: HTTP 300 (Multiple Choices): the server offers a choice of answers"),
        (304, "live model: HTTP 304 (Not Modified), which is no answer to a POST"),
        (305, "live model: HTTP 305, a 3xx status that is no redirect evalrunner knows"),
    ],
)
def test_a_3xx_that_is_not_a_redirect_is_not_called_one(status: int, named: str) -> None:
    message = _answer_to(status, {"Location": "https://api.example.test/v1/other"})
    assert message.startswith(named), message
    assert "a redirect to" not in message and "base_url" in message
