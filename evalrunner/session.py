"""The run core: ``Config`` → settings → selected cases → executed runs → verdict → exit code.

Every front end is a view over this module: ``evalrunner run`` (serially, with ``-j N``, a
``--shard``), the pytest plugin, ``mutate``, ``record`` and the library's :func:`run_suite`.
What a case's verdict is (its runs repeated, skipped, errored when the agent or a tool ends
the process) and what a run's verdict and exit code are, is decided here once; how the cases
execute (serially, in worker processes, on live threads) is :mod:`evalrunner.execution`'s.
Rendering lives in :mod:`evalrunner.report`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from evalrunner.agents.reference import DEFAULT_MAX_TOOL_ITERATIONS, AgentFactory, reference_agent
from evalrunner.boundary.provider import ModelProvider
from evalrunner.boundary.tools import ToolSource
from evalrunner.execution import (
    SKIP_HALTED,
    ForkedWorkers,
    RunSettings,
    Supervised,
    can_fork,
    evaluate,
    execute,
)
from evalrunner.fixture.admit import Admission, Admitted, admit_documents
from evalrunner.fixture.cache import AdmissionCache
from evalrunner.fixture.load import (
    DEFAULT_MAX_BYTES,
    IS_A_FILE,
    Fixture,
    RawDocument,
    SuiteNotFound,
    find_fixtures,
    load_document,
    parse_document,
    read_fixture,
    relative_to_cwd,
)
from evalrunner.model import (
    AdmissionError,
    Case,
    CaseClass,
    CaseFingerprint,
    CaseReport,
    RunInterrupted,
    RunRefused,
    Shard,
    SuiteFingerprint,
    SuiteReport,
)
from evalrunner.process_exit import unclaimed
from evalrunner.repeats import combine_runs, grouped
from evalrunner.replay import process_exit_refused
from evalrunner.selection.select import case_identity, ordered, take_shard
from evalrunner.text import printable_path

if TYPE_CHECKING:
    from evalrunner.config import Config
    from evalrunner.selection.keywords import Keyword

LIVE_WITHOUT_MODEL = "live mode needs a live model: RunSettings.live is not set"
LIVE_WITH_JOBS = (
    "--jobs: live mode runs its cases in this process, so that max_total_tokens is one "
    "budget for the whole run; leave --jobs out (max_concurrency in [eval.live] runs that "
    "many live cases at once)"
)
GRADED_NOTHING = (
    "graded nothing: every selected case was skipped, and a run that graded no case is not a pass"
)


def settings_from_config(config: Config, *, jobs: int = 1) -> RunSettings:
    """The run settings ``config`` selects (agent, tools, limits, ``trimmed_history``,
    ``repeat``); with jobs, each worker builds them again from ``config`` (a configured
    factory or tool need not be picklable). :class:`~evalrunner.plugins.PluginError` when
    the configured agent or tools cannot be used.

    Supervised (:attr:`RunSettings.supervised`) when the project's own code runs in this
    process: a Python ``agent``, or ``tools`` (built for every case, a command agent's
    too). The reference agent, or a command agent, with the built-in tools alone runs
    evalrunner's code only here, which ends no process, and pays no fork."""
    from evalrunner.plugins import configured_agent

    agent_factory, tools = configured_agent(config)
    return RunSettings(
        agent_factory=agent_factory,
        tools=tools,
        max_tool_iterations=config.max_tool_iterations,
        case_timeout=config.case_timeout_secs,
        trimmed_history=config.trimmed_history,
        framed_results=config.framed_results,
        jobs=jobs,
        in_worker=partial(settings_from_config, config) if jobs > 1 else None,
        repeat=config.repeat,
        supervised=config.agent is not None or bool(config.tools),
    )


def case_verdict(
    case: Case, settings: RunSettings, supervised: Supervised | None = None
) -> CaseReport:
    """One case's report as a run gives it: run ``settings.repeat`` times and combined, and
    a run error (not the end of this process) when the agent or a tool calls ``os._exit``.
    Front ends that run case by case (the pytest plugin, ``mutate``) take their verdict
    from it. A persistent agent process that served the case is ended before the verdict is
    given, so that what it does after the case ended counts (:mod:`evalrunner.execution`).

    With ``supervised`` (which holds ``case``), the runs are its worker's: one process runs
    the cases one after another, and a run that ends it (``ctypes``' ``_exit``, ``exec``, a
    signal, a crash) is the case's run error, as under ``evalrunner run``."""
    with process_exit_refused():
        if supervised is not None and supervised.holds(case):
            runs = supervised.runs(case, settings)
            if settings.repeat <= 1:
                with contextlib.closing(runs):
                    return next(runs)
            reports = grouped(runs, settings.repeat)
        else:
            reports = execute([case], settings)
        with contextlib.closing(reports):
            return next(reports)


