"""The request kinds: ``tools_offered``, ``tools_not_offered``, ``system_prompt_contains``.

Graded on :class:`ModelRequest` values, refused by admission where no run can pass them, and
given evidence on every agent path: the reference agent, a Python factory agent, and command
agents over the three wires (OpenAI chat completions, the Responses API, Anthropic messages),
whose requests the replay endpoint parses.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from evalrunner.agents.command import command_agent_factory
from evalrunner.agents.reference import AgentContext, ReferenceAgent
from evalrunner.expectations import grade_case
from evalrunner.expectations.requests import (
    NO_REQUEST,
    system_prompt_contains,
    tools_not_offered,
    tools_offered,
)
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_document
from evalrunner.model import (
    AdmissionError,
    Case,
    GradeResult,
    Message,
    ModelRequest,
    ModelResponse,
    RunRecord,
    ToolSpec,
)
from evalrunner.mutation.mutants import mutant
from evalrunner.replay import run_case

SPEC = {"type": "object"}


def request(
    *tools: str, system: str | None = None, choice: str = "auto", forced: str | None = None
) -> ModelRequest:
    messages = (Message("system", system),) if system is not None else ()
    return ModelRequest(
        (*messages, Message("user", "hi")),
        tuple(ToolSpec(name, "", SPEC) for name in tools),
        tool_choice=choice,  # type: ignore[arg-type]
        forced_tool=forced,
    )


def run(*requests: ModelRequest) -> RunRecord:
    return RunRecord(requests=requests)


def verdicts(results: list[GradeResult]) -> list[bool]:
    return [r.passed for r in results]


# --- graders --------------------------------------------------------------------------------------


def test_tools_offered_needs_every_request_to_offer_each_tool() -> None:
    both = run(request("echo", "search"), request("search", "echo"))
    assert verdicts(tools_offered(("echo", "search"), both)) == [True, True]
    dropped = run(request("echo", "search"), request("search"))
    [result] = tools_offered(("echo",), dropped)
    assert result.check == 'tools_offered("echo")'
    assert not result.passed
    assert result.detail == (
        'model request 2 of 2 did not offer "echo" (1 request(s) without it); it offered ["search"]'
    )


def test_an_agent_offering_no_tools_is_held_to_tools_offered() -> None:
    [result] = tools_offered(("echo",), run(request()))
    assert not result.passed
    assert "it offered []" in result.detail


def test_tool_choice_narrows_what_a_request_offers() -> None:
    none = run(request("echo", choice="none"))
    [result] = tools_offered(("echo",), none)
    assert not result.passed
    assert "under tool_choice none" in result.detail
    assert verdicts(tools_not_offered(("echo",), none)) == [True]
    forced = run(request("echo", "delete_account", choice="tool", forced="echo"))
    assert verdicts(tools_offered(("echo", "delete_account"), forced)) == [True, False]
    assert verdicts(tools_not_offered(("delete_account",), forced)) == [True]
    required = run(request("echo", choice="required"))
    assert verdicts(tools_offered(("echo",), required)) == [True]


def test_tools_not_offered_fails_on_any_request_that_offers_the_tool() -> None:
    runs = run(request("echo"), request("echo", "delete_account"))
    [result] = tools_not_offered(("delete_account",), runs)
    assert result.check == 'tools_not_offered("delete_account")'
    assert not result.passed
    assert result.detail.startswith('model request 2 of 2 offered "delete_account"')
    assert verdicts(tools_not_offered(("rm",), runs)) == [True]


def test_system_prompt_contains_reads_every_request_system_messages_joined() -> None:
    prompts = run(request(system="You answer about weather."), request(system="weather only"))
    assert verdicts(system_prompt_contains(("weather",), prompts)) == [True]
    split = ModelRequest((Message("system", "part one"), Message("system", "part two")))
    assert verdicts(system_prompt_contains(("one\npart two",), run(split))) == [True]
    lost = run(request(system="about weather"), request())
    [result] = system_prompt_contains(("weather",), lost)
    assert result.check == 'system_prompt_contains("weather")'
    assert not result.passed
    assert "model request 2 of 2" in result.detail
    assert "it has no system prompt" in result.detail


def test_system_prompt_contains_compares_in_nfc() -> None:
    decomposed = run(request(system="Cafe\u0301 menu"))
    assert verdicts(system_prompt_contains(("Café",), decomposed)) == [True]
    [result] = system_prompt_contains(("Tea",), decomposed)
    assert "compared in Unicode NFC form" in result.detail


def test_without_requests_only_tools_not_offered_passes() -> None:
    empty = RunRecord.empty()
    assert tools_offered(("echo",), empty) == [
        GradeResult('tools_offered("echo")', False, NO_REQUEST)
    ]
    assert system_prompt_contains(("x",), empty) == [
        GradeResult('system_prompt_contains("x")', False, NO_REQUEST)
    ]
    assert verdicts(tools_not_offered(("echo",), empty)) == [True]
    assert "no evidence" in NO_REQUEST


# --- admission ------------------------------------------------------------------------------------

TURN = """\
  - user_input: hi
    steps:
      - response: {type: text, content: hello}
