"""Live mode against misbehaving servers, third trial (issue 27): a stream of several choices
is graded by its first only, ``n`` other than 1 is refused, a stream that never says how it
ended or an answer that is a refusal is a run error, not an answer to grade. Each server is a
loopback :class:`~support.model_server.ModelServer`."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support.live_project import KEY, TEXT, cli, live_model_on, project
from support.model_server import ModelServer, Reply

from evalrunner.config import LiveConfig
from evalrunner.live.provider import LiveModel
from evalrunner.model import Message, ModelRequest, RunError, TextResponse, ToolCallsResponse

REQUEST = ModelRequest(messages=(Message("user", "say hi"),))
SSE = {"Content-Type": "text/event-stream"}


def _sse(*events: object, done: bool = True) -> Reply:
    frames = [f"data: {json.dumps(event)}\n\n" for event in events]
    if done:
        frames.append("data: [DONE]\n\n")
    return Reply(headers=SSE, raw="".join(frames).encode())


def _choice(index: int, delta: object, finish: str | None = None) -> dict[str, object]:
    return {"index": index, "delta": delta, "finish_reason": finish}


USAGE = {"id": "x", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}


# --- 1. a stream of several choices is its first choice only ----------------------------------


def test_a_streamed_second_choice_is_not_part_of_the_answer() -> None:
    # Before: every choice's pieces were joined ("goodbye hello"), so a check for "hello"
    # passed on an answer whose first choice said "goodbye".
    reply = _sse(
        {"choices": [_choice(0, {"content": "goodbye"}), _choice(1, {"content": " hello"})]},
        {"choices": [_choice(0, {}, "stop"), _choice(1, {}, "stop")]},
        USAGE,
    )
    with ModelServer("openai", [reply]) as server:
        response = live_model_on(server, stream=True).complete(REQUEST)
    assert response == TextResponse("goodbye", 5, 2)
    assert response.cut_short is None


def test_a_streamed_second_choices_tool_calls_are_not_part_of_the_answer() -> None:
    opening = {"index": 0, "id": "c1", "type": "function", "function": {"name": "echo"}}
    args = {"index": 0, "function": {"arguments": '{"text":"hi"}'}}
    other = {"index": 0, "id": "c9", "type": "function", "function": {"name": "rm"}}
    reply = _sse(
        {"choices": [_choice(0, {"tool_calls": [opening]}), _choice(1, {"tool_calls": [other]})]},
        {"choices": [_choice(0, {"tool_calls": [args]}, "tool_calls")]},
        USAGE,
    )
    with ModelServer("openai", [reply]) as server:
        response = live_model_on(server, stream=True).complete(REQUEST)
    assert isinstance(response, ToolCallsResponse)
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("c1", "echo", '{"text":"hi"}')
    ]


def test_a_streamed_choice_index_that_is_no_number_is_malformed() -> None:
    reply = _sse({"choices": [_choice("0", {"content": "hello"}, "stop")]}, USAGE)  # type: ignore[arg-type]
    with ModelServer("openai", [reply]) as server, pytest.raises(RunError) as caught:
        live_model_on(server, stream=True).complete(REQUEST)
    assert "the answer is malformed" in str(caught.value)
    assert "choice.index must be a whole number" in str(caught.value)


@pytest.mark.parametrize("n", [2, 0, True, "2"])
def test_n_other_than_1_is_refused_before_sending(n: object) -> None:
    with ModelServer("openai", [Reply(TextResponse("hello", 1, 1))]) as server:
        request = ModelRequest(REQUEST.messages, api="openai", parameters={"n": n})  # type: ignore[dict-item]
        with pytest.raises(RunError) as caught:
            live_model_on(server).complete(request)
        assert server.seen == []
    assert str(caught.value).startswith(
        f"live model: the agent's request asks for n = {json.dumps(n)} answers (choices) per "
        "request: nothing was sent"
    )
    assert "send n = 1" in str(caught.value)


def test_n_of_1_is_sent() -> None:
    with ModelServer("openai", [Reply(TextResponse("hello", 1, 1))]) as server:
        request = ModelRequest(REQUEST.messages, api="openai", parameters={"n": 1})
        assert live_model_on(server).complete(request) == TextResponse("hello", 1, 1)
    assert server.seen[0].body["n"] == 1


# --- 2. the agent process never holds the live key ---------------------------------------------


def test_a_command_agent_is_started_without_the_key_variable(tmp_path: Path) -> None:
    # Before: the variable api_key_env names reached the agent untouched, key and all.
    agent = tmp_path / "env_agent.py"
    agent.write_text(
        "import json, os, sys\n"
        "seen = {k: os.environ.get(k) for k in ('LIVE_TEST_KEY', 'OPENAI_API_KEY', 'KEEP_ME')}\n"
        "open(sys.argv[1], 'w').write(json.dumps(seen))\n"
        "sys.exit(1)\n",
        encoding="utf-8",
    )
    seen_file = tmp_path / "seen.json"
    with ModelServer("openai", [Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = cli(
            cwd,
            "run",
            "--mode",
            "live",
            "--agent-command",
            f"{sys.executable} {agent} {seen_file}",
            KEEP_ME="kept",
        )
    assert done.returncode == 1, done.stdout + done.stderr
    seen = json.loads(seen_file.read_text(encoding="utf-8"))
    assert seen["LIVE_TEST_KEY"] is None
    assert seen["OPENAI_API_KEY"] != KEY
    assert seen["KEEP_ME"] == "kept"  # every other variable is still passed
    assert KEY not in done.stdout + done.stderr


# --- 3. bytes past the end of one answer are never the next request's answer ----------------


def _chat_body(text: str) -> bytes:
    body = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }
    data = json.dumps(body).encode()
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(data) + data
    )


@contextmanager
def _smuggling_server() -> Iterator[str]:
    """A server whose first answer comes with a second one in the same write; every later
    request is answered "REAL goodbye". Yields its base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    answered = [0]

    def serve(conn: socket.socket) -> None:
        conn.settimeout(10)
        with conn:
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                buffer = buffer[length:]
                answered[0] += 1
                if answered[0] == 1:
                    conn.sendall(_chat_body("first") + _chat_body("SMUGGLED hello"))
                else:
                    conn.sendall(_chat_body("REAL goodbye"))

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        listener.close()


