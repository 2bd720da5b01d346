"""What an OpenAI request offers, as the wires read it: ``tool_choice: allowed_tools``
narrows the tools offered, and the legacy ``functions`` are refused rather than ignored."""

from __future__ import annotations

from typing import Any

import pytest

from evalrunner.boundary.conformance import ConversationMonitor
from evalrunner.boundary.provider import ReplayProvider
from evalrunner.expectations import grade
from evalrunner.model import (
    Expectations,
    ModelRequest,
    RunError,
    RunRecord,
    TextResponse,
    ToolCall,
    ToolCallRecord,
    ToolCallsResponse,
    Turn,
)
from evalrunner.wire.common import WireRequestError
from evalrunner.wire.openai_chat import OpenAIChat
from evalrunner.wire.openai_responses import OpenAIResponses

USER = {"role": "user", "content": "go"}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("echo", "get_weather")
]
RESPONSES_TOOLS = [
    {"type": "function", "name": name, "parameters": {"type": "object"}}
    for name in ("echo", "get_weather")
]


def chat(**fields: Any) -> ModelRequest:
    return OpenAIChat().read_request({"model": "m", "messages": [USER], **fields}).request


def responses(**fields: Any) -> ModelRequest:
    return OpenAIResponses().read_request({"model": "m", "input": [USER], **fields}).request


def offer_checks(request: ModelRequest, **expects: Any) -> list[tuple[bool, str]]:
    results = grade(Expectations(**expects), RunRecord(requests=(request,)))
    return [(r.passed, r.detail) for r in results]


@pytest.mark.parametrize("mode", ["auto", "required"])
def test_allowed_tools_offer_only_the_tools_allowed(mode: str) -> None:
    allowed = {"mode": mode, "tools": [{"type": "function", "function": {"name": "get_weather"}}]}
    request = chat(
        tools=CHAT_TOOLS, tool_choice={"type": "allowed_tools", "allowed_tools": allowed}
    )
    assert [spec.name for spec in request.tools] == ["get_weather"]
    assert request.tool_choice == ("required" if mode == "required" else "auto")
    [(passed, detail)] = offer_checks(request, tools_offered=("echo",))
    assert not passed and 'did not offer "echo"' in detail
    assert offer_checks(request, tools_not_offered=("echo",)) == [(True, "")]
    flat = {"type": "allowed_tools", "mode": mode, "tools": [{"type": "function", "name": "echo"}]}
    request = responses(tools=RESPONSES_TOOLS, tool_choice=flat)
    assert [spec.name for spec in request.tools] == ["echo"]
    assert offer_checks(request, tools_not_offered=("get_weather",)) == [(True, "")]


@pytest.mark.parametrize(
    ("choice", "message"),
    [
        (
            {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "auto",
                    "tools": [{"type": "function", "function": {"name": "delete_account"}}],
                },
            },
            'tool_choice.allowed_tools.tools[0] allows "delete_account", which the request\'s '
            "tools do not offer",
        ),
        (
            {"type": "allowed_tools", "allowed_tools": {"mode": "sometimes", "tools": []}},
            'tool_choice.allowed_tools.mode must be "auto" or "required"',
        ),
        (
            {
                "type": "allowed_tools",
                "allowed_tools": {"mode": "auto", "tools": [{"type": "mcp", "server_label": "x"}]},
            },
            'tool_choice.allowed_tools.tools[0].type must be "function"',
        ),
        (
            {"type": "allowed_tools", "allowed_tools": "echo"},
            "tool_choice.allowed_tools must be",
        ),
    ],
)
def test_allowed_tools_that_do_not_say_what_is_offered_are_refused(
    choice: dict[str, Any], message: str
) -> None:
    with pytest.raises(WireRequestError) as refused:
        chat(tools=CHAT_TOOLS, tool_choice=choice)
    assert message in str(refused.value)


@pytest.mark.parametrize(
    "legacy",
    [
        {"functions": [{"name": "delete_account", "parameters": {"type": "object"}}]},
        {"function_call": "auto"},
    ],
)
def test_the_legacy_functions_are_refused_not_ignored(legacy: dict[str, Any]) -> None:
    with pytest.raises(WireRequestError) as refused:
        chat(tools=CHAT_TOOLS, **legacy)
    [name] = legacy
    assert str(refused.value).startswith(
        f"{name} belongs to the legacy function-calling API, which is not replayed; offer the "
        'functions as "tools"'
    )


def test_a_scripted_call_to_a_tool_left_out_of_allowed_tools_is_flagged() -> None:
    echo = ToolCall("c1", "echo", '{"message":"hi"}')
    monitor = ConversationMonitor(
        ReplayProvider([Turn("go", (ToolCallsResponse((echo,)), TextResponse("done")))]), ["go"]
    )
    allowed = {"mode": "auto", "tools": [{"type": "function", "function": {"name": "get_weather"}}]}
    choice = {"type": "allowed_tools", "allowed_tools": allowed}
    monitor.begin_turn(0)
    monitor.complete(chat(tools=CHAT_TOOLS, tool_choice=choice))
    asked = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "echo", "arguments": echo.arguments},
            }
        ],
    }
    fed = {"role": "tool", "tool_call_id": "c1", "content": "hi"}
    body = {
        "model": "m",
        "messages": [USER, asked, fed],
        "tools": CHAT_TOOLS,
        "tool_choice": choice,
    }
    monitor.complete(OpenAIChat().read_request(body).request)
    with pytest.raises(RunError, match='"echo", which its model request did not offer'):
        monitor.end_turn([ToolCallRecord("echo", echo.arguments, "hi", True, "c1")], None)
