"""``evalrunner record``: live cases recorded as replay fixtures."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

import os
import signal
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalrunner import report as formats  # JUnit, GitHub, JSON, report files: on first use
from evalrunner.load import (
    relative_to_cwd,
)
from evalrunner.model import (
    RunInterrupted,
    RunRefused,
)
from evalrunner.plugins import PluginError, configured_settings
from evalrunner.report import (
    EXIT_REFUSED,
)
from evalrunner.stop_signals import signals_stop_the_run
from evalrunner.text import printable, printable_path

if TYPE_CHECKING:
    from evalrunner.pipeline import RunSettings, SelectedCase
    from evalrunner.record import NotRecorded, Recorded, RecordSettings, Targets
    from evalrunner.wire.live import LiveModel
from evalrunner.cli.common import (
    PATHS_HELP,
    AgentCommandAsRun,
    CaseTimeoutAsRun,
    ConfigOption,
    FixtureFormat,
    KeywordOption,
    agent_output_to_stderr,
    emit,
    fail,
    live_model,
    load_settings,
    parse_selection,
    refusal_summary,
)

RecordPathsArgument = Annotated[
    list[Path] | None,
    typer.Argument(
        metavar="PATH",
        help=f"{PATHS_HELP} Default: the configured suite (suite_dir).",
        show_default=False,
    ),
]


def record(
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Write the recorded fixtures here, each at its live case's path relative to "
            "its suite (directories made as needed).",
            show_default=False,
        ),
    ],
    paths: RecordPathsArgument = None,
    fixture_format: Annotated[
        FixtureFormat | None,
        typer.Option("--format", help="Format of the fixtures written (default: each case's own)."),
    ] = None,
    keyword: KeywordOption = None,
    keep_ids: Annotated[
        bool,
        typer.Option(
            "--keep-ids",
            help="Keep the live API's tool-call ids instead of renumbering them call_1, "
            "call_2, ... in the order the calls came.",
        ),
    ] = False,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace fixtures already in DIR (refused otherwise)."),
    ] = False,
    case_timeout: CaseTimeoutAsRun = None,
    agent_command: AgentCommandAsRun = None,
    config: ConfigOption = None,
) -> None:
    """Run live cases against the live model ([eval.live]) and write each as a replay fixture.

    A fixture is written only when the live run passed, and the fixture admits and replays
    green with the same agent and tools; otherwise the case's line says why. Scripted cases
    are left alone. Exit codes: 0 every live case recorded; 1 some were not; 2 nothing could
    start (config, admission, a fixture already in DIR); 3 the token budget stopped it; 130 or
    143 on SIGINT or SIGTERM (what was recorded stays written).
    """
    from evalrunner.pipeline import select_cases, suite_name
    from evalrunner.record import (
        NotRecorded,
        Provenance,
        Recorded,
        RecordSettings,
        line,
        plan_targets,
        recording_date,
    )
    from evalrunner.redact import Redactor

    chosen_by, _ = parse_selection(keyword, None)
    settings = load_settings(config, None, None, case_timeout, agent_command)
    try:
        date = recording_date(os.environ)
    except ValueError as exc:
        raise fail([str(exc)]) from None
    try:
        run_settings = configured_settings(settings)
    except PluginError as exc:
        raise fail(exc.problems) from None
    where = paths or [settings.suite_dir]
    selection = select_cases(where, keyword=chosen_by)
    if isinstance(selection, RunRefused):
        raise fail(list(selection.lines()), refusal_summary(selection))
    live_cases = [item for item in selection.cases if item.case.live]
    scripted = len(selection.cases) - len(live_cases)
    if not live_cases:
        shown = printable(suite_name([relative_to_cwd(p) for p in where]))
        raise fail(
            [
                f"{shown}: no live case to record: its {len(selection.cases)} admitted case(s) "
                "all script their steps. A live case gives no steps in its turns (the live "
                "model answers them); name where yours are, for example "
                "evalrunner record evals/live --out evals/regression"
            ]
        )
    fmt = fixture_format.as_format() if fixture_format is not None else None
    targets = plan_targets(
        [(item.case, item.source) for item in live_cases],
        [item.case.source for item in selection.cases],
        out,
        fmt,
        overwrite,
    )
    if isinstance(targets, list):
        raise fail(targets, "nothing was run or written")
    live = live_model(settings, 1)
    recording = RecordSettings(
        Provenance(settings.live.wire, settings.live.model or "", date),
        Redactor(settings.record.redact),
        keep_ids=keep_ids,
    )
    try:
        outcomes, interrupted = _recordings(
            live_cases, targets, run_settings, live, recording, overwrite
        )
    finally:
        live.close()
    written = sum(isinstance(o, Recorded) for o in outcomes)
    missed = len(live_cases) - written
    tokens_in = sum(o.input_tokens for o in outcomes)
    tokens_out = sum(o.output_tokens for o in outcomes)
    skipped = f"; {scripted} scripted case(s) left alone" if scripted else ""
    # Said once the cases are done: while they run, standard output is the agents' stderr.
    emit(
        "".join(line(outcome) + "\n" for outcome in outcomes)
        + f"recorded {written} of {len(live_cases)} live case(s) into "
        f"{printable_path(out)} ({tokens_in} input + {tokens_out} output tokens){skipped}\n"
    )
    if interrupted is not None:
        name = signal.Signals(interrupted).name
        left = len(live_cases) - len(outcomes)
        typer.echo(
            f"record interrupted by {name}: {written} fixture(s) written, each whole; "
            f"{left} live case(s) not recorded",
            err=True,
        )
        raise typer.Exit(128 + interrupted)
    if any(isinstance(o, NotRecorded) and o.budget for o in outcomes) or (
        missed and live.budget.exhausted
    ):
        typer.echo(live.budget.message(), err=True)
        raise typer.Exit(3)
    if any(isinstance(o, NotRecorded) and o.unwritable for o in outcomes):
        raise typer.Exit(EXIT_REFUSED)
    raise typer.Exit(1 if missed else 0)


def _recordings(
    live_cases: "Sequence[SelectedCase]",
    targets: "Targets",
    settings: "RunSettings",
    live: "LiveModel",
    recording: "RecordSettings",
    overwrite: bool,
) -> "tuple[list[Recorded | NotRecorded], int | None]":
    """Record each live case and write its fixture (atomically; without ``overwrite``, never
    over a file that appeared meanwhile); the outcomes in order, and the signal that stopped
    it, if one did."""
    from evalrunner.record import Recorded, record_case
    from evalrunner.replay import process_exit_refused

    outcomes: list[Recorded | NotRecorded] = []
    names = dict(targets.names)  # case name -> real path of the file that holds it
    try:
        with signals_stop_the_run(), agent_output_to_stderr(), process_exit_refused():
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
                    outcome = _written(outcome, names, overwrite)
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
    outcome: "Recorded", names: dict[str, str], overwrite: bool
) -> "Recorded | NotRecorded":
    """``outcome`` written to its target, or why it was not (a name another file of the
    output directory holds, redaction having made names alike; a file that appeared during
    the run; a write that failed)."""
    from evalrunner.record import NotRecorded

    target = outcome.target
    real = os.path.normcase(os.path.realpath(target))
    holder = names.get(outcome.name)

    def refused(reason: str, *, unwritable: bool = False) -> "NotRecorded":
        return NotRecorded(
            outcome.name,
            outcome.source,
            reason,
            input_tokens=outcome.input_tokens,
            output_tokens=outcome.output_tokens,
            unwritable=unwritable,
        )

    if holder is not None and holder != real:
        return refused(
            "its name (as written, after redaction) is already used by "
            f"{printable_path(relative_to_cwd(Path(holder)))}; two cases of one name would "
            "be refused; nothing was written"
        )
    try:
        if overwrite:
            formats.write_atomic(target, outcome.text)
        else:
            formats.write_new(target, outcome.text)
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
