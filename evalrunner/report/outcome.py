"""What every report format shares: exit codes, durations, the agent's label, and which
check a failure comes from."""

from __future__ import annotations

import signal

from evalrunner.model import CaseReport, GradeResult, RunRefused, SuiteReport
from evalrunner.process_exit import late_exit_problem

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2
EXIT_BUDGET = 3
"""Live mode: ``max_total_tokens`` was spent and the run stopped before its end."""


def exit_code(outcome: SuiteReport | RunRefused) -> int:
    """0 when every case passed, 1 when any failed or errored (or none ran, or something
    ended a process of the run outside its cases: :attr:`SuiteReport.late_exits`), 2 when the run
    could not start (or live mode's model could not be used at all: a refused key, a
    redirect), 3 when live mode's token budget stopped it, 128 + the signal number when
    a signal stopped it (130 for SIGINT, 143 for SIGTERM)."""
    if isinstance(outcome, RunRefused):
        return EXIT_REFUSED
    if outcome.interrupted is not None:
        return 128 + outcome.interrupted
    if outcome.live_stopped is not None:  # the run could not go on: as if it never started
        return EXIT_REFUSED
    if outcome.budget_spent is not None:
        return EXIT_BUDGET
    return EXIT_PASSED if outcome.all_passed else EXIT_FAILED


def late_exits(report: SuiteReport) -> str | None:
    """The sentence that says something ended, or tried to end, a process of the run outside
    its cases (:attr:`SuiteReport.late_exits`), or ``None``."""
    return late_exit_problem(list(report.late_exits)) if report.late_exits else None


def signal_name(signum: int) -> str:
    """``2`` → ``SIGINT``."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def interruption(report: SuiteReport) -> str | None:
    """The sentence that says a signal stopped the run, or ``None``."""
    if report.interrupted is None:
        return None
    return (
        f"run interrupted by {signal_name(report.interrupted)} after {len(report.cases)} "
        "finished case(s); the rest did not run"
    )


def duration(ms: int) -> str:
    """``7`` → ``7 ms``, ``1234`` → ``1.23 s``, ``75000`` → ``1 min 15 s``."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f} s"
    minutes, rest = divmod(round(ms / 1000), 60)
    return f"{minutes} min {rest} s"


def agent_label(agent: str | None = None, agent_command: str | None = None) -> str:
    """How reports name the agent under test, from the configuration's ``agent`` and
    ``agent_command``: ``command:<cmd>``, ``python:<module:factory>``, or ``reference``."""
    if agent_command is not None:
        return f"command:{agent_command}"
    if agent is not None:
        return f"python:{agent}"
    return "reference"


def failed_grades(case: CaseReport) -> tuple[GradeResult, ...]:
    """The checks of ``case`` that failed, in grading order."""
    return tuple(g for g in case.grades if not g.passed)


def kind_of(check: str) -> str:
    """The expectation kind a check label comes from: ``tools_used("echo")`` → ``tools_used``
    (``turns[1].tools_used("echo")`` → ``turns[1].tools_used``, a turn's check)."""
    return check.split("(", 1)[0]


def position_key(check: str) -> str:
    """The :attr:`CaseReport.positions` key of the expectation a check label comes from:
    ``expects.tools_used`` for a case's check, ``turns[1].expects.tools_used`` for a turn's."""
    kind = kind_of(check)
    if kind.startswith("turns["):
        turn, _, kind = kind.partition(".")
        return f"{turn}.expects.{kind}"
    return f"expects.{kind}"


def failures(report: SuiteReport) -> tuple[CaseReport, ...]:
    """The cases that failed or errored, in suite order."""
    return tuple(case for case in report.cases if not case.passed and case.skipped is None)
