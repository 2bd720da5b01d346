"""The replay endpoint against the official ``openai`` and ``anthropic`` SDKs (test extras):
each test is a small agent written with an SDK (chat completions, the Responses API, Anthropic
messages), driving a tool loop over two turns, and the conversation monitor behind the
endpoint must record exactly the tool calls a reference run records, as far as each wire shows
them (success only where it has is_error)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from evalrunner.agents.reference import AgentContext
from evalrunner.boundary.conformance import ConversationMonitor, Dispatch
from evalrunner.boundary.provider import ReplayProvider
from evalrunner.boundary.tools import EchoTool
from evalrunner.expectations import NO_EVIDENCE, grade
from evalrunner.model import (
    Case,
    Expectations,
    GradeResult,
    RunRecord,
    TextResponse,
    ToolCall,
    ToolCallRecord,
    ToolCallsResponse,
    Turn,
)
from evalrunner.replay import run_case
from evalrunner.wire.endpoint import ReplayEndpoint

# The SDKs are imported where a test uses them, not here: importing them costs every process
# that collects this module, and most of those run none of its tests.
if TYPE_CHECKING:
    import anthropic
    import openai
    from openai.types.responses import Response

OPENAI_TOOLS: Any = [
    {"type": "function", "function": {"name": "echo", "parameters": EchoTool.parameters}}
]
ANTHROPIC_TOOLS: Any = [{"name": "echo", "input_schema": EchoTool.parameters}]

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
    Turn(
        "Now echo gamma.",
        (
            ToolCallsResponse((ToolCall("call_c3", "echo", '{"message":"gamma"}'),), 40, 5),
            TextResponse("Echoed gamma.", 50, 4),
        ),
    ),
)

EXPECTED = [
    ToolCallRecord("echo", '{"message":"alpha"}', "alpha", True, "call_a1"),
    ToolCallRecord(
        "echo",
        '{"message":"beta, a longer value to stream"}',
        "beta, a longer value to stream",
        True,
        "call_b2",
    ),
    ToolCallRecord("echo", '{"message":"gamma"}', "gamma", True, "call_c3"),
]

ECHO = EchoTool()
SCHEMA: dict[str, Any] = dict(ECHO.parameters)


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    """The SDK agents' tool dispatch: only echo exists."""
    assert name == "echo"
    return ECHO.call(arguments)


@pytest.fixture(autouse=True)
def loopback_without_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture(autouse=True)
def no_thread_left_behind() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not left, f"threads left running: {left}"


Agent = Callable[[ReplayEndpoint, list[str]], list[str]]


def monitored() -> ConversationMonitor:
    return ConversationMonitor(ReplayProvider(SCRIPT), [turn.user_input for turn in SCRIPT])


def replay(agent: Agent) -> tuple[ReplayEndpoint, ConversationMonitor, list[str]]:
    """Run ``agent`` against an endpoint serving SCRIPT, the runner bracketing the turns (the
    agent reports no dispatches: what is recorded is what crossed the wire)."""
    monitor = monitored()
    with ReplayEndpoint(monitor) as endpoint:
        replies: list[str] = []
        conversation: list[str] = []
        for index, scripted in enumerate(SCRIPT):
            monitor.begin_turn(index)
            conversation.append(scripted.user_input)
            replies += agent(endpoint, conversation)[-1:]
            monitor.end_turn(None)
    return endpoint, monitor, replies


def seen(dispatches: tuple[Dispatch, ...]) -> list[tuple[str, str, str, str]]:
    """What every wire shows of each dispatch: the call as handed out, and the result fed back."""
    return [(d.call.id, d.call.name, d.call.arguments, d.result) for d in dispatches]


EXPECTED_SEEN = [(r.id or "", r.name, r.arguments, r.result) for r in EXPECTED]


def test_the_reference_run_records_the_same_calls() -> None:
    record = run_case(Case("sdk", SCRIPT, Expectations(response_contains=("x",))))
    assert list(record.tool_calls) == EXPECTED


# --- an agent on the openai SDK ----------------------------------------------------------------


