"""Issue 11's table, row by row: what each target measures, measured here, in one run.

- whole pipeline (load, admit, replay, grade), serial, in process, per format, on N generated
  one-tool-call cases with three checks (bench/jobs.py's case), admission cache off; beside
  it the parse-only floor of the same files (json.loads, tomllib, libyaml's events); then
  ``run_suite`` per format serially and with ``jobs=2``, admission cache cold and warm;
- admission of an unchanged YAML suite with the cache cold and then warm;
- ``evalrunner --version`` and ``evalrunner run`` on the bundled suite, each a cold process
  (median of R), the run with its cache cleared first and then warm;
- ``--jobs 2`` against ``--jobs 1`` on N and 5N JSON cases: in process (best of R, imports
  paid once), and through the installed command (median of R alternated runs, process start
  included).

The SDK command-agent row is bench/persistent_agents.py's, and peak memory bench/memory.py's.
Prints figures; asserts nothing; uses nothing outside this repository and the standard
library.

    python bench/targets.py [--count 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from functools import partial
from pathlib import Path

import tomli_w
from ruamel.yaml import YAML

from evalrunner.fixture.cache import AdmissionCache
from evalrunner.session import evaluate_case, run_suite, select_cases

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobs import case  # noqa: E402  (the same case as bench/jobs.py)


def write_suite(directory: Path, fmt: str, count: int) -> None:
    directory.mkdir(parents=True)
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    for i in range(count):
        data = case(i)
        if fmt == "json":
            text = json.dumps(data, indent=2)
        elif fmt == "toml":
            text = tomli_w.dumps(data)
        else:
            buffer = io.StringIO()
            yaml.dump(data, buffer)
            text = buffer.getvalue()
        (directory / f"case_{i:05d}.{fmt}").write_text(text, encoding="utf-8")


def floor(directory: Path, fmt: str) -> float:
    """Seconds to read and bare-parse every file of the suite."""
    parse: Callable[[str], object]
    if fmt == "json":
        parse = json.loads
    elif fmt == "toml":
        parse = tomllib.loads
    else:
        from _ruamel_yaml import CParser  # type: ignore[import-not-found]

        def parse(text: str) -> object:
            parser = CParser(text)
            while parser.get_event() is not None:
                pass
            return parser

    started = time.perf_counter()
    for path in sorted(directory.iterdir()):
        parse(path.read_text(encoding="utf-8"))
    return time.perf_counter() - started


def pipeline(directory: Path, cache: AdmissionCache | None = None) -> tuple[float, float, int]:
    """Seconds to load and admit, seconds to replay and grade, and cases that passed."""
    started = time.perf_counter()
    selection = select_cases([directory], cache=cache)
    admitted = time.perf_counter()
    assert not isinstance(selection, list) and hasattr(selection, "cases"), selection
    passed = sum(
        evaluate_case(chosen.case, case_timeout=120).passed
        for chosen in selection.cases  # type: ignore[union-attr]
    )
    return admitted - started, time.perf_counter() - admitted, passed


def by_jobs_and_cache(suite: Path, cache_dir: Path, rounds: int, n: int) -> str:
    """Cases per second of ``run_suite`` serially and with two jobs, admission cache cold
    (emptied before the run) and warm (filled by the run before)."""
    figures = []
    for jobs in (1, 2):
        for warm in (False, True):
            best = float("inf")
            for _ in range(rounds):
                if not warm:
                    shutil.rmtree(cache_dir, ignore_errors=True)
                else:
                    run_suite(suite, jobs=jobs, case_timeout=120, cache_dir=cache_dir)
                started = time.perf_counter()
                run_suite(suite, jobs=jobs, case_timeout=120, cache_dir=cache_dir)
                best = min(best, time.perf_counter() - started)
            figures.append(f"-j {jobs} cache {'warm' if warm else 'cold'} {n / best:6.0f}/s")
    return "  ".join(figures)


def _spin(n: int = 2_000_000) -> int:
    total = 0
    for i in range(n):
        total += i & 7
    return total


def machine_ceiling(rounds: int) -> float:
    """How much faster this machine runs two CPU-bound Python processes than one doing the
    same work twice, now: the most ``--jobs 2`` could give here, whatever the code. (On a
    shared host it moves with the neighbours: read the ``--jobs`` rows against it.)"""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    ratios = []
    for _ in range(max(rounds, 3)):
        started = time.perf_counter()
        _spin()
        _spin()
        one = time.perf_counter() - started
        started = time.perf_counter()
        workers = [context.Process(target=_spin) for _ in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        ratios.append(one / (time.perf_counter() - started))
    return statistics.median(ratios)


def cpu_timed(run: Callable[[], object]) -> tuple[float, float, float]:
    """Wall seconds of ``run``, and the CPU seconds (user and system) of this process and of
    the worker processes it started and reaped. The same work taking more CPU in two workers
    than serially is the host's cores slowing each other, not more work."""
    import resource

    def cpu(who: int) -> float:
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    own, children = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run()
    wall = time.perf_counter() - started
    return wall, cpu(resource.RUSAGE_SELF) - own, cpu(resource.RUSAGE_CHILDREN) - children


def command() -> list[str]:
    beside = Path(sys.executable).parent / "evalrunner"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "evalrunner"]


