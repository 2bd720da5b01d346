"""Agents written with the official ``openai`` SDK (chat completions, and the Responses API
with and without ``previous_response_id``) and ``anthropic`` SDK, run as external commands
(``agent_command``) against the replay endpoint, get the same verdict on every case as the
reference agent (checks, details and errors alike), failing cases included; one run of each
streams, one does not.

The suite is the whole gated regression suite, unchanged, plus cases that must fail and a
case that must error. The agents report their dispatches in the reply line, so every check
has evidence on both wires. The one real wire limit: the Anthropic wire carries a tool call's
arguments as a JSON object, so argument text that is not one cannot be sent (an explicit run
error) and text with its own spacing arrives re-serialised (the verbatim check fails); those
cases are held to exactly that, below.
"""

from __future__ import annotations

import copy
import json
import shlex
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from evalrunner import CaseReport, SuiteReport, run_suite
from evalrunner.agents.command import command_agent_factory
from evalrunner.fixture.load import load_suite

pytestmark = pytest.mark.skipif(
    find_spec("openai") is None or find_spec("anthropic") is None,
    reason="the openai and anthropic SDKs are test extras: pip install '.[test]'",
)

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "examples" / "sdk-agents"
REGRESSION = ROOT / "evals" / "regression"


def _is_object_text(arguments: object) -> bool:
    if not isinstance(arguments, str):
        return isinstance(arguments, dict)
    try:
        return isinstance(json.loads(arguments), dict)
    except json.JSONDecodeError:
        return False


def _calls(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        call
        for turn in case["turns"]
        for step in turn["steps"]
        for call in step["response"].get("tool_calls", [])
    ]


def _break_response(case: dict[str, Any]) -> None:
    case["expects"]["response_contains"] = ["text the reply does not have"]


def _break_arguments(case: dict[str, Any]) -> None:
    # (A count the script cannot meet is refused at admission, so a count cannot fail here.)
    case["expects"]["tool_arguments_contain"][0]["needle"] = "never in any arguments"


def _break_result(case: dict[str, Any]) -> None:
    case["expects"]["tool_results_contain"][0]["needle"] = "never in any result"


BREAKERS = {
    "response_contains": _break_response,
    "tool_arguments_contain": _break_arguments,
    "tool_results_contain": _break_result,
}
"""Ways to make a passing case fail, each by the expectation kind it breaks."""


@pytest.fixture(scope="module")
def wire_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    suite = tmp_path_factory.mktemp("wire-suite")
    cases: list[dict[str, Any]] = []
    for document in load_suite(REGRESSION).documents:
        case = copy.deepcopy(document.data)
        assert isinstance(case, dict)
        cases.append(case)
    # Each agent process starts its SDK (a second or two), so failing variants are made from
    # a few cases with tool loops, one per way of failing, rather than from all of them.
    with_tools = [c for c in cases if c["expects"].get("tool_results_contain")]
    for key, breaker in BREAKERS.items():
        case = next(
            c
            for c in with_tools
            if c["expects"].get(key)
            and "-must-fail" not in c["name"]
            and all(_is_object_text(call["arguments"]) for call in _calls(c))
        )
        variant = copy.deepcopy(case)
        breaker(variant)
        variant["name"] = f"{case['name']}-must-fail-{key}"
        cases.append(variant)
    errored = copy.deepcopy(cases[0])
    errored["name"] = "leftover-script-must-error"
    errored["turns"][-1]["steps"].append({"response": {"type": "text", "content": "unused"}})
    cases.append(errored)
    for number, case in enumerate(cases):
        (suite / f"{number:03d}.json").write_text(json.dumps(case), encoding="utf-8")
    return suite


Verdict = tuple[bool, str | None, list[tuple[str, bool, str]]]

ANTHROPIC_LIMITS = {
    "malformed-arguments-rejected": "has argument text that is not a JSON object",
    "non-object-arguments-rejected": "has argument text that is not a JSON object",
    "string-arguments-passed-verbatim": None,  # graded, and the verbatim check fails
}
"""Gated cases the Anthropic wire cannot carry as scripted, and how each must end there."""


def verdicts(report: SuiteReport) -> dict[str, Verdict]:
    def verdict(case: CaseReport) -> Verdict:
        return case.passed, case.error, [(g.check, g.passed, g.detail) for g in case.grades]

    return {case.name: verdict(case) for case in report.cases}


