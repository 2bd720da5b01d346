"""The whole pipeline for one suite: load → admit → replay → grade → report values.

:func:`run_suite` is what ``evalrunner run`` calls; it returns a :class:`SuiteReport`, or a
:class:`RunRefused` when nothing could run. Rendering and exit codes live in
:mod:`evalrunner.report`.
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

from evalrunner.admit import Admission, Admitted, admit_documents
from evalrunner.agent import DEFAULT_MAX_TOOL_ITERATIONS, AgentFactory, reference_agent
from evalrunner.cache import AdmissionCache
from evalrunner.grade import grade
from evalrunner.load import (
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
    CaseReport,
    RunInterrupted,
    RunRecord,
    RunRefused,
    Shard,
    SuiteReport,
)
from evalrunner.provider import ModelProvider
from evalrunner.replay import run_case
from evalrunner.select import case_identity, ordered, take_shard
from evalrunner.text import printable_path
from evalrunner.tools import ToolSource

if TYPE_CHECKING:
    from evalrunner.keyword_expr import Keyword
    from evalrunner.wire.live import LiveModel

LIVE_WITHOUT_MODEL = "live mode needs a live model: RunSettings.live is not set"
LIVE_WITH_JOBS = (
    "--jobs: live mode runs its cases in this process, so that max_total_tokens is one "
    "budget for the whole run; leave --jobs out (max_concurrency in [eval.live] runs that "
    "many live cases at once)"
)
SKIP_LIVE_CASE = (
    "live case (its turns script no steps): not run in replay mode; run it with --mode live"
)
SKIP_SCRIPTED_CASE = (
    "scripted case: not run in live mode, whose real model would not follow its script; "
    "it runs in replay mode"
)


def fixture_path(case: Case) -> str:
    """The case's fixture path as a report shows it: empty for a case made without one (its
    ``source`` the default ``Path()``, which alone prints as ".")."""
    # Compared as text: comparing two Paths costs more than the rest of a passing case's
    # report, and str(path) is "." exactly when the path equals Path().
    shown = str(case.source)
    return "" if shown == "." else shown


def report_without_run(
    case: Case, *, skipped: str | None = None, error: str | None = None
) -> CaseReport:
    """The report of a case that gave no run to grade: ``skipped`` says why it was not run,
    ``error`` why its run was lost (a worker process that died, say)."""
    return CaseReport(
        name=case.name,
        source=case.source.name,
        case_class=case.case_class,
        grades=(),
        error=error,
        path=fixture_path(case),
        positions=case.positions,
        skipped=skipped,
    )


def skipped_report(case: Case, reason: str) -> CaseReport:
    """The report of a case that was not run, saying why."""
    return report_without_run(case, skipped=reason)


def evaluate_case(
    case: Case,
    *,
    agent_factory: AgentFactory = reference_agent,
    tools: ToolSource | None = None,
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS,
    case_timeout: float | None = None,
    trimmed_history: bool = False,
    provider: ModelProvider | None = None,
) -> CaseReport:
    """Replay and grade one case, in its own workspace (made if the agent asks for it, and
    removed when the replay ends). ``provider`` replaces the case's script (live mode).

    A case whose run errored (or timed out) is not graded: its report carries the error and
    no grades. A live case without a ``provider`` is not run: its report says it was skipped.
    """
    if provider is None and case.live:
        return skipped_report(case, SKIP_LIVE_CASE)
    record = run_case(
        case,
        agent_factory=agent_factory,
        tools=tools,
        max_tool_iterations=max_tool_iterations,
        timeout=case_timeout,
        trimmed_history=trimmed_history,
        provider=provider,
    )
    return graded_report(case, record)


def run_with(case: Case, settings: RunSettings, provider: ModelProvider | None = None) -> RunRecord:
    """:func:`~evalrunner.replay.run_case` with the agent, tools and limits of ``settings``."""
    return run_case(
        case,
        agent_factory=settings.agent_factory,
        tools=settings.tools,
        max_tool_iterations=settings.max_tool_iterations,
        timeout=settings.case_timeout,
        trimmed_history=settings.trimmed_history,
        provider=provider,
    )


def graded_report(case: Case, record: RunRecord) -> CaseReport:
    """The report of ``case``'s run: graded, unless the run errored."""
    grades = grade(case.expects, record) if record.error is None else ()
    return CaseReport(
        name=case.name,
        source=case.source.name,
        case_class=case.case_class,
        grades=grades,
        error=record.error,
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        llm_calls=record.llm_calls,
        duration_ms=record.duration_ms,
        tracebacks=record.tracebacks,
        path=fixture_path(case),
        positions=case.positions,
    )


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How to run the cases of a suite: the agent, its tools, limits and parallelism.

    With ``jobs`` above 1 the cases run in that many worker processes; ``agent_factory`` and
    ``tools`` must then be picklable (module-level functions and classes are), or the
    settings built in each worker by ``in_worker`` (the command line passes one that reads the
    same configuration again).
    """

    agent_factory: AgentFactory = reference_agent
    tools: ToolSource | None = None
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS
    case_timeout: float | None = None
    trimmed_history: bool = False
    jobs: int = 1
    in_worker: Callable[[], RunSettings] | None = None
    live: LiveModel | None = None
    """Live mode: the run's model (each case gets a provider on it); ``None`` replays."""
    repeat: int = 1
    """How many times each case runs (``--repeat``; :mod:`evalrunner.repeats`)."""


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
    and then the slice ``shard`` names, in suite order (:func:`evalrunner.select.suite_order`).

    Refused (a :class:`RunRefused`) when a path cannot be read, when a file is refused and
    ``keep_going`` is false, when no case is admitted, or when ``keyword`` matches none. An
    empty shard is not refused: a suite may have fewer cases than shards.
    """
    shown = [relative_to_cwd(path) for path in paths]
    fixtures = _fixtures(shown)
    if isinstance(fixtures, RunRefused):
        return fixtures
    try:
        if cache is None:
            admission = admit_documents(
                load_document(fixture.path, max_bytes=max_bytes) for fixture in fixtures
            )
        else:
            admission = admit_with_cache(fixtures, cache, max_bytes)
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
    taken, selected = chosen
    return Selection(
        suite=suite_name(shown),
        cases=tuple(taken),
        selected=selected,
        keyword=keyword,
        shard=shard,
        admission_errors=admission.errors,
    )


T = TypeVar("T")


def choose(
    items: Sequence[T],
    describe: Callable[[T], tuple[str, str, CaseClass | None]],
    keyword: Keyword | None,
    shard: Shard | None,
) -> tuple[list[T], int] | str:
    """The admitted ``items`` a run takes, in suite order, and how many ``keyword`` kept
    before the shard was taken; or why none (``-k`` matched nothing). ``describe`` gives an
    item's case name, fixture source and class."""
    admitted = ordered(items, lambda item: describe(item)[1::-1])  # (source, name)
    kept = [item for item in admitted if keyword is None or keyword.matches(*describe(item))]
    if not kept:
        expression = keyword.shown if keyword is not None else ""
        return (
            f"-k '{expression}': no case matches, of {len(admitted)} admitted; names, "
            "fixture paths and classes are matched as case-insensitive substrings"
        )
    if shard is None:
        return kept, len(kept)

    def identity(item: T) -> bytes:
        name, source, _ = describe(item)
        return case_identity(source, name)

    return take_shard(kept, shard, identity), len(kept)


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
) -> SuiteReport | RunRefused:
    """Load, admit, replay and grade the cases of ``suite``: a suite directory, or fixture
    files and directories (searched recursively, see :func:`evalrunner.load.discover`).

    Admission is all-or-nothing unless ``keep_going``: if any fixture is refused, no case runs
    and every problem is returned at once; with ``keep_going`` the admitted cases run and the
    report carries the refusals. ``keyword`` (``-k``) and ``shard`` (``--shard``) narrow the
    cases as :func:`select_cases` does. A :class:`RunInterrupted` (or ``KeyboardInterrupt``)
    stops the run between or during cases; the report then holds the cases that finished and
    the signal. ``settings``, when given, replaces the keyword arguments that describe the
    run; ``on_start`` is called with the names of the cases about to run, in order, and
    ``on_case`` with each case's report as it finishes (in suite order). With ``cache_dir``,
    admission outcomes are kept there between runs (:mod:`evalrunner.cache`); without it,
    as by default for library use, nothing is written. With ``repeat`` above 1 each case
    runs that many times and its report combines the runs (:mod:`evalrunner.repeats`).
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
    chosen: _Chosen | RunRefused | None = None
    try:
        # Repeats run in the pool, which deals every run to any worker: the crew runs a
        # case where it was admitted, so all K runs of a slow case would share one worker.
        if settings.jobs > 1 and settings.live is None and settings.repeat == 1:
            chosen = _with_crew(paths, settings, keyword, shard, max_bytes, cache_dir)
        if chosen is None:  # serially, or the crew stood down: admit here
            chosen = _in_this_process(
                select_cases(
                    paths,
                    keyword=keyword,
                    shard=shard,
                    keep_going=keep_going,
                    max_bytes=max_bytes,
                    cache=AdmissionCache(cache_dir) if cache_dir is not None else None,
                ),
                settings,
            )
        if isinstance(chosen, RunRefused):
            return chosen
        if on_start is not None:
            on_start(chosen.names)
        # Closed here, not left to the garbage collector: a suspended generator keeps its
        # workers alive into interpreter exit, where CPython's own shutdown of a pool races
        # it and prints "Bad file descriptor".
        with contextlib.closing(chosen.reports) as outcomes:
            for source, report in zip(chosen.sources, outcomes, strict=True):
                # The fixture path relative to its suite directory, not just the file name:
                # two subdirectories may hold files of the same name. (Mostly it is the
                # file name already, and a copy of a report costs a tenth of a case.)
                if report.source != source:
                    report = replace(report, source=source)
                reports.append(report)
                if on_case is not None:
                    on_case(report)
    except RunInterrupted as stop:
        interrupted = stop.signum
    except KeyboardInterrupt:
        interrupted = int(signal.SIGINT)
    picked = chosen if isinstance(chosen, _Chosen) else None
    return SuiteReport(
        suite=picked.suite if picked is not None else suite_name(paths),
        mode=mode,
        cases=tuple(reports),
        duration_ms=int((time.perf_counter() - started) * 1000),
        interrupted=interrupted,
        trimmed_history=settings.trimmed_history,
        keyword=picked.keyword.text if picked and picked.keyword else None,
        shard=picked.shard if picked is not None else shard,
        selected=picked.selected if picked is not None and picked.shard else None,
        admission_errors=picked.admission_errors if picked is not None else (),
        budget_spent=_budget_stop(settings, reports),
        repeat=settings.repeat,
    )


@dataclass(frozen=True, slots=True)
class _Chosen:
    """The cases a run takes, by name and fixture source in suite order, with their reports to
    come (from this process, a pool, or a crew)."""

    suite: str
    names: list[str]
    sources: list[str]
    reports: Generator[CaseReport, None, None]
    selected: int
    keyword: Keyword | None
    shard: Shard | None
    admission_errors: tuple[AdmissionError, ...] = ()


def _in_this_process(
    selection: Selection | RunRefused, settings: RunSettings
) -> _Chosen | RunRefused:
    if isinstance(selection, RunRefused):
        return selection
    cases = [item.case for item in selection.cases]
    return _Chosen(
        suite=selection.suite,
        names=[case.name for case in cases],
        sources=[item.source for item in selection.cases],
        reports=_repeated(cases, settings),
        selected=selection.selected,
        keyword=selection.keyword,
        shard=selection.shard,
        admission_errors=selection.admission_errors,
    )


def _with_crew(
    paths: Sequence[Path],
    settings: RunSettings,
    keyword: Keyword | None,
    shard: Shard | None,
    max_bytes: int,
    cache_dir: Path | None,
) -> _Chosen | RunRefused | None:
    """Admit and run in a crew of forked workers (:mod:`evalrunner.crew`); ``None`` when the
    crew cannot (no fork) or stood down (a refused file, a name used twice): the caller then
    admits here, and says exactly what was refused."""
    from evalrunner.execution import Crew, can_fork, evaluator_in_worker, run_alone

    if not can_fork():
        return None
    shown = [relative_to_cwd(path) for path in paths]
    fixtures = _fixtures(shown)
    if isinstance(fixtures, RunRefused):
        return fixtures
    if len(fixtures) < 2:
        return None
    import multiprocessing

    context = multiprocessing.get_context("fork")
    crew = Crew(
        fixtures,
        jobs=settings.jobs,
        max_bytes=max_bytes,
        cache_dir=cache_dir,
        start=partial(evaluator_in_worker, settings),
        run_alone=lambda case: run_alone(case, context, settings),
    )
    try:
        admitted = crew.admitted()
        names = [case.name for case in admitted] if admitted else []
        if not admitted or len(set(names)) != len(names):
            crew.close()
            return None
        chosen = choose(
            admitted,
            lambda case: (case.name, fixtures[case.index].source, case.case_class),
            keyword,
            shard,
        )
        if isinstance(chosen, str):
            crew.close()
            return RunRefused((chosen,))
    except BaseException:
        crew.close(at_once=True)
        raise
    taken, selected = chosen

    def reports() -> Generator[CaseReport, None, None]:
        try:
            yield from crew.run([case.index for case in taken])
        except BaseException:  # an interrupt, or the reader left: stop the workers now
            crew.close(at_once=True)
            raise
        crew.close()

    return _Chosen(
        suite=suite_name(shown),
        names=[case.name for case in taken],
        sources=[fixtures[case.index].source for case in taken],
        reports=reports(),
        selected=selected,
        keyword=keyword,
        shard=shard,
    )


def _budget_stop(settings: RunSettings, reports: Sequence[CaseReport]) -> str | None:
    """The budget's sentence when it stopped something (a request refused, a case unrun)."""
    if settings.live is None or not settings.live.budget.exhausted:
        return None
    stopped = any(
        run.skipped == SKIP_BUDGET or (run.error is not None and BUDGET_ERROR in run.error)
        for report in reports
        for run in (report, *report.runs)
    )
    return settings.live.budget.message() if stopped else None


