"""``evalrunner cache``: the admission cache."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

import typer

from evalrunner.cli.common import ConfigOption, cache_directory, fail, load_settings
from evalrunner.fixture.load import relative_to_cwd
from evalrunner.text import printable_path


def cache_clear(config: ConfigOption = None) -> None:
    """Remove the admission cache of this project; the next run admits every fixture afresh.

    A directory of that name that evalrunner did not make is left alone (exit 2).
    """
    from evalrunner.fixture.cache import clear

    directory = cache_directory(load_settings(config), no_cache=False)
    assert directory is not None
    shown = printable_path(relative_to_cwd(directory))
    try:
        removed = clear(directory)
    except ValueError as exc:
        raise fail([f"{shown}: not removed: {exc}"]) from None
    except OSError as exc:
        raise fail([f"{shown}: cannot remove: {exc.strerror or exc}"]) from None
    typer.echo(f"removed {shown}" if removed else f"no cache at {shown}; nothing to remove")
