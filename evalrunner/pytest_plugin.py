"""The pytest plugin: ``pytest --evalrunner [PATH ...]`` runs fixtures as test items.

It is registered through the ``pytest11`` entry point, so every pytest run in an environment
with evalrunner installed loads it. Without ``--evalrunner`` it only adds its options: the
collection hooks live on :class:`EvalrunnerSession`, which is registered when the flag is
given, and the pipeline (schemas, YAML, HTTP) is imported then too. Importing this module
costs nothing beyond pytest itself.

With the flag:

- fixture files named on the command line, and fixture files under directories named on it,
  are collected, one test item per case, named by the case's name;
- when no path on the command line is or holds a fixture, the configured suite (from
  ``evalrunner.toml`` or ``pyproject.toml``, as for ``evalrunner run``) is collected after
  whatever pytest collects itself;
- the configuration's agent, tools, ``agent_command``, case timeout and ``trimmed_history``
  apply, as for ``evalrunner run``;
- in live mode (``mode = "live"`` in config, ``EVALRUNNER_MODE=live`` or
  ``--evalrunner-mode live``), live cases run against the ``[eval.live]`` model and scripted
  cases are skipped, as ``evalrunner run --mode live`` does; the run is one process (``-n``
  is refused, so the token budget is one), and a case the spent budget kept from running
  fails, since it was not run;
- a refused fixture is a collection error listing every problem as ``path:line:col: message``;
  a case name used by two files is refused in the second, as ``run`` refuses it;
- a failed case shows its failed checks, and a case whose run errored shows the run error.

Each item's outcome is the run core's verdict for its case
(:func:`evalrunner.session.case_verdict`), never one of the plugin's own: ``repeat`` from the
config runs it that many times (a flaky case fails), an agent or tool that calls ``os._exit``
fails its case as a run error (pytest still writes its summary and ``--junitxml``), as does
one that ends its process in a way no refusal stops (``ctypes``' ``_exit``, ``exec``, a
signal: the project's own agent and tools run in one forked worker that the session
supervises, :class:`evalrunner.execution.Supervised`), and a run
whose every case was skipped fails (exit 1), since it graded nothing, as ``run`` fails it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from evalrunner.config import Config
    from evalrunner.execution import RunSettings, Supervised
    from evalrunner.live.provider import LiveModel
    from evalrunner.model import Case, CaseReport, SuiteReport

ENABLE_FLAG = "--evalrunner"
MARKER = "evalrunner"
PLUGIN_NAME = "evalrunner-session"
LATE_EXITS_KEY = "evalrunner_late_exits"
LATE_EXIT_NODEID = "evalrunner::late-exit"
"""The failed test that stands for what ended a process of the run outside every case."""
"""An xdist worker's ``workeroutput`` key for its refused ``os._exit`` calls outside every
case (:mod:`evalrunner.process_exit`)."""

FIXTURE_SUFFIXES = (".json", ".yaml", ".yml", ".toml")
"""The endings of fixture files: :data:`evalrunner.fixture.load.FIXTURE_SUFFIXES`, repeated here so
that deciding whether a file is ours imports nothing (a test holds the two together)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--evalrunner`` flag and the run options it shares with ``evalrunner run``."""
    group = parser.getgroup("evalrunner", "evalrunner fixtures as test items")
    group.addoption(
        ENABLE_FLAG,
        action="store_true",
        default=False,
        help="Collect evalrunner fixtures (.json, .yaml, .yml, .toml) named on the command "
        "line or under directories named on it, one test per case; with no such path, the "
        "configured suite.",
    )
    group.addoption(
        "--evalrunner-config",
        metavar="FILE",
        default=None,
        help="With --evalrunner: the config file to use instead of discovering one (as "
        "evalrunner run --config).",
    )
    group.addoption(
        "--evalrunner-agent-command",
        metavar="CMD",
        default=None,
        help="With --evalrunner: run this command as the agent of each case (as evalrunner "
        "run --agent-command).",
    )
    group.addoption(
        "--evalrunner-mode",
        metavar="MODE",
        default=None,
        help="With --evalrunner: replay or live (as evalrunner run --mode; default: from "
        "config). Live mode needs [eval.live] and runs in one process (no -n).",
    )
    group.addoption(
        "--evalrunner-case-timeout",
        metavar="SECS",
        type=_seconds,
        default=None,
        help="With --evalrunner: seconds one case may run before it fails as timed out (as "
        "evalrunner run --case-timeout).",
    )


def _seconds(text: str) -> float:
    """``--evalrunner-case-timeout``'s value, read as ``evalrunner run`` reads its flag."""
    import argparse

    from evalrunner.config import parse_seconds

    try:
        return parse_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def pytest_configure(config: pytest.Config) -> None:
    """With ``--evalrunner``, set up the session: configuration, agent and what to collect.

    Problems with the configuration or the configured agent are usage errors, reported as
    ``evalrunner run`` reports them, before anything is collected.
    """
    if not config.getoption(ENABLE_FLAG):
        return
    if config.getoption("help", False):
        return  # `pytest --evalrunner --help` shows the help, whatever the config holds
    config.addinivalue_line("markers", f"{MARKER}: a case from an evalrunner fixture")
    from evalrunner.process_exit import refuse_for_life
    from evalrunner.session import late_exits_taken

    # This session runs cases: from the import of the configured agent on, until the process
    # exits (atexit hooks, daemon threads that outlived their case), an os._exit of theirs
    # is refused, and pytest's exit code and summary stay its own (evalrunner.process_exit).
    refuse_for_life()
    late_exits_taken()  # what an earlier run in this process left (pytester, inline): not ours
    session = EvalrunnerSession(config)
    config.stash[_SESSION] = session
    config.pluginmanager.register(session, PLUGIN_NAME)


