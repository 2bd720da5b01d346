"""Fuzzed configuration: whatever a config file holds, the outcome is a Config or positioned
problems in words; never another exception.

Two generators, like the fixture fuzzing of ``test_fuzz.py``: structure-aware documents (every
shape at every level: ``tool`` not a table, ``eval`` an array, wrong types, huge and
non-finite numbers, NUL and control characters, dates), written as ``evalrunner.toml`` and as
``pyproject.toml``, found by discovery and given with ``--config``; and TOML-shaped noise. The
example database is off; a failure prints its reproducing example.

How many examples each test draws is the hypothesis profile's (tests/conftest.py).
"""

from __future__ import annotations

import datetime
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalrunner.config import Config, ConfigError, load_config

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

EVAL_KEYS = [
    "suite_dir",
    "mode",
    "max_tool_iterations",
    "case_timeout_secs",
    "agent",
    "tools",
    "builtin_tools",
    "agent_command",
]

_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=2**63, max_value=2**200),
    st.floats(),  # nan and inf included: the loader refuses them
    st.text(max_size=12),
    st.sampled_from(
        ["", " ", "replay", " LIVE ", "a.b:c", "x\x00y", "\x1b[31m", "\u202e", "é🚀", "\r\n"]
    ),
    st.dates(),
    st.just("<5000 digits>"),  # spliced in as an integer literal: see _dump
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from([*EVAL_KEYS, "eval", "x", "é"]), inner, max_size=3),
    ),
    max_leaves=6,
)


@st.composite
def eval_tables(draw: st.DrawFn) -> Any:
    """Mostly a table of known keys with plausible or wrong values; sometimes anything."""
    if draw(st.integers(0, 9)) == 0:
        return draw(_values)
    table: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(EVAL_KEYS), max_size=5, unique=True)):
        table[key] = draw(_values)
    if draw(st.booleans()):
        table[draw(st.text(max_size=10))] = draw(_values)
    return table


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, Any]:
    """(file name, TOML document data) for one config file."""
    if draw(st.booleans()):
        root: dict[str, Any] = {}
        shape = draw(st.integers(0, 5))
        if shape == 0:
            root["tool"] = draw(_values)
        elif shape == 1:
            root["tool"] = {"evalrunner": draw(_values)}
        else:
            root["tool"] = {"evalrunner": {"eval": draw(eval_tables())}}
            if draw(st.booleans()):
                root["tool"]["evalrunner"][draw(st.text(max_size=6))] = draw(_values)
        if draw(st.booleans()):
            root["project"] = {"name": "x", "when": draw(_values)}
        return "pyproject.toml", root
    root = {"eval": draw(eval_tables())}
    if draw(st.booleans()):
        root[draw(st.sampled_from(["projects", "tool", "evall", ""]))] = draw(_values)
    return "evalrunner.toml", root


def _dump(data: Any) -> str | None:
    """TOML text for ``data``, with each ``"<5000 digits>"`` string turned into an integer
    literal of 5,000 digits, as a user would type it (Python cannot even print that int)."""
    try:
        text = tomli_w.dumps(data)
    except (TypeError, ValueError):
        return None  # not TOML-able (a non-table at the root of an array of tables, ...)
    return text.replace('"<5000 digits>"', "9" * 5000)


_NOISE = st.sampled_from(
    [
        "[tool]\n",
        "[tool.evalrunner]\n",
        "[tool.evalrunner.eval]\n",
        "[eval]\n",
        "[[eval]]\n",
        "tool = 1\n",
        "tool.evalrunner = 'x'\n",
        "eval = []\n",
        "mode = ",
        "suite_dir = ",
        "case_timeout_secs = ",
        '"\\u0000"',
        "1e10",
        "nan",
        "-inf",
        "9" * 5000,
        "0x" + "f" * 40,
        "1.0",
        "2024-01-01",
        "{",
        "}",
        "[",
        "]",
        "=",
        "\n",
        '"',
        "'",
        "é",
        "\x00",
    ]
)


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="evalrunner-config-fuzz-"))
    yield directory
    shutil.rmtree(directory)


PROBLEM = re.compile(r"^(?P<where>[^\n]+?)(:\d+(:\d+)?)?: (?P<message>[^\n]+)$")


def check_config(root: Path, name: str, text: str | bytes) -> None:
    """Both ways of finding the file end in a Config or in well-formed problems."""
    for stale in root.iterdir():
        stale.unlink()
    path = root / name
    path.write_bytes(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    for given_file in (path, None):
        try:
            outcome = load_config(config_file=given_file, cwd=root, env={})
        except ConfigError as exc:
            assert exc.problems, "refused without a reason"
            for problem in exc.problems:
                match = PROBLEM.match(problem)
                assert match, f"not one 'path:line:col: message' line: {problem!r}"
                assert match["where"].startswith(str(root)), problem
                assert "is not of type" not in problem and "does not match" not in problem
                assert "Traceback" not in problem
        else:
            assert isinstance(outcome, Config)
            assert outcome.case_timeout_secs > 0


@FUZZ
@given(document=documents())
def test_structure_aware_configs(workspace: Path, document: tuple[str, Any]) -> None:
    name, data = document
    text = _dump(data)
    if text is not None:
        check_config(workspace, name, text)


@FUZZ
@given(
    parts=st.lists(_NOISE, max_size=30),
    name=st.sampled_from(["evalrunner.toml", "pyproject.toml"]),
)
def test_toml_shaped_noise(workspace: Path, parts: list[str], name: str) -> None:
    check_config(workspace, name, "".join(parts))


@FUZZ
@given(raw=st.binary(max_size=512), name=st.sampled_from(["evalrunner.toml", "pyproject.toml"]))
def test_arbitrary_bytes_as_config(workspace: Path, raw: bytes, name: str) -> None:
    check_config(workspace, name, raw)


def test_dates_in_someone_elses_pyproject_table_are_not_our_business(workspace: Path) -> None:
    data = {"project": {"released": datetime.date(2024, 1, 2)}, "tool": {"evalrunner": {}}}
    text = _dump(data)
    assert text is not None
    check_config(workspace, "pyproject.toml", text)
    assert load_config(cwd=workspace, env={}).file == workspace / "pyproject.toml"


def test_a_key_with_a_newline_is_named_on_one_line(workspace: Path) -> None:
    # Found by test_structure_aware_configs: the NUL refusal named the key as it was, newline
    # and all, so the message spilled onto a second line.
    check_config(workspace, "evalrunner.toml", '[eval]\n"\\n" = "a\\u0000b"\n')
    with pytest.raises(ConfigError) as refused:
        load_config(cwd=workspace, env={})
    assert any('eval["\\n"] holds a NUL character' in problem for problem in refused.value.problems)