def _repeated(cases: Sequence[Case], settings: RunSettings) -> Generator[CaseReport, None, None]:
    """Each case's report, its runs combined when it runs more than once."""
    if settings.repeat <= 1:
        return execute(cases, settings)
    from evalrunner.repeats import expanded, grouped

    return grouped(execute(expanded(cases, settings.repeat), settings), settings.repeat)


def execute(cases: Sequence[Case], settings: RunSettings) -> Generator[CaseReport, None, None]:
    """Each case's report, in the order of ``cases``, whatever ``settings.jobs`` is.

    Serially, cases run one after another in this process. With jobs, they run in worker
    processes and reports are yielded in suite order as soon as every earlier one is in, so
    the report, its order and the exit code are those of a serial run. An interrupt stops
    the workers and propagates.
    """
    live = settings.live
    if live is not None and live.config.max_concurrency > 1 and len(cases) > 1:
        yield from _live_at_once(cases, settings, live)
        return
    if settings.jobs <= 1 or len(cases) <= 1 or live is not None:
        for case in cases:
            yield evaluate_with(case, settings)
        return
    from evalrunner.execution import in_pool

    yield from in_pool(cases, settings)


def _live_at_once(
    cases: Sequence[Case], settings: RunSettings, live: LiveModel
) -> Generator[CaseReport, None, None]:
    """Live cases, up to ``max_concurrency`` at a time on threads of this process (their
    time is the model's, not this process's), reported in suite order.

    An interrupt stops the live model: the requests in flight are cut, the cases running
    give themselves up and the cases not started never start. Every case that had finished
    by then is still reported; a case before it that had not is reported as not run, so
    that suite order holds."""
    from concurrent.futures import ThreadPoolExecutor

    workers = min(live.config.max_concurrency, len(cases))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evalrunner live case")
    futures = [pool.submit(evaluate_with, case, settings) for case in cases]
    given = 0
    try:
        for future in futures:
            report = future.result()
            given += 1
            yield report
    except BaseException as stop:
        finished = [f.done() and not f.cancelled() for f in futures]  # before the stop
        for future in futures:
            future.cancel()
        live.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        if isinstance(stop, GeneratorExit):
            raise  # the reader left: nothing more may be yielded
        last = max((i for i, done in enumerate(finished) if done), default=-1)
        for index in range(given, last + 1):
            future = futures[index]
            if finished[index] and future.exception() is None:
                yield future.result()
            else:
                yield skipped_report(cases[index], SKIP_INTERRUPTED)
        raise
    pool.shutdown()