PYTEST_LIVE_WITH_WORKERS = (
    "live mode runs its cases in one pytest process, so that max_total_tokens is one budget "
    "for the whole run; leave out -n/--numprocesses and --tx"
)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Close the live model's connections, if a live session opened one."""
    session = config.stash.get(_SESSION, None)
    if session is not None and session.settings.live is not None:
        session.settings.live.close()


class EvalrunnerSession:
    """The plugin's state for one pytest run: run settings, fixture roots, names seen."""

    def __init__(self, config: pytest.Config) -> None:
        from evalrunner.config import ConfigError, load_config
        from evalrunner.plugins import PluginError
        from evalrunner.session import settings_from_config

        self.config = config
        self.cwd = config.invocation_params.dir
        timeout = config.getoption("--evalrunner-case-timeout")
        given_config = config.getoption("--evalrunner-config")
        try:
            loaded = load_config(
                config_file=Path(given_config) if given_config is not None else None,
                cwd=self.cwd,
                env=os.environ,
                case_timeout_secs=timeout,
                agent_command=config.getoption("--evalrunner-agent-command"),
                mode=config.getoption("--evalrunner-mode"),
            )
            self.settings: RunSettings = settings_from_config(loaded)
        except (ConfigError, PluginError) as exc:
            raise pytest.UsageError(_lines(exc.problems)) from None
        if loaded.mode == "live":
            self.settings = replace(self.settings, live=self._live(config, loaded))
        self.roots = self._explicit_roots()
        # With no fixture named on the command line, the configured suite's files, as
        # `evalrunner run` finds them; they are collected after pytest's own collection.
        self.suite_files: list[Path] = []
        if not self.roots:
            self.suite_files = self._suite_files(loaded.suite_dir)
        # Case name -> the file that used it first (names are unique in a suite, as in `run`).
        self.names: dict[str, str] = {}
        # Real paths of the fixture files and directories collected so far: a file or
        # directory reached twice through links is collected once, as `evalrunner run` does.
        self.seen: set[str] = set()
        # Real path of each fixture file collected -> the path it was first collected by.
        self.files: dict[str, Path] = {}
        # (node id, "passed" / "failed" / "skipped") of each case run, in the order reported.
        self.outcomes: list[tuple[str, str]] = []
        # The statuses of os._exit calls refused outside every case, taken at the end.
        self.late_exits: list[str] = []
        # threading.excepthook as the session found it, and the plugin's own put on top.
        self.thread_hooks: tuple[Callable[[threading.ExceptHookArgs], object], ...] = ()
        # The forked worker that runs the cases when the project's own code would run here
        # (RunSettings.supervised), made at the first case if at all.
        self.supervised: Supervised | None = None
        self.supervision_decided = False

    def supervisor(self, session: pytest.Session) -> Supervised | None:
        """The worker that runs this session's cases (:class:`evalrunner.execution.Supervised`):
        an agent or tool that ends its process (``ctypes``' ``_exit``, ``exec``, a signal, a
        crash) fails its case, and pytest still writes its summary and ``--junitxml``. None
        when the cases run here: evalrunner's own code only, live mode, or no fork."""
        if not self.supervision_decided:
            from evalrunner.execution import Supervised, can_fork

            self.supervision_decided = True
            if self.settings.supervised and self.settings.live is None and can_fork():
                cases = [item.case for item in session.items if isinstance(item, EvalItem)]
                self.supervised = Supervised(cases, self.settings)
        return self.supervised

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, None, None]:
        """Once the items ran (or were stopped), end the worker that ran them, taking what it
        refused outside every case: before the session's verdict, which that fails."""
        try:
            yield
        finally:
            if self.supervised is not None:
                self.supervised.close()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """A thread that ends on a refused ``os._exit`` says so in one line, as under
        ``evalrunner run``: pytest's own thread hook (installed at its configure, over
        evalrunner's) would turn it into a warning with evalrunner's internal traceback,
        while the attempt is already its case's run error."""
        from evalrunner.process_exit import said_thread_exit

        underneath = threading.excepthook

        def hook(args: threading.ExceptHookArgs) -> None:
            if not said_thread_exit(args):
                underneath(args)

        self.thread_hooks = (underneath, hook)
        threading.excepthook = hook

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each case's outcome (also those xdist workers report), for the run's
        verdict at the end."""
        if report.when == "call" and MARKER in report.keywords:
            self.outcomes.append((report.nodeid, report.outcome))

    def verdict(self) -> SuiteReport:
        """The run as the run core sees it: each case's outcome, and what ended a process of
        the run outside its cases; its exit code is the core's
        (:func:`evalrunner.session.run_exit_code`), never one the plugin derives."""
        from evalrunner.model import CaseReport, SuiteReport

        cases = tuple(
            CaseReport(
                name=nodeid,
                source="",
                case_class=None,
                grades=(),
                error=None if outcome != "failed" else outcome,
                skipped=outcome if outcome == "skipped" else None,
            )
            for nodeid, outcome in self.outcomes
        )
        return SuiteReport(suite="", mode="", cases=cases, late_exits=tuple(self.late_exits))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """A run the core does not pass fails (exit 1): one that graded nothing, or one whose
        process something ended outside its cases, as ``evalrunner run`` fails it. An xdist
        worker leaves the verdict to the controller, which hears every case."""
        from evalrunner.session import late_exits_taken, run_exit_code

        if self.thread_hooks and threading.excepthook is self.thread_hooks[1]:
            threading.excepthook = self.thread_hooks[0]  # for pytest's cleanup to undo its own
        # An os._exit refused outside every case (a thread that outlived its case): no item
        # carries it. An xdist worker hands its own to the controller (pytest_testnodedown),
        # whose exit code is the run's.
        self.late_exits = [*self.late_exits, *late_exits_taken()]
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[LATE_EXITS_KEY] = list(self.late_exits)
        if hasattr(self.config, "workerinput"):
            return
        if self.late_exits:
            self._report_late_exits()
        if session.exitstatus == pytest.ExitCode.OK and run_exit_code(self.verdict()) != 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _report_late_exits(self) -> None:
        """A failed report of its own for what ended a process outside every case: no item
        carries it, and a CI system reading ``--junitxml`` or pytest's counts would otherwise
        see every test pass. Sent through ``pytest_runtest_logreport`` as pytest-xdist sends
        its workers' reports; before junitxml writes its file (this hook runs first)."""
        from evalrunner.report.outcome import late_exits

        said = late_exits(self.verdict())
        report = pytest.TestReport(
            nodeid=LATE_EXIT_NODEID,
            location=("evalrunner", None, "late exit"),
            keywords={},
            outcome="failed",
            longrepr=f"evalrunner: {said}",
            when="call",
        )
        self.config.hook.pytest_runtest_logreport(report=report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist's controller: a worker's refused os._exit calls outside every case
        (handed over in its ``workeroutput``) fail the run here, where its exit code is
        decided."""
        output = getattr(node, "workeroutput", None) or {}
        self.late_exits.extend(str(item) for item in output.get(LATE_EXITS_KEY, ()))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """Say why the run failed where no item says it: it graded nothing, or something
        ended a process of the run outside its cases."""
        from evalrunner.report.outcome import late_exits
        from evalrunner.session import GRADED_NOTHING, graded_nothing

        if hasattr(self.config, "workerinput"):
            return  # the controller says it, for the whole run
        verdict = self.verdict()
        late = late_exits(verdict)
        if late is not None:
            terminalreporter.write_line(f"evalrunner: {late}", red=True)
        if graded_nothing(verdict):
            terminalreporter.write_line(f"evalrunner: {GRADED_NOTHING}", red=True)

    @staticmethod
    def _live(config: pytest.Config, loaded: Config) -> LiveModel:
        from evalrunner.live.provider import start_live

        option = config.option
        # pytest-xdist spreads tests with -n, or with --tx (and --dist); a worker is refused
        # too, should the controller not have been.
        workers = getattr(option, "numprocesses", None) or getattr(option, "tx", None)
        if workers or hasattr(config, "workerinput"):
            raise pytest.UsageError(_lines([PYTEST_LIVE_WITH_WORKERS]))
        live = start_live(loaded.live)
        if isinstance(live, list):
            raise pytest.UsageError(_lines(live))
        return live

    def _under_roots(self, path: Path) -> bool:
        return any(path == root or root in path.parents for root in self.roots)

    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        """Skip a directory under a fixture root that was already searched by another link
        to it, or that is a link back up the tree (which pytest would follow until the
        system refuses the path as too long)."""
        if not collection_path.is_dir() or not self._under_roots(collection_path):
            return None
        real = os.path.realpath(collection_path)
        if collection_path.is_symlink():
            parent = os.path.realpath(collection_path.parent)
            if parent == real or parent.startswith(real.rstrip(os.sep) + os.sep):
                return True
        if real in self.seen:
            return True
        self.seen.add(real)
        return None

    def _explicit_roots(self) -> list[Path]:
        """The fixture files named on the command line and the directories named on it, if
        any of them is or holds a fixture; else none.

        Paths pytest found by itself (``testpaths``, the working directory) are never
        searched for fixtures: a project's ``pyproject.toml`` or test data is not a case.
        """
        explicit: list[Path] = []
        if self.config.args_source is pytest.Config.ArgsSource.ARGS:
            for arg in self.config.args:
                # pytest arguments may name a node: path::case
                path = _absolute(self.cwd / arg.split("::", 1)[0])
                if path.is_dir() or (_is_fixture_name(path.name) and os.path.lexists(path)):
                    explicit.append(path)
        return explicit if any(_holds_fixtures(path) for path in explicit) else []

    def _suite_files(self, suite_dir: Path) -> list[Path]:
        """The configured suite's fixtures; a missing or empty suite is a usage error, worded
        as ``run`` words it."""
        from evalrunner.fixture.load import SuiteNotFound, discover, relative_to_cwd
        from evalrunner.text import printable_path

        shown = relative_to_cwd(suite_dir)
        try:
            return [_absolute(path) for path in discover(shown)]
        except SuiteNotFound as exc:
            raise pytest.UsageError(_lines([str(exc)])) from None
        except OSError as exc:
            reason = exc.strerror or exc
            message = f"{printable_path(shown)}: cannot read suite directory: {reason}"
            raise pytest.UsageError(_lines([message])) from None

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> EvalFile | None:
        """A fixture file under a directory named on the command line (or named there
        itself) becomes an :class:`EvalFile`."""
        if not _is_fixture_name(file_path.name):
            return None
        if not self._under_roots(file_path):
            return None
        # One file reached by two paths (a link) is collected once. The same path is collected
        # again: pytest collects a directory anew for each argument that names a file in it.
        first = self.files.setdefault(os.path.realpath(file_path), file_path)
        if first != file_path:
            return None
        return _eval_file(parent, file_path)

    @pytest.hookimpl(tryfirst=True)  # before -k, -m and --deselect choose among the items
    def pytest_collection_modifyitems(
        self, session: pytest.Session, items: list[pytest.Item]
    ) -> None:
        """The configured suite's cases, after the items pytest collected.

        Not by adding the suite to pytest's arguments: arguments that overlap (``.`` and
        ``evals/regression`` below it) lose items on pytest 8 and 9, and a suite under a
        directory pytest skips (``build``, dot directories) would not be walked.
        """
        for path in self.suite_files:
            items.extend(session.genitems(_eval_file(session, path)))
        for path in self._unreadable_fixtures():
            items.extend(session.genitems(_eval_file(session, path)))

    def _unreadable_fixtures(self) -> list[Path]:
        """Fixture names under the roots that pytest never offers to collect, because they
        lead nowhere (a dangling link, a loop of links): `evalrunner run` refuses them, so
        here they are collected too, to be refused as collection errors."""
        from evalrunner.fixture.load import find_fixtures

        try:
            fixtures = find_fixtures(self.roots)
        except (OSError, ValueError):
            return []  # the roots themselves are pytest's to complain about
        return [
            _absolute(fixture.path)
            for fixture in fixtures
            if os.path.lexists(fixture.path) and not os.path.exists(fixture.path)
        ]

    def admit(self, file_path: Path) -> tuple[Case, int | None] | list[str]:
        """The case of one fixture and the 0-based line of its name, or every problem with it,
        one ``path:line:col: message`` line each."""
        from evalrunner.fixture.admit import admit
        from evalrunner.fixture.load import RawDocument, load_document, relative_to_cwd
        from evalrunner.model import Case
        from evalrunner.text import printable

        # Relative to the working directory, so messages name files as `evalrunner run` does.
        document = load_document(relative_to_cwd(file_path))
        if not isinstance(document, RawDocument):
            return [printable(str(error)) for error in document]
        outcome = admit(document)
        if not isinstance(outcome, Case):
            return [printable(str(error)) for error in outcome]
        data = document.data
        key = "model_name" if isinstance(data, dict) and "model_name" in data else "name"
        shown = document.display_path
        first = self.names.setdefault(outcome.name, shown)
        if first != shown:
            name = json.dumps(outcome.name, ensure_ascii=False)
            duplicate = document.error(
                f"case name {name} is already used by {first}; names must be unique in a suite",
                (key,),
            )
            return [printable(str(duplicate))]
        spot = document.source_map.locate((key,), key=True)
        return outcome, (spot[0] - 1 if spot is not None else None)


_SESSION = pytest.StashKey[EvalrunnerSession]()


# Library messages blame the command line's flags; here the same values come from these.
_OUR_FLAGS = {
    "--case-timeout": "--evalrunner-case-timeout",
    "--agent-command": "--evalrunner-agent-command",
    "--config": "--evalrunner-config",
}


def _lines(problems: list[str]) -> str:
    """A usage error's text: each problem on its own line, the first saying whose it is."""
    from evalrunner.text import printable

    lines = []
    for problem in problems:
        flag, colon, rest = problem.partition(":")
        if colon and flag in _OUR_FLAGS:
            problem = _OUR_FLAGS[flag] + colon + rest
        # Messages quote file names and fixture text: escaped, each stays one line.
        lines.append(printable(problem))
    return "evalrunner: " + "\n".join(lines)