def run_exit_code(outcome: SuiteReport | RunRefused) -> int:
    """The exit code of a run: :func:`evalrunner.report.exit_code`, but 2 when fixtures were
    refused and skipped (a run that left cases out is not a pass, whatever the cases it ran
    say)."""
    # Imported here: the report package brings its renderers, which a run's start needs not.
    from evalrunner.report.outcome import EXIT_REFUSED, exit_code

    if (
        isinstance(outcome, SuiteReport)
        and outcome.admission_errors
        and outcome.interrupted is None
    ):
        return EXIT_REFUSED
    return exit_code(outcome)


def graded_nothing(report: SuiteReport) -> bool:
    """Whether the run selected cases but graded none (every one skipped): not a pass."""
    return bool(report.cases) and report.skipped == len(report.cases)


def evaluate_case(
    case: Case,
    *,
    agent_factory: AgentFactory = reference_agent,
    tools: ToolSource | None = None,
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS,
    case_timeout: float | None = None,
    trimmed_history: bool = False,
    provider: ModelProvider | None = None,
    framed_results: bool = False,
) -> CaseReport:
    """Replay and grade one case, in its own workspace (made if the agent asks for it, and
    removed when the replay ends). ``provider`` replaces the case's script (live mode).

    A case whose run errored (or timed out) is not graded: its report carries the error and
    no grades. A live case without a ``provider`` is not run: its report says it was skipped.
    The library's shortcut for :func:`evalrunner.execution.evaluate` with these settings.
    """
    settings = RunSettings(
        agent_factory=agent_factory,
        tools=tools,
        max_tool_iterations=max_tool_iterations,
        case_timeout=case_timeout,
        trimmed_history=trimmed_history,
        framed_results=framed_results,
    )
    return evaluate(case, settings, provider)


@dataclass(frozen=True, slots=True)
class SelectedCase:
    """An admitted case a run takes, with its fixture path as the report shows it."""

    case: Case
    source: str


@dataclass(frozen=True, slots=True)
class Selection:
    """The cases a run takes, in suite order, and what chose them.

    ``selected`` counts the cases ``-k`` kept, before the shard was taken. ``admission_errors``
    holds the refused files when the run goes on without them.
    """

    suite: str
    cases: tuple[SelectedCase, ...]
    selected: int
    keyword: Keyword | None = None
    shard: Shard | None = None
    admission_errors: tuple[AdmissionError, ...] = ()
    fingerprint: SuiteFingerprint | None = None
    """With a shard: the suite the shard was dealt from (:func:`fingerprint`)."""


def suite_name(paths: Sequence[Path]) -> str:
    """What the report calls the suite: the directory (or file) run, or the paths given,
    separated by spaces."""
    return " ".join(str(path) for path in paths)


def suite_paths(suite: Path | Sequence[Path]) -> list[Path] | RunRefused:
    """The paths to run: a single path is a suite directory, and refused if it is a file (a
    list of paths may name fixture files)."""
    if not isinstance(suite, Path):
        return list(suite)
    if suite.exists() and not suite.is_dir():
        return RunRefused((f"{printable_path(relative_to_cwd(suite))}: {IS_A_FILE}",))
    return [suite]


