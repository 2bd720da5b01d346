"""The command line as a whole, fuzzed: argv, environment, config files and suite contents.

Whatever is drawn, a command must end with exit code 0, 1 or 2 (a usage error is 2), raise
nothing, print no traceback, write only lines in the documented shapes to stderr
(``path[:line[:col]]: message`` or a summary line), print nothing a terminal would act on,
and create or replace nothing but the file it was asked to write. Suites hold valid and broken
fixtures, FIFOs, directories named like fixtures, names that are not UTF-8; configs hold
every shape; outputs name FIFOs, directories, symlinks and names with control characters.

The example database is off; a failure prints its reproducing example.
How many examples each test draws is the hypothesis profile's (tests/conftest.py).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.cache import CACHE_DIR_NAME

pytestmark = pytest.mark.fuzz

ROOT = Path(__file__).resolve().parent.parent
FUZZ = settings(
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
runner = CliRunner()

PASSING = "name: {name}\nturns:\n  - user_input: hi\n    steps:\n      - response: {{type: text, content: hi}}\nexpects:\n  response_contains: [hi]\n"  # noqa: E501
FAILING = PASSING.replace("[hi]", "[bye]")
REGRESSION = sorted((ROOT / "evals" / "regression").iterdir())

# (name, content): content None makes a FIFO, "dir" a directory
SUITE_ENTRIES = st.sampled_from(
    [
        ("a.yaml", PASSING.format(name="a")),
        ("b.yaml", FAILING.format(name="b")),
        ("c.yaml", PASSING.format(name='"c\\r\\e[32m"')),
        ("d.json", '{"name": "d", "n": ' + "9" * 5000 + "}"),
        ("e.yaml", 'name: !!int "abc"\n'),
        ("f.yaml", "expects:\n  <<: {tools_used: [a]}\n"),
        ("g.toml", "name = 'g'\nx = 1e400\n"),
        ("h.json", None),
        ("i.json", "dir"),
        (os.fsdecode(b"j\xff.yaml"), PASSING.format(name="j")),
        ("k.yaml", PASSING.format(name="a")),  # a duplicate name
        ("l.json", '{"name": "l", "expects": {"exact_tool_calls": 1.0}}'),
        *[(p.name, p.read_text("utf-8")) for p in REGRESSION[:3]],
    ]
)
CONFIGS = st.sampled_from(
    [
        None,
        ("evalrunner.toml", '[eval]\nsuite_dir = "suite"\n'),
        ("evalrunner.toml", '[eval]\nsuite_dir = "suite"\ncase_timeout_secs = 1e10\n'),
        ("evalrunner.toml", '[eval]\nsuite_dir = "su\\u0000ite"\n'),
        ("evalrunner.toml", "eval = [1]\n"),
        ("evalrunner.toml", '[eval]\nmode = "ten"\nmax_tool_iterations = 1.0\n'),
        ("evalrunner.toml", '[eval]\nagent = "nope"\ntools = [1]\n'),
        ("evalrunner.toml", "[eval\n"),
        ("pyproject.toml", "tool = 1\n"),
        ("pyproject.toml", '[tool]\nevalrunner = "x"\n'),
        ("pyproject.toml", "[project]\nn = " + "9" * 5000 + "\n"),
        ("pyproject.toml", '[tool.evalrunner.eval]\nsuite_dir = "suite"\nmode = " LIVE "\n'),
        ("evalrunner.toml", None),  # a FIFO
    ]
)
TEXT = st.sampled_from(
    ["x", "", " ", "\r", "\x1b[2J", "\u202e", os.fsdecode(b"\xff"), "1e10", "nan", "-1", "é"]
)
OUTPUTS = st.sampled_from(
    ["out.json", "out.yaml", "outdir", "out.fifo", "r\r.json", "link.json", "dangling.json"]
)


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(["run", "validate", "config", "new", "convert", "schema"]))
    args: list[str] = []
    if command == "run":
        args = ["run"]
        if draw(st.booleans()):
            args += ["--suite", draw(st.sampled_from(["suite", "nope", "suite/a.yaml"]))]
        if draw(st.booleans()):
            args += ["--mode", draw(st.sampled_from(["replay", "Live", "bogus"]))]
        if draw(st.booleans()):
            args += ["--format", draw(st.sampled_from(["table", "json", "xml"]))]
        if draw(st.booleans()):
            args += ["--output", draw(OUTPUTS)]
        if draw(st.booleans()):
            args += ["--case-timeout", draw(st.sampled_from(["1e10", "nan", "5", "abc", "-1"]))]
    elif command == "validate":
        args = [
            "validate",
            *draw(
                st.lists(
                    st.sampled_from(["suite", "nope", "suite/a.yaml", "suite/h.json", "x.txt"]),
                    max_size=2,
                )
            ),
        ]
    elif command == "config":
        args = ["config"]
    elif command == "new":
        args = ["new", draw(TEXT) + draw(st.sampled_from(["case", "Case two", ""]))]
        if draw(st.booleans()):
            args += ["--format", draw(st.sampled_from(["yaml", "toml", "json"]))]
        if draw(st.booleans()):
            args += ["--dir", draw(st.sampled_from(["suite", "newdir", "outdir"]))]
    elif command == "convert":
        args = ["convert", draw(st.sampled_from(["suite/a.yaml", "suite/d.json", "nope.yaml"]))]
        args += ["--to", draw(st.sampled_from(["json", "toml", "yaml", "xml"]))]
        if draw(st.booleans()):
            args += ["-o", draw(OUTPUTS)]
    else:
        args = ["schema", "list"]
    if command != "schema" and draw(st.booleans()):
        args += [
            "--config",
            draw(st.sampled_from(["evalrunner.toml", "pyproject.toml", "no.toml"])),
        ]
    return args


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="evalrunner-cli-fuzz-"))
    yield directory
    shutil.rmtree(directory)


def _prepare(
    root: Path, entries: list[tuple[str, str | None]], config: tuple[str, str | None] | None
) -> None:
    for child in list(root.iterdir()):
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    suite = root / "suite"
    suite.mkdir()
    for name, content in entries:
        path = suite / name
        if content is None:
            os.mkfifo(path)
        elif content == "dir":
            path.mkdir()
        else:
            path.write_text(content, encoding="utf-8")
    if config is not None:
        name, text = config
        if text is None:
            os.mkfifo(root / name)
        else:
            (root / name).write_text(text, encoding="utf-8")
    (root / "outdir").mkdir()
    os.mkfifo(root / "out.fifo")
    (root / "target.json").write_text("previous", encoding="utf-8")
    (root / "link.json").symlink_to("target.json")
    (root / "dangling.json").symlink_to("made.json")


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry below ``root`` (links not followed): its type bits, inode and size."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            found[os.path.relpath(path, root)] = (
                stat.S_IFMT(info.st_mode),
                info.st_ino,
                info.st_size,
            )
    return found


def args_admit(args: list[str]) -> bool:
    """Whether the command admits fixtures through the admission cache."""
    return bool(args) and args[0] in ("run", "list") and "--no-cache" not in args


def _allowed_writes(args: list[str]) -> set[str]:
    """Paths (relative to the workspace) a command may create or replace."""
    allowed: set[str] = set()
    for flag in ("--output", "-o"):
        if flag in args:
            name = args[args.index(flag) + 1]
            allowed |= {
                name,
                {"link.json": "target.json", "dangling.json": "made.json"}.get(name, name),
            }
    if args[0] == "new":  # into --dir, else the configured suite, else evals/regression
        configured = ["suite", "evals", "nope", os.fsdecode(b"s\xff")]
        directories = [args[args.index("--dir") + 1]] if "--dir" in args else configured
        allowed |= {*directories, *(f"{d}/*" for d in directories)}
    return allowed


STDERR_LINE = re.compile(
    r"^(?:\S[^\n]*?(?::\d+(?::\d+)?)?: \S[^\n]*"
    r"|\d+ problem\(s\) in \d+ file\(s\); nothing was run"
    r"|live mode needs a model: set model in \[eval\.live\][^\n]*"
    r"|stops once the script is consumed, at a run error, or on Ctrl-C)$"
)
TERMINAL_ACTS_ON = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


@FUZZ
@given(
    argv=argvs(),
    entries=st.lists(SUITE_ENTRIES, max_size=3, unique_by=lambda e: e[0]),
    config=CONFIGS,
    env=st.fixed_dictionaries(
        {},
        optional={
            "EVALRUNNER_MODE": st.sampled_from(["replay", " LIVE ", "x\x1b"]),
            "EVALRUNNER_SUITE_DIR": st.sampled_from(["suite", "nope", os.fsdecode(b"s\xff")]),
            "NO_COLOR": st.just("1"),
        },
    ),
)
def test_any_command_line_ends_in_a_documented_outcome(
    workspace: Path,
    argv: list[str],
    entries: list[tuple[str, str | None]],
    config: tuple[str, str | None] | None,
    env: dict[str, str],
) -> None:
    _prepare(workspace, entries, config)
    before = _snapshot(workspace)
    cleared: dict[str, str | None] = {"EVALRUNNER_MODE": None, "EVALRUNNER_SUITE_DIR": None}
    previous = os.getcwd()
    os.chdir(workspace)
    try:
        result = runner.invoke(app, argv, env={**cleared, **env})
    finally:
        os.chdir(previous)

    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{argv}: {type(result.exception).__name__}: {result.exception}"
    )
    assert result.exit_code in (0, 1, 2), (argv, result.exit_code, result.output)
    assert "Traceback" not in result.output
    if "Usage:" not in result.stderr:  # typer's own usage errors keep their panel
        for line in result.stderr.splitlines():
            assert STDERR_LINE.match(line), f"{argv}: stderr line {line!r}"
        assert not TERMINAL_ACTS_ON.search(result.stderr.replace("\n", ""))
    assert not TERMINAL_ACTS_ON.search(result.stdout.replace("\n", ""))

    after = _snapshot(workspace)
    allowed = _allowed_writes(argv)

    def may_write(rel: str) -> bool:
        if args_admit(argv) and CACHE_DIR_NAME in rel.split("/"):
            return True  # the admission cache, beside whichever config the run used
        return rel in allowed or any(a.endswith("/*") and rel.startswith(a[:-1]) for a in allowed)

    for rel, (kind, inode, size) in before.items():
        assert rel in after, f"{argv} removed {rel}"
        if not may_write(rel):
            assert after[rel] == (kind, inode, size), f"{argv} changed {rel}"
        else:
            assert after[rel][0] == kind, f"{argv} replaced {rel} with another kind of file"
    for rel in after.keys() - before.keys():
        assert may_write(rel), f"{argv} created {rel}"
        assert not rel.endswith(".tmp"), f"{argv} left {rel}"
