"""What a plain ``evalrunner run`` of the bundled suite does not import, module by module (the
start-up round of issue 11): each module here is imported where it is first needed, and a
test that it still works when needed sits beside each check. Module lists, not timings: no
test here depends on the clock."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.startup_probe import modules_of

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "evals" / "regression"

NOT_ON_A_PLAIN_RUN = (
    "evalrunner.report.json",  # --json, --format json
    "evalrunner.report.write",  # report files
    "evalrunner.report.stats",  # --repeat
    "shlex",  # an agent command
)
"""Modules a run that prints the table and writes no file has no use for. (hashlib and tempfile
are not among them: typer's value checks, through pydantic, import both.)"""


@pytest.fixture
def bundled(tmp_path: Path) -> Path:
    shutil.copytree(REGRESSION, tmp_path / "evals" / "regression")
    return tmp_path


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_a_plain_run_imports_none_of_what_it_does_not_use(bundled: Path, cache: str) -> None:
    if cache == "warm":
        modules_of(["run"], bundled)
    modules, code = modules_of(["run"], bundled)
    assert code == 0
    assert modules & set(NOT_ON_A_PLAIN_RUN) == set()


def test_a_run_without_k_does_not_import_the_k_parser(bundled: Path) -> None:
    modules, code = modules_of(["run"], bundled)
    assert code == 0
    assert "evalrunner.selection.keywords" not in modules


def test_a_run_from_a_warm_cache_imports_no_toml_parser(bundled: Path) -> None:
    modules_of(["run"], bundled)
    modules, code = modules_of(["run"], bundled)
    assert code == 0
    assert "tomllib" not in modules


def test_an_agent_command_is_still_split_as_a_shell_would(bundled: Path) -> None:
    modules, code = modules_of(["config", "--agent-command", "agent 'unclosed"], bundled)
    assert code == 2 and "shlex" in modules


def test_k_and_shard_work_where_they_are_imported(bundled: Path) -> None:
    modules, code = modules_of(["run", "-k", "unicode or tool", "--shard", "1/2"], bundled)
    assert code == 0
    assert {"evalrunner.selection.keywords", "hashlib"} <= modules
    from evalrunner.selection.keywords import Keyword, parse_keyword

    assert isinstance(parse_keyword("a and not b"), Keyword)


def test_what_a_plain_run_leaves_out_is_there_when_asked_for(bundled: Path) -> None:
    report = bundled / "out" / "report.json"
    modules, code = modules_of(
        ["run", "--json", str(report), "--repeat", "2", "--format", "json"], bundled
    )
    assert code == 0
    assert {"evalrunner.report.json", "evalrunner.report.write", "evalrunner.report.stats"} <= (
        modules
    )
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["repeat"]["k"] == 2 and len(data["cases"]) == 18


def test_a_warm_run_compiles_none_of_the_patterns_kept_for_unusual_input(bundled: Path) -> None:
    # The source map's, the config's and the surrogate patterns are compiled on first use.
    script = (
        "import sys\n"
        "from evalrunner.__main__ import main\n"
        "import evalrunner.text as text\n"
        "sys.argv = ['evalrunner', 'run']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write('\\nCOMPILED %d\\n' % text.compiled.cache_info().currsize)\n"
    )
    modules_of(["run"], bundled)  # the cache is warm
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=bundled, capture_output=True, text=True, timeout=120
    )
    assert done.stderr.rsplit("\nCOMPILED ", 1)[1].split() == ["0"]


def test_the_patterns_still_work_when_met() -> None:
    from evalrunner.config import parse_seconds
    from evalrunner.text import encodable, encodable_path

    assert encodable("caf\udce9") == "caf\\udce9"
    assert encodable_path("caf\udce9.yaml") == "caf\\xe9.yaml"
    assert parse_seconds(" 1e2 ") == 100.0
    with pytest.raises(ValueError):
        parse_seconds("1_0")
