"""Faults: cases that hang, signals in the middle of a run, reports that cannot be written."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from evalrunner import SuiteReport, exit_code, run_suite
from evalrunner.boundary.tools import EchoTool
from evalrunner.cli import app
from evalrunner.model import JSONValue, RunInterrupted

HERE = Path(__file__).resolve().parent

QUICK = """\
name: {name}
turns:
  - user_input: hi
    steps:
      - response: {{type: text, content: hello}}
expects:
  response_contains: [hello]
"""

CALLS_BLOCK = """\
name: {name}
turns:
  - user_input: wait for it
    steps:
      - response:
          type: tool_calls
          tool_calls: [{{id: c1, name: block, arguments: {{}}}}]
      - response: {{type: text, content: done}}
expects:
  tools_used: [block]
"""


def make_suite(tmp_path: Path, cases: list[tuple[str, str]]) -> Path:
    suite = tmp_path / "suite"
    suite.mkdir()
    for index, (template, name) in enumerate(cases):
        (suite / f"{index:02d}_{name}.yaml").write_text(template.format(name=name), "utf-8")
    return suite


class GateTool:
    """Blocks until the test releases it: a tool that does not return in time."""

    name = "block"
    description = "Blocks until released."
    parameters: ClassVar[dict[str, JSONValue]] = {"type": "object"}

    def __init__(self) -> None:
        self.release = threading.Event()

    def call(self, arguments: dict[str, Any]) -> str:
        self.release.wait(30)
        return "released"


def test_a_case_that_does_not_return_in_time_fails_and_the_run_goes_on(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [(QUICK, "first"), (CALLS_BLOCK, "hangs"), (QUICK, "after")])
    gate = GateTool()
    try:
        outcome = run_suite(suite, tools={"echo": EchoTool(), "block": gate}, case_timeout=0.2)
    finally:
        gate.release.set()
    assert isinstance(outcome, SuiteReport)
    by_name = {case.name: case for case in outcome.cases}
    assert by_name["first"].passed and by_name["after"].passed
    assert by_name["hangs"].error == "timed out after 0.2s"
    assert by_name["hangs"].grades == ()
    assert exit_code(outcome) == 1


def test_a_case_that_returns_in_time_is_unaffected_by_the_timeout(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [(CALLS_BLOCK, "quick-block")])
    gate = GateTool()
    gate.release.set()
    outcome = run_suite(suite, tools={"block": gate}, case_timeout=30)
    assert isinstance(outcome, SuiteReport) and outcome.all_passed


def test_interrupt_between_cases_reports_the_finished_ones(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [(QUICK, "one"), (CALLS_BLOCK, "two"), (QUICK, "three")])

    class InterruptingTool(GateTool):
        def call(self, arguments: dict[str, Any]) -> str:
            raise RunInterrupted(signal.SIGTERM)

    outcome = run_suite(suite, tools={"block": InterruptingTool()})
    assert isinstance(outcome, SuiteReport)
    assert [case.name for case in outcome.cases] == ["one"]
    assert outcome.interrupted == signal.SIGTERM
    assert not outcome.all_passed
    assert exit_code(outcome) == 143


def cli_in_subprocess(suite: Path, *extra: str, ready: Path) -> subprocess.Popen[str]:
    """The real command line, with the ``block`` tool plugged in through the config file."""
    config = suite.parent / "evalrunner.toml"
    config.write_text('[eval]\ntools = ["blocking_tools:BlockTool"]\n', encoding="utf-8")
    env = {
        **os.environ,
        "EVALRUNNER_TEST_READY": str(ready),
        "NO_COLOR": "1",
        "PYTHONPATH": str(HERE / "support"),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evalrunner",
            "run",
            "--config",
            str(config),
            "--suite",
            str(suite),
            *extra,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the run ended before the case was in flight:\n{out}\n{err}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the blocking case never started")
        time.sleep(0.02)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_run_reports_finished_cases_writes_output_and_exits(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    suite = make_suite(tmp_path, [(QUICK, "one"), (CALLS_BLOCK, "two"), (QUICK, "three")])
    output = tmp_path / "report.json"
    ready = tmp_path / "ready"
    process = cli_in_subprocess(suite, "--format", "json", "--output", str(output), ready=ready)
    wait_for(ready, process)
    process.send_signal(sig)
    out, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    assert "✓ one (00_one.yaml)" in out
    assert f"run interrupted by {sig.name}" in out
    assert "two" not in out and "three" not in out
    report = json.loads(output.read_text(encoding="utf-8"))
    assert report["interrupted"] is True
    assert [case["name"] for case in report["cases"]] == ["one"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".evalrunner_cache",  # what admission kept for the next run
        "evalrunner.toml",
        "ready",
        "report.json",
        "suite",
    ]


def test_the_case_timeout_flag_fails_a_hung_case_from_the_command_line(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [(CALLS_BLOCK, "hangs"), (QUICK, "after")])
    process = cli_in_subprocess(suite, "--case-timeout", "0.5", ready=tmp_path / "ready")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    assert "✗ hangs (00_hangs.yaml)  run error  " in out
    assert "    run error: timed out after 0.5s" in out
    assert "✓ after (01_after.yaml)" in out


@pytest.mark.parametrize(
    "failure",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EROFS, "Read-only file system"),
    ],
)
def test_a_report_that_cannot_be_written_is_exit_2_and_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: OSError
) -> None:
    suite = make_suite(tmp_path, [(QUICK, "one")])
    output = tmp_path / "out" / "report.json"
    output.parent.mkdir()
    output.write_text("the previous report\n", encoding="utf-8")

    def broken_fsync(fd: int) -> None:
        raise failure

    monkeypatch.setattr(os, "fsync", broken_fsync)
    result = CliRunner().invoke(app, ["run", "--suite", str(suite), "--output", str(output)])
    assert result.exit_code == 2
    assert f"{output}: cannot write report: {failure.strerror}" in result.stderr
    assert output.read_text(encoding="utf-8") == "the previous report\n"
    assert [p.name for p in output.parent.iterdir()] == ["report.json"]