"""


def errors(tmp_path: Path, text: str, name: str = "a.yaml") -> list[AdmissionError]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    document = load_document(path)
    assert not isinstance(document, list), document
    outcome = admit(document)
    assert isinstance(outcome, list), "expected the case to be refused"
    return outcome


def admitted(tmp_path: Path, text: str, name: str = "a.yaml") -> Case:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    document = load_document(path)
    assert not isinstance(document, list), document
    outcome = admit(document)
    assert isinstance(outcome, Case), [str(e) for e in outcome]
    return outcome


def test_a_tool_both_offered_and_not_offered_is_refused_at_the_entry(tmp_path: Path) -> None:
    text = (
        "name: c\nturns:\n" + TURN + "expects:\n  tools_offered: [echo, rm]\n"
        "  tools_not_offered: [ls, rm]\n"
    )
    [error] = errors(tmp_path, text)
    assert error.message == (
        'expects.tools_not_offered[1] "rm" is also in expects.tools_offered[1]; no model '
        "request can both offer it and not offer it; remove it from one of the lists"
    )
    assert (error.line, error.col) == (8, 27)
    assert error.json_path == ("expects", "tools_not_offered", 1)


def test_the_contradiction_is_refused_in_a_turn_at_its_position(tmp_path: Path) -> None:
    text = (
        "name: c\nturns:\n" + TURN + "    expects:\n      tools_offered: [rm]\n"
        "      tools_not_offered: [rm]\n"
    )
    [error] = errors(tmp_path, text)
    assert error.message.startswith(
        'turns[0].expects.tools_not_offered[0] "rm" is also in turns[0].expects.tools_offered[0]'
    )
    assert (error.line, error.col) == (8, 27)


@pytest.mark.parametrize("kind", ["tools_offered", "tools_not_offered", "system_prompt_contains"])
def test_a_blank_entry_is_refused(tmp_path: Path, kind: str) -> None:
    text = "name: c\nturns:\n" + TURN + f"expects:\n  {kind}: [' ']\n"
    [error] = errors(tmp_path, text)
    assert error.message.startswith(f"expects.{kind}[0] must not be blank")
    assert (error.line, error.col) == (7, len(kind) + 6)


@pytest.mark.parametrize("kind", ["tools_offered", "tools_not_offered"])
@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ('"t2\\n"', '"t2\\n"'),
        ('"\\0"', '"\\u0000"'),
        ("get.weather", '"get.weather"'),
        ("x" * 65, '"' + "x" * 65 + '"'),
    ],
)
def test_a_name_no_model_api_accepts_is_refused(
    tmp_path: Path, kind: str, name: str, shown: str
) -> None:
    # Such a check could never pass (offered) or never fail (not offered).
    for at, indent in (("expects", ""), ("turns[0].expects", "    ")):
        checks = f"{indent}  {kind}: [{name}]\n"
        text = "name: c\nturns:\n" + TURN + f"{indent}expects:\n{checks}"
        [error] = errors(tmp_path, text)
        assert error.message == (
            f"{at}.{kind}[0] {shown} is not a tool name every model API accepts, so no model "
            "request can offer it; use 1 to 64 letters, digits, '_' or '-'"
        )
    assert error.json_path == ("turns", 0, "expects", kind, 0)
    good = "name: c\nturns:\n" + TURN + f"expects:\n  {kind}: [{'x' * 64}, a-b_C9]\n"
    if kind == "tools_offered":
        admitted(tmp_path, good)


def test_tools_not_offered_alone_can_never_fail_and_is_refused(tmp_path: Path) -> None:
    text = "name: c\nturns:\n" + TURN + "expects:\n  tools_not_offered: [rm]\n"
    [error] = errors(tmp_path, text)
    assert error.message.startswith("every check passes on a run that did nothing")
    assert (error.line, error.col) == (6, 1)


@pytest.mark.parametrize("kind", ["tools_offered", "system_prompt_contains"])
def test_the_kinds_that_need_a_request_make_a_case_falsifiable(tmp_path: Path, kind: str) -> None:
    case = admitted(tmp_path, "name: c\nturns:\n" + TURN + f"expects:\n  {kind}: [x]\n")
    assert getattr(case.expects, kind) == ("x",)


# --- evidence: the reference agent and a Python factory -------------------------------------------

WEATHER = """\
name: weather-prompt
turns:
  - user_input: Weather in Paris?
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: w1, name: echo, arguments: {message: Paris}}]
      - response: {type: text, content: Paris is sunny.}