def timed(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n, rounds = args.count, args.rounds
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), {n} cases per suite")
    with tempfile.TemporaryDirectory(prefix="evalrunner-targets-") as scratch:
        root = Path(scratch)
        write_suite(root / "warm-up", "json", 20)
        pipeline(root / "warm-up")  # imports and compiled schemas, paid once per process
        for fmt, target in (("json", 2000), ("yaml", 1000), ("toml", 1000)):
            suite = root / fmt
            write_suite(suite, fmt, n)
            best = min((pipeline(suite) for _ in range(rounds)), key=lambda r: r[0] + r[1])
            base = min(floor(suite, fmt) for _ in range(rounds))
            whole = best[0] + best[1]
            print(
                f"{fmt:4} whole pipeline {n / whole:7.0f}/s (target {target})  "
                f"load+admit {n / best[0]:7.0f}/s  replay+grade {n / best[1]:7.0f}/s  "
                f"parse floor {n / base:7.0f}/s  ({best[2]}/{n} passed)"
            )
            print(f"     run_suite  {by_jobs_and_cache(suite, root / f'{fmt}-cache', rounds, n)}")

        yaml_suite = root / "yaml"
        cold = []
        warm = []
        for _ in range(rounds):
            cache_dir = root / "cache"
            shutil.rmtree(cache_dir, ignore_errors=True)
            cold.append(pipeline(yaml_suite, AdmissionCache(cache_dir))[0])
            warm.append(pipeline(yaml_suite, AdmissionCache(cache_dir))[0])
        print(
            f"yaml admission, cache cold {min(cold) * 1000:7.0f} ms  warm "
            f"{min(warm) * 1000:7.0f} ms  ({min(cold) / min(warm):.1f}x, in process)"
        )

        # The cache's target: `run` on 2N unchanged YAML fixtures, as whole processes, warm
        # against --no-cache (alternated, median of R).
        cached_suite = root / "yaml-2n"
        write_suite(cached_suite, "yaml", 2 * n)
        home = root / "cache-home"  # the cache sits beside the config, here the working directory
        home.mkdir()
        run_cached = [*command(), "run", str(cached_suite)]
        timed(run_cached, home)  # fills the cache
        uncached, cached = [], []
        for _ in range(rounds):
            uncached.append(timed([*command(), "run", "--no-cache", str(cached_suite)], home))
            cached.append(timed(run_cached, home))
        print(
            f"run on {2 * n} unchanged YAML fixtures: --no-cache "
            f"{statistics.median(uncached):5.2f} s, cache warm {statistics.median(cached):5.2f} s "
            f"({statistics.median(uncached) / statistics.median(cached):.2f}x, target 1.5x)"
        )

        version = [timed([*command(), "--version"], ROOT) for _ in range(max(rounds, 5))]
        print(
            f"evalrunner --version       median {statistics.median(version) * 1000:5.0f} ms"
            " (target 100)"
        )
        bundled = root / "bundled"
        shutil.copytree(ROOT / "evals" / "regression", bundled / "evals" / "regression")
        cold_runs, warm_runs = [], []
        for _ in range(max(rounds, 5)):
            shutil.rmtree(bundled / ".evalrunner_cache", ignore_errors=True)
            cold_runs.append(timed([*command(), "run"], bundled))
            warm_runs.append(timed([*command(), "run"], bundled))
        print(
            f"evalrunner run (bundled)   median {statistics.median(cold_runs) * 1000:5.0f} ms "
            f"cache cold, {statistics.median(warm_runs) * 1000:5.0f} ms warm (target 300)"
        )

        # --jobs: in process (what the workers buy, imports paid), then through the command
        # (process start included); both alternate serial and parallel runs.
        print(
            f"machine: two processes of plain Python run {machine_ceiling(rounds):.2f}x one "
            "(the ceiling of --jobs 2 here, now)"
        )
        for count in (n, 5 * n):
            suite = root / f"jobs-{count}"
            write_suite(suite, "json", count)
            serial_runs: list[tuple[float, float, float]] = []
            parallel_runs: list[tuple[float, float, float]] = []
            for _ in range(rounds):
                for jobs, runs in ((1, serial_runs), (2, parallel_runs)):
                    runs.append(cpu_timed(partial(run_suite, suite, jobs=jobs, case_timeout=120)))
            one, two = min(serial_runs), min(parallel_runs)
            print(
                f"--jobs 1 {one[0]:6.2f} s, --jobs 2 {two[0]:6.2f} s on {count} JSON cases "
                f"(in process): {one[0] / two[0]:.2f}x; CPU: serial {one[1]:.2f} s, "
                f"workers {two[2]:.2f} s ({two[2] / one[1]:.2f}x), parent {two[1]:.2f} s"
            )
            serial, parallel = [], []
            for _ in range(rounds):
                serial.append(timed([*command(), "run", "--no-cache", "-j", "1", str(suite)], root))
                parallel.append(
                    timed([*command(), "run", "--no-cache", "-j", "2", str(suite)], root)
                )
            one, two = statistics.median(serial), statistics.median(parallel)
            print(
                f"--jobs 1 {one:6.2f} s, --jobs 2 {two:6.2f} s on {count} JSON cases "
                f"(process included): {one / two:.2f}x"
            )


if __name__ == "__main__":
    main()
