"""--jobs on a platform that forks: a crew of workers loads, admits and runs its own share of the
suite (evalrunner/execution.py). What must not change: nothing runs before the whole suite is
admitted; every refusal, duplicate name included, reads exactly as in a serial run; -k and
--shard take the same cases; the cache is used; a worker's crash fails only its case."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
from support.tiers import first_by_default

from evalrunner.execution import can_fork
from evalrunner.model import SuiteReport
from evalrunner.session import run_suite

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "evals" / "regression"

pytestmark = pytest.mark.skipif(not can_fork(), reason="the crew needs fork")

# An agent that leaves a mark for every case it runs: a refused suite must leave none.
MARKING_AGENT = """\
import os
from functools import partial
from pathlib import Path

from evalrunner.agents.reference import ReferenceAgent


class Marking(ReferenceAgent):
    def respond(self, user_input):
        marks = Path(os.environ["MARKS"])
        marks.mkdir(exist_ok=True)
        (marks / f"{os.getpid()}-{len(list(marks.iterdir()))}").write_text(user_input)
        return super().respond(user_input)
"""


def case_text(name: str, token: str) -> str:
    return json.dumps(
        {
            "name": name,
            "turns": [
                {
                    "user_input": f"say {token}",
                    "steps": [{"response": {"type": "text", "content": token}}],
                }
            ],
            "expects": {"response_contains": [token]},
        }
    )


def project(tmp_path: Path, count: int = 12) -> Path:
    suite = tmp_path / "evals"
    suite.mkdir()
    for i in range(count):
        (suite / f"case_{i:02d}.json").write_text(case_text(f"case-{i}", f"t{i}"), "utf-8")
    (tmp_path / "marking_agent.py").write_text(MARKING_AGENT, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "evals"\nagent = "marking_agent:Marking"\n', encoding="utf-8"
    )
    return suite


def evalrunner(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalrunner", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MARKS": str(tmp_path / "marks"), "NO_COLOR": "1"},
    )


def without_timings(text: str) -> object:
    report = json.loads(text)
    report["duration_ms"] = 0
    for case in report["cases"]:
        case["duration_ms"] = 0
    return report


# Admission is one step whatever refuses the file: one refusal by default, each in the slow tier.
@pytest.mark.parametrize(
    "broken",
    first_by_default(
        [
            "{not json",  # a parse error
            case_text("case-3", "t99"),  # a name another share already uses
            json.dumps({"name": "x", "turns": [], "expects": {}}),  # schema errors
        ]
    ),
    ids=["unparsable", "duplicate-name", "schema"],
)
def test_a_refused_file_stops_the_crew_before_any_case_runs(tmp_path: Path, broken: str) -> None:
    suite = project(tmp_path)
    (suite / "case_07.json").write_text(broken, encoding="utf-8")
    serial = evalrunner(tmp_path, "run", "--no-cache", "-j", "1")
    parallel = evalrunner(tmp_path, "run", "--no-cache", "-j", "3")
    assert serial.returncode == parallel.returncode == 2
    assert parallel.stderr == serial.stderr and "case_07.json" in parallel.stderr
    assert parallel.stdout == serial.stdout
    assert not (tmp_path / "marks").exists()  # not one case ran, in any process


def test_the_crew_runs_every_case_once_in_workers_and_reports_in_suite_order(
    tmp_path: Path,
) -> None:
    project(tmp_path, count=20)
    serial = evalrunner(tmp_path, "run", "--no-cache", "--format", "json", "-j", "1")
    shutil.rmtree(tmp_path / "marks")
    parallel = evalrunner(tmp_path, "run", "--no-cache", "--format", "json", "-j", "2")
    assert serial.returncode == parallel.returncode == 0, parallel.stderr
    assert without_timings(parallel.stdout) == without_timings(serial.stdout)
    marks = list((tmp_path / "marks").iterdir())
    assert len(marks) == 20
    workers = {mark.name.split("-")[0] for mark in marks}
    assert str(os.getpid()) not in workers and len(workers) == 2


# Both selections together by default; each alone in the slow tier.
@pytest.mark.parametrize(
    "selection",
    first_by_default([["-k", "case-1", "--shard", "1/2"], ["-k", "case-1"], ["--shard", "2/3"]]),
)
def test_the_crew_takes_the_cases_a_serial_run_takes(tmp_path: Path, selection: list[str]) -> None:
    project(tmp_path, count=15)
    serial = evalrunner(tmp_path, "run", "--format", "json", "-j", "1", *selection)
    parallel = evalrunner(tmp_path, "run", "--format", "json", "-j", "2", *selection)
    assert serial.returncode == parallel.returncode == 0, parallel.stderr
    assert without_timings(parallel.stdout) == without_timings(serial.stdout)


def test_a_keyword_that_matches_nothing_is_refused_as_serially(tmp_path: Path) -> None:
    project(tmp_path)
    serial = evalrunner(tmp_path, "run", "-j", "1", "-k", "nothing-like-this")
    parallel = evalrunner(tmp_path, "run", "-j", "2", "-k", "nothing-like-this")
    assert serial.returncode == parallel.returncode == 2
    assert parallel.stderr == serial.stderr and "no case matches" in parallel.stderr


def test_the_crew_fills_and_uses_the_admission_cache(tmp_path: Path) -> None:
    project(tmp_path)
    first = evalrunner(tmp_path, "run", "--format", "json", "-j", "2")
    assert first.returncode == 0, first.stderr
    assert (tmp_path / ".evalrunner_cache").is_dir()
    second = evalrunner(tmp_path, "run", "--format", "json", "-j", "2")
    assert without_timings(second.stdout) == without_timings(first.stdout)


def test_library_runs_with_jobs_give_the_serial_report() -> None:
    def verdicts(jobs: int) -> list[tuple[object, ...]]:
        report = run_suite(REGRESSION, jobs=jobs)
        assert isinstance(report, SuiteReport)
        return [(c.name, c.source, c.path, c.passed, c.grades, c.error) for c in report.cases]

    assert verdicts(2) == verdicts(1)


def test_exported_schemas_below_a_suite_are_not_fixtures(tmp_path: Path) -> None:
    project(tmp_path, count=3)
    exported = evalrunner(tmp_path, "schema", "export", "evals/schemas")
    assert exported.returncode == 0, exported.stderr
    assert list((tmp_path / "evals" / "schemas").rglob("*.schema.json"))
    for jobs in ("1", "2"):
        done = evalrunner(tmp_path, "run", "--no-cache", "--format", "json", "-j", jobs)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["total"] == 3


# --- what the breaker found: stopping, dying and interrupts ---------------------------------

TRAPS = """\
import os
import sys
import time
from functools import partial
from pathlib import Path

