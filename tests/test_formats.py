"""The three fixture formats carry the same data model (SPEC §3).

The same case written in JSON, YAML and TOML admits to equal :class:`Case` values, and schema
errors deep inside TOML structures (arrays of tables, inline tables, dotted keys) still carry a
line and column.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_document
from evalrunner.model import AdmissionError, Case, PayloadNeedle, TextResponse, ToolCallsResponse

SAME_JSON = r"""{
  "$schema": "../schemas/case.schema.json",
  "name": "same-everywhere",
  "description": "Ünïcödé arguments, a verbatim string argument and two turns.",
  "class": "positive",
  "turns": [
    {
      "user_input": "Echo 日本語 and café ☕",
      "steps": [
        {
          "response": {
            "type": "tool_calls",
            "tool_calls": [
              {"id": "c1", "name": "echo", "arguments": {
                "message": "日本語 café ☕", "z": [1, 2.5, true, null], "a": {"nested": "ü"}}},
              {"id": "c2", "name": "echo", "arguments": "{ \"message\" : \"raw\\u00e9\" }"}
            ],
            "input_tokens": 12,
            "output_tokens": 7
          }
        },
        {"response": {"type": "text", "content": "Done: 日本語\nsecond line", "output_tokens": 3}}
      ]
    },
    {
      "user_input": "again",
      "steps": [{"response": {"type": "text", "content": "bye"}}]
    }
  ],
  "expects": {
    "response_contains": ["bye"],
    "response_matches": ["^b\\w+$"],
    "tools_used": ["echo"],
    "tools_not_used": ["rm"],
    "min_tool_calls": 1,
    "max_tool_calls": 3,
    "exact_tool_calls": 2,
    "all_tools_succeeded": true,
    "tool_arguments_contain": [
      {"tool": "echo", "needle": "日本語", "call_index": 0},
      {"tool": "echo", "needle": "{ \"message\" : \"raw\\u00e9\" }"}
    ],
    "tool_results_contain": [{"tool": "echo", "needle": "café"}]
  }
}
"""

SAME_YAML = r"""$schema: ../schemas/case.schema.json
name: same-everywhere
description: Ünïcödé arguments, a verbatim string argument and two turns.
class: positive
turns:
  - user_input: "Echo 日本語 and café ☕"
    steps:
      - response:
          type: tool_calls
          tool_calls:
            - id: c1
              name: echo
              arguments:
                message: 日本語 café ☕
                z: [1, 2.5, true, null]
                a: {nested: ü}
            - id: c2
              name: echo
              arguments: '{ "message" : "raw\u00e9" }'
          input_tokens: 12
          output_tokens: 7
      - response:
          type: text
          content: "Done: 日本語\nsecond line"
          output_tokens: 3
  - user_input: again
    steps:
      - response: {type: text, content: bye}
expects:
  response_contains: [bye]
  response_matches: ['^b\w+$']
  tools_used: [echo]
  tools_not_used: [rm]
  min_tool_calls: 1
  max_tool_calls: 3
  exact_tool_calls: 2
  all_tools_succeeded: true
  tool_arguments_contain:
    - {tool: echo, needle: 日本語, call_index: 0}
    - tool: echo
      needle: '{ "message" : "raw\u00e9" }'
  tool_results_contain:
    - {tool: echo, needle: café}
"""

SAME_TOML = r""""$schema" = "../schemas/case.schema.json"
name = "same-everywhere"
description = "Ünïcödé arguments, a verbatim string argument and two turns."
class = "positive"

[[turns]]
user_input = "Echo 日本語 and café ☕"

[[turns.steps]]
[turns.steps.response]
type = "tool_calls"
input_tokens = 12
output_tokens = 7

[[turns.steps.response.tool_calls]]
id = "c1"
name = "echo"
arguments = { message = "日本語 café ☕", z = [1, 2.5, true], a = { nested = "ü" } }

[[turns.steps.response.tool_calls]]
id = "c2"
name = "echo"
arguments = '{ "message" : "raw\u00e9" }'

[[turns.steps]]
response = { type = "text", content = "Done: 日本語\nsecond line", output_tokens = 3 }

[[turns]]
user_input = "again"
steps = [{ response = { type = "text", content = "bye" } }]

