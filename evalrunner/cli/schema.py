"""``evalrunner schema``: the published JSON Schemas."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

from pathlib import Path
from typing import Annotated

import typer

from evalrunner.cli.common import ConfigOption, fail, load_settings
from evalrunner.fixture.load import relative_to_cwd


def schema_list() -> None:
    """Print each expectation kind and the $id of its schema."""
    from evalrunner.fixture.schemas import schema_tree

    kinds = schema_tree().kinds()
    width = max(len(kind) for kind in kinds)
    for kind, schema_id in kinds.items():
        typer.echo(f"{kind.ljust(width)}  {schema_id}")


def schema_export(
    directory: Annotated[Path, typer.Argument(help="Directory to write the schemas into.")],
    fixtures: Annotated[
        Path | None,
        typer.Option(
            "--fixtures",
            help="Directory the printed modelines are written for (default: the configured suite).",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Write the schema tree and the single-file bundle editors use; print how to wire them."""
    from evalrunner.toolbox.export import export_files, wiring, write_export

    files = export_files()  # all rendered before anything is written
    try:
        write_export(directory, files)
    except OSError as exc:
        raise fail([f"{exc.filename or directory}: cannot write: {exc.strerror or exc}"]) from None
    fixture_dir = (
        fixtures if fixtures is not None else relative_to_cwd(load_settings(config).suite_dir)
    )
    typer.echo(wiring(directory, fixture_dir, Path(".")), nl=False)