expects:
  tools_offered: [echo]
  tools_not_offered: [delete_account]
  system_prompt_contains: [weather]
"""


class WeatherAgent(ReferenceAgent):
    """The reference loop under a system prompt about weather."""

    def _ask(self) -> ModelResponse:
        messages = (Message("system", "You answer questions about the weather."), *self._history)
        return self._context.provider.complete(ModelRequest(messages, self._specs))


def weather_agent(context: AgentContext) -> WeatherAgent:
    return WeatherAgent(context)


def test_a_python_factory_agent_gives_the_evidence(tmp_path: Path) -> None:
    case = admitted(tmp_path, WEATHER)
    record = run_case(case, agent_factory=weather_agent)
    assert record.error is None
    results = grade_case(case, record)
    assert [r for r in results if not r.passed] == []
    assert len(results) == 3


def test_the_reference_agent_gives_the_evidence(tmp_path: Path) -> None:
    case = admitted(tmp_path, WEATHER)
    record = run_case(case)
    assert record.error is None
    by_check = {r.check: r for r in grade_case(case, record)}
    assert by_check['tools_offered("echo")'].passed
    assert by_check['tools_not_offered("delete_account")'].passed
    # The reference agent sends no system prompt.
    assert not by_check['system_prompt_contains("weather")'].passed


def test_the_reference_agents_system_prompt_heads_every_request_outside_the_history(
    tmp_path: Path,
) -> None:
    case = admitted(tmp_path, WEATHER)
    prompt = "You answer questions about the weather."
    record = run_case(case, agent_factory=lambda c: ReferenceAgent(c, system_prompt=prompt))
    assert record.error is None
    assert [r for r in grade_case(case, record) if not r.passed] == []
    assert len(record.requests) == 2
    for sent in record.requests:
        assert sent.messages[0] == Message("system", prompt)
        assert [m.role for m in sent.messages].count("system") == 1
    assert [m.role for m in record.requests[1].messages] == ["system", "user", "assistant", "tool"]


@pytest.mark.parametrize(
    ("name", "check"),
    [
        ("offers-extra-tool", 'tools_not_offered("delete_account")'),
        ("withdraws-tools", 'tools_offered("echo")'),
    ],
)
def test_the_request_mutants_are_killed_by_their_kind(
    tmp_path: Path, name: str, check: str
) -> None:
    text = WEATHER.replace("  system_prompt_contains: [weather]\n", "")
    case = admitted(tmp_path, text)
    baseline = grade_case(case, run_case(case))
    assert all(r.passed for r in baseline)
    record = run_case(case, agent_factory=mutant(name).factory)
    assert record.error is None
    failed = [r.check for r in grade_case(case, record) if not r.passed]
    assert failed == [check]


# --- evidence over the three wires ----------------------------------------------------------------

WIRE_AGENT = r"""
import json, os, sys, urllib.request

wire, prompt, tools, choice = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4]
tools = [t for t in tools if t]
history = []


def post(url, body, headers):
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **headers}
    req = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as response:
        return json.load(response)


