"""The live progress line: on stderr, only when stderr is a terminal, for runs longer than
about a second; nothing of it otherwise."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from evalrunner.report.progress import CLEAR, progress_line

ROOT = Path(__file__).resolve().parent.parent
SLOW_AGENT = """\
import json, sys, time
for line in sys.stdin:
    time.sleep(1.6)
    print(json.dumps({"reply": "A first line.\\\\nA second line."}), flush=True)
"""


def slow_run(tmp_path: Path, stderr: int) -> subprocess.Popen[bytes]:
    suite = tmp_path / "suite"
    suite.mkdir()
    fixture = (ROOT / "evals" / "regression" / "multiline_reply_no_tools.toml").read_text("utf-8")
    (suite / "slow.toml").write_text(fixture, encoding="utf-8")
    agent = tmp_path / "slow_agent.py"
    agent.write_text(SLOW_AGENT, encoding="utf-8")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evalrunner",
            "run",
            "--suite",
            str(suite),
            "--agent-command",
            f"{sys.executable} {agent}",
        ],
        stdout=subprocess.PIPE,
        stderr=stderr,
        env={**os.environ, "COLUMNS": "120"},
    )


def test_on_a_terminal_the_progress_line_appears_on_stderr(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    process = slow_run(tmp_path, stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    process.wait(timeout=60)
    os.close(leader)
    text = seen.decode("utf-8", "replace")
    assert "[0/1] 0 passed, 0 failed" in text
    assert "running: multiline-reply-no-tools" in text
    assert text.endswith(CLEAR)  # erased before the report is printed


def test_without_a_terminal_nothing_of_it_appears(tmp_path: Path) -> None:
    process = slow_run(tmp_path, stderr=subprocess.PIPE)
    out, err = process.communicate(timeout=60)
    assert err == b""
    assert b"\x1b" not in out and b"running:" not in out


def test_the_line_is_cut_to_the_terminal_and_escapes_names() -> None:
    line = progress_line(3, 10, 2, 4.25, "evil\x1b[2Jname", 200)
    assert line == CLEAR + "[3/10] 2 passed, 1 failed · 4.2 s · running: evil\\x1b[2Jname"
    short = progress_line(3, 10, 2, 4.25, "x" * 500, 40)
    assert len(short) - len(CLEAR) == 39 and short.endswith("…")


def test_wide_characters_are_cut_by_the_cells_they_take() -> None:
    # 40 CJK characters take 80 cells: cut by characters, the line would wrap a 60-column
    # terminal, and each redraw would leave a stale row behind.
    import unicodedata

    line = progress_line(3, 10, 2, 4.25, "漢" * 40, 60)[len(CLEAR) :]
    cells = sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in line)
    assert line.endswith("…") and cells <= 59
    assert cells >= 57  # as much of the name as fits
    accents = progress_line(3, 10, 2, 4.25, "e\u0301" * 10, 60)[len(CLEAR) :]  # 56 cells
    assert not accents.endswith("…")  # combining marks take no cell


def test_skipped_cases_are_counted_apart_not_as_failures() -> None:
    line = progress_line(4, 10, 2, 1.0, None, 200, skipped=1)[len(CLEAR) :]
    assert line == "[4/10] 2 passed, 1 failed, 1 not run · 1.0 s"
    assert progress_line(4, 10, 2, 1.0, None, 200)[len(CLEAR) :].startswith(
        "[4/10] 2 passed, 2 failed · "
    )
