"""Hostile fixtures for the kinds of tool doubles, per-turn checks, call sequences, JSON
replies and requests: wrong types, values too large, control characters, null where TOML has
none, JSON Pointers that are not, JSON Schema keywords that do not exist or do not compile,
empty lists. Each is refused by ``evalrunner validate`` with ``path:line:col: what is wrong``,
exit code 2 and no traceback, in the format it is written in."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalrunner.cli import app

runner = CliRunner()

# One scripted call to the double get_weather, and a JSON reply; CHECK is a turn's expects.
YAML_CASE = """\
name: hostile
tools:
  - name: get_weather
    parameters: {type: object, properties: {city: {type: string}}}
    results: [{returns: "12C"}]
turns:
  - user_input: Weather in Paris?
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c1, name: get_weather, arguments: {city: Paris}}]
      - response: {type: text, content: '{"cities": 1}'}
    expects:
      CHECK
expects:
  exact_tool_calls: 1
"""

# id → (the turn's check, "line:col: the start of the first refusal")
TURN_CHECKS = {
    "calls-empty": (
        "tool_calls_match: {calls: []}",
        "14:33: turns[0].expects.tool_calls_match.calls needs at least 1 item(s), got",
    ),
    "calls-null": (
        "tool_calls_match: {calls: null}",
        "14:33: turns[0].expects.tool_calls_match.calls must be an array, got null;",
    ),
    "calls-missing": (
        "tool_calls_match: {order: any}",
        "14:25: missing required key 'calls' in turns[0].expects.tool_calls_match",
    ),
    "match-a-string": (
        "tool_calls_match: get_weather",
        "14:25: turns[0].expects.tool_calls_match must be an object, got string",
    ),
    "tool-an-integer": (
        "tool_calls_match: {calls: [{tool: 5}]}",
        "14:41: turns[0].expects.tool_calls_match.calls[0].tool must be a string, got",
    ),
    "tool-blank": (
        "tool_calls_match: {calls: [{tool: '  '}]}",
        "14:41: turns[0].expects.tool_calls_match.calls[0].tool must not be blank (it",
    ),
    "tool-nul": (
        'tool_calls_match: {calls: [{tool: "get_weather\\0"}]}',
        "14:41: turns[0].expects.tool_calls_match.calls[0] expects a call to "
        '"get_weather\\u0000", but turn 1\'s script calls',
    ),
    "tool-ansi": (
        'tool_calls_match: {calls: [{tool: "\\e[31mget_weather"}]}',
        "14:41: turns[0].expects.tool_calls_match.calls[0] expects a call to "
        '"\\u001b[31mget_weather", but turn 1\'s script calls',
    ),
    "order-unknown": (
        "tool_calls_match: {order: random, calls: [{tool: get_weather}]}",
        '14:33: turns[0].expects.tool_calls_match.order must be "in_order" or "any",',
    ),
    "extras-an-integer": (
        "tool_calls_match: {extras: 1, calls: [{tool: get_weather}]}",
        '14:34: turns[0].expects.tool_calls_match.extras must be "forbid" or "allow",',
    ),
    "arguments-a-string": (
        "tool_calls_match: {calls: [{tool: get_weather, arguments: Paris}]}",
        "14:65: turns[0].expects.tool_calls_match.calls[0].arguments must be an",
    ),
    "arguments-null": (
        "tool_calls_match: {calls: [{tool: get_weather, arguments: null}]}",
        "14:65: turns[0].expects.tool_calls_match.calls[0].arguments must be an",
    ),
    "arguments-key-typo": (
        "tool_calls_match: {calls: [{tool: get_weather, argument: {city: Paris}}]}",
        "14:54: unknown key 'argument' in turns[0].expects.tool_calls_match.calls[0]",
    ),
    "schema-keyword-typo": (
        "tool_calls_match: {calls: [{tool: get_weather, "
        "arguments_schema: {type: object, requried: [city]}}]}",
        "14:87: turns[0].expects.tool_calls_match.calls[0].arguments_schema.requried:",
    ),
    "schema-an-integer": (
        "tool_calls_match: {calls: [{tool: get_weather, arguments_schema: 5}]}",
        "14:72: turns[0].expects.tool_calls_match.calls[0].arguments_schema must be",
    ),
    "schema-type-typo": (
        "tool_calls_match: {calls: [{tool: get_weather, arguments_schema: {type: objekt}}]}",
        "14:79: turns[0].expects.tool_calls_match.calls[0].arguments_schema.type: a",
    ),
    "schema-bad-regex": (
        "tool_calls_match: {calls: [{tool: get_weather, "
        "arguments_schema: {properties: {city: {pattern: '('}}}}]}",
        "14:102: turns[0].expects.tool_calls_match.calls[0].arguments_schema.properties.city."
        "pattern",
    ),
    "schema-bad-pattern-key": (
        "response_json: {schema: {patternProperties: {'[a-': {}}}}",
        '14:52: turns[0].expects.response_json.schema.patternProperties["[a-"]:',
    ),
    "schema-reply-bad-regex": (
        "response_json: {schema: {properties: {cities: {pattern: '*'}}}}",
        "14:63: turns[0].expects.response_json.schema.properties.cities.pattern:",
    ),
    "schema-id": (
        "tool_calls_match: {calls: [{tool: get_weather, "
        "arguments_schema: {$id: 'https://example.com/s', type: object}}]}",
        "14:73: turns[0].expects.tool_calls_match.calls[0].arguments_schema.$id: $id",
    ),
    "schema-draft-4": (
        "response_json: {schema: {$schema: 'http://json-schema.org/draft-04/schema#'}}",
        "14:41: turns[0].expects.response_json.schema.$schema: a fixture's schema is",
    ),
    "schema-remote-ref": (
        "response_json: {schema: {$ref: 'https://example.com/s.json'}}",
        "14:38: turns[0].expects.response_json.schema.$ref: $ref",
    ),
    "schema-dangling-ref": (
        "response_json: {schema: {$ref: '#/$defs/nope'}}",
        '14:38: turns[0].expects.response_json.schema.$ref: $ref "#/$defs/nope" does',
    ),
    "result-empty": (
        "tool_calls_match: {calls: [{tool: get_weather, result_contains: ''}]}",
        "14:71: turns[0].expects.tool_calls_match.calls[0].result_contains must not",
    ),
    "result-blank": (
        'tool_calls_match: {calls: [{tool: get_weather, result_contains: "\\t "}]}',
        "14:71: turns[0].expects.tool_calls_match.calls[0].result_contains must not",
    ),
    "succeeded-a-string": (
        "tool_calls_match: {calls: [{tool: get_weather, succeeded: 'yes'}]}",
        "14:65: turns[0].expects.tool_calls_match.calls[0].succeeded must be a",
    ),
    "succeeded-null": (
        "tool_calls_match: {calls: [{tool: get_weather, succeeded: ~}]}",
        "14:65: turns[0].expects.tool_calls_match.calls[0].succeeded must be a",
    ),
    "reply-json-null": (
        "response_json: null",
        "14:22: turns[0].expects.response_json must be an object, got null; write its",
    ),
    "pointer-without-slash": (
        "response_json: {equals: {cities: 1}}",
        '14:32: "cities" is not a JSON Pointer: a JSON Pointer is "" (the whole',
    ),
    "pointer-bad-escape": (
        "response_json: {equals: {'/a~2': 1}}",
        '14:32: "/a~2" is not a JSON Pointer: in a JSON Pointer "~" is written "~0"',
    ),
    "equals-key-typo": (
        "response_json: {equal: {'/cities': 1}}",
        "14:23: unknown key 'equal' in turns[0].expects.response_json (did you mean",
    ),
    "equals-huge-int": (
        "response_json: {equals: {'/cities': 123456789012345678901234567890}}",
        "14:43: integer 123456789012345678901234567890 is out of range: integers must",
    ),
    "equals-huge-float": (
        "response_json: {equals: {'/cities': 1e400}}",
        "14:43: number 1e400 is too large for a 64-bit float (at most about 1.8e308);",
    ),
    "equals-nan": (
        "response_json: {equals: {'/cities': .nan}}",
        "14:43: NaN is not allowed; numbers must be finite",
    ),
    "offered-an-integer": (
        "tools_offered: [5]",
        "14:23: turns[0].expects.tools_offered[0] must be a string, got integer 5",
    ),
    "offered-empty-name": (
        "tools_offered: ['']",
        "14:23: turns[0].expects.tools_offered[0] must not be empty",
    ),
    "offered-an-object": (
        "tools_offered: [{name: get_weather}]",
        "14:23: turns[0].expects.tools_offered[0] must be a string, got object",
    ),
    "offered-and-not": (
        "tools_offered: [get_weather]\n      tools_not_offered: [get_weather]",
        '15:27: turns[0].expects.tools_not_offered[0] "get_weather" is also in',
    ),
    "not-offered-a-string": (
        "tools_not_offered: delete_account",
        "14:26: turns[0].expects.tools_not_offered must be an array, got string",
    ),
    "prompt-blank": (
        "system_prompt_contains: ['   ']",
        "14:32: turns[0].expects.system_prompt_contains[0] must not be blank (it is",
    ),
    "prompt-a-string": (
        "system_prompt_contains: weather",
        "14:31: turns[0].expects.system_prompt_contains must be an array, got string",
    ),
    "prompt-lone-surrogate": (
        'system_prompt_contains: ["\\uD800"]',
        "14:32: string holds a lone surrogate escape (e.g. \\ud800), which is not",
    ),
    "tools-used-unscripted": (
        "tools_used: [send_email]",
        '14:20: turns[0].expects.tools_used[0] names "send_email", but turn 1\'s script calls',
    ),
    "exact-above-turn": (
        "exact_tool_calls: 2",
        "14:25: turns[0].expects.exact_tool_calls (2) is above the 1 tool call(s) turn 1's script",
    ),
    "exact-huge": (
        "exact_tool_calls: 99999999999999999999",
        "14:25: integer 99999999999999999999 is out of range: integers must be",
    ),
    "match-too-many": (
        "tool_calls_match: {extras: allow, calls: [{tool: get_weather}, {tool: get_weather}]}",
        "14:70: turns[0].expects.tool_calls_match.calls[1] expects 2 or more calls to "
        '"get_weather", but turn 1\'s script makes',
    ),
    "match-wrong-city": (
        "tool_calls_match: {calls: [{tool: get_weather, arguments: {city: Rome}}]}",
        "14:65: turns[0].expects.tool_calls_match.calls[0].arguments rejects every scripted "
        'call to "get_weather" (arguments',
    ),
    "match-schema-rejects": (
        "tool_calls_match: {calls: [{tool: get_weather, arguments_schema: {required: [country]}}]}",
        "14:72: turns[0].expects.tool_calls_match.calls[0].arguments_schema rejects every "
        'scripted call to "get_weather"',
    ),
}

TOML_HEAD = """\
name = "hostile"