SKIP_INTERRUPTED = "not run to its end: the run was interrupted while this case was running"


SKIP_BUDGET = "not run: the token budget (max_total_tokens) was spent before this case"
BUDGET_ERROR = "the token budget is spent"


def evaluate_with(case: Case, settings: RunSettings) -> CaseReport:
    """One case's report as ``settings`` say (:func:`evaluate_case`): run, or skipped (with
    why) when the mode cannot run its kind or the budget is spent."""
    live = settings.live
    if live is None:
        if case.live:
            return skipped_report(case, SKIP_LIVE_CASE)
        return graded_report(case, run_with(case, settings))
    if not case.live:
        return skipped_report(case, SKIP_SCRIPTED_CASE)
    if live.budget.exhausted:
        return skipped_report(case, SKIP_BUDGET)
    provider = live.provider()
    try:
        report = graded_report(case, run_with(case, settings, provider))
    finally:
        provider.close()
    return without_secrets(report, live.without_secrets)


def without_secrets(report: CaseReport, strike: Callable[[str], str]) -> CaseReport:
    """``report`` with ``strike`` applied to every text a live model or agent may have put
    in it (check details, the run error, tracebacks): a model that repeats the API key it
    was sent must not put it in a report."""
    return replace(
        report,
        grades=tuple(replace(g, detail=strike(g.detail)) for g in report.grades),
        error=strike(report.error) if report.error is not None else None,
        tracebacks=tuple(strike(t) for t in report.tracebacks),
    )
