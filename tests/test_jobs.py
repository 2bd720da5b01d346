"""--jobs: cases in worker processes, with the report, order, verdicts and exit code of a serial
run; Ctrl-C stops the workers; bad values are refused. And the run options that came with the
conformance checks: trimmed_history, and where a flag's agent command runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from support.tiers import first_by_default
from test_faults import CALLS_BLOCK, QUICK, cli_in_subprocess, make_suite, wait_for
from typer.testing import CliRunner

from evalrunner.cli import app

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "evals" / "regression"
COMPAT = ROOT.parent / "shared" / "compat" / "zeroclaw"


def run(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    import os

    before = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, ["run", *args], env={"NO_COLOR": "1"})
    finally:
        os.chdir(before)
    return result.exit_code, result.stdout, result.stderr


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    report = dict(report, duration_ms=0)
    report["cases"] = [dict(case, duration_ms=0) for case in report["cases"]]
    return report


@pytest.mark.parametrize("jobs", ["2", "3", "auto"])
@pytest.mark.parametrize("suite", [REGRESSION, COMPAT], ids=["regression", "zeroclaw"])
def test_jobs_give_the_serial_report(suite: Path, jobs: str) -> None:
    if not suite.is_dir():
        pytest.skip(f"{suite} is not here")
    serial = run("--suite", str(suite), "--format", "json")
    parallel = run("--suite", str(suite), "--format", "json", "--jobs", jobs)
    assert serial[0] == parallel[0] == 0
    assert without_timings(json.loads(serial[1])) == without_timings(json.loads(parallel[1]))


def test_the_worker_pool_is_shut_down_when_the_run_returns() -> None:
    # A pool left running into interpreter exit races CPython's own shutdown of it, which
    # then prints "Exception ignored ... Bad file descriptor" on some runs.
    from concurrent.futures import process

    code, _, _ = run("--suite", str(REGRESSION), "--jobs", "2")
    assert code == 0
    assert not [t for t in threading.enumerate() if isinstance(t, process._ExecutorManagerThread)]


def test_jobs_keep_failures_errors_and_the_exit_code(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in sorted(p.name for p in REGRESSION.iterdir()):
        (suite / name).write_bytes((REGRESSION / name).read_bytes())
    # One case made to fail, one made to error (a response left over).
    failing = json.loads((REGRESSION / "forbidden_tool_not_used.json").read_text("utf-8"))
    failing["name"] = "made-to-fail"
    failing["expects"]["response_contains"] = ["not in the reply"]
    (suite / "zz_fail.json").write_text(json.dumps(failing), encoding="utf-8")
    erroring = dict(failing, name="made-to-error")
    erroring["turns"] = [dict(failing["turns"][0], steps=failing["turns"][0]["steps"] * 2)]
    (suite / "zz_error.json").write_text(json.dumps(erroring), encoding="utf-8")
    serial = run("--suite", str(suite), "--format", "json")
    parallel = run("--suite", str(suite), "--format", "json", "-j", "2")
    assert serial[0] == parallel[0] == 1
    assert without_timings(json.loads(serial[1])) == without_timings(json.loads(parallel[1]))


def test_jobs_build_a_configured_python_agent_in_each_worker() -> None:
    example = ROOT / "examples" / "python-agent"
    config = ("--config", str(example / "evalrunner.toml"), "--no-cache")
    serial = run(*config, "--format", "json")
    parallel = run(*config, "--format", "json", "-j", "2")
    assert serial[0] == parallel[0] == 0
    assert without_timings(json.loads(serial[1])) == without_timings(json.loads(parallel[1]))


@pytest.mark.parametrize("value", ["0", "-1", "x", "1.5", "257", "²", "1e3", " ", "99999999999"])
def test_a_bad_jobs_value_is_refused(value: str) -> None:
    code, out, err = run("--jobs", value)
    assert code == 2 and out == ""
    assert err.startswith("--jobs: must be a number from 1 to 256, or auto; got ")


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")
def test_jobs_auto_counts_the_cpus_the_process_may_use_not_the_machines() -> None:
    # Pinned to one CPU, --jobs auto (run's, and mutate's default) means one worker, however
    # many the machine has.
    probe = "from evalrunner.cli.run import parse_jobs; print(parse_jobs('auto'))"
    pinned = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert pinned.stdout.strip() == "1"
    free = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert free.stdout.strip() == str(min(256, len(os.sched_getaffinity(0))))


@pytest.mark.parametrize(
    ("sig", "code"), first_by_default([(signal.SIGINT, 130), (signal.SIGTERM, 143)])
)
def test_a_signal_stops_the_workers_and_reports_the_finished_cases(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    suite = make_suite(tmp_path, [(QUICK, "one"), (CALLS_BLOCK, "two"), (QUICK, "three")])
    output = tmp_path / "report.json"
    ready = tmp_path / "ready"
    process = cli_in_subprocess(
        suite, "--jobs", "2", "--format", "json", "--output", str(output), ready=ready
    )
    wait_for(ready, process)
    process.send_signal(sig)
    out, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    report = json.loads(output.read_text(encoding="utf-8"))
    assert report["interrupted"] is True
    # What finished before the hung case is reported, in suite order; nothing from it on.
    # ("one" runs in the other worker: whether it finished before the signal is timing.)
    assert [case["name"] for case in report["cases"]] in ([], ["one"])
    assert f"run interrupted by {sig.name}" in out


# --- trimmed_history and where a flag's command runs ----------------------------------------

FORGETFUL = '''
from evalrunner import Message, ModelRequest, TextResponse
from evalrunner.boundary.tools import dispatch, tool_spec


class Forgetful:
    """Sends each turn with only that turn's messages: history trimmed on purpose."""

    def __init__(self, context):
        self.context = context

    def respond(self, user_input):
        history = [Message("user", user_input)]
        offered = tuple(tool_spec(t) for t in self.context.tools.values())
        while True:
            response = self.context.provider.complete(ModelRequest(tuple(history), offered))
            if isinstance(response, TextResponse):
                return response.content
            history.append(Message("assistant", "", tool_calls=response.tool_calls))
            for call in response.tool_calls:
                record = dispatch(self.context.tools, call)
                self.context.observer.on_tool_call(record)
                history.append(Message("tool", record.result, tool_call_id=call.id))