def select_cases(
    paths: Sequence[Path],
    *,
    keyword: Keyword | None = None,
    shard: Shard | None = None,
    keep_going: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    cache: AdmissionCache | None = None,
) -> Selection | RunRefused:
    """Discover, load and admit the fixtures of ``paths``; keep the cases ``keyword`` matches
    and then the slice ``shard`` names, in suite order
    (:func:`evalrunner.selection.select.suite_order`).

    Refused (a :class:`RunRefused`) when a path cannot be read, when a file is refused and
    ``keep_going`` is false, when no case is admitted, or when ``keyword`` matches none. An
    empty shard is not refused: a suite may have fewer cases than shards.
    """
    shown = [relative_to_cwd(path) for path in paths]
    fixtures = _fixtures(shown)
    if isinstance(fixtures, RunRefused):
        return fixtures
    try:
        admission = admit_fixtures(fixtures, max_bytes=max_bytes, cache=cache)
    except OSError as exc:
        return _unreadable(exc, shown)
    if admission.errors and (not keep_going or not admission.cases):
        return RunRefused(admission_errors=admission.errors)
    sources = {fixture.path: fixture.source for fixture in fixtures}
    chosen = choose(
        [SelectedCase(case, sources[case.source]) for case in admission.cases],
        lambda item: (item.case.name, item.source, item.case.case_class),
        keyword,
        shard,
    )
    if isinstance(chosen, str):
        return RunRefused((chosen,), admission_errors=admission.errors)
    taken, kept = chosen
    return Selection(
        suite=suite_name(shown),
        cases=tuple(taken),
        selected=len(kept),
        keyword=keyword,
        shard=shard,
        admission_errors=admission.errors,
        fingerprint=None
        if shard is None
        else fingerprint(
            shown, keyword, [(item.case.name, item.source, item.case.source) for item in kept]
        ),
    )


T = TypeVar("T")


def choose(
    items: Sequence[T],
    describe: Callable[[T], tuple[str, str, CaseClass | None]],
    keyword: Keyword | None,
    shard: Shard | None,
) -> tuple[list[T], list[T]] | str:
    """The admitted ``items`` a run takes, in suite order, and those ``keyword`` kept before
    the shard was taken; or why none (``-k`` matched nothing). ``describe`` gives an item's
    case name, fixture source and class."""
    admitted = ordered(items, lambda item: describe(item)[1::-1])  # (source, name)
    kept = [item for item in admitted if keyword is None or keyword.matches(*describe(item))]
    if not kept:
        expression = keyword.shown if keyword is not None else ""
        return (
            f"-k '{expression}': no case matches, of {len(admitted)} admitted; names, "
            "fixture paths and classes are matched as case-insensitive substrings"
        )
    if shard is None:
        return kept, kept

    def identity(item: T) -> bytes:
        name, source, _ = describe(item)
        return case_identity(source, name)

    return take_shard(kept, shard, identity), kept


def fingerprint(
    paths: Sequence[Path], keyword: Keyword | None, kept: Sequence[tuple[str, str, Path]]
) -> SuiteFingerprint:
    """The fingerprint of the suite a shard is dealt from: ``kept`` holds each selected
    case's name, fixture source and the path its bytes are read from."""
    # Imported here: only a sharded run hashes, and a plain run's start stays lean.
    import hashlib

    cases = []
    for name, source, path in kept:
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:  # gone since it was admitted: a suite changing under the run
            digest = f"unreadable: {exc.strerror or exc}"
        cases.append(CaseFingerprint(name, source, digest))
    return SuiteFingerprint(
        paths=tuple(str(path) for path in paths),
        keyword=keyword.text if keyword is not None else None,
        cases=tuple(cases),
    )


def _fixtures(shown: Sequence[Path]) -> list[Fixture] | RunRefused:
    try:
        return find_fixtures(shown)
    except SuiteNotFound as exc:
        return RunRefused((str(exc),))
    except OSError as exc:
        return _unreadable(exc, shown)


def _unreadable(exc: OSError, shown: Sequence[Path]) -> RunRefused:
    where = printable_path(exc.filename if exc.filename is not None else suite_name(shown))
    return RunRefused((f"{where}: cannot read suite directory: {exc.strerror or exc}",))


