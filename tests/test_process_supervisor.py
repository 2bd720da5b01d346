"""The command line's exit code is the run's verdict, whatever the project's code does to the
process it was imported into (issue 23; :mod:`evalrunner.process_supervisor`).

Project code imported by the command line (a Python ``agent``, ``tools``) can end the process
in ways no refusal stops: C's ``_exit`` or ``exec`` from an ``atexit`` hook, after the run
decided it failed, or from a thread it started, in the middle of the run. The process the
user started only waits for the one that runs the command line, and exits with its verdict.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CASE = """\
name: {name}
turns:
  - user_input: say hi
    steps:
      - response: {{type: text, content: hi there}}
expects:
  response_contains: [{word}]
"""

AGENT = """\
import atexit
import ctypes
import os
import signal
import threading
import time

from evalrunner.agents.reference import ReferenceAgent

HOW = os.environ.get("ENDS", "")
if HOW == "atexit-exit":
    atexit.register(lambda: ctypes.CDLL(None)._exit(0))
elif HOW == "atexit-execv":
    atexit.register(lambda: os.execv("/bin/true", ["true"]))
elif HOW == "atexit-sigkill":
    atexit.register(lambda: os.kill(os.getpid(), signal.SIGKILL))
elif HOW == "thread-exit":
    def later():
        time.sleep(1)
        ctypes.CDLL(None)._exit(0)

    threading.Thread(target=later, daemon=True).start()


class Agent(ReferenceAgent):
    def respond(self, user_input):
        if HOW == "thread-exit":
            time.sleep(0.6)  # the run is still going when the thread ends the process
        ready = os.environ.get("READY")
        if ready:  # signals the test, then waits to be interrupted
            open(ready, "w").close()
            time.sleep(60)
        return super().respond(user_input)
"""

TOOL = """\
import atexit
import ctypes

atexit.register(lambda: ctypes.CDLL(None)._exit(0))


class Echo:
    name = "echo"
    description = "Says it back."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments):
        return "said"
