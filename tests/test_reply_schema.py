"""The agent-command reply schema, read straight from its file: the old ``{"reply": ...}`` line
stays valid, the optional ``tool_calls`` report is accepted, and malformed reports are refused."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas/agent-command/reply.schema.json"

CALL: dict[str, Any] = {
    "id": "call_1",
    "name": "echo",
    "arguments": {"message": "hi"},
    "result": "hi",
    "success": True,
}


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    # The URL is an identifier, never fetched: the schema must not need the network.
    assert schema["$id"] == "https://evalrunner.dev/schemas/v1/agent-command/reply.schema.json"
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    return Draft202012Validator(schema)


def with_call(**changes: Any) -> dict[str, Any]:
    """A reply line with one tool call, ``CALL`` changed as given (``None`` removes a key)."""
    call = copy.deepcopy(CALL)
    for key, value in changes.items():
        if value is None:
            call.pop(key)
        else:
            call[key] = value
    return {"reply": "done", "tool_calls": [call]}


@pytest.mark.parametrize(
    "line",
    [
        {"reply": "hello"},
        {"reply": ""},
        {"reply": "done", "tool_calls": []},
        with_call(),
        with_call(arguments="{not json"),
        with_call(arguments="[1, 2]"),
        with_call(arguments={}),
        with_call(arguments={"nested": {"deep": [1, None, True]}}),
        with_call(name="no_such_tool", result="Unknown tool: no_such_tool", success=False),
        with_call(result=""),
        {
            "reply": "two calls",
            "tool_calls": [CALL, {**CALL, "id": "call_2", "success": False, "result": "x"}],
        },
    ],
    ids=[
        "old-shape",
        "empty-reply",
        "no-calls",
        "object-arguments",
        "malformed-argument-text",
        "non-object-argument-text",
        "empty-object",
        "nested-object",
        "unknown-tool",
        "empty-result",
        "two-calls",
    ],
)
def test_accepts(validator: Draft202012Validator, line: dict[str, Any]) -> None:
    assert list(validator.iter_errors(line)) == []


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (with_call(arguments=3), "is not of type 'object', 'string'"),
        (with_call(arguments=["message", "hi"]), "is not of type 'object', 'string'"),
        (with_call(arguments=False), "is not of type 'object', 'string'"),
        (with_call(result=None), "'result' is a required property"),
        (with_call(id=None), "'id' is a required property"),
        (with_call(success=None), "'success' is a required property"),
        (with_call(extra=1), "Additional properties are not allowed ('extra' was unexpected)"),
        (with_call(success="true"), "'true' is not of type 'boolean'"),
        (with_call(id=""), "'' should be non-empty"),
        (with_call(name=""), "'' should be non-empty"),
        (with_call(id=7), "7 is not of type 'string'"),
        (with_call(result=["hi"]), "['hi'] is not of type 'string'"),
        ({"reply": "done", "tool_calls": CALL}, "is not of type 'array'"),
        ({"reply": "done", "tool_calls": ["echo"]}, "'echo' is not of type 'object'"),
        ({"tool_calls": []}, "'reply' is a required property"),
        ({"reply": 1}, "1 is not of type 'string'"),
        ({"reply": "x", "calls": []}, "('calls' was unexpected)"),
    ],
    ids=[
        "arguments-number",
        "arguments-array",
        "arguments-bool",
        "missing-result",
        "missing-id",
        "missing-success",
        "extra-key",
        "success-string",
        "empty-id",
        "empty-name",
        "id-number",
        "result-array",
        "tool-calls-not-array",
        "call-not-object",
        "missing-reply",
        "reply-number",
        "unknown-top-level-key",
    ],
)
def test_rejects(validator: Draft202012Validator, line: dict[str, Any], why: str) -> None:
    messages = [error.message for error in validator.iter_errors(line)]
    assert len(messages) == 1, messages
    assert why in messages[0]