def admit_with_cache(
    fixtures: Sequence[Fixture], cache: AdmissionCache, max_bytes: int
) -> Admission:
    """Admit the fixtures, taking what an earlier run admitted from the same bytes, shown by
    the same path, from ``cache``; what is admitted afresh is stored for the next run."""
    keys: dict[int, bytes] = {}

    def outcomes() -> Iterator[RawDocument | Admitted | list[AdmissionError]]:
        for fixture in fixtures:
            read = read_fixture(fixture.path, max_bytes=max_bytes)
            if isinstance(read, list):
                yield read  # unreadable: nothing to key
                continue
            raw, fmt = read
            key = cache.key(os.fspath(fixture.path), raw)
            known = cache.lookup(key)
            if isinstance(known, Case) and known.source != fixture.path:
                known = None  # not what this file admits to: admitted afresh
            if isinstance(known, Case):
                yield Admitted(known, partial(load_document, fixture.path, max_bytes=max_bytes))
            elif known is not None:
                yield known
            else:
                document = parse_document(raw, fmt, fixture.path, max_bytes=max_bytes)
                if isinstance(document, list):
                    cache.store(key, document)
                else:
                    keys[id(document)] = key
                yield document

    def remember(document: RawDocument, outcome: Case | list[AdmissionError]) -> None:
        cache.store(keys.pop(id(document)), outcome)

    admission = admit_documents(outcomes(), remember=remember)
    cache.save()
    return admission


def admit_fixtures(
    fixtures: Sequence[Fixture], *, max_bytes: int, cache: AdmissionCache | None
) -> Admission:
    """Admit ``fixtures``: from ``cache`` where an earlier run admitted the same bytes
    (:func:`admit_with_cache`), otherwise afresh."""
    if cache is not None:
        return admit_with_cache(fixtures, cache, max_bytes)
    return admit_documents(load_document(fixture.path, max_bytes=max_bytes) for fixture in fixtures)


