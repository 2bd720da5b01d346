"""The replay endpoint over raw HTTP: both APIs, streaming and not, the tool loop and the evidence
the conversation monitor keeps of it, run errors, per-turn queues, what is kept of each request,
and the socket (127.0.0.1 only, a free port, nothing left open)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from evalrunner.agents.reference import Agent, AgentContext, ReferenceAgent
from evalrunner.boundary.conformance import ConversationMonitor, Dispatch
from evalrunner.boundary.observer import RecordingObserver
from evalrunner.boundary.provider import ReplayProvider
from evalrunner.boundary.tools import builtin_tools
from evalrunner.expectations import NO_EVIDENCE, grade
from evalrunner.model import (
    Case,
    Expectations,
    GradeResult,
    Message,
    ModelResponse,
    RunRecord,
    TextResponse,
    ToolCall,
    ToolCallRecord,
    ToolCallsResponse,
    ToolSpec,
    Turn,
)
from evalrunner.replay import run_case
from evalrunner.wire.client import WireClient
from evalrunner.wire.endpoint import ReplayEndpoint
from evalrunner.wire.openai_chat import OpenAIChat

# --- scripts and a client -----------------------------------------------------------------------

ECHO_ARGS = '{"message":"token_7f3a"}'


def turn(user_input: str, *responses: ModelResponse) -> Turn:
    return Turn(user_input, tuple(responses))


def calls(*tool_calls: ToolCall, input_tokens: int = 0, output_tokens: int = 0) -> ModelResponse:
    return ToolCallsResponse(tuple(tool_calls), input_tokens, output_tokens)


def echo_loop() -> list[Turn]:
    """One turn: an echo call, then a reply."""
    return [
        turn(
            "Please echo token_7f3a.",
            calls(ToolCall("call_1", "echo", ECHO_ARGS), input_tokens=11, output_tokens=7),
            TextResponse("The echo tool returned token_7f3a.", 13, 5),
        )
    ]


ECHO_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"message": {"type": "string"}}}
OPENAI_TOOLS = [{"type": "function", "function": {"name": "echo", "parameters": ECHO_SCHEMA}}]
ANTHROPIC_TOOLS = [{"name": "echo", "input_schema": ECHO_SCHEMA}]
"""The tools every test request offers: a request offering none cannot get tool calls."""


class Served:
    """An endpoint serving a script through a conversation monitor, with its provider."""

    def __init__(self, turns: list[Turn], **options: Any) -> None:
        self.provider = ReplayProvider(turns)
        self.monitor = ConversationMonitor(self.provider, [t.user_input for t in turns])
        self.endpoint = ReplayEndpoint(self.monitor, **options)

    def post(self, path: str, body: object, headers: dict[str, str] | None = None) -> Reply:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        return post(self.endpoint.base_url + path, data, headers)

    def openai(self, messages: list[dict[str, Any]], **extra: Any) -> Reply:
        body = {"model": "m", "messages": messages, "tools": OPENAI_TOOLS, **extra}
        return self.post("/v1/chat/completions", body)

    def anthropic(self, messages: list[dict[str, Any]], **extra: Any) -> Reply:
        body = {"model": "m", "max_tokens": 100, "messages": messages, "tools": ANTHROPIC_TOOLS}
        body.update(extra)
        return self.post("/v1/messages", body, {"anthropic-version": "2023-06-01"})


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[tuple[str | None, str]]:
        """The SSE frames as (event, data) pairs."""
        assert self.headers["content-type"].startswith("text/event-stream")
        frames = []
        for frame in self.body.decode("utf-8").split("\n\n"):
            if not frame:
                continue
            event = None
            data = None
            for line in frame.split("\n"):
                field, _, value = line.partition(": ")
                if field == "event":
                    event = value
                else:
                    assert field == "data", line
                    data = value
            assert data is not None
            frames.append((event, data))
        return frames


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post(url: str, data: bytes, headers: dict[str, str] | None = None) -> Reply:
    request = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with _NO_PROXY.open(request, timeout=30) as response:
            return Reply(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        with error:
            return Reply(error.code, dict(error.headers), error.read())


def get(url: str) -> Reply:
    try:
        with _NO_PROXY.open(url, timeout=30) as response:
            return Reply(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        with error:
            return Reply(error.code, dict(error.headers), error.read())


@pytest.fixture(autouse=True)
def no_thread_left_behind() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not left, f"threads left running: {left}"


@pytest.fixture
def served() -> Iterator[list[Served]]:
    """Endpoints made by a test, closed after it whatever happened."""
    made: list[Served] = []
    yield made
    for item in made:
        item.endpoint.close()


def serve(made: list[Served], turns: list[Turn], **options: Any) -> Served:
    item = Served(turns, **options)
    made.append(item)
    item.endpoint.start()
    return item


USER = {"role": "user", "content": "Please echo token_7f3a."}


def openai_assistant(*call_ids: str, arguments: str = ECHO_ARGS) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "echo", "arguments": arguments}}
            for i in call_ids
        ],
    }


def anthropic_assistant(*call_ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": i, "name": "echo", "input": {"message": "token_7f3a"}}
            for i in call_ids
        ],
    }


# --- OpenAI chat completions ------------------------------------------------------------------


def test_openai_tool_loop_records_the_call_with_the_result_the_agent_sent(
    served: list[Served],
) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    first = s.openai([USER])
    assert first.status == 200
    assert first.headers["content-type"] == "application/json"
    body = first.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "m"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": ECHO_ARGS}}
    ]
    assert body["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    assert [c.id for c in s.endpoint.unresolved_calls()] == ["call_1"]
    assert s.monitor.fed_back() == ()  # recorded when the result comes back, not before

    tool = {"role": "tool", "tool_call_id": "call_1", "content": "token_7f3a"}
    second = s.openai([USER, openai_assistant("call_1"), tool])
    assert second.status == 200
    assert second.json()["choices"][0] == {
        "index": 0,
        "message": {
            "role": "assistant",
            "content": "The echo tool returned token_7f3a.",
            "refusal": None,
        },
        "finish_reason": "stop",
        "logprobs": None,
    }
    # The OpenAI wire has no error flag: success is unknown, not assumed.
    assert s.monitor.fed_back() == (Dispatch(ToolCall("call_1", "echo", ECHO_ARGS), "token_7f3a"),)
    assert s.endpoint.unresolved_calls() == []
    assert s.endpoint.error is None
    evidence = s.monitor.evidence()
    assert (evidence.llm_calls, evidence.input_tokens, evidence.output_tokens) == (2, 24, 12)
    assert (s.provider.input_tokens, s.provider.output_tokens) == (24, 12)


def test_the_history_reported_over_the_wire_is_the_reference_agents(
    served: list[Served],
) -> None:
    turns = [
        *echo_loop(),
        turn("And again?", TextResponse("No more tools needed.")),
    ]
    reference = run_case(Case("c", tuple(turns), Expectations(response_contains=("x",))))
    s = serve(served, turns, infer_turns=True)
    s.openai([USER])
    tool = {"role": "tool", "tool_call_id": "call_1", "content": "token_7f3a"}
    history = [USER, openai_assistant("call_1"), tool]
    s.openai(history)
    history += [
        {"role": "assistant", "content": "The echo tool returned token_7f3a."},
        {"role": "user", "content": "And again?"},
    ]
    s.openai(history)
    assert s.endpoint.error is None
    evidence = s.monitor.evidence()
    # The same conversation, but for the failure flag, which the OpenAI wire cannot carry.
    assert evidence.history == tuple(replace(m, is_error=None) for m in reference.history)
    # Turn 1 was closed when turn 2 opened: its dispatch is the reference run's, but for what
    # the OpenAI wire cannot show (the arguments the tool received, success).
    assert [(d.call.id, d.call.name, d.call.arguments, d.result) for d in evidence.dispatches] == [
        (r.id, r.name, r.arguments, r.result) for r in reference.tool_calls
    ]
    assert [(d.arguments, d.success) for d in evidence.dispatches] == [(None, None)]


def test_openai_stream_sends_data_chunks_ending_in_done(served: list[Served]) -> None:
    arguments = '{"message":"a fairly long argument text, cut into pieces"}'
    turns = [
        turn(
            "go",
            calls(ToolCall("call_a", "echo", arguments), ToolCall("call_b", "echo", "{}")),
            TextResponse("Streamed replies arrive in pieces, in order.", 3, 4),
        )
    ]
    s = serve(served, turns, infer_turns=True)
    first = s.openai([{"role": "user", "content": "go"}], stream=True)
    frames = first.events()
    assert all(event is None for event, _ in frames)  # OpenAI streams have no event: lines
    assert frames[-1] == (None, "[DONE]")
    chunks = [json.loads(data) for _, data in frames[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all("usage" not in c for c in chunks)  # not asked for: include_usage unset
    assembled: dict[int, dict[str, str]] = {}
    for c in chunks:
        for fragment in c["choices"][0]["delta"].get("tool_calls", []):
            entry = assembled.setdefault(fragment["index"], {"arguments": ""})
            if "id" in fragment:
                entry["id"] = fragment["id"]
                entry["name"] = fragment["function"]["name"]
            entry["arguments"] += fragment["function"]["arguments"]
    assert assembled == {
        0: {"id": "call_a", "name": "echo", "arguments": arguments},
        1: {"id": "call_b", "name": "echo", "arguments": "{}"},
    }
    argument_chunks = [
        c for c in chunks if c["choices"][0]["delta"].get("tool_calls", [{}])[0].get("index") == 0
    ]
    assert len(argument_chunks) > 2  # the text really was cut into pieces
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"

    results = [
        {"role": "tool", "tool_call_id": "call_a", "content": "first"},
        {
            "role": "tool",
            "tool_call_id": "call_b",
            "content": [{"type": "text", "text": "sec"}, {"type": "text", "text": "ond"}],
        },
    ]
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "echo", "arguments": arguments},
            },
            {"id": "call_b", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
        ],
    }
    second = s.openai(
        [{"role": "user", "content": "go"}, assistant, *results],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [json.loads(data) for _, data in second.events()[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Streamed replies arrive in pieces, in order."
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert s.monitor.fed_back() == (
        Dispatch(ToolCall("call_a", "echo", arguments), "first"),
        Dispatch(ToolCall("call_b", "echo", "{}"), "second"),
    )


def test_openai_carries_malformed_scripted_arguments_verbatim(served: list[Served]) -> None:
    turns = [turn("go", calls(ToolCall("c1", "echo", "{not json")), TextResponse("ok"))]
    s = serve(served, turns, infer_turns=True)
    reply = s.openai([{"role": "user", "content": "go"}])
    assert reply.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == (
        "{not json"
    )


class OverTheWire(ReferenceAgent):
    """The reference loop run over HTTP, as an agent in another language would be: its model is
    the case's monitor behind a replay endpoint, reached with :class:`WireClient`, and it reports
    no dispatches (like a command agent whose reply lines carry no "tool_calls"). A failed
    call's result is fed back with is_error, which only the Anthropic wire can carry."""

    reports_dispatches = False
    runs_own_tools = True

    def __init__(self, context: AgentContext, api: str) -> None:
        assert isinstance(context.provider, ConversationMonitor)
        self.endpoint = ReplayEndpoint(context.provider)
        self.endpoint.start()
        base = self.endpoint.openai_base_url if api == "openai" else self.endpoint.base_url
        # Its own tools, as an agent in another process has: the case's are the runner's to
        # watch, and an agent that runs them is held to what they received.
        super().__init__(
            replace(
                context,
                provider=WireClient(api, base),
                observer=RecordingObserver(),
                tools=builtin_tools(),
            )
        )

    def _feed(self, call: ToolCall, record: ToolCallRecord) -> None:
        message = Message("tool", record.result, tool_call_id=call.id, is_error=not record.success)
        self._append(message)

    def close(self) -> None:
        self.endpoint.close()


