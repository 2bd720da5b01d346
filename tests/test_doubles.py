"""Tool doubles (``tools:`` in a fixture, issue 26): admission, the model, in-process runs,
conformance, the admission cache and ``convert``."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalrunner.agents.reference import AgentContext, ReferenceAgent
from evalrunner.boundary.conformance import ConversationMonitor
from evalrunner.boundary.provider import ReplayProvider
from evalrunner.boundary.tools import DoubleTool, EchoTool, holds, tool_spec
from evalrunner.cli import app
from evalrunner.fixture.admit import admit, build_case
from evalrunner.fixture.load import parse_document
from evalrunner.model import (
    AdmissionError,
    Case,
    DoubleRule,
    Message,
    ModelRequest,
    RunError,
    ToolCallRecord,
    ToolDouble,
    json_equal,
)
from evalrunner.mutation.mutants import FeedsWrongResult
from evalrunner.replay import run_case
from evalrunner.toolbox.convert import convert

runner = CliRunner()

WEATHER_YAML = """\
name: weather-two-cities
tools:
  - name: get_weather
    description: Current weather for a city
    parameters:
      {type: object, properties: {city: {type: string}, unit: {type: string}}, required: [city]}
    results:
      - {when: {city: Paris}, returns: "Paris: 12C"}
      - {when: {city: Rome}, returns: {temp_c: 18, city: Rome}}
      - {error: "unknown city"}
  - name: send_email
    results: [{returns: "sent"}]
turns:
  - user_input: "Weather in Paris and Rome?"
    steps:
      - response:
          type: tool_calls
          tool_calls:
            - {id: w1, name: get_weather, arguments: {city: Paris, unit: C}}
            - {id: w2, name: get_weather, arguments: {city: Rome, unit: C}}
      - response: {type: text, content: "Paris 12C, Rome 18C"}
expects:
  tool_results_contain:
    - {tool: get_weather, needle: "Paris: 12C"}
    - {tool: get_weather, needle: '{"city":"Rome","temp_c":18}', call_index: 1}
"""


def document(text: str, fmt: str = "yaml", name: str = "case") -> Any:
    parsed = parse_document(text.encode(), fmt, Path(f"{name}.{fmt}"))  # type: ignore[arg-type]
    assert not isinstance(parsed, list), parsed
    return parsed


def admitted(text: str, fmt: str = "yaml") -> Case:
    case = admit(document(text, fmt))
    assert isinstance(case, Case), [str(e) for e in case]
    return case


def built(data: dict[str, Any]) -> Case:
    """A case admission refuses because a scripted call has no answer from its double, built
    as admission builds the cases it admits: the run's own guard is what a live model, or an
    agent that sends other arguments than the script's, meets."""
    return build_case(data, document(json.dumps(data), "json"))


def refused(text: str, fmt: str = "yaml") -> list[str]:
    outcome = admit(document(text, fmt))
    assert isinstance(outcome, list), "admitted"
    return [str(e) for e in outcome]