def run_suite(
    suite: Path | Sequence[Path],
    *,
    mode: str = "replay",
    agent_factory: AgentFactory = reference_agent,
    tools: ToolSource | None = None,
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS,
    case_timeout: float | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    trimmed_history: bool = False,
    jobs: int = 1,
    repeat: int = 1,
    settings: RunSettings | None = None,
    on_case: Callable[[CaseReport], None] | None = None,
    keyword: Keyword | None = None,
    shard: Shard | None = None,
    keep_going: bool = False,
    on_start: Callable[[Sequence[str]], None] | None = None,
    cache_dir: Path | None = None,
    supervised: bool = False,
) -> SuiteReport | RunRefused:
    """Load, admit, replay and grade the cases of ``suite``: a suite directory, or fixture
    files and directories (searched recursively, see :func:`evalrunner.fixture.load.discover`).

    Admission is all-or-nothing unless ``keep_going``: if any fixture is refused, no case runs
    and every problem is returned at once; with ``keep_going`` the admitted cases run and the
    report carries the refusals. ``keyword`` (``-k``) and ``shard`` (``--shard``) narrow the
    cases as :func:`select_cases` does. A :class:`RunInterrupted` (or ``KeyboardInterrupt``)
    stops the run between or during cases; the report then holds the cases that finished and
    the signal. ``settings``, when given, replaces the keyword arguments that describe the
    run; ``on_start`` is called with the names of the cases about to run, in order, and
    ``on_case`` with each case's report as it finishes (in suite order). With ``cache_dir``,
    admission outcomes are kept there between runs (:mod:`evalrunner.fixture.cache`); without it,
    as by default for library use, nothing is written. With ``repeat`` above 1 each case
    runs that many times and its report combines the runs (:mod:`evalrunner.repeats`). An
    agent or tool that calls ``os._exit`` fails its case instead of ending the process.

    The cases run in this process unless ``supervised`` (or ``settings.supervised``: the
    front ends' settings, :func:`settings_from_config`, ask for it when the project's code
    runs): a library caller's factory may be a closure that watches what its agents do,
    which a worker process would hide from it. Supervised, a serial replay runs in one
    forked worker, so that an end no refusal stops (``ctypes``' ``_exit``, ``exec``, a
    signal) cannot take the caller with it (:mod:`evalrunner.execution`).
    """
    if settings is None:
        settings = RunSettings(
            agent_factory=agent_factory,
            tools=tools,
            max_tool_iterations=max_tool_iterations,
            case_timeout=case_timeout,
            trimmed_history=trimmed_history,
            jobs=jobs,
            repeat=repeat,
            supervised=supervised,
        )
    if mode == "live" and settings.live is None:
        return RunRefused((LIVE_WITHOUT_MODEL,))
    if mode == "live" and settings.jobs > 1:
        return RunRefused((LIVE_WITH_JOBS,))
    if mode != "live":
        settings = replace(settings, live=None)
    paths = suite_paths(suite)
    if isinstance(paths, RunRefused):
        return paths
    started = time.perf_counter()
    reports: list[CaseReport] = []
    interrupted: int | None = None
    halted: str | None = None  # what stopped a live run (LiveModel.halted), as last read
    planned: _PlannedRun | RunRefused | None = None
    cache = AdmissionCache(cache_dir) if cache_dir is not None else None
    try:
        with process_exit_refused():
            # Repeats run in the pool, which deals every run to any worker: forked workers
            # run a case where it was admitted, so all K runs of a slow case would share one.
            if settings.jobs > 1 and settings.live is None and settings.repeat == 1:
                planned = _on_forked_workers(paths, settings, keyword, shard, max_bytes, cache_dir)
            if planned is None:  # serially, or the forked workers stood down: admit here
                planned = _here(
                    select_cases(
                        paths,
                        keyword=keyword,
                        shard=shard,
                        keep_going=keep_going,
                        max_bytes=max_bytes,
                        cache=cache,
                    ),
                    settings,
                )
            if isinstance(planned, RunRefused):
                return planned
            if on_start is not None:
                on_start(planned.names)
            # Closed here, not left to the garbage collector: a suspended generator keeps
            # its workers alive into interpreter exit, where CPython's own shutdown of a pool
            # races it and prints "Bad file descriptor".
            with contextlib.closing(planned.reports) as outcomes:
                for source, report in zip(planned.sources, outcomes, strict=True):
                    # The fixture path relative to its suite directory, not just the file
                    # name: two subdirectories may hold files of the same name.
                    if report.source != source:
                        report = replace(report, source=source)
                    reports.append(report)
                    if on_case is not None:
                        on_case(report)
                    if settings.live is not None:
                        halted = settings.live.halted
                    if halted is not None and report.error is not None:
                        # Every case left would meet it alike: none is run. (A case that
                        # passed while one running beside it met it is reported as it ran.)
                        break
            for report in _left_unrun(planned, reports, settings.repeat, halted):
                reports.append(report)
                if on_case is not None:
                    on_case(report)
    except RunInterrupted as stop:
        interrupted = stop.signum
    except KeyboardInterrupt:
        interrupted = int(signal.SIGINT)
    picked = planned if isinstance(planned, _PlannedRun) else None
    whole = SuiteReport(
        suite=picked.suite if picked is not None else suite_name(paths),
        mode=mode,
        cases=tuple(reports),
        duration_ms=int((time.perf_counter() - started) * 1000),
        interrupted=interrupted,
        trimmed_history=settings.trimmed_history,
        framed_results=settings.framed_results,
        keyword=picked.keyword.text if picked and picked.keyword else None,
        shard=picked.shard if picked is not None else shard,
        selected=picked.selected if picked is not None and picked.shard else None,
        admission_errors=picked.admission_errors if picked is not None else (),
        budget_spent=_budget_stop(settings, reports),
        live_stopped=halted,
        repeat=settings.repeat,
        fingerprint=picked.fingerprint if picked is not None else None,
    )
    return with_late_exits(whole)


def with_late_exits(report: SuiteReport) -> SuiteReport:
    """``report`` with what ended, or tried to end, a process of the run outside every case
    since it was last asked (:func:`evalrunner.process_exit.unclaimed`: a refused
    ``os._exit`` no case held, a ``--jobs`` worker death no case explains) added to its
    :attr:`~SuiteReport.late_exits`, which fail the run (:func:`run_exit_code`).

    :func:`run_suite` calls it as it builds its report. A front end calls it again once its
    reports are written, just before it gives its exit code: an attempt made in between (a
    daemon thread firing late) can then no longer be in the report files, but it still
    fails the run, by the same rule."""
    late = late_exits_taken()
    return replace(report, late_exits=(*report.late_exits, *late)) if late else report


def late_exits_taken() -> tuple[str, ...]:
    """What ended, or tried to end, a process of the run outside every case since this was
    last asked, taken (each is reported once); for a front end without a
    :class:`SuiteReport` (``mutate``), as :func:`with_late_exits` takes them."""
    return tuple(unclaimed())


