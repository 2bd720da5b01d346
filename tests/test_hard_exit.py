"""An agent or tool of the project's that ends evalrunner's process in a way no refusal stops
(``ctypes``' ``_exit``, ``os.execv``, a SIGKILL of its own process, a segfault) fails its case
as a run error, on every front end (issue 23): a serial ``run``, ``run --shard``, a serial
``pytest --evalrunner`` (whose summary and ``--junitxml`` are still written) and ``mutate``.
The other cases are reported, and the exit code is not 0.

``os._exit`` itself is refused in-process (``tests/test_process_exit.py``); ``-j`` workers
are covered in ``tests/test_jobs.py``. Here the project's code runs in the one worker process
that the front end supervises (:attr:`evalrunner.execution.RunSettings.supervised`).

Each front end runs in a process of its own: without the supervision, the agent would end
the process running the front end, with its own status (0 for ``_exit(0)`` and ``execv``:
a green run with no report).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CASE = """\
name: {name}
turns:
  - user_input: {said}
    steps:
      - response: {{type: text, content: hi there}}
expects:
  response_contains: [hi]
"""

TOOL_CASE = """\
name: b-ends
turns:
  - user_input: end it
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: call_1, name: ender, arguments: {}}]
      - response: {type: text, content: hi there}
expects:
  response_contains: [hi]
"""

ENDINGS = """\
import ctypes
import os
import signal
import sys


def end():
    how = os.environ["HARD_EXIT"]
    if how == "ctypes":
        ctypes.CDLL(None)._exit(0)
    if how == "execv":
        os.execv(sys.executable, [sys.executable, "-c", "pass"])
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "segfault":
        ctypes.string_at(0)
"""

AGENT = """\
from endings import end
from evalrunner.agents.reference import ReferenceAgent


class Agent(ReferenceAgent):
    def respond(self, user_input):
        if user_input == "end it":
            end()
        return super().respond(user_input)
"""

TOOL = """\
from endings import end


class Ender:
    name = "ender"
    description = "Ends the process."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments):
        end()
        return "ended"
