"""The fixture commands: ``validate``, ``list``, ``new`` and ``convert``."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from evalrunner import report as formats  # JUnit, GitHub, JSON, report files: on first use
from evalrunner.cli.common import (
    PATHS_HELP,
    ConfigOption,
    FixtureFormat,
    KeywordOption,
    NoCacheOption,
    ShardOption,
    cache_directory,
    emit,
    fail,
    load_settings,
    parse_selection,
    refusal_summary,
)
from evalrunner.fixture.admit import admit, admit_suite
from evalrunner.fixture.load import (
    SuiteNotFound,
    load_paths,
    relative_to_cwd,
)
from evalrunner.model import RunRefused
from evalrunner.text import printable_path


def validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Fixture files or suite directories (default: the configured suite)."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Admit fixtures without running them: exit 0 if all are admitted, else 2."""
    targets = [relative_to_cwd(p) for p in (paths or [load_settings(config).suite_dir])]
    try:
        loaded = load_paths(targets)
    except SuiteNotFound as exc:
        raise fail([str(exc)]) from None
    except OSError as exc:
        shown = printable_path(str(exc.filename))
        raise fail([f"{shown}: cannot read: {exc.strerror or exc}"]) from None
    admission = admit_suite(loaded)
    if not admission.ok:
        refused = RunRefused(admission_errors=admission.errors)
        raise fail(refused.lines(), refusal_summary(refused))
    typer.echo(f"{len(admission.cases)} fixture(s) admitted")


class ListFormat(StrEnum):
    """Output formats of ``evalrunner list``."""

    table = "table"
    json = "json"


def list_cases(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="PATH",
            help=f"{PATHS_HELP} Default: the configured suite.",
            show_default=False,
        ),
    ] = None,
    keyword: KeywordOption = None,
    shard: ShardOption = None,
    list_format: Annotated[
        ListFormat, typer.Option("--format", help="table, or json for scripts.")
    ] = ListFormat.table,
    no_cache: NoCacheOption = False,
    config: ConfigOption = None,
) -> None:
    """List the cases a run would take (name, file, class, turns, expectation kinds), in run
    order, without running anything: exit 0, or 2 if a fixture is refused or -k matches
    nothing."""
    from evalrunner.fixture.cache import AdmissionCache
    from evalrunner.session import select_cases, suite_paths
    from evalrunner.toolbox.listing import render_list_json, render_list_table

    chosen_by, slice_ = parse_selection(keyword, shard)
    settings = load_settings(config)
    targets = paths or suite_paths(settings.suite_dir)
    cache_dir = cache_directory(settings, no_cache)
    outcome = (
        targets
        if isinstance(targets, RunRefused)
        else select_cases(
            targets,
            keyword=chosen_by,
            shard=slice_,
            cache=AdmissionCache(cache_dir) if cache_dir is not None else None,
        )
    )
    if isinstance(outcome, RunRefused):
        raise fail(outcome.lines(), refusal_summary(outcome))
    if list_format is ListFormat.json:
        emit(render_list_json(outcome))
    else:
        emit(render_list_table(outcome))


def new_fixture(
    name: Annotated[str, typer.Argument(help="The case's name (also gives the file name).")],
    fixture_format: Annotated[
        FixtureFormat, typer.Option("--format", help="Fixture format.")
    ] = FixtureFormat.yaml,
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Where to create it (default: the configured suite)."),
    ] = None,
    schema: Annotated[
        Path | None,
        typer.Option(
            "--schema",
            help="The exported case.bundle.schema.json to point editors at (default: "
            "../schemas/case.bundle.schema.json from the fixture).",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Create a fixture to fill in; it is refused until its expectation is filled in."""
    from evalrunner.toolbox.scaffold import ScaffoldError, file_name, scaffold, schema_reference_for

    target_dir = (
        directory if directory is not None else relative_to_cwd(load_settings(config).suite_dir)
    )
    fmt = fixture_format.as_format()
    try:
        path = target_dir / file_name(name, fmt)
        suite_dir = relative_to_cwd(load_settings(config).suite_dir)
        text = scaffold(name, fmt, schema_reference_for(target_dir, schema, suite_dir))
    except ScaffoldError as exc:
        raise fail([f"NAME: {exc}"]) from None  # blamed on the argument, as options are
    shown = printable_path(path)
    if os.path.lexists(path):
        raise fail([f"{shown}: already exists; choose another name or remove the file"])
    created_dir = not target_dir.exists()
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        formats.write_atomic(path, text)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the configured suite_dir
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise fail([f"{shown}: cannot write: {reason}"]) from None
    if created_dir:
        origin = "from --dir" if directory is not None else "the configured suite_dir"
        if directory is None and load_settings(config).file is None:
            origin = "the default suite; no evalrunner.toml was found"
        typer.echo(f"note: created the directory {printable_path(target_dir)} ({origin})", err=True)
    schema_file = Path(
        os.path.normpath(target_dir / schema_reference_for(target_dir, schema, suite_dir))
    )
    if not schema_file.exists():
        typer.echo(
            f"note: the schema line points at {printable_path(schema_file)}, which does not "
            f"exist yet; `evalrunner schema export {printable_path(schema_file.parent)}` writes "
            "it (editors use it to complete and check the fixture)",
            err=True,
        )
    typer.echo(f"created {shown}: fill in expects.response_contains, then run evalrunner validate")


def convert_fixture(
    file: Annotated[Path, typer.Argument(help="The fixture to convert.")],
    to: Annotated[FixtureFormat, typer.Option("--to", help="Target format.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Write here (atomically, making missing directories) instead of to stdout.",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Rewrite a fixture in another format; the result admits to the same case.

    A FILE that is not there as given, relative to the working directory, is looked up in
    the configured suite (so `convert echo.yaml --to toml` works from anywhere in a project).
    """
    from evalrunner.fixture.load import FIXTURE_SUFFIXES, load_document
    from evalrunner.toolbox.convert import ConversionError, convert

    fmt = to.as_format()
    if output is not None and FIXTURE_SUFFIXES.get(output.suffix.lower()) != fmt:
        shown = printable_path(output)
        endings = " or ".join(sorted(s for s, f in FIXTURE_SUFFIXES.items() if f == fmt))
        raise fail([f"{shown}: a {fmt} fixture's name must end in {endings}"])
    source = file
    if not os.path.lexists(file) and not file.is_absolute():
        in_suite = load_settings(config).suite_dir / file
        if os.path.lexists(in_suite):
            source = in_suite
    elif config is not None:
        load_settings(config)  # a --config given is read, and its problems reported, all the same
    document = load_document(relative_to_cwd(source))
    if isinstance(document, list):
        raise fail([str(e) for e in document])
    try:
        outcome = convert(document, fmt, target_path=output)
    except ConversionError as exc:
        raise fail([f"{exc}; nothing was written (please report this)"]) from None
    if isinstance(outcome, list):
        # Only an admitted fixture reaches the writer: then what was refused is a value the
        # target cannot hold (a null in TOML), and the fixture itself is fine.
        why = "the fixture is not admitted"
        if fmt == "toml" and not isinstance(admit(document), list):
            why = "TOML cannot hold this fixture as it is"
        raise fail([str(e) for e in outcome], f"{why}; nothing converted")
    if output is None:
        emit(outcome.text)
        return
    try:
        # Missing parent directories are made, as for run's report files; only once the
        # conversion has succeeded, so a refused fixture leaves nothing behind.
        formats.prepare_output(output)
        formats.write_atomic(output, outcome.text)
    except OSError as exc:
        raise fail([f"{printable_path(output)}: cannot write: {exc.strerror or exc}"]) from None
