"""The command line: exit codes, where output goes, and that it only wraps the library."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.schemas import report_validator, schema_tree

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()

PASSING = """\
name: passing
turns:
  - user_input: say hi
    steps:
      - response: {type: text, content: hi there}
expects:
  response_contains: [hi]
"""

FAILING = """\
{"name": "failing",
 "turns": [{"user_input": "say hi", "steps": [{"response": {"type": "text", "content": "bye"}}]}],
 "expects": {"response_contains": ["hi"], "max_tool_calls": 0}}
"""

ERRORING = """\
name = "erroring"
[[turns]]
user_input = "say hi"
[[turns.steps]]
response = { type = "text", content = "hi" }
[[turns.steps]]
response = { type = "text", content = "left over" }
[expects]
response_contains = ["hi"]
"""


def suite(tmp_path: Path, files: dict[str, str]) -> Path:
    directory = tmp_path / "suite"
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env=env or {})
    return result.exit_code, result.stdout, result.stderr


def timeless(text: str) -> str:
    """The table with its durations (which depend on the clock) written as T."""
    return re.sub(r"\b\d+ ms\b|\b\d+\.\d\d s\b|\b\d+ min \d+ s\b", "T", text)


def test_passing_suite_exits_0_with_a_table(tmp_path: Path) -> None:
    directory = suite(tmp_path, {"a.yaml": PASSING})
    code, out, _ = invoke("run", "--suite", str(directory))
    assert code == 0
    assert timeless(out) == (
        f"suite {directory} · agent reference · replay mode\n"
        "✓ passing (a.yaml)  1/1 checks  T\n1/1 cases passed in T\n"
    )


def test_failing_and_errored_cases_exit_1_and_are_explained(tmp_path: Path) -> None:
    directory = suite(tmp_path, {"a.yaml": PASSING, "b.json": FAILING, "c.toml": ERRORING})
    code, out, _ = invoke("run", "--suite", str(directory))
    assert code == 1
    assert "\x1b[" not in out
    assert timeless(out).splitlines() == [
        f"suite {directory} · agent reference · replay mode",
        "✓ passing (a.yaml)  1/1 checks  T",
        "✗ failing (b.json)  1/2 checks  T",
        "✗ erroring (c.toml)  run error  T",
        "",
        "failures:",
        f"✗ failing ({directory / 'b.json'}:1)",
        '    ✗ response_contains("hi"): not found in response: "bye"',
        f"✗ erroring ({directory / 'c.toml'}:1)",
        "    run error: turn 1 scripted 1 response(s) the agent never requested",
        "1/3 cases passed (1 failed, 1 errored) in T",
    ]


def test_json_report_validates_against_the_report_schema(tmp_path: Path) -> None:
    directory = suite(tmp_path, {"a.yaml": PASSING, "b.json": FAILING, "c.toml": ERRORING})
    code, out, _ = invoke("run", "--suite", str(directory), "--format", "json")
    assert code == 1
    report = json.loads(out)
    assert list(report) == [
        "schema",
        "suite",
        "mode",
        "agent",
        "passed",
        "failed",
        "skipped",
        "total",
        "all_passed",
        "interrupted",
        "budget_spent",
        "trimmed_history",
        "duration_ms",
        "cases",
    ]
    assert not list(report_validator().iter_errors(report))
    assert (report["passed"], report["failed"], report["total"]) == (1, 2, 3)
    assert [c["source"] for c in report["cases"]] == ["a.yaml", "b.json", "c.toml"]
    assert report["cases"][2]["error"].startswith("turn 1 scripted 1 response(s)")


def test_output_file_gets_the_report_and_stdout_the_table(tmp_path: Path) -> None:
    directory = suite(tmp_path, {"a.yaml": PASSING})
    target = tmp_path / "out" / "report.json"
    target.parent.mkdir()
    target.write_text("previous", encoding="utf-8")
    code, out, _ = invoke(
        "run", "--suite", str(directory), "--format", "json", "--output", str(target)
    )
    assert code == 0
    assert timeless(out).endswith("1/1 cases passed in T\n")
    assert json.loads(target.read_text(encoding="utf-8"))["all_passed"] is True
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]


def test_unwritable_output_is_exit_2_with_a_clear_error_before_the_run(tmp_path: Path) -> None:
    directory = suite(tmp_path, {"a.yaml": PASSING})
    (tmp_path / "no").write_text("a file, not a directory", encoding="utf-8")
    code, out, err = invoke(
        "run", "--suite", str(directory), "--output", str(tmp_path / "no" / "r")
    )
    assert (code, out) == (2, "")  # refused before the run: no table
    assert err == (
        f"{tmp_path / 'no' / 'r'}: cannot write report: {tmp_path / 'no'} is not a directory, "
        "so no directory can be made there; give a path whose parents are directories or do "
        "not exist yet\n"
    )


def test_broken_suite_exits_2_naming_every_file_with_its_position(tmp_path: Path) -> None:
    directory = suite(
        tmp_path,
        {
            "a.yaml": PASSING,
            "b.json": '{"name": "b", "turns": [], "expects": {"tools_used": ["echo"]}}',
            "c.yaml": PASSING.replace("response_contains", "response_contain"),
            "d.toml": 'name = "d"\nturns = 3\n',
        },
    )
    code, out, err = invoke("run", "--suite", str(directory))
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == f"{directory / 'b.json'}:1:24: turns needs at least 1 item(s), got none"
    assert lines[1] == (
        f"{directory / 'c.yaml'}:7:3: unknown key 'response_contain' in expects "
        "(did you mean 'response_contains'?)"
    )
    assert any(line.startswith(f"{directory / 'd.toml'}:2:") for line in lines)
    assert lines[-1].endswith("in 3 file(s); nothing was run")


def test_live_mode_without_a_model_is_refused_with_exit_2(tmp_path: Path) -> None:
    directory = suite(tmp_path, {"a.yaml": PASSING})
    code, _, err = invoke("run", "--suite", str(directory), "--mode", " Live")
    assert code == 2
    assert err.strip() == (
        "live mode needs a model: set model in [eval.live] (the model name sent with every "
        'request, for example model = "gpt-4.1-mini")'
    )


def test_bad_mode_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = invoke("run", "--suite", str(tmp_path), "--mode", "fast")
    assert code == 2
    assert "mode must be 'replay' or 'live', got 'fast'" in err


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_missing_or_empty_suite_exits_2(tmp_path: Path, make: str) -> None:
    target = tmp_path / "suite"
    if make == "empty":
        target.mkdir()
        (target / "notes.txt").write_text("not a fixture", encoding="utf-8")
    code, _, err = invoke("run", "--suite", str(target))
    assert code == 2
    assert ("not found" if make == "missing" else "no fixtures found") in err


def test_validate_admits_or_refuses(tmp_path: Path) -> None:
    directory = suite(tmp_path, {"a.yaml": PASSING, "b.json": FAILING})
    assert invoke("validate", str(directory)) == (0, "2 fixture(s) admitted\n", "")
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x"', encoding="utf-8")
    code, _, err = invoke("validate", str(directory / "a.yaml"), str(bad))
    assert code == 2
    assert err.startswith(f"{bad}:1:13: invalid JSON")


def test_validate_defaults_to_the_configured_suite(tmp_path: Path) -> None:
    directory = suite(tmp_path, {"a.yaml": PASSING})
    (tmp_path / "evalrunner.toml").write_text('[eval]\nsuite_dir = "suite"\n', encoding="utf-8")
    code, out, _ = invoke("validate", "--config", str(tmp_path / "evalrunner.toml"))
    assert (code, out) == (0, "1 fixture(s) admitted\n")
    assert directory.is_dir()


def test_schema_list_names_every_kind() -> None:
    code, out, _ = invoke("schema", "list")
    assert code == 0
    kinds = schema_tree().kinds()
    assert [line.split()[0] for line in out.splitlines()] == list(kinds)
    assert all(line.split()[1] == kinds[line.split()[0]] for line in out.splitlines())


def test_config_shows_values_and_sources(tmp_path: Path) -> None:
    path = tmp_path / "evalrunner.toml"
    path.write_text("[eval]\nmax_tool_iterations = 4\n", encoding="utf-8")
    code, out, _ = invoke("config", "--config", str(path), env={"EVALRUNNER_MODE": "replay"})
    assert code == 0
    assert f"# config file: {path}" in out
    assert 'mode = "replay"  # EVALRUNNER_MODE' in out
    assert f"max_tool_iterations = 4  # {path}:2" in out


def test_version() -> None:
    code, out, _ = invoke("--version")
    assert code == 0
    assert out.startswith("evalrunner ")


def test_paths_are_shown_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = suite(tmp_path, {"bad.json": '{"name": "x"'})
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke("run", "--suite", str(directory))
    assert code == 2
    assert err.startswith("suite/bad.json:1:13: invalid JSON")


def test_file_level_problems_name_the_file_without_a_made_up_position(tmp_path: Path) -> None:
    code, _, err = invoke("validate", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert (
        err.splitlines()[0]
        == f"{tmp_path / 'nope.yaml'}: cannot read file: No such file or directory"
    )
    a_file = tmp_path / "fixture.yaml"
    a_file.write_text(PASSING, encoding="utf-8")
    code, _, err = invoke("run", "--suite", str(a_file))
    assert code == 2
    assert err.strip() == f"{a_file}: is a file, not a suite directory"


def test_config_shows_every_key_of_the_eval_table() -> None:
    # `evalrunner config` lists the keys from Config's fields: held equal to the schema's.
    from evalrunner.cli.config import EVAL_KEYS

    schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text(encoding="utf-8"))
    keys = set(schema["$defs"]["eval"]["properties"])
    assert set(EVAL_KEYS) == keys - {"live", "record"}