@dataclass(frozen=True, slots=True)
class _PlannedRun:
    """The cases a run takes, by name and fixture source in suite order, with their reports
    to come (from this process, a pool, or forked workers)."""

    suite: str
    names: list[str]
    sources: list[str]
    reports: Generator[CaseReport, None, None]
    selected: int
    keyword: Keyword | None
    shard: Shard | None
    admission_errors: tuple[AdmissionError, ...] = ()
    fingerprint: SuiteFingerprint | None = None


def _here(selection: Selection | RunRefused, settings: RunSettings) -> _PlannedRun | RunRefused:
    """The selected cases, run by :func:`~evalrunner.execution.execute` from this process
    (serially, in a pool, or on live threads)."""
    if isinstance(selection, RunRefused):
        return selection
    cases = [item.case for item in selection.cases]
    return _PlannedRun(
        suite=selection.suite,
        names=[case.name for case in cases],
        sources=[item.source for item in selection.cases],
        reports=execute(cases, settings),
        selected=selection.selected,
        keyword=selection.keyword,
        shard=selection.shard,
        admission_errors=selection.admission_errors,
        fingerprint=selection.fingerprint,
    )


def _on_forked_workers(
    paths: Sequence[Path],
    settings: RunSettings,
    keyword: Keyword | None,
    shard: Shard | None,
    max_bytes: int,
    cache_dir: Path | None,
) -> _PlannedRun | RunRefused | None:
    """Admit and run on forked workers (:class:`~evalrunner.execution.ForkedWorkers`);
    ``None`` when they cannot (no fork) or stood down (a refused file, a name used twice):
    the caller then admits here, and says exactly what was refused."""
    if not can_fork():
        return None
    shown = [relative_to_cwd(path) for path in paths]
    fixtures = _fixtures(shown)
    if isinstance(fixtures, RunRefused):
        return fixtures
    if len(fixtures) < 2:
        return None

    def admit(share: Sequence[Fixture]) -> Admission:
        # Each worker opens the cache itself: it is a file, not a value to share.
        cache = AdmissionCache(cache_dir) if cache_dir is not None else None
        return admit_fixtures(share, max_bytes=max_bytes, cache=cache)

    workers = ForkedWorkers(fixtures, admit=admit, settings=settings)
    try:
        admitted = workers.admitted()
        names = [case.name for case in admitted] if admitted else []
        if not admitted or len(set(names)) != len(names):
            workers.close()
            return None
        chosen = choose(
            admitted,
            lambda case: (case.name, fixtures[case.index].source, case.case_class),
            keyword,
            shard,
        )
        if isinstance(chosen, str):
            workers.close()
            return RunRefused((chosen,))
    except BaseException:
        workers.close(at_once=True)
        raise
    taken, kept = chosen

    def reports() -> Generator[CaseReport, None, None]:
        try:
            yield from workers.run([case.index for case in taken])
        except BaseException:  # an interrupt, or the reader left: stop the workers now
            workers.close(at_once=True)
            raise
        workers.close()

    return _PlannedRun(
        suite=suite_name(shown),
        names=[case.name for case in taken],
        sources=[fixtures[case.index].source for case in taken],
        reports=reports(),
        selected=len(kept),
        keyword=keyword,
        shard=shard,
        fingerprint=None
        if shard is None
        else fingerprint(
            shown,
            keyword,
            [(c.name, fixtures[c.index].source, fixtures[c.index].path) for c in kept],
        ),
    )


def _left_unrun(
    planned: _PlannedRun, reports: Sequence[CaseReport], repeat: int, halted: str | None
) -> list[CaseReport]:
    """The reports of the cases a run stopped by its live model (``halted``,
    :attr:`LiveModel.halted`) left unrun: each skipped, saying why."""
    if halted is None:
        return []
    left = list(zip(planned.names, planned.sources, strict=True))[len(reports) :]
    # Under --repeat each of the case's runs never ran, and each is counted so.
    return [
        combine_runs([CaseReport(name, source, None, (), skipped=SKIP_HALTED)] * repeat)
        for name, source in left
    ]


def _budget_stop(settings: RunSettings, reports: Sequence[CaseReport]) -> str | None:
    """The budget's sentence when it stopped something (a request refused, a case unrun)."""
    if settings.live is None or not settings.live.budget.exhausted:
        return None
    stopped = any(run.budget_cut for report in reports for run in (report, *report.runs))
    # The budget's own sentence: "spent", or that answers carry no usage to count.
    return settings.live.budget.message() if stopped else None