def test_a_second_response_in_one_write_is_not_the_next_requests_answer() -> None:
    # Before: the kept-alive connection held the smuggled response, which was taken as the
    # answer to the next request, which the server never answered that way.
    with _smuggling_server() as base_url:
        config = LiveConfig(wire="openai", base_url=base_url, model="m", api_key_env="K")
        live = LiveModel(config, environ={"K": "sk-test"}, sleep=lambda _: None)
        provider = live.provider()
        try:
            first = provider.complete(REQUEST)
            second = provider.complete(REQUEST)
        finally:
            provider.close()
            live.close()
    assert first == TextResponse("first", 5, 2)
    assert second == TextResponse("REAL goodbye", 5, 2)


# --- 4. under --repeat, a run the run-stopping answer cut short never ran ---------------------

ONE_CASE = """\
name: live_echo_{n}
turns:
  - user_input: say hi {n}
expects:
  response_contains: [hello]
"""
REFUSED = Reply(status=401, raw=b'{"error": {"message": "invalid key"}}')


@pytest.mark.parametrize(("passing", "passes"), [(2, 2), (0, 0)])
def test_a_run_stopped_by_a_refused_key_never_ran_and_neither_did_the_rest(
    tmp_path: Path, passing: int, passes: int
) -> None:
    # Before: the run that met the 401 counted as failed (its case FLAKY), and each case
    # left unrun counted one run not run instead of --repeat's 3.
    with ModelServer("openai", [Reply(TEXT)] * passing + [REFUSED]) as server:
        cases = {"a": ONE_CASE.format(n="a"), "b": ONE_CASE.format(n="b")}
        cwd = project(tmp_path, "openai", server.base_url, **cases)
        done = cli(cwd, "run", "--mode", "live", "--repeat", "3", "--json", "out.json")
        assert len(server.seen) == passing + 1
    assert done.returncode == 2, done.stdout + done.stderr
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    first, second = report["cases"]
    assert first["repeat"]["runs"] == passes and first["repeat"]["not_run"] == 3 - passes
    assert first["repeat"]["flaky"] is False
    assert second["repeat"]["runs"] == 0 and second["repeat"]["not_run"] == 3
    assert (report["repeat"]["runs"], report["repeat"]["not_run"]) == (passes, 6 - passes)
    assert report["repeat"]["flaky"] == 0
    assert "(HTTP 401)" in report["live_stopped"]
    assert "FLAKY" not in done.stdout