"""

MESSAGE = "evalrunner's run ended before it gave its verdict: the process exited with code 0"


def project(root: Path, *, failing: bool, tool: bool = False) -> None:
    suite = root / "suite"
    suite.mkdir()
    words = {"a": "hi", "b": "bye" if failing else "hi", "c": "hi"}
    for name, word in words.items():
        (suite / f"{name}.yaml").write_text(CASE.format(name=name, word=word), "utf-8")
    (root / "ending_agent.py").write_text(AGENT, encoding="utf-8")
    (root / "ending_tool.py").write_text(TOOL, encoding="utf-8")
    config = '[eval]\nsuite_dir = "suite"\n'
    config += 'tools = ["ending_tool:Echo"]\n' if tool else 'agent = "ending_agent:Agent"\n'
    (root / "evalrunner.toml").write_text(config, encoding="utf-8")


def environment(root: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(root)]),
        "NO_COLOR": "1",
        **extra,
    }


def evalrunner(root: Path, *argv: str, ends: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalrunner", *argv],
        cwd=root,
        env=environment(root, ENDS=ends),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("ends", "flags"),
    [
        ("atexit-exit", ()),
        ("atexit-execv", ()),
        ("atexit-exit", ("-j", "2")),
        ("atexit-exit", ("--shard", "1/1")),
    ],
)
def test_an_atexit_hook_that_ends_the_process_does_not_turn_a_failed_run_green(
    tmp_path: Path, ends: str, flags: tuple[str, ...]
) -> None:
    project(tmp_path, failing=True)
    done = evalrunner(tmp_path, "run", "--no-cache", *flags, ends=ends)
    assert "2/3 cases passed (1 failed)" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_mutate_with_an_atexit_hook_in_a_tool_module_keeps_its_exit_code(tmp_path: Path) -> None:
    project(tmp_path, failing=True, tool=True)
    clean = tmp_path / "clean"
    clean.mkdir()
    project(clean, failing=True)
    (clean / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "suite"\ntools = ["ending_tool:Echo"]\n', encoding="utf-8"
    )
    (clean / "ending_tool.py").write_text(
        TOOL.replace("atexit.register(lambda: ctypes.CDLL(None)._exit(0))\n", ""),
        encoding="utf-8",
    )
    expected = evalrunner(clean, "mutate", "--path", "in-process")
    done = evalrunner(tmp_path, "mutate", "--path", "in-process")
    assert expected.returncode != 0, expected.stdout + expected.stderr
    assert done.returncode == expected.returncode, done.stdout + done.stderr


def test_a_thread_that_ends_the_process_mid_run_is_exit_1_with_the_reason(tmp_path: Path) -> None:
    project(tmp_path, failing=False)
    done = evalrunner(tmp_path, "run", "--no-cache", "--json", "r.json", ends="thread-exit")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.endswith(
        f"{MESSAGE} (project code ended it: a native _exit or exec, a crash, a signal)\n"
    ), done.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_passing_run_whose_process_is_then_killed_is_not_a_pass(tmp_path: Path) -> None:
    project(tmp_path, failing=False)
    done = evalrunner(tmp_path, "run", "--no-cache", ends="atexit-sigkill")
    assert "3/3 cases passed" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 128 + signal.SIGKILL, done.stdout + done.stderr
    assert "its process then was killed by SIGKILL" in done.stderr


@pytest.mark.parametrize(("failing", "code"), [(False, 0), (True, 1)])
def test_a_run_exits_with_its_verdict(tmp_path: Path, failing: bool, code: int) -> None:
    project(tmp_path, failing=failing)
    done = evalrunner(tmp_path, "run", "--no-cache")
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stderr == ""


def test_version_is_answered_by_the_process_the_user_started(tmp_path: Path) -> None:
    from evalrunner import __version__

    probe = (
        "import os, sys\n"
        "from evalrunner.__main__ import main\n"
        "sys.argv = ['evalrunner', '--version']\n"
        "pid = os.getpid()\n"
        "main()\n"
        "print('same process' if os.getpid() == pid else 'a child')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, f"evalrunner {__version__}\nsame process\n")


def start_hanging_run(root: Path, **popen: object) -> tuple[subprocess.Popen[str], Path]:
    """``run`` of three cases whose second hangs once it has said so (a file)."""
    project(root, failing=False)
    ready = root / "ready"
    (root / "suite" / "b.yaml").write_text(
        CASE.format(name="b", word="hi").replace("say hi", "wait"), "utf-8"
    )
    (root / "ending_agent.py").write_text(
        AGENT.replace("ready = os.environ.get", "ready = user_input == 'wait' and os.environ.get"),
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "evalrunner", "run", "--no-cache", "--json", "r.json"],
        cwd=root,
        env=environment(root, READY=str(ready)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,  # type: ignore[call-overload]
    )
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the hanging case never started"
        time.sleep(0.02)
    return process, root / "r.json"


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_sent_to_the_process_started_reaches_the_run(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    process, report = start_hanging_run(tmp_path)
    try:
        process.send_signal(sig)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == code, out + err
    assert f"run interrupted by {sig.name} after 1 finished case(s)" in out
    assert [case["name"] for case in json.loads(report.read_text())["cases"]] == ["a"]


def test_ctrl_c_at_a_terminal_interrupts_the_run_once(tmp_path: Path) -> None:
    """The terminal signals the whole foreground group, the child included: the parent does
    not send it a second SIGINT, which could land in the unwinding of the first."""
    project(tmp_path, failing=False)
    ready = tmp_path / "ready"
    (tmp_path / "suite" / "b.yaml").write_text(
        CASE.format(name="b", word="hi").replace("say hi", "wait"), "utf-8"
    )
    (tmp_path / "ending_agent.py").write_text(
        AGENT.replace("ready = os.environ.get", "ready = user_input == 'wait' and os.environ.get"),
        encoding="utf-8",
    )
    argv = [sys.executable, "-m", "evalrunner", "run", "--no-cache", "--json", "r.json"]
    env = environment(tmp_path, READY=str(ready))
    pid, terminal = pty.fork()
    if pid == 0:  # pragma: no cover - the child execs at once
        os.chdir(tmp_path)
        os.execve(sys.executable, argv, env)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.write(terminal, b"\x03")
        out = b""
        while select.select([terminal], [], [], 60)[0]:
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            out += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(terminal)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 130, text
    assert "run interrupted by SIGINT after 1 finished case(s)" in text
    assert "Traceback" not in text
    cases = json.loads((tmp_path / "r.json").read_text())["cases"]
    assert [case["name"] for case in cases] == ["a"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_parent_stops_the_run_as_sigterm_does(tmp_path: Path) -> None:
    process, report = start_hanging_run(tmp_path)
    process.kill()
    # The child's end of the pipes closes when it has ended; it found no one to tell its
    # verdict to, which is no traceback.
    out, err = process.communicate(timeout=60)
    assert "Traceback" not in out + err, out + err
    cases = json.loads(report.read_text())
    assert cases["interrupted"] is True
    assert [case["name"] for case in cases["cases"]] == ["a"]
