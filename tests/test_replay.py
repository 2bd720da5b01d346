"""Replay (SPEC §5): the replay provider's per-turn script, the reference agent loop, dispatch
outcomes, the built-in echo tool, and what the run record keeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evalrunner.agents.reference import AgentContext, ReferenceAgent
from evalrunner.boundary.provider import ReplayProvider
from evalrunner.boundary.tools import EchoTool, Tool, builtin_tools
from evalrunner.fixture.admit import admit, argument_text
from evalrunner.fixture.load import parse_document
from evalrunner.model import (
    Case,
    Expectations,
    JSONValue,
    Message,
    ModelRequest,
    ModelResponse,
    RunError,
    RunRecord,
    SuiteReport,
    TextResponse,
    ToolCall,
    ToolCallsResponse,
    Turn,
)
from evalrunner.replay import run_case
from evalrunner.report import render_json, render_table, write_atomic
from evalrunner.session import evaluate_case, run_suite

# --- building cases -----------------------------------------------------------------------------

FALSIFIABLE = Expectations(response_contains=("never-in-any-reply",))


def text(content: str, input_tokens: int = 0, output_tokens: int = 0) -> TextResponse:
    return TextResponse(content, input_tokens, output_tokens)


def calls(
    *tool_calls: ToolCall, input_tokens: int = 0, output_tokens: int = 0
) -> ToolCallsResponse:
    return ToolCallsResponse(tuple(tool_calls), input_tokens, output_tokens)


def echo_call(call_id: str, message: object) -> ToolCall:
    return ToolCall(call_id, "echo", argument_text({"message": message}))


def turn(user_input: str, *responses: ModelResponse) -> Turn:
    return Turn(user_input, tuple(responses))


def make_case(*turns: Turn, name: str = "case") -> Case:
    return Case(name=name, turns=tuple(turns), expects=FALSIFIABLE)


def run_one_call(call: ToolCall, **kwargs: Any) -> RunRecord:
    """Run a one-turn case that makes ``call`` and then replies; the run must not error."""
    record = run_case(make_case(turn("go", calls(call), text("done"))), **kwargs)
    assert record.error is None
    assert len(record.tool_calls) == 1
    return record


def admitted(document: dict[str, Any], name: str = "fixture.json") -> Case:
    raw = json.dumps(document, ensure_ascii=False).encode("utf-8")
    parsed = parse_document(raw, "json", Path(name))
    assert not isinstance(parsed, list), parsed
    case = admit(parsed)
    assert isinstance(case, Case), case
    return case


# --- test-only tools and agents -----------------------------------------------------------------


class RaisingTool:
    name = "boom"
    description = "Always raises."
    parameters: ClassVar[dict[str, JSONValue]] = {"type": "object"}

    def call(self, arguments: dict[str, Any]) -> str:
        raise ValueError("disk on fire")


class SilentTool:
    name = "silent"
    description = "Returns empty text."
    parameters: ClassVar[dict[str, JSONValue]] = {"type": "object"}

    def call(self, arguments: dict[str, Any]) -> str:
        return ""


def with_tools(*extra: Tool) -> dict[str, Tool]:
    tools = builtin_tools()
    for tool in extra:
        tools[tool.name] = tool
    return tools


# --- the replay provider: one FIFO per turn -----------------------------------------------------


def test_over_specified_turn_is_a_run_error() -> None:
    case = make_case(turn("hi", text("first"), text("second"), text("third")))
    record = run_case(case)
    assert record.error == "turn 1 scripted 2 response(s) the agent never requested"


def test_over_specified_later_turn_names_that_turn() -> None:
    case = make_case(
        turn("one", text("a")),
        turn("two", text("b"), text("left over")),
    )
    record = run_case(case)
    assert record.error == "turn 2 scripted 1 response(s) the agent never requested"
    # turn 1 completed normally before the error
    assert record.llm_calls == 2


def test_under_specified_turn_is_a_run_error() -> None:
    # The model asks for a tool; the agent needs another response but the script has none.
    case = make_case(turn("hi", calls(echo_call("c1", "x"))))
    record = run_case(case)
    assert record.error == "turn 1 requested more model responses than the fixture scripts for it"
    # the dispatch happened before the script ran out: its result, fed back in the request
    # the script could not answer, is in the history the run kept
    assert [(m.tool_call_id, m.content) for m in record.history if m.role == "tool"] == [
        ("c1", "x")
    ]
    assert record.llm_calls == 1


def test_under_specified_later_turn_names_that_turn() -> None:
    case = make_case(
        turn("one", text("a")),
        turn("two", calls(echo_call("c1", "x"))),
    )
    record = run_case(case)
    assert record.error == "turn 2 requested more model responses than the fixture scripts for it"


def test_responses_never_bleed_into_the_next_turn() -> None:
    # Turn 1 is short by one response; turn 2 has a spare one. A shared queue would let turn 1
    # take turn 2's reply; per-turn queues make it an error in turn 1.
    case = make_case(
        turn("one", calls(echo_call("c1", "x"))),
        turn("two", text("reply two"), text("spare")),
    )
    record = run_case(case)
    assert record.error == "turn 1 requested more model responses than the fixture scripts for it"
    assert record.final_response == ""
    assert all(m.content not in {"reply two", "spare"} for m in record.history)


def test_responses_never_bleed_into_the_previous_turn() -> None:
    # Turn 1's leftover is not carried into turn 2: it is an error at the end of turn 1.
    case = make_case(
        turn("one", text("reply one"), text("meant for nobody")),
        turn("two", text("reply two")),
    )
    record = run_case(case)
    assert record.error == "turn 1 scripted 1 response(s) the agent never requested"
    assert "reply two" not in [m.content for m in record.history]


def test_provider_serves_each_turn_from_its_own_queue() -> None:
    provider = ReplayProvider([turn("one", text("1a"), text("1b")), turn("two", text("2a"))])
    request = ModelRequest(())
    provider.begin_turn(1)
    assert provider.complete(request) == text("2a")
    with pytest.raises(RunError, match="turn 2 requested more model responses"):
        provider.complete(request)
    provider.begin_turn(0)
    assert provider.complete(request) == text("1a")
    with pytest.raises(RunError, match="turn 1 scripted 1 response"):
        provider.end_turn()


def test_provider_refuses_a_request_outside_any_turn() -> None:
    provider = ReplayProvider([turn("one", text("a"))])
    with pytest.raises(RunError):
        provider.complete(ModelRequest(()))


def test_exact_script_has_no_error() -> None:
    case = make_case(turn("hi", calls(echo_call("c1", "x")), text("done")))
    record = run_case(case)
    assert record.error is None
    assert record.final_response == "done"


# --- multi-turn order ---------------------------------------------------------------------------


def test_multi_turn_history_order_and_final_response() -> None:
    first = echo_call("c1", "alpha")
    second = echo_call("c2", "beta")
    case = make_case(
        turn("turn one", calls(first), text("reply one")),
        turn("turn two", calls(second), text("reply two")),
        turn("turn three", text("reply three")),
    )
    record = run_case(case)
    assert record.error is None
    assert record.final_response == "reply three"
    assert record.history == (
        Message("user", "turn one"),
        Message("assistant", "", tool_calls=(first,)),
        Message("tool", "alpha", tool_call_id="c1", is_error=False),
        Message("assistant", "reply one"),
        Message("user", "turn two"),
        Message("assistant", "", tool_calls=(second,)),
        Message("tool", "beta", tool_call_id="c2", is_error=False),
        Message("assistant", "reply two"),
        Message("user", "turn three"),
        Message("assistant", "reply three"),
    )
    assert [(c.id, c.result) for c in record.tool_calls] == [("c1", "alpha"), ("c2", "beta")]


def test_final_response_is_last_turn_reply_not_a_concatenation() -> None:
    case = make_case(turn("a", text("first reply")), turn("b", text("second reply")))
    record = run_case(case)
    assert record.final_response == "second reply"


def test_several_calls_in_one_response_dispatch_in_order() -> None:
    batch = [echo_call(f"c{i}", f"m{i}") for i in range(4)]
    record = run_case(make_case(turn("go", calls(*batch), text("ok"))))
    assert record.error is None
    assert [c.id for c in record.tool_calls] == ["c0", "c1", "c2", "c3"]
    assert [c.result for c in record.tool_calls] == ["m0", "m1", "m2", "m3"]
    tool_messages = [m for m in record.history if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in tool_messages] == [
        ("c0", "m0"),
        ("c1", "m1"),
        ("c2", "m2"),
        ("c3", "m3"),
    ]


# --- dispatch outcomes (SPEC §5 table) ----------------------------------------------------------


def test_unknown_tool() -> None:
    record = run_one_call(ToolCall("c1", "web_fetch", '{"url":"https://example.com"}'))
    call = record.tool_calls[0]
    assert call.name == "web_fetch"
    assert call.result == "Unknown tool: web_fetch"
    assert call.success is False
    assert record.all_tools_succeeded is False
    # the model is shown exactly the recorded result, flagged as an error
    error = Message("tool", "Unknown tool: web_fetch", tool_call_id="c1", is_error=True)
    assert error in record.history


def test_tool_lookup_is_case_sensitive() -> None:
    record = run_one_call(ToolCall("c1", "Echo", '{"message":"x"}'))
    assert record.tool_calls[0].result == "Unknown tool: Echo"
    assert record.tool_calls[0].success is False


def test_unknown_tool_does_not_stop_the_batch() -> None:
    case = make_case(
        turn("go", calls(ToolCall("c1", "nope", "{}"), echo_call("c2", "after")), text("ok"))
    )
    record = run_case(case)
    assert record.error is None
    assert [(c.name, c.result, c.success) for c in record.tool_calls] == [
        ("nope", "Unknown tool: nope", False),
        ("echo", "after", True),
    ]


@pytest.mark.parametrize(
    "arguments",
    ['{"message": "unterminated', "", "{message: 1}", "{'message': 'x'}", "not json", "{}}"],
)
def test_malformed_arguments(arguments: str) -> None:
    record = run_one_call(ToolCall("c1", "echo", arguments))
    call = record.tool_calls[0]
    assert call.result.startswith("Invalid arguments for echo: ")
    assert len(call.result) > len("Invalid arguments for echo: ")
    assert call.success is False
    # recorded arguments are exactly the text the agent received
    assert call.arguments == arguments


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [
        ('["message", "x"]', "array"),
        ('"message"', "string"),
        ("42", "number"),
        ("4.5", "number"),
        ("true", "boolean"),
        ("null", "null"),
    ],
)
def test_non_object_json_arguments(arguments: str, kind: str) -> None:
    record = run_one_call(ToolCall("c1", "echo", arguments))
    call = record.tool_calls[0]
    assert call.result.startswith("Invalid arguments for echo: ")
    assert "object" in call.result
    assert kind in call.result
    assert call.success is False


@pytest.mark.parametrize(
    "arguments",
    ['{"message": NaN}', '{"message": Infinity}', '{"message": -Infinity}', "NaN"],
)
def test_non_finite_constants_are_not_json(arguments: str) -> None:
    # Python's json accepts NaN/Infinity; JSON (and a strict parser like serde_json) does not.
    record = run_one_call(ToolCall("c1", "echo", arguments))
    call = record.tool_calls[0]
    assert call.result.startswith("Invalid arguments for echo: ")
    assert "not valid JSON" in call.result
    assert call.success is False


@pytest.mark.parametrize(
    "arguments",
    [
        '{"message": "\\ud800"}',
        '{"message": "x\\udfffy"}',
        '{"\\ud800": "x"}',
        '{"a": ["\\ud83d"]}',
    ],
)
def test_lone_surrogate_escapes_are_invalid_arguments(arguments: str) -> None:
    # A lone surrogate is not text: echoing it would put an unencodable string into the record
    # and crash the report (UnicodeEncodeError) instead of failing one case.
    record = run_one_call(ToolCall("c1", "echo", arguments))
    call = record.tool_calls[0]
    assert call.result.startswith("Invalid arguments for echo: ")
    assert call.success is False
    call.result.encode("utf-8")  # the recorded result is always encodable text


def test_surrogate_pair_escape_is_valid() -> None:
    record = run_one_call(ToolCall("c1", "echo", '{"message": "\\ud83d\\ude80"}'))
    assert record.tool_calls[0].result == "🚀"
    assert record.tool_calls[0].success is True


def test_lone_surrogate_in_string_arguments_does_not_crash_the_report(tmp_path: Path) -> None:
    document = _one_call_fixture('{"message": "\\ud800"}')
    document["expects"] = {"tool_results_contain": [{"tool": "echo", "needle": "zzz"}]}
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "a.json").write_text(json.dumps(document), encoding="utf-8")
    outcome = run_suite(suite)
    assert isinstance(outcome, SuiteReport)
    assert outcome.failed == 1
    render_table(outcome).encode("utf-8")
    write_atomic(tmp_path / "report.json", render_json(outcome))


def test_deeply_nested_arguments_are_invalid_not_a_crash() -> None:
    arguments = "[" * 100_000 + "]" * 100_000
    record = run_one_call(ToolCall("c1", "echo", arguments))
    assert record.tool_calls[0].result.startswith("Invalid arguments for echo: ")
    assert record.tool_calls[0].success is False


def test_unknown_tool_wins_over_malformed_arguments() -> None:
    # An unknown tool is reported as unknown even when its arguments are malformed.
    record = run_one_call(ToolCall("c1", "nope", "{bad"))
    assert record.tool_calls[0].result == "Unknown tool: nope"


def test_tool_that_raises() -> None:
    record = run_one_call(ToolCall("c1", "boom", "{}"), tools=with_tools(RaisingTool()))
    call = record.tool_calls[0]
    assert call.result == "Error: disk on fire"
    assert call.success is False
    assert record.error is None  # a raising tool is a failed call, not a run error


def test_tool_returning_empty_text() -> None:
    record = run_one_call(ToolCall("c1", "silent", "{}"), tools=with_tools(SilentTool()))
    assert record.tool_calls[0].result == "(no output)"
    assert record.tool_calls[0].success is True
    assert Message("tool", "(no output)", tool_call_id="c1", is_error=False) in record.history


def test_echo_of_empty_message_is_no_output() -> None:
    record = run_one_call(echo_call("c1", ""))
    assert record.tool_calls[0].result == "(no output)"
    assert record.tool_calls[0].success is True


@pytest.mark.parametrize("message", [42, 0, True, False, None, ["x"], {"text": "x"}, 1.5])
def test_echo_of_non_string_message_is_empty(message: object) -> None:
    record = run_one_call(echo_call("c1", message))
    assert record.tool_calls[0].result == "(empty)"
    assert record.tool_calls[0].success is True


def test_echo_without_message_is_empty() -> None:
    record = run_one_call(ToolCall("c1", "echo", '{"text":"hello_user_1"}'))
    assert record.tool_calls[0].result == "(empty)"
    assert record.tool_calls[0].success is True


def test_echo_tool_directly() -> None:
    tool = EchoTool()
    assert tool.call({"message": "hi"}) == "hi"
    assert tool.call({"message": 42}) == "(empty)"
    assert tool.call({}) == "(empty)"
    assert tool.name == "echo"


def test_custom_tools_replace_the_builtins() -> None:
    # tools= is the whole tool set: without echo in it, echo is unknown.
    record = run_one_call(echo_call("c1", "x"), tools={"silent": SilentTool()})
    assert record.tool_calls[0].result == "Unknown tool: echo"


# --- iteration cap ------------------------------------------------------------------------------


def _looping_case(tool_rounds: int) -> Case:
    responses: list[ModelResponse] = [
        calls(echo_call(f"c{i}", f"m{i}")) for i in range(tool_rounds)
    ]
    responses.append(text("done"))
    return make_case(turn("loop", *responses))


def test_exactly_the_iteration_cap_is_fine() -> None:
    record = run_case(_looping_case(2), max_tool_iterations=2)
    assert record.error is None
    assert record.final_response == "done"
    assert len(record.tool_calls) == 2


def test_one_over_the_iteration_cap_is_a_run_error() -> None:
    record = run_case(_looping_case(3), max_tool_iterations=2)
    assert record.error is not None
    assert "max_tool_iterations" in record.error
    assert "2" in record.error
    # the third tool-calls response is never dispatched: only two results were fed back
    assert [m.tool_call_id for m in record.history if m.role == "tool"] == ["c0", "c1"]
    assert record.llm_calls == 3


def test_default_iteration_cap_is_ten() -> None:
    assert run_case(_looping_case(10)).error is None
    error = run_case(_looping_case(11)).error
    assert error is not None
    assert "max_tool_iterations" in error


def test_iteration_cap_is_per_turn() -> None:
    case = make_case(
        turn("one", calls(echo_call("a1", "x")), calls(echo_call("a2", "x")), text("r1")),
        turn("two", calls(echo_call("b1", "x")), calls(echo_call("b2", "x")), text("r2")),
    )
    record = run_case(case, max_tool_iterations=2)
    assert record.error is None
    assert len(record.tool_calls) == 4


# --- agent failures -----------------------------------------------------------------------------


def test_agent_factory_that_raises_is_a_run_error() -> None:
    def factory(context: AgentContext) -> ReferenceAgent:
        raise RuntimeError("no agent today")

    record = run_case(make_case(turn("hi", text("a"))), agent_factory=factory)
    assert record.error is not None
    assert "no agent today" in record.error
    assert "RuntimeError" in record.error


def test_agent_that_raises_is_a_run_error() -> None:
    class Crashing:
        def __init__(self, context: AgentContext) -> None:
            pass

        def respond(self, user_input: str) -> str:
            raise KeyError("lost state")

    record = run_case(make_case(turn("hi", text("a"))), agent_factory=Crashing)
    assert record.error is not None
    assert "lost state" in record.error
    assert "KeyError" in record.error


def test_agent_replying_with_non_text_is_a_run_error() -> None:
    class Wrong:
        def __init__(self, context: AgentContext) -> None:
            self.context = context

        def respond(self, user_input: str) -> Any:
            self.context.provider.complete(ModelRequest((Message("user", user_input),)))
            return 42

    record = run_case(make_case(turn("hi", text("a"))), agent_factory=Wrong)
    assert record.error is not None
    assert "int" in record.error


def _write_fixture(directory: Path, file_name: str, name: str, user_input: str) -> None:
    document = {
        "name": name,
        "turns": [
            {
                "user_input": user_input,
                "steps": [{"response": {"type": "text", "content": f"reply to {name}"}}],
            }
        ],
        "expects": {"response_contains": [f"reply to {name}"]},
    }
    (directory / file_name).write_text(json.dumps(document), encoding="utf-8")


def _suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    suite.mkdir()
    _write_fixture(suite, "a_first.json", "first", "please crash")
    _write_fixture(suite, "b_second.json", "second", "hello")
    _write_fixture(suite, "c_third.json", "third", "hello again")
    return suite


def test_agent_that_raises_fails_only_its_case(tmp_path: Path) -> None:
    class CrashOnRequest(ReferenceAgent):
        def respond(self, user_input: str) -> str:
            if "crash" in user_input:
                raise RuntimeError("agent blew up")
            return super().respond(user_input)

    outcome = run_suite(_suite(tmp_path), agent_factory=CrashOnRequest)
    assert isinstance(outcome, SuiteReport)
    by_name = {c.name: c for c in outcome.cases}
    assert list(by_name) == ["first", "second", "third"]
    assert by_name["first"].error is not None
    assert "agent blew up" in by_name["first"].error
    assert by_name["first"].grades == ()
    assert by_name["first"].passed is False
    assert by_name["second"].passed and by_name["third"].passed
    assert (outcome.passed, outcome.failed) == (2, 1)


def test_agent_factory_that_raises_fails_only_its_case(tmp_path: Path) -> None:
    built: list[AgentContext] = []

    def flaky_factory(context: AgentContext) -> ReferenceAgent:
        built.append(context)
        if len(built) == 2:
            raise RuntimeError("factory refused")
        return ReferenceAgent(context)

    outcome = run_suite(_suite(tmp_path), agent_factory=flaky_factory)
    assert isinstance(outcome, SuiteReport)
    assert len(built) == 3  # one fresh agent per case, and the third case still ran
    errors = [c.error for c in outcome.cases]
    assert errors[0] is None and errors[2] is None
    assert errors[1] is not None and "factory refused" in errors[1]
    assert [c.passed for c in outcome.cases] == [True, False, True]


def test_script_errors_fail_only_their_case(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    leftover = {
        "name": "leftover",
        "turns": [
            {
                "user_input": "hi",
                "steps": [
                    {"response": {"type": "text", "content": "one"}},
                    {"response": {"type": "text", "content": "two"}},
                ],
            }
        ],
        "expects": {"response_contains": ["one"]},
    }
    (suite / "b_leftover.json").write_text(json.dumps(leftover), encoding="utf-8")
    outcome = run_suite(suite)
    assert isinstance(outcome, SuiteReport)
    by_name = {c.name: c for c in outcome.cases}
    assert by_name["leftover"].error == "turn 1 scripted 1 response(s) the agent never requested"
    assert [c.passed for c in outcome.cases] == [True, False, True, True]


# --- argument text ------------------------------------------------------------------------------


def _one_call_fixture(arguments: object) -> dict[str, Any]:
    return {
        "name": "args",
        "turns": [
            {
                "user_input": "go",
                "steps": [
                    {
                        "response": {
                            "type": "tool_calls",
                            "tool_calls": [{"id": "c1", "name": "echo", "arguments": arguments}],
                        }
                    },
                    {"response": {"type": "text", "content": "done"}},
                ],
            }
        ],
        "expects": {"tools_used": ["echo"]},
    }


def test_object_arguments_reach_the_agent_as_compact_sorted_json() -> None:
    arguments = {"zeta": [1, {"y": 2, "x": None}], "message": "Grüße — 東京 🚀", "alpha": False}
    case = admitted(_one_call_fixture(arguments))
    expected = '{"alpha":false,"message":"Grüße — 東京 🚀","zeta":[1,{"x":null,"y":2}]}'
    scripted = case.turns[0].responses[0]
    assert isinstance(scripted, ToolCallsResponse)
    assert scripted.tool_calls[0].arguments == expected
    record = run_case(case)
    assert record.error is None
    assert record.tool_calls[0].arguments == expected
    assert "\\u" not in record.tool_calls[0].arguments
    assert record.tool_calls[0].result == "Grüße — 東京 🚀"
    assistant = record.history[1]
    assert assistant.tool_calls[0].arguments == expected


def test_object_arguments_are_the_same_from_every_format() -> None:
    yaml_text = (
        "name: args\n"
        "turns:\n"
        "  - user_input: go\n"
        "    steps:\n"
        "      - response:\n"
        "          type: tool_calls\n"
        "          tool_calls:\n"
        "            - id: c1\n"
        "              name: echo\n"
        "              arguments: {message: 'Zürich', b: 1, a: 2}\n"
        "      - response: {type: text, content: done}\n"
        "expects:\n"
        "  tools_used: [echo]\n"
    )
    parsed = parse_document(yaml_text.encode("utf-8"), "yaml", Path("args.yaml"))
    assert not isinstance(parsed, list), parsed
    case = admit(parsed)
    assert isinstance(case, Case), case
    record = run_case(case)
    assert record.tool_calls[0].arguments == '{"a":2,"b":1,"message":"Zürich"}'


@pytest.mark.parametrize(
    "raw",
    [
        '{ "message" : "spaced_9c" }',
        '{"message":"\\u00fc"}',
        '{"b": 1, "a": 2, "message": "x"}',
        '{"message": "unterminated',
        "",
        "   ",
    ],
)
def test_string_arguments_reach_the_agent_verbatim(raw: str) -> None:
    seen: list[str] = []

    class Spy(ReferenceAgent):
        def __init__(self, context: AgentContext) -> None:
            super().__init__(context)
            provider = context.provider
            original = provider.complete

            def complete(request: ModelRequest) -> ModelResponse:
                response = original(request)
                if isinstance(response, ToolCallsResponse):
                    seen.extend(c.arguments for c in response.tool_calls)
                return response

            provider.complete = complete  # type: ignore[method-assign]

    case = admitted(_one_call_fixture(raw))
    record = run_case(case, agent_factory=Spy)
    assert seen == [raw]
    assert record.tool_calls[0].arguments == raw


# --- usage and requests -------------------------------------------------------------------------


def test_tokens_and_llm_calls_are_counted() -> None:
    case = make_case(
        turn(
            "one",
            calls(echo_call("c1", "x"), input_tokens=10, output_tokens=3),
            text("r1", input_tokens=20, output_tokens=4),
        ),
        turn("two", text("r2", input_tokens=30, output_tokens=5)),
    )
    record = run_case(case)
    assert record.error is None
    assert record.llm_calls == 3
    assert record.input_tokens == 60
    assert record.output_tokens == 12
    assert record.duration_ms >= 0


def test_counts_stop_where_a_run_error_stops() -> None:
    case = make_case(
        turn("one", calls(echo_call("c1", "x"), input_tokens=7, output_tokens=2)),
        turn("two", text("never served", input_tokens=100, output_tokens=100)),
    )
    record = run_case(case)
    assert record.error is not None
    assert record.llm_calls == 1
    assert (record.input_tokens, record.output_tokens) == (7, 2)


def test_requests_are_kept() -> None:
    call = echo_call("c1", "x")
    case = make_case(turn("one", calls(call), text("r1")), turn("two", text("r2")))
    record = run_case(case)
    assert record.error is None
    assert len(record.requests) == record.llm_calls == 3
    first, second, third = record.requests
    assert first.messages == (Message("user", "one"),)
    assert second.messages == (
        Message("user", "one"),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "x", tool_call_id="c1", is_error=False),
    )
    assert third.messages[-1] == Message("user", "two")
    assert len(third.messages) == 5
    for request in record.requests:
        offered = {spec.name: spec for spec in request.tools}
        assert "echo" in offered
        assert offered["echo"].parameters["type"] == "object"
        assert offered["echo"].description


def test_offered_tools_follow_the_tool_set() -> None:
    record = run_case(
        make_case(turn("hi", text("a"))), tools=with_tools(RaisingTool(), SilentTool())
    )
    assert {spec.name for spec in record.requests[0].tools} == {"echo", "boom", "silent"}


# --- isolation ----------------------------------------------------------------------------------


class WorkspaceRecorder:
    """An agent factory that remembers each context and checks the workspace while running."""

    def __init__(self) -> None:
        self.contexts: list[AgentContext] = []
        self.existed_during_run: list[bool] = []

    def __call__(self, context: AgentContext) -> ReferenceAgent:
        self.contexts.append(context)
        recorder = self

        class Agent(ReferenceAgent):
            def respond(self, user_input: str) -> str:
                workspace = context.workspace
                recorder.existed_during_run.append(workspace.is_dir())
                assert list(workspace.iterdir()) == []  # fresh: nothing from another case
                (workspace / "scratch.txt").write_text(user_input, encoding="utf-8")
                return super().respond(user_input)

        return Agent(context)


def test_each_run_gets_a_fresh_workspace_removed_afterwards() -> None:
    recorder = WorkspaceRecorder()
    case = make_case(turn("hi", text("a")))
    first = run_case(case, agent_factory=recorder)
    second = run_case(case, agent_factory=recorder)
    assert first.error is None and second.error is None
    assert recorder.existed_during_run == [True, True]
    workspaces = [c.workspace for c in recorder.contexts]
    assert workspaces[0] != workspaces[1]
    assert all(not w.exists() for w in workspaces)


def test_workspace_is_removed_after_a_run_error() -> None:
    recorder = WorkspaceRecorder()
    record = run_case(make_case(turn("hi", text("a"), text("b"))), agent_factory=recorder)
    assert record.error is not None
    assert not recorder.contexts[0].workspace.exists()


def test_suite_cases_get_fresh_isolated_contexts(tmp_path: Path) -> None:
    recorder = WorkspaceRecorder()
    outcome = run_suite(_suite(tmp_path), agent_factory=recorder)
    assert isinstance(outcome, SuiteReport)
    assert outcome.all_passed
    contexts = recorder.contexts
    assert len(contexts) == 3
    assert len({c.workspace for c in contexts}) == 3
    assert len({id(c.provider) for c in contexts}) == 3
    assert len({id(c.observer) for c in contexts}) == 3
    assert len({id(c.tools["echo"]) for c in contexts}) == 3
    assert recorder.existed_during_run == [True, True, True]
    assert all(not c.workspace.exists() for c in contexts)


def test_evaluate_case_removes_its_workspace() -> None:
    recorder = WorkspaceRecorder()
    report = evaluate_case(
        make_case(turn("hi", text("never-in-any-reply"))), agent_factory=recorder
    )
    assert report.passed
    assert not recorder.contexts[0].workspace.exists()


def test_max_tool_iterations_reaches_the_agent_context() -> None:
    recorder = WorkspaceRecorder()
    run_case(make_case(turn("hi", text("a"))), agent_factory=recorder, max_tool_iterations=4)
    assert recorder.contexts[0].max_tool_iterations == 4
