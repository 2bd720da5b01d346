"""The weather example of docs/how-to/sequences-and-json.md, which is the contract of the new
kinds (tool doubles, per-turn ``expects``, ``tool_calls_match``, ``response_json`` and the
request kinds): it passes with the Python agent the page shows, run as the page runs it; the
reference agent passes it without ``system_prompt_contains``; and each way of breaking the
agent that the kinds exist to catch fails it, on the check that guards it or as a run error."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ruamel.yaml import YAML
from support.tiers import first_by_default
from typer.testing import CliRunner

from evalrunner import (
    AgentContext,
    CaseReport,
    Message,
    SuiteReport,
    ToolCall,
    ToolCallsResponse,
    ToolSpec,
    run_suite,
)
from evalrunner.agents.command import command_agent_factory
from evalrunner.cli import app
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import RawDocument, parse_document
from evalrunner.model import Case, Format
from evalrunner.toolbox.convert import Conversion, convert

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "how-to" / "sequences-and-json.md"


def page_files() -> dict[str, str]:
    """The page's file blocks (a block whose first line is ``# name``), by name."""
    text = PAGE.read_text(encoding="utf-8")
    found = {}
    for block in re.findall(r"^```[\w-]*\n(.*?)^```", text, re.S | re.M):
        first = block.split("\n", 1)[0]
        if re.fullmatch(r"# [\w./-]+\.(py|yaml|toml)", first):
            found[first[2:]] = block
    return found


FILES = page_files()
FIXTURE = "forecast-evals/two_cities.yaml"


def example() -> dict[str, Any]:
    """The page's fixture, as data."""
    data: dict[str, Any] = YAML(typ="safe", pure=True).load(FILES[FIXTURE])
    return data