[expects]
response_contains = ["bye"]
response_matches = ['^b\w+$']
tools_used = ["echo"]
tools_not_used = ["rm"]
min_tool_calls = 1
max_tool_calls = 3
exact_tool_calls = 2
all_tools_succeeded = true
tool_results_contain = [{ tool = "echo", needle = "café" }]

[[expects.tool_arguments_contain]]
tool = "echo"
needle = "日本語"
call_index = 0

[[expects.tool_arguments_contain]]
tool = "echo"
needle = '{ "message" : "raw\u00e9" }'
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def admit_text(tmp_path: Path, name: str, text: str) -> Case | list[AdmissionError]:
    document = load_document(write(tmp_path, name, text))
    assert not isinstance(document, list), [str(e) for e in document]
    return admit(document)


def admitted(tmp_path: Path, name: str, text: str) -> Case:
    case = admit_text(tmp_path, name, text)
    assert isinstance(case, Case), [str(e) for e in case]
    return case


def refused(tmp_path: Path, name: str, text: str) -> list[AdmissionError]:
    outcome = admit_text(tmp_path, name, text)
    assert isinstance(outcome, list), f"{name} was admitted"
    return outcome


def only(found: list[AdmissionError]) -> AdmissionError:
    assert len(found) == 1, [str(e) for e in found]
    return found[0]


# TOML has no null: the JSON and YAML versions drop it for the equality check.
JSON_WITHOUT_NULL = SAME_JSON.replace("[1, 2.5, true, null]", "[1, 2.5, true]")
YAML_WITHOUT_NULL = SAME_YAML.replace("[1, 2.5, true, null]", "[1, 2.5, true]")


def test_the_same_case_admits_equal_in_json_yaml_and_toml(tmp_path: Path) -> None:
    from_json = admitted(tmp_path, "same.json", JSON_WITHOUT_NULL)
    from_yaml = admitted(tmp_path, "same.yaml", YAML_WITHOUT_NULL)
    from_toml = admitted(tmp_path, "same.toml", SAME_TOML)
    assert from_json == from_yaml == from_toml
    assert {c.source.name for c in (from_json, from_yaml, from_toml)} == {
        "same.json",
        "same.yaml",
        "same.toml",
    }


def test_json_and_yaml_agree_with_null_in_arguments(tmp_path: Path) -> None:
    assert admitted(tmp_path, "n.json", SAME_JSON) == admitted(tmp_path, "n.yaml", SAME_YAML)


def test_the_admitted_case_is_normalized(tmp_path: Path) -> None:
    case = admitted(tmp_path, "same.toml", SAME_TOML)
    assert case.name == "same-everywhere"
    assert case.case_class == "positive"
    assert case.description == "Ünïcödé arguments, a verbatim string argument and two turns."
    first, second = case.turns
    assert first.user_input == "Echo 日本語 and café ☕"
    calls, reply = first.responses
    assert isinstance(calls, ToolCallsResponse)
    assert (calls.input_tokens, calls.output_tokens) == (12, 7)
    object_call, string_call = calls.tool_calls
    # objects: compact JSON, sorted keys, non-ASCII kept
    assert object_call.arguments == (
        '{"a":{"nested":"ü"},"message":"日本語 café ☕","z":[1,2.5,true]}'
    )
    assert json.loads(object_call.arguments)["message"] == "日本語 café ☕"
    # strings: verbatim, spacing and escapes untouched
    assert string_call.arguments == '{ "message" : "raw\\u00e9" }'
    assert reply == TextResponse(content="Done: 日本語\nsecond line", output_tokens=3)
    assert second.responses == (TextResponse(content="bye"),)
    assert case.expects.tool_arguments_contain == (
        PayloadNeedle("echo", "日本語", 0),
        PayloadNeedle("echo", '{ "message" : "raw\\u00e9" }'),
    )
    assert case.expects.response_matches == ("^b\\w+$",)
    assert case.expects.exact_tool_calls == 2


def test_source_does_not_take_part_in_equality(tmp_path: Path) -> None:
    a = admitted(tmp_path, "a.yaml", SAME_YAML)
    b = admitted(tmp_path, "b.yaml", SAME_YAML)
    assert a.source != b.source
    assert a == b


def test_a_different_case_is_not_equal(tmp_path: Path) -> None:
    a = admitted(tmp_path, "a.yaml", SAME_YAML)
    b = admitted(tmp_path, "b.yaml", SAME_YAML.replace("content: bye", "content: bye!"))
    assert a != b


