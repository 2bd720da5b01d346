"""``evalrunner merge``: the shards' JSON reports joined into one run's."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

from dataclasses import replace
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
from evalrunner.model import Case, SuiteFingerprint, SuiteReport
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
    else:
        # The shards' fingerprints are equal (merge_reports refuses others). Annotations and
        # the table's failures point at the lines the unsharded run's do.
        shown = _with_positions(merged, shards[0].report.fingerprint)
        if shown_format is ReportFormat.github:
            emit(formats.render_github(shown, tracebacks=show_tracebacks))
        else:
            emit(render_table(shown, color=color_wanted(), tracebacks=show_tracebacks))
    if problems:
        raise fail(problems)
    raise typer.Exit(run_exit_code(merged))


def _with_positions(merged: SuiteReport, fingerprint: SuiteFingerprint | None) -> SuiteReport:
    """The merged report with each failed case's fixture positions, so that its annotations
    and its table's failures point at the lines the unsharded run's do. A JSON report carries
    no positions: they are read again from the fixture file, and only when the file's bytes
    are those the shards ran (the suite's fingerprint); otherwise the file is named alone."""
    import hashlib

    from evalrunner.fixture.admit import admit
    from evalrunner.fixture.load import load_document

    digests = {
        (case.name, case.source): case.sha256
        for case in (fingerprint.cases if fingerprint is not None else ())
    }
    cases = []
    for case in merged.cases:
        wanted = digests.get((case.name, case.source))
        if case.passed or case.positions or not case.path or wanted is None:
            cases.append(case)
            continue
        path = Path(case.path)
        try:
            same = hashlib.sha256(path.read_bytes()).hexdigest() == wanted
        except OSError:
            same = False
        document = load_document(path) if same else None
        admitted = (
            admit(document) if document is not None and not isinstance(document, list) else None
        )
        if isinstance(admitted, Case) and admitted.name == case.name:
            case = replace(case, positions=dict(admitted.positions))
        cases.append(case)
    return replace(merged, cases=tuple(cases))