def run_over_the_wire(
    api: str, tool: str, expects: Expectations
) -> tuple[RunRecord, tuple[GradeResult, ...]]:
    """Run one call of ``tool`` (then a reply) over ``api`` and grade ``expects``."""
    turns = [
        turn(
            "Please echo token_7f3a.",
            calls(ToolCall("call_1", tool, ECHO_ARGS)),
            TextResponse("Done."),
        )
    ]

    def factory(context: AgentContext) -> Agent:
        return OverTheWire(context, api)

    record = run_case(Case("wire", tuple(turns), expects), agent_factory=factory)
    assert record.error is None
    return record, grade(expects, record)


@pytest.fixture
def loopback_without_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.mark.usefixtures("loopback_without_proxy")
@pytest.mark.parametrize("expected", [True, False])
def test_on_the_openai_wire_unreported_success_is_no_evidence(expected: bool) -> None:
    expects = Expectations(exact_tool_calls=1, all_tools_succeeded=expected)
    record, (counted, succeeded) = run_over_the_wire("openai", "echo", expects)
    assert record.unobserved == ("arguments", "success")
    assert counted.passed  # the fed-back result is evidence on every wire
    # The echo call did succeed, but nothing on this path says so: the check fails whichever
    # value it expects, with the message saying how to supply the evidence.
    assert succeeded.check == f"all_tools_succeeded({json.dumps(expected)})"
    assert not succeeded.passed
    assert succeeded.detail == NO_EVIDENCE["success"]


