"""Bring your own Python agent and tools: the factory and tool references of ``[eval]``,
their errors, async agents, and dispatches an agent forgets to report (a run error)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalrunner import SuiteReport, run_suite
from evalrunner.cli import app
from evalrunner.config import load_config
from evalrunner.plugins import PluginError, configured_agent, load_agent_factory, load_tools

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "python-agent"

ECHO_ONCE = """\
name: echo-once
turns:
  - user_input: echo hi
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c1, name: echo, arguments: {message: hi}}]
      - response: {type: text, content: done}
expects:
  exact_tool_calls: 1
  tool_results_contain: [{tool: echo, needle: hi}]
"""

AGENTS = '''
from evalrunner import Message, ModelRequest, TextResponse, ToolCallRecord
from evalrunner.boundary.tools import dispatch, tool_spec

closed = []


class Loop:
    """A minimal conformant agent loop: it keeps the whole conversation (the tool calls and
    replies included) and reports every dispatch, unless REPORT says otherwise."""

    REPORT = True

    def __init__(self, context):
        self.context = context
        self.history = []

    def respond(self, user_input):
        self.history.append(Message("user", user_input))
        while True:
            offered = tuple(tool_spec(t) for t in self.context.tools.values())
            response = self.context.provider.complete(ModelRequest(tuple(self.history), offered))
            if isinstance(response, TextResponse):
                self.history.append(Message("assistant", response.content))
                return response.content
            self.history.append(Message("assistant", "", tool_calls=response.tool_calls))
            for call in response.tool_calls:
                record = dispatch(self.context.tools, call)
                if self.REPORT:
                    self.context.observer.on_tool_call(record)
                self.history.append(Message("tool", record.result, tool_call_id=call.id))

    def close(self):
        closed.append(True)
        # Seen from the test too: the run's worker process, not the test's, runs the agent.
        with open(__file__ + ".closed", "w"):
            pass


class Silent(Loop):
    REPORT = False


class AsyncLoop(Loop):
    async def respond(self, user_input):
        return Loop.respond(self, user_input)


def make(context):
    return Loop(context)


def make_silent(context):
    return Silent(context)


def make_async(context):
    return AsyncLoop(context)


def two_arguments(context, extra):
    return Loop(context)


def broken_import():
    raise RuntimeError("never called")


class Clock:
    name = "clock"
    description = "The time."
    parameters = {"type": "object"}

    def call(self, arguments):
        return "12:00"


class EchoAgain(Clock):
    name = "echo"


not_a_tool = 42
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project directory with an agents module and a one-case suite."""
    (tmp_path / "my_agents.py").write_text(AGENTS, encoding="utf-8")
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "echo_once.yaml").write_text(ECHO_ONCE, encoding="utf-8")
    (tmp_path / "broken_module.py").write_text("raise ImportError('boom at import')\n", "utf-8")
    return tmp_path


def configure(project: Path, eval_table: str) -> Path:
    config = project / "evalrunner.toml"
    config.write_text('[eval]\nsuite_dir = "evals"\n' + eval_table, encoding="utf-8")
    return config


def run_cli(config: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["run", "--config", str(config)], env={})
    return result.exit_code, result.stdout, result.stderr


def test_a_configured_factory_runs_the_suite(project: Path) -> None:
    code, out, err = run_cli(configure(project, 'agent = "my_agents:make"\n'))
    assert (code, err) == (0, "")
    assert "✓ echo-once (echo_once.yaml)  2/2 checks" in out
    # close() was called after the case, in the worker process that ran it (the agent is the
    # project's code, so the run is supervised).
    assert (project / "my_agents.py.closed").exists()


def test_an_async_agent_runs(project: Path) -> None:
    code, out, _ = run_cli(configure(project, 'agent = "my_agents:make_async"\n'))
    assert code == 0, out


def test_unreported_dispatches_fail_and_say_so(project: Path) -> None:
    code, out, _ = run_cli(configure(project, 'agent = "my_agents:make_silent"\n'))
    assert code == 1
    lines = out.splitlines()
    assert lines[1].startswith("✗ echo-once (echo_once.yaml)  run error  ")
    assert lines[5] == (
        "    run error: turn 1: the agent fed back the result of "
        'tool call(s) "c1" (echo) but never reported dispatching them; report every dispatch '
        '(observer.on_tool_call, or "tool_calls" in a command agent\'s reply line)'
    )
    assert "0/1 cases passed (1 errored)" in out
    # A run error is not graded: nothing passes on the fed-back result alone.
    assert "✓" not in out


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('agent = "missing_module:make"\n', "missing_module:make: cannot import missing_module"),
        ('agent = "broken_module:make"\n', "cannot import broken_module: ImportError: boom"),
        ('agent = "my_agents:nope"\n', "module my_agents has no attribute 'nope'"),
        ('agent = "my_agents:not_a_tool"\n', "my_agents:not_a_tool: is a int, not a factory"),
        (
            'agent = "my_agents:two_arguments"\n',
            "the factory must accept exactly one argument, the evalrunner.AgentContext; "
            "its signature is (context, extra)",
        ),
        (
            'tools = ["my_agents:EchoAgain"]\n',
            "my_agents:EchoAgain: a tool named 'echo' already comes from the built-in tools "
            "(set builtin_tools = false to replace it)",
        ),
        (
            'tools = ["my_agents:Clock", "my_agents:Clock"]\n',
            "a tool named 'clock' already comes from my_agents:Clock",
        ),
        ('tools = ["my_agents:not_a_tool"]\n', "my_agents:not_a_tool: not a tool (name is not"),
    ],
)
def test_plugin_errors_exit_2_with_a_clear_message(project: Path, table: str, message: str) -> None:
    code, out, err = run_cli(configure(project, table))
    assert code == 2
    assert out == ""
    assert message in err
    assert "Traceback" not in err
    # Every refusal reads path:line:col, at the reference, and names the key it refuses.
    key = table.split(" =")[0]
    for line in err.splitlines():
        assert re.match(rf"^\S*evalrunner\.toml:3:\d+: \[eval\] {key}(\[\d\])?: ", line), line
    if "Clock" in table:  # the second of two references: its own column
        assert ":3:29: [eval] tools[1]: my_agents:Clock: a tool named 'clock'" in err