def _absolute(path: Path) -> Path:
    # As pytest makes its paths absolute: ``..`` folded, symlinks kept, so they compare equal.
    return Path(os.path.abspath(path))


def _is_fixture_name(name: str) -> bool:
    # As evalrunner.fixture.load's: exported JSON Schemas (*.schema.json) are not fixtures.
    return (
        not name.startswith(".")
        and not name.lower().endswith(".schema.json")
        and os.path.splitext(name)[1].lower() in FIXTURE_SUFFIXES
    )


def _holds_fixtures(path: Path) -> bool:
    """Whether ``path`` is a fixture file or a directory with one somewhere below it (dot
    directories skipped, as pytest skips them)."""
    if not path.is_dir():
        return _is_fixture_name(path.name)
    for _, directories, files in os.walk(path):
        directories[:] = [d for d in directories if not d.startswith(".")]
        if any(_is_fixture_name(name) for name in files):
            return True
    return False


def _eval_file(parent: pytest.Session | pytest.Collector, path: Path) -> EvalFile:
    """The collector of one fixture file.

    A file name that is not UTF-8, or holds a control character, would go into node ids raw:
    pytest's terminal, cache and JUnit writers then crash on its bytes, or print lines the
    name forges. Such a file gets escaped ids (``caf\\xe9.yaml``), as in evalrunner's reports.
    A file collected for the configured suite hangs from the session, named and identified by
    its path from the root directory, as pytest names a file given as an argument.
    """
    from evalrunner.text import printable_path

    rootpath = parent.config.rootpath
    name = os.path.relpath(path, parent.path).replace(os.sep, "/")
    nodeid = os.path.relpath(path, rootpath).replace(os.sep, "/")
    if printable_path(name) == name and not isinstance(parent, pytest.Session):
        return EvalFile.from_parent(parent, path=path)
    return EvalFile.from_parent(
        parent, path=path, name=printable_path(name), nodeid=printable_path(nodeid)
    )


