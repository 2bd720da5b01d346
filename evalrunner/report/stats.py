"""Statistics of repeated runs (``--repeat K``): pure functions of pass counts.

A case run K times passed ``passes`` of them. pass^k holds when all K passed, pass@k when at
least one did, and the case is flaky when its runs disagree (some passed, some failed). The
pass rate carries a Wilson score interval, which stays inside [0, 1] and is sensible at 0/K
and K/K, where the normal approximation collapses to a point.

Runs that never ran (skipped: a live case in replay mode, the token budget spent) are neither
passes nor failures: they are left out of every statistic and counted apart (``not_run``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evalrunner.model import CaseReport, SuiteReport

Z_95 = 1.959964
"""The standard normal quantile for a two-sided 95% interval."""


def wilson_interval(passes: int, runs: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval on ``passes / runs``; (0, 1) when there are no runs."""
    if runs <= 0:
        return (0.0, 1.0)
    rate = passes / runs
    z2 = z * z
    denominator = 1 + z2 / runs
    centre = (rate + z2 / (2 * runs)) / denominator
    margin = z * math.sqrt(rate * (1 - rate) / runs + z2 / (4 * runs * runs)) / denominator
    # At 0/K and K/K the bound is exactly 0 or 1; rounding must not put it a hair outside.
    lower = 0.0 if passes == 0 else max(0.0, centre - margin)
    upper = 1.0 if passes == runs else min(1.0, centre + margin)
    return (lower, upper)


@dataclass(frozen=True, slots=True)
class RepeatStats:
    """How K runs of one case (or of every case of a suite) went."""

    runs: int
    """Runs that ran (skipped runs are not among them)."""
    passes: int
    not_run: int = 0
    """Runs that never ran (skipped), left out of the statistics."""

    @property
    def pass_rate(self) -> float:
        """Passed runs over runs that ran (0 when none did; see :attr:`ran`)."""
        return self.passes / self.runs if self.runs else 0.0

    @property
    def ran(self) -> bool:
        """Whether any run ran: without one there is no rate or interval to give."""
        return self.runs > 0

    @property
    def interval(self) -> tuple[float, float]:
        """The Wilson 95% interval on :attr:`pass_rate`."""
        return wilson_interval(self.passes, self.runs)

    @property
    def pass_all(self) -> bool:
        """pass^k: every one of the k runs passed; a run that never ran (skipped) was not
        shown to pass, so a case with one is no pass^k."""
        return self.runs > 0 and self.passes == self.runs and self.not_run == 0

    @property
    def pass_any(self) -> bool:
        """pass@k: at least one run passed."""
        return self.passes > 0

    @property
    def flaky(self) -> bool:
        """The runs disagree: some passed and some failed."""
        return 0 < self.passes < self.runs


@dataclass(frozen=True, slots=True)
class CaseRuns:
    """Every figure a report gives about one case's runs, derived once (:func:`case_runs`)
    so that the table, JSON, JUnit and GitHub reports cannot disagree."""

    stats: RepeatStats
    failed: tuple[int, ...]
    """The numbers (from 1) of the runs that ran and failed."""
    not_run: tuple[int, ...]
    """The numbers of the runs that never ran."""
    shown: int
    """The run whose detail the case shows: its first failed run; else, when some never
    ran, the first of those (why it has no verdict); else run 1."""


def case_runs(case: CaseReport) -> CaseRuns:
    """The runs of one case, as :class:`CaseRuns`; a case run once counts as one run."""
    runs = case.runs or (case,)
    failed = tuple(n for n, run in enumerate(runs, 1) if run.skipped is None and not run.passed)
    not_run = tuple(n for n, run in enumerate(runs, 1) if run.skipped is not None)
    ran = len(runs) - len(not_run)
    return CaseRuns(
        stats=RepeatStats(runs=ran, passes=ran - len(failed), not_run=len(not_run)),
        failed=failed,
        not_run=not_run,
        shown=(failed or not_run or (1,))[0],
    )