class OpenAIAgent:
    """Chat completions with tools; streaming by raw chunks, by the stream helper, or not."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.messages: list[dict[str, Any]] = []
        self.tools: Any = [
            {
                "type": "function",
                "function": {"name": "echo", "description": ECHO.description, "parameters": SCHEMA},
            }
        ]

    def __call__(self, endpoint: ReplayEndpoint, conversation: list[str]) -> list[str]:
        import openai

        client = openai.OpenAI(base_url=endpoint.openai_base_url, api_key="dummy", max_retries=0)
        with client:
            self.messages.append({"role": "user", "content": conversation[-1]})
            while True:
                content, tool_calls = self._complete(client)
                self.messages.append(
                    {"role": "assistant", "content": content, "tool_calls": tool_calls}
                    if tool_calls
                    else {"role": "assistant", "content": content}
                )
                if not tool_calls:
                    return [content or ""]
                for call in tool_calls:
                    function = call["function"]
                    result = run_tool(function["name"], json.loads(function["arguments"]))
                    self.messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": result}
                    )

    def _complete(self, client: openai.OpenAI) -> tuple[str | None, list[dict[str, Any]]]:
        request: Any = {"model": "gpt-test", "messages": self.messages, "tools": self.tools}
        if self.how == "plain":
            message = client.chat.completions.create(**request).choices[0].message
            return message.content, [
                c.model_dump(include={"id", "type", "function"}) for c in message.tool_calls or []
            ]
        if self.how == "helper":
            with client.chat.completions.stream(**request) as stream:
                message = stream.get_final_completion().choices[0].message
            return message.content, [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in message.tool_calls or []
            ]
        chunks = client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        )
        text = ""
        calls: dict[int, dict[str, Any]] = {}
        for chunk in chunks:
            if not chunk.choices:
                assert chunk.usage is not None
                continue
            delta = chunk.choices[0].delta
            text += delta.content or ""
            for fragment in delta.tool_calls or []:
                entry = calls.setdefault(
                    fragment.index,
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                entry["id"] = fragment.id or entry["id"]
                if fragment.function is not None:
                    entry["function"]["name"] += fragment.function.name or ""
                    entry["function"]["arguments"] += fragment.function.arguments or ""
        return (text or None), [calls[i] for i in sorted(calls)]


@pytest.mark.parametrize("how", ["plain", "chunks", "helper"])
def test_openai_sdk_tool_loop(how: str) -> None:
    endpoint, monitor, replies = replay(OpenAIAgent(how))
    assert endpoint.error is None
    assert replies == ["Echoed alpha and beta.", "Echoed gamma."]
    evidence = monitor.evidence()
    assert seen(evidence.dispatches) == EXPECTED_SEEN
    # Unreported, over a wire without an error flag: neither is known.
    assert {(d.arguments, d.success) for d in evidence.dispatches} == {(None, None)}
    assert endpoint.unresolved_calls() == []
    assert {r.api for r in endpoint.requests} == {"openai"}
    assert {r.stream for r in endpoint.requests} == {how != "plain"}
    assert {r.model for r in endpoint.requests} == {"gpt-test"}
    assert endpoint.requests[0].tools[0].name == "echo"


def test_openai_sdk_sees_a_run_error_once_and_does_not_retry() -> None:
    import openai

    monitor = monitored()
    with ReplayEndpoint(monitor) as endpoint:
        monitor.begin_turn(0)
        # SDK retries left at their default: the endpoint's answer tells them not to.
        client = openai.OpenAI(base_url=endpoint.openai_base_url, api_key="dummy")
        with client:
            user = {"role": "user", "content": SCRIPT[0].user_input}
            client.chat.completions.create(model="m", messages=[user], tools=OPENAI_TOOLS)
            with pytest.raises(openai.InternalServerError, match='"call_a1" \\(echo\\)'):
                client.chat.completions.create(
                    model="m",
                    messages=[user, {"role": "assistant", "content": "ignored"}],
                    tools=OPENAI_TOOLS,
                )
    assert len(endpoint.requests) == 2
    assert endpoint.error is not None
    assert "call_b2" in endpoint.error


class OverTheWire:
    """An SDK agent run in process by the runner: it talks to the case's monitor through its
    own replay endpoint and reports no dispatches (like a command agent whose reply lines carry
    no "tool_calls")."""

    reports_dispatches = False
    runs_own_tools = True

    def __init__(self, context: AgentContext, agent: Agent) -> None:
        assert isinstance(context.provider, ConversationMonitor)
        self.agent = agent
        self.conversation: list[str] = []
        self.endpoint = ReplayEndpoint(context.provider)
        self.endpoint.start()

    def respond(self, user_input: str) -> str:
        self.conversation.append(user_input)
        return self.agent(self.endpoint, self.conversation)[-1]

    def close(self) -> None:
        self.endpoint.close()


def graded_over_the_wire(
    agent: Agent, expects: Expectations
) -> tuple[RunRecord, tuple[GradeResult, ...]]:
    record = run_case(
        Case("sdk", SCRIPT, expects), agent_factory=lambda context: OverTheWire(context, agent)
    )
    assert record.error is None, record.error
    assert [(c.id, c.name, c.result) for c in record.tool_calls] == [
        (r.id, r.name, r.result) for r in EXPECTED
    ]
    return record, grade(expects, record)


@pytest.mark.parametrize("expected", [True, False])
def test_openai_sdk_without_reports_gives_no_evidence_of_success(expected: bool) -> None:
    expects = Expectations(exact_tool_calls=3, all_tools_succeeded=expected)
    record, (counted, succeeded) = graded_over_the_wire(OpenAIAgent("plain"), expects)
    assert record.unobserved == ("arguments", "success")
    assert counted.passed
    # Every call did succeed, but nothing the agent sent says so: the check fails either way.
    assert not succeeded.passed
    assert succeeded.detail == NO_EVIDENCE["success"]


# --- an agent on the openai SDK's Responses API ----------------------------------------------

RESPONSES_TOOLS: Any = [
    {"type": "function", "name": "echo", "description": ECHO.description, "parameters": SCHEMA}
]


class ResponsesAgent:
    """A tool loop on ``client.responses``: the conversation kept as input items (the SDK's
    output items fed back as they came), or, with ``previous``, only the new items sent along
    with the id of the response they continue."""

    def __init__(self, how: str, *, previous: bool = False) -> None:
        self.how = how
        self.previous = previous
        self.items: list[Any] = []
        self.last_id: str | None = None

    def __call__(self, endpoint: ReplayEndpoint, conversation: list[str]) -> list[str]:
        import openai

        client = openai.OpenAI(base_url=endpoint.openai_base_url, api_key="dummy", max_retries=0)
        with client:
            new: list[Any] = [{"role": "user", "content": conversation[-1]}]
            while True:
                response = self._create(client, new)
                self.items += new
                output = [item.model_dump(exclude_none=True) for item in response.output]
                self.items += output
                self.last_id = response.id
                calls = [item for item in response.output if item.type == "function_call"]
                if not calls:
                    return [response.output_text]
                new = [
                    {
                        "type": "function_call_output",
                        "call_id": call.call_id,
                        "output": run_tool(call.name, json.loads(call.arguments)),
                    }
                    for call in calls
                ]

    def _create(self, client: openai.OpenAI, new: list[Any]) -> Response:
        request: dict[str, Any] = {
            "model": "gpt-test",
            "instructions": "You echo.",
            "tools": RESPONSES_TOOLS,
        }
        if self.previous and self.last_id is not None:
            request.update(input=new, previous_response_id=self.last_id)
        else:
            request["input"] = self.items + new
        if self.how == "plain":
            return client.responses.create(**request)
        if self.how == "helper":
            with client.responses.stream(**request) as stream:
                return stream.get_final_response()
        final: Response | None = None
        text, arguments = "", ""
        numbers: list[int] = []
        for event in client.responses.create(**request, stream=True):
            numbers.append(event.sequence_number)
            if event.type == "response.output_text.delta":
                text += event.delta
            elif event.type == "response.function_call_arguments.delta":
                arguments += event.delta
            elif event.type == "response.completed":
                final = event.response
        assert numbers == list(range(len(numbers)))
        assert final is not None and final.status == "completed"
        assert text == final.output_text
        joined = "".join(i.arguments for i in final.output if i.type == "function_call")
        assert arguments == joined
        return final


@pytest.mark.parametrize("previous", [False, True], ids=["full-history", "previous-response-id"])
@pytest.mark.parametrize("how", ["plain", "events", "helper"])
def test_openai_sdk_responses_tool_loop(how: str, previous: bool) -> None:
    endpoint, monitor, replies = replay(ResponsesAgent(how, previous=previous))
    assert endpoint.error is None, endpoint.error
    assert replies == ["Echoed alpha and beta.", "Echoed gamma."]
    evidence = monitor.evidence()
    assert seen(evidence.dispatches) == EXPECTED_SEEN
    # No error flag on a function_call_output, and nothing reported: neither is known.
    assert {(d.arguments, d.success) for d in evidence.dispatches} == {(None, None)}
    assert endpoint.unresolved_calls() == []
    assert {r.api for r in endpoint.requests} == {"openai-responses"}
    assert {r.stream for r in endpoint.requests} == {how != "plain"}
    assert {r.model for r in endpoint.requests} == {"gpt-test"}
    # What the monitor checked is the whole conversation, however little the request carried.
    last = endpoint.requests[-1].messages
    assert last[0].content == "You echo."
    assert [m.role for m in last[1:]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]


def test_openai_sdk_responses_usage_and_ids() -> None:
    import openai

    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        client = openai.OpenAI(base_url=endpoint.openai_base_url, api_key="d", max_retries=0)
        with client:
            response = client.responses.create(
                model="m", input=SCRIPT[0].user_input, tools=RESPONSES_TOOLS
            )
    assert response.status == "completed"
    assert [(i.call_id, i.name) for i in response.output if i.type == "function_call"] == [
        ("call_a1", "echo"),
        ("call_b2", "echo"),
    ]
    assert response.usage is not None
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (20, 9, 29)


def test_openai_sdk_responses_without_reports_gives_no_evidence_of_success() -> None:
    expects = Expectations(exact_tool_calls=3, all_tools_succeeded=True)
    record, (counted, succeeded) = graded_over_the_wire(ResponsesAgent("plain"), expects)
    assert record.unobserved == ("arguments", "success")
    assert counted.passed
    assert not succeeded.passed
    assert succeeded.detail == NO_EVIDENCE["success"]
    assert "Responses" in NO_EVIDENCE["success"]


# --- an agent on the anthropic SDK -------------------------------------------------------------


class AnthropicAgent:
    """Messages with tools; streaming by the stream helper, by raw events, or not. A tool
    result that says "gamma" is reported as an error, to see is_error cross the wire."""

    def __init__(self, how: str, failing: str | None = None) -> None:
        self.how = how
        self.failing = failing
        self.messages: list[dict[str, Any]] = []
        self.tools: Any = [
            {"name": "echo", "description": ECHO.description, "input_schema": SCHEMA}
        ]

    def __call__(self, endpoint: ReplayEndpoint, conversation: list[str]) -> list[str]:
        import anthropic

        client = anthropic.Anthropic(base_url=endpoint.base_url, api_key="dummy", max_retries=0)
        with client:
            self.messages.append({"role": "user", "content": conversation[-1]})
            while True:
                blocks = self._complete(client)
                self.messages.append({"role": "assistant", "content": blocks})
                uses = [b for b in blocks if b["type"] == "tool_use"]
                if not uses:
                    return ["".join(b["text"] for b in blocks if b["type"] == "text")]
                results = []
                for use in uses:
                    output = run_tool(use["name"], use["input"])
                    results.append(
                        {
                            "type": "tool_result",
                            "tool_use_id": use["id"],
                            "content": [{"type": "text", "text": output}],
                            "is_error": output == self.failing,
                        }
                    )
                self.messages.append({"role": "user", "content": results})

    def _complete(self, client: anthropic.Anthropic) -> list[dict[str, Any]]:
        request: Any = {
            "model": "claude-test",
            "max_tokens": 256,
            "system": "You echo.",
            "messages": self.messages,
            "tools": self.tools,
        }
        if self.how == "plain":
            message = client.messages.create(**request)
        elif self.how == "helper":
            with client.messages.stream(**request) as stream:
                message = stream.get_final_message()
        else:
            blocks: dict[int, dict[str, Any]] = {}
            partial: dict[int, str] = {}
            for event in client.messages.create(**request, stream=True):
                if event.type == "content_block_start":
                    blocks[event.index] = event.content_block.model_dump(
                        include={"type", "id", "name", "input", "text"}
                    )
                elif event.type == "content_block_delta":
                    if event.delta.type == "text_delta":
                        blocks[event.index]["text"] += event.delta.text
                    elif event.delta.type == "input_json_delta":
                        partial[event.index] = partial.get(event.index, "") + (
                            event.delta.partial_json
                        )
                elif event.type == "content_block_stop" and event.index in partial:
                    blocks[event.index]["input"] = json.loads(partial[event.index])
            return [blocks[i] for i in sorted(blocks)]
        return [
            b.model_dump(include={"type", "id", "name", "input", "text"}) for b in message.content
        ]


@pytest.mark.parametrize("how", ["plain", "events", "helper"])
def test_anthropic_sdk_tool_loop(how: str) -> None:
    endpoint, monitor, replies = replay(AnthropicAgent(how))
    assert endpoint.error is None
    assert replies == ["Echoed alpha and beta.", "Echoed gamma."]
    evidence = monitor.evidence()
    assert seen(evidence.dispatches) == EXPECTED_SEEN
    # Unreported arguments are unknown; is_error (false) says each call succeeded.
    assert {(d.arguments, d.success) for d in evidence.dispatches} == {(None, True)}
    assert endpoint.unresolved_calls() == []
    assert {r.api for r in endpoint.requests} == {"anthropic"}
    assert {r.stream for r in endpoint.requests} == {how != "plain"}
    assert endpoint.requests[0].messages[0].content == "You echo."


@pytest.mark.parametrize("how", ["plain", "helper"])
def test_anthropic_sdk_is_error_records_a_failed_call(how: str) -> None:
    endpoint, monitor, _ = replay(AnthropicAgent(how, failing="gamma"))
    assert endpoint.error is None
    assert [d.success for d in monitor.evidence().dispatches] == [True, True, False]


@pytest.mark.parametrize(("failing", "succeeded"), [(None, True), ("gamma", False)])
def test_anthropic_sdk_is_error_is_the_evidence_all_tools_succeeded_grades(
    failing: str | None, succeeded: bool
) -> None:
    expects = Expectations(all_tools_succeeded=True)
    record, (graded,) = graded_over_the_wire(AnthropicAgent("plain", failing), expects)
    assert record.unobserved == ("arguments",)
    assert [c.success for c in record.tool_calls] == [True, True, succeeded]
    assert graded.passed is succeeded
    assert graded.detail != NO_EVIDENCE["success"]


def test_anthropic_sdk_stream_reports_usage() -> None:
    import anthropic

    user: Any = {"role": "user", "content": SCRIPT[0].user_input}
    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        client = anthropic.Anthropic(base_url=endpoint.base_url, api_key="d", max_retries=0)
        with (
            client,
            client.messages.stream(
                model="m", max_tokens=8, messages=[user], tools=ANTHROPIC_TOOLS
            ) as stream,
        ):
            message = stream.get_final_message()
    assert message.stop_reason == "tool_use"
    assert [b.id for b in message.content if b.type == "tool_use"] == ["call_a1", "call_b2"]
    assert (message.usage.input_tokens, message.usage.output_tokens) == (20, 9)


def test_anthropic_sdk_sees_a_missing_result_as_an_error_naming_it() -> None:
    import anthropic

    with ReplayEndpoint(monitored(), infer_turns=True) as endpoint:
        client = anthropic.Anthropic(base_url=endpoint.base_url, api_key="dummy")
        with client:
            user = {"role": "user", "content": SCRIPT[0].user_input}
            first = client.messages.create(
                model="m", max_tokens=8, messages=[user], tools=ANTHROPIC_TOOLS
            )
            uses: Any = [
                b.model_dump(include={"type", "id", "name", "input"}) for b in first.content
            ]
            result = {"type": "tool_result", "tool_use_id": "call_a1", "content": "alpha"}
            history: Any = [
                user,
                {"role": "assistant", "content": uses},
                {"role": "user", "content": [result]},
            ]
            with pytest.raises(anthropic.InternalServerError, match='"call_b2" \\(echo\\)'):
                client.messages.create(
                    model="m", max_tokens=8, messages=history, tools=ANTHROPIC_TOOLS
                )
    assert len(endpoint.requests) == 2  # not retried
