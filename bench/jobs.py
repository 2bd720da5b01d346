"""How much ``--jobs`` speeds a run up: the same generated suite run serially and in worker
processes, through the installed command as a user runs it (process start included).

Generates N one-tool-call JSON cases with three checks each, then times ``evalrunner run``
with ``--jobs 1`` and with ``--jobs J`` (median of R runs each, the two alternated so that
noise on a shared machine falls on both), checks that the two JSON reports agree but for
timings, and prints cases per second and the speed-up. Asserts nothing.

    python bench/jobs.py [--count 1000] [--jobs 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def case(i: int) -> dict[str, object]:
    """One tool call and a reply, graded by three checks."""
    token = f"token_{i:05d}"
    return {
        "name": f"jobs-bench-{i}",
        "class": "positive",
        "turns": [
            {
                "user_input": f"Please echo {token}.",
                "steps": [
                    {
                        "response": {
                            "type": "tool_calls",
                            "tool_calls": [
                                {"id": f"c{i}", "name": "echo", "arguments": {"message": token}}
                            ],
                        }
                    },
                    {"response": {"type": "text", "content": f"Echoed {token}."}},
                ],
            }
        ],
        "expects": {
            "exact_tool_calls": 1,
            "tool_arguments_contain": [{"tool": "echo", "needle": token}],
            "tool_results_contain": [{"tool": "echo", "needle": token}],
        },
    }


def command() -> list[str]:
    beside = Path(sys.executable).parent / "evalrunner"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "evalrunner"]


def timed_run(suite: Path, jobs: str) -> tuple[float, dict[str, object]]:
    started = time.perf_counter()
    done = subprocess.run(
        [*command(), "run", "--suite", str(suite), "--format", "json", "--jobs", jobs],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode}): {done.stderr[-500:]}")
    return elapsed, json.loads(done.stdout)


def without_timings(report: dict[str, object]) -> dict[str, object]:
    cases = [dict(c, duration_ms=0) for c in report["cases"]]  # type: ignore[attr-defined]
    return dict(report, duration_ms=0, cases=cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--jobs", default="2")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="evalrunner-bench-jobs-"))
    try:
        suite = workdir / "suite"
        suite.mkdir()
        for i in range(args.count):
            (suite / f"case_{i:05d}.json").write_text(json.dumps(case(i)), encoding="utf-8")
        serial: list[float] = []
        parallel: list[float] = []
        for _ in range(args.rounds):
            seconds, one = timed_run(suite, "1")
            serial.append(seconds)
            seconds, many = timed_run(suite, args.jobs)
            parallel.append(seconds)
            if without_timings(one) != without_timings(many):
                raise SystemExit("the serial and parallel reports differ")
        s, p = statistics.median(serial), statistics.median(parallel)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), {args.count} cases")
        print(
            f"--jobs 1        : median {s:6.2f} s  {args.count / s:7.0f} cases/s (process included)"
        )
        print(
            f"--jobs {args.jobs:<9}: median {p:6.2f} s  {args.count / p:7.0f} cases/s "
            f"(process included)"
        )
        print(f"speed-up        : {s / p:.2f}x   (reports identical but for timings)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