@pytest.mark.usefixtures("loopback_without_proxy")
@pytest.mark.parametrize(("tool", "succeeded"), [("echo", True), ("no_such_tool", False)])
def test_on_the_anthropic_wire_is_error_is_the_evidence_of_success(
    tool: str, succeeded: bool
) -> None:
    expects = Expectations(all_tools_succeeded=True)
    record, (graded,) = run_over_the_wire("anthropic", tool, expects)
    assert record.unobserved == ("arguments",)  # success is observed: is_error says it
    assert [(c.name, c.success) for c in record.tool_calls] == [(tool, succeeded)]
    assert graded.passed is succeeded
    if not succeeded:
        assert graded.detail != NO_EVIDENCE["success"]
        assert "no_such_tool" in graded.detail


# --- Anthropic messages -------------------------------------------------------------------------


def test_anthropic_tool_loop_with_is_error_records_a_failed_call(served: list[Served]) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    first = s.anthropic([USER], system="You are terse.")
    assert first.status == 200
    assert first.json() == {
        "id": "msg_replay_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "stop_sequence": None,
        "content": [
            {"type": "tool_use", "id": "call_1", "name": "echo", "input": {"message": "token_7f3a"}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 11, "output_tokens": 7},
    }
    result = {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": [{"type": "text", "text": "Error: "}, {"type": "text", "text": "disk full"}],
        "is_error": True,
    }
    second = s.anthropic(
        [USER, anthropic_assistant("call_1"), {"role": "user", "content": [result]}]
    )
    assert second.status == 200
    body = second.json()
    assert body["content"] == [{"type": "text", "text": "The echo tool returned token_7f3a."}]
    assert body["stop_reason"] == "end_turn"
    # is_error is the evidence of failure; the arguments the tool received are unknown here.
    assert s.monitor.fed_back() == (
        Dispatch(ToolCall("call_1", "echo", ECHO_ARGS), "Error: disk full", None, False),
    )
    # The history is the conversation as sent, without the system prompt.
    assert s.monitor.evidence().history == (
        Message("user", "Please echo token_7f3a."),
        Message("assistant", "", tool_calls=(ToolCall("call_1", "echo", ECHO_ARGS),)),
        Message("tool", "Error: disk full", tool_call_id="call_1", is_error=True),
        Message("assistant", "The echo tool returned token_7f3a."),
    )


def test_anthropic_result_without_is_error_succeeds(served: list[Served]) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    s.anthropic([USER])
    result = {"type": "tool_result", "tool_use_id": "call_1", "content": "token_7f3a"}
    s.anthropic([USER, anthropic_assistant("call_1"), {"role": "user", "content": [result]}])
    assert s.endpoint.error is None
    assert s.monitor.fed_back() == (
        Dispatch(ToolCall("call_1", "echo", ECHO_ARGS), "token_7f3a", None, True),
    )


def test_anthropic_stream_sends_named_events_from_start_to_stop(served: list[Served]) -> None:
    arguments = '{"message": "spaced  exactly as scripted", "n": [1, 2]}'
    turns = [
        turn(
            "go",
            calls(ToolCall("toolu_1", "echo", arguments), input_tokens=9, output_tokens=4),
            TextResponse("All done, in several pieces of text.", 2, 3),
        )
    ]
    s = serve(served, turns, infer_turns=True)
    frames = s.anthropic([{"role": "user", "content": "go"}], stream=True).events()
    kinds = [event for event, _ in frames]
    payloads = [json.loads(data) for _, data in frames]
    assert all(p["type"] == kind for kind, p in zip(kinds, payloads, strict=True))
    assert kinds[:3] == ["message_start", "ping", "content_block_start"]
    assert kinds[-4:] == [
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert payloads[0]["message"]["usage"] == {"input_tokens": 9, "output_tokens": 0}
    assert payloads[2]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "echo",
        "input": {},
    }
    partial = "".join(
        p["delta"]["partial_json"] for p in payloads if p["type"] == "content_block_delta"
    )
    assert partial == arguments  # the scripted text itself, byte for byte
    assert payloads[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert payloads[-2]["usage"] == {"output_tokens": 4}

    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": json.loads(arguments)}
        ],
    }
    history = [{"role": "user", "content": "go"}, assistant, {"role": "user", "content": [result]}]
    frames = s.anthropic(history, stream=True).events()
    payloads = [json.loads(data) for _, data in frames]
    text = "".join(p["delta"]["text"] for p in payloads if p["type"] == "content_block_delta")
    assert text == "All done, in several pieces of text."
    assert payloads[-2]["delta"]["stop_reason"] == "end_turn"
    assert s.endpoint.error is None
    # The dispatch keeps the scripted argument text, not the object the agent echoed back.
    assert s.monitor.fed_back() == (
        Dispatch(ToolCall("toolu_1", "echo", arguments), "ok", None, True),
    )


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("{not json", "not JSON"),
        ('{"message": "unterminated', "(not JSON: Unterminated string);"),
        ('{"message": "a\x01"}', "(not JSON: Invalid control character);"),
        ('["a"]', "an array"),
        ('"text"', "a string"),
        ("null", "null"),
        ('{"a": 1, "a": 2}', 'key "a" appears twice'),
        ('{"a": NaN}', "NaN is not JSON"),
    ],
)
def test_anthropic_cannot_carry_arguments_that_are_not_an_object(
    served: list[Served], arguments: str, reason: str
) -> None:
    turns = [turn("go", calls(ToolCall("c1", "echo", arguments)), TextResponse("ok"))]
    s = serve(served, turns, infer_turns=True)
    reply = s.anthropic([{"role": "user", "content": "go"}])
    assert reply.status == 500
    error = reply.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "api_error"
    message = error["error"]["message"]
    assert message == s.endpoint.error
    assert 'tool call "c1" (echo)' in message
    assert "not a JSON object" in message
    assert reason in message
    again = s.anthropic([{"role": "user", "content": "go"}])
    assert again.json()["error"]["message"] == f"the run has already failed: {message}"