def test_a_plugin_error_from_the_environment_names_the_variable(project: Path) -> None:
    config = configure(project, "")
    result = CliRunner().invoke(
        app, ["run", "--config", str(config)], env={"EVALRUNNER_AGENT": "my_agents:nope"}
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "EVALRUNNER_AGENT: my_agents:nope: module my_agents has no attribute 'nope'"
    )


def test_builtin_tools_false_replaces_echo(project: Path) -> None:
    config = configure(project, 'tools = ["my_agents:EchoAgain"]\nbuiltin_tools = false\n')
    _, make_tools = configured_agent(load_config(config_file=config, env={}))
    tools = make_tools()
    assert sorted(tools) == ["echo"]
    assert tools["echo"].call({}) == "12:00"


def test_configured_tools_reach_the_reference_agent(project: Path) -> None:
    tools = load_tools(["my_agents:Clock"], project)
    assert sorted(tools) == ["clock", "echo"]
    (project / "evals" / "clock.yaml").write_text(
        ECHO_ONCE.replace("echo-once", "clock")
        .replace("name: echo", "name: clock")
        .replace("{tool: echo, needle: hi}", "{tool: clock, needle: '12:00'}"),
        encoding="utf-8",
    )
    outcome = run_suite(project / "evals", tools=tools)
    assert isinstance(outcome, SuiteReport) and outcome.all_passed


def test_load_agent_factory_rejects_a_malformed_reference(project: Path) -> None:
    with pytest.raises(PluginError) as caught:
        load_agent_factory("no_colon", project)
    assert "write 'package.module:name'" in caught.value.problems[0]


def test_the_python_agent_example_passes_its_own_suite(tmp_path: Path) -> None:
    # A copy, so the run's admission cache (written beside its config) stays out of the checkout.
    project = tmp_path / "python-agent"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", "run", "--format", "json"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["total"] == 4 and report["all_passed"]


def test_the_example_agent_is_really_graded(tmp_path: Path) -> None:
    """Its suite can fail: a fixture expecting a wrong conversion is a failed case."""
    suite = tmp_path / "evals"
    suite.mkdir()
    text = (EXAMPLE / "evals" / "convert_boiling_point.yaml").read_text(encoding="utf-8")
    (suite / "wrong.yaml").write_text(text.replace('needle: "212 F"', 'needle: "213 F"'), "utf-8")
    config = tmp_path / "evalrunner.toml"
    config.write_text(
        textwrap.dedent(
            """\
            [eval]
            suite_dir = "evals"
            agent = "units_agent:make_agent"
            tools = ["units_agent:ConvertTemperature", "units_agent:WordCount"]
            builtin_tools = false
            """
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(EXAMPLE)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'tool_results_contain("convert_temperature"[0], "213 F")' in done.stdout


def test_each_case_gets_its_own_instance_of_a_configured_tool_class(project: Path) -> None:
    (project / "counting.py").write_text(
        "class Counter:\n"
        "    name = 'count'\n"
        "    description = 'Counts its calls.'\n"
        "    parameters = {'type': 'object'}\n"
        "    def __init__(self):\n"
        "        self.calls = 0\n"
        "    def call(self, arguments):\n"
        "        self.calls += 1\n"
        "        return f'call {self.calls}'\n",
        encoding="utf-8",
    )
    case = ECHO_ONCE.replace("name: echo,", "name: count,").replace(
        "{tool: echo, needle: hi}", "{tool: count, needle: 'call 1'}"
    )
    for name in ("first", "second"):
        (project / "evals" / f"{name}.yaml").write_text(
            case.replace("echo-once", name), encoding="utf-8"
        )
    (project / "evals" / "echo_once.yaml").unlink()
    code, out, _ = run_cli(configure(project, 'tools = ["counting:Counter"]\n'))
    assert code == 0, out  # the second case's counter starts again at 1


@pytest.mark.parametrize("code", [0, 1, "bye"])
def test_a_module_that_exits_on_import_is_a_plugin_error_not_a_green_run(
    project: Path, code: object
) -> None:
    (project / "exits_on_import.py").write_text(f"raise SystemExit({code!r})\n", "utf-8")
    for table in ('agent = "exits_on_import:f"\n', 'tools = ["exits_on_import:T"]\n'):
        result = CliRunner().invoke(app, ["run", "--config", str(configure(project, table))])
        assert result.exit_code == 2, result.output
        assert f"cannot import exits_on_import: it called sys.exit({code!r})" in result.stderr
