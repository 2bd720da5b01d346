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


HELP_WIDTH = 80
"""typer's test runner draws help 80 columns wide, whatever the terminal."""


def _source_breaks(text: str, width: int) -> list[tuple[str, str]]:
    """Pairs of lines where a line ends mid-sentence though the next word would have fit:
    a source line break showing through."""
    lines = [line.rstrip() for line in text.splitlines()]
    found = []
    for line, following in itertools.pairwise(lines):
        if not line.strip() or not following.strip():
            continue
        first_word = following.split()[0]
        room = width - len(line) - 1
        if re.search(r"[a-z,]$", line) and len(first_word) < room - 2:
            found.append((line, following))
    return found


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "evalrunner")
def test_help_has_no_bool_placeholders_and_no_broken_paragraphs(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    assert _source_breaks(result.output, HELP_WIDTH) == []


@pytest.mark.parametrize("width", [60, 100, 160])
def test_help_paragraphs_fill_the_terminals_width(width: int) -> None:
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": str(width)},
    )
    assert done.returncode == 0, done.stderr
    assert _source_breaks(done.stdout, width) == []
    assert max(len(line) for line in done.stdout.splitlines()) in range(width - 12, width)


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
