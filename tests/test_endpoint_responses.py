"""The replay endpoint's third wire, the OpenAI Responses API (``POST /v1/responses``): what it
sends, what ``previous_response_id`` resolves to, and the standard-library client that speaks
it. (The SDK agents' tool loops over it are in tests/test_endpoint_sdks.py.)

Every body and stream event the endpoint sends is validated strictly against the ``openai``
SDK's own types, so a field the SDK requires cannot go missing unnoticed (the SDK itself
builds its objects without validating them)."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from evalrunner.agents.reference import AgentContext, ReferenceAgent
from evalrunner.boundary.conformance import ConversationMonitor
from evalrunner.boundary.provider import ReplayProvider
from evalrunner.expectations import grade
from evalrunner.model import (
    Case,
    Expectations,
    Message,
    ModelRequest,
    RunError,
    TextResponse,
    ToolCall,
    ToolCallsResponse,
    Turn,
)
from evalrunner.replay import run_case
from evalrunner.wire import openai_responses
from evalrunner.wire.client import WireClient
from evalrunner.wire.common import WireResponseError
from evalrunner.wire.endpoint import ReplayEndpoint

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"message": {"type": "string"}}}
TOOLS: Any = [{"type": "function", "name": "echo", "description": "Echo.", "parameters": SCHEMA}]
SCRIPT = (
    Turn(
        "Echo alpha and beta.",
        (
            ToolCallsResponse(
                (
                    ToolCall("call_a1", "echo", '{"message":"alpha"}'),
                    ToolCall("call_b2", "echo", '{"message":"beta, a longer value to stream"}'),
                ),
                input_tokens=20,
                output_tokens=9,
            ),
            TextResponse("Echoed alpha and beta.", 30, 6),
        ),
    ),
)


def monitored() -> ConversationMonitor:
    return ConversationMonitor(ReplayProvider(SCRIPT), [turn.user_input for turn in SCRIPT])


@pytest.fixture(autouse=True)
def loopback_without_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture(autouse=True)
def no_thread_left_behind() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not left, f"threads left running: {left}"


# --- every byte sent is what the SDK's types say -----------------------------------------------


def post(endpoint: ReplayEndpoint, body: object) -> tuple[int, bytes]:
    request = urllib.request.Request(
        endpoint.openai_base_url + "/responses",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def sse_payloads(raw: bytes) -> list[tuple[str, Any]]:
    frames: list[tuple[str, Any]] = []
    for block in raw.decode().split("\n\n"):
        if not block:
            continue
        event, data = block.split("\n")
        assert event.startswith("event: ") and data.startswith("data: ")
        frames.append((event[7:], json.loads(data[6:])))
    return frames


@pytest.mark.parametrize("stream", [False, True])
def test_every_body_and_event_validates_against_the_sdk_types(stream: bool) -> None:
    # The SDK's types are imported here, by the one test that uses them: importing the SDK
    # costs every process that collects this module.
    import pydantic
    from openai.types.responses import Response, ResponseStreamEvent

    strict_event: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseStreamEvent)
    user = {"role": "user", "content": SCRIPT[0].user_input}
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        first_status, first = post(endpoint, {"input": [user], "tools": TOOLS, "stream": stream})
        assert first_status == 200
        if stream:
            frames = sse_payloads(first)
            for name, data in frames:
                assert name == data["type"]
                strict_event.validate_python(data, strict=True)
            assert [data["sequence_number"] for _, data in frames] == list(range(len(frames)))
            kinds = [name for name, _ in frames]
            assert kinds[:2] == ["response.created", "response.in_progress"]
            assert kinds[-1] == "response.completed"
            assert kinds.count("response.output_item.done") == 2
            served = frames[-1][1]["response"]
        else:
            served = json.loads(first)
            Response.model_validate(served, strict=True)
        results = [
            {"type": "function_call_output", "call_id": c, "output": "x"}
            for c in ("call_a1", "call_b2")
        ]
        body = {"input": results, "previous_response_id": served["id"], "stream": stream}
        second_status, second = post(endpoint, {**body, "tools": TOOLS})
        assert second_status == 200, second
        if stream:
            for _, data in sse_payloads(second):
                strict_event.validate_python(data, strict=True)
        else:
            Response.model_validate(json.loads(second), strict=True)
            assert json.loads(second)["output"][0]["content"][0]["text"] == (
                "Echoed alpha and beta."
            )


# --- previous_response_id: what it resolves to, and what it does not -------------------------


def first_response(endpoint: ReplayEndpoint, **extra: Any) -> dict[str, Any]:
    code, raw = post(endpoint, {"input": SCRIPT[0].user_input, "tools": TOOLS, **extra})
    assert code == 200, raw
    answer: dict[str, Any] = json.loads(raw)
    return answer


def results_for(answer: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"type": "function_call_output", "call_id": item["call_id"], "output": "x"}
        for item in answer["output"]
    ]


def error_of(raw: bytes) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(raw)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize(
    ("previous", "message"),
    [
        ("resp_nothing_like_it", "names no response the replay endpoint served in this case"),
        ("resp_replay_99", 'it has served "resp_replay_1"'),
    ],
)
def test_an_id_never_served_is_a_400_saying_what_would_work(previous: str, message: str) -> None:
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        answer = first_response(endpoint)
        body = {"input": results_for(answer), "previous_response_id": previous, "tools": TOOLS}
        code, raw = post(endpoint, body)
    assert code == 400
    error = error_of(raw)
    assert error["type"] == "invalid_request_error"
    assert message in error["message"]
    assert "send the whole conversation in input" in error["message"]
    assert endpoint.error is not None and message in endpoint.error  # the case has failed


def test_a_response_served_with_store_false_cannot_be_continued() -> None:
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        answer = first_response(endpoint, store=False)
        body = {"input": results_for(answer), "previous_response_id": answer["id"], "tools": TOOLS}
        code, raw = post(endpoint, body)
    assert code == 400
    assert "requested with store: false" in error_of(raw)["message"]


def test_continuing_without_the_new_input_is_caught_by_the_monitor() -> None:
    # Results for one of two calls only: the conversation the monitor checks is resolved, so
    # the missing result is named exactly as on the other wires.
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        answer = first_response(endpoint)
        partial = results_for(answer)[:1]
        body = {"input": partial, "previous_response_id": answer["id"], "tools": TOOLS}
        code, raw = post(endpoint, body)
    assert code == 500
    assert '"call_b2" (echo)' in error_of(raw)["message"]


def test_an_id_from_the_previous_case_names_nothing_in_the_next() -> None:
    # A persistent agent's endpoint serves case after case: response ids are numbered over its
    # life, so a leaked id cannot resolve to a response of the case now running.
    first = monitored()
    with ReplayEndpoint(first) as endpoint:
        first.begin_turn(0)
        leaked = first_response(endpoint)["id"]
        endpoint.detach()
        second = monitored()
        endpoint.attach(second)
        second.begin_turn(0)
        fresh = first_response(endpoint)
        assert fresh["id"] != leaked
        body = {"input": results_for(fresh), "previous_response_id": leaked, "tools": TOOLS}
        code, raw = post(endpoint, body)
    assert code == 400
    assert "names no response the replay endpoint served in this case" in error_of(raw)["message"]


# --- the standard-library client speaks it too ---------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_the_wire_client_runs_the_reference_loop_on_the_responses_api(stream: bool) -> None:
    class OverHTTP:
        """The reference agent in process, its model over HTTP through the client."""

        reports_dispatches = True
        runs_own_tools = False

        def __init__(self, context: AgentContext) -> None:
            assert isinstance(context.provider, ConversationMonitor)
            self.endpoint = ReplayEndpoint(context.provider)
            self.endpoint.start()
            client = WireClient("openai-responses", self.endpoint.openai_base_url, stream=stream)
            inner = AgentContext(
                provider=client,
                tools=context.tools,
                observer=context.observer,
                workspace=context.workspace,
            )
            self.agent = ReferenceAgent(inner)

        def respond(self, user_input: str) -> str:
            return self.agent.respond(user_input)

        def close(self) -> None:
            self.endpoint.close()

    expects = Expectations(all_tools_succeeded=True, exact_tool_calls=2)
    record = run_case(Case("responses-client", SCRIPT, expects), agent_factory=OverHTTP)
    assert record.error is None, record.error
    # The reference agent reports its dispatches: success is known, though the wire has no flag.
    assert [g.passed for g in grade(expects, record)] == [True, True]
    assert {r.api for r in record.requests} == {"openai-responses"}
    assert {r.stream for r in record.requests} == {stream}


def test_the_wire_client_names_a_stream_cut_before_it_completes() -> None:
    frames = openai_responses.OpenAIResponses().stream_events(
        TextResponse("cut short"), response_id="resp_x", model="m", usage=True
    )
    events = [json.loads(f.split("data: ", 1)[1]) for f in frames[:-1]]
    with pytest.raises(WireResponseError, match=r"ended before its response\.completed"):
        openai_responses.read_stream(events)
    whole = [json.loads(f.split("data: ", 1)[1]) for f in frames]
    assert openai_responses.read_stream(whole) == TextResponse("cut short")


def test_the_wire_client_turns_a_refusal_into_a_run_error() -> None:
    monitor = ConversationMonitor(ReplayProvider(SCRIPT), [t.user_input for t in SCRIPT])
    with ReplayEndpoint(monitor) as endpoint:
        monitor.begin_turn(0)
        client = WireClient("openai-responses", endpoint.openai_base_url)
        with pytest.raises(RunError, match="answered 500: turn 1, model request 1"):
            client.complete(ModelRequest((Message("user", "not the input"),)))


# --- hostile input: a clear 4xx in the Responses error shape, never a traceback or a hang -------

USER_ITEM = {"role": "user", "content": SCRIPT[0].user_input}
BAD_BODIES: list[tuple[object, str]] = [
    ([], "the request body must be an object"),
    ("input", "the request body must be an object"),
    (None, "the request body must be an object"),
    ({}, "input must be a string or an array of items"),
    ({"input": 3}, "input must be a string or an array of items"),
    ({"input": {"role": "user"}}, "input must be a string or an array of items"),
    ({"input": []}, "input must not be empty"),
    ({"input": [3]}, "input[0] must be an object"),
    ({"input": [USER_ITEM, None]}, "input[1] must be an object"),
    ({"input": [{"type": 3}]}, "input[0].type must be a string"),
    ({"input": [{"role": 3, "content": "x"}]}, "input[0].role must be one of"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role must be one of"),
    ({"input": [{"role": "user"}]}, "input[0].content must be a string or an array"),
    ({"input": [{"role": "user", "content": 3}]}, "input[0].content must be a string"),
    ({"input": [{"role": "user", "content": {}}]}, "input[0].content must be a string"),
    ({"input": [{"role": "user", "content": [3]}]}, "input[0].content[0] must be an object"),
    (
        {"input": [{"role": "user", "content": [{"type": "input_text"}]}]},
        "input[0].content[0].text must be a string",
    ),
    (
        {"input": [{"role": "user", "content": [{"type": "input_text", "text": 3}]}]},
        "input[0].content[0].text must be a string",
    ),
    (
        {"input": [{"role": "user", "content": [{"type": "bogus", "text": "x"}]}]},
        "input[0].content[0].type must be one of input_audio, input_file, input_image, "
        'input_text, output_text, refusal (got "bogus")',
    ),
    (
        {"input": [{"type": "function_call", "name": "echo", "arguments": "{}"}]},
        "input[0].call_id must be a string",
    ),
    (
        {"input": [{"type": "function_call", "call_id": "c", "name": 3, "arguments": "{}"}]},
        "input[0].name must be a string",
    ),
    (
        {"input": [{"type": "function_call", "call_id": "c", "name": "e", "arguments": {}}]},
        "input[0].arguments must be a string",
    ),
    ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id must be"),
    (
        {"input": [{"type": "function_call_output", "call_id": "c", "output": 3}]},
        "input[0].output must be a string or an array of content parts",
    ),
    (
        {"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "x"}]}]},
        "input[0].output[0].type must be one of",
    ),
    ({"input": [{"type": "reasoning", "summary": []}]}, 'input[0].type "reasoning" cannot be'),
    ({"input": [{"type": "item_reference", "id": "fc_1"}]}, '"item_reference" cannot be'),
    ({"input": [USER_ITEM, {"type": "web_search_call"}]}, 'input[1].type "web_search_call"'),
    ({"input": [{"type": "no such thing"}]}, 'input[0].type "no such thing" cannot be replayed'),
    ({"input": [{"type": ""}]}, 'input[0].type "" cannot be replayed'),
    ({"input": "x", "instructions": 3}, "instructions must be a string"),
    ({"input": "x", "instructions": ["x"]}, "instructions must be a string"),
    ({"input": "x", "tools": {}}, "tools must be an array"),
    ({"input": "x", "tools": [3]}, "tools[0] must be an object"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, 'tools[0].type must be "function"'),
    ({"input": "x", "tools": [{"type": "function"}]}, "tools[0].name must be a string"),
    (
        {"input": "x", "tools": [{"type": "function", "name": "e", "parameters": "{}"}]},
        "tools[0].parameters must be an object",
    ),
    (
        {"input": "x", "tools": [{"type": "function", "name": "e", "description": 3}]},
        "tools[0].description must be a string",
    ),
    ({"input": "x", "model": 3}, "model must be a string"),
    ({"input": "x", "stream": "yes"}, "stream must be a boolean"),
    ({"input": "x", "store": "no"}, "store must be a boolean"),
    ({"input": "x", "previous_response_id": 3}, "previous_response_id must be a string"),
    ({"input": "x", "previous_response_id": ""}, "previous_response_id must not be empty"),
    ({"input": "x", "conversation": "conv_1"}, "conversation (the Conversations API) is not"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_BODIES)
def test_a_request_wrong_in_any_field_is_a_400_naming_it(bad: object, message: str) -> None:
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        code, raw = post(endpoint, bad)
    assert code == 400, raw
    error = error_of(raw)
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("not a valid openai-responses request: "), error
    assert message in error["message"], error["message"]
    assert endpoint.error is not None and message in endpoint.error  # sticky: the case fails


def raw_exchange(endpoint: ReplayEndpoint, data: bytes, *, half: bool = False) -> tuple[int, Any]:
    """Send raw bytes to /v1/responses; the status and JSON body answered (a timeout on the
    socket: the test fails rather than hangs)."""
    import socket

    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as conn:
        conn.sendall(data)
        if half:
            conn.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def request_bytes(body: bytes, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return (
        b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {size}\r\n\r\n".encode()
        + body
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"input": "x"', "the request body is not JSON"),
        (b"\xff\xfe{}", "the request body is not JSON"),
        (b"", "the request body is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "the request body is not JSON"),
        (b'{"input": "x", "max_output_tokens": ' + b"9" * 5000 + b"}", "cannot be read"),
    ],
    ids=["cut-json", "not-utf8", "empty", "nested", "5000-digits"],
)
def test_a_body_that_is_not_json_is_a_400(data: bytes, message: str) -> None:
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        code, answer = raw_exchange(endpoint, request_bytes(data))
    assert code == 400
    assert set(answer["error"]) == {"message", "type", "param", "code"}
    assert message in answer["error"]["message"]


def test_a_half_sent_body_is_a_400_that_does_not_fail_the_case() -> None:
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        code, answer = raw_exchange(endpoint, request_bytes(b'{"input": ', 500), half=True)
        assert code == 400
        assert "the request body ended after 10 of 500 bytes" in answer["error"]["message"]
        assert endpoint.error is None  # what closing connections at a case's end looks like
        assert first_response(endpoint)["status"] == "completed"


@pytest.mark.parametrize(
    "text", ["\x00\x1b[31m\x7f", "\ud800 lone surrogate", "\u202e\u200b", "é" * 200_000]
)
def test_control_characters_and_huge_text_are_refused_as_json_never_as_a_crash(text: str) -> None:
    # Not the turn's user input: a run error whose message quotes the text, sent back as
    # valid (ASCII-escaped) JSON.
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        code, answer = raw_exchange(
            endpoint, request_bytes(json.dumps({"input": text, "tools": TOOLS}).encode())
        )
    assert code == 500
    assert "the latest user message should be the turn's user_input" in answer["error"]["message"]
    assert answer["error"]["code"] == "run_error"


def test_a_hostile_previous_response_id_is_quoted_not_echoed_raw() -> None:
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        first_response(endpoint)
        hostile = "resp_\x00\n\x1b" + "x" * 10_000
        body = {"input": "y", "previous_response_id": hostile}
        code, answer = raw_exchange(endpoint, request_bytes(json.dumps(body).encode()))
    assert code == 400
    message = answer["error"]["message"]
    assert '"resp_\\u0000\\n\\u001b' in message and len(message) < 1000


def test_an_unknown_path_under_v1_lists_the_responses_route_and_a_bare_one_gets_a_hint() -> None:
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        request = urllib.request.Request(
            endpoint.base_url + "/responses", data=b"{}", headers={"Content-Type": "x"}
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=30)
        assert caught.value.code == 404
        message = json.load(caught.value)["error"]["message"]
    assert "POST /v1/responses" in message
    assert "OPENAI_BASE_URL must end in /v1" in message


class _FakeModel(threading.Thread):
    """A one-request HTTP server answering with fixed bytes, for the client's error paths."""

    def __init__(self, status: int, content_type: str, payload: bytes) -> None:
        import http.server

        answer = (status, content_type, payload)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                code, kind, data = answer
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        super().__init__(daemon=True)
        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)

    def run(self) -> None:
        self.server.handle_request()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.mark.parametrize(
    ("stream", "payload", "message"),
    [
        (
            False,
            b'{"object": "response", "output": [{"type": "function_call"}]}',
            "output[0].call_id must be a string",
        ),
        (False, b'{"object": "response", "output": [3]}', "output[0] must be an object"),
        (False, b'{"object": "chat.completion"}', "not a response object"),
        (
            False,
            b'{"object": "response", "status": "failed"}',
            "the model failed to answer (no code): no message",
        ),
        (False, b"{", "answer is malformed"),
        (True, b'data: {"type": "response.created"}\n\n', "ended before its response.completed"),
        (True, b'data: {"type": "error", "message": "boom"}\n\n', "(no code): boom"),
        (True, b"data: [3]\n\n", "stream event 1 is not a JSON object"),
    ],
)
def test_the_wire_client_names_an_answer_that_is_not_a_response(
    stream: bool, payload: bytes, message: str
) -> None:
    fake = _FakeModel(200, "text/event-stream" if stream else "application/json", payload)
    fake.start()
    client = WireClient("openai-responses", fake.base_url, stream=stream)
    try:
        with pytest.raises(RunError, match=re.escape(message)):
            client.complete(ModelRequest((Message("user", "hi"),)))
    finally:
        fake.join(timeout=30)
        fake.server.server_close()