# --- 5. Anthropic's prompt-cache tokens are input tokens --------------------------------------

CACHE_USAGE = {
    "input_tokens": 1,
    "output_tokens": 2,
    "cache_creation_input_tokens": 500,
    "cache_read_input_tokens": 900,
}


def _anthropic_answer(stream: bool) -> Reply:
    if not stream:
        body = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "hello"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": CACHE_USAGE,
        }
        return Reply(headers={"Content-Type": "application/json"}, raw=json.dumps(body).encode())
    start_usage = {**CACHE_USAGE, "output_tokens": 1}
    events: list[tuple[str, Mapping[str, Any]]] = [
        ("message_start", {"message": {"id": "m", "content": [], "usage": start_usage}}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "hello"}}),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        ("message_stop", {}),
    ]
    return _events(events)


def _events(events: Sequence[tuple[str, Mapping[str, Any]]]) -> Reply:
    frames = [
        f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n" for kind, data in events
    ]
    return Reply(headers=SSE, raw="".join(frames).encode())


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_cache_tokens_count_as_input_tokens(stream: bool) -> None:
    # Before: 1 input token was counted, though 1401 were billed.
    with ModelServer("anthropic", [_anthropic_answer(stream)]) as server:
        live = live_model_on(server, stream=stream, max_total_tokens=1000)
        response = live.complete(REQUEST)
    assert (response.input_tokens, response.output_tokens) == (1401, 2)
    assert live.budget.exhausted


# --- 6. a Responses API answer that failed says the model's error ----------------------------


def _failed_answer(stream: bool, code: str) -> Reply:
    failed = {
        "id": "r",
        "object": "response",
        "status": "failed",
        "error": {"code": code, "message": "The model crashed"},
        "output": [],
    }
    if not stream:
        return Reply(headers={"Content-Type": "application/json"}, raw=json.dumps(failed).encode())
    item = {"type": "message", "id": "m", "role": "assistant", "content": []}
    return _events(
        [
            ("response.created", {"response": {**failed, "status": "in_progress", "error": None}}),
            ("response.output_item.added", {"output_index": 0, "item": item}),
            ("response.output_text.delta", {"output_index": 0, "content_index": 0, "delta": "hel"}),
            ("response.failed", {"response": failed}),
        ]
    )


@pytest.mark.parametrize("stream", [False, True])
def test_a_failed_response_with_a_server_error_is_retried(stream: bool) -> None:
    # Before: "the stream ended before its response.completed event", never retried.
    answers = [_failed_answer(stream, "server_error"), Reply(TextResponse("hello", 3, 1))]
    with ModelServer("openai-responses", answers) as server:
        response = live_model_on(server, stream=stream, max_retries=1).complete(REQUEST)
        assert len(server.seen) == 2
    assert response == TextResponse("hello", 3, 1)


@pytest.mark.parametrize("stream", [False, True])
def test_a_failed_response_names_the_models_error(stream: bool) -> None:
    answers = [_failed_answer(stream, "invalid_prompt")] * 2
    with ModelServer("openai-responses", answers) as server:
        with pytest.raises(RunError) as caught:
            live_model_on(server, stream=stream, max_retries=1).complete(REQUEST)
        assert len(server.seen) == 1  # not retried: the request is the trouble
    assert str(caught.value) == (
        "live model: the model failed to answer (invalid_prompt): The model crashed"
    )


def test_server_errors_that_keep_failing_say_so_after_the_retries() -> None:
    answers = [_failed_answer(True, "server_error")] * 2
    with ModelServer("openai-responses", answers) as server, pytest.raises(RunError) as caught:
        live_model_on(server, stream=True, max_retries=1).complete(REQUEST)
    assert str(caught.value) == (
        "live model: the model failed to answer (server_error): The model crashed "
        "(after 2 attempts)"
    )


def _error_event(code: str, nested: bool) -> Reply:
    error = {"code": code, "message": "The server had an error", "param": None}
    data: dict[str, Any] = {"error": {"type": code, **error}} if nested else error
    item = {"type": "message", "id": "m", "role": "assistant", "content": []}
    return _events(
        [
            ("response.output_item.added", {"output_index": 0, "item": item}),
            ("error", {"sequence_number": 2, **data}),
        ]
    )


