"""The ``evalrunner`` command line. It parses arguments, calls the library, prints, and exits.

Exit codes: 0 every case passed (or every fixture admitted, for ``validate``); 1 a case failed
or errored; 2 the run could not start (usage, config, admission, no fixtures, unavailable mode).
Reports go to stdout; problems go to stderr, one ``path:line:col: message`` line each.
"""

# No ``from __future__ import annotations`` here, unlike the rest of the package: typer reads
# every command's annotations at each start, and string annotations would make it compile
# some 300 of them (20 ms of a run) where real ones are already built. The few that name what
# is imported only for type checking are quoted.

import contextlib
import errno
import io
import json
import os
import re
import shutil
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from evalrunner import __version__
from evalrunner import report as formats  # JUnit, GitHub, JSON, report files: on first use
from evalrunner.admit import admit_documents, admit_suite
from evalrunner.config import (
    LIVE_KEYS,
    Config,
    ConfigError,
    load_config,
    parse_repeat,
    parse_seconds,
)
from evalrunner.load import (
    SuiteNotFound,
    discover,
    iter_documents,
    load_paths,
    relative_to_cwd,
)
from evalrunner.model import (
    CaseReport,
    Format,
    RunInterrupted,
    RunRefused,
    Shard,
    SuiteReport,
)
from evalrunner.pipeline import run_suite
from evalrunner.plugins import PluginError, configured_settings
from evalrunner.report import (
    EXIT_REFUSED,
    Verbosity,
    agent_label,
    exit_code,
    render_table,
)
from evalrunner.select import SelectionError, parse_shard
from evalrunner.text import printable, printable_path

if TYPE_CHECKING:
    from evalrunner.keyword_expr import Keyword
    from evalrunner.pipeline import RunSettings, SelectedCase
    from evalrunner.record import NotRecorded, Recorded, RecordSettings, Targets
    from evalrunner.wire.live import LiveModel


