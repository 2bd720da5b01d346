"""Every [eval] key has an EVALRUNNER_* variable (one list, held to the schema and the example
config); a variable beats the file and loses to a flag; a bad value names the variable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.config import ENV_VARIABLES, ConfigError, load_config

ROOT = Path(__file__).resolve().parent.parent


def test_every_key_has_a_variable_and_the_example_names_it() -> None:
    schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text("utf-8"))
    # [eval.live] and [eval.record] are tables of their own, set in the file only (the live
    # key is never in a file).
    tables = {"live", "record"}
    assert set(ENV_VARIABLES) == set(schema["$defs"]["eval"]["properties"]) - tables
    example = (ROOT / "config.toml.example").read_text("utf-8")
    for name in ENV_VARIABLES.values():
        assert name in example, name


def test_a_variable_beats_the_file_and_loses_to_a_flag(tmp_path: Path) -> None:
    (tmp_path / "evalrunner.toml").write_text(
        "[eval]\ncase_timeout_secs = 50\ntrimmed_history = false\n", encoding="utf-8"
    )
    env = {"EVALRUNNER_CASE_TIMEOUT_SECS": "30", "EVALRUNNER_TRIMMED_HISTORY": "true"}
    config = load_config(cwd=tmp_path, env=env)
    assert (config.case_timeout_secs, config.trimmed_history) == (30.0, True)
    assert config.sources["case_timeout_secs"] == "EVALRUNNER_CASE_TIMEOUT_SECS"
    flagged = load_config(cwd=tmp_path, env=env, case_timeout_secs=7.0)
    assert flagged.case_timeout_secs == 7.0
    assert load_config(cwd=tmp_path, env={}).case_timeout_secs == 50.0


def test_an_agent_command_from_the_environment_runs_from_the_working_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "evalrunner.toml").write_text("[eval]\n", encoding="utf-8")
    here = tmp_path / "project" / "sub"
    here.mkdir()
    config = load_config(cwd=here, env={"EVALRUNNER_AGENT_COMMAND": "python agent.py"})
    assert config.agent_command == "python agent.py"
    assert config.command_dir == here


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("EVALRUNNER_MAX_TOOL_ITERATIONS", "0", "must be a whole number from 1 to 10000"),
        ("EVALRUNNER_MAX_TOOL_ITERATIONS", "١٢", "must be a whole number from 1 to 10000"),
        ("EVALRUNNER_CASE_TIMEOUT_SECS", "1e10", "must be a number of seconds above 0"),
        ("EVALRUNNER_CASE_TIMEOUT_SECS", "nan", "must be a number of seconds above 0"),
        ("EVALRUNNER_CASE_TIMEOUT_SECS", "1_0", "must be a number of seconds above 0"),
        ("EVALRUNNER_CASE_TIMEOUT_SECS", "\u0661\u0660", "must be a number of seconds above 0"),
        ("EVALRUNNER_CASE_TIMEOUT_SECS", "0x10", "must be a number of seconds above 0"),
        ("EVALRUNNER_AGENT_COMMAND", 'python "agent.py', "not a command line a shell could split"),
        ("EVALRUNNER_AGENT_COMMAND", "python agent.py\\", "not a command line a shell could split"),
        ("EVALRUNNER_BUILTIN_TOOLS", "maybe", "must be true or false"),
        ("EVALRUNNER_AGENT", "no colon", 'must name a Python object as "package.module:name"'),
        ("EVALRUNNER_TOOLS", "a:b, ok", 'comma-separated "package.module:name" references'),
        ("EVALRUNNER_AGENT_COMMAND", "   ", "agent_command must not be blank"),
        ("EVALRUNNER_AGENT_COMMAND", "x\x00y", "holds a NUL character"),
    ],
)
def test_a_bad_variable_is_refused_naming_it(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(cwd=tmp_path, env={name: value})
    assert refused.value.problems[0].startswith(f"{name}: ")
    assert message in refused.value.problems[0]


def test_config_takes_the_run_flags_and_shows_where_each_value_came_from(
    tmp_path: Path,
) -> None:
    (tmp_path / "evalrunner.toml").write_text("[eval]\ncase_timeout_secs = 50\n", "utf-8")
    result = CliRunner().invoke(
        app,
        [
            "config",
            "--config",
            str(tmp_path / "evalrunner.toml"),
            "--case-timeout",
            "9",
            "--mode",
            "live",
        ],
        env={"EVALRUNNER_AGENT": "pkg.mod:make"},
    )
    assert result.exit_code == 0, result.output
    assert "case_timeout_secs = 9.0  # --case-timeout" in result.stdout
    assert 'mode = "live"  # --mode' in result.stdout
    assert 'agent = "pkg.mod:make"  # EVALRUNNER_AGENT' in result.stdout


def test_config_shows_normalised_paths_relative_to_where_you_stand(tmp_path: Path) -> None:
    import os

    (tmp_path / "pyproj").mkdir()
    (tmp_path / "pyproj" / "pyproject.toml").write_text(
        '[tool.evalrunner.eval]\nsuite_dir = "../mysuite"\n', encoding="utf-8"
    )
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(app, ["config", "--config", "pyproj/pyproject.toml"], env={})
    finally:
        os.chdir(before)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "# config file: pyproj/pyproject.toml"
    assert 'suite_dir = "mysuite"' in result.stdout


def test_config_errors_show_the_file_as_typed_from_where_you_stand(tmp_path: Path) -> None:
    import os

    (tmp_path / "evalrunner.toml").write_text('[eval]\ncase_timeout_secs = "ten"\n', "utf-8")
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(app, ["run"], env={})
    finally:
        os.chdir(before)
    assert result.exit_code == 2
    assert result.stderr == (
        'evalrunner.toml:2:21: eval.case_timeout_secs must be a number, got string "ten"\n'
    )


def test_an_empty_mode_variable_counts_as_unset(tmp_path: Path) -> None:
    config = load_config(cwd=tmp_path, env={"EVALRUNNER_MODE": ""})
    assert (config.mode, config.sources["mode"]) == ("replay", "default")


@pytest.mark.parametrize("command", ["config", "run"])
@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--case-timeout", "1_0", "--case-timeout: must be a decimal number of seconds"),
        ("--case-timeout", "inf", "--case-timeout: must be a decimal number of seconds"),
        ("--case-timeout", " 5e1000", "--case-timeout: must be a number of seconds above 0"),
        ("--agent-command", "python 'x.py", "--agent-command: agent_command is not a command"),
    ],
)
def test_config_refuses_the_flags_run_refuses(
    tmp_path: Path, command: str, flag: str, value: str, message: str
) -> None:
    result = CliRunner().invoke(app, [command, flag, value], env={})
    assert result.exit_code == 2
    assert result.stderr.startswith(message), result.stderr


def test_config_says_a_configured_agent_is_overridden_by_the_flag(tmp_path: Path) -> None:
    (tmp_path / "evalrunner.toml").write_text('[eval]\nagent = "pkg.mod:make"\n', "utf-8")
    result = CliRunner().invoke(
        app,
        ["config", "--config", str(tmp_path / "evalrunner.toml"), "--agent-command", "./a"],
        env={},
    )
    assert result.exit_code == 0, result.output
    assert "# agent is not used  # " in result.stdout
    assert (
        result.stdout.split("# agent is not used  # ")[1]
        .split("\n")[0]
        .endswith("evalrunner.toml:2, overridden by --agent-command")
    )
