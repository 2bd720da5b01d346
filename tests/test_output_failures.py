"""Standard output that refuses writes (a full disk, a closed pipe) is a refusal with one line
on stderr, never a traceback, and never the exit code of a verdict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [["run"], ["run", "--format", "json"], ["list"], ["validate"], ["config"], ["--version"]]


def evalrunner(*args: str) -> list[str]:
    return [sys.executable, "-m", "evalrunner", *args]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_full_disk_on_stdout_is_a_refusal_with_one_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            evalrunner(*args), cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60
        )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "evalrunner: cannot write its output: No space left on device"
    )
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


@pytest.mark.parametrize("args", COMMANDS[:3], ids=" ".join)
def test_a_pipe_closed_by_its_reader_ends_the_run_quietly_with_2(args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write, as after `| head -0`
    try:
        done = subprocess.run(
            evalrunner(*args), cwd=ROOT, stdout=write_end, stderr=subprocess.PIPE, text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 2
    assert done.stderr == ""