def test_a_response_the_wire_cannot_carry_is_never_accounted_as_served(
    served: list[Served],
) -> None:
    turns = [turn("go", calls(ToolCall("c1", "echo", "{not json")), TextResponse("ok"))]
    s = serve(served, turns, infer_turns=True)
    assert s.anthropic([{"role": "user", "content": "go"}]).status == 500
    assert s.endpoint.error is not None
    assert s.endpoint.unresolved_calls() == []  # never handed to the agent
    assert s.endpoint.responses_served == 0
    evidence = s.monitor.evidence()
    assert (evidence.llm_calls, evidence.input_tokens, evidence.output_tokens) == (0, 0, 0)
    assert evidence.history == (Message("user", "go"),)


# --- run errors ---------------------------------------------------------------------------------


def test_a_request_without_the_result_is_a_run_error_naming_the_call(
    served: list[Served],
) -> None:
    turns = [
        turn(
            USER["content"],
            calls(ToolCall("call_1", "echo", ECHO_ARGS), ToolCall("call_2", "echo", ECHO_ARGS)),
            TextResponse("done"),
        )
    ]
    s = serve(served, turns, infer_turns=True)
    s.openai([USER])
    tool = {"role": "tool", "tool_call_id": "call_1", "content": "token_7f3a"}
    reply = s.openai([USER, openai_assistant("call_1", "call_2"), tool])
    assert reply.status == 500
    assert reply.headers["x-should-retry"] == "false"
    error = reply.json()["error"]
    assert error["code"] == "run_error"
    assert error["message"] == s.endpoint.error
    assert error["message"].startswith("turn 1, model request 2: ")
    assert '"call_2" (echo)' in error["message"]
    assert '"call_1"' not in error["message"]
    assert "exactly one result per call id" in error["message"]
    # A refused request is not taken in: nothing was fed back, both calls stay unresolved.
    assert s.monitor.fed_back() == ()
    assert [c.id for c in s.endpoint.unresolved_calls()] == ["call_1", "call_2"]
    assert s.provider.llm_calls == 1  # the reply was not served