@pytest.mark.parametrize("nested", [False, True])
def test_a_stream_error_event_with_a_server_error_is_retried(nested: bool) -> None:
    # Before: "the stream carried an error", final, where a failed response's server_error
    # (the same trouble, told another way) was retried.
    answers = [_error_event("server_error", nested), Reply(TextResponse("hello", 3, 1))]
    with ModelServer("openai-responses", answers) as server:
        response = live_model_on(server, stream=True, max_retries=1).complete(REQUEST)
        assert len(server.seen) == 2
    assert response == TextResponse("hello", 3, 1)


def test_a_stream_error_event_that_keeps_failing_says_so_after_the_retries() -> None:
    answers = [_error_event("server_error", False)] * 2
    with ModelServer("openai-responses", answers) as server, pytest.raises(RunError) as caught:
        live_model_on(server, stream=True, max_retries=1).complete(REQUEST)
    assert str(caught.value) == (
        "live model: the stream carried an error (server_error): The server had an error "
        "(after 2 attempts)"
    )


def test_a_stream_error_event_of_the_requests_own_trouble_is_not_retried() -> None:
    answers = [_error_event("invalid_prompt", True), Reply(TextResponse("hello", 3, 1))]
    with ModelServer("openai-responses", answers) as server:
        with pytest.raises(RunError) as caught:
            live_model_on(server, stream=True, max_retries=1).complete(REQUEST)
        assert len(server.seen) == 1
    assert str(caught.value) == (
        "live model: the stream carried an error (invalid_prompt): The server had an error"
    )


# --- 7. a stream that never says how its answer ended is cut short ----------------------------

INCOMPLETE = "live model: the model's answer is incomplete ("


def test_a_chat_stream_without_a_finish_reason_is_cut_short() -> None:
    # Before: graded as a whole answer ("hello, the answer is").
    reply = _sse({"choices": [_choice(0, {"content": "hello, the answer is"})]}, USAGE)
    with ModelServer("openai", [reply]) as server:
        response = live_model_on(server, stream=True).complete(REQUEST)
    assert response == TextResponse("hello, the answer is", 5, 2)
    assert response.cut_short == (
        "no finish_reason in any stream chunk: the stream never said the answer was whole"
    )


def test_an_anthropic_stream_without_a_stop_reason_is_cut_short() -> None:
    usage = {"input_tokens": 5, "output_tokens": 1}
    start = {"message": {"id": "m", "content": [], "usage": usage}}
    reply = _events(
        [
            ("message_start", start),
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "hello"}}),
            ("message_stop", {}),
        ]
    )
    with ModelServer("anthropic", [reply]) as server:
        response = live_model_on(server, stream=True).complete(REQUEST)
    assert response == TextResponse("hello", 5, 1)
    assert response.cut_short == (
        "no stop_reason in any stream event: the stream never said the answer was whole"
    )


def test_a_stream_without_a_finish_reason_is_a_run_error_of_its_case(tmp_path: Path) -> None:
    reply = _sse({"choices": [_choice(0, {"content": "hello, the answer is"})]}, USAGE)
    with ModelServer("openai", [reply]) as server:
        cwd = project(tmp_path, "openai", server.base_url, a=ONE_CASE.format(n="a"))
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8") + "stream = true\n", "utf-8")
        done = cli(cwd, "run", "--mode", "live", "--json", "out.json")
    assert done.returncode == 1, done.stdout + done.stderr
    case = json.loads((cwd / "out.json").read_text(encoding="utf-8"))["cases"][0]
    assert INCOMPLETE + "no finish_reason in any stream chunk" in case["error"]


@pytest.mark.parametrize("wire", ["openai", "anthropic", "openai-responses"])
def test_a_whole_stream_is_not_cut_short(wire: str) -> None:
    with ModelServer(wire, [Reply(TextResponse("hello", 5, 2))]) as server:
        response = live_model_on(server, stream=True).complete(REQUEST)
    assert response == TextResponse("hello", 5, 2) and response.cut_short is None


# --- 8. a refusal is no answer to grade ---------------------------------------------------------

REFUSED_CUT = 'refusal "I can\'t say hello": the model refused to answer'


def _json_reply(body: object) -> Reply:
    return Reply(headers={"Content-Type": "application/json"}, raw=json.dumps(body).encode())


