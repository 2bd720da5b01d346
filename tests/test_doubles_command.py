"""Tool doubles reach command agents: turn 1's line lists them (protocols 1 and 2), and the
SDK example agents and the mutants' command serve them with the reference agent's verdicts."""

from __future__ import annotations

import json
import shlex
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from evalrunner import CaseReport, run_suite
from evalrunner.agents.command import command_agent_factory
from evalrunner.fixture.admit import admit, build_case
from evalrunner.fixture.load import load_document
from evalrunner.fixture.schemas import schema_tree
from evalrunner.model import Case
from evalrunner.replay import run_case

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "examples" / "sdk-agents"

DOUBLES = [
    {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
        "results": [
            {"when": {"city": "Paris"}, "returns": "Paris: 12C"},
            {"when": {"city": "Rome"}, "returns": {"temp_c": 18, "city": "Rome"}},
            {"error": "unknown city"},
        ],
    },
    {"name": "send_email", "results": [{"returns": "sent"}]},
]

CALLS = [
    {"id": "w1", "name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}},
    {"id": "w2", "name": "get_weather", "arguments": {"city": "Rome", "unit": "C"}},
    {"id": "w3", "name": "get_weather", "arguments": {"city": "Oslo"}},
    {"id": "w4", "name": "get_weather", "arguments": {"town": "Oslo"}},
    {"id": "w5", "name": "send_email", "arguments": {}},
]


def case(name: str, calls: list[dict[str, Any]], turns: int = 1) -> dict[str, Any]:
    first = {
        "user_input": "Weather in Paris and Rome?",
        "steps": [
            {"response": {"type": "tool_calls", "tool_calls": calls}},
            {"response": {"type": "text", "content": "Paris 12C, Rome 18C"}},
        ],
    }
    more = [
        {"user_input": f"and {n}?", "steps": [{"response": {"type": "text", "content": "ok"}}]}
        for n in range(2, turns + 1)
    ]
    return {
        "name": name,
        "tools": DOUBLES,
        "turns": [first, *more],
        "expects": {
            "all_tools_succeeded": False,
            "tool_results_contain": [
                {"tool": "get_weather", "needle": "Paris: 12C"},
                {"tool": "get_weather", "needle": '{"city":"Rome","temp_c":18}', "call_index": 1},
                {"tool": "get_weather", "needle": "Error: unknown city", "call_index": 2},
                {
                    "tool": "get_weather",
                    "needle": "Invalid arguments for get_weather: 'city' is a required property",
                    "call_index": 3,
                },
                {"tool": "send_email", "needle": "sent"},
            ],
        },
    }


def suite(tmp_path: Path) -> Path:
    root = tmp_path / "evals"
    root.mkdir()
    (root / "weather.json").write_text(json.dumps(case("weather", CALLS, turns=2)))
    return root


def unanswered_case(tmp_path: Path) -> Case:
    """A case whose one scripted call no rule of its double answers. Admission refuses it
    (the run can only end in that error), so it is built as admission builds the cases it
    admits: the run's own guard, which every agent path must report alike, is what a live
    model or an agent that sends other arguments than the script's meets."""
    unanswered = [{"id": "u1", "name": "get_weather", "arguments": {"city": "Oslo"}}]
    only_paris = case("unanswered", unanswered)
    only_paris["tools"] = [{**DOUBLES[0], "results": DOUBLES[0]["results"][:1]}]
    only_paris["expects"] = {"exact_tool_calls": 1}
    path = tmp_path / "unanswered.json"
    path.write_text(json.dumps(only_paris))
    document = load_document(path)
    assert not isinstance(document, list), document
    assert isinstance(admit(document), list)  # refused at admission
    return build_case(only_paris, document)


def unanswered_error(tmp_path: Path, agent_factory: Any = None) -> str | None:
    """The error of the unanswered case's run with ``agent_factory`` (the reference agent's
    by default)."""
    built = unanswered_case(tmp_path)
    if agent_factory is None:
        return run_case(built).error
    return run_case(built, agent_factory=agent_factory, timeout=60).error


def reference_unanswered() -> str:
    """The reference agent's error on the unanswered call: every path gives the same."""
    return (
        'the tool double get_weather has no result for the call with arguments {"city":"Oslo"}: '
        "no rule of its results matches them; a fixture scripts every answer: add a rule whose "
        "`when` these arguments hold, or one without `when`"
    )


def verdicts(reports: tuple[CaseReport, ...]) -> dict[str, tuple[bool, str | None]]:
    return {r.name: (r.passed, r.error) for r in reports}


@pytest.mark.parametrize("protocol", ["1", "2"])
def test_turn_one_lists_the_doubles_as_the_turn_schema_says(
    tmp_path: Path, protocol: str
) -> None:
    log = tmp_path / "lines.jsonl"
    root = tmp_path / "evals"
    root.mkdir()
    (root / "weather.json").write_text(json.dumps(case("weather", CALLS, turns=2)))
    # The reference agent's command, behind a tee that keeps every line the runner writes.
    agent = shlex.join(
        [sys.executable, "-m", "evalrunner.mutation.mutants", "--wire", "openai", "reference"]
    )
    offer = "EVALRUNNER_PROTOCOLS=1 " if protocol == "1" else ""
    command = shlex.join(["sh", "-c", f"tee -a {shlex.quote(str(log))} | {offer}{agent}"])
    with command_agent_factory(command, cwd=tmp_path) as factory:
        report = run_suite(root, agent_factory=factory, case_timeout=60)
    assert report.cases[0].passed, report.cases[0]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    turns = [line for line in lines if "user_input" in line]
    # protocol 2: the opening line, then the case's lines; protocol 1: the case's lines
    case_lines = turns[1:] if protocol == "2" else turns
    assert [line["turn"] for line in case_lines] == [1, 2]
    assert case_lines[0]["tools"] == [
        {**DOUBLES[0]},
        {
            "name": "send_email",
            "description": "",
            "parameters": {},
            "results": [{"returns": "sent"}],
        },
    ]
    assert "tools" not in case_lines[1]
    from evalrunner.fixture.schemas import BASE_URI

    validator = schema_tree().reference(BASE_URI + "agent-command/turn.schema.json")
    if protocol == "1":  # protocol 2's lines carry case and workspace too
        for line in case_lines:
            assert not list(validator.iter_errors(line)), line


def test_the_mutants_command_serves_the_doubles(tmp_path: Path) -> None:
    root = suite(tmp_path)
    reference = verdicts(run_suite(root).cases)
    assert reference["weather"] == (True, None)
    assert unanswered_error(tmp_path) == reference_unanswered()
    for wire in ("openai", "anthropic"):
        command = shlex.join(
            [sys.executable, "-m", "evalrunner.mutation.mutants", "--wire", wire, "reference"]
        )
        with command_agent_factory(command, cwd=tmp_path) as factory:
            got = verdicts(run_suite(root, agent_factory=factory, case_timeout=60).cases)
            unanswered = unanswered_error(tmp_path, factory)
        assert got == reference, (wire, got)
        assert unanswered == reference_unanswered(), wire


SDK = pytest.mark.skipif(
    find_spec("openai") is None or find_spec("anthropic") is None,
    reason="the openai and anthropic SDKs are test extras: pip install '.[test]'",
)


@SDK
@pytest.mark.parametrize(
    "agent",
    [
        "openai_agent.py",
        pytest.param("anthropic_agent.py --per-case", marks=pytest.mark.slow),
        pytest.param("openai_responses_agent.py --stream", marks=pytest.mark.slow),
        pytest.param("openai_agent.py --per-case", marks=pytest.mark.slow),
    ],
)
def test_the_sdk_agents_serve_the_doubles(tmp_path: Path, agent: str) -> None:
    root = suite(tmp_path)
    script, *flags = agent.split()
    command = shlex.join([sys.executable, str(AGENTS / script), *flags])
    with command_agent_factory(command, cwd=tmp_path) as factory:
        got = verdicts(run_suite(root, agent_factory=factory, case_timeout=60).cases)
        unanswered = unanswered_error(tmp_path, factory)
    assert got["weather"] == (True, None), got
    assert unanswered == reference_unanswered()
