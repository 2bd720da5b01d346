"""``evalrunner run``: admit, replay, grade, report."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

import contextlib
import os
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from evalrunner import report as formats  # JUnit, GitHub, JSON, report files: on first use
from evalrunner.cli.common import (
    PATHS_HELP,
    ConfigOption,
    KeywordOption,
    NoCacheOption,
    RepeatOption,
    ShardOption,
    agent_output_to_stderr,
    cache_directory,
    color_wanted,
    emit,
    fail,
    live_model,
    load_settings,
    parse_selection,
    prepare_report_paths,
    refusal_summary,
    report_skipped,
    write_reports,
)
from evalrunner.config import parse_seconds
from evalrunner.model import (
    RunRefused,
    SuiteReport,
)
from evalrunner.plugins import PluginError
from evalrunner.process_exit import late_exit_problem, process_exit_refused
from evalrunner.report import (
    Verbosity,
    agent_label,
    render_table,
)
from evalrunner.report.progress import RunProgress
from evalrunner.session import (
    late_exits_taken,
    run_exit_code,
    run_suite,
    settings_from_config,
    with_late_exits,
)
from evalrunner.stop_signals import signals_stop_the_run
from evalrunner.text import printable


class ReportFormat(StrEnum):
    """Output formats of ``evalrunner run``."""

    table = "table"
    json = "json"
    github = "github"


PathsArgument = Annotated[
    list[Path] | None,
    typer.Argument(
        metavar="PATH",
        help=f"{PATHS_HELP} Default: --suite, else the configured suite.",
        show_default=False,
    ),
]


def run(
    paths: PathsArgument = None,
    suite: Annotated[
        Path | None, typer.Option("--suite", help="Suite directory (default: from config).")
    ] = None,
    keyword: KeywordOption = None,
    shard: ShardOption = None,
    keep_going: Annotated[
        bool,
        typer.Option(
            "--continue-on-admission-errors",
            help="Run the admitted cases even if some fixtures are refused; the refusals are "
            "printed and the exit code is still 2.",
        ),
    ] = False,
    mode: Annotated[str | None, typer.Option("--mode", help="replay or live.")] = None,
    no_cache: NoCacheOption = False,
    report_format: Annotated[
        ReportFormat | None,
        typer.Option(
            "--format",
            help="Report format on stdout: table, json, or github (annotations for GitHub "
            "Actions, then the table). Default: github when GITHUB_ACTIONS=true, else table.",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            metavar="FILE",
            help="Also write the report (in --format; table if not given) to FILE, atomically "
            "(a symlink is followed; a FIFO or terminal is written in place; anything else "
            "that is not a regular file is refused); stdout then shows the table.",
        ),
    ] = None,
    json_file: Annotated[
        Path | None,
        typer.Option("--json", metavar="FILE", help="Also write the JSON report to FILE."),
    ] = None,
    junit_xml: Annotated[
        Path | None,
        typer.Option(
            "--junit-xml",
            metavar="FILE",
            help="Also write a JUnit XML report to FILE (also when the run is refused).",
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Show only the failures and the summary.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show every check of every case.")
    ] = False,
    show_tracebacks: Annotated[
        bool,
        typer.Option(
            "--traceback",
            help="Under each failed case, show the full traceback of what your Python agent "
            "or tool raised.",
        ),
    ] = False,
    case_timeout: Annotated[
        float | None,
        typer.Option(
            "--case-timeout",
            metavar="SECS",
            parser=parse_seconds,
            help="Seconds one case may run before it fails as timed out (default: from config, "
            "120).",
        ),
    ] = None,
    agent_command: Annotated[
        str | None,
        typer.Option(
            "--agent-command",
            metavar="CMD",
            help="Run this command as the agent of each case, against the replay endpoint "
            "(default: from config; else the reference agent).",
        ),
    ] = None,
    jobs: Annotated[
        str,
        typer.Option(
            "--jobs",
            "-j",
            metavar="N",
            help="Run cases in N worker processes (auto: one per CPU). The report, its order "
            "and the exit code are those of a serial run.",
        ),
    ] = "1",
    repeat: RepeatOption = None,
    agent_exit_grace: Annotated[
        float | None,
        typer.Option(
            "--agent-exit-grace-secs",
            metavar="SECS",
            parser=parse_seconds,
            help="Seconds an agent command gets to exit after its stdin closes (default: from "
            "config, 5).",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run a suite: admit every fixture, replay each case, grade it, report.

    Report files (--output, --json, --junit-xml) get missing directories created before the
    run; a path that cannot be written is refused before any case runs. SIGINT (Ctrl-C) or
    SIGTERM stops the run: the finished cases are reported, the files are written (the JSON
    with "interrupted": true), and the exit code is 130 or 143.
    """
    chosen_by, slice_ = parse_selection(keyword, shard)
    if paths and suite is not None:
        raise fail(["--suite: give fixture PATHs or --suite DIR, not both"])
    workers = parse_jobs(jobs)
    verbosity = _verbosity(quiet, verbose)
    shown_format = report_format or default_format()
    settings = load_settings(
        config, suite, mode, case_timeout, agent_command, repeat, agent_exit_grace
    )
    # From the import of the configured agent and tools on, an os._exit of theirs is refused
    # (evalrunner.process_exit): it would end the run with its own code, 0 reading as a pass.
    with process_exit_refused():
        late_exits_taken()  # what an earlier run in this process left (library use): not ours
        try:
            run_settings = settings_from_config(settings, jobs=workers)
        except PluginError as exc:
            raise fail(exc.problems) from None
        live = live_model(settings, workers) if settings.mode == "live" else None
        if live is not None:
            run_settings = replace(run_settings, live=live)
        report_files = {"--output": output, "--json": json_file, "--junit-xml": junit_xml}
        prepare_report_paths(report_files)
        progress = RunProgress.for_stderr()
        # Standard output carries the report alone: what an in-process agent or tool prints
        # (print(), a library's logging to stdout) goes to stderr, so it can neither corrupt a
        # JSON report nor forge a line of the table or a GitHub annotation.
        with signals_stop_the_run(), progress, agent_output_to_stderr():
            outcome = run_suite(
                paths or settings.suite_dir,
                mode=settings.mode,
                settings=run_settings,
                keyword=chosen_by,
                shard=slice_,
                keep_going=keep_going,
                on_start=progress.start,
                on_case=progress.case_done,
                cache_dir=cache_directory(settings, no_cache),
            )
        if live is not None:
            live.close()
        if isinstance(outcome, RunRefused):
            refused = outcome
            problems = write_reports(
                {"--junit-xml": junit_xml}, lambda _: formats.render_junit(refused)
            )
            if shown_format is ReportFormat.github:
                emit(formats.render_github(outcome))
            raise fail([*outcome.lines(), *problems], refusal_summary(outcome))
        # What ended a process of the run outside its cases since run_suite's report was
        # built is the run's too, and goes into the report files.
        report = with_late_exits(
            replace(outcome, agent=agent_label(settings.agent, settings.agent_command))
        )
        report_skipped(report)

        def render(flag: str) -> str:
            if flag == "--json":
                return formats.render_json(report)
            if flag == "--junit-xml":
                return formats.render_junit(report)
            return _render(
                report,
                report_format or ReportFormat.table,
                verbosity,
                color=False,
                tracebacks=show_tracebacks,
            )

        problems = write_reports(report_files, render)
        if output is not None and shown_format is ReportFormat.json:
            shown_format = ReportFormat.table  # the JSON went to the file; people read the table
        shown = _render(
            report, shown_format, verbosity, color=color_wanted(), tracebacks=show_tracebacks
        )
        emit(shown)
        if problems:
            raise fail(problems)
        raise typer.Exit(run_exit_code(_late_exits_after(report)))