def write_case(directory: Path, data: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "case.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


_loaded: list[ModuleType] = []


def weather_module() -> ModuleType:
    """The page's ``weather_agent.py``, imported once from its text."""
    if not _loaded:
        spec = importlib.util.spec_from_loader("docs_weather_agent", loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        exec(compile(FILES["weather_agent.py"], "weather_agent.py", "exec"), module.__dict__)
        _loaded.append(module)
    return _loaded[0]


def run_one(path: Path, factory: Callable[[AgentContext], Any] | None = None) -> CaseReport:
    outcome = run_suite([path]) if factory is None else run_suite([path], agent_factory=factory)
    assert isinstance(outcome, SuiteReport), "\n".join(outcome.lines())
    (report,) = outcome.cases
    return report


def failed(report: CaseReport) -> list[str]:
    return [f"{g.check}: {g.detail}" for g in report.grades if not g.passed]


def test_the_page_shows_the_fixture_the_agent_and_its_config() -> None:
    assert {FIXTURE, "weather_agent.py", "forecast.toml"} <= set(FILES)
    assert "def make_agent(" in FILES["weather_agent.py"]
    config = FILES["forecast.toml"]
    assert 'suite_dir = "forecast-evals"' in config
    assert 'agent = "weather_agent:make_agent"' in config


def test_the_example_holds_every_new_kind_at_both_levels() -> None:
    data = example()
    assert [t["name"] for t in data["tools"]] == ["get_weather", "send_email"]
    assert set(data["turns"][0]["expects"]) == {"response_json", "tool_calls_match"}
    assert set(data["expects"]) == {"tools_offered", "tools_not_offered", "system_prompt_contains"}


def test_the_python_agent_of_the_page_passes_the_example(tmp_path: Path) -> None:
    report = run_one(write_case(tmp_path, example()), weather_module().make_agent)
    assert report.error is None and report.passed, (report.error, failed(report))
    assert len(report.grades) == 6


def test_the_reference_agent_passes_it_without_system_prompt_contains(tmp_path: Path) -> None:
    whole = run_one(write_case(tmp_path / "whole", example()))
    assert [g.check.split("(")[0] for g in whole.grades if not g.passed] == [
        "system_prompt_contains"
    ]
    data = example()
    del data["expects"]["system_prompt_contains"]
    report = run_one(write_case(tmp_path / "without", data))
    assert report.error is None and report.passed, (report.error, failed(report))


# --- mutants ---------------------------------------------------------------------------------


def in_order(data: dict[str, Any]) -> dict[str, Any]:
    """The in_order variant: the expected calls listed as the script makes them."""
    data = copy.deepcopy(data)
    match = data["turns"][0]["expects"]["tool_calls_match"]
    match["order"] = "in_order"
    match["calls"].reverse()
    return data


def mutants() -> dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]], type, str]]:
    """Mutant → (the fixture it runs on, the broken agent, what must fail: a check's name, or
    ``run error: `` and words of the run error)."""
    base: Any = weather_module().WeatherAgent

    class WrongCity(base):  # type: ignore[misc, valid-type]
        """Asks the tool about another city than the model's call names."""

        def run_tool(self, name: str, argument_text: str) -> tuple[str, bool]:
            return super().run_tool(name, argument_text.replace("Rome", "Milan"))  # type: ignore[no-any-return]

    class SwapsCalls(base):  # type: ignore[misc, valid-type]
        """Dispatches the model's calls of one response last to first."""

        def respond(self, user_input: str) -> str:
            self.history.append(Message("user", user_input))
            while True:
                response = self.ask()
                if not isinstance(response, ToolCallsResponse):
                    self.history.append(Message("assistant", response.content))
                    return response.content  # type: ignore[no-any-return]
                self.history.append(Message("assistant", "", tool_calls=response.tool_calls))
                results = [self.call_tool(call) for call in reversed(response.tool_calls)]
                self.history.extend(reversed(results))

    class ExtraCall(base):  # type: ignore[misc, valid-type]
        """Asks for the first city's weather once more, on its own, as a call of its own."""

        def call_tool(self, call: ToolCall) -> Message:
            if call.id == "w1":
                super().call_tool(ToolCall("again", call.name, call.arguments))
            return super().call_tool(call)  # type: ignore[no-any-return]

    class OffersDeleteAccount(base):  # type: ignore[misc, valid-type]
        def __init__(self, context: AgentContext) -> None:
            super().__init__(context)
            self.offered.append(ToolSpec("delete_account", "Deletes the account.", {}))

    class DropsSystemPrompt(base):  # type: ignore[misc, valid-type]
        def __init__(self, context: AgentContext) -> None:
            super().__init__(context)
            self.history = [m for m in self.history if m.role != "system"]

    class CountsThreeCities(base):  # type: ignore[misc, valid-type]
        """Rewrites the model's JSON answer."""

        def respond(self, user_input: str) -> str:
            reply: str = super().respond(user_input)
            return reply.replace('"cities": 2', '"cities": 3')

    class AltersResult(base):  # type: ignore[misc, valid-type]
        """Feeds back a double's result other than it was returned."""

        def call_tool(self, call: ToolCall) -> Message:
            message: Message = super().call_tool(call)
            return Message("tool", message.content.upper(), tool_call_id=message.tool_call_id)

    same = example_as_is
    return {
        "wrong-city": (
            same,
            WrongCity,
            "run error: turn 1: the agent reported arguments "
            '"{\\"city\\":\\"Rome\\",\\"unit\\":\\"C\\"}" '
            'for tool call "w2" (get_weather), but the get_weather tool received '
            '"{\\"city\\":\\"Milan\\",\\"unit\\":\\"C\\"}"',
        ),
        "calls-swapped-in-order": (in_order, SwapsCalls, "turns[0].tool_calls_match"),
        # Conformance refuses a dispatch the model never asked for before any check reads it.
        "extra-call": (
            same,
            ExtraCall,
            'run error: turn 1: the agent reported dispatching tool call "again" (get_weather), '
            "but no such call's result was fed back to the model",
        ),
        "delete-account-offered": (same, OffersDeleteAccount, "tools_not_offered"),
        "system-prompt-dropped": (same, DropsSystemPrompt, "system_prompt_contains"),
        "cities-3": (same, CountsThreeCities, 'turns[0].response_json("/cities" = 2)'),
        "result-altered": (
            same,
            AltersResult,
            (
                'run error: turn 1: the agent reported result "Paris: 12C" for tool call "w1" '
                '(get_weather), but fed back "PARIS: 12C"'
            ),
        ),
    }


def example_as_is(data: dict[str, Any]) -> dict[str, Any]:
    return data


MUTANTS = sorted(mutants())


@pytest.mark.parametrize("name", MUTANTS)
def test_each_mutant_fails_the_example_on_the_check_that_guards_it(
    tmp_path: Path, name: str
) -> None:
    variant, broken, expected = mutants()[name]
    data = variant(example())
    # The fixture the mutant runs on is passed by the unbroken agent: the mutant alone fails it.
    sound = run_one(write_case(tmp_path / "sound", data), weather_module().make_agent)
    assert sound.passed, (sound.error, failed(sound))
    report = run_one(write_case(tmp_path / "broken", data), broken)
    assert not report.passed
    if expected.startswith("run error: "):
        assert report.error is not None and expected[len("run error: ") :] in report.error, (
            report.error
        )
        return
    assert report.error is None, report.error
    failing = [g.check for g in report.grades if not g.passed]
    assert len(failing) == 1 and failing[0].startswith(expected), failed(report)


def test_swapped_calls_pass_under_order_any(tmp_path: Path) -> None:
    """The swap is only wrong because in_order says so: the issue's order: any accepts it."""
    _, swaps, _ = mutants()["calls-swapped-in-order"]
    report = run_one(write_case(tmp_path, example()), swaps)
    assert report.passed, (report.error, failed(report))


# --- over the wires ----------------------------------------------------------------------------

WIRE_AGENT = ROOT / "tests" / "support" / "weather_wire_agent.py"
WIRES = ("openai", "anthropic")