def case_stats(case: CaseReport) -> RepeatStats:
    """The runs of one case; a case run once counts as one run. Skipped runs are counted
    apart, in ``not_run``."""
    return case_runs(case).stats


@dataclass(frozen=True, slots=True)
class SuiteStats:
    """A repeated suite: every run of every case, and how many cases met pass^k and pass@k."""

    cases: int
    """Cases with at least one run that ran (a case never run is left out)."""
    runs: RepeatStats
    pass_all: int
    """Cases whose every run passed (pass^k)."""
    pass_any: int
    """Cases with at least one passed run (pass@k)."""
    flaky: tuple[str, ...]
    """Names of the flaky cases, in suite order."""
    not_run_cases: int = 0
    """Cases none of whose runs ran."""

    @property
    def pass_hat_k(self) -> float:
        """pass^k over the suite: the share of cases whose every run passed."""
        return self.pass_all / self.cases if self.cases else 0.0

    @property
    def pass_at_k(self) -> float:
        """pass@k over the suite: the share of cases with at least one passed run."""
        return self.pass_any / self.cases if self.cases else 0.0


def suite_stats(report: SuiteReport) -> SuiteStats:
    """The statistics of a suite's runs. The interval pools every run of every case, as if
    independent; runs of one case are not, so read it as a summary, not a test."""
    per_case = [case_stats(case) for case in report.cases]
    return SuiteStats(
        cases=sum(1 for s in per_case if s.ran),
        runs=RepeatStats(
            runs=sum(s.runs for s in per_case),
            passes=sum(s.passes for s in per_case),
            not_run=sum(s.not_run for s in per_case),
        ),
        pass_all=sum(1 for s in per_case if s.pass_all),
        pass_any=sum(1 for s in per_case if s.pass_any),
        flaky=tuple(case.name for case, s in zip(report.cases, per_case, strict=True) if s.flaky),
        not_run_cases=sum(1 for s in per_case if not s.ran),
    )


def shown_interval(interval: tuple[float, float]) -> str:
    """``[0.490, 0.943]``: three decimals, as the table and messages print it."""
    return f"[{interval[0]:.3f}, {interval[1]:.3f}]"


def case_summary(case: CaseReport, repeat: int) -> str:
    """``3/5 runs passed, flaky; pass^5 no, pass@5 yes, Wilson 95% [0.231, 0.882]``."""
    stats = case_stats(case)
    if not stats.ran:
        return f"0 of {stats.not_run} runs ran (all skipped)"
    flaky = ", flaky" if stats.flaky else ""
    return (
        f"{stats.passes}/{stats.runs} runs passed{not_run(stats)}{flaky}; pass^{repeat} "
        f"{yes_no(stats.pass_all)}, pass@{repeat} {yes_no(stats.pass_any)}, Wilson 95% "
        f"{shown_interval(stats.interval)}"
    )


def runs_line(case: CaseReport) -> str:
    """Under a failed case of a repeated run: ``0/1 runs passed (2 not run); failed runs: 1;
    runs not run: 2, 3; run 1 shown``."""
    runs = case_runs(case)
    flaky = ", flaky" if runs.stats.flaky else ""
    parts = [f"{runs.stats.passes}/{runs.stats.runs} runs passed{not_run(runs.stats)}{flaky}"]
    if runs.failed:
        parts.append(f"failed runs: {_numbers(runs.failed)}")
    if runs.not_run:
        parts.append(f"runs not run: {_numbers(runs.not_run)}")
    parts.append(f"run {runs.shown} shown")
    return "; ".join(parts)


def _numbers(numbers: tuple[int, ...], most: int = 20) -> str:
    listed = ", ".join(str(number) for number in numbers[:most])
    more = f" and {len(numbers) - most} more" if len(numbers) > most else ""
    return listed + more


def not_run(stats: RepeatStats) -> str:
    """`` (2 not run)`` when runs were skipped, else nothing."""
    return f" ({stats.not_run} not run)" if stats.not_run else ""


def yes_no(flag: bool) -> str:
    """``yes`` or ``no``, as reports print pass^k and pass@k."""
    return "yes" if flag else "no"
