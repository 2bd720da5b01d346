"""The SDK examples' echo tool gives, call for call, the result text and success flag of the
reference agent's :func:`evalrunner.boundary.tools.dispatch` (the example does not import
evalrunner, so
this is what keeps the two in step), and reports arguments as the reply schema says."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from jsonschema import Draft202012Validator

from evalrunner.boundary.tools import builtin_tools, dispatch
from evalrunner.model import ToolCall

ROOT = Path(__file__).resolve().parent.parent


def _load_echo_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "echo_tool", ROOT / "examples" / "sdk-agents" / "echo_tool.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


echo_tool = _load_echo_tool()

ARGUMENT_TEXTS = [
    '{"message": "hi"}',
    '{"message": ""}',
    '{"message": 5}',
    "{}",
    '{"message": "caf\\u00e9 \u00e9 \\ud83d\\ude00"}',  # a valid surrogate pair is text
    '{"message": "a", "message": "b"}',  # duplicate keys: the last one wins
    '{"message": "\\ud800", "message": "ok"}',  # the dropped value is never looked at
    '{"message": "\\ud800"}',  # lone surrogate in a value
    '{"\\udc00": 1}',  # ... in a key
    '{"a": ["\\udbff"]}',  # ... nested
    '{"message": NaN}',
    '{"message": Infinity}',
    '{"message": -Infinity}',
    "NaN",
    "1e400",  # overflows to inf in Python, still a JSON number
    '{"message": 1e400}',
    "[1, 2]",
    "null",
    "true",
    "1.5",
    "7",
    '"text"',
    "",
    "   ",
    "{",
    "{'message': 'hi'}",
    '{"message": "hi"} trailing',
    "\ufeff{}",
    "[" * 100_000,
    '{"a": ' * 100_000,
    '{"a": ' * 200 + "1" + "}" * 200,  # deep but within any recursion limit
    "[" * 100_000 + "]" * 100_000,
]


@pytest.mark.parametrize("name", ["echo", "Echo", "missing"])
@pytest.mark.parametrize("text", ARGUMENT_TEXTS, ids=range(len(ARGUMENT_TEXTS)))
def test_result_and_success_equal_the_reference_dispatch(name: str, text: str) -> None:
    reference = dispatch(builtin_tools(), ToolCall("call_1", name, text))
    entry = echo_tool.dispatch("call_1", name, text)
    assert (entry["result"], entry["success"]) == (reference.result, reference.success)
    assert (entry["id"], entry["name"]) == ("call_1", name)


@pytest.mark.parametrize("text", ARGUMENT_TEXTS, ids=range(len(ARGUMENT_TEXTS)))
def test_arguments_are_the_object_when_valid_else_the_raw_text(text: str) -> None:
    entry = echo_tool.dispatch("call_1", "echo", text)
    if entry["success"]:
        assert entry["arguments"] == json.loads(text)
    else:
        assert entry["arguments"] == text


def test_entries_validate_against_the_reply_schema() -> None:
    schema_path = ROOT / "schemas" / "agent-command" / "reply.schema.json"
    validator = Draft202012Validator(json.loads(schema_path.read_text(encoding="utf-8")))
    shallow = [t for t in ARGUMENT_TEXTS if len(t) < 10_000]
    calls = [echo_tool.dispatch(f"call_{i}", "echo", t) for i, t in enumerate(shallow)]
    # The line is ASCII-escaped as the agents print it, and read back as the runner does.
    line = json.loads(json.dumps({"reply": "done", "tool_calls": calls}))
    assert list(validator.iter_errors(line)) == []


@pytest.mark.parametrize(
    "arguments",
    [{"to": "ada@example.com", "on": "2024-05-01"}, {"to": "nobody"}, {"to": "a@b", "on": "May"}],
)
def test_a_doubles_parameters_give_the_verdict_evalrunners_double_gives(
    arguments: dict[str, str],
) -> None:
    from evalrunner.boundary.tools import answer
    from evalrunner.model import DoubleRule, ToolDouble
    from evalrunner.schema_check import ASSERTED_FORMATS

    parameters = {
        "type": "object",
        "properties": {
            "to": {"type": "string", "format": "email"},
            "on": {"type": "string", "format": "date"},
        },
    }
    double = {"name": "mail", "description": "", "parameters": parameters}
    tools = echo_tool.CaseTools([{**double, "results": [{"returns": "sent"}]}])
    entry = tools.dispatch("c1", "mail", json.dumps(arguments))
    ours = answer(ToolDouble("mail", (DoubleRule(returns="sent"),), "", parameters), arguments)
    assert ours is not None
    kind, text = ours
    assert entry["success"] is (kind == "returns")
    assert entry["result"] == (text if kind == "returns" else f"Error: {text}")
    source = (ROOT / "examples" / "sdk-agents" / "echo_tool.py").read_text("utf-8")
    assert f"FormatChecker({json.dumps(list(ASSERTED_FORMATS))})" in source