def test_anthropic_missing_result_names_the_call(served: list[Served]) -> None:
    # The runner brackets the turn: the request is turn 1's second, and a user message where
    # the result of call_1 belongs is refused, naming the call.
    s = serve(served, echo_loop())
    s.monitor.begin_turn(0)
    assert s.anthropic([USER]).status == 200
    reply = s.anthropic([USER, anthropic_assistant("call_1"), {"role": "user", "content": "?"}])
    assert reply.status == 500
    message = reply.json()["error"]["message"]
    assert message == s.endpoint.error
    assert message.startswith("turn 1, model request 2: ")
    assert 'the user message "?"' in message
    assert 'only the results of "call_1" (echo) may follow' in message


def test_a_missing_result_is_named_even_when_a_user_message_follows(
    served: list[Served],
) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    assert s.anthropic([USER]).status == 200
    reply = s.anthropic([USER, anthropic_assistant("call_1"), {"role": "user", "content": "?"}])
    assert reply.status == 500
    assert '"call_1" (echo)' in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    ("results", "fragment"),
    [
        (
            [("call_1", "token_7f3a"), ("call_1", "token_7f3a")],
            'two results for tool call "call_1" (echo); each call gets exactly one',
        ),
        (
            [("call_1", "token_7f3a"), ("call_9", "?")],
            'a result for tool call id "call_9", which the model never handed out',
        ),
    ],
)
def test_each_call_gets_exactly_one_result_over_the_wire(
    served: list[Served], results: list[tuple[str, str]], fragment: str
) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    assert s.openai([USER]).status == 200
    tools = [{"role": "tool", "tool_call_id": i, "content": c} for i, c in results]
    reply = s.openai([USER, openai_assistant("call_1"), *tools])
    assert reply.status == 500
    assert fragment in reply.json()["error"]["message"]
    assert s.monitor.fed_back() == ()
    assert s.provider.llm_calls == 1


def test_the_assistant_calls_must_be_repeated_as_the_model_sent_them(
    served: list[Served],
) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    assert s.openai([USER]).status == 200
    tool = {"role": "tool", "tool_call_id": "call_1", "content": "token_7f3a"}
    other = '{"message":"something else"}'
    reply = s.openai([USER, openai_assistant("call_1", arguments=other), tool])
    assert reply.status == 500
    assert reply.json()["error"]["message"] == (
        'turn 1, model request 2: history message 2 repeats tool call "call_1" (echo) with '
        f"arguments {json.dumps(other)}, but the model sent {json.dumps(ECHO_ARGS)}"
    )
    # Re-serialising the same object is no change.
    s2 = serve(served, echo_loop(), infer_turns=True)
    assert s2.openai([USER]).status == 200
    spaced = openai_assistant("call_1", arguments='{ "message" : "token_7f3a" }')
    assert s2.openai([USER, spaced, tool]).status == 200
    assert s2.endpoint.error is None


def test_after_a_run_error_every_request_is_refused(served: list[Served]) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    assert s.post("/v1/chat/completions", b"{oops").status == 400
    first_error = s.endpoint.error
    assert first_error is not None
    again = s.openai([USER])
    assert again.status == 500
    assert again.json()["error"]["message"] == f"the run has already failed: {first_error}"
    assert s.endpoint.error == first_error  # the first error is the one kept
    assert s.provider.llm_calls == 0


def test_over_specified_turn_is_a_run_error_when_the_next_turn_opens(
    served: list[Served],
) -> None:
    turns = [
        turn("one", TextResponse("a"), TextResponse("never asked for")),
        turn("two", TextResponse("b")),
    ]
    s = serve(served, turns, infer_turns=True)
    assert s.openai([{"role": "user", "content": "one"}]).status == 200
    history = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "two"},
    ]
    reply = s.openai(history)
    assert reply.status == 500
    assert s.endpoint.error == "turn 1 scripted 1 response(s) the agent never requested"


