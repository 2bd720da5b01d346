"""What several commands share: options, settings, report files, signals, output."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evalrunner.config import (
    Config,
    ConfigError,
    load_config,
    parse_repeat,
    parse_seconds,
)
from evalrunner.model import (
    Format,
    RunRefused,
    Shard,
    SuiteReport,
)
from evalrunner.report import (
    EXIT_REFUSED,
)
from evalrunner.selection import SelectionError
from evalrunner.selection.select import parse_shard
from evalrunner.text import printable

if TYPE_CHECKING:
    from evalrunner.live.provider import LiveModel
    from evalrunner.selection.keywords import Keyword


class FixtureFormat(StrEnum):
    """Formats a fixture can be written in."""

    yaml = "yaml"
    toml = "toml"
    json = "json"

    def as_format(self) -> Format:
        """The same, as the pipeline's format name."""
        return _FORMATS[self]


_FORMATS: dict[FixtureFormat, Format] = {
    FixtureFormat.yaml: "yaml",
    FixtureFormat.toml: "toml",
    FixtureFormat.json: "json",
}


def fail(lines: list[str] | tuple[str, ...], summary: str | None = None) -> typer.Exit:
    # Messages quote fixture text, file names and agent output: escaped, each stays one line
    # and cannot forge another.
    for line in lines:
        typer.echo(printable(line), err=True)
    if summary:
        typer.echo(summary, err=True)
    return typer.Exit(EXIT_REFUSED)


def load_settings(
    config: Path | None,
    suite: Path | None = None,
    mode: str | None = None,
    case_timeout: float | None = None,
    agent_command: str | None = None,
    repeat: int | None = None,
    agent_exit_grace: float | None = None,
) -> Config:
    try:
        return load_config(
            config_file=config,
            env=os.environ,
            suite_dir=suite,
            mode=mode,
            case_timeout_secs=case_timeout,
            agent_command=agent_command,
            repeat=repeat,
            agent_exit_grace_secs=agent_exit_grace,
        )
    except ConfigError as exc:
        raise fail(exc.problems) from None


@contextmanager
def agent_output_to_stderr() -> Iterator[None]:
    """While cases run, standard output (Python's, and file descriptor 1, which a child
    process or a C library writes to) is standard error's; the report alone goes to stdout."""
    saved: int | None = None
    with contextlib.suppress(AttributeError, ValueError, OSError, io.UnsupportedOperation):
        sys.stdout.flush()
        real = sys.stdout.fileno()
        saved = os.dup(real)
        os.dup2(sys.stderr.fileno(), real)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
                os.dup2(saved, real)
            os.close(saved)


def emit(text: str) -> None:
    """Write a report to standard output, every byte or an error.

    Not through ``print`` or ``typer.echo``: when a pipe's reader leaves in the middle of a
    large write, the kernel reports a short write and CPython's text layer drops the rest
    without an error, so a cut report would end the run as if it had been delivered.
    """
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):  # captured, as under tests
        typer.echo(text, nl=False)
        return
    stream.flush()
    data = memoryview(text.encode(stream.encoding or "utf-8", "backslashreplace"))
    while data:
        data = data[os.write(fd, data) :]


def color_wanted() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="Config file to use instead of discovering one."),
]


PATHS_HELP = "Fixture files and suite directories, searched recursively (dot-directories skipped)."


KeywordOption = Annotated[
    str | None,
    typer.Option(
        "-k",
        metavar="EXPR",
        help="Only cases whose name, fixture path or class contains these words, "
        "case-insensitively, combined with and, or, not and parentheses (pytest's -k).",
    ),
]


ShardOption = Annotated[
    str | None,
    typer.Option(
        "--shard",
        metavar="I/N",
        help="Only slice I of N of the selected cases, dealt by a stable hash of each case "
        "(the same on every machine); evalrunner merge joins the shards' JSON reports.",
    ),
]


