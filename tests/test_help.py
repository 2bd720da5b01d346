"""Every command's --help reads cleanly: no <bool> beside a flag, and a docstring's paragraphs
wrap at the terminal's width, not at the source's line breaks."""

from __future__ import annotations

import itertools
import re

import pytest
from typer.testing import CliRunner

from evalrunner.cli import app

COMMANDS = [
    [c.name or (c.callback.__name__ if c.callback else "")] for c in app.registered_commands
]
COMMANDS += [["schema", "list"], ["schema", "export"], []]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "evalrunner")
@pytest.mark.parametrize("width", ["60", "100", "160"])
def test_help_has_no_bool_placeholders_and_no_broken_paragraphs(
    command: list[str], width: str
) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": width})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    text = result.output
    # A line that ends in the middle of a sentence while the terminal had room for the next
    # word is a source line break showing through.
    lines = [line.rstrip() for line in text.splitlines()]
    for line, following in itertools.pairwise(lines):
        if "│" in line or "╭" in line or not line.strip() or not following.strip():
            continue
        first_word = following.split()[0]
        room = int(width) - len(line) - 1
        assert not (re.search(r"[a-z,]$", line) and len(first_word) < room - 2), (line, following)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["run", "--format", "xml"], "--format: 'xml' is not one of 'table', 'json', 'github'."),
        (["run", "--bogus"], "evalrunner run: No such option: --bogus"),
        (["new"], "name: Missing argument 'name'."),
        (["convert", "x.yaml"], "--to: Missing option '--to'."),
    ],
)
def test_usage_errors_are_one_where_message_line(argv: list[str], line: str) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(line)
    assert done.stderr.rstrip().endswith("--help)")