def test_regression_suite_formats_round_trip_to_the_same_data(tmp_path: Path) -> None:
    """Every committed example, rewritten in the other two formats, admits to the same case."""
    import tomli_w
    from ruamel.yaml import YAML

    suite = Path(__file__).resolve().parent.parent / "evals" / "regression"
    for fixture in sorted(suite.iterdir()):
        document = load_document(fixture)
        assert not isinstance(document, list), fixture
        original = admit(document)
        assert isinstance(original, Case), fixture
        data = document.data
        as_json = json.dumps(data, ensure_ascii=False, indent=2)
        yaml_path = tmp_path / (fixture.stem + ".yaml")
        with yaml_path.open("w", encoding="utf-8") as out:
            YAML(typ="safe", pure=True).dump(data, out)
        assert isinstance(data, dict)
        toml_text = tomli_w.dumps(data)
        for name, text in [(fixture.stem + ".json", as_json), (fixture.stem + ".toml", toml_text)]:
            assert admitted(tmp_path, name, text) == original, name
        assert admitted(tmp_path, yaml_path.name, yaml_path.read_text("utf-8")) == original


# --- TOML positions for schema errors in nested structures -------------------------------------

TOML_HEAD = 'name = "t"\n\n[[turns]]\nuser_input = "hi"\n\n'  # lines 1-5


@pytest.mark.parametrize(
    ("body", "line", "col", "message"),
    [
        (  # key in an array of tables: [[turns]]
            'bogus = 1\n\n[[turns.steps]]\nresponse = { type = "text", content = "ok" }\n',
            6,
            1,
            "unknown key 'bogus' in turns[0] (allowed: expects, steps, user_input)",
        ),
        (  # value in an inline table
            '[[turns.steps]]\nresponse = { type = "text", content = 42 }\n',
            7,
            39,
            "turns[0].steps[0].response.content must be a string, got integer 42",
        ),
        (  # key in a sub-table of an array of tables
            '[[turns.steps]]\n[turns.steps.response]\ntype = "text"\ncontent = "ok"\nextra = 1\n',
            10,
            1,
            "unknown key 'extra' in turns[0].steps[0].response "
            "(allowed: content, input_tokens, output_tokens, type)",
        ),
        (  # a deeper array of tables
            '[[turns.steps]]\n[turns.steps.response]\ntype = "tool_calls"\n\n'
            '[[turns.steps.response.tool_calls]]\nid = "c1"\nname = ""\narguments = {}\n',
            12,
            8,
            "turns[0].steps[0].response.tool_calls[0].name must not be empty",
        ),
        (  # dotted keys
            '[[turns.steps]]\nresponse.type = "text"\nresponse.content = "ok"\n'
            "response.tokens = 3\n",
            9,
            1,
            "unknown key 'tokens' in turns[0].steps[0].response (did you mean 'input_tokens'?)",
        ),
    ],
)
def test_toml_schema_errors_in_nested_structures_carry_a_line(
    tmp_path: Path, body: str, line: int, col: int, message: str
) -> None:
    text = TOML_HEAD + body + '\n[expects]\nresponse_contains = ["ok"]\n'
    error = only(refused(tmp_path, "nested.toml", text))
    assert error.message == message
    assert (error.line, error.col) == (line, col)


TOML_CASE = (
    TOML_HEAD + '[[turns.steps]]\nresponse = { type = "text", content = "ok" }\n\n'
)  # lines 1-8