class _OutputFailed(Exception):
    """A write to standard output or standard error failed (a full disk, a closed pipe).

    Not an ``OSError``, so that click does not turn a closed pipe into exit code 1, the
    code of a failed case; :func:`main` turns it into a refusal."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error


_OUTPUT_FAILURES = frozenset(
    {errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.ECONNRESET}
)
"""Errors a write to a full disk, a closed pipe or a vanished terminal raises. Reports to
files are written, and their failures said, in :mod:`evalrunner.report.write`; one of these
reaching the command line failed on a standard stream."""


class _CommandGroup(TyperGroup):
    """A command group whose errors read as every other problem of evalrunner's does.

    A usage error (an unknown option, a bad value, a missing argument) becomes one
    ``where: message (see COMMAND --help)`` line on stderr and exit code 2, instead of
    typer's panel; a failed write to a standard stream becomes :class:`_OutputFailed`, so
    that it is not taken for a failed case (exit 1). Both happen here, in the group that
    parses and invokes, so the console script and typer's test runner behave alike.
    """

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        # --help and --version write while the arguments are parsed.
        with _output_failures_distinct(), _usage_errors_said(None):
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with _output_failures_distinct(), _usage_errors_said(ctx):
            return super().invoke(ctx)


@contextlib.contextmanager
def _output_failures_distinct() -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        if exc.errno in _OUTPUT_FAILURES:
            raise _OutputFailed(exc) from exc
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


# Plain help (no rich markup): the formatter joins a docstring's lines into paragraphs and
# wraps them at the terminal's width (not capped at 80 columns), and a flag shows no value
# placeholder beside it.
_HELP_SETTINGS = {"max_content_width": 10_000}
app = typer.Typer(
    cls=_CommandGroup,
    context_settings=_HELP_SETTINGS,
    name="evalrunner",
    help="Replay scripted agent fixtures through a real agent loop and grade the run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
schema_app = typer.Typer(
    cls=_CommandGroup,
    help="The published JSON Schemas.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(schema_app, name="schema")
cache_app = typer.Typer(
    cls=_CommandGroup,
    help="The admission cache (.evalrunner_cache/ beside the config file).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(cache_app, name="cache")


class ReportFormat(StrEnum):
    """Output formats of ``evalrunner run``."""

    table = "table"
    json = "json"
    github = "github"


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


def _fail(lines: list[str] | tuple[str, ...], summary: str | None = None) -> typer.Exit:
    # Messages quote fixture text, file names and agent output: escaped, each stays one line
    # and cannot forge another.
    for line in lines:
        typer.echo(printable(line), err=True)
    if summary:
        typer.echo(summary, err=True)
    return typer.Exit(EXIT_REFUSED)


def _config(
    config: Path | None,
    suite: Path | None = None,
    mode: str | None = None,
    case_timeout: float | None = None,
    agent_command: str | None = None,
    repeat: int | None = None,
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
        )
    except ConfigError as exc:
        raise _fail(exc.problems) from None


@contextmanager
def _agent_output_to_stderr() -> Iterator[None]:
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


def _emit(text: str) -> None:
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


def _color() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="Config file to use instead of discovering one."),
]


_PATHS_HELP = "Fixture files and suite directories, searched recursively (dot-directories skipped)."
PathsArgument = Annotated[
    list[Path] | None,
    typer.Argument(
        metavar="PATH",
        help=f"{_PATHS_HELP} Default: --suite, else the configured suite.",
        show_default=False,
    ),
]
RecordPathsArgument = Annotated[
    list[Path] | None,
    typer.Argument(
        metavar="PATH",
        help=f"{_PATHS_HELP} Default: the configured suite (suite_dir).",
        show_default=False,
    ),
]
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


def _selection(keyword: str | None, shard: str | None) -> "tuple[Keyword | None, Shard | None]":
    """``-k`` and ``--shard``, parsed before anything is loaded."""
    problems: list[str] = []
    parsed_keyword = parsed_shard = None
    try:
        # A blank -k selects everything, as no -k does: the run (and its report) is the same.
        blank = keyword is not None and not keyword.strip()
        if keyword is not None and not blank:
            from evalrunner.keyword_expr import parse_keyword  # only a run given -k needs it

            parsed_keyword = parse_keyword(keyword)
    except SelectionError as exc:
        problems.append(str(exc))
    try:
        parsed_shard = None if shard is None else parse_shard(shard)
    except SelectionError as exc:
        problems.append(str(exc))
    if problems:
        raise _fail(problems)
    return parsed_keyword, parsed_shard


def _report_skipped(report: SuiteReport) -> None:
    """Under --continue-on-admission-errors: the refused files, on stderr, with positions."""
    if not report.admission_errors:
        return
    for error in report.admission_errors:
        typer.echo(printable(str(error)), err=True)
    files = len({e.path for e in report.admission_errors})
    typer.echo(
        f"--continue-on-admission-errors: {len(report.admission_errors)} problem(s) in {files} "
        f"file(s), which were skipped; the {len(report.cases)} admitted case(s) ran",
        err=True,
    )


def _exit_code(report: SuiteReport) -> int:
    """As :func:`evalrunner.report.exit_code`, but 2 when fixtures were refused and skipped:
    a run that left cases out is not a pass, whatever the cases it ran say."""
    if report.admission_errors and report.interrupted is None:
        return EXIT_REFUSED
    return exit_code(report)


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


def _cache_dir(settings: Config, no_cache: bool) -> Path | None:
    """Where this project keeps its admission cache (``None``: not used)."""
    from evalrunner.cache import CACHE_DIR_NAME

    return None if no_cache else settings.base_dir / CACHE_DIR_NAME


@app.command()
def run(
    paths: PathsArgument = None,
    suite: Annotated[
        Path | None, typer.Option("--suite", help="Suite directory (default: from config).")
    ] = None,
    keyword: KeywordOption = None,
    shard: ShardOption = None,
    keep_going: Annotated[
        bool,
        typer.Option(
            "--continue-on-admission-errors",
            help="Run the admitted cases even if some fixtures are refused; the refusals are "
            "printed and the exit code is still 2.",
        ),
    ] = False,
    mode: Annotated[str | None, typer.Option("--mode", help="replay or live.")] = None,
    no_cache: NoCacheOption = False,
    report_format: Annotated[
        ReportFormat | None,
        typer.Option(
            "--format",
            help="Report format on stdout: table, json, or github (annotations for GitHub "
            "Actions, then the table). Default: github when GITHUB_ACTIONS=true, else table.",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            metavar="FILE",
            help="Also write the report (in --format; table if not given) to FILE, atomically "
            "(a symlink is followed; a FIFO or terminal is written in place; anything else "
            "that is not a regular file is refused); stdout then shows the table.",
        ),
    ] = None,
    json_file: Annotated[
        Path | None,
        typer.Option("--json", metavar="FILE", help="Also write the JSON report to FILE."),
    ] = None,
    junit_xml: Annotated[
        Path | None,
        typer.Option(
            "--junit-xml",
            metavar="FILE",
            help="Also write a JUnit XML report to FILE (also when the run is refused).",
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Show only the failures and the summary.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show every check of every case.")
    ] = False,
    show_tracebacks: Annotated[
        bool,
        typer.Option(
            "--traceback",
            help="Under each failed case, show the full traceback of what your Python agent "
            "or tool raised.",
        ),
    ] = False,
    case_timeout: Annotated[
        float | None,
        typer.Option(
            "--case-timeout",
            metavar="SECS",
            parser=parse_seconds,
            help="Seconds one case may run before it fails as timed out (default: from config, "
            "120).",
        ),
    ] = None,
    agent_command: Annotated[
        str | None,
        typer.Option(
            "--agent-command",
            metavar="CMD",
            help="Run this command as the agent of each case, against the replay endpoint "
            "(default: from config; else the reference agent).",
        ),
    ] = None,
    jobs: Annotated[
        str,
        typer.Option(
            "--jobs",
            "-j",
            metavar="N",
            help="Run cases in N worker processes (auto: one per CPU). The report, its order "
            "and the exit code are those of a serial run.",
        ),
    ] = "1",
    repeat: RepeatOption = None,
    config: ConfigOption = None,
) -> None:
    """Run a suite: admit every fixture, replay each case, grade it, report.

    Report files (--output, --json, --junit-xml) get missing directories created before the
    run; a path that cannot be written is refused before any case runs. SIGINT (Ctrl-C) or
    SIGTERM stops the run: the finished cases are reported, the files are written (the JSON
    with "interrupted": true), and the exit code is 130 or 143.
    """
    chosen_by, slice_ = _selection(keyword, shard)
    if paths and suite is not None:
        raise _fail(["--suite: give fixture PATHs or --suite DIR, not both"])
    workers = _parse_jobs(jobs)
    verbosity = _verbosity(quiet, verbose)
    shown_format = report_format or _default_format()
    settings = _config(config, suite, mode, case_timeout, agent_command, repeat)
    try:
        run_settings = configured_settings(settings, jobs=workers)
    except PluginError as exc:
        raise _fail(exc.problems) from None
    live = _live_model(settings, workers) if settings.mode == "live" else None
    if live is not None:
        run_settings = replace(run_settings, live=live)
    sinks = {"--output": output, "--json": json_file, "--junit-xml": junit_xml}
    _prepare_sinks(sinks)
    progress = _Progress.for_stderr()
    # Standard output carries the report alone: what an in-process agent or tool prints
    # (print(), a library's logging to stdout) goes to stderr, so it can neither corrupt a
    # JSON report nor forge a line of the table or a GitHub annotation.
    from evalrunner.replay import process_exit_refused

    with _signals_stop_the_run(), progress, _agent_output_to_stderr(), process_exit_refused():
        outcome = run_suite(
            paths or settings.suite_dir,
            mode=settings.mode,
            settings=run_settings,
            keyword=chosen_by,
            shard=slice_,
            keep_going=keep_going,
            on_start=progress.start,
            on_case=progress.case_done,
            cache_dir=_cache_dir(settings, no_cache),
        )
    if live is not None:
        live.close()
    if isinstance(outcome, RunRefused):
        refused = outcome
        problems = _write_reports(
            {"--junit-xml": junit_xml}, lambda _: formats.render_junit(refused)
        )
        if shown_format is ReportFormat.github:
            _emit(formats.render_github(outcome))
        raise _fail([*outcome.lines(), *problems], _refusal_summary(outcome))
    report = replace(outcome, agent=agent_label(settings.agent, settings.agent_command))
    _report_skipped(report)

    def render(flag: str) -> str:
        if flag == "--json":
            return formats.render_json(report)
        if flag == "--junit-xml":
            return formats.render_junit(report)
        return _render(
            report,
            report_format or ReportFormat.table,
            verbosity,
            color=False,
            tracebacks=show_tracebacks,
        )

    problems = _write_reports(sinks, render)
    if output is not None and shown_format is ReportFormat.json:
        shown_format = ReportFormat.table  # the JSON went to the file; people read the table
    shown = _render(report, shown_format, verbosity, color=_color(), tracebacks=show_tracebacks)
    _emit(shown)
    if problems:
        raise _fail(problems)
    raise typer.Exit(_exit_code(report))


def _live_model(settings: Config, workers: int) -> "LiveModel":
    """The run's live model, or exit 2 saying what is missing (a model name, the httpx2
    extra, a single process). Imported here: a replay run never loads the live client."""
    from evalrunner.wire.live import start_live

    if workers > 1:
        from evalrunner.pipeline import LIVE_WITH_JOBS

        raise _fail([*settings.live.problems(), LIVE_WITH_JOBS])
    live = start_live(settings.live)
    if isinstance(live, list):
        raise _fail(live)
    return live


def _verbosity(quiet: bool, verbose: bool) -> Verbosity:
    if quiet and verbose:
        raise _fail(["-q/--quiet and -v/--verbose: they ask for opposite things; give one"])
    if quiet:
        return Verbosity.QUIET
    return Verbosity.VERBOSE if verbose else Verbosity.NORMAL


def _default_format() -> ReportFormat:
    """github under GitHub Actions (which sets GITHUB_ACTIONS=true), else table."""
    return ReportFormat.github if os.environ.get("GITHUB_ACTIONS") == "true" else ReportFormat.table


def _prepare_sinks(sinks: dict[str, Path | None]) -> None:
    """Before the run: make each report file's directory, refuse paths that cannot be written
    and two reports sent to one file (the second would silently replace the first)."""
    problems: list[str] = []
    files: dict[str, str] = {}
    for flag, path in sinks.items():
        if path is None:
            continue
        shown = printable_path(path)
        try:
            formats.prepare_output(path)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            problems.append(f"{shown}: cannot write report: {reason}")
            continue
        if os.path.exists(path) and not os.path.isfile(path):
            continue  # a FIFO or terminal: several reports may go to /dev/null
        real = os.path.realpath(path)
        if real in files:
            problems.append(
                f"{shown}: {flag} names the file {files[real]} writes; give each report its "
                "own file"
            )
        files.setdefault(real, flag)
    if problems:
        raise _fail(problems)


def _write_reports(sinks: dict[str, Path | None], render: Callable[[str], str]) -> list[str]:
    """Write each report file; the problems, one line each (the other files are written)."""
    problems = []
    for flag, path in sinks.items():
        if path is None:
            continue
        try:
            # A report half-renamed by a second Ctrl-C helps nobody; but a stream (a FIFO, a
            # terminal) has nothing to half-rename, and a reader that never reads must not
            # make the run deaf to signals.
            guard = contextlib.nullcontext() if _is_stream(path) else _signals_ignored()
            with guard:
                formats.write_atomic(path, render(flag))
        except OSError as exc:
            problems.append(f"{printable_path(path)}: cannot write report: {exc.strerror or exc}")
    return problems


class _Progress:
    """The live progress line on stderr, for a run that takes more than about a second.

    Drawn by a daemon thread four times a second, only when stderr is a terminal; erased
    before the report is printed. Nothing of it exists when stderr is a file or a pipe.
    """

    DELAY_SECS = 1.0
    PERIOD_SECS = 0.25

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._names: Sequence[str] = ()
        self._done = 0
        self._passed = 0
        self._skipped = 0
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._drawn = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_stderr(cls) -> "_Progress":
        """Enabled when stderr is a terminal (whatever stdout is)."""
        try:
            return cls(sys.stderr.isatty())
        except (AttributeError, ValueError):
            return cls(False)

    def start(self, names: Sequence[str]) -> None:
        """The run begins with these cases, in order."""
        self._names = names
        self._started = time.monotonic()
        if self._enabled and names:
            self._thread = threading.Thread(target=self._draw, name="evalrunner progress")
            self._thread.daemon = True
            self._thread.start()

    def case_done(self, report: CaseReport) -> None:
        """One more case finished (reports arrive in suite order)."""
        with self._lock:
            self._done += 1
            self._passed += report.passed
            self._skipped += report.skipped is not None

    def _draw(self) -> None:
        # Only a run on a terminal draws the line: its renderer is not imported otherwise.
        from evalrunner.report.progress import progress_line

        if self._stop.wait(self.DELAY_SECS):
            return
        while True:
            with self._lock:
                done, passed, skipped = self._done, self._passed, self._skipped
            current = self._names[done] if done < len(self._names) else None
            width = shutil.get_terminal_size((80, 24)).columns
            elapsed = time.monotonic() - self._started
            line = progress_line(
                done, len(self._names), passed, elapsed, current, width, skipped=skipped
            )
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(line)
                sys.stderr.flush()
                self._drawn = True
            if self._stop.wait(self.PERIOD_SECS):
                return

    def __enter__(self) -> "_Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
        if self._drawn:
            from evalrunner.report.progress import CLEAR  # imported already, by _draw

            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(CLEAR)
                sys.stderr.flush()


MAX_JOBS = 256


def _parse_jobs(raw: str) -> int:
    """``--jobs``: a count from 1 to :data:`MAX_JOBS`, or ``auto`` (one per CPU)."""
    text = raw.strip().lower()
    if text == "auto":
        return max(1, min(MAX_JOBS, os.cpu_count() or 1))
    if not (text.isascii() and text.isdecimal() and len(text) <= 3 and 1 <= int(text) <= MAX_JOBS):
        shown = printable(raw[:40])
        raise _fail([f"--jobs: must be a number from 1 to {MAX_JOBS}, or auto; got {shown!r}"])
    return int(text)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _raise_interrupted(signum: int, frame: object) -> None:
    raise RunInterrupted(signum)


@contextmanager
def _signals_stop_the_run() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`RunInterrupted`, which the pipeline turns into a report
    of the finished cases. Outside the main thread (embedded use) signals are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_interrupted) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _is_stream(path: Path) -> bool:
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


@contextmanager
def _signals_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _render(
    report: SuiteReport,
    report_format: ReportFormat,
    verbosity: Verbosity,
    *,
    color: bool,
    tracebacks: bool = False,
) -> str:
    if report_format is ReportFormat.json:
        return formats.render_json(report)
    if report_format is ReportFormat.github:
        return formats.render_github(report, verbosity=verbosity, tracebacks=tracebacks)
    return render_table(report, color=color, verbosity=verbosity, tracebacks=tracebacks)


def _refusal_summary(outcome: RunRefused) -> str | None:
    if not outcome.admission_errors:
        return None
    files = len({e.path for e in outcome.admission_errors})
    count = len(outcome.admission_errors)
    return f"{count} problem(s) in {files} file(s); nothing was run"


@app.command("record")
def record(
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Write the recorded fixtures here, each at its live case's path relative to "
            "its suite (directories made as needed).",
            show_default=False,
        ),
    ],
    paths: RecordPathsArgument = None,
    fixture_format: Annotated[
        FixtureFormat | None,
        typer.Option("--format", help="Format of the fixtures written (default: each case's own)."),
    ] = None,
    keyword: KeywordOption = None,
    keep_ids: Annotated[
        bool,
        typer.Option(
            "--keep-ids",
            help="Keep the live API's tool-call ids instead of renumbering them call_1, "
            "call_2, ... in the order the calls came.",
        ),
    ] = False,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace fixtures already in DIR (refused otherwise)."),
    ] = False,
    case_timeout: CaseTimeoutAsRun = None,
    agent_command: AgentCommandAsRun = None,
    config: ConfigOption = None,
) -> None:
    """Run live cases against the live model ([eval.live]) and write each as a replay fixture.

    A fixture is written only when the live run passed, and the fixture admits and replays
    green with the same agent and tools; otherwise the case's line says why. Scripted cases
    are left alone. Exit codes: 0 every live case recorded; 1 some were not; 2 nothing could
    start (config, admission, a fixture already in DIR); 3 the token budget stopped it; 130 or
    143 on SIGINT or SIGTERM (what was recorded stays written).
    """
    from evalrunner.pipeline import select_cases, suite_name
    from evalrunner.record import (
        NotRecorded,
        Provenance,
        Recorded,
        RecordSettings,
        line,
        plan_targets,
        recording_date,
    )
    from evalrunner.redact import Redactor

    chosen_by, _ = _selection(keyword, None)
    settings = _config(config, None, None, case_timeout, agent_command)
    try:
        date = recording_date(os.environ)
    except ValueError as exc:
        raise _fail([str(exc)]) from None
    try:
        run_settings = configured_settings(settings)
    except PluginError as exc:
        raise _fail(exc.problems) from None
    where = paths or [settings.suite_dir]
    selection = select_cases(where, keyword=chosen_by)
    if isinstance(selection, RunRefused):
        raise _fail(list(selection.lines()), _refusal_summary(selection))
    live_cases = [item for item in selection.cases if item.case.live]
    scripted = len(selection.cases) - len(live_cases)
    if not live_cases:
        shown = printable(suite_name([relative_to_cwd(p) for p in where]))
        raise _fail(
            [
                f"{shown}: no live case to record: its {len(selection.cases)} admitted case(s) "
                "all script their steps. A live case gives no steps in its turns (the live "
                "model answers them); name where yours are, for example "
                "evalrunner record evals/live --out evals/regression"
            ]
        )
    fmt = fixture_format.as_format() if fixture_format is not None else None
    targets = plan_targets(
        [(item.case, item.source) for item in live_cases],
        [item.case.source for item in selection.cases],
        out,
        fmt,
        overwrite,
    )
    if isinstance(targets, list):
        raise _fail(targets, "nothing was run or written")
    live = _live_model(settings, 1)
    recording = RecordSettings(
        Provenance(settings.live.wire, settings.live.model or "", date),
        Redactor(settings.record.redact),
        keep_ids=keep_ids,
    )
    try:
        outcomes, interrupted = _recordings(
            live_cases, targets, run_settings, live, recording, overwrite
        )
    finally:
        live.close()
    written = sum(isinstance(o, Recorded) for o in outcomes)
    missed = len(live_cases) - written
    tokens_in = sum(o.input_tokens for o in outcomes)
    tokens_out = sum(o.output_tokens for o in outcomes)
    skipped = f"; {scripted} scripted case(s) left alone" if scripted else ""
    # Said once the cases are done: while they run, standard output is the agents' stderr.
    _emit(
        "".join(line(outcome) + "\n" for outcome in outcomes)
        + f"recorded {written} of {len(live_cases)} live case(s) into "
        f"{printable_path(out)} ({tokens_in} input + {tokens_out} output tokens){skipped}\n"
    )
    if interrupted is not None:
        name = signal.Signals(interrupted).name
        left = len(live_cases) - len(outcomes)
        typer.echo(
            f"record interrupted by {name}: {written} fixture(s) written, each whole; "
            f"{left} live case(s) not recorded",
            err=True,
        )
        raise typer.Exit(128 + interrupted)
    if any(isinstance(o, NotRecorded) and o.budget for o in outcomes) or (
        missed and live.budget.exhausted
    ):
        typer.echo(live.budget.message(), err=True)
        raise typer.Exit(3)
    if any(isinstance(o, NotRecorded) and o.unwritable for o in outcomes):
        raise typer.Exit(EXIT_REFUSED)
    raise typer.Exit(1 if missed else 0)


def _recordings(
    live_cases: "Sequence[SelectedCase]",
    targets: "Targets",
    settings: "RunSettings",
    live: "LiveModel",
    recording: "RecordSettings",
    overwrite: bool,
) -> "tuple[list[Recorded | NotRecorded], int | None]":
    """Record each live case and write its fixture (atomically; without ``overwrite``, never
    over a file that appeared meanwhile); the outcomes in order, and the signal that stopped
    it, if one did."""
    from evalrunner.record import Recorded, record_case
    from evalrunner.replay import process_exit_refused

    outcomes: list[Recorded | NotRecorded] = []
    names = dict(targets.names)  # case name -> real path of the file that holds it
    try:
        with _signals_stop_the_run(), _agent_output_to_stderr(), process_exit_refused():
            for item, target in zip(live_cases, targets.paths, strict=True):
                outcome = record_case(
                    item.case,
                    item.source,
                    target,
                    settings=settings,
                    live=live,
                    recording=recording,
                )
                if isinstance(outcome, Recorded):
                    outcome = _written(outcome, names, overwrite)
                elif overwrite and os.path.lexists(target):
                    kept = f"{outcome.reason}; {printable_path(target)} is left as it was"
                    outcome = replace(outcome, reason=kept)
                outcomes.append(outcome)
    except RunInterrupted as stop:
        return outcomes, stop.signum
    except KeyboardInterrupt:
        return outcomes, int(signal.SIGINT)
    return outcomes, None


def _written(
    outcome: "Recorded", names: dict[str, str], overwrite: bool
) -> "Recorded | NotRecorded":
    """``outcome`` written to its target, or why it was not (a name another file of the
    output directory holds, redaction having made names alike; a file that appeared during
    the run; a write that failed)."""
    from evalrunner.record import NotRecorded

    target = outcome.target
    real = os.path.normcase(os.path.realpath(target))
    holder = names.get(outcome.name)

    def refused(reason: str, *, unwritable: bool = False) -> "NotRecorded":
        return NotRecorded(
            outcome.name,
            outcome.source,
            reason,
            input_tokens=outcome.input_tokens,
            output_tokens=outcome.output_tokens,
            unwritable=unwritable,
        )

    if holder is not None and holder != real:
        return refused(
            "its name (as written, after redaction) is already used by "
            f"{printable_path(relative_to_cwd(Path(holder)))}; two cases of one name would "
            "be refused; nothing was written"
        )
    try:
        if overwrite:
            formats.write_atomic(target, outcome.text)
        else:
            formats.write_new(target, outcome.text)
    except FileExistsError:
        return refused(
            f"{printable_path(target)} appeared during the run and is left as it was; "
            "pass --overwrite to replace it"
        )
    except OSError as exc:
        return refused(
            f"{printable_path(target)}: cannot write: {exc.strerror or exc}", unwritable=True
        )
    names[outcome.name] = real
    return outcome


@app.command()
def validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Fixture files or suite directories (default: the configured suite)."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Admit fixtures without running them: exit 0 if all are admitted, else 2."""
    targets = [relative_to_cwd(p) for p in (paths or [_config(config).suite_dir])]
    try:
        loaded = load_paths(targets)
    except SuiteNotFound as exc:
        raise _fail([str(exc)]) from None
    except OSError as exc:
        shown = printable_path(str(exc.filename))
        raise _fail([f"{shown}: cannot read: {exc.strerror or exc}"]) from None
    admission = admit_suite(loaded)
    if not admission.ok:
        refused = RunRefused(admission_errors=admission.errors)
        raise _fail(refused.lines(), _refusal_summary(refused))
    typer.echo(f"{len(admission.cases)} fixture(s) admitted")


