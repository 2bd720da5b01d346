"""``os._exit`` from an in-process agent or tool never gives a front end exit 0 for a run that
did not pass (issue 23): not from an ``atexit`` hook, not on the import of the configured
agent or tools, not from a thread the agent started, not from a daemon thread that outlived
its case (:mod:`evalrunner.process_exit`).

Every front end runs in a process of its own here: without the refusal, the agent's
``os._exit`` would end the process running the test.
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

FAILING = """\
name: a-fails
turns:
  - user_input: say hi
    steps:
      - response: {type: text, content: bye}
expects:
  response_contains: [hi]
"""

PASSING = """\
name: b-passes
turns:
  - user_input: say hi
    steps:
      - response: {type: text, content: hi there}
expects:
  response_contains: [hi]
"""

USES_ECHO = """\
name: c-echoes
turns:
  - user_input: echo hi
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: call_1, name: echo, arguments: {message: hi}}]
      - response: {type: text, content: hi there}
expects:
  response_contains: [hi]
"""

AGENT = """\
import atexit
import os
import sys
import threading
import time
from pathlib import Path

from evalrunner.agents.reference import ReferenceAgent

MODE = os.environ["EXIT_MODE"]
if MODE == "import":
    os._exit(0)
if MODE == "atexit":
    atexit.register(os._exit, 0)


def after_case(workspace):
    # A daemon thread that ends the process once its case is over: released, and waited
    # for, as the runner removes the case's workspace after the case (an audit hook runs on
    # the thread that removes it), so that it fires before the run's report is built.
    fire = threading.Event()

    def late():
        fire.wait()
        os._exit(0)

    thread = threading.Thread(target=late, daemon=True)
    thread.start()

    def released(event, args):
        if event == "shutil.rmtree" and not fire.is_set() and str(args[0]) == str(workspace):
            fire.set()
            thread.join()

    sys.addaudithook(released)


def late():
    # Waits until the front end has written its report file, then ends the process: after
    # every case, before the exit code.
    done = Path(os.environ["EXIT_WAIT_FOR"])
    while not done.exists():
        time.sleep(0.001)
    os._exit(0)


class Agent(ReferenceAgent):
    def __init__(self, context):
        super().__init__(context)
        self.context = context

    def respond(self, user_input):
        if MODE == "after-case":
            after_case(self.context.workspace)
        if MODE == "posix":
            import posix  # the function os._exit re-exports, under its own name

            posix._exit(0)
        if MODE == "thread":
            thread = threading.Thread(target=os._exit, args=(0,))
            thread.start()
            thread.join()
        if MODE.startswith("late") and not getattr(late, "started", False):
            late.started = True
            threading.Thread(target=late, daemon=True).start()
        return super().respond(user_input)
"""

TOOL = """\
import os

if os.environ["EXIT_MODE"] == "tool-import":
    os._exit(0)


class Shout:
    name = "shout"
    description = "Says it loudly."
    parameters = {"type": "object", "properties": {}}

    def __init__(self):
        if os.environ["EXIT_MODE"] == "tool-construct":
            os._exit(0)

    def call(self, arguments):
        return "HEY"
