"""``evalrunner merge``: the shards' JSON reports joined into one run's."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

from pathlib import Path
from typing import Annotated

import typer

from evalrunner import report as formats  # JUnit, GitHub, JSON, report files: on first use
from evalrunner.cli.common import (
    color_wanted,
    emit,
    fail,
    prepare_report_paths,
    report_skipped,
    write_reports,
)
from evalrunner.cli.run import ReportFormat, default_format
from evalrunner.fixture.load import relative_to_cwd
from evalrunner.report import render_table
from evalrunner.session import run_exit_code


def merge(
    reports: Annotated[
        list[Path],
        typer.Argument(
            metavar="REPORT.json",
            help="The JSON report of every shard (evalrunner run --shard I/N --json FILE).",
            show_default=False,
        ),
    ],
    json_out: Annotated[
        Path | None,
        typer.Option(
            "--json", metavar="OUT", help="Write the merged JSON report to OUT, atomically."
        ),
    ] = None,
    junit_out: Annotated[
        Path | None,
        typer.Option(
            "--junit-xml",
            metavar="OUT",
            help="Write the merged JUnit XML report to OUT, atomically.",
        ),
    ] = None,
    report_format: Annotated[
        ReportFormat | None,
        typer.Option(
            "--format",
            help="Report format on stdout, as for run: table, json, or github (annotations "
            "for GitHub Actions, then the table). Default: github when GITHUB_ACTIONS=true, "
            "else table.",
        ),
    ] = None,
    show_tracebacks: Annotated[
        bool,
        typer.Option(
            "--traceback",
            help="Under each failed case, show the full traceback of what your Python agent "
            "or its tools raised, as run --traceback does (the shards' reports carry them).",
        ),
    ] = False,
) -> None:
    """Merge the JSON reports of a run's shards into the report of the whole run.

    Prints its table, in the order an unsharded run has (with --format github, under GitHub
    Actions by default, the annotations of the unsharded run first); exit 0 if every case
    passed, 1 if one failed, 2 if the shards are refused: unreadable, overlapping, missing, or of
    different runs (suite, mode, agent, -k, shard count).
    """
    from evalrunner.toolbox.merge import MergeRefused, ShardReport, merge_reports, read_report

    report_files = {"--json": json_out, "--junit-xml": junit_out}
    prepare_report_paths(report_files)
    problems: list[str] = []
    shards: list[ShardReport] = []
    for path in reports:
        try:
            shards.append(read_report(relative_to_cwd(path)))
        except MergeRefused as exc:
            problems.extend(exc.problems)
    if problems:
        raise fail(problems, f"{len(problems)} problem(s); nothing was merged")
    try:
        merged = merge_reports(shards)
    except MergeRefused as exc:
        raise fail(exc.problems, f"{len(exc.problems)} problem(s); nothing was merged") from None
    renderers = {"--json": formats.render_json, "--junit-xml": formats.render_junit}
    problems = write_reports(report_files, lambda flag: renderers[flag](merged))
    report_skipped(merged)
    # As run shows it: sharded jobs that merge can annotate the pull request as one run.
    shown_format = report_format or default_format()
    if shown_format is ReportFormat.json:
        emit(formats.render_json(merged))
    elif shown_format is ReportFormat.github:
        # Annotations and the table's failures point at the lines the unsharded run's do:
        # the shards' reports say where each failed case and check is.
        emit(formats.render_github(merged, tracebacks=show_tracebacks))
    else:
        emit(render_table(merged, color=color_wanted(), tracebacks=show_tracebacks))
    if problems:
        raise fail(problems)
    raise typer.Exit(run_exit_code(merged))