def test_under_specified_turn_is_a_run_error(served: list[Served]) -> None:
    turns = [
        turn("one", calls(ToolCall("call_1", "echo", ECHO_ARGS))),
        turn("two", TextResponse("b")),
    ]
    s = serve(served, turns, infer_turns=True)
    s.anthropic([{"role": "user", "content": "one"}])
    result = {"type": "tool_result", "tool_use_id": "call_1", "content": "token_7f3a"}
    history = [
        {"role": "user", "content": "one"},
        anthropic_assistant("call_1"),
        {"role": "user", "content": [result]},
    ]
    # a conformant request, but not a new user message: still turn 1, whose script is used up
    reply = s.anthropic(history)
    assert reply.status == 500
    assert s.endpoint.error == (
        "turn 1 requested more model responses than the fixture scripts for it"
    )
    assert s.provider.llm_calls == 1


def test_a_message_the_run_never_held_is_a_run_error(served: list[Served]) -> None:
    turns = [turn("one", TextResponse("a")), turn("two", TextResponse("b"))]
    s = serve(served, turns, infer_turns=True)
    s.anthropic([{"role": "user", "content": "one"}])
    history = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "an answer the model never gave"},
    ]
    # not a new user message, so no new turn; and turn 1's script is spent: the script says so
    reply = s.anthropic(history)
    assert reply.status == 500
    assert s.endpoint.error == (
        "turn 1 requested more model responses than the fixture scripts for it"
    )
    assert s.provider.llm_calls == 1


def test_a_first_request_ending_in_a_message_the_run_never_held_is_a_run_error(
    served: list[Served],
) -> None:
    s = serve(served, [turn("one", TextResponse("a"))])
    s.monitor.begin_turn(0)
    # The turn's input is there, but a made-up assistant message follows it.
    reply = s.openai([{"role": "user", "content": "one"}, {"role": "assistant", "content": "x"}])
    assert reply.status == 500
    assert s.endpoint.error == (
        'turn 1, model request 1: the request ends with the assistant message "x", which '
        'the run never held; its latest message must be the user message "one"'
    )
    assert s.provider.llm_calls == 0  # refused before the script was asked


def test_more_turns_than_scripted_says_so(served: list[Served]) -> None:
    s = serve(served, [turn("one", TextResponse("a"))], infer_turns=True)
    s.openai([{"role": "user", "content": "one"}])
    history = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "two"},
    ]
    assert s.openai(history).status == 500
    assert s.endpoint.error == "the agent began turn 2, but the fixture scripts only 1 turn(s)"


def test_turns_bracketed_by_the_runner_never_bleed(served: list[Served]) -> None:
    turns = [turn("one", TextResponse("first")), turn("two", TextResponse("second"))]
    s = serve(served, turns)  # infer_turns=False: the runner says where turns begin and end
    s.monitor.begin_turn(0)
    assert (
        s.openai([{"role": "user", "content": "one"}]).json()["choices"][0]["message"]["content"]
        == "first"
    )
    s.monitor.end_turn(None)
    # Between turns nothing is served, whatever the request looks like.
    history = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "first"},
        {"role": "user", "content": "two"},
    ]
    reply = s.openai(history)
    assert reply.status == 500
    assert s.endpoint.error is not None
    assert s.endpoint.error.startswith("the agent sent a model request outside any turn")
    assert s.provider.llm_calls == 1
    # The error is sticky: turn 2 opening afterwards changes nothing.
    s.monitor.begin_turn(1)
    assert s.openai(history).status == 500
    assert s.provider.llm_calls == 1


def test_a_request_before_the_first_turn_is_refused(served: list[Served]) -> None:
    s = serve(served, echo_loop())
    assert s.openai([USER]).status == 500
    assert s.endpoint.error == (
        "the agent sent a model request outside any turn (before the first turn)"
    )
    assert s.provider.llm_calls == 0


def test_runner_turns_serve_each_turns_own_queue(served: list[Served]) -> None:
    turns = [turn("one", TextResponse("first")), turn("two", TextResponse("second"))]
    s = serve(served, turns)
    replies = []
    history: list[dict[str, Any]] = []
    for index, user in enumerate(["one", "two"]):
        s.monitor.begin_turn(index)
        history.append({"role": "user", "content": user})
        block = s.anthropic(history).json()["content"][0]
        replies.append(block)
        history.append({"role": "assistant", "content": [block]})
        s.monitor.end_turn(None)
    assert [r["text"] for r in replies] == ["first", "second"]
    assert s.endpoint.error is None
    assert [m.content for m in s.monitor.evidence().history] == ["one", "first", "two", "second"]


def test_runner_turns_check_the_turns_user_input(served: list[Served]) -> None:
    turns = [turn("one", TextResponse("first")), turn("two", TextResponse("second"))]
    s = serve(served, turns)
    s.monitor.begin_turn(0)
    reply = s.openai([{"role": "user", "content": "one, reworded"}])
    assert reply.status == 500
    assert s.endpoint.error == (
        "turn 1, model request 1: the latest user message should be the turn's user_input "
        '"one" verbatim, but the request carries "one, reworded"'
    )
    assert s.provider.llm_calls == 0


