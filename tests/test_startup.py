"""Start-up pays only for what a command uses: which modules each command imports, checked in a
fresh interpreter (module lists, not timings: no test here depends on the clock)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.startup_probe import modules_of

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "evals" / "regression"


HEAVY = ("jsonschema", "referencing", "ruamel", "rich", "multiprocessing")
"""What a command may import only when it needs it. (pydantic is not among them: typer checks
every parameter's value with it, so every command but ``--version`` imports it.)"""


def imported(args: list[str], cwd: Path) -> set[str]:
    """The top-level packages ``evalrunner ARGS`` imported."""
    return {name.split(".")[0] for name in modules_of(args, cwd)[0]}


def heavy(modules: set[str]) -> set[str]:
    return modules & set(HEAVY)


def test_version_imports_nothing_of_the_command_line(tmp_path: Path) -> None:
    modules = imported(["--version"], tmp_path)
    assert heavy(modules) == set() and "typer" not in modules


def test_help_touches_no_schema_and_no_yaml_code(tmp_path: Path) -> None:
    # The help is plain text: neither rich nor the schemas (jsonschema, referencing) nor YAML.
    assert heavy(imported(["--help"], tmp_path)) == set()
    assert heavy(imported(["run", "--help"], tmp_path)) == set()


@pytest.fixture
def bundled(tmp_path: Path) -> Path:
    shutil.copytree(REGRESSION, tmp_path / "evals" / "regression")
    return tmp_path


def test_a_run_from_a_warm_cache_imports_no_validator_no_yaml_and_no_rich(bundled: Path) -> None:
    first = imported(["run"], bundled)
    # Cold: YAML fixtures are parsed, but a valid suite needs neither jsonschema nor
    # referencing (the compiled checks, resolving their own refs, vouch for it) and no rich
    # (nothing went wrong).
    assert "ruamel" in first
    assert heavy(first) == {"ruamel"}, heavy(first)
    warm = imported(["run"], bundled)
    assert heavy(warm) == set(), heavy(warm)


def test_a_refusal_still_gets_jsonschemas_words(bundled: Path) -> None:
    (bundled / "evals" / "regression" / "broken.json").write_text(
        '{"name": "b", "turns": [], "expects": {"response_contain": ["x"]}}', encoding="utf-8"
    )
    assert {"jsonschema", "referencing"} <= imported(["run", "--no-cache"], bundled)


def test_a_serial_run_starts_no_worker_machinery(bundled: Path) -> None:
    assert "multiprocessing" not in imported(["run", "-j", "1"], bundled)


def test_an_option_given_is_still_checked_by_typer(bundled: Path) -> None:
    # Choices and numbers keep typer's own checks (and import what they need for them).
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", "run", "--format", "jsn"],
        cwd=bundled,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--format: 'jsn' is not one of 'table', 'json', 'github'" in done.stderr


def test_the_command_line_hands_typer_built_annotations_not_strings() -> None:
    # typer reads every command's annotations at each start; as strings (the __future__
    # import) it compiles each one again, about 20 ms of every run. No clock needed to see it:
    # count the annotations typer would have to evaluate.
    import inspect

    import evalrunner.cli as cli

    commands = [info.callback for info in cli.app.registered_commands]
    strings = [
        (command.__name__, name)
        for command in commands
        if command is not None
        for name, parameter in inspect.signature(command).parameters.items()
        if isinstance(parameter.annotation, str)
    ]
    assert len(commands) >= 10 and strings == []


def _suite(tmp_path: Path, expects: dict[str, object]) -> Path:
    import json

    suite = tmp_path / "evals"
    suite.mkdir(parents=True)
    case = {
        "name": "plain",
        "turns": [{"user_input": "hi", "steps": [{"response": {"type": "text", "content": "ok"}}]}],
        "expects": expects,
    }
    (suite / "plain.json").write_text(json.dumps(case), encoding="utf-8")
    return suite


def test_re2_and_sqlite3_are_loaded_only_by_the_runs_that_use_them(tmp_path: Path) -> None:
    plain = _suite(tmp_path / "plain", {"response_contains": ["ok"]})
    modules, code = modules_of(["run", "--no-cache", str(plain)], tmp_path)
    loaded = modules & {"re2", "sqlite3"}
    assert code in (0, None) and not loaded, loaded
    # A cached run keeps its cache in SQLite; a pattern is compiled (and checked) by RE2.
    modules, code = modules_of(["run", str(plain)], tmp_path)
    assert code in (0, None) and "sqlite3" in modules and "re2" not in modules
    matching = _suite(tmp_path / "matching", {"response_matches": ["^o[k]$"]})
    modules, code = modules_of(["run", "--no-cache", str(matching)], tmp_path)
    assert code in (0, None) and "re2" in modules
    failing = _suite(tmp_path / "failing", {"response_matches": ["^no$"]})
    modules, code = modules_of(["run", "--no-cache", str(failing)], tmp_path)
    assert code == 1 and "re2" in modules  # the pattern really ran
    refused = _suite(tmp_path / "refused", {"response_matches": ["(unclosed"]})
    modules, code = modules_of(["run", "--no-cache", str(refused)], tmp_path)
    assert code == 2 and "re2" in modules  # refused by RE2, loaded when admission needed it


def test_a_crew_run_imports_no_process_pool(bundled: Path) -> None:
    # Where the platform forks, --jobs runs a crew of forked workers: the pool (and with it
    # concurrent.futures and logging) is for spawn and --continue-on-admission-errors only.
    from evalrunner.execution import can_fork

    modules, code = modules_of(["run", "--no-cache", "-j", "2"], bundled)
    assert code in (0, None) and "evalrunner.execution" in modules
    if can_fork():
        assert not {m for m in modules if m.startswith(("concurrent", "logging"))}
    # A refused file, run past: the cases admitted here go to the pool, which imports it.
    (bundled / "evals" / "regression" / "broken.json").write_text("{", encoding="utf-8")
    modules, code = modules_of(
        ["run", "--no-cache", "-j", "2", "--continue-on-admission-errors"], bundled
    )
    assert code == 2 and "concurrent.futures.process" in modules