"""

HOW = {
    "ctypes": "exit code 0",
    "execv": "exit code 0",
    "sigkill": "killed by SIGKILL",
    "segfault": "killed by SIGSEGV",
}
"""Each way of ending the process, and how the run error names it."""

NAMES = ("a-passes", "b-ends", "c-passes", "d-passes")
DIED = "the worker process running this case died"


def project(root: Path, *, tool: bool = False) -> None:
    """Four cases, ``b-ends`` the one that ends its process (in the agent, or in a tool)."""
    suite = root / "suite"
    suite.mkdir()
    for name in NAMES:
        text = TOOL_CASE if tool and name == "b-ends" else None
        said = "end it" if name == "b-ends" else "say hi"
        (suite / f"{name}.yaml").write_text(text or CASE.format(name=name, said=said), "utf-8")
    (root / "endings.py").write_text(ENDINGS, encoding="utf-8")
    (root / "ending_agent.py").write_text(AGENT, encoding="utf-8")
    (root / "ending_tool.py").write_text(TOOL, encoding="utf-8")
    config = '[eval]\nsuite_dir = "suite"\n'
    config += 'tools = ["ending_tool:Ender"]\n' if tool else 'agent = "ending_agent:Agent"\n'
    (root / "evalrunner.toml").write_text(config, encoding="utf-8")


def launch(root: Path, how: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=root,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(root)]),
            "HARD_EXIT": how,
            "NO_COLOR": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )


def run(root: Path, how: str, *flags: str) -> dict[str, dict[str, object]]:
    """``evalrunner run`` with ``flags``: each case of its JSON report, by name."""
    done = launch(root, how, "-m", "evalrunner", "run", "--no-cache", "--json", "r.json", *flags)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    report = json.loads((root / "r.json").read_text("utf-8"))
    return {str(case["name"]): case for case in report["cases"]}


def assert_ended(cases: dict[str, dict[str, object]], how: str) -> None:
    """``b-ends`` is a run error naming how its process ended; every other case passed."""
    error = str(cases["b-ends"]["error"])
    assert error.startswith(f"{DIED} ({HOW[how]}): the agent or a tool ended the process"), error
    assert all(cases[name]["passed"] for name in cases if name != "b-ends"), cases


def check_run(root: Path, how: str, *, tool: bool = False) -> None:
    project(root, tool=tool)
    cases = run(root, how)
    assert sorted(cases) == list(NAMES)
    assert_ended(cases, how)


def check_shards(root: Path, how: str) -> None:
    """Each shard reports its own cases; the one holding ``b-ends`` fails with it."""
    project(root)
    seen: dict[str, dict[str, object]] = {}
    for shard in ("1/2", "2/2"):
        done = launch(
            root, how, "-m", "evalrunner", "run", "--no-cache", "--shard", shard,
            "--json", f"{shard[0]}.json",
        )  # fmt: skip
        report = json.loads((root / f"{shard[0]}.json").read_text("utf-8"))
        cases = {str(case["name"]): case for case in report["cases"]}
        assert done.returncode == (1 if "b-ends" in cases else 0), done.stdout + done.stderr
        seen.update(cases)
    assert sorted(seen) == list(NAMES)
    assert_ended(seen, how)


def check_pytest(root: Path, how: str, *, tool: bool = False) -> None:
    """The item of ``b-ends`` fails with the run error; pytest writes its summary and the
    JUnit file, and exits 1."""
    project(root, tool=tool)
    done = launch(
        root, how, "-m", "pytest", "-p", "evalrunner.pytest_plugin", "-q",
        "-p", "no:cacheprovider", "--rootdir", str(root), "--evalrunner",
        "--junitxml", str(root / "report.xml"),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 3 passed" in done.stdout, done.stdout
    cases = ET.parse(root / "report.xml").getroot().iter("testcase")
    failures = {
        case.get("name"): failure.get("message", "")
        for case in cases
        for failure in case.findall("failure")
    }
    assert list(failures) == ["b-ends"], failures
    assert f"run error: {DIED} ({HOW[how]})" in failures["b-ends"]


def check_mutate(root: Path, how: str) -> None:
    """A project tool that ends the process in the baseline: mutate says the baseline
    cannot run, naming the case, and exits 2 (never 0, "every mutant killed")."""
    project(root, tool=True)
    done = launch(root, how, "-m", "evalrunner", "mutate", "--path", "in-process")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the reference agent's run of 'b-ends' on the in-process path ended its process" in (
        done.stdout
    )
    assert f"{DIED} ({HOW[how]})" in done.stdout


# --- one case per front end, in the default tier ----------------------------------------------


def test_a_serial_run_fails_the_case_whose_agent_calls_ctypes_exit(tmp_path: Path) -> None:
    check_run(tmp_path, "ctypes")


def test_a_shard_fails_the_case_whose_agent_kills_its_own_process(tmp_path: Path) -> None:
    check_shards(tmp_path, "sigkill")


def test_pytest_fails_the_item_whose_agent_execs_and_writes_its_junit(tmp_path: Path) -> None:
    check_pytest(tmp_path, "execv")


def test_mutate_says_the_baseline_cannot_run_when_a_tool_calls_ctypes_exit(
    tmp_path: Path,
) -> None:
    check_mutate(tmp_path, "ctypes")


def test_a_serial_run_fails_the_case_whose_tool_kills_its_own_process(tmp_path: Path) -> None:
    check_run(tmp_path, "sigkill", tool=True)


def test_the_agent_keeps_its_state_across_cases_in_the_supervised_worker(tmp_path: Path) -> None:
    """The cases of a serial run still run in one process, in suite order: what the agent
    kept from one case (a counter in its module) is there in the next."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for index in range(3):
        (suite / f"{index}.yaml").write_text(
            CASE.format(name=f"case-{index}", said="say hi"), encoding="utf-8"
        )
    (tmp_path / "counting_agent.py").write_text(
        "import os\n"
        "from pathlib import Path\n"
        "from evalrunner.agents.reference import ReferenceAgent\n"
        "SEEN = []\n"
        "class Agent(ReferenceAgent):\n"
        "    def respond(self, user_input):\n"
        "        SEEN.append(os.getpid())\n"
        "        with Path(__file__).with_name('seen.txt').open('a') as seen:\n"
        "            seen.write(f'{len(SEEN)} {len(set(SEEN))} {os.getpid() != os.getppid()}\\n')\n"
        "        return super().respond(user_input)\n",
        encoding="utf-8",
    )
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "suite"\nagent = "counting_agent:Agent"\n', encoding="utf-8"
    )
    done = launch(tmp_path, "none", "-m", "evalrunner", "run", "--no-cache")
    assert done.returncode == 0, done.stdout + done.stderr
    seen = (tmp_path / "seen.txt").read_text("utf-8").splitlines()
    assert seen == ["1 1 True", "2 1 True", "3 1 True"]


