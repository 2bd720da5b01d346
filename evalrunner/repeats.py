"""``--repeat K``: each case runs K times, and its K reports become one.

The runs of a case are expanded next to each other (case 1 K times, then case 2, ...) before
they are executed, so that serial and parallel runs alike yield them in that order, whichever
worker ran which; :func:`grouped` folds each K consecutive reports into the case's report.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence
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


def combine_runs(runs: Sequence[CaseReport]) -> CaseReport:
    """One case's report from its runs: the verdict detail of the first failed run (the
    first run when all passed), so that the case passes only when every run did; tokens,
    model calls and duration summed; every run kept in ``runs``."""
    if len(runs) == 1:
        return runs[0]
    shown = next((run for run in runs if not run.passed), runs[0])
    return replace(
        shown,
        input_tokens=sum(run.input_tokens for run in runs),
        output_tokens=sum(run.output_tokens for run in runs),
        llm_calls=sum(run.llm_calls for run in runs),
        duration_ms=sum(run.duration_ms for run in runs),
        tracebacks=shown.tracebacks,
        runs=tuple(runs),
    )


def grouped(
    reports: Generator[CaseReport, None, None], repeat: int
) -> Generator[CaseReport, None, None]:
    """Each ``repeat`` consecutive run reports, combined into their case's report; a group
    cut short (the run was interrupted) is dropped with the rest of the unfinished cases.
    Closing it closes ``reports`` at once (which stops their workers)."""
    with contextlib.closing(reports):
        batch: list[CaseReport] = []
        for report in reports:
            batch.append(report)
            if len(batch) == repeat:
                yield combine_runs(batch)
                batch = []
