"""The gate: every fixture of the bundled regression suite passes, through the library and
through the installed command, and the suite is what the config default points at."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalrunner import SuiteReport, exit_code, run_suite
from evalrunner.config import DEFAULT_SUITE_DIR, load_config
from evalrunner.fixture.load import discover

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "evals" / "regression"


def evalrunner_command() -> list[str]:
    """The installed console script, next to this interpreter (or on PATH)."""
    beside = Path(sys.executable).parent / "evalrunner"
    found = str(beside) if beside.exists() else shutil.which("evalrunner")
    if found is None:
        pytest.fail("the evalrunner console script is not installed")
    return [found]


def test_gated_directory_is_the_config_default_and_exists() -> None:
    assert DEFAULT_SUITE_DIR == "evals/regression"
    config = load_config(cwd=ROOT, env={})
    assert config.suite_dir.resolve() == SUITE.resolve()
    assert config.sources["suite_dir"] == "default"
    assert SUITE.is_dir()
    assert len(discover(SUITE)) >= 12


def test_every_gated_fixture_passes_through_the_library() -> None:
    outcome = run_suite(SUITE)
    assert isinstance(outcome, SuiteReport), outcome
    failing = [(c.name, c.error, [g for g in c.grades if not g.passed]) for c in outcome.cases]
    failing = [f for f in failing if f[1] is not None or f[2]]
    assert not failing
    assert exit_code(outcome) == 0
    assert len(outcome.cases) == len(discover(SUITE))


def test_gated_suite_covers_formats_classes_and_every_kind() -> None:
    outcome = run_suite(SUITE)
    assert isinstance(outcome, SuiteReport)
    suffixes = {Path(c.source).suffix for c in outcome.cases}
    assert {".json", ".toml"} <= suffixes and suffixes & {".yaml", ".yml"}
    classes = [c.case_class for c in outcome.cases]
    assert classes.count("positive") >= 3 and classes.count("negative") >= 3
    # A turn's checks are named turns[i].<kind>(...): the kind is what follows the turn.
    used = {g.check.split("(", 1)[0].split(".")[-1] for c in outcome.cases for g in c.grades}
    from evalrunner.expectations import KINDS

    # The reference agent sends no system prompt, so no gated case can hold it to one.
    assert used == {kind.name for kind in KINDS} - {"system_prompt_contains"}


def project_copy(tmp_path: Path) -> Path:
    """The repository's suite where a run may write beside it (its admission cache)."""
    shutil.copytree(ROOT / "evals", tmp_path / "evals")
    return tmp_path


def test_installed_command_runs_the_gate_with_no_arguments(tmp_path: Path) -> None:
    done = subprocess.run(
        [*evalrunner_command(), "run"],
        cwd=project_copy(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " cases passed in " in done.stdout.strip().splitlines()[-1]


def test_installed_command_json_report_for_the_gate(tmp_path: Path) -> None:
    done = subprocess.run(
        [*evalrunner_command(), "run", "--format", "json"],
        cwd=project_copy(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["all_passed"] is True
    assert report["total"] == len(discover(SUITE))


def test_python_dash_m_is_the_same_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0
    assert done.stdout.startswith("evalrunner ")
