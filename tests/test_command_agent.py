"""The agent-command runner: an external agent per case, talking to the replay endpoint, and
every way such a command can go wrong failing its case with a clear error."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evalrunner import SuiteReport, run_suite
from evalrunner.agents.command import command_agent_factory
from evalrunner.cli import app

AGENT = Path(__file__).resolve().parent / "support" / "wire_agent.py"

ECHO_TWO_TURNS = """\
name: echo-two-turns
turns:
  - user_input: echo alpha
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c1, name: echo, arguments: {message: alpha}}]
      - response: {type: text, content: "said alpha"}
  - user_input: echo beta
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c2, name: echo, arguments: {message: beta}}]
      - response: {type: text, content: "said beta"}
expects:
  response_contains: [beta]
  exact_tool_calls: 2
  tool_results_contain:
    - {tool: echo, needle: alpha, call_index: 0}
    - {tool: echo, needle: beta, call_index: 1}
"""


def command(mode: str) -> str:
    return shlex.join([sys.executable, str(AGENT), mode])


def run(tmp_path: Path, mode: str, timeout: float = 60, **options: float) -> SuiteReport:
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    (suite / "case.yaml").write_text(ECHO_TWO_TURNS, encoding="utf-8")
    outcome = run_suite(
        suite,
        agent_factory=command_agent_factory(command(mode), cwd=tmp_path, **options),
        case_timeout=timeout,
    )
    assert isinstance(outcome, SuiteReport)
    return outcome


def only_error(report: SuiteReport) -> str:
    (case,) = report.cases
    assert case.error is not None, case
    return case.error


def test_a_correct_command_agent_passes_and_is_graded_at_the_boundary(tmp_path: Path) -> None:
    report = run(tmp_path, "ok")
    (case,) = report.cases
    assert case.passed, case
    assert len(case.grades) == 4
    assert case.llm_calls == 4


def test_garbage_on_stdout_fails_the_case(tmp_path: Path) -> None:
    error = only_error(run(tmp_path, "garbage"))
    assert error.startswith("the agent command printed 'hello, I am not JSON' for turn 1")
    assert 'not a reply line; stdout is for one JSON object per turn, {"reply": "..."}' in error


def test_exiting_early_fails_the_case_with_exit_code_and_stderr(tmp_path: Path) -> None:
    error = only_error(run(tmp_path, "exit"))
    assert error == (
        "the agent command exited before replying to turn 1 (it exited with code 3); "
        "its stderr ends:\nboom: the agent crashed"
    )


def test_a_hanging_command_times_out_and_is_stopped(tmp_path: Path) -> None:
    assert only_error(run(tmp_path, "hang", timeout=1)) == "timed out after 1s"


def test_a_missing_tool_result_is_a_run_error_naming_the_call(tmp_path: Path) -> None:
    error = only_error(run(tmp_path, "forget-result"))
    assert error == (
        'turn 1, model request 2: the result of tool call(s) "c1" (echo) was not fed back; the '
        "request after a tool-call response must carry exactly one result per call id"
    )


def test_replying_without_the_model_leaves_the_script_unconsumed(tmp_path: Path) -> None:
    error = only_error(run(tmp_path, "no-model"))
    assert error == "turn 1 scripted 2 response(s) the agent never requested"


def test_a_missing_program_is_refused_once_before_any_case(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'no-such-program-here' is not an executable file"):
        command_agent_factory("no-such-program-here --x", cwd=tmp_path)
    result = CliRunner().invoke(app, ["run", "--agent-command", "no-such-program-here"], env={})
    assert result.exit_code == 2
    assert result.stderr == (
        "agent_command: the program 'no-such-program-here' is not an executable file on PATH\n"
    )


def test_a_command_that_cannot_start_fails_the_case(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "case.yaml").write_text(ECHO_TWO_TURNS, encoding="utf-8")
    program = tmp_path / "agent.sh"
    program.write_text("#!/bin/sh\n", encoding="utf-8")
    program.chmod(0o755)
    factory = command_agent_factory("./agent.sh --x", cwd=tmp_path)
    program.unlink()  # gone between the check and the run
    outcome = run_suite(suite, agent_factory=factory)
    assert isinstance(outcome, SuiteReport)
    assert only_error(outcome).startswith(
        "cannot start agent command './agent.sh --x': No such file or directory"
    )


def test_the_flag_and_the_config_key_run_the_command(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "case.yaml").write_text(ECHO_TWO_TURNS, encoding="utf-8")
    result = CliRunner().invoke(
        app, ["run", "--suite", str(suite), "--agent-command", command("ok")], env={}
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    config = tmp_path / "evalrunner.toml"
    config.write_text(
        f"[eval]\nsuite_dir = 'suite'\nagent_command = '{command('garbage')}'\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["run", "--config", str(config)], env={})
    assert result.exit_code == 1
    assert "run error: the agent command printed" in result.stdout


@pytest.mark.parametrize("bad", ["", "   "])
def test_a_blank_command_is_a_config_error(tmp_path: Path, bad: str) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "case.yaml").write_text(ECHO_TWO_TURNS, encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--suite", str(suite), "--agent-command", bad])
    assert result.exit_code == 2
    assert "agent_command must not be blank" in result.stderr


def test_the_stderr_tail_is_shown_as_lines_in_the_table(tmp_path: Path) -> None:
    script = tmp_path / "noisy.py"
    script.write_text(
        "import sys\nsys.stdin.readline()\n"
        "print('first line', file=sys.stderr)\nprint('  ^ caret', file=sys.stderr)\n"
        "sys.exit(4)\n",
        encoding="utf-8",
    )
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "case.yaml").write_text(ECHO_TWO_TURNS, encoding="utf-8")
    result = CliRunner().invoke(
        app,
        ["run", "--suite", str(suite), "-q", "--agent-command", f"{sys.executable} {script}"],
        env={},
    )
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if "its stderr ends:" in line)
    assert lines[at + 1 : at + 3] == ["      first line", "        ^ caret"]


# --- agent_exit_grace_secs ----------------------------------------------------------------------


def test_the_default_exit_grace_outlasts_a_slow_teardown(tmp_path: Path) -> None:
    # An interpreter that takes over 2 s to exit once stdin closes (a heavy SDK) still passes.
    (case,) = run(tmp_path, "slow-exit").cases
    assert case.passed, case.error


def test_a_command_that_outlives_its_exit_grace_fails_naming_the_setting(tmp_path: Path) -> None:
    error = only_error(run(tmp_path, "linger", exit_grace=0.5))
    assert "did not exit within 0.5s after its stdin was closed" in error, error
    assert "agent_exit_grace_secs gives it longer" in error


def _cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    (suite / "case.yaml").write_text(ECHO_TWO_TURNS, encoding="utf-8")
    return CliRunner().invoke(app, [*args, "--suite", str(suite)], env=env or {})


def test_the_exit_grace_comes_from_the_flag_the_environment_or_the_file(tmp_path: Path) -> None:
    shown = _cli(tmp_path, "config", env={"EVALRUNNER_AGENT_EXIT_GRACE_SECS": "7.5"})
    assert shown.exit_code == 0, shown.stderr
    assert "agent_exit_grace_secs = 7.5  # EVALRUNNER_AGENT_EXIT_GRACE_SECS" in shown.stdout
    config = tmp_path / "evalrunner.toml"
    config.write_text("[eval]\nagent_exit_grace_secs = 30\n", encoding="utf-8")
    shown = _cli(tmp_path, "config", "--config", str(config))
    assert "agent_exit_grace_secs = 30.0" in shown.stdout, shown.stdout
    result = _cli(
        tmp_path, "run", "--agent-command", command("linger"), "--agent-exit-grace-secs", "0.5"
    )
    assert result.exit_code == 1
    assert "did not exit within 0.5s" in result.stdout


@pytest.mark.parametrize(
    ("where", "value", "problem"),
    [
        ("flag", "0", "--agent-exit-grace-secs: must be a number of seconds above 0 and at most"),
        ("flag", "301", "--agent-exit-grace-secs: must be a number of seconds above 0"),
        ("env", "-1", "EVALRUNNER_AGENT_EXIT_GRACE_SECS: must be a number of seconds above 0"),
        ("env", "five", "EVALRUNNER_AGENT_EXIT_GRACE_SECS: must be a number of seconds"),
        ("file", "0", "agent_exit_grace_secs must be above 0"),
        ("file", "1000", "agent_exit_grace_secs must be at most 300"),
        ("file", '"5"', "agent_exit_grace_secs"),
    ],
)
def test_an_exit_grace_out_of_bounds_is_refused(
    tmp_path: Path, where: str, value: str, problem: str
) -> None:
    if where == "flag":
        result = _cli(tmp_path, "run", "--agent-exit-grace-secs", value)
    elif where == "env":
        result = _cli(tmp_path, "run", env={"EVALRUNNER_AGENT_EXIT_GRACE_SECS": value})
    else:
        config = tmp_path / "evalrunner.toml"
        config.write_text(f"[eval]\nagent_exit_grace_secs = {value}\n", encoding="utf-8")
        result = _cli(tmp_path, "run", "--config", str(config))
    assert result.exit_code == 2, result.stdout
    assert problem in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