[[turns]]
user_input = "Weather?"
steps = [
  { response = { type = "text", content = '{"a": 1}' } },
]

"""
JSON_TURN = (
    '{"name": "hostile", "turns": [{"user_input": "Weather?", "steps": [{"response": '
    '{"type": "text", "content": "{\\"a\\": 1}"}}], "expects": EXPECTS}]}'
)
YAML_TURN = """\
name: hostile
turns:
  - user_input: w?
    steps:
      - response: {type: text, content: hi}
    expects:
"""
YAML_DOUBLE = """\
name: hostile
tools:
  - DOUBLE
turns:
  - user_input: Weather?
    steps:
      - response: {type: text, content: '{"a": 1}'}
expects:
  response_json: {equals: {"/a": 1}}
"""
HUGE = 100_000

# id → (format, a whole fixture, "line:col: the start of the first refusal")
WHOLE = {
    "toml-null": (
        "toml",
        TOML_HEAD + '[turns.expects.response_json]\nequals = { "/a" = null }\n',
        '10:19: invalid TOML: Invalid value; a value is a "string", a number, true or',
    ),
    "toml-nan": (
        "toml",
        TOML_HEAD + '[turns.expects.response_json]\nequals = { "/a" = nan }\n',
        "10:19: NaN is not allowed; numbers must be finite",
    ),
    "toml-pointers": (
        "toml",
        TOML_HEAD + '[turns.expects.response_json]\nequals = { "a" = 1, "/b~3" = 2 }\n',
        '10:12: "a" is not a JSON Pointer: a JSON Pointer is "" (the whole reply) or',
    ),
    "toml-empty-calls": (
        "toml",
        TOML_HEAD + "[turns.expects.tool_calls_match]\ncalls = []\n",
        "10:9: turns[0].expects.tool_calls_match.calls needs at least 1 item(s), got none",
    ),
    "toml-control-character-in-a-kind": (
        "toml",
        TOML_HEAD + '[turns.expects]\n"system_prompt_contains\\u0007" = ["x"]\n',
        "10:1: unknown key 'system_prompt_contains\\x07' in turns[0].expects (did you mean",
    ),
    "toml-double-without-results": (
        "toml",
        'name = "hostile"\n\n[[tools]]\nname = "get_weather"\nresults = []\n\n'
        + TOML_HEAD.removeprefix('name = "hostile"\n')
        + "[turns.expects]\nresponse_contains = ['a']\n",
        "5:11: tools[0].results needs at least 1 item(s), got none",
    ),
    "json-nan": (
        "json",
        JSON_TURN.replace("EXPECTS", '{"response_json": {"equals": {"/a": NaN}}}'),
        "1:173: NaN is not allowed; numbers must be finite",
    ),
    "json-duplicate-pointer": (
        "json",
        JSON_TURN.replace("EXPECTS", '{"response_json": {"equals": {"/a": 1, "/a": 2}}}'),
        '1:176: duplicate key "/a"; each key may appear once per object',
    ),
    "json-expects-a-list": (
        "json",
        JSON_TURN.replace("EXPECTS", "[]"),
        "1:137: turns[0].expects must be an object, got array []",
    ),
    "json-nul-in-a-kind": (
        "json",
        JSON_TURN.replace("EXPECTS", '{"tool_calls_match\\u0000": {"calls": [{"tool": "x"}]}}'),
        "1:138: unknown key 'tool_calls_match\\x00' in turns[0].expects (did you mean",
    ),
    "json-deep-value": (
        "json",
        JSON_TURN.replace(
            "EXPECTS", '{"response_json": {"equals": {"/a": ' + "[" * 200 + "]" * 200 + "}}}"
        ),
        "1:231: nesting deeper than 64 levels; flatten the data",
    ),
    "json-huge-needle-beside-a-wrong-type": (
        "json",
        JSON_TURN.replace(
            "EXPECTS", '{"system_prompt_contains": ["' + "x" * 2 * HUGE + '"], "tools_offered": 7}'
        ),
        "1:200187: turns[0].expects.tools_offered must be an array, got integer 7",
    ),
    "yaml-tab": (
        "yaml",
        YAML_TURN + "      tool_calls_match:\n\tcalls: [{tool: echo}]\n",
        "8:1: a tab in the indentation: YAML indents with spaces only; replace the",
    ),
    "yaml-match-tool-huge": (
        "yaml",
        YAML_TURN
        + "      tool_calls_match: {extras: allow, calls: [{tool: "
        + "t" * HUGE
        + "}]}\n",
        '7:56: turns[0].expects.tool_calls_match.calls[0] expects a call to "'
        + "t" * 64
        + "...\" (100000 characters), but turn 1's",
    ),
    "yaml-tools-used-huge": (
        "yaml",
        YAML_TURN + "      tools_used: [" + "t" * HUGE + "]\n",
        '7:20: turns[0].expects.tools_used[0] names "'
        + "t" * 64
        + "...\" (100000 characters), but turn 1's",
    ),
    "yaml-double-when-a-string": (
        "yaml",
        YAML_DOUBLE.replace(
            "DOUBLE", "{name: get_weather, results: [{when: Paris, returns: '12C'}]}"
        ),
        '3:42: tools[0].results[0].when must be an object, got string "Paris"',
    ),
    "yaml-double-when-null": (
        "yaml",
        YAML_DOUBLE.replace(
            "DOUBLE", "{name: get_weather, results: [{when: null, returns: '12C'}]}"
        ),
        "3:42: tools[0].results[0].when must be an object, got null; write its value",
    ),
    "yaml-double-name-huge": (
        "yaml",
        YAML_DOUBLE.replace("DOUBLE", "{name: " + "g" * HUGE + ", results: [{returns: '12C'}]}"),
        '3:12: tools[0].name "' + "g" * 64 + '..." (100000 characters) is not a tool name',
    ),
    "yaml-double-bad-regex": (
        "yaml",
        YAML_DOUBLE.replace(
            "DOUBLE",
            "{name: get_weather, parameters: {properties: {city: {pattern: '('}}}, "
            "results: [{returns: '12C'}]}",
        ),
        '3:67: tools[0].parameters.properties.city.pattern: pattern "(" is not a',
    ),
    "yaml-double-returns-and-error": (
        "yaml",
        YAML_DOUBLE.replace("DOUBLE", "{name: get_weather, results: [{returns: '12C', error: x}]}"),
        "3:52: tools[0].results[0] has both 'returns' and 'error'; keep one",
    ),
}


def validate(tmp_path: Path, name: str, text: str) -> tuple[int, str, Path]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    done = runner.invoke(app, ["validate", str(path)])
    return done.exit_code, done.output, path


def assert_refused(tmp_path: Path, name: str, text: str, expected: str) -> None:
    code, output, path = validate(tmp_path, name, text)
    assert code == 2, output
    assert "Traceback" not in output, output
    first = output.splitlines()[0]
    assert first.startswith(f"{path}:{expected}"), first
    # However large the value, each refusal is one line a person can read.
    assert all(len(line) < 600 for line in output.splitlines()), output[:2000]


@pytest.mark.parametrize("check", sorted(TURN_CHECKS))
def test_a_hostile_turn_check_is_refused_where_it_is(tmp_path: Path, check: str) -> None:
    text, expected = TURN_CHECKS[check]
    assert_refused(tmp_path, "case.yaml", YAML_CASE.replace("CHECK", text), expected)


@pytest.mark.parametrize("fixture", sorted(WHOLE))
def test_a_hostile_fixture_is_refused_where_it_is(tmp_path: Path, fixture: str) -> None:
    fmt, text, expected = WHOLE[fixture]
    assert_refused(tmp_path, f"case.{fmt}", text, expected)