def ask(user_input):
    if wire == "openai":
        history.append({"role": "user", "content": user_input})
        system = [{"role": "developer", "content": prompt}] if prompt else []
        body = {"model": "m", "messages": system + history}
        if tools:
            body["tools"] = [
                {"type": "function", "function": {"name": t, "parameters": {"type": "object"}}}
                for t in tools
            ]
        if choice:
            body["tool_choice"] = choice
        url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
        text = post(url, body, {"Authorization": "Bearer x"})["choices"][0]["message"]["content"]
        history.append({"role": "assistant", "content": text})
        return text
    if wire == "openai-responses":
        history.append({"role": "user", "content": user_input})
        body = {"model": "m", "input": history}
        if prompt:
            body["instructions"] = prompt
        if tools:
            body["tools"] = [
                {"type": "function", "name": t, "parameters": {"type": "object"}} for t in tools
            ]
        if choice:
            body["tool_choice"] = choice
        url = os.environ["OPENAI_BASE_URL"] + "/responses"
        out = post(url, body, {"Authorization": "Bearer x"})["output"]
        parts = [p for item in out if item["type"] == "message" for p in item["content"]]
        text = "".join(p["text"] for p in parts)
        history.append({"role": "assistant", "content": text})
        return text
    history.append({"role": "user", "content": user_input})
    body = {"model": "m", "max_tokens": 100, "messages": history}
    if prompt:
        body["system"] = [{"type": "text", "text": prompt}]
    if tools:
        body["tools"] = [{"name": t, "input_schema": {"type": "object"}} for t in tools]
    if choice:
        body["tool_choice"] = {"type": choice}
    url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
    headers = {"x-api-key": "x", "anthropic-version": "2023-06-01"}
    blocks = post(url, body, headers)["content"]
    text = "".join(b["text"] for b in blocks if b["type"] == "text")
    history.append({"role": "assistant", "content": text})
    return text


for line in sys.stdin:
    print(json.dumps({"reply": ask(json.loads(line)["user_input"])}), flush=True)
"""

TWO_TURNS = """\
name: offered-over-the-wire
turns:
  - user_input: Hello.
    steps:
      - response: {type: text, content: Hi there.}
    expects:
      tools_offered: [echo]
  - user_input: Bye.
    steps:
      - response: {type: text, content: Goodbye.}
    expects:
      response_contains: [Goodbye]
expects:
  tools_offered: [echo]
  tools_not_offered: [delete_account]
  system_prompt_contains: [weather]
"""

WIRES = ["openai", "openai-responses", "anthropic"]


def wire_run(
    tmp_path: Path, wire: str, prompt: str, tools: str, choice: str = ""
) -> dict[str, bool]:
    agent = tmp_path / "wire_agent.py"
    agent.write_text(WIRE_AGENT, encoding="utf-8")
    case = admitted(tmp_path, TWO_TURNS)
    command = shlex.join([sys.executable, str(agent), wire, prompt, tools, choice])
    factory = command_agent_factory(command, cwd=tmp_path)
    record = run_case(case, agent_factory=factory, timeout=60)
    assert record.error is None, record.error
    assert len(record.requests) == 2
    return {r.check: r.passed for r in grade_case(case, record)}


@pytest.mark.parametrize("wire", WIRES)
def test_a_command_agent_gives_the_evidence_over_each_wire(tmp_path: Path, wire: str) -> None:
    assert wire_run(tmp_path, wire, "You answer about the weather.", "echo") == {
        'tools_offered("echo")': True,
        'tools_not_offered("delete_account")': True,
        'system_prompt_contains("weather")': True,
        'turns[0].tools_offered("echo")': True,
        'turns[1].response_contains("Goodbye")': True,
    }


@pytest.mark.parametrize("wire", WIRES)
def test_a_wrong_request_fails_over_each_wire(tmp_path: Path, wire: str) -> None:
    assert wire_run(tmp_path, wire, "", "echo,delete_account", "none") == {
        'tools_offered("echo")': False,
        'tools_not_offered("delete_account")': True,
        'system_prompt_contains("weather")': False,
        'turns[0].tools_offered("echo")': False,
        'turns[1].response_contains("Goodbye")': True,
    }


@pytest.mark.parametrize("wire", WIRES)
def test_an_extra_tool_over_each_wire_fails_tools_not_offered(tmp_path: Path, wire: str) -> None:
    verdict = wire_run(tmp_path, wire, "weather", "echo,delete_account")
    assert verdict['tools_not_offered("delete_account")'] is False
    assert verdict['tools_offered("echo")'] is True
