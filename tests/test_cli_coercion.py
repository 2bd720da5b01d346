"""Options with a parser of their own (``--case-timeout``, ``--repeat``) and enum choices
(``--format``, ``--to``): a given value takes effect, a refused one is one line, exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.startup_probe import modules_of

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def bundled(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "evals" / "regression", tmp_path / "evals" / "regression")
    return tmp_path


def test_given_choices_and_parsed_values_take_effect(bundled: Path) -> None:
    args = ["run", "--no-cache", "--format", "json", "--case-timeout", "30", "--repeat", "2"]
    _, code = modules_of([*args, "--json", "report.json"], bundled)
    assert code in (0, None)
    report = json.loads((bundled / "report.json").read_text(encoding="utf-8"))
    assert report["repeat"]["k"] == 2 and report["repeat"]["runs"] == 2 * len(report["cases"])
    _, code = modules_of(["list", "--format", "json"], bundled)
    assert code in (0, None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--format", "xml"], "--format: 'xml' is not one of 'table', 'json', 'github'"),
        (["run", "--format", "\x1b[2J"], "is not one of 'table', 'json', 'github'"),
        (["run", "--repeat", "0"], "--repeat: must be a whole number from 1 to 1000, got '0'"),
        (["run", "--repeat", "9" * 5000], "--repeat: must be a whole number from 1 to 1000"),
        (["run", "--case-timeout", "nan"], "--case-timeout: must be a decimal number"),
        (["convert", "x.json", "--to", "ini"], "--to: 'ini' is not one of"),
    ],
)
def test_a_refused_value_is_refused_in_typers_words(
    bundled: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", *args],
        cwd=bundled,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert "\x1b" not in done.stderr
