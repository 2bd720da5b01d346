"""``evalrunner record``: live cases recorded as replay fixtures."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

import os
import signal
from pathlib import Path
from typing import Annotated

import typer

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
from evalrunner.config import parse_repeat
from evalrunner.fixture.load import relative_to_cwd
from evalrunner.model import RunRefused
from evalrunner.plugins import PluginError
from evalrunner.report import EXIT_REFUSED
from evalrunner.session import settings_from_config
from evalrunner.text import printable, printable_path

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
    repeat: Annotated[
        int | None,
        typer.Option(
            "--repeat",
            metavar="1",
            parser=parse_repeat,
            help="Only 1: record runs each live case once and writes that run. Give --repeat 1 "
            "to record in a project whose config repeats its runs (a repeat above 1, from "
            "anywhere, is refused).",
        ),
    ] = None,
) -> None:
    """Run live cases against the live model ([eval.live]) and write each as a replay fixture.

    A fixture is written only when the live run passed, and the fixture admits and replays
    green with the same agent and tools; otherwise the case's line says why. Scripted cases
    are left alone. Exit codes: 0 every live case recorded; 1 some were not; 2 nothing could
    start (config, admission, a fixture already in DIR) or the live model cannot be used (a
    refused key, a redirect); 3 the token budget stopped it; 130 or
    143 on SIGINT or SIGTERM (what was recorded stays written).
    """
    from evalrunner.redact import Redactor
    from evalrunner.session import select_cases, suite_name
    from evalrunner.toolbox.record import (
        NotRecorded,
        Provenance,
        Recorded,
        RecordSettings,
        line,
        plan_targets,
        recording_date,
    )

    chosen_by, _ = parse_selection(keyword, None)
    settings = load_settings(config, None, None, case_timeout, agent_command, repeat)
    if settings.repeat > 1:
        # Refused, not ignored: a fixture is one run, and K runs would need K agreeing
        # recordings; silence would let the user believe the fixture stood for K runs.
        source = settings.sources.get("repeat", "config")
        raise fail(
            [
                f"{printable(source)}: repeat = {settings.repeat}, but record runs each live "
                "case once and writes that run; give --repeat 1 (it beats EVALRUNNER_REPEAT "
                "and the config file), or use evalrunner run --repeat to measure a live case"
            ]
        )
    try:
        date = recording_date(os.environ)
    except ValueError as exc:
        raise fail([str(exc)]) from None
    try:
        run_settings = settings_from_config(settings)
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
    from evalrunner.toolbox.recording_files import record_and_write

    try:
        with agent_output_to_stderr():
            outcomes, interrupted = record_and_write(
                live_cases, targets, run_settings, live, recording, overwrite
            )
    finally:
        live.close()
    written = sum(isinstance(o, Recorded) for o in outcomes)
    missed = len(live_cases) - written
    tokens_in = sum(o.input_tokens for o in outcomes)
    tokens_out = sum(o.output_tokens for o in outcomes)
    skipped = f"; {scripted} scripted case(s) left alone" if scripted else ""
    spent = f"{tokens_in} input + {tokens_out} output tokens"
    if tokens_in + tokens_out == 0:
        # Every answer the model gave either counted tokens or was counted as unreported: with
        # neither, no answer came (a refused key stopped it), and "0 tokens" would read as a
        # measurement.
        spent = (
            "token usage not reported by the model"
            if live.budget.unreported
            else "no answer from the live model"
        )
    # Said once the cases are done: while they run, standard output is the agents' stderr.
    emit(
        "".join(line(outcome) + "\n" for outcome in outcomes)
        + f"recorded {written} of {len(live_cases)} live case(s) into "
        f"{printable_path(out)} ({spent}){skipped}\n"
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
    if live.halted is not None and missed:  # a refused key, a redirect: said once more
        typer.echo(f"record stopped: {live.halted}", err=True)
        raise typer.Exit(EXIT_REFUSED)
    if any(isinstance(o, NotRecorded) and o.budget for o in outcomes) or (
        missed and live.budget.exhausted
    ):
        typer.echo(live.budget.message(), err=True)
        raise typer.Exit(3)
    if any(isinstance(o, NotRecorded) and o.unwritable for o in outcomes):
        raise typer.Exit(EXIT_REFUSED)
    raise typer.Exit(1 if missed else 0)
