"""Peak memory of a big suite: N generated fixtures (default 10,000) loaded and admitted, then
also replayed and graded, each measured in a fresh process (peak RSS from getrusage), against
the same process doing nothing but importing evalrunner.

    python bench/memory.py [--count 10000] [--format json|yaml|toml]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

MEASURE = """
import resource, sys, time
from pathlib import Path
from evalrunner import run_suite
from evalrunner.fixture.admit import admit_documents
from evalrunner.fixture.load import discover, iter_documents
suite, stage = Path(sys.argv[1]), sys.argv[2]
started = time.perf_counter()
if stage == "admit":
    admission = admit_documents(iter_documents(discover(suite)))
    assert admission.ok, admission.errors[:3]
    count = len(admission.cases)
elif stage == "run":
    report = run_suite(suite)
    assert report.all_passed
    count = len(report.cases)
else:
    count = 0
seconds = time.perf_counter() - started
print(count, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, seconds)
"""


def measure(suite: Path, stage: str) -> tuple[int, float, float]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(suite), stage],
        capture_output=True,
        text=True,
        check=True,
    )
    count, rss, seconds = done.stdout.split()
    return int(count), float(rss), float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--format", default="json", choices=["json", "yaml", "toml"])
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from throughput import write_suite

    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp)
        write_suite(suite, args.format, args.count)
        size = sum(p.stat().st_size for p in suite.iterdir()) / 1024 / 1024
        print(f"{args.count} {args.format} fixtures, {size:.1f} MiB on disk")
        _, base, _ = measure(suite, "import")
        print(f"  import only             peak RSS {base:7.1f} MiB")
        for stage, label in (("admit", "load + admit"), ("run", "whole run (all stages)")):
            count, rss, seconds = measure(suite, stage)
            print(
                f"  {label:22}  peak RSS {rss:7.1f} MiB (+{rss - base:.1f})  "
                f"{count} cases in {seconds:.1f} s"
            )


if __name__ == "__main__":
    main()
