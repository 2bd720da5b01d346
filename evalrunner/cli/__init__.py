"""The ``evalrunner`` command line. It parses arguments, calls the library, prints, and exits.

Exit codes: 0 every case passed (or every fixture admitted, for ``validate``); 1 a case failed
or errored; 2 the run could not start (usage, config, admission, no fixtures, unavailable mode).
Reports go to stdout; problems go to stderr, one ``path:line:col: message`` line each.
"""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

import contextlib
import errno
import os
import sys
from typing import Annotated

import typer

from evalrunner import __version__
from evalrunner.cli import cache, config, fixtures, merge, mutate, record, run, schema, serve
from evalrunner.cli.group import CommandGroup, OutputFailed, output_failures_distinct
from evalrunner.process_exit import refuse_for_life
from evalrunner.report import EXIT_REFUSED

# Plain help (no rich markup): the formatter joins a docstring's lines into paragraphs and
# wraps them at the terminal's width (not capped at 80 columns), and a flag shows no value
# placeholder beside it.
_HELP_SETTINGS = {"max_content_width": 10_000}


app = typer.Typer(
    cls=CommandGroup,
    context_settings=_HELP_SETTINGS,
    name="evalrunner",
    help="Replay scripted agent fixtures through a real agent loop and grade the run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


schema_app = typer.Typer(
    cls=CommandGroup,
    help="The published JSON Schemas.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(schema_app, name="schema")


cache_app = typer.Typer(
    cls=CommandGroup,
    help="The admission cache (.evalrunner_cache/ beside the config file).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(cache_app, name="cache")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"evalrunner {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """evalrunner: CI tests for LLM agent machinery, no network, same verdict every time."""


# The commands, in the order the help lists them.
app.command()(run.run)
app.command("record")(record.record)
app.command()(fixtures.validate)
app.command("list")(fixtures.list_cases)
app.command("merge")(merge.merge)
app.command("mutate")(mutate.mutate)
app.command("config")(config.show_config)
schema_app.command("list")(schema.schema_list)
schema_app.command("export")(schema.schema_export)
app.command("new")(fixtures.new_fixture)
app.command("convert")(fixtures.convert_fixture)
app.command("serve")(serve.serve)
cache_app.command("clear")(cache.cache_clear)


def main() -> None:
    """Console-script entry point."""
    try:
        os.getcwd()
    except OSError as exc:  # e.g. the directory was removed under the shell
        typer.echo(
            f"evalrunner: the working directory cannot be used ({exc.strerror}); cd into an "
            "existing directory and run it again",
            err=True,
        )
        raise SystemExit(EXIT_REFUSED) from None
    if sys.stderr is None:  # started with stderr closed (`2>&-`)
        _stderr_to_null()
    if sys.stdout is None:  # started with stdout closed (`>&-`): nowhere for a verdict
        with contextlib.suppress(OSError, AttributeError):
            typer.echo(
                "evalrunner: standard output is closed; point it somewhere (a file, or "
                "/dev/null) and run it again",
                err=True,
            )
        raise SystemExit(EXIT_REFUSED)
    # This process is evalrunner's alone: an agent's or tool's os._exit is refused until it
    # exits, also from an atexit hook or a daemon thread that outlived the run, so that the
    # exit code stays the run's (evalrunner.process_exit).
    refuse_for_life()
    try:
        try:
            app(prog_name="evalrunner")
        finally:
            # What is still buffered (a short --help) must reach its reader too.
            with output_failures_distinct():
                sys.stdout.flush()
    except KeyboardInterrupt:  # before the run's own signal handling is in place
        raise SystemExit(130) from None
    except OutputFailed as failed:
        # The verdict could not be delivered: a refusal (2), never a pass or a fail. A reader
        # that closed the pipe (`| head`) left on purpose and hears nothing more.
        _silence_stdout()
        if failed.error.errno != errno.EPIPE:
            with contextlib.suppress(OSError):
                typer.echo(f"evalrunner: cannot write its output: {failed}", err=True)
        raise SystemExit(EXIT_REFUSED) from None


def _stderr_to_null() -> None:
    """Point standard error at the null device: the run goes on and reports as ever, its
    problems said nowhere, as the caller chose. Descriptor 2 itself is opened too: left
    closed, the next file the run opens would take it, and a child process's error output
    would land in that file."""
    try:
        os.fstat(2)
    except OSError:  # closed: the null device takes it (the lowest free descriptor)
        null = os.open(os.devnull, os.O_WRONLY)
        if null != 2:
            os.dup2(null, 2)
            os.close(null)
        stream = 2
    else:  # something holds descriptor 2 already: only Python's stream is missing
        stream = os.open(os.devnull, os.O_WRONLY)
    # Lives until the process exits, as the standard error it stands for would.
    sys.stderr = os.fdopen(stream, "w", encoding="utf-8", errors="backslashreplace")


def _silence_stdout() -> None:
    """Point standard output at the null device, so that the interpreter's own flush at exit
    does not print a second complaint about it."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
