"""JSON Schemas written inside a fixture (``response_json.schema``, ``arguments_schema``, a tool
double's ``parameters``): what admission refuses (reference cycles, ``$id``, patterns RE2
cannot compile, formats that would check nothing, ``false``), and grading that never raises
or hangs (RE2 patterns, values nested too deeply)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evalrunner import SuiteReport, run_suite
from evalrunner.cli import app
from evalrunner.expectations._json import NOT_JSON, parse, schema_errors
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_document
from evalrunner.model import Case
from evalrunner.schema_check import argument_problem, located, schema_problems

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "how-to" / "sequences-and-json.md"


def reply_case(reply: str, schema: object) -> dict[str, Any]:
    """A case whose one reply is ``reply``, checked by ``response_json: {schema: ...}``."""
    return {
        "name": "reply",
        "turns": [
            {"user_input": "go", "steps": [{"response": {"type": "text", "content": reply}}]}
        ],
        "expects": {"response_json": {"schema": schema}},
    }


def echo_case(message: str, arguments_schema: object) -> dict[str, Any]:
    """A case that calls ``echo`` with ``message``, matched with ``arguments_schema``."""
    call = {"id": "a", "name": "echo", "arguments": {"message": message}}
    return {
        "name": "echoed",
        "turns": [
            {
                "user_input": "go",
                "steps": [
                    {"response": {"type": "tool_calls", "tool_calls": [call]}},
                    {"response": {"type": "text", "content": "ok"}},
                ],
            }
        ],
        "expects": {
            "tool_calls_match": {"calls": [{"tool": "echo", "arguments_schema": arguments_schema}]}
        },
    }


def double_case(parameters: object) -> dict[str, Any]:
    """A case with a tool double ``t`` whose ``parameters`` is given, never called."""
    return {
        "name": "doubled",
        "tools": [{"name": "t", "parameters": parameters, "results": [{"returns": "ok"}]}],
        "turns": [{"user_input": "go", "steps": [{"response": {"type": "text", "content": "ok"}}]}],
        "expects": {"response_contains": ["ok"]},
    }


def outcome(tmp_path: Path, case: dict[str, Any]) -> Case | list[str]:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case, indent=2), "utf-8")
    document = load_document(path)
    assert not isinstance(document, list), document
    admitted = admit(document)
    if isinstance(admitted, Case):
        return admitted
    return [str(e).split("case.json:", 1)[1] for e in admitted]


def refusals(tmp_path: Path, case: dict[str, Any]) -> list[str]:
    found = outcome(tmp_path, case)
    assert isinstance(found, list), "admitted"
    return found


def failures(tmp_path: Path) -> list[str]:
    """Run the suite in ``tmp_path``; the details of its failed checks and its run errors."""
    report = run_suite(tmp_path)
    assert isinstance(report, SuiteReport), report
    return [g.detail for case in report.cases for g in case.grades if not g.passed] + [
        case.error for case in report.cases if case.error is not None
    ]


def cli(tmp_path: Path, case: dict[str, Any], command: str = "run") -> Any:
    suite = tmp_path / "evals"
    suite.mkdir(exist_ok=True)
    (suite / "case.json").write_text(json.dumps(case, indent=2), "utf-8")
    return runner.invoke(app, [command, str(suite)])


# --- reference cycles and $id --------------------------------------------------------------------

CYCLE = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}


def test_a_ref_cycle_in_response_json_is_refused_with_exit_2(tmp_path: Path) -> None:
    result = cli(tmp_path, reply_case('{"x": 5}', CYCLE))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert (
        'case.json:21:21: expects.response_json.schema.$defs.a.$ref: $ref "#/$defs/a" leads back '
        "to where it started without looking"
    ) in result.output, result.output
    assert '("#/$defs/a" -> "#/$defs/a")' in result.output


def test_a_ref_cycle_in_arguments_schema_is_refused_at_admission(tmp_path: Path) -> None:
    found = refusals(tmp_path, echo_case("hi", CYCLE))
    assert len(found) == 1 and "leads back to where it started" in found[0], found


def test_a_ref_cycle_in_a_doubles_parameters_is_refused(tmp_path: Path) -> None:
    [found] = refusals(tmp_path, double_case({"allOf": [{"$ref": "#"}]}))
    assert found.startswith('9:21: tools[0].parameters.allOf[0].$ref: $ref "#" leads back'), found
    assert '("#" -> "#/allOf/0" -> "#")' in found


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
         "$ref": "#/$defs/a"},
        {"$defs": {"a": {"$anchor": "a", "not": {"$ref": "#a"}}}},
        {"if": {"type": "string"}, "then": {"$ref": "#"}},
        {"else": {"$dynamicRef": "#"}},
        {"dependentSchemas": {"k": {"oneOf": [{"$ref": "#"}]}}},
    ],
)  # fmt: skip
def test_every_chain_that_would_never_end_is_refused(schema: dict[str, Any]) -> None:
    problems = schema_problems(schema)
    assert problems and all("leads back to where it started" in p.message for p in problems)


def test_recursion_that_descends_into_the_value_is_admitted_and_checks(tmp_path: Path) -> None:
    tree = {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "children": {"items": {"$ref": "#"}}},
    }
    good = '{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}'
    bad = '{"name": "a", "children": [{"name": "b", "children": [{"nam": "c"}]}]}'
    assert isinstance(outcome(tmp_path, reply_case(good, tree)), Case)
    assert failures(tmp_path) == []
    (tmp_path / "case.json").write_text(json.dumps(reply_case(bad, tree)), "utf-8")
    [failed] = failures(tmp_path)
    assert "'name' is a required property" in failed


def test_an_id_with_a_local_ref_is_refused_not_a_crash_at_grading(tmp_path: Path) -> None:
    schema = {
        "$defs": {"a": {"type": "string"}},
        "type": "object",
        "properties": {"x": {"$id": "http://example.com/sub", "$ref": "#/$defs/a"}},
    }
    result = cli(tmp_path, reply_case('{"x": 5}', schema))
    assert result.exit_code == 2, result.output
    assert "$id is not allowed in a fixture's schema" in result.output
    assert "Traceback" not in result.output


def test_a_reference_to_a_part_that_is_no_schema_is_refused() -> None:
    [problem] = schema_problems({"properties": {"a": {"const": 1}}, "$ref": "#/properties"})
    assert "points at a part of this schema that is not a schema" in problem.message
    [problem] = schema_problems({"properties": {"a": {"const": {"type": "string"}}},
                                 "$ref": "#/properties/a/const"})  # fmt: skip
    assert "not a schema" in problem.message


# --- anchors --------------------------------------------------------------------------------------

ANCHORED = {
    "$defs": {"city": {"$anchor": "city", "type": "string"}},
    "type": "object",
    "properties": {"c": {"$ref": "#city"}},
    "required": ["c"],
}


def test_a_ref_to_an_anchor_is_admitted_and_checks(tmp_path: Path) -> None:
    assert isinstance(outcome(tmp_path, reply_case('{"c": "Paris"}', ANCHORED)), Case)
    assert failures(tmp_path) == []
    (tmp_path / "case.json").write_text(json.dumps(reply_case('{"c": 5}', ANCHORED)), "utf-8")
    [failed] = failures(tmp_path)
    assert "5 is not of type 'string'" in failed


def test_a_ref_to_a_missing_or_doubled_anchor_is_refused_with_its_reason() -> None:
    [missing] = schema_problems({**ANCHORED, "properties": {"c": {"$ref": "#town"}}})
    assert missing.path == ("properties", "c", "$ref")
    assert missing.message.startswith('$ref "#town" names no $anchor of this schema')
    doubled = {"$defs": {"a": {"$anchor": "x"}, "b": {"$anchor": "x"}}}
    [twice] = schema_problems(doubled)
    assert 'anchor "x" is already defined at' in twice.message


# --- RE2 patterns ---------------------------------------------------------------------------------

HOSTILE = "a" * 60 + "!"


def test_a_catastrophic_pattern_is_searched_in_linear_time_at_admission() -> None:
    # Python's engine would backtrack for longer than the age of the universe on this text;
    # the timeout only keeps a regression from hanging the suite.
    case = echo_case(HOSTILE, {"properties": {"message": {"pattern": "^(a+)+$"}}})
    probe = (
        "import json, sys\n"
        "from evalrunner.fixture.admit import admit\n"
        "from evalrunner.fixture.load import parse_document\n"
        "from pathlib import Path\n"
        "doc = parse_document(sys.stdin.buffer.read(), 'json', Path('case.json'))\n"
        "print(json.dumps([str(e) for e in admit(doc)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(case).encode(),
        capture_output=True,
        timeout=120,
        check=True,
    )
    [found] = json.loads(done.stdout)
    assert "arguments_schema rejects every scripted call" in found
    assert "does not match '^(a+)+$'" in found


@pytest.mark.parametrize(
    ("schema", "value", "broken"),
    [
        ({"pattern": "^(a+)+$"}, HOSTILE, True),
        ({"pattern": "^(a+)+$"}, "aaaa", False),
        ({"patternProperties": {"^(a+)+$": {"type": "integer"}}}, {HOSTILE: "x"}, False),
        ({"patternProperties": {"^(a+)+$": {}}, "required": ["z"]}, {HOSTILE: "x"}, True),
        ({"patternProperties": {"^(a+)+$": {"type": "integer"}}}, {"aaaa": "x"}, True),
        ({"patternProperties": {"^(a+)+$": True}, "additionalProperties": False},
         {HOSTILE: 1}, True),
        ({"patternProperties": {"^(a+)+$": True}, "additionalProperties": False},
         {"aa": 1}, False),
    ],
)  # fmt: skip
def test_a_catastrophic_pattern_is_searched_in_linear_time_when_grading(
    schema: object, value: object, broken: bool
) -> None:
    probe = (
        "import json, sys\n"
        "from evalrunner.expectations._json import schema_errors\n"
        "text, value = json.loads(sys.stdin.read())\n"
        "print(json.dumps(schema_errors(text, value)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps([json.dumps(schema), value]),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert bool(json.loads(done.stdout)) is broken, done.stdout


def test_patterns_are_re2s() -> None:
    # \p{L} is RE2 (Python's engine has no such class); \d is ASCII digits in RE2.
    letters = json.dumps({"pattern": r"^\p{L}+$"})
    assert schema_problems(json.loads(letters)) == []
    assert schema_errors(letters, "Zürich") == []
    assert schema_errors(letters, "Zürich1") == ["'Zürich1' does not match '^\\\\p{L}+$'"]
    digits = json.dumps({"pattern": r"^\d+$"})
    assert schema_errors(digits, "٣") != []  # an Arabic-Indic digit: Python's \d matches it
    assert argument_problem({"properties": {"n": {"pattern": "^[0-9]+$"}}}, {"n": "x"}) == (
        "'x' does not match '^[0-9]+$' (at $.n)"
    )


@pytest.mark.parametrize(
    ("schema", "path", "named"),
    [
        ({"pattern": "(?<=a)b"}, ("pattern",), '"(?<=a)b"'),
        (
            {"properties": {"a": {"pattern": "(a)\\1"}}},
            ("properties", "a", "pattern"),
            '"(a)\\\\1"',
        ),
        ({"patternProperties": {"(?=x)": {}}}, ("patternProperties", "(?=x)"), '"(?=x)"'),
    ],
)
def test_a_pattern_re2_cannot_compile_is_refused_naming_it(
    tmp_path: Path, schema: dict[str, Any], path: tuple[str, ...], named: str
) -> None:
    [problem] = schema_problems(schema)
    assert problem.path == path
    assert problem.message.startswith(f"pattern {named} is not a valid regular expression for RE2")
    assert "no lookaround and no backreferences" in problem.message
    [found] = refusals(tmp_path, reply_case("{}", schema))
    assert f"pattern {named} is not a valid regular expression for RE2" in found


def test_pattern_properties_beside_unevaluated_properties_is_refused() -> None:
    schema = {"patternProperties": {"^a": {}}, "unevaluatedProperties": False}
    [problem] = schema_problems(schema)
    assert problem.path == ("patternProperties",) and problem.key
    assert "cannot be used in a schema that also has unevaluatedProperties" in problem.message
    assert schema_problems({"patternProperties": {"^a": {}}, "additionalProperties": False}) == []


# --- format ---------------------------------------------------------------------------------------


def docs_contact_case() -> str:
    text = DOCS.read_text("utf-8")
    block = text.split("# evals/examples/json_contact.yaml\n", 1)[1].split("```", 1)[0]
    return block


def test_the_docs_format_example_passes_and_fails_on_a_bad_email(tmp_path: Path) -> None:
    block = docs_contact_case()
    (tmp_path / "contact.yaml").write_text(block, "utf-8")
    assert failures(tmp_path) == []
    for good, bad, why in [
        ("ada@example.com", "not an email", "'not an email' is not a 'email'"),
        ("2024-05-01", "2024-13-01", "'2024-13-01' is not a 'date'"),
        ('["ops"]', '["Ops"]', "'Ops' does not match '^[a-z]+$'"),
    ]:
        (tmp_path / "contact.yaml").write_text(block.replace(good, bad), "utf-8")
        [failed] = failures(tmp_path)
        assert why in failed, failed


@pytest.mark.parametrize("name", ["date", "email", "idn-email", "ipv4", "ipv6", "uuid"])
def test_each_asserted_format_is_checked(name: str) -> None:
    text = json.dumps({"format": name})
    assert schema_problems(json.loads(text)) == []
    assert schema_errors(text, "nope") == [f"'nope' is not a '{name}'"]


@pytest.mark.parametrize("name", ["date-time", "uri", "hostname", "no-such-format"])
def test_a_format_that_would_check_nothing_is_refused(tmp_path: Path, name: str) -> None:
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": name}}}
    result = cli(tmp_path, reply_case('{"when": "yesterday"}', schema), "validate")
    assert result.exit_code == 2, result.output
    assert f'format "{name}" is not checked by evalrunner, so it would check nothing' in (
        result.output
    )
    assert "describe the text with pattern" in result.output


def test_a_value_a_schema_refusal_quotes_is_printable_and_short(tmp_path: Path) -> None:
    # The value comes from the fixture: a bidi override or a line separator in it would reorder
    # or break the refusal's line, and a long one would bury it.
    schema = {"type": "string", "format": "da\u202ete\u2028" + "x" * 80}
    [found] = refusals(tmp_path, reply_case('"x"', schema))
    assert 'format "da\\u202ete\\u2028xxx' in found, found
    assert "\u202e" not in found and "\u2028" not in found and "x" * 60 not in found, found


def test_a_double_s_parameters_keep_any_format_as_an_annotation(tmp_path: Path) -> None:
    # A double's parameters describe the tool to the model, like the agent's real tool
    # definitions, which often say date-time or uri: there a format is an annotation, as the
    # model APIs treat it, while the same format in a check is refused above.
    when = {"type": "string", "format": "date-time"}
    parameters = {"type": "object", "properties": {"when": when}, "required": ["when"]}
    assert schema_problems(parameters, tool_parameters=True) == []
    assert schema_problems(parameters) != []
    case = {
        "name": "calendar",
        "tools": [{"name": "book", "parameters": parameters, "results": [{"returns": "booked"}]}],
        "turns": [
            {
                "user_input": "book it",
                "steps": [
                    {
                        "response": {
                            "type": "tool_calls",
                            "tool_calls": [
                                {"id": "b1", "name": "book", "arguments": {"when": "soon"}}
                            ],
                        }
                    },
                    {"response": {"type": "text", "content": "booked"}},
                ],
            }
        ],
        "expects": {"tools_used": ["book"]},
    }
    result = cli(tmp_path, case)
    assert result.exit_code == 0, result.output
    assert "1/1 cases passed" in result.output


# --- messages and false ---------------------------------------------------------------------------


def test_schema_messages_quote_with_double_quotes_wherever_the_schema_is(tmp_path: Path) -> None:
    [in_reply] = refusals(tmp_path, reply_case("{}", {"type": "object", "requried": ["a"]}))
    assert in_reply.endswith(
        'unknown JSON Schema keyword "requried", which would check nothing; did you mean '
        '"required"?'
    )
    assert in_reply.startswith("20:9: expects.response_json.schema.requried: ")
    [in_double] = refusals(tmp_path, double_case({"type": "object", "requried": ["a"]}))
    assert in_double.startswith("8:9: tools[0].parameters.requried: ")
    assert in_double.split(".requried: ")[1] == in_reply.split(".requried: ")[1]
    [meta] = refusals(tmp_path, reply_case("{}", {"minLength": "x"}))
    assert meta.endswith('not valid JSON Schema: "x" is not of type "integer"'), meta
    [apostrophe] = schema_problems({"minLength": "it's"})
    assert apostrophe.message == 'not valid JSON Schema: "it\'s" is not of type "integer"'


def test_located_words_a_problem_with_its_whole_path() -> None:
    [problem] = schema_problems({"properties": {"a b": {"requried": []}}})
    assert located(("tools", 0, "parameters"), problem) == (
        'tools[0].parameters.properties["a b"].requried: unknown JSON Schema keyword "requried", '
        'which would check nothing; did you mean "required"?'
    )


def test_a_schema_of_false_is_refused(tmp_path: Path) -> None:
    result = cli(tmp_path, reply_case("{}", False), "validate")
    assert result.exit_code == 2, result.output
    assert "the schema false accepts no value, so nothing can ever satisfy it" in result.output
    [problem] = schema_problems(False)
    assert problem.path == ()
    assert schema_problems(True) == []
    for nothing in ({"not": {}}, {"type": "object", "not": True}):
        [problem] = schema_problems(nothing)
        assert "accepts no value, so nothing can ever satisfy it" in problem.message
    assert schema_problems({"not": {"type": "string"}}) == []
    [meta] = schema_problems({"not": 1})  # 1 == True in Python, but it is no schema
    assert meta.path == ("not",) and "not valid JSON Schema" in meta.message


# --- grading never raises -------------------------------------------------------------------------


def test_a_reply_nested_too_deeply_fails_its_check_and_never_raises(tmp_path: Path) -> None:
    assert parse("[" * 100_000 + "]" * 100_000) == (
        NOT_JSON,
        "it nests arrays and objects too deeply to be read",
    )
    deep: object = "x"
    for _ in range(5000):
        deep = [deep]
    tree = json.dumps({"items": {"$ref": "#"}, "type": ["array", "string"], "format": "email"})
    assert schema_errors(tree, deep) == [
        "the value nests too deeply to be checked against the schema"
    ]
    assert argument_problem(json.loads(tree), deep) == (
        "the value nests too deeply to be checked against the schema"
    )
    case = reply_case("[" * 5000 + "]" * 5000, {"type": "array"})
    (tmp_path / "case.json").write_text(json.dumps(case), "utf-8")
    [failed] = failures(tmp_path)
    assert "the reply is not JSON (it nests arrays and objects too deeply to be read)" in failed


def test_a_schema_is_checked_beside_a_malformed_sibling(tmp_path: Path) -> None:
    case = reply_case("{}", {"requried": ["a"]})
    case["expects"]["response_json"]["bogus"] = 1
    call = {"tool": "echo", "arguments_schema": {"type": "objekt"}}
    case["expects"]["tool_calls_match"] = {"order": "sideways", "calls": [call]}
    found = refusals(tmp_path, case)
    assert [f.split(": ", 2)[1] for f in found] == [
        "expects.response_json.schema.requried",
        "unknown key 'bogus' in expects.response_json (allowed",
        'expects.tool_calls_match.order must be "in_order" or "any", got "sideways"',
        "expects.tool_calls_match.calls[0].arguments_schema.type",
    ], found
