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
) -> None:
    """Merge the JSON reports of a run's shards into the report of the whole run.

    Prints its table, in the order an unsharded run has; exit 0 if every case passed, 1 if
    one failed, 2 if the shards are refused: unreadable, overlapping, missing, or of
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
    emit(render_table(merged, color=color_wanted()))
    if problems:
        raise fail(problems)
    raise typer.Exit(run_exit_code(merged))
