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
    assert problem.startswith(f"{path}:3:1: unknown key 'suite_dri' in eval (did you mean")
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
    assert caught.value.problems == [f"{path}:3:8: mode must be 'replay' or 'live', got 'fast'"]


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
        if key in ("live", "record"):
            assert f"\n[eval.{key}]\n" in example
            continue
        assert f"\n{key} = " in example or f"\n# {key} = " in example, key
    for table in ("live", "record"):
        section = example.split(f"\n[eval.{table}]\n", 1)[1].split("\n[", 1)[0]
        for key in schema["$defs"][table]["properties"]:
            assert f"\n{key} = " in section or f"\n# {key} = " in section, key


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
    assert caught.value.problems[0].startswith(f"{path}:2:1: agent and agent_command")


def test_a_malformed_agent_reference_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path / "evalrunner.toml", '[eval]\nagent = "no_colon_here"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert caught.value.problems[0].startswith(f"{path}:2:")


# --- every shape, in words, with a position (issue 9, classes 1, 4 and 7) ----------------------


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("pyproject.toml", "tool = 1\n", "1:8: tool must be a table ([tool]), got integer 1"),
        (
            "pyproject.toml",
            'tool = ["a"]\n',
            "1:8: tool must be a table ([tool]), got array",
        ),
        (
            "pyproject.toml",
            '[tool]\nevalrunner = "x"\n',
            '2:14: tool.evalrunner must be a table ([tool.evalrunner]), got string "x"',
        ),
        (
            "pyproject.toml",
            "[tool]\nevalrunner.eval = [1]\n",
            "2:19: tool.evalrunner.eval must be a table ([tool.evalrunner.eval]), got array",
        ),
        ("evalrunner.toml", "eval = 3\n", "1:8: eval must be a table ([eval]), got integer 3"),
        (
            "evalrunner.toml",
            "[[eval]]\nmode = 'replay'\n",
            "1:3: eval must be a table ([eval]), got array",
        ),
        (
            "evalrunner.toml",
            '[eval]\ncase_timeout_secs = "ten"\n',
            '2:21: eval.case_timeout_secs must be a number, got string "ten"',
        ),
        (
            "evalrunner.toml",
            "[eval]\nmax_tool_iterations = 1.0\n",
            "2:23: eval.max_tool_iterations must be a whole number (written without a decimal "
            "point), got float 1.0",
        ),
        (
            "evalrunner.toml",
            '[eval]\ntools = "a.b:c"\n',
            '2:9: eval.tools must be an array of strings, got string "a.b:c"',
        ),
        (
            "evalrunner.toml",
            "[eval]\ntools = [1]\n",
            "2:10: eval.tools[0] must be a string, got integer 1",
        ),
        (
            "evalrunner.toml",
            '[eval]\nbuiltin_tools = "yes"\n',
            '2:17: eval.builtin_tools must be true or false, got string "yes"',
        ),
        (
            "evalrunner.toml",
            "[eval]\nmode = 1\n",
            "2:8: eval.mode must be a string, got integer 1",
        ),
        (
            "evalrunner.toml",
            '[eval]\nagent = "no_colon_here"\n',
            '2:9: eval.agent must name a Python object as "package.module:name" (for example '
            '"my_agent.hooks:make_agent"), got string "no_colon_here"',
        ),
        ("evalrunner.toml", '[eval]\nsuite_dir = ""\n', "2:13: eval.suite_dir must not be empty"),
        (
            "evalrunner.toml",
            "[eval]\nsuite_dir = 2024-01-01\n",
            "2:13: date values are not allowed; quote the value to make it a string",
        ),
        (
            "pyproject.toml",
            "[tool.evalrunner.eval]\ncase_timeout_secs = nan\n",
            "2:21: NaN is not allowed; numbers must be finite",
        ),
    ],
)
def test_every_config_shape_gets_a_positioned_message_in_words(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = write(tmp_path / name, text)
    with pytest.raises(ConfigError) as caught:
        load_config(config_file=path, cwd=tmp_path, env={})
    assert caught.value.problems == [f"{path}:{problem}"]


def test_every_problem_of_a_config_file_is_reported_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path / "evalrunner.toml",
        '[eval]\nmode = 1\nsuite_dir = "a\\u0000b"\ntools = [2]\ncase_timeout = 3\n',
    )
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert [p.split(": ", 1)[0] for p in caught.value.problems] == [
        f"{path}:2:8",
        f"{path}:3:13",
        f"{path}:4:10",
        f"{path}:5:1",
    ]