def _completed(**fields: object) -> dict[str, object]:
    body: dict[str, object] = {"object": "response", "status": "completed", "output": []}
    body.update(fields)
    return body


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("text", "the response: the body must be an object"),
        ({"object": "chat.completion"}, 'its "object" must be "response"'),
        (_completed(status="failed"), "the model failed to answer (no code): no message"),
        (_completed(status="cancelled"), "did not complete (status 'cancelled')"),
        (_completed(status=["x"]), "did not complete (status 'list')"),
        (_completed(output={"a": 1}), "the response: output must be an array"),
        (_completed(output=[3]), "the response: output[0] must be an object"),
        (
            _completed(output=[{"type": "message", "content": [{"type": "output_text"}]}]),
            "output[0].content[0].text must be a string",
        ),
        (
            _completed(
                output=[{"type": "function_call", "call_id": 7, "name": "e", "arguments": "{}"}]
            ),
            "output[0].call_id must be a string",
        ),
        (
            _completed(
                output=[
                    {"type": "function_call", "call_id": "c", "name": "e", "arguments": {"a": 1}}
                ]
            ),
            "output[0].arguments must be a string",
        ),
        (_completed(usage={"input_tokens": "12"}), "usage.input_tokens must be a whole number"),
        (_completed(usage={"output_tokens": -1}), "usage.output_tokens must be a whole number"),
        (_completed(usage={"input_tokens": True}), "usage.input_tokens must be a whole number"),
        (_completed(usage=[1]), "usage must be an object"),
    ],
)
def test_a_malformed_responses_answer_names_the_field(body: object, problem: str) -> None:
    with pytest.raises(WireResponseError) as caught:
        openai_responses.OpenAIResponses().read_response(body)  # type: ignore[arg-type]
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        ([3], "stream event 1: the event must be an object"),
        ([{"type": "error", "message": 5}], "the stream carried an error (no code): no message"),
        (
            [{"type": "response.output_text.delta", "output_index": 0, "delta": "x"}],
            "output_index 0 names no item added before it",
        ),
        (
            [{"type": "response.output_item.added", "output_index": "0", "item": {}}],
            "output_index must be a whole number",
        ),
        (
            [
                {"type": "response.output_item.added", "output_index": 0, "item": {}},
                {"type": "response.output_text.delta", "output_index": 0, "delta": 7},
            ],
            "stream event 2: delta must be a string",
        ),
        (
            [{"type": "response.completed", "response": _completed(status="in_progress")}],
            "stream event 1's response did not complete",
        ),
        ([{"type": "response.created"}], "ended before its response.completed"),
    ],
)
def test_a_malformed_responses_stream_names_the_event(events: list[object], problem: str) -> None:
    with pytest.raises(WireResponseError) as caught:
        openai_responses.read_stream(events)  # type: ignore[arg-type]
    assert problem in str(caught.value)