from evalrunner.agents.reference import ReferenceAgent


class Traps(ReferenceAgent):
    def respond(self, user_input):
        marks = Path(os.environ["MARKS"])
        marks.mkdir(exist_ok=True)
        (marks / user_input.replace(" ", "_")).write_text(str(os.getpid()))
        if "HANG" in user_input:
            time.sleep(600)
        if "FORKEXIT" in user_input:
            child = os.fork()
            if child == 0:  # a child that keeps the worker's pipe open, then the worker dies
                time.sleep(600)
                os._exit(0)
            (marks / f"child-{child}.pid").write_text(str(child))  # once per run of the case
            os._exit(3)
        return super().respond(user_input)
"""


def trap_project(tmp_path: Path, tokens: list[str]) -> Path:
    suite = tmp_path / "evals"
    suite.mkdir()
    for i, token in enumerate(tokens):
        (suite / f"case_{i:02d}.json").write_text(case_text(f"case-{i}", token), "utf-8")
    (tmp_path / "traps.py").write_text(TRAPS, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "evals"\nagent = "traps:Traps"\n', encoding="utf-8"
    )
    return suite


def test_forked_workers_that_stand_down_leave_by_themselves(tmp_path: Path) -> None:
    from evalrunner.execution import ForkedWorkers, RunSettings
    from evalrunner.fixture.load import find_fixtures
    from evalrunner.session import admit_fixtures

    suite = project(tmp_path, count=6)
    (suite / "case_04.json").write_text("{not json", encoding="utf-8")
    crew = ForkedWorkers(
        find_fixtures([suite]),
        admit=partial(admit_fixtures, max_bytes=1 << 20, cache=None),
        settings=RunSettings(jobs=3),
    )
    processes = [worker.process for worker in crew._workers]
    assert crew.admitted() is None
    crew.close()
    # Each saw the parent hang up and left (0); one that had to be killed would say -9.
    assert [process.exitcode for process in processes] == [0, 0, 0]


def test_a_worker_that_dies_while_its_agents_child_holds_the_pipe_is_seen_dead(
    tmp_path: Path,
) -> None:
    trap_project(tmp_path, ["t0", "t1", "FORKEXIT", "t3"])
    out, err = tmp_path / "out.json", tmp_path / "err.txt"
    # Files, not pipes: the agent's child holds what it inherited, and a pipe read to its
    # end would wait for that child, not for evalrunner.
    with out.open("w") as stdout, err.open("w") as stderr:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalrunner",
                "run",
                "--no-cache",
                "--format",
                "json",
                "-j",
                "2",
            ],
            cwd=tmp_path,
            stdout=stdout,
            stderr=stderr,
            timeout=120,
            env={**os.environ, "MARKS": str(tmp_path / "marks")},
        )
    for child in (tmp_path / "marks").glob("child-*.pid"):
        with contextlib.suppress(OSError):
            os.kill(int(child.read_text()), signal.SIGKILL)
    assert done.returncode == 1, err.read_text()
    errors = {c["name"]: c["error"] for c in json.loads(out.read_text())["cases"] if c["error"]}
    assert list(errors) == ["case-2"] and "died (exit code 3)" in errors["case-2"]


@pytest.mark.parametrize("sig", first_by_default([signal.SIGINT, signal.SIGTERM]))
def test_an_interrupt_reports_every_case_finished_before_the_first_unfinished(
    tmp_path: Path, sig: signal.Signals
) -> None:
    tokens = [f"t{i}" for i in range(6)] + ["HANG", "t7"]
    trap_project(tmp_path, tokens)
    marks = tmp_path / "marks"
    process = subprocess.Popen(
        [sys.executable, "-m", "evalrunner", "run", "--no-cache", "--format", "json", "-j", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MARKS": str(marks), "NO_COLOR": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        # Every case has started (the hung one too); the others end at once after their mark.
        while time.monotonic() < deadline and len(list(marks.glob("*"))) < len(tokens):
            time.sleep(0.05)
        time.sleep(1)  # not a timing assertion: lets the started cases reach the parent
        process.send_signal(sig)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
        subprocess.run(["pkill", "-9", "-f", str(tmp_path)], check=False)
    assert process.returncode == 128 + sig, err
    report = json.loads(out)
    assert [c["name"] for c in report["cases"]] == [f"case-{i}" for i in range(6)]


@pytest.mark.parametrize(
    "path",
    [
        pytest.param((), id="crew"),
        pytest.param(("--repeat", "2"), id="pool (repeats run in the pool)"),
    ],
)
def test_an_interrupt_ends_the_command_agents_of_every_worker(
    tmp_path: Path, path: tuple[str, ...]
) -> None:
    project(tmp_path, count=4)
    marker = f"sleep-agent-{os.getpid()}-{tmp_path.name}"
    (tmp_path / "evalrunner.toml").write_text(
        f'[eval]\nsuite_dir = "evals"\nagent_command = "{sys.executable} -c \\"import time; '
        f'time.sleep(300)\\" {marker}"\n',
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "evalrunner", "run", "--no-cache", "-j", "2", *path],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_running(marker)) < 2:
            time.sleep(0.05)
        assert len(_running(marker)) == 2  # one agent per worker
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _running(marker):
            time.sleep(0.05)
        assert _running(marker) == [], "an agent outlived the interrupted run"
    finally:
        process.kill()
        subprocess.run(["pkill", "-f", "-9", marker], check=False)
    assert process.returncode == 130


def _running(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return found.stdout.split()