def test_config_messages_never_show_jsonschema_or_regex_text(tmp_path: Path) -> None:
    path = write(
        tmp_path / "evalrunner.toml",
        '[eval]\ncase_timeout_secs = "ten"\nagent = "x"\ntools = ["y"]\n',
    )
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    text = "\n".join(caught.value.problems)
    assert "is not of type" not in text
    assert "[A-Za-z_]" not in text and "does not match" not in text
    assert str(path) in text


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "case_timeout_secs = 1e10",
            "2:21: eval.case_timeout_secs must be at most 86400, got float 10000000000.0",
        ),
        ("case_timeout_secs = inf", "2:21: Infinity is not allowed; numbers must be finite"),
        ("case_timeout_secs = -1", "2:21: eval.case_timeout_secs must be above 0, got integer -1"),
        (
            "max_tool_iterations = 99999999999",
            "2:23: eval.max_tool_iterations must be at most 10000, got integer 99999999999",
        ),
        (
            "max_tool_iterations = " + "9" * 5000,
            "2:23: an integer of 5000 digits is out of range: integers must be between "
            "-9223372036854775808 and 9223372036854775807 (64 bits); quote it to make it a string",
        ),
    ],
)
def test_numeric_config_values_are_bounded(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path / "evalrunner.toml", f"[eval]\n{text}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert caught.value.problems == [f"{path}:{problem}"]


@pytest.mark.parametrize("seconds", [1e10, float("inf"), float("nan"), -1.0, 86400.5])
def test_the_case_timeout_flag_is_bounded(tmp_path: Path, seconds: float) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={}, case_timeout_secs=seconds)
    assert caught.value.problems == [
        "--case-timeout: must be a number of seconds above 0 and at most 86400 (one day), "
        f"got {seconds:g}"
    ]


def test_the_bounds_in_code_are_the_bounds_in_the_schema() -> None:
    import json

    from evalrunner.config import MAX_CASE_TIMEOUT_SECS, MAX_TOOL_ITERATIONS

    schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text(encoding="utf-8"))
    keys = schema["$defs"]["eval"]["properties"]
    assert keys["case_timeout_secs"]["maximum"] == MAX_CASE_TIMEOUT_SECS
    assert keys["max_tool_iterations"]["maximum"] == MAX_TOOL_ITERATIONS


def test_a_nul_byte_in_a_configured_path_or_command_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / "evalrunner.toml",
        '[eval]\nsuite_dir = "ev\\u0000als"\nagent_command = "python\\u0000 x"\n',
    )
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert caught.value.problems == [
        f"{path}:2:13: eval.suite_dir holds a NUL character (\\x00), which no path or command "
        "can contain; remove it",
        f"{path}:3:17: eval.agent_command holds a NUL character (\\x00), which no path or "
        "command can contain; remove it",
    ]


def test_an_unrelated_pyproject_with_a_huge_number_does_not_stop_discovery(
    tmp_path: Path,
) -> None:
    write(tmp_path / "pyproject.toml", "[project]\nversion_code = " + "9" * 5000 + "\n")
    deep = tmp_path / "sub"
    deep.mkdir()
    assert find_config_file(deep) is None
    assert load_config(cwd=deep, env={}).file is None


def test_a_broken_pyproject_that_declares_our_table_is_reported_not_skipped(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path / "pyproject.toml", '[tool.evalrunner.eval]\nmode = "replay"\nx = ' + "9" * 5000
    )
    assert find_config_file(tmp_path) == path
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert caught.value.problems[0].startswith(f"{path}:3:5: an integer of 5000 digits")


def test_a_config_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "evalrunner.toml"
    os.mkfifo(fifo)
    assert find_config_file(tmp_path) == fifo  # found, so that loading it says what it is
    with pytest.raises(ConfigError) as caught:
        load_config(config_file=fifo, cwd=tmp_path, env={})
    assert caught.value.problems == [
        f"{fifo}: is a FIFO (named pipe), not a regular file; a config file must be a regular file"
    ]


@pytest.mark.parametrize("kind", ["fifo", "directory", "device link"])
def test_a_discovered_config_that_is_not_a_regular_file_is_refused_not_skipped(
    tmp_path: Path, kind: str
) -> None:
    import os

    config = tmp_path / "evalrunner.toml"
    if kind == "fifo":
        os.mkfifo(config)
    elif kind == "directory":
        config.mkdir()
    else:
        config.symlink_to("/dev/zero")
    with pytest.raises(ConfigError) as refused:
        load_config(cwd=tmp_path, env={})
    assert refused.value.problems[0].startswith(f"{config}: is a ")
    assert refused.value.problems[0].endswith("a config file must be a regular file")