@pytest.mark.parametrize(
    ("expects", "line", "col", "message"),
    [
        (
            '[expects]\nresponse_contain = ["ok"]\n',
            10,
            1,
            "unknown key 'response_contain' in expects (did you mean 'response_contains'?)",
        ),
        (
            '[expects]\nresponse_contains = [\n  "ok",\n  "",\n]\n',
            12,
            3,
            "expects.response_contains[1] must not be empty",
        ),
        (
            '[expects]\nresponse_contains = ["ok"]\n\n[[expects.tool_arguments_contain]]\n'
            'tool = "echo"\nneedle = ""\n',
            14,
            10,
            "expects.tool_arguments_contain[0].needle must not be empty",
        ),
        (
            '[expects]\nresponse_contains = ["ok"]\n\n[[expects.tool_arguments_contain]]\n'
            'needle = "a"\n',
            12,
            3,
            "missing required key 'tool' in expects.tool_arguments_contain[0]",
        ),
        (
            '[expects]\nresponse_contains = ["ok"]\n'
            'tool_results_contain = [{ tool = "t", needle = "n", call_index = -2 }]\n',
            11,
            66,
            "expects.tool_results_contain[0].call_index must be at least 0, got -2",
        ),
        (
            "[expects]\nmax_tool_calls = 1\nmin_tool_calls = 2\n",
            11,
            18,
            "expects.min_tool_calls (2) is greater than expects.max_tool_calls (1); no run can "
            "satisfy both",
        ),
        (
            '[expects]\nresponse_matches = ["(?=x)"]\n',
            10,
            21,
            'expects.response_matches[0] "(?=x)" is not valid RE2: invalid perl operator: (?= '
            "(RE2 has no backreferences or lookaround); "
            "patterns use the RE2 syntax of Go and Rust's regex crate",
        ),
        (
            '[expects]\ntools_not_used = ["rm"]\n',
            9,
            2,
            "every check passes on a run that did nothing (no reply, no tool calls), so this "
            "case can never fail; add a check the scripted run must satisfy, such as "
            "response_contains, tools_used or exact_tool_calls",
        ),
    ],
)
def test_toml_errors_in_expects_carry_a_line(
    tmp_path: Path, expects: str, line: int, col: int, message: str
) -> None:
    error = only(refused(tmp_path, "expects.toml", TOML_CASE + expects))
    assert error.message == message
    assert (error.line, error.col) == (line, col)


def test_toml_key_on_the_first_line_keeps_its_position(tmp_path: Path) -> None:
    text = "bogus = 1\n" + TOML_CASE + '[expects]\nresponse_contains = ["ok"]\n'
    error = only(refused(tmp_path, "first.toml", text))
    assert error.message.startswith("unknown key 'bogus' in the case")
    assert (error.line, error.col) == (1, 1)
    assert str(error) == f"{tmp_path / 'first.toml'}:1:1: {error.message}"


def test_toml_duplicate_ids_across_arrays_of_tables(tmp_path: Path) -> None:
    text = (
        TOML_HEAD
        + '[[turns.steps]]\n[turns.steps.response]\ntype = "tool_calls"\n'
        + '[[turns.steps.response.tool_calls]]\nid = "x"\nname = "echo"\narguments = {}\n'
        + '[[turns.steps]]\nresponse = { type = "text", content = "ok" }\n\n'
        + '[[turns]]\nuser_input = "again"\n[[turns.steps]]\n'
        + 'response = { type = "tool_calls", tool_calls = [{ id = "x", name = "e", '
        + 'arguments = "" }] }\n'
        + '[[turns.steps]]\nresponse = { type = "text", content = "ok" }\n'
        + "\n[expects]\nexact_tool_calls = 2\n"
    )
    error = only(refused(tmp_path, "ids.toml", text))
    assert error.message.startswith('turns[1].steps[0].response.tool_calls[0].id "x" is already')
    assert error.json_path == ("turns", 1, "steps", 0, "response", "tool_calls", 0, "id")
    assert (error.line, error.col) == (19, 56)


def test_toml_misspelled_required_key_reports_both_sides(tmp_path: Path) -> None:
    steps = '[[turns.steps]]\nrespons = { type = "text", content = "ok" }\n'
    text = TOML_HEAD + steps + '\n[expects]\nresponse_contains = ["ok"]\n'
    assert [(e.line, e.col, e.message) for e in refused(tmp_path, "r.toml", text)] == [
        (
            6,
            3,
            "turns[0].steps[0] has no 'response' key (did you mean 'response' for 'respons'?); "
            "a step is written - response: {type: text, content: ...} or - response: "
            "{type: tool_calls, tool_calls: [...]}",
        ),
    ]
    expects = (
        '[expects]\nresponse_contains = ["ok"]\n\n[[expects.tool_arguments_contain]]\n'
        'tool = "echo"\nneedle = "a"\n\n[[expects.tool_arguments_contain]]\n'
        'tool = "echo"\nneedl = "b"\n'
    )
    found = refused(tmp_path, "n.toml", TOML_CASE + expects)
    assert [(e.line, e.col, e.message) for e in found] == [
        (16, 3, "missing required key 'needle' in expects.tool_arguments_contain[1]"),
        (
            18,
            1,
            "unknown key 'needl' in expects.tool_arguments_contain[1] (did you mean 'needle'?)",
        ),
    ]