def _late_exits_after(report: SuiteReport) -> SuiteReport:
    """``report`` with what ended a process of the run outside its cases after its report
    files were written (:func:`~evalrunner.session.with_late_exits`), said on stderr, since
    no report shows it."""
    final = with_late_exits(report)
    after = final.late_exits[len(report.late_exits) :]
    if after:
        with contextlib.suppress(OSError, AttributeError, ValueError):  # stderr closed
            typer.echo(f"error: {late_exit_problem(list(after))}", err=True)
    return final


def _verbosity(quiet: bool, verbose: bool) -> Verbosity:
    if quiet and verbose:
        raise fail(["-q/--quiet and -v/--verbose: they ask for opposite things; give one"])
    if quiet:
        return Verbosity.QUIET
    return Verbosity.VERBOSE if verbose else Verbosity.NORMAL


def default_format() -> ReportFormat:
    """github under GitHub Actions (which sets GITHUB_ACTIONS=true), else table."""
    return ReportFormat.github if os.environ.get("GITHUB_ACTIONS") == "true" else ReportFormat.table


MAX_JOBS = 256


def usable_cpus() -> int:
    """How many CPUs this process may run on: under ``taskset`` or a container's CPU set that
    is fewer than the machine has, and a worker per CPU beyond them would only wait."""
    if hasattr(os, "sched_getaffinity"):  # Linux; elsewhere, every CPU is usable
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def parse_jobs(raw: str) -> int:
    """``--jobs``: a count from 1 to :data:`MAX_JOBS`, or ``auto`` (one per CPU this process
    may use: :func:`usable_cpus`)."""
    text = raw.strip().lower()
    if text == "auto":
        return max(1, min(MAX_JOBS, usable_cpus()))
    if not (text.isascii() and text.isdecimal() and len(text) <= 3 and 1 <= int(text) <= MAX_JOBS):
        shown = printable(raw[:40])
        raise fail([f"--jobs: must be a number from 1 to {MAX_JOBS}, or auto; got {shown!r}"])
    return int(text)


def _render(
    report: SuiteReport,
    report_format: ReportFormat,
    verbosity: Verbosity,
    *,
    color: bool,
    tracebacks: bool = False,
) -> str:
    if report_format is ReportFormat.json:
        return formats.render_json(report)
    if report_format is ReportFormat.github:
        return formats.render_github(report, verbosity=verbosity, tracebacks=tracebacks)
    return render_table(report, color=color, verbosity=verbosity, tracebacks=tracebacks)