class EvalFile(pytest.File):
    """One fixture file: one case, or a collection error naming every problem."""

    def collect(self) -> Iterator[EvalItem]:
        """The file's case, admitted as ``evalrunner run`` admits it."""
        outcome = self.config.stash[_SESSION].admit(self.path)
        if isinstance(outcome, list):
            raise self.CollectError("\n".join(outcome))
        case, line = outcome
        yield EvalItem.from_parent(self, name=case.name, case=case, line=line)


class CaseFailed(Exception):
    """A case failed a check or its run errored; ``report`` says which and why."""

    def __init__(self, report: CaseReport) -> None:
        super().__init__(report.name)
        self.report = report


class EvalItem(pytest.Item):
    """One case: replayed through the configured agent and graded when the item runs."""

    def __init__(self, *, case: Case, line: int | None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.case = case
        self.line = line
        self.add_marker(MARKER)
        if case.case_class is not None:
            # -k positive / -k negative select by class, as `evalrunner run -k` does.
            self.extra_keyword_matches.add(case.case_class)
        # -k "regression/" selects by the fixture's path, as `evalrunner run -k` does.
        where = os.path.relpath(self.path, self.config.invocation_params.dir)
        self.extra_keyword_matches.add(where.replace(os.sep, "/"))

    def runtest(self) -> None:
        """Replay (or in live mode, run live) and grade the case; raise :class:`CaseFailed`
        unless it passed."""
        from evalrunner.execution import BUDGET_SKIPS
        from evalrunner.session import case_verdict

        plugin = self.config.stash[_SESSION]
        report = case_verdict(self.case, plugin.settings, plugin.supervisor(self.session))
        if report.skipped in BUDGET_SKIPS:
            pytest.fail(report.skipped, pytrace=False)  # not run is not a pass, nor a skip
        if report.skipped is not None:
            # The other mode's kind of case: reported as skipped, never as a pass.
            pytest.skip(report.skipped)
        if not report.passed:
            raise CaseFailed(report)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: str | None = None,
    ) -> Any:  # str, or what pytest's TerminalRepr is to it (not exported: see CaseFailureRepr)
        """The failed checks and the run error, not a traceback into evalrunner."""
        if isinstance(excinfo.value, CaseFailed):
            verbose = int(self.config.getoption("verbose", 0)) > 0
            # The agent's own tracebacks, as pytest shows a test's, unless --tb asks for less.
            tracebacks = self.config.getoption("tbstyle", "auto") not in ("line", "no")
            report = excinfo.value.report
            text = describe_failure(report, verbose=verbose, tracebacks=tracebacks)
            path, line, _ = self.reportinfo()
            shown = os.path.relpath(path, self.config.invocation_params.dir)
            return CaseFailureRepr(text, shown, line)
        return super().repr_failure(excinfo, style)  # type: ignore[arg-type]

    def reportinfo(self) -> tuple[os.PathLike[str] | str, int | None, str]:
        """The fixture (escaped, as in node ids), the line of the case's name, and a heading
        for reports."""
        from evalrunner.text import printable_path

        return printable_path(self.path), self.line, f"evalrunner case: {self.name}"


