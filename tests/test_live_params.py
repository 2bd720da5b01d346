"""An agent's own request parameters in live mode (issue 27): they pass through to the model
(translated between APIs), over ``[eval.live]``'s temperature and max_tokens, which win only
where ``pin`` names them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support.live_project import CALL, TEXT, WIRE_AGENT, cli, live_model_on, project
from support.model_server import ModelServer, Reply, Seen

from evalrunner.model import Message, ModelRequest, RunError
from evalrunner.wire.anthropic import AnthropicMessages
from evalrunner.wire.openai_chat import OpenAIChat
from evalrunner.wire.openai_responses import OpenAIResponses
from evalrunner.wire.params import live_options

CHAT_PARAMS: dict[str, Any] = {
    "temperature": 0.7,
    "max_tokens": 77,
    "tool_choice": "required",
    "parallel_tool_calls": False,
    "seed": 42,
    "stop": ["END"],
    "response_format": {"type": "json_object"},
}
USER = [{"role": "user", "content": "hi"}]


def test_each_wire_reads_the_parameters_a_request_sends() -> None:
    chat = OpenAIChat().read_request({"model": "m", "messages": USER, **CHAT_PARAMS})
    assert dict(chat.request.parameters) == CHAT_PARAMS
    responses = OpenAIResponses().read_request(
        {"model": "m", "input": "hi", "max_output_tokens": 9, "text": {"format": {"type": "text"}}}
    )
    assert dict(responses.request.parameters) == {
        "max_output_tokens": 9,
        "text": {"format": {"type": "text"}},
    }
    anthropic = AnthropicMessages().read_request(
        {
            "model": "m",
            "max_tokens": 5,
            "messages": USER,
            "stop_sequences": ["x"],
            "tool_choice": {"type": "any"},
        }
    )
    assert dict(anthropic.request.parameters) == {
        "max_tokens": 5,
        "stop_sequences": ["x"],
        "tool_choice": {"type": "any"},
    }


def test_the_agents_parameters_override_the_configs_unless_pinned() -> None:
    given = live_options("openai", CHAT_PARAMS, "openai", temperature=0.0, max_tokens=1024, pin=())
    assert given == CHAT_PARAMS
    pinned = live_options(
        "openai", CHAT_PARAMS, "openai", temperature=0.0, max_tokens=1024, pin=("temperature",)
    )
    assert pinned == {**CHAT_PARAMS, "temperature": 0.0}
    both = live_options(
        "openai",
        {"max_completion_tokens": 5},
        "openai",
        temperature=0.2,
        max_tokens=10,
        pin=("temperature", "max_tokens"),
    )
    assert both == {"temperature": 0.2, "max_tokens": 10}
    assert live_options("openai", {}, None, temperature=0.3, max_tokens=8, pin=()) == {
        "temperature": 0.3,
        "max_tokens": 8,
    }


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        (
            "anthropic",
            {
                "temperature": 0.7,
                "max_tokens": 77,
                "stop_sequences": ["END"],
                "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
            },
        ),
        (
            "openai-responses",
            {
                "temperature": 0.7,
                "max_output_tokens": 77,
                "parallel_tool_calls": False,
                "tool_choice": "required",
                "text": {"format": {"type": "json_object"}},
            },
        ),
    ],
)
def test_parameters_are_translated_for_another_wire(wire: str, expected: dict[str, Any]) -> None:
    options = live_options(wire, CHAT_PARAMS, "openai", temperature=0.0, max_tokens=1, pin=())
    assert options == expected


@pytest.mark.parametrize("pin", [[], ["temperature", "max_tokens"]])
def test_a_live_request_carries_the_agents_parameters(pin: list[str]) -> None:
    with ModelServer("openai", [Reply(TEXT)]) as server:
        live = live_model_on(server, pin=tuple(pin))
        request = ModelRequest((Message("user", "hi"),), api="openai", parameters=CHAT_PARAMS)
        live.complete(request)
    body = server.seen[0].body
    expected = dict(CHAT_PARAMS)
    if pin:
        expected.update(temperature=0.0, max_tokens=1024)
    for key, value in expected.items():
        assert body[key] == value, key


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory: pytest.TempPathFactory) -> list[Seen]:
    """One live run of the wire agent sending every parameter the tests below look for (the
    chat parameters live mode knows, and others it does not), and what the model received."""
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path_factory.mktemp("agent_run"), "openai", server.base_url)
        done = cli(
            cwd,
            "run",
            "--mode",
            "live",
            "--agent-command",
            f"{sys.executable} {WIRE_AGENT} ok",
            WIRE_AGENT_PARAMS=json.dumps({**CHAT_PARAMS, **EXTRA}),
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(server.seen) == 2
    return server.seen


def test_a_command_agents_parameters_reach_the_live_model(agent_run: list[Seen]) -> None:
    # Before: the model received temperature 0.0 and max_tokens 1024, the rest dropped.
    for body in (request.body for request in agent_run):
        for key, value in CHAT_PARAMS.items():
            assert body[key] == value, key


# --- an agent's output limit against the token budget (issue 27) ------------------------------


@pytest.mark.parametrize(
    ("api", "name", "value"),
    [
        ("openai", "max_tokens", 10**12),
        ("openai", "max_completion_tokens", 1e12),
        ("openai-responses", "max_output_tokens", 5001),
        ("anthropic", "max_tokens", 10**12),
    ],
)
def test_an_output_limit_above_the_whole_budget_is_refused_before_sending(
    api: str, name: str, value: float
) -> None:
    with ModelServer("openai", [Reply(TEXT)]) as server:
        live = live_model_on(server, max_total_tokens=5000)
        request = ModelRequest((Message("user", "hi"),), api=api, parameters={name: value})
        with pytest.raises(RunError) as caught:
            live.complete(request)
        assert server.seen == []
    shown = json.dumps(value)
    assert str(caught.value) == (
        f"live model: the agent's request asks for {name} = {shown} output tokens, more than "
        "the whole token budget (max_total_tokens = 5000): nothing was sent; lower it in the "
        'agent, or pin it in [eval.live] (pin = ["max_tokens"]) to send [eval.live]\'s '
        "max_tokens instead"
    )


def test_an_output_limit_within_the_budget_or_pinned_passes() -> None:
    with ModelServer("openai", [Reply(TEXT), Reply(TEXT)]) as server:
        hi = (Message("user", "hi"),)
        within = ModelRequest(hi, api="openai", parameters={"max_tokens": 5000})
        live_model_on(server, max_total_tokens=5000).complete(within)
        huge = ModelRequest(hi, api="openai", parameters={"max_tokens": 10**12})
        live_model_on(server, max_total_tokens=5000, pin=("max_tokens",)).complete(huge)
    assert [seen.body["max_tokens"] for seen in server.seen] == [5000, 1024]


# --- every parameter of the agent's own API passes; one another API cannot carry is refused ----

EXTRA = {"frequency_penalty": 0.5, "user": "agent-7", "logprobs": True, "metadata": {"k": "v"}}


def test_a_request_reads_every_field_the_api_does_not_leave_to_live_mode() -> None:
    body = {"model": "m", "messages": USER, "stream": False, "temperature": 0.7, **EXTRA}
    assert dict(OpenAIChat().read_request(body).request.parameters) == {
        "temperature": 0.7,
        **EXTRA,
    }
    anthropic = AnthropicMessages().read_request(
        {"model": "m", "max_tokens": 5, "system": "s", "messages": USER, "thinking": {"x": 1}}
    )
    assert dict(anthropic.request.parameters) == {"max_tokens": 5, "thinking": {"x": 1}}


def test_parameters_outside_the_known_list_pass_between_one_api(agent_run: list[Seen]) -> None:
    # Before: only the known list passed; these were dropped without a word.
    for body in (request.body for request in agent_run):
        for key, value in EXTRA.items():
            assert body[key] == value, key
        assert body["model"] == "local-test"


@pytest.mark.parametrize("agent_api", ["openai", "openai-responses", "anthropic"])
@pytest.mark.parametrize("wire", ["openai", "openai-responses", "anthropic"])
def test_the_agents_temperature_reaches_the_model_on_every_pair_of_apis(
    agent_api: str, wire: str
) -> None:
    with ModelServer(wire, [Reply(TEXT)]) as server:
        live = live_model_on(server)
        request = ModelRequest(
            (Message("user", "hi"),), api=agent_api, parameters={"temperature": 0.7}
        )
        live.complete(request)
    assert server.seen[0].body["temperature"] == 0.7


def test_a_parameter_another_api_cannot_carry_is_refused_before_sending() -> None:
    # Before: seed and frequency_penalty were dropped on the way to Anthropic, silently.
    with ModelServer("anthropic", [Reply(TEXT)]) as server:
        live = live_model_on(server)
        params = {
            "temperature": 0.7,
            "seed": 1,
            "frequency_penalty": 0.5,
            "parallel_tool_calls": True,
        }
        request = ModelRequest((Message("user", "hi"),), api="openai", parameters=params)
        with pytest.raises(RunError) as caught:
            live.complete(request)
        assert server.seen == []
    assert str(caught.value) == (
        "live model: the agent's request (on the openai API) sets seed, frequency_penalty, "
        "which the anthropic API (wire in [eval.live]) has no counterpart for: nothing was "
        "sent, since the model would answer a request the agent never made; leave it out of "
        'the agent\'s request, or set wire = "openai" (the API the agent speaks) with a '
        "base_url that serves it"
    )