def run_command_agent(tmp_path: Path, data: dict[str, Any], *argv: str) -> CaseReport:
    command = shlex.join([sys.executable, str(WIRE_AGENT), *argv])
    with command_agent_factory(command, cwd=tmp_path) as factory:
        return run_one(write_case(tmp_path / "evals", data), factory)


@pytest.mark.parametrize("wire", WIRES)
def test_the_example_passes_over_each_wire_and_its_in_order_variant_too(
    tmp_path: Path, wire: str
) -> None:
    for variant in (example(), in_order(example())):
        report = run_command_agent(tmp_path, variant, wire)
        assert report.error is None and report.passed, (wire, report.error, failed(report))
        assert len(report.grades) == 6


# The system prompt is read from another place on each wire: both run by default.
WIRE_BREAKS = [
    ("openai", "no-system", "system_prompt_contains"),
    ("anthropic", "no-system", "system_prompt_contains"),
    *first_by_default(
        [
            ("anthropic", "delete-account", "tools_not_offered"),
            ("openai", "delete-account", "tools_not_offered"),
            ("openai", "cities-3", 'turns[0].response_json("/cities" = 2)'),
            ("anthropic", "cities-3", 'turns[0].response_json("/cities" = 2)'),
        ]
    ),
]


@pytest.mark.parametrize(("wire", "broken", "check"), WIRE_BREAKS)
def test_a_broken_command_agent_fails_the_check_that_guards_it_over_each_wire(
    tmp_path: Path, wire: str, broken: str, check: str
) -> None:
    report = run_command_agent(tmp_path, example(), wire, broken)
    assert report.error is None, report.error
    failing = [g.check for g in report.grades if not g.passed]
    assert len(failing) == 1 and failing[0].startswith(check), failed(report)


# --- in every format ---------------------------------------------------------------------------


def fixture_document(text: str, fmt: Format, path: Path) -> RawDocument:
    document = parse_document(text.encode("utf-8"), fmt, path)
    assert not isinstance(document, list), [str(e) for e in document]
    return document


def test_the_example_round_trips_through_json_and_toml_to_the_same_case(tmp_path: Path) -> None:
    source = fixture_document(FILES[FIXTURE], "yaml", tmp_path / "two_cities.yaml")
    original = admit(source)
    assert isinstance(original, Case), original
    for first, second in (("json", "toml"), ("toml", "json"), ("toml", "yaml")):
        there = convert(source, first)
        assert isinstance(there, Conversion), [str(e) for e in there]
        back = convert(fixture_document(there.text, first, tmp_path / f"a.{first}"), second)
        assert isinstance(back, Conversion), [str(e) for e in back]
        assert there.case == back.case == original
    # And the case each format admits runs alike: the page's agent passes the TOML form.
    as_toml = convert(source, "toml")
    assert isinstance(as_toml, Conversion)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "two_cities.toml").write_text(as_toml.text, encoding="utf-8")
    outcome = run_suite([tmp_path / "evals"], agent_factory=weather_module().make_agent)
    assert isinstance(outcome, SuiteReport) and outcome.all_passed


def test_convert_to_toml_names_each_null_of_the_new_kinds(tmp_path: Path) -> None:
    data = example()
    data["tools"][0]["results"][1]["returns"]["wind"] = None
    data["turns"][0]["steps"][1]["response"]["content"] = (
        '{"answer": "x", "cities": 2, "gust": null}'
    )
    data["turns"][0]["expects"]["response_json"]["equals"]["/gust"] = None
    path = tmp_path / "nulls.json"
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    done = CliRunner().invoke(app, ["convert", str(path), "--to", "toml"])
    assert done.exit_code == 2, done.output
    lines = done.output.splitlines()
    assert lines[0].endswith(
        "tools[0].results[1].returns.wind is null, and TOML has no null; keep this fixture in "
        "JSON or YAML, or give a value other than null"
    )
    # The pointer's key is quoted, so the path reads as one path.
    assert (
        'turns[0].expects.response_json.equals["/gust"] is null, and TOML has no null' in lines[1]
    )
    assert re.match(rf"{re.escape(str(path))}:\d+:\d+: ", lines[1])
    # The fixture is fine; only TOML cannot hold it.
    assert lines[-1] == "TOML cannot hold this fixture as it is; nothing converted"
    assert "Traceback" not in done.output
    assert CliRunner().invoke(app, ["convert", str(path), "--to", "yaml"]).exit_code == 0


@pytest.mark.parametrize("wire", first_by_default(WIRES))
def test_the_reference_agent_command_passes_it_without_system_prompt_contains_on_each_wire(
    tmp_path: Path, wire: str
) -> None:
    data = example()
    del data["expects"]["system_prompt_contains"]
    command = shlex.join(
        [sys.executable, "-m", "evalrunner.mutation.mutants", "--wire", wire, "reference"]
    )
    with command_agent_factory(command, cwd=tmp_path) as factory:
        report = run_one(write_case(tmp_path / "evals", data), factory)
    assert report.error is None and report.passed, (wire, report.error, failed(report))