class ListFormat(StrEnum):
    """Output formats of ``evalrunner list``."""

    table = "table"
    json = "json"


@app.command("list")
def list_cases(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="PATH",
            help=f"{_PATHS_HELP} Default: the configured suite.",
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
    from evalrunner.cache import AdmissionCache
    from evalrunner.listing import render_list_json, render_list_table
    from evalrunner.pipeline import select_cases, suite_paths

    chosen_by, slice_ = _selection(keyword, shard)
    settings = _config(config)
    targets = paths or suite_paths(settings.suite_dir)
    cache_dir = _cache_dir(settings, no_cache)
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
        raise _fail(outcome.lines(), _refusal_summary(outcome))
    if list_format is ListFormat.json:
        _emit(render_list_json(outcome))
    else:
        _emit(render_list_table(outcome))


@app.command("merge")
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
    from evalrunner.merge import MergeRefused, ShardReport, merge_reports, read_report

    sinks = {"--json": json_out, "--junit-xml": junit_out}
    _prepare_sinks(sinks)
    problems: list[str] = []
    shards: list[ShardReport] = []
    for path in reports:
        try:
            shards.append(read_report(relative_to_cwd(path)))
        except MergeRefused as exc:
            problems.extend(exc.problems)
    if problems:
        raise _fail(problems, f"{len(problems)} problem(s); nothing was merged")
    try:
        merged = merge_reports(shards)
    except MergeRefused as exc:
        raise _fail(exc.problems, f"{len(exc.problems)} problem(s); nothing was merged") from None
    renderers = {"--json": formats.render_json, "--junit-xml": formats.render_junit}
    problems = _write_reports(sinks, lambda flag: renderers[flag](merged))
    _report_skipped(merged)
    _emit(render_table(merged, color=_color()))
    if problems:
        raise _fail(problems)
    raise typer.Exit(_exit_code(merged))


@app.command("mutate")
def mutate(
    suite: Annotated[
        Path | None, typer.Option("--suite", help="Suite directory (default: from config).")
    ] = None,
    path: Annotated[
        list[str] | None,
        typer.Option(
            "--path",
            help="Agent path to run the mutants on: in-process, openai, openai-responses or "
            "anthropic (repeatable; default: all four).",
        ),
    ] = None,
    stream: Annotated[
        bool, typer.Option("--stream", help="Command mutants ask for streamed responses.")
    ] = False,
    first_kill: Annotated[
        bool,
        typer.Option(
            "--first-kill", help="Stop each mutant at the first case that kills it (faster)."
        ),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Does the suite catch broken agents? Runs it against every mutant; exit 1 if one survives.

    A mutant is the reference agent, with the project's tools, and one promise broken (a
    result dropped, a call dispatched twice, an earlier turn forgotten, ...). A case that
    fails against it kills it. Cases the unmutated reference agent does not pass on a path
    kill nothing there. The configured agent and agent_command are not used: mutate tests
    the suite, not the agent.
    """
    from evalrunner.mutants import PATHS
    from evalrunner.mutation import ProjectTools, render_mutation, run_mutants

    chosen = path or list(PATHS)
    unknown = [p for p in chosen if p not in PATHS]
    if unknown:
        accepted = ", ".join(PATHS)
        raise _fail([f"--path {p!r}: not an agent path; use one of {accepted}" for p in unknown])
    settings = _config(config, suite)
    try:
        fixtures = discover(relative_to_cwd(settings.suite_dir))
        admission = admit_documents(iter_documents(fixtures))
    except SuiteNotFound as exc:
        raise _fail([str(exc)]) from None
    if not admission.ok:
        refused = RunRefused(admission_errors=admission.errors)
        raise _fail(refused.lines(), _refusal_summary(refused))
    with _signals_stop_the_run():
        try:
            report = run_mutants(
                admission.cases,
                paths=chosen,
                stream=stream,
                first_kill=first_kill,
                case_timeout=settings.case_timeout_secs,
                tools=ProjectTools(settings.tools, settings.base_dir, settings.builtin_tools),
            )
        except RunInterrupted as stop:
            raise typer.Exit(128 + stop.signum) from None
    _emit(render_mutation(report))
    raise typer.Exit(report.exit_code)


@app.command("config")
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
    settings = _config(config, suite, mode, case_timeout, agent_command, repeat)
    if settings.file is not None:
        shown = printable_path(relative_to_cwd(settings.file))
    else:
        shown = "(none found; defaults apply)"
    typer.echo(f"# config file: {shown}")
    typer.echo("[eval]")
    values = {
        "suite_dir": str(relative_to_cwd(Path(os.path.normpath(settings.suite_dir)))),
        "mode": settings.mode,
        "max_tool_iterations": settings.max_tool_iterations,
        "case_timeout_secs": settings.case_timeout_secs,
        "agent": settings.agent,
        "tools": list(settings.tools),
        "builtin_tools": settings.builtin_tools,
        "agent_command": settings.agent_command,
        "trimmed_history": settings.trimmed_history,
        "repeat": settings.repeat,
    }
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


@schema_app.command("list")
def schema_list() -> None:
    """Print each expectation kind and the $id of its schema."""
    from evalrunner.schemas import schema_tree

    kinds = schema_tree().kinds()
    width = max(len(kind) for kind in kinds)
    for kind, schema_id in kinds.items():
        typer.echo(f"{kind.ljust(width)}  {schema_id}")


# --- the fixture toolbox: schema export, new, convert ------------------------------------------
# Their modules are imported inside each command: only these commands need them, so `run`
# does not pay for loading them.


@schema_app.command("export")
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
    from evalrunner.export import export_files, wiring, write_export

    files = export_files()  # all rendered before anything is written
    try:
        write_export(directory, files)
    except OSError as exc:
        raise _fail([f"{exc.filename or directory}: cannot write: {exc.strerror or exc}"]) from None
    fixture_dir = fixtures if fixtures is not None else relative_to_cwd(_config(config).suite_dir)
    typer.echo(wiring(directory, fixture_dir, Path(".")), nl=False)


@app.command("new")
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
    from evalrunner.scaffold import ScaffoldError, file_name, scaffold, schema_reference_for

    target_dir = directory if directory is not None else relative_to_cwd(_config(config).suite_dir)
    fmt = fixture_format.as_format()
    try:
        path = target_dir / file_name(name, fmt)
        text = scaffold(name, fmt, schema_reference_for(target_dir, schema))
    except ScaffoldError as exc:
        raise _fail([f"NAME: {exc}"]) from None  # blamed on the argument, as options are
    shown = printable_path(path)
    if os.path.lexists(path):
        raise _fail([f"{shown}: already exists; choose another name or remove the file"])
    created_dir = not target_dir.exists()
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        formats.write_atomic(path, text)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the configured suite_dir
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise _fail([f"{shown}: cannot write: {reason}"]) from None
    if created_dir:
        origin = "from --dir" if directory is not None else "the configured suite_dir"
        if directory is None and _config(config).file is None:
            origin = "the default suite; no evalrunner.toml was found"
        typer.echo(f"note: created the directory {printable_path(target_dir)} ({origin})", err=True)
    schema_file = Path(os.path.normpath(target_dir / schema_reference_for(target_dir, schema)))
    if not schema_file.exists():
        typer.echo(
            f"note: the schema line points at {printable_path(schema_file)}, which does not "
            "exist yet; `evalrunner schema export DIR` writes it (editors use it to complete "
            "and check the fixture)",
            err=True,
        )
    typer.echo(f"created {shown}: fill in expects.response_contains, then run evalrunner validate")


@app.command("convert")
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
    from evalrunner.convert import ConversionError, convert
    from evalrunner.load import FIXTURE_SUFFIXES, load_document

    fmt = to.as_format()
    if output is not None and FIXTURE_SUFFIXES.get(output.suffix.lower()) != fmt:
        shown = printable_path(output)
        endings = " or ".join(sorted(s for s, f in FIXTURE_SUFFIXES.items() if f == fmt))
        raise _fail([f"{shown}: a {fmt} fixture's name must end in {endings}"])
    source = file
    if not os.path.lexists(file) and not file.is_absolute():
        in_suite = _config(config).suite_dir / file
        if os.path.lexists(in_suite):
            source = in_suite
    elif config is not None:
        _config(config)  # a --config given is read, and its problems reported, all the same
    document = load_document(relative_to_cwd(source))
    if isinstance(document, list):
        raise _fail([str(e) for e in document])
    try:
        outcome = convert(document, fmt, target_path=output)
    except ConversionError as exc:
        raise _fail([f"{exc}; nothing was written (please report this)"]) from None
    if isinstance(outcome, list):
        raise _fail([str(e) for e in outcome], "the fixture is not admitted; nothing converted")
    if output is None:
        _emit(outcome.text)
        return
    try:
        # Missing parent directories are made, as for run's report files; only once the
        # conversion has succeeded, so a refused fixture leaves nothing behind.
        formats.prepare_output(output)
        formats.write_atomic(output, outcome.text)
    except OSError as exc:
        raise _fail([f"{printable_path(output)}: cannot write: {exc.strerror or exc}"]) from None


@app.command("serve")
def serve(
    case_file: Annotated[Path, typer.Option("--case", help="The fixture whose script to serve.")],
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one).")
    ] = 0,
) -> None:
    """Serve one case's script as an OpenAI- and Anthropic-compatible endpoint on 127.0.0.1,
    for driving an agent by hand.

    Prints the URLs and the environment to give the agent, then logs each request and any
    run error to stderr. A new user message opens the next turn. It stops by itself once the
    script is consumed (every response served, every tool result back), at the first run error
    (after answering it), or on Ctrl-C; then it prints the tool calls recorded. Exit 0, or 1
    after a run error; 2 if the fixture is refused or the port cannot be bound.
    """
    from evalrunner.wire.endpoint import Exchange, ReplayEndpoint
    from evalrunner.wire.serve import exchange_line, load_case, outcome_lines, serve_case

    case = load_case(relative_to_cwd(case_file))
    if isinstance(case, list):
        raise _fail([str(e) for e in case], "the fixture is not admitted; nothing served")

    def ready(endpoint: ReplayEndpoint) -> None:
        source = printable_path(case.source)
        typer.echo(f"serving {case.name!r} from {source} on {endpoint.base_url}")
        typer.echo(f"  OpenAI chat completions: POST {endpoint.openai_base_url}/chat/completions")
        typer.echo(f"  OpenAI Responses:        POST {endpoint.openai_base_url}/responses")
        typer.echo(f"  Anthropic messages:      POST {endpoint.base_url}/v1/messages")
        typer.echo("environment for the agent:")
        for key, value in endpoint.agent_environment().items():
            typer.echo(f"  export {key}={value}")
        if case.expects.all_tools_succeeded is not None:
            typer.echo(
                "note: this case asserts all_tools_succeeded, which an agent on either OpenAI "
                "wire cannot report; `run` refuses that, serve grades nothing and serves it",
                err=True,
            )
        typer.echo("stops once the script is consumed, at a run error, or on Ctrl-C", err=True)

    def logged(exchange: Exchange) -> None:
        typer.echo(exchange_line(exchange), err=True)

    try:
        outcome = serve_case(case, port=port, on_ready=ready, on_exchange=logged)
    except OSError as exc:
        raise _fail([f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}"]) from None
    for line in outcome_lines(outcome):
        typer.echo(line, err=True)
    raise typer.Exit(1 if outcome.error is not None else 0)


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
    if sys.stdout is None:  # started with stdout closed (`>&-`): nowhere for a verdict
        with contextlib.suppress(OSError, AttributeError):
            typer.echo(
                "evalrunner: standard output is closed; point it somewhere (a file, or "
                "/dev/null) and run it again",
                err=True,
            )
        raise SystemExit(EXIT_REFUSED)
    try:
        try:
            app(prog_name="evalrunner")
        finally:
            # What is still buffered (a short --help) must reach its reader too.
            with _output_failures_distinct():
                sys.stdout.flush()
    except KeyboardInterrupt:  # before the run's own signal handling is in place
        raise SystemExit(130) from None
    except _OutputFailed as failed:
        # The verdict could not be delivered: a refusal (2), never a pass or a fail. A reader
        # that closed the pipe (`| head`) left on purpose and hears nothing more.
        _silence_stdout()
        if failed.error.errno != errno.EPIPE:
            with contextlib.suppress(OSError):
                typer.echo(f"evalrunner: cannot write its output: {failed}", err=True)
        raise SystemExit(EXIT_REFUSED) from None


def _silence_stdout() -> None:
    """Point standard output at the null device, so that the interpreter's own flush at exit
    does not print a second complaint about it."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())


@cache_app.command("clear")
def cache_clear(config: ConfigOption = None) -> None:
    """Remove the admission cache of this project; the next run admits every fixture afresh.

    A directory of that name that evalrunner did not make is left alone (exit 2).
    """
    from evalrunner.cache import clear

    directory = _cache_dir(_config(config), no_cache=False)
    assert directory is not None
    shown = printable_path(relative_to_cwd(directory))
    try:
        removed = clear(directory)
    except ValueError as exc:
        raise _fail([f"{shown}: not removed: {exc}"]) from None
    except OSError as exc:
        raise _fail([f"{shown}: cannot remove: {exc.strerror or exc}"]) from None
    typer.echo(f"removed {shown}" if removed else f"no cache at {shown}; nothing to remove")
