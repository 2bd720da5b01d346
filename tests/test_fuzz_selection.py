"""The selection flags and commands, fuzzed together: ``run``/``list`` with paths, ``-k``,
``--shard`` and ``--continue-on-admission-errors``, and ``merge`` of good, tampered and
hostile report files.

Whatever is drawn, the command ends with exit 0, 1 or 2, raises nothing, prints no
traceback, writes stderr lines only of the form ``where: message`` (or a summary line), prints
nothing a terminal would act on, and writes nothing but the ``--json`` file it was given.
How many examples each test draws is the hypothesis profile's (tests/conftest.py).
"""

from __future__ import annotations

import json
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

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
runner = CliRunner()

PASSING = (
    "name: {name}\nturns:\n  - user_input: hi\n    steps:\n"
    "      - response: {{type: text, content: hi}}\nexpects:\n  response_contains: [hi]\n"
)
SUITE: dict[str, str | None] = {
    "a.yaml": PASSING.format(name="a"),
    "sub/b.yaml": PASSING.format(name="b").replace("[hi]", "[bye]"),
    "sub/deeper/c.yaml": PASSING.format(name="c"),
    "other/a.yaml": PASSING.format(name="other-a"),
    ".dot/d.yaml": PASSING.format(name="d"),
    "broken/e.yaml": "name: [\n",
    "broken/f.json": '{"name": "f", "x": ' + "9" * 5000 + "}",
    os.fsdecode(b"odd/g\xff\x1b.yaml"): PASSING.format(name="g"),
    "pipe/h.json": None,  # a FIFO
}
KEYWORDS = st.one_of(
    st.sampled_from(["a", "not b", "(a or c) and not other", "", " ", "b and", "((((", "x" * 5000]),
    st.lists(st.sampled_from([*"abc ()&|\x1b\r\u202e\udcff", "and", "or", "not"])).map("".join),
    st.lists(st.sampled_from(["a", "b", "and", "or", "not", "(", ")", " "]), max_size=30).map(
        "".join
    ),
)
SHARDS = st.one_of(
    st.builds(lambda i, n: f"{i}/{n}", st.integers(-1, 12), st.integers(-1, 12)),
    st.sampled_from(["", "1", "1/3/3", "1/10001", "99999999999999999999/1", "1/3\x1b", " 2/3 "]),
)
PATHS = st.sampled_from(
    [
        "suite",
        "suite/sub",
        "suite/a.yaml",
        "suite/.dot",
        "suite/broken",
        "suite/pipe",
        "suite/odd",
        "nope",
        "nope.yaml",
        "suite/a.txt",
        "report-1.json",
        "\x1b",
    ]
)
REPORTS = st.sampled_from(
    [
        "report-1.json",
        "report-2.json",
        "whole.json",
        "tampered.json",
        "empty.json",
        "deep.json",
        "huge-number.json",
        "not-utf8.json",
        "fifo.json",
        "dir.json",
        "nope.json",
    ]
)


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(["run", "list", "merge"]))
    if command == "merge":
        args = ["merge", *draw(st.lists(REPORTS, min_size=0, max_size=4))]
        if draw(st.booleans()):
            args += ["--json", draw(st.sampled_from(["out.json", "outdir", "r\r.json"]))]
        return args
    args = [command, *draw(st.lists(PATHS, max_size=3))]
    if draw(st.booleans()):
        args += ["-k", draw(KEYWORDS)]
    if draw(st.booleans()):
        args += ["--shard", draw(SHARDS)]
    if command == "run" and draw(st.booleans()):
        args.append("--continue-on-admission-errors")
    if draw(st.booleans()):
        args += ["--format", draw(st.sampled_from(["json", "table", "xml"]))]
    return args


def _write_suite(root: Path) -> None:
    for relative, text in SUITE.items():
        path = root / "suite" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            os.mkfifo(path)
        else:
            path.write_text(text, encoding="utf-8")
    (root / "suite" / "a.txt").write_text("not a fixture", encoding="utf-8")


def _write_reports(root: Path) -> None:
    previous = os.getcwd()
    os.chdir(root)
    try:
        for index in (1, 2):
            argv = ["run", "suite/sub", "suite/a.yaml", "--shard", f"{index}/2", "--format", "json"]
            result = runner.invoke(app, argv)
            (root / f"report-{index}.json").write_text(result.stdout, encoding="utf-8")
        whole = runner.invoke(app, ["run", "suite/sub", "--format", "json"])
        (root / "whole.json").write_text(whole.stdout, encoding="utf-8")
    finally:
        os.chdir(previous)
    tampered = json.loads((root / "report-1.json").read_text(encoding="utf-8"))
    tampered["total"] = 99
    (root / "tampered.json").write_text(json.dumps(tampered), encoding="utf-8")
    (root / "empty.json").write_text("", encoding="utf-8")
    (root / "deep.json").write_text("[" * 50_000 + "]" * 50_000, encoding="utf-8")
    (root / "huge-number.json").write_text('{"total": ' + "9" * 10_000 + "}", encoding="utf-8")
    (root / "not-utf8.json").write_bytes(b"\xff\xfe{}")
    os.mkfifo(root / "fifo.json")
    (root / "dir.json").mkdir()
    (root / "outdir").mkdir()


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="evalrunner-selection-fuzz-"))
    _write_suite(directory)
    _write_reports(directory)
    yield directory
    shutil.rmtree(directory)


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
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


STDERR_LINE = re.compile(
    r"^(?:\S[^\n]*?(?::\d+(?::\d+)?)?: \S[^\n]*"
    r"|\d+ problem\(s\) in \d+ file\(s\); nothing was run"
    r"|\d+ problem\(s\); nothing was merged)$"
)
TERMINAL_ACTS_ON = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@FUZZ
@given(argv=argvs())
def test_any_selection_command_ends_in_a_documented_outcome(
    workspace: Path, argv: list[str]
) -> None:
    before = _snapshot(workspace)
    previous = os.getcwd()
    os.chdir(workspace)
    try:
        result = runner.invoke(app, argv, env={"EVALRUNNER_SUITE_DIR": "suite"})
    finally:
        os.chdir(previous)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{argv!r}: {type(result.exception).__name__}: {result.exception}"
    )
    assert result.exit_code in (0, 1, 2), (argv, result.exit_code, result.output)
    assert "Traceback" not in result.output
    assert not TERMINAL_ACTS_ON.search(result.stdout), argv
    if "Usage:" not in result.stderr:  # typer's own usage errors keep their panel
        for line in result.stderr.splitlines():
            assert STDERR_LINE.match(line), f"{argv!r}: stderr line {line!r}"
            assert not TERMINAL_ACTS_ON.search(line), f"{argv!r}: stderr line {line!r}"
    after = _snapshot(workspace)
    changed = {
        path
        for path in set(before) | set(after)
        if before.get(path) != after.get(path) and ".evalrunner_cache" not in Path(path).parts
    }
    allowed = {"out.json"} if "--json" in argv else set()
    assert changed <= allowed, (argv, changed)
    (workspace / "out.json").unlink(missing_ok=True)
