"""``--repeat K``: each case runs K times, and its K reports become one.

The runs of a case are expanded next to each other (case 1 K times, then case 2, ...) before
they are executed, so that serial and parallel runs alike yield them in that order, whichever
worker ran which; :func:`grouped` folds each K consecutive reports into the case's report.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from typing import TypeVar

from evalrunner.model import CaseReport

MAX_REPEAT = 1000
"""The largest ``repeat``: enough for any pass-rate estimate, small enough that a typo
(``--repeat 10000000``) cannot queue a run of years."""

T = TypeVar("T")


def expanded(items: Sequence[T], repeat: int) -> list[T]:
    """Each item ``repeat`` times, the copies of one item next to each other."""
    return [item for item in items for _ in range(repeat)]


CUT_MIDWAY = "not run to its end, "
CUT_BY_BUDGET = f"{CUT_MIDWAY}the token budget stopped it"
CUT_BY_STOP = f"{CUT_MIDWAY}an answer that stopped the run cut it short"


def unrun_if_cut(run: CaseReport, stopped: str | None = None) -> CaseReport:
    """``run`` as a run that never ran, when the token budget cut it short
    (:attr:`CaseReport.budget_cut`), or the answer that stopped the run (``stopped``, live
    mode's ``halted``: a refused key, a redirect) did: it was not allowed to finish, so it
    says nothing of the agent (it is no failure), and its tokens, which were spent, stay
    counted."""
    # Joined, not bracketed: the error has brackets of its own, and nested ones are unread.
    if run.budget_cut and run.error is not None:
        return replace(run, error=None, grades=(), skipped=f"{CUT_BY_BUDGET}: {run.error}")
    if stopped and run.error is not None and stopped in run.error:
        return replace(run, error=None, grades=(), skipped=f"{CUT_BY_STOP}: {run.error}")
    return run


def combine_runs(runs: Sequence[CaseReport], stopped: str | None = None) -> CaseReport:
    """One case's report from its runs; tokens, model calls and duration summed; every run
    kept in ``runs``. The case passes only when every run did, and shows one run's detail:

    - its first run that ran and failed;
    - else, when no run ran, its first (not run, saying why);
    - else, when some never ran, the first of those, as a run error: the case was graded,
      so it is no "not run", but without every run it has no verdict (pass^k needs them all);
    - else its first run (all passed).

    A run the token budget or the answer that stopped the run (``stopped``) cut short is
    one that never ran (:func:`unrun_if_cut`).
    """
    if len(runs) == 1:
        return runs[0]
    runs = [unrun_if_cut(run, stopped) for run in runs]
    from evalrunner.report.stats import case_runs

    figures = case_runs(replace(runs[0], runs=tuple(runs)))
    shown = runs[figures.shown - 1]
    error = shown.error
    if not figures.failed and figures.stats.ran and figures.not_run:
        count = len(figures.not_run)
        which = (
            f"run {figures.not_run[0]} of {len(runs)} did not run"
            if count == 1
            else f"{count} of {len(runs)} runs did not run (first: run {figures.not_run[0]})"
        )
        # Flat, and without "did not run: not run": one clause after another reads; nested
        # brackets of reasons do not.
        why = (shown.skipped or "").removeprefix("not run: ")
        if count == 1 and why.startswith(CUT_MIDWAY):
            which = f"{which} to its end"
            why = why.removeprefix(CUT_MIDWAY)
        error = f"{which}: {why}; the case passes only when every run does"
        shown = replace(shown, skipped=None)
    return replace(
        shown,
        error=error,
        input_tokens=sum(run.input_tokens for run in runs),
        output_tokens=sum(run.output_tokens for run in runs),
        llm_calls=sum(run.llm_calls for run in runs),
        duration_ms=sum(run.duration_ms for run in runs),
        tracebacks=shown.tracebacks,
        runs=tuple(runs),
    )


def grouped(
    reports: Generator[CaseReport, None, None],
    repeat: int,
    stopped: Callable[[], str | None] = lambda: None,
) -> Generator[CaseReport, None, None]:
    """Each ``repeat`` consecutive run reports, combined into their case's report; a group
    cut short (the run was interrupted) is dropped with the rest of the unfinished cases.
    ``stopped()`` is what stopped the run, if anything has (see :func:`combine_runs`).
    Closing it closes ``reports`` at once (which stops their workers)."""
    with contextlib.closing(reports):
        batch: list[CaseReport] = []
        for report in reports:
            batch.append(report)
            if len(batch) == repeat:
                yield combine_runs(batch, stopped())
                batch = []