'''


def forgetful_project(tmp_path: Path, trimmed: bool) -> Path:
    (tmp_path / "forgetful.py").write_text(FORGETFUL, encoding="utf-8")
    suite = tmp_path / "evals"
    suite.mkdir()
    (suite / "two_turns.toml").write_bytes((REGRESSION / "multi_turn_tool_loop.toml").read_bytes())
    config = tmp_path / "evalrunner.toml"
    config.write_text(
        f'[eval]\nsuite_dir = "evals"\nagent = "forgetful:Forgetful"\n'
        f"trimmed_history = {'true' if trimmed else 'false'}\n",
        encoding="utf-8",
    )
    return config


def test_an_agent_that_trims_history_fails_unless_the_config_says_so(tmp_path: Path) -> None:
    code, out, _ = run("--config", str(forgetful_project(tmp_path, trimmed=False)))
    assert code == 1
    assert "earlier messages were dropped" in out
    assert "trimmed_history = true" in out


def test_trimmed_history_checks_the_current_turn_and_the_report_says_so(tmp_path: Path) -> None:
    config = forgetful_project(tmp_path, trimmed=True)
    code, out, _ = run("--config", str(config), "--format", "json")
    assert code == 0, out
    assert json.loads(out)["trimmed_history"] is True
    shown = CliRunner().invoke(app, ["config", "--config", str(config)], env={})
    assert "trimmed_history = true  # " in shown.stdout


def test_trimmed_history_must_be_a_boolean(tmp_path: Path) -> None:
    config = tmp_path / "evalrunner.toml"
    config.write_text('[eval]\ntrimmed_history = "yes"\n', encoding="utf-8")
    code, _, err = run("--config", str(config))
    assert code == 2
    assert err == f'{config}:2:19: eval.trimmed_history must be true or false, got string "yes"\n'


def test_a_flags_agent_command_runs_from_the_working_directory(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "evalrunner.toml").write_text(
        f'[eval]\nsuite_dir = "{REGRESSION}"\n', encoding="utf-8"
    )
    agent = ROOT / "examples" / "sdk-agents" / "openai_agent.py"
    (project / "sub" / "agent.py").write_bytes(agent.read_bytes())
    for helper in ("echo_tool.py", "agent_protocol.py"):
        (project / "sub" / helper).write_bytes((agent.parent / helper).read_bytes())
    command = f"{sys.executable} agent.py"  # relative to where the user stands: sub/
    code, out, err = run("--agent-command", command, cwd=project / "sub")
    assert code == 0, out + err
    assert out.rstrip().splitlines()[-1].startswith("18/18 cases passed in ")


def test_a_removed_working_directory_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    import subprocess

    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "from evalrunner.cli import main; sys.argv = ['evalrunner', 'run']; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(gone)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("evalrunner: the working directory cannot be used")


def test_a_fifo_report_whose_reader_never_reads_does_not_make_the_run_deaf(
    tmp_path: Path,
) -> None:
    import os
    import subprocess
    import time

    suite = tmp_path / "suite"
    suite.mkdir()
    long_reply = "x" * 200_000  # the failure detail quotes it: more than a pipe holds
    (suite / "big.json").write_text(
        json.dumps(
            {
                "name": "big",
                "turns": [
                    {
                        "user_input": "hi",
                        "steps": [{"response": {"type": "text", "content": long_reply}}],
                    }
                ],
                "expects": {"response_contains": ["not there"]},
            }
        ),
        encoding="utf-8",
    )
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open, and never read
    try:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "evalrunner",
                "run",
                "--suite",
                str(suite),
                "--format",
                "json",
                "--output",
                str(fifo),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)  # not a timing assertion: only gives the run time to block on the FIFO
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)  # without the fix: blocked, SIGTERM ignored, timeout
        assert process.returncode in (143, -signal.SIGTERM)
    finally:
        os.close(reader)


CRASHING_AGENT = """\
import ctypes
import os

from evalrunner.agents.reference import ReferenceAgent


class Crashing(ReferenceAgent):
    def respond(self, user_input):
        if "token_7f3a" in user_input:
            if os.environ["CRASH"] == "exit":
                os._exit(3)
            ctypes.string_at(0)  # a crash in native code
        return super().respond(user_input)
"""


@pytest.mark.parametrize(
    ("how", "ending"), [("exit", "exit code 3"), ("segv", "killed by SIGSEGV")]
)
def test_a_case_that_kills_its_worker_errors_alone_and_the_run_reports(
    tmp_path: Path, how: str, ending: str
) -> None:
    (tmp_path / "crashing_agent.py").write_text(CRASHING_AGENT, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "evals"\nagent = "crashing_agent:Crashing"\n', encoding="utf-8"
    )
    shutil.copytree(REGRESSION, tmp_path / "evals")
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", "run", "-j", "2", "--json", "out/r.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CRASH": how},
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    report = json.loads((tmp_path / "out" / "r.json").read_text("utf-8"))
    errored = {case["name"]: case["error"] for case in report["cases"] if case["error"]}
    assert errored == {
        "echo-token-roundtrip": f"the worker process running this case died ({ending}): the "
        "agent or a tool ended the process (os._exit, exec, a signal, a crash in native code)"
    }
    assert report["passed"] == len(report["cases"]) - 1 == 17


EXITING_AGENT = """\
import os

from evalrunner.agents.reference import ReferenceAgent


class Exiting(ReferenceAgent):
    def respond(self, user_input):
        if "token_7f3a" in user_input:
            os._exit(0)  # would end the run with 0, a pass, and no report
        return super().respond(user_input)
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_agent_calling_os_exit_fails_its_case_and_never_passes_the_run(
    tmp_path: Path, jobs: str
) -> None:
    (tmp_path / "exiting_agent.py").write_text(EXITING_AGENT, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "evals"\nagent = "exiting_agent:Exiting"\n', encoding="utf-8"
    )
    shutil.copytree(REGRESSION, tmp_path / "evals")
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", "run", "-j", jobs, "--json", "r.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "r.json").read_text("utf-8"))
    errored = {case["name"]: case["error"] for case in report["cases"] if case["error"]}
    assert list(errored) == ["echo-token-roundtrip"]
    assert errored["echo-token-roundtrip"] == (
        "the agent called os._exit(0), which would have ended the whole run"
        if jobs == "1"
        else "the worker process running this case died (exit code 0): the agent or a tool "
        "ended the process (os._exit, exec, a signal, a crash in native code)"
    )
