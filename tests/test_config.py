"""Configuration: discovery, precedence, relative paths, errors with file:line (SPEC §9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalrunner.config import ConfigError, find_config_file, load_config, parse_mode

ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_any_config_file(tmp_path: Path) -> None:
    config = load_config(cwd=tmp_path, env={})
    assert config.file is None
    assert config.suite_dir == tmp_path / "evals/regression"
    assert (config.mode, config.max_tool_iterations) == ("replay", 10)
    assert set(config.sources.values()) == {"default"}


def test_evalrunner_toml_is_found_walking_up_and_paths_resolve_against_it(tmp_path: Path) -> None:
    write(tmp_path / "evalrunner.toml", '[eval]\nsuite_dir = "cases"\nmax_tool_iterations = 3\n')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    config = load_config(cwd=deep, env={})
    assert config.file == tmp_path / "evalrunner.toml"
    assert config.suite_dir == tmp_path / "cases"
    assert config.max_tool_iterations == 3
    assert config.sources["suite_dir"].endswith("evalrunner.toml:2")
    assert config.sources["max_tool_iterations"].endswith("evalrunner.toml:3")


def test_evalrunner_toml_beats_pyproject_in_the_same_directory(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.evalrunner.eval]\nsuite_dir = "from_pyproject"\n')
    write(tmp_path / "evalrunner.toml", '[eval]\nsuite_dir = "from_dedicated"\n')
    assert load_config(cwd=tmp_path, env={}).suite_dir == tmp_path / "from_dedicated"


def test_pyproject_without_the_table_is_skipped(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.evalrunner.eval]\nmode = "Replay "\n')
    inner = tmp_path / "pkg"
    write(inner / "pyproject.toml", '[project]\nname = "x"\n')
    assert find_config_file(inner) == tmp_path / "pyproject.toml"
    config = load_config(cwd=inner, env={})
    assert config.mode == "replay"
    assert config.sources["mode"].endswith("pyproject.toml:2")


def test_precedence_flag_over_env_over_file_over_default(tmp_path: Path) -> None:
    write(tmp_path / "evalrunner.toml", '[eval]\nsuite_dir = "file"\nmode = "replay"\n')
    env = {"EVALRUNNER_SUITE_DIR": "env", "EVALRUNNER_MODE": "LIVE"}
    from_env = load_config(cwd=tmp_path, env=env)
    assert from_env.suite_dir == tmp_path / "env"
    assert from_env.mode == "live"
    assert from_env.sources["suite_dir"] == "EVALRUNNER_SUITE_DIR"
    assert from_env.sources["mode"] == "EVALRUNNER_MODE"
    assert from_env.sources["max_tool_iterations"] == "default"
    from_flag = load_config(cwd=tmp_path, env=env, suite_dir=Path("flag"), mode="replay")
    assert from_flag.suite_dir == tmp_path / "flag"
    assert from_flag.mode == "replay"
    assert from_flag.sources["suite_dir"] == "--suite"


def test_explicit_config_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config_file=tmp_path / "nope.toml", cwd=tmp_path, env={})
    assert "config file not found" in caught.value.problems[0]


def test_unknown_key_is_an_error_with_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "evalrunner.toml", '[eval]\nmode = "replay"\nsuite_dri = "x"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    (problem,) = caught.value.problems
    assert problem.startswith(f"{path}:3: unknown key 'suite_dri' in eval")
    assert "suite_dir" in problem


def test_unknown_top_level_table_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "evalrunner.toml", "[evall]\nmode = 1\n")
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert "unknown key 'evall'" in caught.value.problems[0]
    assert ":1:" in caught.value.problems[0]


def test_bad_values_are_errors_with_file_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "evalrunner.toml", '[eval]\nsuite_dir = "ok"\nmax_tool_iterations = 0\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert caught.value.problems[0].startswith(f"{path}:3:")
    write(tmp_path / "evalrunner.toml", '[eval]\n\nmode = "fast"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert caught.value.problems == [f"{path}:3: mode must be 'replay' or 'live', got 'fast'"]


def test_invalid_toml_in_config_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "evalrunner.toml", "[eval\n")
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert "invalid TOML" in caught.value.problems[0]


@pytest.mark.parametrize(
    ("raw", "mode"), [("replay", "replay"), (" Replay ", "replay"), ("LIVE", "live")]
)
def test_mode_is_trimmed_and_lower_cased(raw: str, mode: str) -> None:
    assert parse_mode(raw, "--mode") == mode


def test_bad_mode_names_the_accepted_values() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_mode("record", "EVALRUNNER_MODE")
    assert caught.value.problems == [
        "EVALRUNNER_MODE: mode must be 'replay' or 'live', got 'record'"
    ]


def test_example_config_documents_every_key_and_is_valid(tmp_path: Path) -> None:
    example = (ROOT / "config.toml.example").read_text(encoding="utf-8")
    path = write(tmp_path / "evalrunner.toml", example)
    config = load_config(config_file=path, cwd=tmp_path, env={})
    assert config.suite_dir == tmp_path / "evals/regression"
    import json

    schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text(encoding="utf-8"))
    for key in schema["$defs"]["eval"]["properties"]:
        assert f"\n{key} = " in example or f"\n# {key} = " in example, key


def test_case_timeout_from_file_and_flag(tmp_path: Path) -> None:
    write(tmp_path / "evalrunner.toml", "[eval]\ncase_timeout_secs = 2.5\n")
    config = load_config(cwd=tmp_path, env={})
    assert config.case_timeout_secs == 2.5
    assert config.sources["case_timeout_secs"].endswith("evalrunner.toml:2")
    flagged = load_config(cwd=tmp_path, env={}, case_timeout_secs=7)
    assert (flagged.case_timeout_secs, flagged.sources["case_timeout_secs"]) == (
        7,
        "--case-timeout",
    )
    assert load_config(cwd=ROOT, env={}).case_timeout_secs == 120


@pytest.mark.parametrize("text", ["case_timeout_secs = 0", 'case_timeout_secs = "soon"'])
def test_bad_case_timeout_in_file_is_an_error(tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "evalrunner.toml", f"[eval]\n{text}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert caught.value.problems[0].startswith(f"{path}:2:")


def test_bad_case_timeout_flag_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={}, case_timeout_secs=0)
    assert "--case-timeout" in caught.value.problems[0]


def test_agent_tools_and_command_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path / "evalrunner.toml",
        '[eval]\nagent = "pkg.mod:make"\ntools = ["pkg.tools:clock"]\nbuiltin_tools = false\n',
    )
    config = load_config(cwd=tmp_path, env={})
    assert (config.agent, config.tools, config.builtin_tools) == (
        "pkg.mod:make",
        ("pkg.tools:clock",),
        False,
    )
    assert config.base_dir == tmp_path
    assert config.sources["agent"] == f"{path}:2"
    flagged = load_config(cwd=tmp_path, env={}, agent_command="node agent.js")
    assert (flagged.agent_command, flagged.agent) == ("node agent.js", None)
    assert flagged.sources["agent_command"] == "--agent-command"


def test_agent_and_agent_command_are_exclusive(tmp_path: Path) -> None:
    path = write(tmp_path / "evalrunner.toml", '[eval]\nagent = "a.b:c"\nagent_command = "x"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert caught.value.problems[0].startswith(f"{path}:2: agent and agent_command")


def test_a_malformed_agent_reference_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path / "evalrunner.toml", '[eval]\nagent = "no_colon_here"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert caught.value.problems[0].startswith(f"{path}:2:")