class _Lines(Protocol):
    """The part of pytest's terminal writer a failure's text is written with."""

    def line(self, s: str = "", **markup: bool) -> None: ...


class CrashLine:
    """``path:line: message``: where a case failed, and what failed."""

    def __init__(self, path: str, lineno: int, message: str) -> None:
        self.path, self.lineno, self.message = path, lineno, message

    def __str__(self) -> str:
        first = self.message.splitlines()[0] if self.message else ""
        return f"{self.path}:{self.lineno}: {first}"

    def toterminal(self, tw: _Lines) -> None:
        """The one line."""
        tw.line(str(self))


class CaseFailureRepr:
    """A failed case as pytest shows it, with a crash line (``path:line: first line``) for
    ``--tb=line``, the short summary and a JUnit file's failure message, instead of the first
    50 characters of the text.

    pytest does not export its ``TerminalRepr``; what it reads from a failure's
    representation is ``toterminal``, ``str()`` and ``reprcrash`` (``str()`` and
    ``message``), which this class gives it without importing pytest's private modules.
    """

    def __init__(self, text: str, path: str, line: int | None) -> None:
        self.text = text
        # The whole text: --tb=line and the short summary show its first line, and a JUnit
        # file's failure message carries all of it.
        self.reprcrash = CrashLine(path, (line or 0) + 1, text)

    def __str__(self) -> str:
        return self.text

    def toterminal(self, tw: _Lines) -> None:
        """Each line of the text."""
        for row in self.text.splitlines():
            tw.line(row)


