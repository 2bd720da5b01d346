"""Writing recorded fixtures: :func:`record_and_write` records each live case
(:func:`evalrunner.toolbox.record.record_case`) and writes the fixture it makes, whole or not at
all,
never over a file it was not asked to replace."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from evalrunner.fixture.load import relative_to_cwd
from evalrunner.model import RunInterrupted
from evalrunner.replay import process_exit_refused
from evalrunner.report.write import write_atomic, write_new
from evalrunner.stop_signals import signals_stop_the_run
from evalrunner.text import printable_path
from evalrunner.toolbox.record import (
    NotRecorded,
    Recorded,
    RecordSettings,
    Targets,
    outside,
    record_case,
)

if TYPE_CHECKING:
    from evalrunner.execution import RunSettings
    from evalrunner.live.provider import LiveModel
    from evalrunner.session import SelectedCase


def record_and_write(
    live_cases: Sequence[SelectedCase],
    targets: Targets,
    settings: RunSettings,
    live: LiveModel,
    recording: RecordSettings,
    overwrite: bool,
) -> tuple[list[Recorded | NotRecorded], int | None]:
    """Record each live case and write its fixture to its target (atomically; without
    ``overwrite``, never over a file that appeared meanwhile); the outcomes in order, and
    the signal that stopped it (SIGINT or SIGTERM), if one did. What was written before the
    signal stays written, each file whole."""
    outcomes: list[Recorded | NotRecorded] = []
    names = dict(targets.names)  # case name -> real path of the file that holds it
    try:
        with signals_stop_the_run(), process_exit_refused():
            for item, target in zip(live_cases, targets.paths, strict=True):
                outcome = record_case(
                    item.case,
                    item.source,
                    target,
                    settings=settings,
                    live=live,
                    recording=recording,
                )
                if isinstance(outcome, Recorded):
                    outcome = _written(outcome, names, overwrite, targets.out)
                elif overwrite and os.path.lexists(target):
                    kept = f"{outcome.reason}; {printable_path(target)} is left as it was"
                    outcome = replace(outcome, reason=kept)
                outcomes.append(outcome)
    except RunInterrupted as stop:
        return outcomes, stop.signum
    except KeyboardInterrupt:
        return outcomes, int(signal.SIGINT)
    return outcomes, None


def _written(
    outcome: Recorded, names: dict[str, str], overwrite: bool, out: Path
) -> Recorded | NotRecorded:
    """``outcome`` written to its target, or why it was not (a name another file of the
    output directory holds, redaction having made names alike; a file that appeared during
    the run; a write that failed)."""
    target = outcome.target
    real = os.path.normcase(os.path.realpath(target))
    holder = names.get(outcome.name)

    def refused(reason: str, *, unwritable: bool = False) -> NotRecorded:
        return NotRecorded(
            outcome.name,
            outcome.source,
            reason,
            input_tokens=outcome.input_tokens,
            output_tokens=outcome.output_tokens,
            unwritable=unwritable,
        )

    escape = outside(target, out)  # checked again: a link may have been made meanwhile
    if escape is not None:
        return refused(f"{escape}; nothing was written", unwritable=True)
    if holder is not None and holder != real:
        return refused(
            "its name (as written, after redaction) is already used by "
            f"{printable_path(relative_to_cwd(Path(holder)))}; two cases of one name would "
            "be refused; nothing was written"
        )
    try:
        if overwrite:
            write_atomic(target, outcome.text)
        else:
            write_new(target, outcome.text)
    except FileExistsError:
        return refused(
            f"{printable_path(target)} appeared during the run and is left as it was; "
            "pass --overwrite to replace it"
        )
    except OSError as exc:
        return refused(
            f"{printable_path(target)}: cannot write: {exc.strerror or exc}", unwritable=True
        )
    names[outcome.name] = real
    return outcome