def test_runner_turns_require_earlier_turns_to_be_kept(served: list[Served]) -> None:
    turns = [turn("one", TextResponse("first")), turn("two", TextResponse("second"))]
    s = serve(served, turns)
    s.monitor.begin_turn(0)
    assert s.openai([{"role": "user", "content": "one"}]).status == 200
    s.monitor.end_turn(None)
    s.monitor.begin_turn(1)
    reply = s.openai([{"role": "user", "content": "two"}])  # turn 1 dropped
    assert reply.status == 500
    message = reply.json()["error"]["message"]
    assert message == s.endpoint.error
    assert message.startswith("turn 2, model request 1: ")
    assert 'the user message "one"' in message  # what was dropped
    assert s.provider.llm_calls == 1


# --- what is kept of each request ---------------------------------------------------------------


def test_requests_are_kept_as_neutral_requests(served: list[Served]) -> None:
    turns = [turn("go", calls(ToolCall("call_1", "echo", ECHO_ARGS)), TextResponse("ok"))]
    s = serve(served, turns, infer_turns=True)
    schema = {"type": "object", "properties": {"message": {"type": "string"}}}
    s.openai(
        [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "go"}],
        tools=[
            {
                "type": "function",
                "function": {"name": "echo", "description": "Echo.", "parameters": schema},
            }
        ],
    )
    result = {"type": "tool_result", "tool_use_id": "call_1", "content": "token_7f3a"}
    s.anthropic(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Calling."},
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "echo",
                        "input": {"message": "token_7f3a"},
                    },
                ],
            },
            {"role": "user", "content": [result]},
        ],
        system=[{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}],
        tools=[{"name": "echo", "input_schema": schema}],
        model="claude-x",
        stream=True,
    )
    first, second = s.endpoint.requests
    assert (first.api, first.model, first.stream) == ("openai", "m", False)
    assert first.tools == (ToolSpec("echo", "Echo.", schema),)
    assert first.messages == (Message("system", "be brief"), Message("user", "go"))
    assert (second.api, second.model, second.stream) == ("anthropic", "claude-x", True)
    assert second.tools == (ToolSpec("echo", "", schema),)
    assert second.messages == (
        Message("system", "be brief"),
        Message("user", "go"),
        Message("assistant", "Calling.", tool_calls=(ToolCall("call_1", "echo", ECHO_ARGS),)),
        Message("tool", "token_7f3a", tool_call_id="call_1", is_error=False),
    )
    assert tuple(s.provider.requests) == s.endpoint.requests


@pytest.mark.parametrize(
    ("path", "body", "fragment"),
    [
        ("/v1/chat/completions", b"{oops", "the request body is not JSON"),
        ("/v1/messages", b'{"model": "m', "the request body is not JSON: Unterminated string"),
        ("/v1/chat/completions", b"", "the request body is not JSON"),
        ("/v1/chat/completions", b"\xff", "the request body is not JSON"),
        ("/v1/chat/completions", b"[]", "the request body must be an object"),
        ("/v1/chat/completions", b'{"messages": []}', "messages must not be empty"),
        ("/v1/chat/completions", b'{"messages": [{"role": "function"}]}', "role must be one of"),
        ("/v1/messages", b'{"model": "m"}', "messages must be an array"),
        ("/v1/messages", b'{"messages": [{"role": "user", "content": 3}]}', "must be an array"),
        (
            "/v1/messages",
            b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
            "stream must be a boolean",
        ),
    ],
)
def test_unreadable_requests_are_400_in_the_apis_shape(
    served: list[Served], path: str, body: bytes, fragment: str
) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    reply = s.post(path, body)
    assert reply.status == 400
    error = reply.json()
    if path == "/v1/messages":
        assert error["type"] == "error"
        assert error["error"]["type"] == "invalid_request_error"
        message = error["error"]["message"]
    else:
        assert error["error"]["type"] == "invalid_request_error"
        message = error["error"]["message"]
    assert fragment in message
    assert not message.endswith(" at")  # the decoder's wording, made to precede a position
    assert s.endpoint.error == message
    assert s.endpoint.requests == ()  # nothing was read, so nothing reached the monitor


def test_unknown_paths_are_404_in_the_apis_shape(served: list[Served]) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    models = get(s.endpoint.base_url + "/v1/models")
    assert models.status == 404
    assert "not served" in models.json()["error"]["message"]
    assert s.endpoint.error is None  # a GET asks for no model response
    counted = s.post("/v1/messages/count_tokens", {"messages": []})
    assert counted.status == 404
    assert counted.json()["type"] == "error"
    assert counted.json()["error"]["type"] == "not_found_error"
    assert s.endpoint.error is not None  # a POST elsewhere is a model call the script can't answer


def test_a_base_url_without_v1_gets_a_hint(served: list[Served]) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    reply = s.post("/chat/completions", {"messages": [USER]})
    assert reply.status == 404
    assert "OPENAI_BASE_URL must end in /v1" in reply.json()["error"]["message"]


def test_query_strings_do_not_change_the_route(served: list[Served]) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    body = {"model": "m", "max_tokens": 5, "messages": [USER], "tools": ANTHROPIC_TOOLS}
    reply = s.post("/v1/messages?beta=true", body)
    assert reply.status == 200