def test_a_command_agents_project_tool_that_ends_the_process_as_it_is_built(
    tmp_path: Path,
) -> None:
    """A command agent runs its own tools, but the project's tools are still built here for
    every case: one whose construction ends the process (the second, the first being the
    check at start-up) fails the cases instead of ending the run with exit 0."""
    project(tmp_path)
    (tmp_path / "built_tool.py").write_text(
        "import ctypes\n"
        "BUILT = []\n"
        "class Shout:\n"
        "    name = 'shout'\n"
        "    description = 'Says it loudly.'\n"
        "    parameters = {'type': 'object', 'properties': {}}\n"
        "    def __init__(self):\n"
        "        BUILT.append(1)\n"
        "        if len(BUILT) == 2:\n"
        "            ctypes.CDLL(None)._exit(0)\n"
        "    def call(self, arguments):\n"
        "        return 'HEY'\n",
        encoding="utf-8",
    )
    command = f"{sys.executable} -m evalrunner.mutation.mutants --wire openai reference"
    (tmp_path / "evalrunner.toml").write_text(
        f'[eval]\nsuite_dir = "suite"\ntools = ["built_tool:Shout"]\n'
        f"agent_command = {json.dumps(command)}\n",
        encoding="utf-8",
    )
    cases = run(tmp_path, "none")
    assert sorted(cases) == list(NAMES)
    for case in cases.values():
        assert str(case["error"]).startswith(f"{DIED} (exit code 0)"), case


BETWEEN_AGENT = """\
import ctypes
import os
import threading
import time
from pathlib import Path

from evalrunner.agents.reference import ReferenceAgent

HERE = Path(__file__).parent
STARTED = []


def late():
    while not (HERE / "fire").exists():
        time.sleep(0.001)
    ctypes.CDLL(None)._exit(0)


class Agent(ReferenceAgent):
    def respond(self, user_input):
        if not STARTED and not (HERE / "fire").exists():  # the first worker's first case
            (HERE / "worker.pid").write_text(str(os.getpid()))
            STARTED.append(threading.Thread(target=late, daemon=True))
            STARTED[-1].start()
        return super().respond(user_input)
"""

BETWEEN_CONFTEST = """\
import time
from pathlib import Path

HERE = Path(__file__).parent


def pytest_runtest_teardown(item):
    if (HERE / "fire").exists():
        return
    (HERE / "fire").touch()
    # Until the worker is dead and waits to be reaped: a zombie whose threads are all gone
    # (its main thread shows as one before the thread that ended the process is gone).
    process = Path("/proc", (HERE / "worker.pid").read_text())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state = (process / "stat").read_text().split(")")[-1].split()[0]
            if state == "Z" and len(list((process / "task").iterdir())) <= 1:
                return
        except OSError:
            return
        time.sleep(0.001)
"""


