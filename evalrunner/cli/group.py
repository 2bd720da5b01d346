"""The command group: how usage errors and failed writes to the standard streams are said."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

import contextlib
import errno
import re
from collections.abc import Iterator
from typing import Any

import typer
from typer.core import TyperGroup

from evalrunner.report import EXIT_REFUSED
from evalrunner.text import printable


class OutputFailed(Exception):
    """A write to standard output or standard error failed (a full disk, a closed pipe).

    Not an ``OSError``, so that typer does not turn a closed pipe into exit code 1, the
    code of a failed case; :func:`evalrunner.cli.main` turns it into a refusal."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error


_OUTPUT_FAILURES = frozenset(
    {errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.ECONNRESET}
)
"""Errors a write to a full disk, a closed pipe or a vanished terminal raises. Reports to
files are written, and their failures said, in :mod:`evalrunner.report.write`; one of these
reaching the command line failed on a standard stream."""


class CommandGroup(TyperGroup):
    """A command group whose errors read as every other problem of evalrunner's does.

    A usage error (an unknown option, a bad value, a missing argument) becomes one
    ``where: message (see COMMAND --help)`` line on stderr and exit code 2, instead of
    typer's panel; a failed write to a standard stream becomes :class:`OutputFailed`, so
    that it is not taken for a failed case (exit 1). Both happen here, in the group that
    parses and invokes, so the console script and typer's test runner behave alike.
    """

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        # --help and --version write while the arguments are parsed.
        with output_failures_distinct(), _usage_errors_said(None):
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with output_failures_distinct(), _usage_errors_said(ctx):
            return super().invoke(ctx)


@contextlib.contextmanager
def output_failures_distinct() -> Iterator[None]:
    """A failed write to a standard stream, raised inside, comes out as :class:`OutputFailed`."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _OUTPUT_FAILURES:
            raise OutputFailed(exc) from exc
        raise


@contextlib.contextmanager
def _usage_errors_said(group_ctx: Any) -> Iterator[None]:
    """Say a usage error in evalrunner's style, then exit with its code (2).

    ``group_ctx`` is the group's context while it invokes a subcommand: an error the option
    parser raises without a context of its own (an option given no value) is then placed
    on the subcommand, so that it names that command and its help."""
    try:
        yield
    except typer.TyperException as error:  # the parser's errors: usage errors among them
        code = getattr(error, "exit_code", EXIT_REFUSED)
        ctx = getattr(error, "ctx", None)
        if type(error).__name__ == "NoArgsIsHelpError" and ctx is not None:
            typer.echo(ctx.get_help())  # no command given: the help is the answer
            raise typer.Exit(code) from None
        if ctx is not None:
            command = ctx.command_path
        elif group_ctx is not None and group_ctx.invoked_subcommand:
            command = f"{group_ctx.command_path} {group_ctx.invoked_subcommand}"
        else:
            command = "evalrunner"
        typer.echo(_usage_line(error, command), err=True)
        raise typer.Exit(code) from None


def _usage_line(error: typer.TyperException, command: str) -> str:
    """``where: message (see COMMAND --help)``, on one line, escaped."""
    opts = getattr(getattr(error, "param", None), "opts", None) or []
    where = opts[0] if opts else command
    message = " ".join(str(error.format_message()).split())
    message = re.sub(r"^Invalid value for '[^']*': (Value error, )?", "", message)
    return printable(f"{where}: {message} (see {command} --help)")