def test_a_chunked_request_body_is_read(served: list[Served]) -> None:
    s = serve(served, echo_loop(), infer_turns=True)
    body = json.dumps({"model": "m", "messages": [USER], "tools": OPENAI_TOOLS}).encode()
    connection = http.client.HTTPConnection("127.0.0.1", s.endpoint.port, timeout=30)
    try:
        connection.request(
            "POST",
            "/v1/chat/completions",
            body=iter([body[:10], body[10:]]),
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
        response = connection.getresponse()
        assert response.status == 200
        assert json.loads(response.read())["choices"][0]["message"]["tool_calls"][0]["id"] == (
            "call_1"
        )
    finally:
        connection.close()


# --- the socket ---------------------------------------------------------------------------------


def test_binds_to_loopback_on_a_free_port(served: list[Served]) -> None:
    a = serve(served, echo_loop())
    b = serve(served, echo_loop())
    assert a.endpoint.port != 0
    assert a.endpoint.port != b.endpoint.port
    assert a.endpoint.base_url == f"http://127.0.0.1:{a.endpoint.port}"
    assert a.endpoint.openai_base_url == a.endpoint.base_url + "/v1"
    server = a.endpoint._server
    assert server is not None
    assert server.socket.getsockname()[0] == "127.0.0.1"
    assert a.endpoint.agent_environment() == {
        "OPENAI_BASE_URL": a.endpoint.openai_base_url,
        "OPENAI_API_KEY": "evalrunner-replay-no-key-needed",
        "ANTHROPIC_BASE_URL": a.endpoint.base_url,
        "ANTHROPIC_API_KEY": "evalrunner-replay-no-key-needed",
    }


@pytest.mark.parametrize("host", ["0.0.0.0", "localhost", "::", "192.168.1.10", ""])
def test_refuses_any_address_but_loopback(host: str) -> None:
    with pytest.raises(ValueError, match=r"127\.0\.0\.1 only"):
        ReplayEndpoint(ConversationMonitor(ReplayProvider([]), []), host=host)


def test_a_given_port_is_used(served: list[Served]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    s = serve(served, echo_loop(), port=port)
    assert s.endpoint.base_url == f"http://127.0.0.1:{port}"


def test_close_releases_the_port_and_is_idempotent() -> None:
    endpoint = ReplayEndpoint(
        ConversationMonitor(ReplayProvider(echo_loop()), [t.user_input for t in echo_loop()])
    )
    with endpoint:
        port = endpoint.port
        assert get(endpoint.base_url + "/").status == 404
    endpoint.close()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass
    with pytest.raises(RuntimeError, match="started once"):
        endpoint.start()


def test_close_before_start_is_harmless() -> None:
    endpoint = ReplayEndpoint(
        ConversationMonitor(ReplayProvider(echo_loop()), [t.user_input for t in echo_loop()])
    )
    endpoint.close()
    with pytest.raises(RuntimeError, match="not been started"):
        _ = endpoint.base_url


def test_a_client_holding_a_connection_open_does_not_hold_close() -> None:
    endpoint = ReplayEndpoint(
        ConversationMonitor(ReplayProvider(echo_loop()), [t.user_input for t in echo_loop()])
    )
    endpoint.start()
    stalled = socket.create_connection(("127.0.0.1", endpoint.port))
    try:
        # Half a request: the serving thread waits for the rest, which never comes.
        stalled.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        closing = threading.Thread(target=endpoint.close)
        closing.start()
        closing.join(timeout=30)  # a generous bound: close cuts the connection, it never waits
        assert not closing.is_alive()
    finally:
        stalled.close()


def test_a_fault_inside_the_endpoint_fails_the_run_instead_of_hanging_the_agent(
    served: list[Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: OpenAIChat, *args: object, **kwargs: object) -> object:
        raise KeyError("oops")

    monkeypatch.setattr(OpenAIChat, "response_body", broken)
    s = serve(served, echo_loop(), infer_turns=True)
    reply = s.openai([USER])
    assert reply.status == 500
    assert reply.json()["error"]["message"] == "the replay endpoint failed: KeyError: 'oops'"
    assert s.endpoint.error == "the replay endpoint failed: KeyError: 'oops'"


@pytest.mark.parametrize(
    ("raw", "fields"),
    [
        (None, {}),
        ("auto", {}),
        ("none", {"tool_choice": "none"}),
        ("required", {"tool_choice": "required"}),
        ({"type": "none"}, {"tool_choice": "none"}),
        ({"type": "any"}, {"tool_choice": "required"}),
        ({"type": "auto"}, {}),
        ({"type": "tool", "name": "echo"}, {"tool_choice": "tool", "forced_tool": "echo"}),
        ({"type": "function", "name": "echo"}, {"tool_choice": "tool", "forced_tool": "echo"}),
        (
            {"type": "function", "function": {"name": "echo"}},
            {"tool_choice": "tool", "forced_tool": "echo"},
        ),
        ({"type": "function"}, {}),
        ({"type": "web_search_preview"}, {}),
    ],
)
def test_tool_choice_is_read_in_every_apis_shape(raw: Any, fields: dict[str, str]) -> None:
    from evalrunner.wire.common import tool_choice

    assert tool_choice(raw) == fields