def test_pytest_fails_the_run_when_a_thread_of_a_case_ends_the_worker_between_cases(
    tmp_path: Path,
) -> None:
    """A passing case whose thread ends the worker's process after the case (as pytest tears
    the item down), where no case is running to carry it: the next case runs in a new
    worker, and the run fails, naming what ended the last."""
    project(tmp_path)
    (tmp_path / "between_agent.py").write_text(BETWEEN_AGENT, encoding="utf-8")
    (tmp_path / "conftest.py").write_text(BETWEEN_CONFTEST, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "suite"\nagent = "between_agent:Agent"\n', encoding="utf-8"
    )
    done = launch(
        tmp_path, "none", "-m", "pytest", "-p", "evalrunner.pytest_plugin", "-q",
        "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "--evalrunner",
        "--junitxml", str(tmp_path / "report.xml"),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "4 passed" in done.stdout
    assert (
        "evalrunner: an agent or tool ended, or tried to end, a process of the run outside any "
        "case (evalrunner worker 1 ended between cases (exit code 0))"
    ) in done.stdout, done.stdout
    assert (tmp_path / "report.xml").exists()


# --- every way of ending, on every front end ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(HOW))
@pytest.mark.parametrize("tool", [False, True], ids=["agent", "tool"])
def test_a_serial_run_fails_the_case_that_ends_its_process(
    tmp_path: Path, how: str, tool: bool
) -> None:
    check_run(tmp_path, how, tool=tool)


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(HOW))
def test_shards_fail_the_case_that_ends_its_process(tmp_path: Path, how: str) -> None:
    check_shards(tmp_path, how)


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(HOW))
@pytest.mark.parametrize("tool", [False, True], ids=["agent", "tool"])
def test_pytest_fails_the_item_that_ends_its_process(tmp_path: Path, how: str, tool: bool) -> None:
    check_pytest(tmp_path, how, tool=tool)


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(HOW))
def test_mutate_refuses_a_baseline_whose_tool_ends_its_process(tmp_path: Path, how: str) -> None:
    check_mutate(tmp_path, how)


STOPPED_WHILE_IDLE = """\
import time
from pathlib import Path

from evalrunner.execution import RunSettings, execute
from evalrunner.session import select_cases

selection = select_cases([Path("evals/regression")])
cases = [item.case for item in selection.cases][:2]
reports = execute(cases, RunSettings(supervised=True))
print(next(reports).passed, next(reports).passed)
time.sleep(0.5)  # the worker has sent its last report and waits for the next order
reports.close()  # the reader left early, as mutate's --first-kill does: stop it at once
"""


def test_a_supervised_worker_stopped_while_idle_leaves_without_a_traceback(
    tmp_path: Path,
) -> None:
    # The parent stops a worker it no longer needs with SIGTERM; between cases, the worker
    # waits on its pipe, where the signal raised RunInterrupted into multiprocessing's own
    # traceback printer (seen as "RunInterrupted: 15" on stderr after mutate).
    script = tmp_path / "stop.py"
    script.write_text(STOPPED_WHILE_IDLE, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
    assert "Traceback" not in done.stderr, done.stderr


SECOND_CASE_AGENT = """\
import ctypes

from evalrunner.agents.reference import ReferenceAgent

STARTED = []


class Agent(ReferenceAgent):
    def respond(self, user_input):
        STARTED.append(user_input)
        if len(STARTED) == 2:  # the second case this process runs: state, not the case
            ctypes.CDLL(None)._exit(0)
        return super().respond(user_input)
"""


@pytest.mark.parametrize("flags", [(), ("-j", "2")])
def test_the_case_running_when_its_process_ends_is_blamed_though_alone_it_passes(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    # The process ends in the second case it runs, whichever that is: run again alone, in a
    # process of its own, that case passes. It was reported passed, the death put down to
    # something outside every case; the worker now says which case it was running.
    project(tmp_path)
    (tmp_path / "ending_agent.py").write_text(SECOND_CASE_AGENT, encoding="utf-8")
    cases = run(tmp_path, "none", *flags)
    blamed = [name for name, case in cases.items() if not case["passed"]]
    assert len(blamed) == (1 if not flags else 2), cases  # -j 2: one per worker
    for name in blamed:
        error = str(cases[name]["error"])
        assert error.startswith(f"{DIED} (exit code 0)"), error
        assert "run again alone, in a process of its own, it ended cleanly" in error
