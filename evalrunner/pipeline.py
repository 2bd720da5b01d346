"""The whole pipeline for one suite: load → admit → replay → grade → report values.

:func:`run_suite` is what ``evalrunner run`` calls; it returns a :class:`SuiteReport`, or a
:class:`RunRefused` when nothing could run. Rendering and exit codes live in
:mod:`evalrunner.report`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    CaseReport,
    RunInterrupted,
    RunRefused,
    Shard,
    SuiteReport,
)
from evalrunner.provider import ModelProvider
from evalrunner.replay import run_case
from evalrunner.select import Keyword, case_identity, ordered, take_shard
from evalrunner.text import printable_path
from evalrunner.tools import ToolSource

if TYPE_CHECKING:
    from evalrunner.wire.live import LiveModel

LIVE_WITHOUT_MODEL = "live mode needs a live model: RunSettings.live is not set"
LIVE_WITH_JOBS = (
    "--jobs: live mode runs its cases one at a time in this process, so that "
    "max_total_tokens is one budget for the whole run; leave --jobs out (max_concurrency "
    "in [eval.live] caps the requests in flight)"
)
SKIP_LIVE_CASE = (
    "live case (its turns script no steps): not run in replay mode; run it with --mode live"
)
SKIP_SCRIPTED_CASE = (
    "scripted case: not run in live mode, whose real model would not follow its script; "
    "it runs in replay mode"
)


def skipped_report(case: Case, reason: str) -> CaseReport:
    """The report of a case that was not run, saying why."""
    return CaseReport(
        name=case.name,
        source=case.source.name,
        case_class=case.case_class,
        grades=(),
        path="" if case.source == Path() else str(case.source),
        positions=case.positions,
        skipped=reason,
    )


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
        path="" if case.source == Path() else str(case.source),
        positions=case.positions,
    )


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class SelectedCase:
    """An admitted case a run takes, with its fixture path as the report shows it."""

    case: Case
    source: str


@dataclass(frozen=True)
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
    try:
        fixtures = find_fixtures(shown)
        if cache is None:
            admission = admit_documents(
                load_document(fixture.path, max_bytes=max_bytes) for fixture in fixtures
            )
        else:
            admission = _admit_with_cache(fixtures, cache, max_bytes)
    except SuiteNotFound as exc:
        return RunRefused((str(exc),))
    except OSError as exc:
        where = printable_path(exc.filename if exc.filename is not None else suite_name(shown))
        return RunRefused((f"{where}: cannot read suite directory: {exc.strerror or exc}",))
    if admission.errors and (not keep_going or not admission.cases):
        return RunRefused(admission_errors=admission.errors)
    sources = {fixture.path: fixture.source for fixture in fixtures}
    admitted = ordered(
        (SelectedCase(case, sources[case.source]) for case in admission.cases),
        lambda chosen: (chosen.source, chosen.case.name),
    )
    kept = [
        chosen
        for chosen in admitted
        if keyword is None
        or keyword.matches(chosen.case.name, chosen.source, chosen.case.case_class)
    ]
    if not kept:
        expression = keyword.shown if keyword is not None else ""
        return RunRefused(
            (
                f"-k '{expression}': no case matches, of {len(admitted)} admitted; names, "
                "fixture paths and classes are matched as case-insensitive substrings",
            ),
            admission_errors=admission.errors,
        )
    taken = kept if shard is None else take_shard(kept, shard, _identity)
    return Selection(
        suite=suite_name(shown),
        cases=tuple(taken),
        selected=len(kept),
        keyword=keyword,
        shard=shard,
        admission_errors=admission.errors,
    )


def _admit_with_cache(
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


def _identity(chosen: SelectedCase) -> bytes:
    return case_identity(chosen.source, chosen.case.name)


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
    as by default for library use, nothing is written.
    """
    if settings is None:
        settings = RunSettings(
            agent_factory=agent_factory,
            tools=tools,
            max_tool_iterations=max_tool_iterations,
            case_timeout=case_timeout,
            trimmed_history=trimmed_history,
            jobs=jobs,
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
    selection: Selection | None = None
    try:
        chosen = select_cases(
            paths,
            keyword=keyword,
            shard=shard,
            keep_going=keep_going,
            max_bytes=max_bytes,
            cache=AdmissionCache(cache_dir) if cache_dir is not None else None,
        )
        if isinstance(chosen, RunRefused):
            return chosen
        selection = chosen
        cases = [item.case for item in selection.cases]
        if on_start is not None:
            on_start([case.name for case in cases])
        # Closed here, not left to the garbage collector: a suspended `execute` keeps its
        # worker pool alive into interpreter exit, where CPython's own shutdown of the pool
        # races it and prints "Bad file descriptor".
        with contextlib.closing(execute(cases, settings)) as outcomes:
            for item, report in zip(selection.cases, outcomes, strict=True):
                # The fixture path relative to its suite directory, not just the file name:
                # two subdirectories may hold files of the same name.
                report = replace(report, source=item.source)
                reports.append(report)
                if on_case is not None:
                    on_case(report)
    except RunInterrupted as stop:
        interrupted = stop.signum
    except KeyboardInterrupt:
        interrupted = int(signal.SIGINT)
    return SuiteReport(
        suite=selection.suite if selection is not None else suite_name(paths),
        mode=mode,
        cases=tuple(reports),
        duration_ms=int((time.perf_counter() - started) * 1000),
        interrupted=interrupted,
        trimmed_history=settings.trimmed_history,
        keyword=selection.keyword.text if selection and selection.keyword else None,
        shard=selection.shard if selection is not None else shard,
        selected=selection.selected if selection is not None and selection.shard else None,
        admission_errors=selection.admission_errors if selection is not None else (),
        budget_spent=_budget_stop(settings, reports),
    )


def _budget_stop(settings: RunSettings, reports: Sequence[CaseReport]) -> str | None:
    """The budget's sentence when it stopped something (a request refused, a case unrun)."""
    if settings.live is None or not settings.live.budget.exhausted:
        return None
    stopped = any(
        r.skipped == SKIP_BUDGET or (r.error is not None and BUDGET_ERROR in r.error)
        for r in reports
    )
    return settings.live.budget.message() if stopped else None


def execute(cases: Sequence[Case], settings: RunSettings) -> Generator[CaseReport, None, None]:
    """Each case's report, in the order of ``cases``, whatever ``settings.jobs`` is.

    Serially, cases run one after another in this process. With jobs, they run in worker
    processes and reports are yielded in suite order as soon as every earlier one is in, so
    the report, its order and the exit code are those of a serial run. An interrupt stops
    the workers and propagates.
    """
    if settings.jobs <= 1 or len(cases) <= 1 or settings.live is not None:
        for case in cases:
            yield _evaluate(case, settings)
        return
    yield from _execute_in_workers(cases, settings)


SKIP_BUDGET = "not run: the token budget (max_total_tokens) was spent before this case"
BUDGET_ERROR = "the token budget is spent"


def _evaluate(case: Case, settings: RunSettings) -> CaseReport:
    """One case's report: run, or skipped (with why) when the mode cannot run its kind or the
    budget is spent."""
    live = settings.live
    if live is not None and not case.live:
        return skipped_report(case, SKIP_SCRIPTED_CASE)
    if live is not None and live.budget.exhausted:
        return skipped_report(case, SKIP_BUDGET)
    return evaluate_case(
        case,
        agent_factory=settings.agent_factory,
        tools=settings.tools,
        max_tool_iterations=settings.max_tool_iterations,
        case_timeout=settings.case_timeout,
        trimmed_history=settings.trimmed_history,
        provider=live.provider() if live is not None else None,
    )


_WORKER_SETTINGS: RunSettings | None = None


def _start_worker(settings: RunSettings) -> None:
    global _WORKER_SETTINGS
    # Interrupts are the parent's to handle: it stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _WORKER_SETTINGS = settings.in_worker() if settings.in_worker is not None else settings


def _run_in_worker(batch: Sequence[tuple[int, Case]]) -> list[tuple[int, CaseReport]]:
    settings = _WORKER_SETTINGS
    assert settings is not None, "worker not started"
    return [(index, _evaluate(case, settings)) for index, case in batch]


def _execute_in_workers(cases: Sequence[Case], settings: RunSettings) -> Iterator[CaseReport]:
    methods = multiprocessing.get_all_start_methods()
    # fork starts a worker in milliseconds and inherits what the parent imported.
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    jobs = min(settings.jobs, len(cases))
    # Small batches keep workers busy to the end; more than one case per batch keeps the
    # cost of passing values between processes below the cost of the cases.
    size = max(1, min(16, len(cases) // (jobs * 8)))
    indexed = list(enumerate(cases))
    batches = [indexed[i : i + size] for i in range(0, len(indexed), size)]
    shipped = settings
    if settings.in_worker is not None and context.get_start_method() != "fork":
        # Only the recipe travels to a spawned worker: the factories may be closures.
        shipped = replace(settings, agent_factory=reference_agent, tools=None)
    done: dict[int, CaseReport] = {}
    following = 0
    broken = False
    executor = _pool(context, jobs, shipped)
    try:
        futures = [executor.submit(_run_in_worker, batch) for batch in batches]
        for future in as_completed(futures):
            try:
                results = future.result()
            except BrokenProcessPool:
                broken = True  # a case ended its worker process: found below
                break
            for index, report in results:
                done[index] = report
            while following in done:
                yield done.pop(following)
                following += 1
    except BaseException:
        _stop_workers(executor)
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    if not broken:
        return
    # The pool cannot say which case killed its worker (os._exit, a crash in a C extension):
    # the cases not yet reported run again, each alone in a worker of its own, so that only
    # the case that kills its process errors, and every other case gets its verdict.
    for index in range(following, len(cases)):
        if index not in done:
            done[index] = _run_alone(cases[index], context, shipped)
        yield done.pop(index)


def _pool(
    context: multiprocessing.context.BaseContext, jobs: int, settings: RunSettings
) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=_start_worker, initargs=(settings,)
    )


def _run_alone(
    case: Case, context: multiprocessing.context.BaseContext, settings: RunSettings
) -> CaseReport:
    """One case in a worker process of its own; a run error, naming how the process ended,
    when it dies before it reports (its own process, not a pool's, so that its exit status
    is known for certain)."""
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(  # type: ignore[attr-defined]
        target=_run_alone_in_worker, args=(settings, case, writer), daemon=True
    )
    try:
        process.start()
        writer.close()
        try:
            report: CaseReport = reader.recv()
        except EOFError:  # died without a word
            process.join()
            return CaseReport(
                name=case.name,
                source=case.source.name,
                case_class=case.case_class,
                grades=(),
                error=f"the worker process running this case died "
                f"({_ending(process.exitcode)}): the agent or a tool ended the process "
                "(os._exit, a crash in native code)",
                path="" if case.source == Path() else str(case.source),
                positions=case.positions,
            )
        process.join()
        return report
    except BaseException:
        with contextlib.suppress(OSError, AttributeError, ValueError):
            process.kill()
        raise
    finally:
        reader.close()


def _run_alone_in_worker(settings: RunSettings, case: Case, writer: Any) -> None:
    _start_worker(settings)
    ((_, report),) = _run_in_worker([(0, case)])
    writer.send(report)
    writer.close()


def _ending(code: int | None) -> str:
    if code is None:
        return "it ended"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


def _stop_workers(executor: ProcessPoolExecutor) -> None:
    """End the workers now (an interrupt): a worker's case is abandoned like a timed-out one."""
    processes = list(getattr(executor, "_processes", {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(OSError, AttributeError):
            process.kill()
