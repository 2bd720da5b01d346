"""evalrunner against promptfoo 0.118, side by side in the same run, as whole processes.

Generates N equivalent cases for both tools: the same scripted model output, graded by the same
three checks (contains, not-contains, regex). promptfoo gets them through its built-in ``echo``
provider (the prompt is the scripted output); evalrunner through text-response JSON fixtures
replayed by the reference agent. Each tool runs as its user runs it (``promptfoo eval -c ...``,
``evalrunner run DIR``), its report is read back, and a run where not all N cases passed stops
the bench: a broken setup is shown, never timed. The two tools alternate within each round; the
medians over the rounds of wall time (the targets' clock) and of CPU time (what a busy machine
moves least) are printed, with the marginal per-case rate between the two sizes and the
evalrunner/promptfoo ratios. Asserts nothing.

promptfoo is installed from npm into a cache directory outside the checkout (reused once there),
the only network use. Both tools then run with telemetry, update checks, sharing and result
caches off, and, where ``unshare -rn`` works, in a namespace with no network at all.

    python bench/promptfoo.py [--small 100] [--large 1000] [--rounds 3] [--promptfoo-dir DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPTFOO = "promptfoo@~0.118.0"
DEFAULT_DIR = Path.home() / ".cache" / "evalrunner-bench" / "promptfoo"
NEVER = "refund"
PATTERN = r"arriving in \d+ days"


def scripted_output(i: int) -> str:
    """What the scripted model says in case i."""
    return f"Order {i:05d} shipped: tracking code TRK-{i:05d}, arriving in 3 days."


def write_evalrunner_suite(root: Path, n: int) -> Path:
    """N one-turn text fixtures, each graded by the three checks."""
    suite = root / f"evalrunner-{n}"
    suite.mkdir()
    for i in range(n):
        fixture = {
            "name": f"pf-bench-{i}",
            "turns": [
                {
                    "user_input": f"Where is order {i}?",
                    "steps": [{"response": {"type": "text", "content": scripted_output(i)}}],
                }
            ],
            "expects": {
                "response_contains": [f"TRK-{i:05d}"],
                "response_not_contains": [NEVER],
                "response_matches": [PATTERN],
            },
        }
        (suite / f"case_{i:05d}.json").write_text(json.dumps(fixture), encoding="utf-8")
    return suite


def write_promptfoo_config(root: Path, n: int) -> Path:
    """The same N cases as one promptfoo config (JSON is YAML, which promptfoo reads)."""
    tests = [
        {
            "description": f"pf-bench-{i}",
            "vars": {"output": scripted_output(i)},
            "assert": [
                {"type": "contains", "value": f"TRK-{i:05d}"},
                {"type": "not-contains", "value": NEVER},
                {"type": "regex", "value": PATTERN},
            ],
        }
        for i in range(n)
    ]
    config = {"prompts": ["{{output}}"], "providers": ["echo"], "tests": tests}
    path = root / f"promptfoo-{n}.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def install_promptfoo(where: Path) -> Path:
    """promptfoo's CLI under ``where``, installed from npm unless it is there already."""
    cli = where / "node_modules" / ".bin" / "promptfoo"
    if not cli.exists():
        where.mkdir(parents=True, exist_ok=True)
        print(f"installing {PROMPTFOO} into {where} (once) ...", flush=True)
        npm = ["npm", "install", "--prefix", str(where), "--no-audit", "--no-fund", PROMPTFOO]
        # promptfoo depends on a Playwright Chromium that an eval with the echo provider never uses.
        env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
        done = subprocess.run(npm, capture_output=True, text=True, env=env)
        if done.returncode != 0 or not cli.exists():
            raise SystemExit(f"npm could not install {PROMPTFOO}: {done.stderr.strip()[-800:]}")
    return cli


def promptfoo_version(where: Path) -> str:
    package = where / "node_modules" / "promptfoo" / "package.json"
    return str(json.loads(package.read_text(encoding="utf-8"))["version"])


def quiet_env(state: Path) -> dict[str, str]:
    """Both tools' environment: nothing phones home, nothing is cached between runs."""
    return {
        **os.environ,
        "NO_COLOR": "1",
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_DISABLE_SHARING": "1",
        "PROMPTFOO_CACHE_ENABLED": "false",
        # promptfoo keeps its database and logs here rather than in ~/.promptfoo.
        "PROMPTFOO_CONFIG_DIR": str(state),
    }


def offline_prefix() -> list[str]:
    """``unshare -rn`` where it works: the timed processes then have no network to reach."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode == 0:
        return [unshare, "-rn"]
    return []


def evalrunner_command() -> list[str]:
    beside = Path(sys.executable).parent / "evalrunner"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "evalrunner"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process; CPU time is what a busy machine moves least."""
    cpu, started = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started, children_cpu() - cpu
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-800:]
        raise SystemExit(f"{' '.join(argv[:4])} ... exited {done.returncode}:\n{tail}")
    return elapsed


