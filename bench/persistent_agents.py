"""Command agents, one process per case (protocol 1) against one process per run (protocol 2),
on the bundled suite (evals/regression).

    python bench/persistent_agents.py [--rounds 3] [--standin-only]

The agents are the SDK examples of examples/sdk-agents (``--per-case`` makes them decline
protocol 2) when their SDK is installed, and always a stand-in: a standard-library agent
(this script, run with ``--standin``) that sleeps 0.5 s at start-up to stand for an SDK's
imports. The output says which agent each line measured. Each figure is the median wall time
of ``--rounds`` runs of the whole suite through the library (the factory's processes ended
inside the timing). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "evals" / "regression"
SDK_AGENTS = ROOT / "examples" / "sdk-agents"
STANDIN_START_SECS = 0.5


def standin() -> int:
    """The stand-in agent: start-up cost, then the reference loop over the OpenAI wire, in
    protocol 2 unless ``--per-case``."""
    time.sleep(STANDIN_START_SECS)  # what importing an SDK costs, give or take
    from evalrunner.agents.reference import AgentContext, ReferenceAgent
    from evalrunner.boundary.observer import RecordingObserver
    from evalrunner.boundary.tools import builtin_tools
    from evalrunner.model import ToolCallRecord
    from evalrunner.wire.client import WireClient

    model = WireClient("openai", os.environ["OPENAI_BASE_URL"])
    persistent = "--per-case" not in sys.argv and "2" in os.environ.get(
        "EVALRUNNER_PROTOCOLS", ""
    ).split(",")

    def reported(record: ToolCallRecord) -> dict[str, object]:
        try:
            value = json.loads(record.arguments)
        except ValueError:
            value = None
        return {
            "id": record.id,
            "name": record.name,
            "arguments": value if isinstance(value, dict) else record.arguments,
            "result": record.result,
            "success": record.success,
        }

    def emit(line: dict[str, object]) -> None:
        print(json.dumps(line), flush=True)

    def fresh(workspace: str) -> tuple[ReferenceAgent, RecordingObserver]:
        observer = RecordingObserver()
        context = AgentContext(model, builtin_tools(), observer, Path(workspace))
        return ReferenceAgent(context), observer

    opening = sys.stdin.readline()
    if not opening:
        return 0
    if not persistent:
        agent, observer = fresh(os.environ["EVALRUNNER_WORKSPACE"])
        for line in itertools.chain([opening], sys.stdin):  # lazily: the runner waits
            reply = agent.respond(json.loads(line)["user_input"])
            emit({"reply": reply, "tool_calls": [reported(r) for r in observer.take()]})
        return 0
    emit({"evalrunner": 2})
    case = None
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("end"):
            emit({"case": message["case"], "ended": True})
            continue
        if message["case"] != case:
            case = message["case"]
            agent, observer = fresh(message["workspace"])
        reply = agent.respond(message["user_input"])
        emit({"case": case, "reply": reply, "tool_calls": [reported(r) for r in observer.take()]})
    return 0


def measure(argv: list[str], rounds: int) -> tuple[float, int, int]:
    """Median seconds for the suite, and the cases passed of the total (last round)."""
    from evalrunner import SuiteReport, run_suite
    from evalrunner.agents.command import command_agent_factory

    times: list[float] = []
    passed = total = 0
    for _ in range(rounds):
        started = time.perf_counter()
        with command_agent_factory(argv, cwd=ROOT) as factory:
            report = run_suite(SUITE, agent_factory=factory, case_timeout=120)
        times.append(time.perf_counter() - started)
        assert isinstance(report, SuiteReport)
        passed, total = report.passed, len(report.cases)
    return statistics.median(times), passed, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--standin-only", action="store_true", help="skip the SDK agents")
    parser.add_argument("--standin", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--per-case", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.standin:
        return standin()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # figures as they come
    agents: list[tuple[str, list[str]]] = []
    if not args.standin_only:
        for sdk in ("openai", "anthropic"):
            if importlib.util.find_spec(sdk) is None:
                print(f"{sdk} SDK not installed: its example agent is skipped")
                continue
            agents.append(
                (
                    f"{sdk}_agent.py (the {sdk} SDK example)",
                    [sys.executable, str(SDK_AGENTS / f"{sdk}_agent.py")],
                )
            )
    agents.append(
        (
            f"stand-in ({STANDIN_START_SECS:g} s sleep at start-up, no SDK)",
            [sys.executable, str(Path(__file__).resolve()), "--standin"],
        )
    )
    cases = len([p for p in SUITE.iterdir() if not p.name.startswith(".")])
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPU(s), bundled suite "
        f"({cases} cases), median of {args.rounds} round(s)"
    )
    for label, argv in agents:
        per_case, passed_1, total = measure([*argv, "--per-case"], args.rounds)
        persistent, passed_2, _ = measure(argv, args.rounds)
        print(label)
        print(f"  one process per case (protocol 1): {per_case:7.2f} s {passed_1}/{total} passed")
        print(f"  one process per run  (protocol 2): {persistent:7.2f} s {passed_2}/{total} passed")
        print(f"  ratio: {per_case / persistent:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
