"""Standard output that refuses writes (a full disk, a closed pipe) is a refusal with one line
on stderr, never a traceback, and never the exit code of a verdict."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.tiers import each_once_by_default, first_by_default

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [["run"], ["run", "--format", "json"], ["list"], ["validate"], ["config"], ["--version"]]
# The commands share one way to say a failed write, but --version is answered before the command
# line is imported: a run and --version by default, every command in the slow tier.
TIERED_COMMANDS = [*first_by_default(COMMANDS[:-1]), COMMANDS[-1]]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the repository's suite, where a run may write beside it (its cache)."""
    shutil.copytree(ROOT / "evals", tmp_path / "evals")
    return tmp_path


def evalrunner(*args: str) -> list[str]:
    return [sys.executable, "-m", "evalrunner", *args]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", TIERED_COMMANDS, ids=" ".join)
def test_a_full_disk_on_stdout_is_a_refusal_with_one_line(project: Path, args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            evalrunner(*args),
            cwd=project,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "evalrunner: cannot write its output: No space left on device"
    )
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


@pytest.mark.parametrize("args", first_by_default(COMMANDS[:3]), ids=" ".join)
def test_a_pipe_closed_by_its_reader_ends_the_run_quietly_with_2(
    project: Path, args: list[str]
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write, as after `| head -0`
    try:
        done = subprocess.run(
            evalrunner(*args),
            cwd=project,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 2
    assert done.stderr == ""


# The group's help, the help given for no arguments, and a command's; another command's help in
# the slow tier.
@pytest.mark.parametrize(
    "args", [["--help"], [], *first_by_default([["run", "--help"], ["serve", "--help"]])], ids=str
)
def test_help_into_a_closed_pipe_is_a_refusal_too(project: Path, args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            evalrunner(*args),
            cwd=project,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (2, "")


@pytest.mark.parametrize(
    "args", [*first_by_default([["run"], ["list"]]), ["--version"]], ids=" ".join
)
def test_a_closed_stdout_is_refused_before_anything_runs(project: Path, args: list[str]) -> None:
    done = subprocess.run(
        evalrunner(*args),
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 2
    assert done.stderr == (
        "evalrunner: standard output is closed; point it somewhere (a file, or /dev/null) "
        "and run it again\n"
    )


def test_a_reader_that_leaves_mid_report_makes_the_run_a_refusal(
    project: Path, tmp_path: Path
) -> None:
    # A report far larger than a pipe holds: the reader takes one byte and leaves, so the
    # kernel reports a short write, which must not pass for a delivered report.
    case = (ROOT / "evals" / "regression" / "multi_turn_tool_loop.toml").read_text("utf-8")
    for i in range(300):
        named = case.replace('name = "multi-turn-tool-loop"', f'name = "case-{i:03}"')
        (tmp_path / f"c{i:03}.toml").write_text(named, "utf-8")
    process = subprocess.Popen(
        evalrunner("run", str(tmp_path), "-v"),
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    assert os.read(process.stdout.fileno(), 1)
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 2
    assert stderr == b""


PRINTING_AGENT = """\
import os
import subprocess
import sys

from evalrunner.agents.reference import ReferenceAgent


class Chatty(ReferenceAgent):
    def respond(self, user_input):
        print('::error file=evals/forged.yaml,line=1::forged by the agent')
        print('{"not": "the report"}')
        sys.stdout.write("no newline")
        sys.stdout.flush()
        os.write(1, b"forged at the file descriptor\\n")
        subprocess.run(["echo", "forged by a child process"], check=True)
        return super().respond(user_input)
"""


# Each format and each front end by default; each on each in the slow tier.
@pytest.mark.parametrize(("fmt", "jobs"), each_once_by_default(["json", "github"], ["1", "2"]))
def test_what_an_agent_prints_goes_to_stderr_not_into_the_report(
    tmp_path: Path, jobs: str, fmt: str
) -> None:
    import json
    import shutil

    (tmp_path / "chatty_agent.py").write_text(PRINTING_AGENT, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "evals"\nagent = "chatty_agent:Chatty"\n', encoding="utf-8"
    )
    shutil.copytree(ROOT / "evals" / "regression", tmp_path / "evals")
    done = subprocess.run(
        evalrunner("run", "--format", fmt, "-j", jobs),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "forged" not in done.stdout and "no newline" not in done.stdout
    assert done.stderr.count("forged by the agent") >= 18  # once per turn
    assert done.stderr.count("forged at the file descriptor") >= 18
    assert done.stderr.count("forged by a child process") >= 18
    if fmt == "json":
        assert json.loads(done.stdout)["all_passed"] is True
    else:
        assert not [line for line in done.stdout.splitlines() if line.startswith("::")]


@pytest.mark.parametrize("args", [["run"], ["run", "--format", "json", "--json", "r.json"]])
def test_a_closed_stderr_still_runs_and_reports(tmp_path: Path, args: list[str]) -> None:
    # `evalrunner run 2>&-`: problems have nowhere to go, but the run and its report do.
    import shutil

    shutil.copytree(ROOT / "evals", tmp_path / "evals")
    done = subprocess.run(
        evalrunner(*args),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(2),
    )
    assert done.returncode == 0, done.stdout
    if "--json" in args:
        import json

        printed = json.loads(done.stdout)
        assert printed["cases"] and printed == json.loads((tmp_path / "r.json").read_text())
    else:
        assert "passed" in done.stdout.splitlines()[-1]