def _chat_refusal(stream: bool) -> Reply:
    if stream:
        return _sse(
            {"choices": [_choice(0, {"role": "assistant", "content": None})]},
            {"choices": [_choice(0, {"refusal": "I can't "})]},
            {"choices": [_choice(0, {"refusal": "say hello"}, "stop")]},
            USAGE,
        )
    message = {"role": "assistant", "content": None, "refusal": "I can't say hello"}
    return _json_reply(
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        }
    )


def _responses_refusal(stream: bool) -> Reply:
    content = [
        {"type": "output_text", "text": "goodbye", "annotations": []},
        {"type": "refusal", "refusal": "I can't say hello"},
    ]
    body = {
        "id": "r",
        "object": "response",
        "status": "completed",
        "output": [{"type": "message", "id": "m", "role": "assistant", "content": content}],
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }
    if not stream:
        return _json_reply(body)
    item = {"type": "message", "id": "m", "role": "assistant", "content": []}
    return _events(
        [
            ("response.output_item.added", {"output_index": 0, "item": item}),
            ("response.output_text.delta", {"output_index": 0, "delta": "goodbye"}),
            ("response.refusal.delta", {"output_index": 0, "delta": "I can't say hello"}),
            ("response.completed", {"response": body}),
        ]
    )


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("wire", ["openai", "openai-responses"])
def test_a_refusal_is_an_answer_cut_short_naming_it(wire: str, stream: bool) -> None:
    # Before: graded as the (empty, or other) text beside it, the refusal dropped.
    reply = _chat_refusal(stream) if wire == "openai" else _responses_refusal(stream)
    with ModelServer(wire, [reply]) as server:
        response = live_model_on(server, stream=stream).complete(REQUEST)
    assert isinstance(response, TextResponse)
    assert (response.input_tokens, response.output_tokens) == (5, 2)
    assert response.cut_short == REFUSED_CUT


def test_a_refusal_is_a_run_error_of_its_case(tmp_path: Path) -> None:
    with ModelServer("openai", [_chat_refusal(False)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, a=ONE_CASE.format(n="a"))
        done = cli(cwd, "run", "--mode", "live", "--json", "out.json")
    assert done.returncode == 1, done.stdout + done.stderr
    case = json.loads((cwd / "out.json").read_text(encoding="utf-8"))["cases"][0]
    assert f"{INCOMPLETE}{REFUSED_CUT}); an answer cut short is not graded" in case["error"]


# --- 9. smaller: a base_url port out of range; a 429's cause at the case timeout ---------------


@pytest.mark.parametrize("port", ["99999", "0", "65536", "http"])
def test_a_base_url_port_out_of_range_is_refused_at_its_place(tmp_path: Path, port: str) -> None:
    # Before: accepted, and every live request failed alike.
    cwd = project(tmp_path, "openai", f"https://user:hunter2-PASSWORD@gw.example:{port}/v1")
    for args in (["config"], ["run", "--mode", "live"]):
        done = cli(cwd, *args)
        assert done.returncode == 2, done.stdout + done.stderr
        text = done.stdout + done.stderr
        assert "evalrunner.toml:6:" in text
        assert "eval.live.base_url has a port that is not a whole number from 1 to 65535" in text
        assert "hunter2-PASSWORD" not in text
        assert "Traceback" not in text


def test_a_base_url_with_a_valid_port_is_accepted(tmp_path: Path) -> None:
    cwd = project(tmp_path, "openai", "https://gw.example:65535/v1")
    done = cli(cwd, "config")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_case_timeout_in_a_retry_after_wait_names_the_429(tmp_path: Path) -> None:
    # Before: "timed out after 1s", the rate limit that held the case up unsaid.
    limited = Reply(
        status=429, headers={"Retry-After": "30"}, raw=b'{"error": {"message": "slow down"}}'
    )
    with ModelServer("openai", [limited]) as server:
        cwd = project(tmp_path, "openai", server.base_url, a=ONE_CASE.format(n="a"))
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8").replace("max_retries = 0", "max_retries = 1"))
        done = cli(cwd, "run", "--mode", "live", "--case-timeout", "1", "--json", "out.json")
    assert done.returncode == 1, done.stdout + done.stderr
    case = json.loads((cwd / "out.json").read_text(encoding="utf-8"))["cases"][0]
    assert case["error"] == (
        "timed out after 1s (it was waiting 30s to retry, after: HTTP 429: slow down)"
    )
