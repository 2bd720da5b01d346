"""``evalrunner config``: the effective configuration and where each value came from."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Annotated

import typer

from evalrunner.cli.common import (
    AgentCommandAsRun,
    CaseTimeoutAsRun,
    ConfigOption,
    RepeatOption,
    load_settings,
)
from evalrunner.config import LIVE_KEYS, Config
from evalrunner.fixture.load import relative_to_cwd
from evalrunner.text import printable, printable_path


def show_config(
    suite: Annotated[
        Path | None, typer.Option("--suite", help="As for run: shows it beating the rest.")
    ] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="As for run.")] = None,
    case_timeout: CaseTimeoutAsRun = None,
    agent_command: AgentCommandAsRun = None,
    repeat: RepeatOption = None,
    config: ConfigOption = None,
) -> None:
    """Print the effective configuration and where each value came from.

    It takes run's flags, so it shows what a run with them would use: a flag beats an
    EVALRUNNER_* variable, which beats the config file, which beats the default.
    """
    settings = load_settings(config, suite, mode, case_timeout, agent_command, repeat)
    if settings.file is not None:
        shown = printable_path(relative_to_cwd(settings.file))
    else:
        shown = "(none found; defaults apply)"
    typer.echo(f"# config file: {shown}")
    typer.echo("[eval]")
    values = {key: _shown(getattr(settings, key)) for key in EVAL_KEYS}
    for key, value in values.items():
        source = settings.sources.get(key, "default")
        if value is None:
            unused = "not used" if "overridden" in source else "not set"
            typer.echo(printable(f"# {key} is {unused}  # {source}"))
        else:
            typer.echo(printable(f"{key} = {json.dumps(value, ensure_ascii=False)}  # {source}"))
    # The key's variable is named, never read: the key itself is read only when a live
    # request is sent, so no output of evalrunner can hold it.
    typer.echo("[eval.live]")
    from evalrunner.redact import shown_url

    for key in LIVE_KEYS:
        value = getattr(settings.live, key)
        if key == "base_url":
            value = shown_url(value)  # a gateway's key may ride in it: never printed
        source = settings.sources.get(f"live.{key}", "default")
        if value is None:
            typer.echo(printable(f"# {key} is not set  # {source}"))
        else:
            typer.echo(printable(f"{key} = {json.dumps(value, ensure_ascii=False)}  # {source}"))
    typer.echo("[eval.record]")
    redact = json.dumps(list(settings.record.redact), ensure_ascii=False)
    typer.echo(printable(f"redact = {redact}  # {settings.sources.get('record.redact')}"))


_NOT_EVAL_KEYS = frozenset(
    {"base_dir", "command_dir", "live", "record", "file", "sources", "written_at"}
)
"""The fields of :class:`~evalrunner.config.Config` that are no key of ``[eval]``: the
directories things run in, the ``[eval.live]`` and ``[eval.record]`` tables (shown after it),
and where the settings came from (and where each was written)."""

EVAL_KEYS = tuple(field.name for field in fields(Config) if field.name not in _NOT_EVAL_KEYS)
"""The keys of ``[eval]``, in the order :class:`~evalrunner.config.Config` declares them."""


def _shown(value: object) -> object:
    """A setting as the config file would spell it: a path relative to the working directory,
    a list for a tuple."""
    if isinstance(value, Path):
        return str(relative_to_cwd(Path(os.path.normpath(value))))
    if isinstance(value, tuple):
        return list(value)
    return value
