"""The ``tool_calls`` the SDK example agents print in their reply lines are the dispatches the
reference agent records for the same case: same ids, names, results and success flags, in the
same order, with arguments as the parsed object or (when not a JSON object) the raw text.

The reply lines are captured with ``tee`` between the agent and the runner, so this holds
whether or not the runner reads the field itself.
"""

from __future__ import annotations

import copy
import json
import shlex
import shutil
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from evalrunner.agents.command import command_agent_factory
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_document, load_suite
from evalrunner.model import Case, ToolCallRecord
from evalrunner.replay import run_case

pytestmark = pytest.mark.skipif(
    find_spec("openai") is None or find_spec("anthropic") is None,
    reason="the openai and anthropic SDKs are test extras: pip install '.[test]'",
)
if shutil.which("tee") is None or shutil.which("sh") is None:
    pytest.skip("needs sh and tee to capture the reply lines", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "examples" / "sdk-agents"
REGRESSION = ROOT / "evals" / "regression"
REPLY_SCHEMA = ROOT / "schemas" / "agent-command" / "reply.schema.json"


def _object_arguments_only(data: dict[str, Any]) -> bool:
    """Whether every scripted call's arguments are a JSON object (all the Anthropic wire
    can carry)."""
    for turn in data["turns"]:
        for step in turn["steps"]:
            for call in step["response"].get("tool_calls", []):
                arguments = call["arguments"]
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments)
                    except json.JSONDecodeError:
                        return False
                if not isinstance(arguments, dict):
                    return False
    return True


def _cases(tmp_path: Path, *, objects_only: bool) -> list[Case]:
    cases: list[Case] = []
    for number, document in enumerate(load_suite(REGRESSION).documents):
        data = copy.deepcopy(document.data)
        assert isinstance(data, dict)
        if objects_only and not _object_arguments_only(data):
            continue
        # The OpenAI wires cannot carry this flag, and the runner refuses such cases
        # there; what the agent reports does not depend on it.
        data["expects"].pop("all_tools_succeeded", None)
        path = tmp_path / f"{number:03d}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        loaded = load_document(path)
        assert not isinstance(loaded, list)
        case = admit(loaded)
        assert not isinstance(case, list), case
        cases.append(case)
    return cases


def _reported(case: Case, script: str, log: Path) -> list[dict[str, Any]]:
    """The tool calls the agent reports over all of the case's reply lines."""
    agent = shlex.join([sys.executable, str(AGENTS / script)])
    command = ["sh", "-c", f"{agent} | tee -a {shlex.quote(str(log))}"]
    record = run_case(case, agent_factory=command_agent_factory(command, cwd=ROOT), timeout=60)
    assert record.error is None, record.error
    validator = Draft202012Validator(json.loads(REPLY_SCHEMA.read_text(encoding="utf-8")))
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    # The agents speak protocol 2: the handshake and the end of the case are not replies, and
    # each reply names its case.
    lines = [line for line in lines if "evalrunner" not in line and "ended" not in line]
    for line in lines:
        assert isinstance(line.pop("case"), str)
    assert len(lines) == len(case.turns)
    calls: list[dict[str, Any]] = []
    for line in lines:
        assert list(validator.iter_errors(line)) == []
        assert "tool_calls" in line  # always present: [] says "dispatched nothing"
        calls += line["tool_calls"]
    return calls


def _matches(reported: dict[str, Any], reference: ToolCallRecord) -> bool:
    arguments = reported["arguments"]
    if isinstance(arguments, dict):
        # The object reached the agent as text (OpenAI) or as an object (Anthropic).
        same_arguments = json.loads(reference.arguments) == arguments
    else:
        same_arguments = arguments == reference.arguments
    return same_arguments and (
        reported["id"],
        reported["name"],
        reported["result"],
        reported["success"],
    ) == (reference.id, reference.name, reference.result, reference.success)


@pytest.mark.slow
@pytest.mark.parametrize(
    "script", ["openai_agent.py", "openai_responses_agent.py", "anthropic_agent.py"]
)
def test_reported_calls_are_the_reference_agents_dispatches(tmp_path: Path, script: str) -> None:
    cases = _cases(tmp_path, objects_only=script.startswith("anthropic"))
    references = [run_case(case).tool_calls for case in cases]
    assert len(cases) >= 10
    assert any(not r.success for calls in references for r in calls), "no failed dispatch"
    for number, (case, reference) in enumerate(zip(cases, references, strict=True)):
        reported = _reported(case, script, tmp_path / f"{number:03d}.log")
        assert len(reported) == len(reference), (case.name, reported, reference)
        for entry, record in zip(reported, reference, strict=True):
            assert _matches(entry, record), (case.name, entry, record)