def run_promptfoo(
    cli: Path, config: Path, n: int, env: dict[str, str], pre: list[str]
) -> tuple[float, float]:
    """One whole ``promptfoo eval``; stops the bench unless all N cases passed."""
    out = config.with_suffix(".out.json")
    out.unlink(missing_ok=True)
    argv = [*pre, str(cli), "eval", "-c", str(config), "-o", str(out), "--no-cache"]
    elapsed = timed([*argv, "--no-write", "--no-table", "--no-progress-bar"], env)
    stats = json.loads(out.read_text(encoding="utf-8"))["results"]["stats"]
    if stats.get("successes") != n or stats.get("failures") or stats.get("errors"):
        raise SystemExit(f"promptfoo did not pass all {n} cases: {stats}")
    return elapsed


def run_evalrunner(suite: Path, n: int, env: dict[str, str], pre: list[str]) -> tuple[float, float]:
    """One whole ``evalrunner run``; stops the bench unless all N cases passed."""
    out = suite.with_suffix(".out.json")
    out.unlink(missing_ok=True)
    argv = [*pre, *evalrunner_command(), "run", str(suite), "--no-cache", "-q", "--json", str(out)]
    elapsed = timed(argv, env)
    report = json.loads(out.read_text(encoding="utf-8"))
    if report["passed"] != n or report["total"] != n:
        passed = f"{report['passed']}/{report['total']}"
        raise SystemExit(f"evalrunner did not pass all {n} cases: {passed}")
    return elapsed


def machine(node: str) -> str:
    cpu = platform.processor() or "unknown CPU"
    info = Path("/proc/cpuinfo")
    if info.exists():
        names = [line for line in info.read_text().splitlines() if line.startswith("model name")]
        cpu = names[0].split(":", 1)[1].strip() if names else cpu
    return f"{os.cpu_count()} CPU(s), {cpu}, python {platform.python_version()}, node {node}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100, help="the smaller N (default 100)")
    parser.add_argument("--large", type=int, default=1000, help="the larger N (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--promptfoo-dir", type=Path, default=DEFAULT_DIR, help="npm install here")
    args = parser.parse_args()
    if not 0 < args.small < args.large:
        parser.error("need 0 < --small < --large")
    sizes = (args.small, args.large)

    cli = install_promptfoo(args.promptfoo_dir.expanduser())
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    pre = offline_prefix()
    times: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="pf-bench-") as tmp:
        root = Path(tmp)
        (root / "promptfoo-state").mkdir()
        env = quiet_env(root / "promptfoo-state")
        configs = {n: write_promptfoo_config(root, n) for n in sizes}
        suites = {n: write_evalrunner_suite(root, n) for n in sizes}

        def run(tool: str, n: int) -> tuple[float, float]:
            if tool == "promptfoo":
                return run_promptfoo(cli, configs[n], n, env, pre)
            return run_evalrunner(suites[n], n, env, pre)

        for n in sizes:  # untimed: checks the setup, warms the OS caches and promptfoo's db
            run("promptfoo", n)
            run("evalrunner", n)
        for r in range(args.rounds):
            for n in sizes:
                order = ["promptfoo", "evalrunner"] if r % 2 == 0 else ["evalrunner", "promptfoo"]
                for tool in order:
                    times.setdefault((tool, n), []).append(run(tool, n))

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"machine: {machine(node)}; {now}")
    print(
        f"promptfoo {promptfoo_version(args.promptfoo_dir.expanduser())} (echo provider) against"
        f" evalrunner (reference agent), each at its defaults, 3 checks per case, no caches,"
        f" {'no network' if pre else 'network reachable'}; median of {args.rounds} round(s)"
    )
    small, large = sizes
    for index, clock in ((0, "wall"), (1, "CPU")):
        median = {key: statistics.median(m[index] for m in runs) for key, runs in times.items()}
        rate: dict[str, float] = {}
        for tool in ("promptfoo", "evalrunner"):
            t1, t2 = median[(tool, small)], median[(tool, large)]
            rate[tool] = (large - small) / (t2 - t1) if t2 > t1 else float("inf")
            print(
                f"  {clock:<4} {tool:<10}  N={small}: {t1:7.2f} s   N={large}: {t2:7.2f} s"
                f"   marginal {rate[tool]:7.0f} cases/s"
            )
        whole = median[("promptfoo", small)] / median[("evalrunner", small)]
        marginal = rate["evalrunner"] / rate["promptfoo"]
        print(
            f"  {clock:<4} evalrunner/promptfoo: marginal per-case rate {marginal:.1f}x"
            f" (target 5x); N={small} whole process {whole:.1f}x (target 8x)"
        )
    print(f"every run passed all its cases ({small}/{small}, {large}/{large}) in both tools")


if __name__ == "__main__":
    main()