"""


def project(root: Path, *cases: str, tools: bool = False) -> Path:
    suite = root / "suite"
    suite.mkdir()
    for index, text in enumerate(cases):
        (suite / f"{index}.yaml").write_text(text, encoding="utf-8")
    (root / "exit_agent.py").write_text(AGENT, encoding="utf-8")
    (root / "exit_tool.py").write_text(TOOL, encoding="utf-8")
    config = '[eval]\nsuite_dir = "suite"\nagent = "exit_agent:Agent"\n'
    if tools:
        config += 'tools = ["exit_tool:Shout"]\n'
    (root / "evalrunner.toml").write_text(config, encoding="utf-8")
    return root / "evalrunner.toml"


def environment(root: Path, mode: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(root)]),
        "EXIT_MODE": mode,
        "EXIT_WAIT_FOR": str(root / ("report.txt" if mode == "late-run" else "report.xml")),
        "NO_COLOR": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }


def run(root: Path, mode: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalrunner", *args],
        cwd=root,
        env=environment(root, mode),
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_suite(root: Path, mode: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return run(
        root, mode, "run", "--no-cache", "--junit-xml", str(root / "report.xml"),
        "--format", "json", *flags,
    )  # fmt: skip


def by_pytest(root: Path, mode: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "evalrunner.pytest_plugin", "-q"]
    command += ["-p", "no:cacheprovider", "--rootdir", str(root), "--evalrunner"]
    command += ["--junitxml", str(root / "report.xml")]
    return subprocess.run(
        command, cwd=root, env=environment(root, mode), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def junit_failed(root: Path) -> set[str]:
    tree = ET.parse(root / "report.xml")
    return {
        case.attrib["name"]
        for case in tree.getroot().iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    }


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_run_keeps_its_exit_code_when_an_atexit_hook_calls_os_exit(
    tmp_path: Path, jobs: str
) -> None:
    project(tmp_path, FAILING, PASSING)
    done = run_suite(tmp_path, "atexit", "-j", jobs)
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["failed"] == 1
    assert "an exit hook: os._exit(0) was refused" in done.stderr


def test_pytest_keeps_its_exit_code_when_an_atexit_hook_calls_os_exit(tmp_path: Path) -> None:
    project(tmp_path, FAILING, PASSING)
    done = by_pytest(tmp_path, "atexit")
    assert done.returncode == 1, done.stdout + done.stderr
    assert junit_failed(tmp_path) == {"a-fails"}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_run_refuses_an_agent_whose_import_calls_os_exit(tmp_path: Path, jobs: str) -> None:
    project(tmp_path, PASSING)
    done = run_suite(tmp_path, "import", "-j", jobs)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "exit_agent:Agent: cannot import exit_agent: it called os._exit(0), which would have "
        "ended the whole run"
    ) in done.stderr


def test_pytest_refuses_an_agent_whose_import_calls_os_exit(tmp_path: Path) -> None:
    project(tmp_path, PASSING)
    done = by_pytest(tmp_path, "import")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "it called os._exit(0)" in done.stderr


@pytest.mark.parametrize("mode", ["tool-import", "tool-construct"])
def test_every_front_end_refuses_a_tool_whose_import_or_construction_calls_os_exit(
    tmp_path: Path, mode: str
) -> None:
    project(tmp_path, PASSING, tools=True)
    for args in (("run", "--no-cache"), ("run", "--no-cache", "-j", "2")):
        done = run(tmp_path, mode, *args)
        assert done.returncode == 2, (args, done.stdout + done.stderr)
        assert "exit_tool:Shout:" in done.stderr and "os._exit(0)" in done.stderr
    done = by_pytest(tmp_path, mode)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    done = run(tmp_path, mode, "mutate", "--path", "in-process")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "exit_tool:Shout:" in done.stderr and "os._exit(0)" in done.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_os_exit_from_a_thread_the_agent_started_fails_its_case(tmp_path: Path, jobs: str) -> None:
    project(tmp_path, FAILING, PASSING)
    done = run_suite(tmp_path, "thread", "-j", jobs)
    assert done.returncode == 1, done.stdout + done.stderr
    cases = {case["name"]: case for case in json.loads(done.stdout)["cases"]}
    assert not cases["b-passes"]["passed"]
    if jobs == "1":
        assert cases["b-passes"]["error"] == (
            "the agent or a tool (or a thread it started) called os._exit(0), which would "
            "have ended the whole run"
        )
        assert "Traceback" not in done.stderr


def test_posix_exit_is_refused_as_os_exit_is(tmp_path: Path) -> None:
    project(tmp_path, PASSING)
    done = run_suite(tmp_path, "posix")
    assert done.returncode == 1, done.stdout + done.stderr
    (case,) = json.loads(done.stdout)["cases"]
    assert case["error"] == "the agent called os._exit(0), which would have ended the whole run"


def test_os_exit_from_a_thread_the_agent_started_fails_its_pytest_item(tmp_path: Path) -> None:
    project(tmp_path, PASSING)
    done = by_pytest(tmp_path, "thread")
    assert done.returncode == 1, done.stdout + done.stderr
    assert junit_failed(tmp_path) == {"b-passes"}
    # As quiet as run: one line for the thread, no pytest warning with evalrunner's internals.
    assert "PytestUnhandledThreadExceptionWarning" not in done.stdout + done.stderr
    assert "ProcessExitAttempt" not in done.stdout + done.stderr
    assert "os._exit(0) was refused" in done.stdout + done.stderr


def test_shards_and_merge_fail_a_case_whose_agent_thread_calls_os_exit(tmp_path: Path) -> None:
    project(tmp_path, PASSING, USES_ECHO)
    parts = []
    for index in (1, 2):
        part = tmp_path / f"shard-{index}.json"
        run(tmp_path, "thread", "run", "--no-cache", "--shard", f"{index}/2", "--json", str(part))
        parts.append(str(part))
    done = run(tmp_path, "thread", "merge", *parts, "--json", str(tmp_path / "merged.json"))
    assert done.returncode == 1, done.stdout + done.stderr
    merged = json.loads((tmp_path / "merged.json").read_text("utf-8"))
    assert [case["passed"] for case in merged["cases"]] == [False, False]


LATE_EXIT = "os._exit(0)"
LATE_PROBLEM = "an agent or tool ended, or tried to end, a process of the run outside any case"


@pytest.mark.parametrize("front_end", ["run", "run -j 2", "shards + merge", "pytest", "read back"])
def test_a_daemon_thread_ending_the_process_after_its_case_fails_the_run_on_every_front_end(
    tmp_path: Path, front_end: str
) -> None:
    """Each case's agent leaves a daemon thread that calls os._exit(0) once its case is over,
    before the run's report is built. No case carries it, so the case passes; the run does
    not, and every front end says so with exit 1 (the run core's verdict, from the report's
    late_exits). Under -j 2 the call ends the worker before it reports the case, so the case,
    run again alone, is the one that ends its process: a run error of that case, exit 1 too.
    Shards used to leave it out of their JSON report, and merge then exited 0."""
    from evalrunner.session import run_exit_code
    from evalrunner.toolbox.merge import read_report

    project(tmp_path, PASSING, USES_ECHO)
    if front_end == "pytest":
        done = by_pytest(tmp_path, "after-case")
        assert done.returncode == 1, done.stdout + done.stderr
        # The cases themselves passed; the run's late exit is a failed test of its own, so
        # that a CI system reading the JUnit file does not see every test pass.
        assert junit_failed(tmp_path) == {"late-exit"}
        assert "1 failed, 2 passed" in done.stdout
        assert f"evalrunner: {LATE_PROBLEM} ({LATE_EXIT}; {LATE_EXIT})" in done.stdout
        return
    if front_end == "shards + merge":
        parts = []
        for index in (1, 2):
            part = tmp_path / f"shard-{index}.json"
            flags = ("--shard", f"{index}/2", "--json", str(part))
            shard = run(tmp_path, "after-case", "run", "--no-cache", *flags)
            assert shard.returncode == 1, shard.stdout + shard.stderr
            parts.append(str(part))
        merged = tmp_path / "merged.json"
        done = run(tmp_path, "none", "merge", *parts, "--json", str(merged))
        assert done.returncode == 1, done.stdout + done.stderr
        for part in parts:
            assert json.loads(Path(part).read_text("utf-8"))["late_exits"] == [LATE_EXIT]
        assert f"error: {LATE_PROBLEM}" in done.stdout  # the table says why
        data = json.loads(merged.read_text("utf-8"))
        assert data["late_exits"] == [LATE_EXIT, LATE_EXIT] and not data["all_passed"]
        assert [case["passed"] for case in data["cases"]] == [True, True]
        return
    jobs = "2" if front_end == "run -j 2" else "1"
    report = tmp_path / "report.json"
    done = run(tmp_path, "after-case", "run", "--no-cache", "-j", jobs, "--json", str(report))
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(report.read_text("utf-8"))
    assert not data["all_passed"]
    if front_end == "run -j 2":
        assert [case["passed"] for case in data["cases"]] == [False, False]
        assert all("died (exit code 0)" in case["error"] for case in data["cases"])
        return
    assert data["late_exits"] == [LATE_EXIT, LATE_EXIT]
    assert [case["passed"] for case in data["cases"]] == [True, True]
    assert f"error: {LATE_PROBLEM} ({LATE_EXIT}; {LATE_EXIT})" in done.stdout
    if front_end == "read back":
        back = read_report(report).report
        assert back.late_exits == (LATE_EXIT, LATE_EXIT)
        assert run_exit_code(back) == 1


# A daemon thread that outlived its case and calls os._exit once the report file is written:
# the run's exit code stays (it failed a case). Whether the call comes before the front end
# took its exit code (the run then fails for it too) or after (too late to change the
# verdict) is the threads' race, so these runs fail a case either way.


def test_run_keeps_its_exit_code_when_a_daemon_thread_calls_os_exit_after_the_cases(
    tmp_path: Path,
) -> None:
    project(tmp_path, FAILING)
    # The table report file is written first, while the JSON and JUnit XML are still to come.
    done = run(tmp_path, "late-run", "run", "--no-cache", "--output", str(tmp_path / "report.txt"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "0/1 cases passed (1 failed)" in done.stdout


def test_pytest_keeps_its_exit_code_when_a_daemon_thread_calls_os_exit_after_the_cases(
    tmp_path: Path,
) -> None:
    project(tmp_path, FAILING)
    done = by_pytest(tmp_path, "late")
    assert done.returncode == 1, done.stdout + done.stderr
    assert junit_failed(tmp_path) == {"a-fails"}


def test_an_os_exit_outside_every_case_is_kept_for_the_front_end_and_fails_the_run() -> None:
    """What a front end asks before its exit code: a refused call no case held."""
    import threading

    from evalrunner.process_exit import late_exit_problem, process_exit_refused, unclaimed

    with process_exit_refused():
        thread = threading.Thread(target=os._exit, args=(0,))
        thread.start()
        thread.join()
        late = unclaimed()
    assert late == ["os._exit(0)"]
    assert unclaimed() == []  # taken once
    assert late_exit_problem(late) == (
        "an agent or tool ended, or tried to end, a process of the run outside any case "
        "(os._exit(0)), from a thread that outlived its case or between cases; the run is "
        "not a pass"
    )


def test_a_non_zero_os_exit_outside_every_case_is_let_through() -> None:
    """It cannot read as a pass, and foreign code (pytest-xdist's worker) relies on it."""
    code = (
        "import os\n"
        "from evalrunner.process_exit import refuse_for_life\n"
        "refuse_for_life()\n"
        "os._exit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60
    )
    assert done.returncode == 3


LATE_IN_A_WORKER = """\
import os
import threading
import time
from pathlib import Path

from evalrunner.agents.reference import ReferenceAgent

MARK = Path(os.environ["EXIT_MARK"])
STARTED = []


def late():
    # Only once the process's own later case asks (a case run again elsewhere does not).
    while not (MARK.exists() and MARK.read_text() == str(os.getpid())):
        time.sleep(0.01)
    os._exit(0)


class Agent(ReferenceAgent):
    def respond(self, user_input):
        if user_input == "leave a thread":
            STARTED.append(threading.Thread(target=late, daemon=True))
            STARTED[-1].start()
        if user_input == "wake it" and STARTED:
            MARK.write_text(str(os.getpid()))
            # The thread ends this process first (in a worker), or ends itself, its call
            # refused (in evalrunner's own process).
            deadline = time.monotonic() + 60
            while STARTED[-1].is_alive() and time.monotonic() < deadline:
                time.sleep(0.01)
        return super().respond(user_input)
"""


def case_saying(name: str, user: str) -> str:
    return PASSING.replace("name: b-passes", f"name: {name}").replace("say hi", user)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_daemon_thread_of_an_earlier_case_ending_the_process_fails_the_run(
    tmp_path: Path, jobs: str
) -> None:
    """Case 0 leaves a daemon thread that ends its process while case 2 runs. Serially the
    refused call fails case 2; with --jobs (cases 0 and 2 on one worker) the worker dies while
    it runs case 2, which fails too: run again alone it passes, but it was the case running
    when its process ended (the worker keeps that in memory it shares with the parent)."""
    project(tmp_path, case_saying("a-leaves", "leave a thread"), PASSING, PASSING)
    suite = tmp_path / "suite"
    (suite / "2.yaml").write_text(case_saying("c-wakes", "wake it"), encoding="utf-8")
    (tmp_path / "late_agent.py").write_text(LATE_IN_A_WORKER, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "suite"\nagent = "late_agent:Agent"\n', encoding="utf-8"
    )
    env_mode = "none"
    os.environ["EXIT_MARK"] = str(tmp_path / "mark")
    try:
        done = run(tmp_path, env_mode, "run", "--no-cache", "--format", "json", "-j", jobs)
    finally:
        del os.environ["EXIT_MARK"]
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(done.stdout)
    cases = {case["name"]: case for case in data["cases"]}
    if jobs == "1":
        assert "called os._exit(0)" in str(cases["c-wakes"]["error"])
    else:
        error = str(cases["c-wakes"]["error"])
        assert error.startswith("the worker process running this case died (exit code 0)")
        assert "run again alone, in a process of its own, it ended cleanly" in error
        assert [name for name, case in cases.items() if not case["passed"]] == ["c-wakes"]
        assert "late_exits" not in data


BETWEEN_CASES_AGENT = """\
import os
import threading
import time
from pathlib import Path

from evalrunner.agents.reference import ReferenceAgent

HERE = Path(__file__).parent
STARTED = []


def late():
    # The case runs in a worker process the front end supervises (its agent is the
    # project's code): the project's conftest, in pytest's own process, says when the case
    # is over with a file, and hears with another that the attempt was made.
    while not (HERE / "fire").exists():
        time.sleep(0.001)
    try:
        os._exit(0)
    finally:
        (HERE / "fired").touch()


class Agent(ReferenceAgent):
    def respond(self, user_input):
        if not STARTED:
            STARTED.append(threading.Thread(target=late, daemon=True))
            STARTED[-1].start()
        return super().respond(user_input)
"""

BETWEEN_CASES_CONFTEST = """\
import time
from pathlib import Path

HERE = Path(__file__).parent


def pytest_runtest_teardown(item):
    (HERE / "fire").touch()
    deadline = time.monotonic() + 30
    while not (HERE / "fired").exists() and time.monotonic() < deadline:
        time.sleep(0.001)
"""


@pytest.mark.parametrize("xdist", [False, True])
def test_pytest_fails_the_run_for_an_os_exit_between_cases(tmp_path: Path, xdist: bool) -> None:
    """A passing case whose thread calls os._exit(0) after the case ended (as pytest tears
    the item down): the call is refused, and the run fails, under xdist too, where the worker
    hands it to the controller."""
    if xdist:
        pytest.importorskip("xdist")
    project(tmp_path, PASSING)
    (tmp_path / "between_agent.py").write_text(BETWEEN_CASES_AGENT, encoding="utf-8")
    (tmp_path / "conftest.py").write_text(BETWEEN_CASES_CONFTEST, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "suite"\nagent = "between_agent:Agent"\n', encoding="utf-8"
    )
    command = [sys.executable, "-m", "pytest", "-p", "evalrunner.pytest_plugin", "-q"]
    command += ["-p", "no:cacheprovider", "--rootdir", str(tmp_path), "--evalrunner"]
    if xdist:
        command += ["-p", "xdist", "-n", "2"]
    done = subprocess.run(
        [*command, "--junitxml", str(tmp_path / "report.xml")],
        cwd=tmp_path, env=environment(tmp_path, "none"), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "evalrunner: an agent or tool ended, or tried to end, a process of the run" in (
        done.stdout
    )
    assert junit_failed(tmp_path) == {"late-exit"}  # the case itself passed; the run did not
