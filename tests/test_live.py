"""The live provider against local model servers (no network): both wires, streaming and not,
usage, retries with Retry-After, 5xx then success, a hung server, malformed answers, a wrong
key; and the key never in any message (issue 12)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from evalrunner.config import LiveConfig
from evalrunner.live.provider import (
    MAX_RETRY_AFTER_SECS,
    BudgetSpent,
    LiveModel,
    TokenBudget,
    _retry_after,
)
from evalrunner.model import (
    Message,
    ModelRequest,
    RunError,
    TextResponse,
    ToolCall,
    ToolCallsResponse,
    ToolSpec,
)
from evalrunner.redact import KEY_FRAGMENT_CHARS

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from support.model_server import ModelServer, Reply, cut_stream

KEY = "sk-test-KNOWN-SECRET-31337"
WIRES = ["openai", "openai-responses", "anthropic"]
ECHO = ToolSpec("echo", "Echo text", {"type": "object", "properties": {"text": {"type": "string"}}})
REQUEST = ModelRequest(messages=(Message("user", "say hi"),), tools=(ECHO,))
CALL = ToolCallsResponse((ToolCall("call_1", "echo", '{"text":"hi"}'),), 7, 3)
TEXT = TextResponse("hello there, a reply long enough to be streamed in pieces", 11, 5)


def model(server: ModelServer, **overrides: object) -> tuple[LiveModel, list[float]]:
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
        environ={"TEST_KEY": KEY},
        sleep=waits.append,
    )
    return live, waits


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("wire", WIRES)
def test_tool_calls_and_text_round_trip_with_usage(wire: str, stream: bool) -> None:
    with ModelServer(wire, [Reply(CALL), Reply(TEXT)]) as server:
        live, waits = model(server, stream=stream, temperature=0.5, max_tokens=77)
        try:
            first = live.provider().complete(REQUEST)
            second = live.provider().complete(REQUEST)
        finally:
            live.close()
    assert first == CALL and second == TEXT
    assert live.budget.spent == 7 + 3 + 11 + 5
    assert waits == []
    body = server.seen[0].body
    assert body["model"] == "test-model"
    tokens = "max_output_tokens" if wire == "openai-responses" else "max_tokens"
    assert (body["temperature"], body[tokens]) == (0.5, 77)
    assert body.get("stream", False) is stream
    if wire == "openai":
        assert server.seen[0].path == "/v1/chat/completions"
        assert server.seen[0].headers["authorization"] == f"Bearer {KEY}"
        assert body["tools"][0]["function"]["name"] == "echo"
    elif wire == "openai-responses":
        assert server.seen[0].path == "/v1/responses"
        assert server.seen[0].headers["authorization"] == f"Bearer {KEY}"
        assert body["tools"][0]["name"] == "echo" and body["store"] is False
    else:
        assert server.seen[0].path == "/v1/messages"
        assert server.seen[0].headers["x-api-key"] == KEY
        assert body["tools"][0]["input_schema"] == ECHO.parameters


def test_the_provider_keeps_every_exchange_for_a_recorder() -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        live, _ = model(server)
        provider = live.provider()
        provider.complete(REQUEST)
        provider.complete(REQUEST)
        live.close()
    assert [e.response for e in provider.exchanges] == [CALL, TEXT]
    assert provider.exchanges[0].request == REQUEST


@pytest.mark.parametrize("wire", WIRES)
def test_429_with_retry_after_seconds_is_retried_after_that_wait(wire: str) -> None:
    limited = Reply(status=429, headers={"Retry-After": "3"}, raw=b'{"error":{"message":"slow"}}')
    with ModelServer(wire, [limited, Reply(TEXT)]) as server:
        live, waits = model(server)
        assert live.complete(REQUEST) == TEXT
    assert waits == [3.0]
    assert len(server.seen) == 2


def test_retry_after_as_an_http_date_and_capped() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=5), usegmt=True)
    assert _retry_after(later, now=lambda: now) == 5.0
    far = format_datetime(now + timedelta(days=2), usegmt=True)
    assert _retry_after(far, now=lambda: now) == MAX_RETRY_AFTER_SECS
    assert _retry_after("99999", now=lambda: now) == MAX_RETRY_AFTER_SECS
    assert _retry_after("not a date") is None
    assert _retry_after(None) is None
    past = format_datetime(now - timedelta(seconds=5), usegmt=True)
    assert _retry_after(past, now=lambda: now) == 0.0


@pytest.mark.parametrize("wire", WIRES)
def test_500_then_success_backs_off_exponentially(wire: str) -> None:
    broken = Reply(status=500, raw=b"oops")
    with ModelServer(wire, [broken, Reply(status=503), Reply(TEXT)]) as server:
        live, waits = model(server, max_retries=2)
        assert live.complete(REQUEST) == TEXT
    assert waits == [0.5, 1.0]


def test_retries_run_out_with_a_clear_error() -> None:
    with ModelServer("openai", [Reply(status=502)] * 3) as server:
        live, waits = model(server, max_retries=2)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert str(caught.value) == "live model: HTTP 502 (after 3 attempts)"
    assert len(waits) == 2


@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_4xx_are_final(status: int) -> None:
    body = json.dumps({"error": {"message": "bad field"}}).encode()
    with ModelServer("openai", [Reply(status=status, raw=body), Reply(TEXT)]) as server:
        live, waits = model(server, max_retries=3)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    final = f"live model: HTTP {status}: bad field (not retried: a 4xx is final)"
    assert str(caught.value) == final
    assert waits == [] and len(server.seen) == 1


@pytest.mark.parametrize("wire", WIRES)
def test_a_hung_server_times_out_and_is_retried(wire: str) -> None:
    with ModelServer(wire, [Reply(hang=True), Reply(TEXT)]) as server:
        # Long enough for the retry's fresh connection on a loaded machine (each attempt
        # opens one): the hang costs this once, the answer takes milliseconds.
        live, waits = model(server, timeout_secs=0.5, max_retries=1)
        assert live.complete(REQUEST) == TEXT
    assert len(waits) == 1


def test_a_server_that_always_hangs_is_a_timeout_error() -> None:
    with ModelServer("anthropic", [Reply(hang=True)]) as server:
        live, _ = model(server, timeout_secs=0.05, max_retries=0)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert str(caught.value) == "live model: no answer within timeout_secs = 0.05"


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"{not json", "the response body is not valid JSON"),
        (b"[1, 2]", "the body must be an object"),
        (b'{"choices": [], "content": 3}', "must be"),
    ],
)
def test_a_malformed_body_is_a_clear_run_error(wire: str, raw: bytes, problem: str) -> None:
    with ModelServer(wire, [Reply(raw=raw)]) as server:
        live, waits = model(server)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    message = str(caught.value)
    assert message.startswith("live model: the answer is malformed: ")
    assert problem in message or (wire == "openai" and "no choices" in message)
    assert waits == []


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("response", [TEXT, CALL])
def test_a_stream_cut_short_is_a_clear_run_error(wire: str, response: object) -> None:
    assert isinstance(response, TextResponse | ToolCallsResponse)
    cut = Reply(raw=cut_stream(wire, response, 3), headers={"Content-Type": "text/event-stream"})
    with ModelServer(wire, [cut]) as server:
        live, _ = model(server, stream=True)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert "the stream ended before its" in str(caught.value)


@pytest.mark.parametrize("wire", WIRES)
def test_a_stream_with_a_malformed_event_is_a_clear_run_error(wire: str) -> None:
    head = cut_stream(wire, TEXT, 1)
    raw = head + b"event: content_block_delta\ndata: {broken\n\n"
    with ModelServer(wire, [Reply(raw=raw)]) as server:
        live, _ = model(server, stream=True)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert "is not valid JSON" in str(caught.value)


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("status", [401, 403])
def test_a_wrong_key_names_the_variable_never_the_key(wire: str, status: int) -> None:
    echoed = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
    with ModelServer(wire, [Reply(status=status, raw=echoed)]) as server:
        live, waits = model(server, max_retries=3)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    message = str(caught.value)
    assert f"the API refused the key in TEST_KEY (HTTP {status})" in message
    assert KEY not in message and "[redacted]" in message
    assert waits == []


def test_a_missing_key_is_named_before_anything_is_sent() -> None:
    with ModelServer("openai", [Reply(TEXT)]) as server:
        live = LiveModel(
            LiveConfig(base_url=server.base_url, model="m", api_key_env="NOT_SET"), environ={}
        )
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert "the environment variable NOT_SET (api_key_env in [eval.live]) is not set" in str(
        caught.value
    )
    assert server.seen == []


def test_the_key_is_read_when_a_request_is_sent_not_before() -> None:
    environ: dict[str, str] = {}
    with ModelServer("openai", [Reply(TEXT)]) as server:
        live = LiveModel(
            LiveConfig(base_url=server.base_url, model="m", api_key_env="LATE"), environ=environ
        )
        environ["LATE"] = KEY  # set after the model was built
        assert live.complete(REQUEST) == TEXT
    assert server.seen[0].headers["authorization"] == f"Bearer {KEY}"


def test_nothing_listens_is_a_connect_error_without_the_key() -> None:
    with ModelServer("openai", []) as server:
        url = server.base_url
    live, _ = model(server, base_url=url, max_retries=1)  # closed: nothing listens there
    with pytest.raises(RunError) as caught:
        live.complete(REQUEST)
    assert str(caught.value) == f"live model: cannot connect to {url} (after 2 attempts)"
    assert KEY not in repr(caught.value) and caught.value.__cause__ is None


def test_the_budget_stops_requests_once_spent() -> None:
    budget = TokenBudget(20)
    with ModelServer("openai", [Reply(CALL), Reply(TEXT), Reply(TEXT)]) as server:
        live = LiveModel(
            LiveConfig(base_url=server.base_url, model="m", api_key_env="K"),
            budget=budget,
            environ={"K": KEY},
        )
        live.complete(REQUEST)  # 10 tokens
        live.complete(REQUEST)  # 16 more: 26, over the budget
        with pytest.raises(BudgetSpent) as caught:
            live.complete(REQUEST)
    assert budget.exhausted and budget.spent == 26
    assert "26 of max_total_tokens = 20" in str(caught.value)
    assert len(server.seen) == 2


def test_httpx2_is_not_imported_until_a_live_request() -> None:
    import subprocess

    code = (
        "import sys, evalrunner.cli, evalrunner.session, evalrunner.live.provider;"
        "print('httpx2' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"


def test_max_concurrency_caps_the_requests_in_flight() -> None:
    import threading
    import time

    import httpx2

    lock = threading.Lock()
    in_flight = [0, 0]  # now, most seen

    def answer(request: httpx2.Request) -> httpx2.Response:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        time.sleep(0.02)  # long enough for the other threads to pile up without the cap
        with lock:
            in_flight[0] -= 1
        body = {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
        return httpx2.Response(200, json=body)

    live = LiveModel(
        LiveConfig(model="m", api_key_env="K", max_concurrency=2),
        environ={"K": KEY},
        transport=httpx2.MockTransport(answer),
    )
    threads = [threading.Thread(target=live.complete, args=(REQUEST,)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    live.close()
    assert 1 <= in_flight[1] <= 2


def test_a_key_cut_by_an_excerpt_is_struck_out_in_pieces_too() -> None:
    # 80 bytes of body are quoted, cutting the key: its first part must not be shown.
    raw = b"{not json " + b"x" * 36 + KEY.encode()  # 11 characters of the key fit
    with ModelServer("openai", [Reply(raw=raw)]) as server:
        live, _ = model(server)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    message = str(caught.value)
    assert "[redacted]" in message
    assert KEY[:11] not in message and KEY[:KEY_FRAGMENT_CHARS] not in message


@pytest.mark.parametrize("stream", [False, True])
def test_a_server_that_trickles_bytes_still_times_out(stream: bool) -> None:
    # Each read gets bytes well within the per-read timeout; the attempt as a whole does not.
    with ModelServer("openai", [Reply(trickle=True)]) as server:
        live, _ = model(server, timeout_secs=0.2, max_retries=0, stream=stream)
        with pytest.raises(RunError) as caught:
            live.complete(REQUEST)
    assert str(caught.value) == "live model: no answer within timeout_secs = 0.2"


def test_a_secret_in_base_url_is_never_shown() -> None:
    """Some gateways take their key in the URL (user:password@, ?key=): messages show the URL
    without them."""
    url = "http://gateway-user:GATEWAY-PASSWORD@127.0.0.1:9/v1?api-key=URL-SECRET-1&v=2"
    live = LiveModel(
        LiveConfig(wire="openai", base_url=url, model="m", api_key_env="K", max_retries=0),
        environ={"K": KEY},
        sleep=lambda _: None,
    )
    with pytest.raises(RunError) as caught:
        live.complete(REQUEST)
    message = str(caught.value)
    assert "cannot connect to http://[redacted]@127.0.0.1:9/v1?api-key=[redacted]&v=[redacted]" in (
        message
    )
    for secret in ("GATEWAY-PASSWORD", "gateway-user", "URL-SECRET-1"):
        assert secret not in message


def test_evalrunner_config_shows_base_url_without_its_secrets(tmp_path: Path) -> None:
    (tmp_path / "evalrunner.toml").write_text(
        '[eval.live]\nbase_url = "https://u:PASSWORD-9@gw.example/v1?key=URL-KEY-7"\n', "utf-8"
    )
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", "config"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert 'base_url = "https://[redacted]@gw.example/v1?key=[redacted]"' in done.stdout
    assert "PASSWORD-9" not in done.stdout and "URL-KEY-7" not in done.stdout