def run_with(suite: Path, script: str, *flags: str) -> SuiteReport:
    command = shlex.join([sys.executable, str(AGENTS / script), *flags])
    outcome = run_suite(
        suite, agent_factory=command_agent_factory(command, cwd=ROOT), case_timeout=60
    )
    assert isinstance(outcome, SuiteReport), outcome
    return outcome


@pytest.fixture(scope="module")
def reference(wire_suite: Path) -> SuiteReport:
    outcome = run_suite(wire_suite)
    assert isinstance(outcome, SuiteReport)
    passed = [c for c in outcome.cases if c.passed]
    failed = [c for c in outcome.cases if not c.passed and c.error is None]
    errored = [c for c in outcome.cases if c.error is not None]
    assert len(passed) >= 10 and len(failed) >= 3 and len(errored) == 1
    return outcome


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "flags"),
    [
        ("openai_agent.py", ()),
        ("openai_agent.py", ("--stream",)),
        ("openai_responses_agent.py", ()),
        ("openai_responses_agent.py", ("--stream",)),
        ("openai_responses_agent.py", ("--previous-response",)),
        ("openai_responses_agent.py", ("--stream", "--previous-response")),
        ("anthropic_agent.py", ()),
        ("anthropic_agent.py", ("--stream",)),
    ],
    ids=[
        "openai",
        "openai-stream",
        "responses",
        "responses-stream",
        "responses-previous",
        "responses-previous-stream",
        "anthropic",
        "anthropic-stream",
    ],
)
def test_sdk_agent_verdicts_equal_the_reference_agents(
    wire_suite: Path, reference: SuiteReport, script: str, flags: tuple[str, ...]
) -> None:
    report = run_with(wire_suite, script, *flags)
    api = {"anthropic_agent.py": "anthropic", "openai_responses_agent.py": "openai-responses"}.get(
        script, "openai"
    )
    got, expected = verdicts(report), verdicts(reference)
    if api == "anthropic":
        for name, error in ANTHROPIC_LIMITS.items():
            passed, seen, grades = got.pop(name)
            expected.pop(name)
            assert not passed, name
            if error is None:
                assert seen is None and [c for c, ok, _ in grades if not ok] == [
                    'tool_arguments_contain("echo", "{ \\"message\\" : \\"spaced_9c\\" }")'
                ], grades
            else:
                assert seen is not None and error in seen, seen
    assert got == expected
    assert all(r.api == api for r in run_suite_requests(wire_suite, script, flags)), api


def run_suite_requests(suite: Path, script: str, flags: tuple[str, ...]) -> list[Any]:
    """The requests of one case, to see which API and stream flag the agent really used."""
    from evalrunner.fixture.admit import admit
    from evalrunner.fixture.load import load_document
    from evalrunner.replay import run_case

    document = load_document(sorted(suite.iterdir())[0])
    assert not isinstance(document, list)
    case = admit(document)
    assert not isinstance(case, list)
    command = shlex.join([sys.executable, str(AGENTS / script), *flags])
    record = run_case(case, agent_factory=command_agent_factory(command, cwd=ROOT), timeout=60)
    assert record.requests
    assert all(r.stream == ("--stream" in flags) for r in record.requests)
    return list(record.requests)


def subset(tmp_path: Path, names: list[str]) -> Path:
    suite = tmp_path / "subset"
    suite.mkdir()
    for name in names:
        (suite / name).write_bytes((REGRESSION / name).read_bytes())
    return suite


def test_all_tools_succeeded_is_graded_on_the_openai_wire_from_the_reports(
    tmp_path: Path,
) -> None:
    suite = subset(tmp_path, ["echo_token_roundtrip.yaml", "unknown_tool_reported_as_failed.json"])
    report = run_with(suite, "openai_agent.py")
    for case in report.cases:
        assert case.passed, (case.name, case.error, case.grades)
        assert any(g.check.startswith("all_tools_succeeded(") for g in case.grades)


def test_the_anthropic_wire_refuses_arguments_that_are_not_an_object(tmp_path: Path) -> None:
    names = ["malformed_arguments_rejected.toml", "non_object_arguments_rejected.json"]
    report = run_with(subset(tmp_path, names), "anthropic_agent.py")
    for case in report.cases:
        assert case.error is not None
        assert "has argument text that is not a JSON object" in case.error
