"""The replay endpoint under hostile HTTP: framing that lies, bodies cut short, numbers no
JSON parser should have to hold. Each is a 4xx that blames the request, never a 500 from the
endpoint itself, never memory beyond the body cap, never an invalid JSON body back."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from evalrunner.boundary.conformance import ConversationMonitor
from evalrunner.boundary.provider import ReplayProvider
from evalrunner.boundary.tools import builtin_tools, dispatch
from evalrunner.model import TextResponse, ToolCall, ToolCallsResponse, Turn
from evalrunner.wire.endpoint import MAX_BODY_BYTES, ReplayEndpoint

USER = "Please echo token_7f3a."
TURNS = [Turn(USER, (TextResponse("done"),))]


@pytest.fixture
def endpoint() -> Iterator[ReplayEndpoint]:
    monitor = ConversationMonitor(ReplayProvider(TURNS), [USER])
    with ReplayEndpoint(monitor) as served:
        monitor.begin_turn(0)
        yield served


def exchange(endpoint: ReplayEndpoint, head: str, body: bytes = b"", *, half: bool = False) -> str:
    """Send raw bytes; return the status line and body the endpoint answered with."""
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as conn:
        conn.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        if half:
            conn.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data.decode("utf-8", "replace")


def head(path: str = "/v1/chat/completions", **fields: str) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in fields.items()]
    return "\n".join(lines) + "\n"


def status(answer: str) -> int:
    return int(answer.split(" ", 2)[1])


def body(answer: str) -> object:
    return json.loads(answer.split("\r\n\r\n", 1)[1])


@pytest.mark.parametrize("size", ["-1", "-ffff", "0x10", "1g", "", "  ", "ffffffffffffffff0"])
def test_a_chunk_size_that_is_not_plain_hex_is_a_400(endpoint: ReplayEndpoint, size: str) -> None:
    chunked = f"{size}\r\nabc\r\n0\r\n\r\n".encode()
    answer = exchange(endpoint, head(Transfer_Encoding="chunked"), chunked)
    assert status(answer) in (400, 413)
    assert "chunk" in json.dumps(body(answer))


def test_a_chunk_announced_over_the_cap_is_refused_before_it_is_read(
    endpoint: ReplayEndpoint,
) -> None:
    announced = f"{MAX_BODY_BYTES + 1:x}\r\n".encode()
    answer = exchange(endpoint, head(Transfer_Encoding="chunked"), announced + b"x" * 1024)
    assert status(answer) == 413


@pytest.mark.parametrize("length", ["+5", "5_0", "1e3", "-3", "0x10", "99999999999999999999"])
def test_a_content_length_that_is_not_a_byte_count_is_a_400(
    endpoint: ReplayEndpoint, length: str
) -> None:
    answer = exchange(endpoint, head(Content_Length=length), b"{}")
    assert status(answer) in (400, 413)


def test_both_framings_at_once_are_refused(endpoint: ReplayEndpoint) -> None:
    answer = exchange(endpoint, head(Content_Length="2", Transfer_Encoding="chunked"), b"{}")
    assert status(answer) == 400
    assert "both Transfer-Encoding and Content-Length" in answer


def test_a_half_sent_body_is_a_400_that_does_not_fail_the_case(endpoint: ReplayEndpoint) -> None:
    answer = exchange(endpoint, head(Content_Length="100"), b'{"model": "m"', half=True)
    assert status(answer) == 400
    assert "ended after 13 of 100 bytes" in answer
    assert endpoint.error is None  # what closing connections at the end of a case looks like


@pytest.mark.parametrize("cut", ["\n", "\nContent-Type: appl", "\nContent-Length: 10"])
def test_a_request_cut_inside_its_headers_does_not_fail_the_case(
    endpoint: ReplayEndpoint, cut: str
) -> None:
    # What a connection closed by the endpoint's shutdown looks like: not an empty body.
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as conn:
        conn.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1" + cut).encode())
        conn.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert status(answer.decode()) == 400
    assert "the request ended inside its headers" in answer.decode()
    assert "not JSON" not in answer.decode()
    assert endpoint.error is None


def test_a_whole_request_without_a_body_still_fails_as_not_json(endpoint: ReplayEndpoint) -> None:
    answer = exchange(endpoint, head(), half=True)
    assert status(answer) == 400
    assert "the request body is not JSON" in answer
    assert endpoint.error is not None


def test_a_5000_digit_number_in_a_request_is_a_400_that_blames_the_request(
    endpoint: ReplayEndpoint,
) -> None:
    payload = ('{"model": "m", "messages": [], "n": ' + "9" * 5000 + "}").encode()
    answer = exchange(endpoint, head(Content_Length=str(len(payload))), payload)
    assert status(answer) == 400
    assert "the request body cannot be read" in answer


def test_an_argument_number_out_of_range_never_reaches_the_anthropic_wire_as_infinity() -> None:
    call = ToolCall("c1", "echo", '{"message": "x", "n": 1e400}')
    turns = [Turn(USER, (ToolCallsResponse((call,)), TextResponse("done")))]
    monitor = ConversationMonitor(ReplayProvider(turns), [USER])
    with ReplayEndpoint(monitor) as served:
        monitor.begin_turn(0)
        payload = json.dumps(
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": USER}]}
        ).encode()
        answer = exchange(
            served,
            head("/v1/messages", Content_Length=str(len(payload)), anthropic_version="2023-06-01"),
            payload,
        )
    assert status(answer) == 500
    assert "Infinity" not in answer
    reply = body(answer)  # valid JSON, strictly
    assert "out of range" in json.dumps(reply)


def test_a_huge_integer_in_argument_text_is_an_invalid_arguments_failure() -> None:
    record = dispatch(builtin_tools(), ToolCall("c1", "echo", '{"message": ' + "1" * 5000 + "}"))
    assert not record.success
    assert record.result.startswith("Invalid arguments for echo: ")