def describe_failure(report: CaseReport, *, verbose: bool = False, tracebacks: bool = False) -> str:
    """A failed case as pytest shows it: how many checks failed, then each failed check
    (every check when ``verbose``) with its detail, or the run error; with ``tracebacks``,
    then what the agent or its tools raised. The first line is what pytest's short summary
    shows. Text from outside is escaped line by line."""
    from evalrunner.text import printable

    text = _describe_checks(report, verbose=verbose)
    if tracebacks:
        for trace in report.tracebacks:
            rows = trace.rstrip().splitlines()
            text += "\n\nraised in the agent or its tools:\n"
            text += "\n".join(f"    {printable(row)}" for row in rows)
    return text


def _describe_checks(report: CaseReport, *, verbose: bool) -> str:
    from evalrunner.text import printable

    if report.error is not None:
        first, *rest = report.error.splitlines() or [""]
        if report.runs:
            passes = sum(1 for run in report.runs if run.passed)
            first = f"passed {passes} of {len(report.runs)} runs; its first failed run: {first}"
        return "\n".join(
            [f"run error: {printable(first)}", *(f"    {printable(line)}" for line in rest)]
        )
    failed = sum(1 for grade in report.grades if not grade.passed)
    lines = [f"{failed} of {len(report.grades)} checks failed"]
    if report.runs:
        passes = sum(1 for run in report.runs if run.passed)
        lines[0] = (
            f"passed {passes} of {len(report.runs)} runs (flaky when some passed); its first "
            f"failed run: {lines[0]}"
        )
    for grade in report.grades:
        if grade.passed and not verbose:
            continue
        mark = "✓" if grade.passed else "✗"
        first, *rest = [printable(line) for line in grade.detail.splitlines()] or [""]
        lines.append(f"    {mark} {printable(grade.check)}" + (f": {first}" if first else ""))
        lines += [f"        {line}" for line in rest]
    return "\n".join(lines)