def parse_selection(
    keyword: str | None, shard: str | None
) -> "tuple[Keyword | None, Shard | None]":
    """``-k`` and ``--shard``, parsed before anything is loaded."""
    problems: list[str] = []
    parsed_keyword = parsed_shard = None
    try:
        # A blank -k selects everything, as no -k does: the run (and its report) is the same.
        blank = keyword is not None and not keyword.strip()
        if keyword is not None and not blank:
            from evalrunner.selection.keywords import parse_keyword  # only a run given -k needs it

            parsed_keyword = parse_keyword(keyword)
    except SelectionError as exc:
        problems.append(str(exc))
    try:
        parsed_shard = None if shard is None else parse_shard(shard)
    except SelectionError as exc:
        problems.append(str(exc))
    if problems:
        raise fail(problems)
    return parsed_keyword, parsed_shard


def report_skipped(report: SuiteReport) -> None:
    """Under --continue-on-admission-errors: the refused files, on stderr, with positions."""
    if not report.admission_errors:
        return
    for error in report.admission_errors:
        typer.echo(printable(str(error)), err=True)
    files = len({e.path for e in report.admission_errors})
    ran = f"the {len(report.cases)} admitted case(s) ran"
    if report.shard is not None and report.selected is not None:
        # What this shard ran: the whole run's count would read as this job's.
        ran = (
            f"shard {report.shard.index}/{report.shard.count} ran {len(report.cases)} of the "
            f"{report.selected} admitted case(s)"
        )
    typer.echo(
        f"--continue-on-admission-errors: {len(report.admission_errors)} problem(s) in {files} "
        f"file(s), which were skipped; {ran}",
        err=True,
    )


RepeatOption = Annotated[
    int | None,
    typer.Option(
        "--repeat",
        metavar="K",
        parser=parse_repeat,
        help="Run each case K times, 1 to 1000 (default: from config, 1): the report gives "
        "each case's passes out of K, pass^k, pass@k, a Wilson 95% interval and flaky cases; "
        "a case passes only when every run passed.",
    ),
]


CaseTimeoutAsRun = Annotated[
    float | None,
    typer.Option("--case-timeout", metavar="SECS", parser=parse_seconds, help="As for run."),
]


AgentCommandAsRun = Annotated[
    str | None, typer.Option("--agent-command", metavar="CMD", help="As for run.")
]


NoCacheOption = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Admit every fixture afresh, neither reading nor writing the admission cache "
        "(.evalrunner_cache/ beside the config file).",
    ),
]


def cache_directory(settings: Config, no_cache: bool) -> Path | None:
    """Where this project keeps its admission cache (``None``: not used)."""
    from evalrunner.fixture.cache import CACHE_DIR_NAME

    return None if no_cache else settings.base_dir / CACHE_DIR_NAME


def live_model(settings: Config, workers: int) -> "LiveModel":
    """The run's live model, or exit 2 saying what is missing (a model name, the httpx2
    extra, a single process). Imported here: a replay run never loads the live client."""
    from evalrunner.live.provider import start_live

    if workers > 1:
        from evalrunner.session import LIVE_WITH_JOBS

        raise fail([*settings.live.problems(), LIVE_WITH_JOBS])
    live = start_live(settings.live)
    if isinstance(live, list):
        raise fail(live)
    return live


def prepare_report_paths(report_files: dict[str, Path | None]) -> None:
    """Before the run: ready each report file, or exit 2 saying why it cannot be written
    (:func:`evalrunner.report.write.prepare_report_files`)."""
    if all(path is None for path in report_files.values()):
        return  # no report file: their writer is not even imported
    from evalrunner.report.write import prepare_report_files

    problems = prepare_report_files(report_files)
    if problems:
        raise fail(problems)


def write_reports(report_files: dict[str, Path | None], render: Callable[[str], str]) -> list[str]:
    """Write each report file; the problems, one line each (the other files are written)."""
    if all(path is None for path in report_files.values()):
        return []
    from evalrunner.report.write import write_report_files

    return write_report_files(report_files, render)


def refusal_summary(outcome: RunRefused) -> str | None:
    if not outcome.admission_errors:
        return None
    files = len({e.path for e in outcome.admission_errors})
    count = len(outcome.admission_errors)
    return f"{count} problem(s) in {files} file(s); nothing was run"
