"""``evalrunner mutate``: does the suite catch broken agents?"""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from evalrunner.cli.common import (
    ConfigOption,
    emit,
    fail,
    load_settings,
    refusal_summary,
)
from evalrunner.fixture.admit import admit_documents
from evalrunner.fixture.load import (
    SuiteNotFound,
    discover,
    iter_documents,
    relative_to_cwd,
)
from evalrunner.model import (
    RunInterrupted,
    RunRefused,
)
from evalrunner.plugins import PluginError
from evalrunner.process_exit import process_exit_refused
from evalrunner.session import late_exits_taken
from evalrunner.stop_signals import signals_stop_the_run


def mutate(
    suite: Annotated[
        Path | None, typer.Option("--suite", help="Suite directory (default: from config).")
    ] = None,
    path: Annotated[
        list[str] | None,
        typer.Option(
            "--path",
            help="Agent path to run the mutants on: in-process, openai, openai-responses or "
            "anthropic (repeatable; default: all four).",
        ),
    ] = None,
    stream: Annotated[
        bool, typer.Option("--stream", help="Command mutants ask for streamed responses.")
    ] = False,
    first_kill: Annotated[
        bool,
        typer.Option(
            "--first-kill", help="Stop each mutant at the first case that kills it (faster)."
        ),
    ] = False,
    jobs: Annotated[
        str,
        typer.Option(
            "--jobs",
            "-j",
            metavar="N",
            help="Run N command mutants at once (default and auto: one per CPU; they run the "
            "bundled reference agent, never yours). The report and the exit code are those "
            "of a serial run.",
        ),
    ] = "auto",
    config: ConfigOption = None,
) -> None:
    """Does the suite catch broken agents? Runs it against every mutant; exit 1 if one survives.

    A mutant is the reference agent, with the project's tools, and one promise broken (a
    result dropped, a call dispatched twice, an earlier turn forgotten, ...). A case that
    fails against it kills it. Cases the unmutated reference agent does not pass on a path
    kill nothing there. The configured agent and agent_command are not used: mutate tests
    the suite, not the agent. Exit 2 when the baseline cannot run, or a mutant could not be
    judged (something ended the process outside every case while it ran).
    """
    from evalrunner.cli.run import parse_jobs
    from evalrunner.mutation.mutants import PATHS
    from evalrunner.mutation.runner import ProjectTools, render_mutation, run_mutants

    workers = parse_jobs(jobs)
    chosen = path or list(PATHS)
    unknown = [p for p in chosen if p not in PATHS]
    if unknown:
        accepted = ", ".join(PATHS)
        raise fail([f"--path {p!r}: not an agent path; use one of {accepted}" for p in unknown])
    settings = load_settings(config, suite)
    try:
        fixtures = discover(relative_to_cwd(settings.suite_dir))
        admission = admit_documents(iter_documents(fixtures))
    except SuiteNotFound as exc:
        raise fail([str(exc)]) from None
    if not admission.ok:
        refused = RunRefused(admission_errors=admission.errors)
        raise fail(refused.lines(), refusal_summary(refused))
    # From the import of the project's tools on, their os._exit is refused
    # (evalrunner.process_exit): mutate would end with its code, and 0 reads as "every
    # mutant killed".
    late_exits_taken()  # what an earlier run in this process left (library use) is not this one's
    with signals_stop_the_run(), process_exit_refused():
        try:
            report = run_mutants(
                admission.cases,
                paths=chosen,
                stream=stream,
                first_kill=first_kill,
                case_timeout=settings.case_timeout_secs,
                tools=ProjectTools(settings.tools, settings.base_dir, settings.builtin_tools),
                trimmed_history=settings.trimmed_history,
                max_tool_iterations=settings.max_tool_iterations,
                jobs=workers,
            )
        except RunInterrupted as stop:
            raise typer.Exit(128 + stop.signum) from None
        except PluginError as exc:
            raise fail(exc.problems) from None
    # Ended outside every case after the last mutant's outcome was taken: the report's to
    # decide, as one during a mutant's run is (evalrunner.mutation.runner).
    late = late_exits_taken()
    if late:
        report = replace(report, late_exits=late)
    emit(render_mutation(report))
    raise typer.Exit(report.exit_code)
