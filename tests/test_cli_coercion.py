"""Options with a parser of their own (``--case-timeout``, ``--repeat``) and enum choices
(``--format``, ``--to``) are coerced without typer's pydantic adapter: the same value or the
same refusal as typer's own coercion, for any input, and no pydantic import when the value
is good."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.startup_probe import modules_of
from typer._click import Context
from typer.main import get_command

import evalrunner.cli as cli

ROOT = Path(__file__).resolve().parent.parent


def _settled_params() -> list[tuple[Any, Any]]:
    """Every (command, parameter) of the command line that the settled coercion serves."""
    group = get_command(cli.app)
    found = []
    pending = [group]
    while pending:
        command = pending.pop()
        pending.extend(getattr(command, "commands", {}).values())
        for param in command.params:
            if hasattr(param, "type_descriptor") and isinstance(
                param.get_runtime_param(), cli._Settled
            ):
                found.append((command, param))
    return found


SETTLED = _settled_params()


def test_the_settled_options_are_the_choices_and_the_parsed_values() -> None:
    names = {(command.name, param.name) for command, param in SETTLED}
    assert {("run", "report_format"), ("run", "case_timeout"), ("run", "repeat")} <= names
    assert {("convert", "to"), ("list", "list_format"), ("new", "fixture_format")} <= names
    # Nothing else is: --port keeps its range check in typer's adapter, a flag its own path.
    assert ("serve", "port") not in names and ("run", "no_cache") not in names


def _outcome(coerce: Any, value: object) -> tuple[str, object]:
    try:
        return "value", coerce(value)
    except Exception as exc:  # the refusal itself is what is compared
        return type(exc).__name__, getattr(exc, "message", str(exc))


HOSTILE = [
    "json",
    "JSON",
    " json",
    "json\n",
    "table",
    "github",
    "toml",
    "yaml",
    "",
    " ",
    "\x00",
    "\x1b[31mjson",
    "json\u202e",
    "\uff4a\uff53\uff4f\uff4e",  # fullwidth "json"
    "j" * 100_000,
    "30",
    " 30 ",
    "0.5",
    "1e2",
    "1_0",
    "inf",
    "nan",
    "-1",
    "0",
    "1000",
    "1001",
    "99999999999999999999999",
    "٣",
    "²",
    "5.0",
]


@pytest.mark.parametrize(("command", "param"), SETTLED, ids=lambda x: getattr(x, "name", "?"))
def test_settled_coercion_agrees_with_typers_own_on_hostile_values(
    command: Any, param: Any
) -> None:
    ctx = Context(command)
    settled = param.get_runtime_param()
    own = param._own_runtime_param()
    for value in HOSTILE:
        mine = _outcome(lambda v: settled._coerce_value(v, param=param, ctx=ctx), value)
        theirs = _outcome(lambda v: own._coerce_value(v, param=param, ctx=ctx), value)
        assert mine == theirs, (command.name, param.name, value[:40])


@settings(deadline=None)
@given(value=st.text(max_size=30) | st.sampled_from(HOSTILE), index=st.integers(0, 10**6))
def test_settled_coercion_agrees_with_typers_own_on_any_text(value: str, index: int) -> None:
    command, param = SETTLED[index % len(SETTLED)]
    ctx = Context(command)
    mine = _outcome(
        lambda v: param.get_runtime_param()._coerce_value(v, param=param, ctx=ctx), value
    )
    theirs = _outcome(
        lambda v: param._own_runtime_param()._coerce_value(v, param=param, ctx=ctx), value
    )
    assert mine == theirs


@pytest.fixture
def bundled(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "evals" / "regression", tmp_path / "evals" / "regression")
    return tmp_path


def test_given_choices_and_parsed_values_take_effect_without_pydantic(bundled: Path) -> None:
    args = ["run", "--no-cache", "--format", "json", "--case-timeout", "30", "--repeat", "2"]
    probe = modules_of([*args, "--json", "report.json"], bundled)
    modules, code = probe
    assert code in (0, None)
    assert not {name for name in modules if name.split(".")[0] == "pydantic"}
    assert "typer._adapters" not in modules
    report = json.loads((bundled / "report.json").read_text(encoding="utf-8"))
    assert report["repeat"]["k"] == 2 and report["repeat"]["runs"] == 2 * len(report["cases"])
    modules, code = modules_of(["list", "--format", "json"], bundled)
    assert code in (0, None) and "typer._adapters" not in modules


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
    import subprocess
    import sys

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
