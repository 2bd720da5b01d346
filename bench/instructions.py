"""Instructions per case, counted by valgrind's callgrind: the one figure here that a noisy
machine cannot move (the same count run after run, whatever else the host is doing).

Generates bench/jobs.py's one-tool-call JSON case N and 3N times, and runs each stage under
callgrind in a fresh process after a warm-up of N cases (imports and compiled schemas paid
before the count that matters); the difference between the two sizes, over 2N, is what one
more case costs:

- ``discover``: finding the fixture files;
- ``load``: reading and parsing one (``load_document``);
- ``admit``: discovery, loading and admission (``select_cases``);
- ``whole``: all of it, then replay and grading (``evaluate_case``), as bench/targets.py's
  "whole pipeline" row runs it;
- ``--jobs 2``: ``run_suite`` with two workers, the parent's count and each worker's
  (a forked worker's count starts from its parent's at the fork, so the parent's share
  before the fork is taken off): what bounds the speed-up two cores can give. Unlike the
  others this row varies: a worker sends its reports every 32 cases or every 50 ms, and
  under callgrind 50 ms is a case or two, so it counts more messages than a real run sends
  and its bound is a floor.

Needs valgrind on PATH; prints figures, asserts nothing.

    python bench/instructions.py [--count 200]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobs import case  # noqa: E402  (the same case as bench/jobs.py)

STAGE = """\
import sys
from pathlib import Path
from evalrunner.fixture.load import find_fixtures, load_document
from evalrunner.session import evaluate_case, run_suite, select_cases

warm, suite, stage = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
for chosen in select_cases([warm]).cases:
    evaluate_case(chosen.case, case_timeout=120)
if stage == "discover":
    find_fixtures([suite])
elif stage == "load":
    for path in sorted(suite.iterdir()):
        load_document(path)
elif stage == "admit":
    select_cases([suite])
elif stage == "whole":
    for chosen in select_cases([suite]).cases:
        assert evaluate_case(chosen.case, case_timeout=120).passed
else:
    report = run_suite(suite, jobs=2, case_timeout=120)
    assert report.cases and all(c.passed for c in report.cases)
"""

COLLECTED = re.compile(r"==(\d+)== Collected : (\d+)")


def write_suite(directory: Path, count: int) -> None:
    directory.mkdir(parents=True)
    for i in range(count):
        text = json.dumps(case(i), indent=2)
        (directory / f"case_{i:05d}.json").write_text(text, encoding="utf-8")


def counted(script: Path, warm: Path, suite: Path, stage: str) -> dict[int, int]:
    """Instructions of each process of one run (pid -> count), the first pid the parent's."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            str(script),
            str(warm),
            str(suite),
            stage,
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"{stage}: the run failed:\n{done.stderr[-1500:]}")
    return {int(pid): int(count) for pid, count in COLLECTED.findall(done.stderr)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    n = parser.parse_args().count
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on PATH (Debian: apt install valgrind)")
    print(f"python {sys.version.split()[0]}; instructions per JSON case, from {n} to {3 * n}")
    with tempfile.TemporaryDirectory(prefix="evalrunner-instructions-") as scratch:
        root = Path(scratch)
        script = root / "stage.py"
        script.write_text(STAGE, encoding="utf-8")
        for name, count in (("warm", n), ("small", n), ("large", 3 * n)):
            write_suite(root / name, count)
        small, large = root / "small", root / "large"
        per_case: dict[str, float] = {}
        for stage in ("discover", "load", "admit", "whole"):
            before = sum(counted(script, root / "warm", small, stage).values())
            after = sum(counted(script, root / "warm", large, stage).values())
            per_case[stage] = (after - before) / (2 * n)
            print(f"{stage:9} {per_case[stage]:12,.0f}")
        print(f"{'replay+grade':9} {per_case['whole'] - per_case['admit']:9,.0f} (whole - admit)")

        runs = [counted(script, root / "warm", suite, "jobs") for suite in (small, large)]
        parents = [min(run) for run in runs]  # the parent started first: the lowest pid
        parent = (runs[1][parents[1]] - runs[0][parents[0]]) / (2 * n)
        workers = [
            sorted(count for pid, count in run.items() if pid != top)
            for run, top in zip(runs, parents, strict=True)
        ]
        # Each worker runs half the cases; its count includes its parent's before the fork,
        # which grows with the suite by one discovery per case.
        worker = max(
            (big - little - 2 * n * per_case["discover"]) / n
            for little, big in zip(workers[0], workers[1], strict=True)
        )
        serial = per_case["whole"]
        bound = serial / (per_case["discover"] + (worker + parent - per_case["discover"]) / 2)
        print(
            f"--jobs 2  parent {parent:,.0f} per case (discovery included), each worker "
            f"{worker:,.0f} per case it runs: at most {bound:.2f}x serial on two free cores"
        )


if __name__ == "__main__":
    main()