def fixture(tools: object, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A JSON case with ``tools`` whose one turn makes ``calls`` (default: one to get_weather)."""
    calls = (
        calls
        if calls is not None
        else [{"id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}]
    )
    return {
        "name": "doubled",
        "tools": tools,
        "turns": [
            {
                "user_input": "go",
                "steps": [
                    {"response": {"type": "tool_calls", "tool_calls": calls}},
                    {"response": {"type": "text", "content": "done"}},
                ],
            }
        ],
        "expects": {"tool_results_contain": [{"tool": calls[0]["name"], "needle": "x"}]},
    }


WEATHER = {
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "results": [{"when": {"city": "Paris"}, "returns": "x: Paris"}],
}


# --- the model ----------------------------------------------------------------------------------


def test_the_issue_example_admits_to_typed_doubles() -> None:
    case = admitted(WEATHER_YAML)
    weather, email = case.tools
    assert weather == ToolDouble(
        "get_weather",
        (
            DoubleRule({"city": "Paris"}, "Paris: 12C"),
            DoubleRule({"city": "Rome"}, {"temp_c": 18, "city": "Rome"}),
            DoubleRule(None, None, "unknown city"),
        ),
        "Current weather for a city",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    )
    assert email == ToolDouble("send_email", (DoubleRule(None, "sent"),))
    assert weather.results[1].result_text == '{"city":"Rome","temp_c":18}'
    hash(case)  # the JSON values inside take no part in hashing


@pytest.mark.parametrize("target", ["json", "toml", "yaml"])
def test_the_same_doubles_in_every_format_admit_equal(target: str) -> None:
    case = admitted(WEATHER_YAML)
    conversion = convert(document(WEATHER_YAML), target)  # type: ignore[arg-type]
    assert not isinstance(conversion, list), conversion
    assert conversion.case == case
    assert admitted(conversion.text, target) == case
    # and back again
    back = convert(document(conversion.text, target), "yaml")
    assert not isinstance(back, list)
    assert back.case == case


def test_doubles_take_part_in_equality() -> None:
    case = admitted(WEATHER_YAML)
    other = admitted(WEATHER_YAML.replace('returns: "sent"', 'returns: "queued"'))
    assert case != other


def test_json_values_compare_as_json() -> None:
    assert holds({"city": "Paris", "unit": "C"}, {"city": "Paris"})
    assert holds({"a": {"b": 1, "c": 2}}, {"a": {"b": 1.0}})
    assert not holds({"seats": 10}, {"seats": 1})
    assert not holds({"flag": 1}, {"flag": True})
    assert not holds({"list": [1, 2, 3]}, {"list": [1, 2]})  # arrays whole
    assert not holds({"a": "x"}, {"b": "x"})
    assert not holds("text", {"a": 1})
    assert holds({"anything": 1}, {})
    assert json_equal([{"a": 1}], [{"a": 1.0}])
    assert not json_equal([{"a": 1, "b": 2}], [{"a": 1}])  # objects inside arrays whole
    assert not json_equal(None, False)


# --- admission ------------------------------------------------------------------------------------


def test_every_problem_of_the_doubles_is_refused_at_once_with_positions() -> None:
    text = """\
name: bad
tools:
  - name: get_weather
    parameters: {type: object, properties: {city: {type: strin}}, requried: [city]}
    results:
      - {when: Paris, returns: x}
      - {returns: x, error: y}
      - {}
  - name: get_weather
    results: [{returns: 1}]
  - name: "bell\\u0007"
    results: [{returns: 1}]
turns:
  - user_input: hi
    steps:
      - response: {type: text, content: x}
expects:
  response_contains: [x]
"""
    errors = refused(text)
    assert errors == [
        "case.yaml:4:58: tools[0].parameters.properties.city.type: a JSON Schema type is one "
        'of array, boolean, integer, null, number, object, string (or a list of them), got "strin"',
        'case.yaml:4:67: tools[0].parameters.requried: unknown JSON Schema keyword "requried", '
        'which would check nothing; did you mean "required"?',
        'case.yaml:6:16: tools[0].results[0].when must be an object, got string "Paris"',
        "case.yaml:7:22: tools[0].results[1] has both 'returns' and 'error'; keep one: returns "
        "answers the call with a result, error makes it fail with that text",
        "case.yaml:8:9: tools[0].results[2] has neither 'returns' nor 'error'; add returns "
        "(the result) or error (the text the call fails with)",
        'case.yaml:9:11: tools[1].name "get_weather" is already declared at tools[0]; double '
        "names must be unique in a case: merge their results into one double",
        'case.yaml:11:11: tools[2].name "bell\\x07" is not a tool name every model API '
        "accepts; use 1 to 64 letters, digits, '_' or '-'",
    ]


def test_the_cli_refuses_bad_doubles_with_exit_2(tmp_path: Path) -> None:
    suite = tmp_path / "evals"
    suite.mkdir()
    bad = fixture([{**WEATHER, "parameters": {"type": "object", "requried": ["city"]}}])
    (suite / "bad.json").write_text(json.dumps(bad, indent=2))
    result = runner.invoke(app, ["run", str(suite)])
    assert result.exit_code == 2, result.output
    assert "bad.json:8:9: tools[0].parameters.requried: unknown JSON Schema keyword" in (
        result.output
    )


@pytest.mark.parametrize(
    ("parameters", "wanted"),
    [
        ({"$ref": "https://example.com/s.json"}, "points outside this schema"),
        ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "does not resolve inside"),
        # jsonschema percent-decodes the whole pointer before splitting it: "a/b" is two tokens.
        (
            {"$defs": {"a/b": {}}, "properties": {"a": {"$ref": "#/$defs/a%2Fb"}}},
            "does not resolve inside",
        ),
        ({"$dynamicRef": "https://example.com/s.json"}, "$dynamicRef"),
        ({"$id": "https://example.com/x"}, "$id is not allowed"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "JSON Schema 2020-12"),
        ({"properties": {"a": {"pattern": "("}}}, "not a valid regular expression"),
        ({"type": "object", "minLength": -1}, "not valid JSON Schema"),
        ({"allOf": [{"tpye": "string"}]}, 'did you mean "type"?'),
        ({"properties": {"a": {"items": {"maxItem": 3}}}}, 'did you mean "maxItems"?'),
        ({"x-vendor": 1}, 'unknown JSON Schema keyword "x-vendor"'),
    ],
)
def test_a_schema_that_would_not_check_what_it_says_is_refused(
    parameters: dict[str, Any], wanted: str
) -> None:
    errors = refused(json.dumps(fixture([{**WEATHER, "parameters": parameters}])), "json")
    assert len(errors) == 1 and wanted in errors[0], errors
    assert errors[0].startswith("case.json:") and "tools[0].parameters" in errors[0]


def test_schema_keywords_that_are_data_are_not_read_as_schemas() -> None:
    parameters = {
        "type": "object",
        "properties": {"requried": {"type": "string"}, "unit": {"enum": [{"tpye": 1}]}},
        "$defs": {"city": {"type": "string"}},
        "default": {"requried": True},
        "examples": [{"anything": "goes"}],
        "additionalProperties": {"$ref": "#/$defs/city"},
    }
    admitted(json.dumps(fixture([{**WEATHER, "parameters": parameters}])), "json")


@pytest.mark.parametrize(
    ("tools", "wanted"),
    [
        ("get_weather", "tools must be an array, got string"),
        ([None], "tools[0] must be an object, got null"),
        ([{"name": 7, "results": [{"returns": 1}]}], "tools[0].name must be a string"),
        ([{"name": "", "results": [{"returns": 1}]}], 'tools[0].name "" is not a tool name'),
        ([{"name": "x" * 65, "results": [{"returns": 1}]}], "1 to 64 letters"),
        ([{"name": "a\nb", "results": [{"returns": 1}]}], 'tools[0].name "a\\nb" is not'),
        ([{"name": "a\x1b[31m", "results": [{"returns": 1}]}], "is not a tool name"),
        ([{"name": "t"}], "missing required key 'results' in tools[0]"),
        ([{"name": "t", "results": {"returns": 1}}], "tools[0].results must be an array"),
        ([{"name": "t", "results": [{"when": [1], "returns": 1}]}], "when must be an object"),
        ([{"name": "t", "results": [{"when": None, "returns": 1}]}], "when must be an object"),
        ([{"name": "t", "results": [{"error": 3}]}], "error must be a string"),
        ([{"name": "t", "results": [{"returns": 1, "retruns": 2}]}], "did you mean 'returns'?"),
        ([{"name": "t", "results": [{"returns": 1}], "params": {}}], "unknown key 'params'"),
        ([{"name": "t", "description": 5, "results": [{"returns": 1}]}], "must be a string"),
        ([{"name": "t", "parameters": "object", "results": [{"returns": 1}]}], "an object"),
    ],
)
def test_hostile_doubles_are_refused_with_a_message(tools: object, wanted: str) -> None:
    errors = refused(json.dumps(fixture(tools)), "json")
    assert any(wanted in e for e in errors), errors
    assert all(e.startswith("case.json:") for e in errors)


def test_huge_doubles_are_admitted_and_answer() -> None:
    big = "x" * 200_000
    rules = [{"when": {"city": f"c{i}"}, "returns": {"n": i}} for i in range(2000)]
    rules.append({"when": {"city": "Paris"}, "returns": big})
    case = admitted(json.dumps(fixture([{"name": "get_weather", "results": rules}])), "json")
    record = run_case(case)
    assert record.error is None
    assert record.tool_calls[0].result == big


# --- in-process runs ------------------------------------------------------------------------------


def run(doubles: object, calls: list[dict[str, Any]] | None = None, **kwargs: Any) -> Any:
    return run_case(admitted(json.dumps(fixture(doubles, calls)), "json"), **kwargs)


def test_the_reference_agent_is_answered_by_the_doubles() -> None:
    record = run_case(admitted(WEATHER_YAML))
    assert record.error is None
    assert [(c.result, c.success) for c in record.tool_calls] == [
        ("Paris: 12C", True),
        ('{"city":"Rome","temp_c":18}', True),
    ]
    offered = {spec.name: spec for spec in record.requests[0].tools}
    assert set(offered) == {"echo", "get_weather", "send_email"}
    assert offered["get_weather"].description == "Current weather for a city"
    assert offered["get_weather"].parameters["required"] == ["city"]
    assert offered["send_email"].parameters == {"type": "object", "properties": {}}


def test_an_error_rule_fails_the_call_with_its_text() -> None:
    tools = [{"name": "get_weather", "results": [{"error": "unknown city"}]}]
    record = run(tools)
    assert record.error is None
    assert (record.tool_calls[0].result, record.tool_calls[0].success) == (
        "Error: unknown city",
        False,
    )


def test_the_first_matching_rule_answers() -> None:
    tools = [
        {
            "name": "get_weather",
            "results": [
                {"when": {"city": "Rome"}, "returns": "rome"},
                {"when": {"city": "Paris", "unit": "C"}, "returns": "paris C"},
                {"when": {"city": "Paris"}, "returns": "paris"},
                {"returns": "anywhere"},
            ],
        }
    ]
    calls = [
        {"id": "a", "name": "get_weather", "arguments": {"city": "Paris"}},
        {"id": "b", "name": "get_weather", "arguments": {"unit": "C", "city": "Paris"}},
        {"id": "c", "name": "get_weather", "arguments": {"city": "Oslo"}},
    ]
    record = run(tools, calls)
    assert [c.result for c in record.tool_calls] == ["paris", "paris C", "anywhere"]


@pytest.mark.parametrize(
    ("returns", "text"),
    [
        ({"b": [1, {"d": None, "c": "é"}], "a": True}, '{"a":true,"b":[1,{"c":"é","d":null}]}'),
        ([3, 2], "[3,2]"),
        (12.5, "12.5"),
        (False, "false"),
        (None, "null"),
        ("  verbatim\n", "  verbatim\n"),
        ('{"a": 1}', '{"a": 1}'),  # text stays text, spacing and all
    ],
)
def test_returns_is_text_verbatim_or_compact_sorted_json(returns: object, text: str) -> None:
    record = run([{"name": "get_weather", "results": [{"returns": returns}]}])
    assert record.error is None
    assert record.tool_calls[0].result == text


def test_arguments_that_break_parameters_fail_the_call() -> None:
    calls = [{"id": "c1", "name": "get_weather", "arguments": {"city": 12}}]
    tools = [{**WEATHER, "parameters": {**WEATHER["parameters"], "required": ["city"]}}]
    record = run(tools, calls)
    assert record.error is None
    call = record.tool_calls[0]
    assert not call.success
    assert call.result == (
        "Error: Invalid arguments for get_weather: 12 is not of type 'string' (at $.city)"
    )
    missing = run(tools, [{"id": "c1", "name": "get_weather", "arguments": {}}])
    assert "Invalid arguments for get_weather: 'city' is a required property" in (
        missing.tool_calls[0].result
    )


def test_a_double_replaces_a_configured_tool_of_its_name() -> None:
    tools = [{"name": "echo", "results": [{"returns": "from the double"}]}]
    calls = [{"id": "c1", "name": "echo", "arguments": {"message": "hi"}}]
    record = run(tools, calls, tools=lambda: {"echo": EchoTool()})
    assert record.error is None
    assert record.tool_calls[0].result == "from the double"
    assert [spec.name for spec in record.requests[0].tools] == ["echo"]


def test_a_call_no_rule_answers_is_a_run_error_naming_tool_and_arguments() -> None:
    calls = [{"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo", "n": [1]}}]
    record = run_case(built(fixture([WEATHER], calls)))
    assert record.error is not None
    assert "the tool double get_weather has no result for the call with arguments " in (
        record.error
    )
    assert '{"city":"Oslo","n":[1]}' in record.error


class _Swallows:
    """An agent that runs the tool itself, catches whatever it raises, and replies without
    asking the model again: the unanswered call must still be the case's error."""

    def __init__(self, context: AgentContext) -> None:
        self._context = context

    def respond(self, user_input: str) -> str:
        provider = self._context.provider
        offered = tuple(tool_spec(tool) for tool in self._context.tools.values())
        response = provider.complete(ModelRequest((Message("user", user_input),), offered))
        for call in getattr(response, "tool_calls", ()):
            with contextlib.suppress(Exception):
                self._context.tools[call.name].call(json.loads(call.arguments))
        return "fine"


def test_an_unanswered_call_stays_the_error_when_the_agent_catches_it() -> None:
    calls = [{"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}]
    record = run_case(built(fixture([WEATHER], calls)), agent_factory=_Swallows)
    assert record.error is not None
    assert record.error.startswith("the tool double get_weather has no result"), record.error


def test_python_factories_get_the_doubles_in_their_context() -> None:
    seen: list[AgentContext] = []

    def factory(context: AgentContext) -> ReferenceAgent:
        seen.append(context)
        return ReferenceAgent(context)

    case = admitted(WEATHER_YAML)
    record = run_case(case, agent_factory=factory)
    assert record.error is None
    assert seen[0].doubles == case.tools
    assert {"get_weather", "send_email"} <= set(seen[0].tools)


# --- conformance ---------------------------------------------------------------------------


class _AltersResult(ReferenceAgent):
    """Alters what the double returned before it feeds it back, and reports the altered text
    (so only the double's own record of what it returned can tell)."""

    def _dispatch(self, call: Any) -> Any:
        record = super()._dispatch(call)
        return type(record)(record.name, record.arguments, "Paris: 30C", record.success, call.id)


def test_a_double_result_altered_before_feed_back_is_caught() -> None:
    record = run_case(admitted(WEATHER_YAML), agent_factory=_AltersResult)
    assert record.error is not None
    assert 'the get_weather tool returned "Paris: 12C"' in record.error
    assert 'fed back "Paris: 30C"' in record.error
    edited = run_case(admitted(WEATHER_YAML), agent_factory=FeedsWrongResult)
    assert edited.error is not None and 'fed back "Paris: 12C (edited)"' in edited.error


class _ArgumentsChanged(ReferenceAgent):
    """Runs the double on other arguments than the model's call, and reports the model's."""

    def _dispatch(self, call: Any) -> Any:
        record = super()._dispatch(type(call)(call.id, call.name, '{"city":"Rome"}'))
        return type(record)(record.name, call.arguments, record.result, record.success, call.id)


def test_a_double_given_other_arguments_than_the_model_sent_is_caught() -> None:
    tools = [{**WEATHER, "results": [{"returns": "any"}]}]
    record = run(tools, agent_factory=_ArgumentsChanged)
    assert record.error is not None and "get_weather tool received" in record.error


class _SendsEmailOnClose(ReferenceAgent):
    """Calls a double in ``close()``, after its last turn: outside every turn's check."""

    def close(self) -> None:
        self._context.tools["send_email"].call({"to": "boss@example.com"})


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_a_tool_called_in_close_fails_the_case(timeout: float | None) -> None:
    tools = [WEATHER, {"name": "send_email", "results": [{"returns": "sent"}]}]
    case = admitted(json.dumps(fixture(tools)), "json")
    record = run_case(case, agent_factory=_SendsEmailOnClose, timeout=timeout)
    assert record.error == (
        "after the last turn ended (in the agent's close()), the send_email tool was called "
        'with "{\\"to\\":\\"boss@example.com\\"}"; no model call asked for it, and an agent '
        "must not call tools once its last turn is over"
    )
    assert run_case(case, timeout=timeout).error is None


# --- cache and convert ---------------------------------------------------------------------


def test_the_admission_cache_keeps_the_doubles(tmp_path: Path) -> None:
    from evalrunner.fixture.cache import _decode, _encode

    case = admitted(WEATHER_YAML)
    again = _decode(json.loads(json.dumps(_encode(case))))
    assert again == case


@pytest.mark.parametrize(
    ("double", "where"),
    [
        ({"name": "t", "results": [{"returns": None}]}, "tools[0].results[0].returns is null"),
        (
            # (The last rule answers the scripted call, which the first does not.)
            {"name": "t", "results": [{"when": {"a": {"b": None}}, "returns": 1}, {"returns": 2}]},
            "tools[0].results[0].when.a.b is null",
        ),
        (
            {"name": "t", "parameters": {"default": None}, "results": [{"returns": 1}]},
            "tools[0].parameters.default is null",
        ),
    ],
)
def test_convert_to_toml_refuses_a_null_naming_its_path(
    double: dict[str, Any], where: str, tmp_path: Path
) -> None:
    data = fixture([double], [{"id": "c1", "name": "t", "arguments": {"a": None}}])
    source = tmp_path / "case.json"
    source.write_text(json.dumps(data, indent=2))
    outcome = convert(document(source.read_text(), "json"), "toml")
    assert isinstance(outcome, list) and all(isinstance(e, AdmissionError) for e in outcome)
    assert [e.message.split(",")[0] for e in outcome] == [where]
    result = runner.invoke(app, ["convert", str(source), "--to", "toml"])
    assert result.exit_code == 2
    assert f"{where}, and TOML has no null; keep this fixture in JSON or YAML" in result.output
    assert "Traceback" not in result.output
    for target in ("yaml", "json"):  # the other formats hold it
        assert not isinstance(convert(document(source.read_text(), "json"), target), list)


def _out_of_process_turn(
    doubles: object,
    fed: str,
    success: bool | None,
    *,
    offer: bool = True,
    answered: bool = True,
) -> str | None:
    """One turn of a case with ``doubles`` whose agent runs its own tools (a command agent)
    and feeds back ``fed`` for the one call; the case's error. Without ``offer``, the agent's
    requests offer only echo, as an agent that ignores the turn-1 line's tools does.
    ``answered``: no rule answers the call, so the case is one admission refuses
    (:func:`built`)."""
    data = fixture(doubles)
    case = admitted(json.dumps(data), "json") if answered else built(data)
    monitor = ConversationMonitor(ReplayProvider(case.turns), ["go"], doubles=case.tools)
    offered = (
        tuple(tool_spec(DoubleTool(double)) for double in case.tools)
        if offer
        else (tool_spec(EchoTool()),)
    )
    monitor.begin_turn(0)
    user = Message("user", "go")
    response = monitor.complete(ModelRequest((user,), offered))
    call = response.tool_calls[0]  # type: ignore[union-attr]
    history = (
        user,
        Message("assistant", "", (call,)),
        Message("tool", fed, tool_call_id=call.id),
    )
    monitor.complete(ModelRequest(history, offered))
    reports = (
        None
        if success is None
        else [ToolCallRecord(call.name, call.arguments, fed, success, call.id)]
    )
    with contextlib.suppress(RunError):
        monitor.end_turn(reports, None)
    return monitor.error


def test_a_command_agent_is_held_to_the_doubles_answers() -> None:
    assert _out_of_process_turn([WEATHER], "x: Paris", True) is None
    assert _out_of_process_turn([WEATHER], "x: Paris", None) is None
    altered = _out_of_process_turn([WEATHER], "x: Rome", True)
    assert altered == (
        'turn 1: the tool double get_weather returns "x: Paris" for tool call "c1" '
        '(get_weather), but the agent fed back "x: Rome"; the result fed back must be what '
        "the tool returned"
    )
    as_failed = _out_of_process_turn([WEATHER], "x: Paris", False)
    assert as_failed is not None and "fed it back as a failed call" in as_failed
    failing = [{"name": "get_weather", "results": [{"error": "no such city"}]}]
    assert _out_of_process_turn(failing, "Error: no such city", False) is None
    hidden = _out_of_process_turn(failing, "Error: something", False)
    assert hidden is not None and "a failed call's result must say why" in hidden
    unanswered = [{**WEATHER, "results": [{"when": {"city": "Rome"}, "returns": "r"}]}]
    error = _out_of_process_turn(unanswered, "Error: whatever", False, answered=False)
    assert error is not None
    assert error.startswith(
        'the tool double get_weather has no result for the call with arguments {"city":"Paris"}'
    )


def test_a_double_the_agent_never_took_up_is_named_as_never_offered() -> None:
    # An agent that ignores the turn-1 line's tools neither offers the double nor runs it.
    ignored = _out_of_process_turn([WEATHER], "Unknown tool: get_weather", False, offer=False)
    assert ignored == (
        'turn 1: the agent never offered the tool double get_weather (it offered "echo"), so '
        'tool call "c1" (get_weather) was fed back as "Unknown tool: get_weather"; a command '
        'agent receives the case\'s tool doubles as "tools" on the turn-1 line, and must offer '
        "each to the model and answer its calls as the double's rules say"
    )
    assert "the result fed back must be what" not in ignored
    # Offered, but answered as an unknown tool: the agent does not serve it.
    unserved = _out_of_process_turn([WEATHER], "Unknown tool: get_weather", False)
    assert unserved is not None
    assert unserved.startswith("turn 1: the agent does not serve the tool double get_weather,")
    assert '"tools" on the turn-1 line' in unserved
    failing = [{"name": "get_weather", "results": [{"error": "no such city"}]}]
    refused = _out_of_process_turn(failing, "Unknown tool: get_weather", False, offer=False)
    assert refused is not None and "never offered the tool double get_weather" in refused


@pytest.mark.parametrize(
    ("returns", "wanted"),
    [
        ('"\\ud800"', "lone surrogate"),
        ("1e400", "too large for a 64-bit float"),
        ('{"a":' * 300 + "1" + "}" * 300, "nesting deeper than"),
        ("123456789012345678901234567890", "out of range"),
        ("NaN", "NaN"),
    ],
)
def test_values_json_cannot_hold_are_refused_in_a_double(returns: str, wanted: str) -> None:
    text = json.dumps(fixture([{"name": "get_weather", "results": [{"returns": "__R__"}]}]))
    outcome = parse_document(text.replace('"__R__"', returns).encode(), "json", Path("c.json"))
    assert isinstance(outcome, list)
    assert [e.line for e in outcome] == [1] and wanted in str(outcome[0]), outcome


# --- convert round-trips random doubles -----------------------------------------------------------

_keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
_atoms = (
    st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
)
_values = st.recursive(
    _atoms,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def _doubles(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for index in range(draw(st.integers(1, 3))):
        rules = []
        for _ in range(draw(st.integers(1, 3))):
            rule: dict[str, Any] = {}
            if draw(st.booleans()):
                rule["when"] = draw(st.dictionaries(_keys, _values, max_size=3))
            if draw(st.booleans()):
                rule["error"] = draw(st.text(min_size=1, max_size=8).filter(str.strip))
            else:
                rule["returns"] = draw(_values)
            rules.append(rule)
        double: dict[str, Any] = {"name": f"tool_{index}", "results": rules}
        if draw(st.booleans()):
            double["description"] = draw(st.text(max_size=10))
        if draw(st.booleans()):
            double["parameters"] = {"type": "object", "default": draw(_values)}
        out.append(double)
    return out


@pytest.mark.fuzz
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_doubles())
def test_random_doubles_survive_json_yaml_toml_json(doubles: list[dict[str, Any]]) -> None:
    # Admission refuses a scripted call no rule answers: a last rule answers whatever the
    # drawn rules of the called double leave.
    called = {**doubles[0], "results": [*doubles[0]["results"], {"returns": "any"}]}
    doubles = [called, *doubles[1:]]
    text = json.dumps(fixture(doubles, [{"id": "c", "name": "tool_0", "arguments": {}}]))
    case = admitted(text, "json")
    as_yaml = convert(document(text, "json"), "yaml")
    assert not isinstance(as_yaml, list)
    as_toml = convert(document(as_yaml.text, "yaml"), "toml")
    assert not isinstance(as_toml, list), as_toml
    back = convert(document(as_toml.text, "toml"), "json")
    assert not isinstance(back, list)
    assert as_yaml.case == as_toml.case == back.case == case
