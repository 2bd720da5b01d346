"""How a run's cases are executed: one case (:func:`evaluate`), and many (:func:`execute`),
serially, in worker processes (``--jobs``) or on threads of this process (live mode).

:func:`evaluate` runs one case as the settings say and gives its report: graded, a run error,
or skipped with why. :func:`execute` gives each case's report in the order of the cases,
whatever the strategy, so that the report, its order and the exit code are those of a serial
run; it also folds a case's repeated runs into one report (``repeat``).

Worker processes. Where the platform can fork, :class:`ForkedWorkers` each load, admit and
run their own share of the suite (:mod:`evalrunner.session` decides when). Elsewhere (spawn),
when a run goes on past refused files, or when cases repeat, :func:`execute` runs cases
admitted here in a process pool.

Shipping cases to workers and their reports back costs about as much as admitting a case, and
admitting every case in the parent first leaves the workers idle while it does. So each forked
worker takes every J-th fixture, admits it, and tells the parent only what the selection needs
(:class:`CaseSummary`). The shares are fixed before the fork. Handed out instead as the workers
admit, the faster taking more, they balanced cheap cases better, but a small suite's files all
went to the first worker, which had admitted them before the second started, and it then ran
every case alone, however slow its agent.

The parent checks what spans the suite (unique names, ``-k``, the shard), then tells each
worker which of its cases to run; the reports come back in batches and are handed on in
suite order. Cases are never sent between processes. The forked workers only run a suite that
admits cleanly: as soon as any share has a refused file, or two shares use one case name, they
stand down and the caller admits serially, so every refusal reads exactly as in a serial run.

A worker that dies (``os._exit``, a crash in native code), in the pool or forked, fails only
the case it was running: its cases not yet reported run again, each in a process of its own.

Supervision. ``os._exit`` is refused in this process (:mod:`evalrunner.process_exit`), but
``ctypes``' ``_exit``, ``os.execv``, a signal the agent sends itself or a crash in native code
would end it with the agent's status (0 reads as a green run, with no report). So when the
project's own code runs here (:attr:`RunSettings.supervised`, set by
:func:`evalrunner.session.settings_from_config` for a Python agent or project tools), a
serial replay runs its cases in one :class:`ForkedWorkers` worker over the cases admitted
here (:meth:`ForkedWorkers.over_cases`; it inherits them, nothing is sent), which this
process supervises as it does ``-j`` workers: the case that ends the worker is its run error
(:func:`worker_died`), the cases after it run each in a process of its own, and the run's
verdict and exit code are the core's. Nothing else changes: one process runs the cases in
suite order (state an agent keeps across cases is there), repeats, ``case_timeout``, held
verdicts and an interrupt (the worker is stopped with SIGTERM, as ``-j`` workers are, and the
cases that finished are reported) behave as serially. The worker refuses ``os._exit`` as
this process does (:func:`evalrunner.process_exit.own_refusal`), so such a call reads as it
reads serially, and it hands the calls it refused outside every case to this process; a
worker that dies while it runs no case (between two, or after its last) fails the run for
the same reason (:func:`_died_between_cases`). Front
ends that run case by case (the pytest plugin) keep one such worker for the session
(:class:`Supervised`). Only what needs it pays for the fork: the reference agent, or a
command agent, with the built-in tools runs only evalrunner's code here and is not
supervised; nor is live mode (its cases share one token budget, on threads of this process).

Held verdicts. A persistent agent process (agent-command protocol 2) serves many cases, and
what it does after it ended a case (a model request, a non-zero exit, a traceback, at the
end of the run a hang once its stdin closes) fails that case, not the next one. So the
verdict of such a case is held (:class:`PendingVerdict`) until its process takes its next
case or exits, and every strategy hands on a report only once its verdict is settled: each
runs its cases through :func:`_in_order_settled`, which ends with :func:`_settle_agents`
(the factory's ``settle_cases()``, ending the processes waiting for a next case) before the
held reports follow. So serial runs, ``-j N`` (each forked or pooled worker settling its own
processes before it reports its last cases), a one-case run (the pytest plugin's and
``mutate``'s :func:`evalrunner.session.case_verdict`) and live threads give the same
verdict. The decision, and where it is exact: :mod:`evalrunner.agents.command`.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from evalrunner.agents.reference import (
    DEFAULT_MAX_TOOL_ITERATIONS,
    Agent,
    AgentContext,
    AgentFactory,
    reference_agent,
)
from evalrunner.boundary.provider import ModelProvider
from evalrunner.boundary.tools import ToolSource
from evalrunner.expectations import grade_case
from evalrunner.fixture.admit import Admission
from evalrunner.fixture.load import Fixture
from evalrunner.model import Case, CaseClass, CaseReport, RunInterrupted, RunRecord
from evalrunner.process_exit import note_unexplained_death, own_refusal, unclaimed
from evalrunner.repeats import expanded, grouped
from evalrunner.replay import run_case

if TYPE_CHECKING:
    import multiprocessing.context
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing.connection import Connection

    from evalrunner.live.provider import LiveModel

SKIP_LIVE_CASE = (
    "live case (its turns script no steps): not run in replay mode; run it with --mode live"
)
SKIP_SCRIPTED_CASE = (
    "scripted case: not run in live mode, whose real model would not follow its script; "
    "it runs in replay mode"
)
SKIP_INTERRUPTED = "not run to its end: the run was interrupted while this case was running"
SKIP_HALTED = (
    "not run: an earlier case met an answer every request would get alike, which stopped "
    "the run (see run stopped, and live_stopped in the JSON report)"
)
SKIP_BUDGET = "not run: the token budget (max_total_tokens) was spent before this case"
SKIP_NO_USAGE = (
    "not run: the token budget (max_total_tokens) cannot be enforced: an earlier answer "
    "carried no token usage"
)
BUDGET_SKIPS = (SKIP_BUDGET, SKIP_NO_USAGE)
"""Every reason a case was not run because of the token budget."""


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
    framed_results: bool = False
    jobs: int = 1
    in_worker: Callable[[], RunSettings] | None = None
    live: LiveModel | None = None
    """Live mode: the run's model (each case gets a provider on it); ``None`` replays."""
    repeat: int = 1
    """How many times each case runs (``--repeat``; :mod:`evalrunner.repeats`)."""
    supervised: bool = False
    """Run a replay's cases, serially too, in a forked worker process that this one
    supervises (:func:`execute`): for an agent or tools of the user's, which may end the
    process in ways no refusal stops. Where the platform cannot fork it has no effect."""

    def replay(self, case: Case, provider: ModelProvider | None = None) -> RunRecord:
        """One run of ``case`` (:func:`~evalrunner.replay.run_case`) with this agent, these
        tools and limits; ``provider`` replaces the case's script (live mode)."""
        return run_case(
            case,
            agent_factory=self.agent_factory,
            tools=self.tools,
            max_tool_iterations=self.max_tool_iterations,
            timeout=self.case_timeout,
            trimmed_history=self.trimmed_history,
            provider=provider,
            framed_results=self.framed_results,
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


def graded_report(case: Case, record: RunRecord) -> CaseReport:
    """The report of ``case``'s run: graded, unless the run errored."""
    grades = grade_case(case, record) if record.error is None else ()
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


def evaluate(
    case: Case, settings: RunSettings, provider: ModelProvider | None = None
) -> CaseReport:
    """One run of one case, as ``settings`` say: its graded report, a run error, or skipped
    (with why) when the mode cannot run its kind or the token budget is spent.

    ``provider`` replaces the case's script and runs the case whatever its kind; otherwise a
    live model in ``settings`` gives the provider (live mode), and a replay runs the script.
    ``settings.repeat`` is :func:`execute`'s to apply: this is always one run.
    """
    if provider is not None:
        return graded_report(case, settings.replay(case, provider))
    live = settings.live
    if live is None:
        if case.live:
            return skipped_report(case, SKIP_LIVE_CASE)
        return graded_report(case, settings.replay(case))
    if not case.live:
        return skipped_report(case, SKIP_SCRIPTED_CASE)
    if live.budget.exhausted:
        reason = SKIP_NO_USAGE if live.budget.blind else SKIP_BUDGET
        return replace(skipped_report(case, reason), budget_cut=True)
    if live.halted is not None:  # every request would meet the answer that stopped the run
        return skipped_report(case, SKIP_HALTED)
    live_provider = live.provider()
    try:
        report = graded_report(case, settings.replay(case, live_provider))
    finally:
        live_provider.close()
    if live_provider.stopped_by_budget and report.error is not None:
        report = replace(report, budget_cut=True)
    return without_secrets(report, live.without_secrets)


class PendingVerdict(Protocol):
    """A case's verdict that its agent's process may still overturn
    (:class:`evalrunner.agents.command.HeldVerdict`): ``error`` once ``settled``."""

    @property
    def settled(self) -> bool: ...

    @property
    def error(self) -> str | None: ...


def evaluate_held(case: Case, settings: RunSettings) -> tuple[CaseReport, PendingVerdict | None]:
    """:func:`evaluate`, and the verdict its agent holds open (``held_verdict``), if any.

    Only a factory that can settle held verdicts (``settle_cases``) has its agents looked
    at: every other runs exactly as :func:`evaluate` runs it."""
    factory = settings.agent_factory
    if not callable(getattr(factory, "settle_cases", None)):
        return evaluate(case, settings), None
    made: list[object] = []

    def making(context: AgentContext) -> Agent:
        agent = factory(context)
        made.append(agent)
        return agent

    report = evaluate(case, replace(settings, agent_factory=making))
    for agent in made:
        held: PendingVerdict | None = getattr(agent, "held_verdict", None)
        if held is not None:
            return report, held
    return report, None


def _settle_agents(settings: RunSettings) -> None:
    """End the agent processes waiting for a next case: the verdicts they hold settle."""
    settle = getattr(settings.agent_factory, "settle_cases", None)
    if callable(settle):
        settle()


def _final(report: CaseReport, held: PendingVerdict | None) -> CaseReport:
    """The report with its held verdict applied: what the process did after the case ended
    is the case's run error (an earlier error stays the root cause)."""
    if held is None or held.error is None or report.error is not None:
        return report
    return replace(report, error=held.error, grades=())


K = TypeVar("K")


class _Holding:
    """Reports in the order they were added, each handed on once its verdict is settled."""

    def __init__(self, settings: RunSettings) -> None:
        self._settings = settings
        self._queue: deque[tuple[Any, CaseReport, PendingVerdict | None]] = deque()

    def add(self, key: object, report: CaseReport, held: PendingVerdict | None) -> None:
        self._queue.append((key, report, held))

    def ready(self) -> Iterator[tuple[Any, CaseReport]]:
        """The reports at the front whose verdicts are settled."""
        queue = self._queue
        while queue and (queue[0][2] is None or queue[0][2].settled):
            key, report, held = queue.popleft()
            yield key, _final(report, held)

    def rest(self) -> Iterator[tuple[Any, CaseReport]]:
        """Every report left, once the agents' processes have ended (settling them)."""
        if any(held is not None and not held.settled for _, _, held in self._queue):
            _settle_agents(self._settings)
        while self._queue:
            key, report, held = self._queue.popleft()
            yield key, _final(report, held)


def _in_order_settled(
    items: Iterable[tuple[K, Case]], settings: RunSettings
) -> Generator[tuple[K, CaseReport], None, None]:
    """Each case's report, in order, as soon as its verdict is settled; at the end (or when
    the run is stopped, after which the cases that finished are still reported) the
    processes waiting for a next case are ended, which settles the rest."""
    holding = _Holding(settings)
    try:
        for key, case in items:
            holding.add(key, *evaluate_held(case, settings))
            yield from holding.ready()
    except GeneratorExit:
        raise  # the reader left: nothing more may be yielded
    except BaseException:
        yield from holding.rest()
        raise
    yield from holding.rest()


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


def execute(cases: Sequence[Case], settings: RunSettings) -> Generator[CaseReport, None, None]:
    """Each case's report, in the order of ``cases``, whatever ``settings.jobs`` is; a case
    that runs more than once (``settings.repeat``) gets one report combining its runs.

    Serially, cases run one after another in this process. With jobs, they run in worker
    processes and reports are yielded in suite order as soon as every earlier one is in, so
    the report, its order and the exit code are those of a serial run. An interrupt stops
    the workers and propagates. Closing the generator stops the workers at once.
    """
    if settings.repeat <= 1:
        return _each(cases, settings)
    # The runs of a case are next to each other, so every strategy yields them in that
    # order, whichever worker ran which; each K consecutive reports become the case's.
    once = replace(settings, repeat=1)
    live = settings.live

    def halted() -> str | None:
        # As the runs' errors hold it: with what is secret struck out.
        stop = live.halted if live is not None else None
        return live.without_secrets(stop) if live is not None and stop is not None else None

    return grouped(_each(expanded(cases, settings.repeat), once), settings.repeat, halted)


def _each(cases: Sequence[Case], settings: RunSettings) -> Generator[CaseReport, None, None]:
    live = settings.live
    if settings.supervised and live is None and settings.jobs <= 1 and cases and can_fork():
        yield from _supervised(cases, settings)
        return
    if live is not None and live.config.max_concurrency > 1 and len(cases) > 1:
        yield from _on_threads(cases, settings, live)
        return
    if settings.jobs <= 1 or len(cases) <= 1 or live is not None:
        for _, report in _in_order_settled(enumerate(cases), settings):
            yield report
        return
    yield from _in_pool(cases, settings)


def _supervised(cases: Sequence[Case], settings: RunSettings) -> Generator[CaseReport, None, None]:
    """A serial run's cases, run in order by one forked worker that inherits them
    (:meth:`ForkedWorkers.over_cases`): a case that ends the worker's process is its run
    error, and the cases after it still run, each in a process of its own."""
    workers = ForkedWorkers.over_cases(cases, settings)
    try:
        yield from workers.run(range(len(cases)))
    except BaseException:  # an interrupt, or the reader left: stop the worker now
        workers.close(at_once=True)
        raise
    workers.close()


class Supervised:
    """The supervised worker of a front end that runs one case at a time (the pytest
    plugin): one forked worker over every case it may be asked for, which runs them in the
    order asked, in one process while none ends it (a process that died is replaced for
    the next case). :func:`evalrunner.session.case_verdict` takes its verdicts from it."""

    def __init__(self, cases: Sequence[Case], settings: RunSettings) -> None:
        self._index = {id(case): index for index, case in enumerate(cases)}
        self._workers = ForkedWorkers.over_cases(list(cases), settings)
        self._closed = False

    def holds(self, case: Case) -> bool:
        """Whether ``case`` is one of the cases this worker was made over (and it is open)."""
        return not self._closed and id(case) in self._index

    def runs(self, case: Case, settings: RunSettings) -> Generator[CaseReport, None, None]:
        """The reports of the ``settings.repeat`` runs of ``case``, one after another; each
        run settles its agents' held verdicts before its report, as a one-case run does."""
        index = self._index[id(case)]
        try:
            for _ in range(max(1, settings.repeat)):
                yield from self._workers.run([index])
        except GeneratorExit:
            raise  # the reader has what it wanted: the worker waits for the next case
        except BaseException:  # an interrupt: the worker stops now
            self.close(at_once=True)
            raise

    def close(self, *, at_once: bool = False) -> None:
        """End the worker (:meth:`ForkedWorkers.close`); later cases run in this process."""
        if not self._closed:
            self._closed = True
            self._workers.close(at_once=at_once)


def _on_threads(
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
    futures = [pool.submit(evaluate_held, case, settings) for case in cases]
    holding = _Holding(settings)
    given = taken = 0
    try:
        for index, future in enumerate(futures):
            holding.add(index, *future.result())
            taken += 1
            for _, report in holding.ready():
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
        for _, report in holding.rest():
            given += 1
            yield report
        last = max((i for i, done in enumerate(finished) if done), default=-1)
        for index in range(taken, last + 1):
            future = futures[index]
            if finished[index] and future.exception() is None:
                yield _final(*future.result())
            else:
                yield skipped_report(cases[index], SKIP_INTERRUPTED)
        raise
    pool.shutdown()
    for _, report in holding.rest():
        yield report


# --- worker processes: what the pool and the forked workers share ---------------------------

FINISH_GRACE_SECS = 30.0
"""How long a worker that has sent its last report may take to end its agents and exit."""

BATCH = 32
BATCH_SECS = 0.05
"""A worker sends its reports when it has BATCH of them, or BATCH_SECS after the last send."""

DEATH_CHECK_SECS = 0.5
"""How often the parent asks whether a worker that has sent nothing has died."""

STOP_GRACE_SECS = 5.0
"""How long a worker told to stop (an interrupt) may take to end its case and its agents."""


def can_fork() -> bool:
    """Whether this platform starts workers by fork (they inherit the fixture list and the
    settings, and nothing need be pickled to start them)."""
    # multiprocessing is imported only by runs with jobs: a serial run starts no worker
    # machinery.
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


_WORKER_SETTINGS: RunSettings | None = None


_STOP_SIGNAL: int | None = None
"""In a worker: the signal the parent stopped it with, once it came (see _told_to_stop)."""

_RUNNING_CASES = False
"""In a worker: whether a call of the parent's is running cases at this moment."""


def _start_worker(settings: RunSettings) -> None:
    global _WORKER_SETTINGS
    # Interrupts are the parent's to handle: it stops the workers itself, with SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _told_to_stop)
    built = settings.in_worker() if settings.in_worker is not None else settings
    # A worker runs one run of a case per call: the parent expanded the repeats already. It
    # is the supervised process itself: it forks no worker of its own.
    _WORKER_SETTINGS = replace(built, repeat=1, supervised=False)


def _told_to_stop(signum: int, frame: object) -> None:
    """A worker's SIGTERM (the pool's, or one running a case in its own process): the case
    under way ends as an interrupted case ends serially (its agent stopped), and no case
    starts after it.

    Raising alone does not end a pool worker. The pool's worker loop catches whatever a call
    raises, sends it back as the call's result and takes the next call already queued: the
    worker would start that case's agent, be killed at the end of the grace period, and
    leave the agent running. Raised while the worker waits for a call, the exception would
    leave the pool's loop and end the worker as a crash (a traceback, a broken pool). So the
    signal is raised only into a call running cases, and every later call is refused at once
    (_run_in_worker): once every call it sent is answered, the pool tells the worker to
    leave, and it leaves by the loop's own return, through its exit hooks, which end the
    agents it started (a persistent command agent waiting for its next case).
    """
    global _STOP_SIGNAL
    _STOP_SIGNAL = signum
    if _RUNNING_CASES:
        raise RunInterrupted(signum)


def _run_in_worker(batch: Sequence[tuple[int, Case]]) -> list[tuple[int, CaseReport]]:
    global _RUNNING_CASES
    settings = _WORKER_SETTINGS
    assert settings is not None, "worker not started"
    reports: list[tuple[int, CaseReport]] = []

    def starting() -> Iterator[tuple[int, Case]]:
        for index, case in batch:
            if _STOP_SIGNAL is not None:  # told to stop: no case starts (see _told_to_stop)
                raise RunInterrupted(_STOP_SIGNAL)
            yield index, case

    _RUNNING_CASES = True
    try:
        # Each call settles its own cases: the next call may go to another worker.
        reports.extend(_in_order_settled(starting(), settings))
    finally:
        _RUNNING_CASES = False
    return reports


def _in_pool(cases: Sequence[Case], settings: RunSettings) -> Iterator[CaseReport]:
    # Imported here: forked workers (every run with jobs where the platform forks) need none
    # of the pool machinery, and concurrent.futures brings logging with it.
    import multiprocessing
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    methods = multiprocessing.get_all_start_methods()
    # fork starts a worker without a new interpreter, and it inherits what the parent imported.
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
    # the cases not yet reported run again, each in a process of its own, so that only the
    # case that kills its process errors, and every other case gets its verdict.
    reran = []
    for index in range(following, len(cases)):
        if index not in done:
            done[index] = run_in_own_process(cases[index], context, shipped)
            reran.append(done[index])
        yield done.pop(index)
    _explained(reran, "a --jobs worker of the pool")


def _pool(
    context: multiprocessing.context.BaseContext, jobs: int, settings: RunSettings
) -> ProcessPoolExecutor:
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=_start_worker, initargs=(settings,)
    )


def run_in_own_process(
    case: Case,
    context: multiprocessing.context.BaseContext,
    settings: RunSettings,
    *,
    supervising: bool = False,
) -> CaseReport:
    """One case in a worker process of its own; a run error, naming how the process ended,
    when it dies before it reports (its own process, not a pool's, so that its exit status
    is known for certain). ``supervising``: it refuses ``os._exit`` as a supervised worker
    does (:meth:`ForkedWorkers.over_cases`)."""
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(  # type: ignore[attr-defined]
        target=_run_in_own_process, args=(settings, case, writer, supervising), daemon=True
    )
    try:
        process.start()
        writer.close()
        try:
            # Not a bare recv(): a process the agent forked may hold the pipe (and the
            # sentinel) open after the worker died; only waitpid says so for certain.
            while not reader.poll(DEATH_CHECK_SECS):
                if process.exitcode is not None and not reader.poll():
                    raise EOFError
            report: CaseReport
            late: list[str]
            report, late = reader.recv()
            for attempt in late:
                note_unexplained_death(attempt)
        except EOFError:  # died without a word
            process.join()
            return report_without_run(case, error=worker_died(process.exitcode))
        process.join()
        return report
    except BaseException:
        if process.pid is not None:  # started: its case ends, and its exit hooks its agents
            _stop([process])
        raise
    finally:
        reader.close()


def _explained(reran: Sequence[CaseReport], worker: str) -> None:
    """After a worker's death its unreported cases ran again, each alone: when none of them
    ended its process, the death came from outside them (a daemon thread of an earlier
    case, say), and the run fails for it (:func:`evalrunner.process_exit.note_unexplained_death`)
    rather than passing with every case green."""
    if reran and not any(ended_its_process(report) for report in reran):
        note_unexplained_death(
            f"{worker} died while running cases that, run again alone, ended cleanly"
        )


def worker_died(code: int | None) -> str:
    """The run error of a case whose worker process died while running it."""
    return (
        f"{_DIED} ({_ending(code)}): the agent or a tool "
        "ended the process (os._exit, exec, a signal, a crash in native code)"
    )


def ended_its_process(report: CaseReport) -> bool:
    """Whether a case's run ended in the agent or a tool ending its process (``os._exit``
    refused in this process, or a worker process that died running it)."""
    return any(
        run.error is not None and (run.error.startswith(_DIED) or _EXIT_REFUSED in run.error)
        for run in (report, *report.runs)
    )


_DIED = "the worker process running this case died"
_EXIT_REFUSED = "which would have ended the whole run"
"""The end of :mod:`evalrunner.replay`'s run error for an ``os._exit`` it refused."""


def _run_in_own_process(
    settings: RunSettings, case: Case, writer: Any, supervising: bool = False
) -> None:
    with own_refusal() if supervising else contextlib.nullcontext():
        _start_worker(settings)
        try:
            ((_, report),) = _run_in_worker([(0, case)])
        except RunInterrupted:
            return  # stopped by the parent, which reports the interrupt: nothing to say
        writer.send((report, unclaimed()))
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
    """End the workers now (an interrupt): each is told to stop (SIGTERM), so that its case
    ends and stops its agent, as forked workers are, and leaves once the pool has the
    answers to the calls it sent (see _told_to_stop)."""
    processes = list(getattr(executor, "_processes", {}).values())
    # The processes first: shutting down forgets them. Without waiting: the pool tells the
    # workers to leave only once every call sent has been answered.
    executor.shutdown(wait=False, cancel_futures=True)
    _stop(processes)


def _stop(processes: Sequence[Any]) -> None:
    """Tell each worker to stop (SIGTERM) and reap it; one still running after
    :data:`STOP_GRACE_SECS` is killed, which its agents outlive: so only as the last resort."""
    for process in processes:
        with contextlib.suppress(OSError, AttributeError):
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE_SECS
    for process in processes:
        with contextlib.suppress(OSError, AttributeError, ValueError):
            process.join(max(0.0, deadline - time.monotonic()))
            if process.exitcode is None:
                process.kill()


# --- forked workers that admit their own share ----------------------------------------------

Admitter = Callable[[Sequence[Fixture]], Admission]
"""Admits a list of fixtures (in a worker: its share; in the parent: one to run again)."""


@dataclass(frozen=True, slots=True)
class CaseSummary:
    """What the parent learns of one case a forked worker admitted: enough to select it."""

    index: int
    """The fixture's place in the suite's fixture list."""
    name: str
    case_class: CaseClass | None


@dataclass
class _Worker:
    """One forked worker, as the parent sees it."""

    process: Any
    connection: Connection
    share: list[int]
    pending: dict[int, None] = field(default_factory=dict)
    """The cases it was asked to run and has not reported yet."""
    slot: int = 0
    admitted: bool = False
    """Whether its first message (what it admitted) was read."""
    death_known: bool = False
    """Whether its death was seen while it had cases to report (and those ran again)."""
    running: Any = None
    """The index of the case it last started and has not reported yet, or -1: a value in
    memory it shares with this process, so that a death names its case without a message
    per case."""


def _keep(
    worker: _Worker,
    message: tuple[list[tuple[int, CaseReport]], list[str]],
    wanted: set[int],
    done: dict[int, CaseReport],
) -> None:
    """File a worker's message: each report of a wanted case, no longer pending, and the
    ``os._exit`` calls it refused outside every case, which fail the run here."""
    reports, late = message
    for attempt in late:
        note_unexplained_death(attempt)
    for index, report in reports:
        if index in wanted:
            done[index] = report
            worker.pending.pop(index, None)


class ForkedWorkers:
    """``settings.jobs`` forked workers over ``fixtures``; worker ``w`` takes fixtures ``w``,
    ``w + jobs``, ... (interleaved, so that neighbouring cases, often alike, spread out).

    Each worker admits its share with ``admit`` and runs its cases with :func:`evaluate` on
    ``settings`` (built again in the worker by ``settings.in_worker``). A worker that dies
    has its unreported cases run again, each in a process of its own. A worker serves one
    :meth:`run` after another until :meth:`close`; one that died is replaced by the next
    :meth:`run` (:class:`Supervised` runs one case at a time so).

    :meth:`over_cases` makes one worker over cases admitted here, which it inherits: the
    supervisor of a serial run (:func:`execute`).
    """

    def __init__(
        self, fixtures: Sequence[Fixture], *, admit: Admitter, settings: RunSettings
    ) -> None:
        self._fixtures = fixtures
        self._admit = admit
        self._settings = settings
        self._supervising = False
        self._cases: Sequence[Case] | None = None
        self._workers: list[_Worker] = []
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self._context = context
        jobs = max(1, min(settings.jobs, len(fixtures)))
        try:
            for slot in range(jobs):
                self._workers.append(self._start(slot, list(range(slot, len(fixtures), jobs))))
        except BaseException:
            self.close()
            raise

    @classmethod
    def over_cases(cls, cases: Sequence[Case], settings: RunSettings) -> ForkedWorkers:
        """One worker over ``cases``, admitted here (the worker inherits them: nothing is
        admitted again, nor sent); it refuses ``os._exit`` as this process does
        (:func:`evalrunner.process_exit.own_refusal`), so that a call of it reads as it reads
        serially, and tells this process of the calls it refused outside every case."""
        workers = cls.__new__(cls)
        workers._fixtures = ()
        workers._admit = _nothing_to_admit
        workers._settings = replace(settings, jobs=1)
        workers._supervising = True
        workers._cases = cases
        workers._workers = []
        import multiprocessing

        workers._context = multiprocessing.get_context("fork")
        try:
            workers._workers.append(workers._start(0, list(range(len(cases)))))
        except BaseException:
            workers.close()
            raise
        return workers

    def _start(self, slot: int, share: list[int]) -> _Worker:
        """Fork the worker of ``share``."""
        ours, theirs = self._context.Pipe()
        # The parent's ends, this one's and the earlier workers', are closed in the child: a
        # worker holding one open would never see the parent hang up.
        parents = [ours, *(worker.connection for worker in self._workers)]
        load: Callable[[], tuple[bool, dict[int, Case]]]
        if self._cases is not None:
            load = partial(_given_share, self._cases, share)
        else:
            load = partial(_admitted_share, [self._fixtures[i] for i in share], share, self._admit)
        running = self._context.RawValue("i", -1)
        process = self._context.Process(
            target=_serve,
            args=(theirs, parents, load, self._settings, self._supervising, running),
            daemon=True,
            name=f"evalrunner worker {slot + 1}",
        )
        process.start()
        theirs.close()
        return _Worker(process, ours, share, slot=slot, running=running)

    def admitted(self) -> list[CaseSummary] | None:
        """Every admitted case, in fixture order; ``None`` when some file was refused or a
        worker could not say (the caller then admits serially, and reports exactly)."""
        found: list[CaseSummary] = []
        for worker in self._workers:
            try:
                clean, cases = worker.connection.recv()
            except (EOFError, OSError):
                return None
            worker.admitted = True
            if not clean:
                return None
            found.extend(CaseSummary(*case) for case in cases)
        return sorted(found, key=lambda case: case.index)

    def run(self, order: Sequence[int]) -> Iterator[CaseReport]:
        """Run the cases of these fixture indices; their reports, in this order.

        Interrupted (:class:`RunInterrupted`), it stops the workers, takes the reports they
        had finished, yields those that follow in order, and re-raises."""
        wanted = set(order)
        self._replace_the_dead()
        owner = {index: worker for worker in self._workers for index in worker.share}
        for worker in self._workers:
            share = [index for index in order if owner[index] is worker]
            with contextlib.suppress(OSError):  # died already: its cases run again, alone
                worker.connection.send(share)
            # A dict, not a list: each report takes its case off in constant time (a list's
            # remove is linear, and a large suite's reports would make it quadratic).
            worker.pending = dict.fromkeys(share)
        done: dict[int, CaseReport] = {}
        running = [worker for worker in self._workers if worker.pending]
        position = [0]  # how many of ``order`` have been yielded
        try:
            while position[0] < len(order):
                if order[position[0]] in done:
                    position[0] += 1
                    yield done.pop(order[position[0] - 1])
                    continue
                self._gather(running, wanted, done)
        except RunInterrupted:
            self._drain(running, wanted, done)
            while position[0] < len(order) and order[position[0]] in done:
                position[0] += 1
                yield done.pop(order[position[0] - 1])
            raise

    def _replace_the_dead(self) -> None:
        """A worker that died (its cases were run again, each alone) is replaced by a fresh
        one over the same share, for the next :meth:`run`; a worker's first message (what it
        admitted) is read here, unless :meth:`admitted` read it."""
        for position, worker in enumerate(self._workers):
            if worker.process.exitcode is not None:
                _died_between_cases(worker, "between cases")
                with contextlib.suppress(OSError):
                    worker.connection.close()
                worker = self._workers[position] = self._start(worker.slot, worker.share)
            if not worker.admitted:
                with contextlib.suppress(EOFError, OSError):
                    worker.connection.recv()  # a death now shows as the run's
                worker.admitted = True

    def _gather(
        self, running: list[_Worker], wanted: set[int], done: dict[int, CaseReport]
    ) -> None:
        """Wait for a message of any running worker (or its death), and take it."""
        # A process the agent forked inherits the worker's end of the pipe and its sentinel,
        # and may hold both open after the worker died: so a worker's death is also asked of
        # the process itself (waitpid), every DEATH_CHECK_SECS.
        from multiprocessing.connection import wait

        ready = set(wait([w.connection for w in running], timeout=DEATH_CHECK_SECS))
        for worker in list(running):
            if worker.connection in ready or worker.connection.poll():
                self._take(worker, wanted, done)
            elif worker.process.exitcode is not None:
                self._rerun_after_death(worker, done)
            if not worker.pending:
                running.remove(worker)

    def _drain(self, running: list[_Worker], wanted: set[int], done: dict[int, CaseReport]) -> None:
        """An interrupt: stop the workers, and take the reports they send as they stop."""
        for worker in running:
            with contextlib.suppress(OSError, AttributeError):
                worker.process.terminate()  # SIGTERM: see _serve
        deadline = time.monotonic() + STOP_GRACE_SECS
        for worker in running:
            while time.monotonic() < deadline:
                try:
                    if not worker.connection.poll(DEATH_CHECK_SECS):
                        if worker.process.exitcode is not None:
                            break
                        continue
                    message = worker.connection.recv()
                except Exception:  # the end, or a message cut by the stop: nothing more
                    break
                _keep(worker, message, wanted, done)

    def _take(self, worker: _Worker, wanted: set[int], done: dict[int, CaseReport]) -> None:
        """Read one message of ``worker``'s; at the pipe's end, it died."""
        try:
            message = worker.connection.recv()
        except (EOFError, OSError):
            self._rerun_after_death(worker, done)
            return
        _keep(worker, message, wanted, done)

    def _rerun_after_death(self, worker: _Worker, done: dict[int, CaseReport]) -> None:
        # The worker died with cases unreported: the one it was running killed it, and which
        # one that was is found by running each in a process of its own.
        worker.process.join()
        worker.death_known = True
        running = worker.running.value if worker.running is not None else -1
        reran = []
        for index in worker.pending:
            report = self._in_own_process(index)
            if index == running and not ended_its_process(report):
                # It was running when the process died, and alone it ends cleanly: what
                # ended the process came from what ran before it there. Still its run error.
                report = replace(
                    report,
                    error=f"{worker_died(worker.process.exitcode)}; run again alone, in a "
                    "process of its own, it ended cleanly, so what ended the process depends "
                    "on the cases that ran before it there",
                    grades=(),
                )
            done[index] = report
            reran.append(report)
        worker.pending = {}
        ending = _ending(worker.process.exitcode)
        _explained(reran, f"{worker.process.name} ({ending})")

    def _in_own_process(self, index: int) -> CaseReport:
        if self._cases is not None:
            return run_in_own_process(
                self._cases[index], self._context, self._settings, supervising=True
            )
        fixture = self._fixtures[index]
        admission = self._admit([fixture])
        if admission.cases:
            return run_in_own_process(admission.cases[0], self._context, self._settings)
        # Admitted in the worker, refused now: the file changed on disk during the run.
        return CaseReport(
            name=fixture.source,
            source=fixture.source,
            case_class=None,
            grades=(),
            error="the fixture changed during the run and no longer admits: "
            f"{admission.errors[0] if admission.errors else 'no case'}",
            path=str(fixture.path),
        )

    @staticmethod
    def _say_goodbye(worker: _Worker) -> None:
        """Tell a worker waiting for its orders that the run is over, and take what it
        refused outside every case since its last report (a thread that outlived its case).
        One that was serving and died without an answer died after its last case."""
        serving = worker.admitted
        # EOFError, OSError: it left already (stood down, or dead): nothing to take.
        with contextlib.suppress(EOFError, OSError):
            if not worker.admitted:
                worker.connection.recv()  # what it admitted: no one asked
                worker.admitted = True
            worker.connection.send(None)
            if worker.connection.poll(STOP_GRACE_SECS):
                _keep(worker, worker.connection.recv(), set(), {})
                return
        if serving:
            worker.process.join(STOP_GRACE_SECS)
            _died_between_cases(worker, "after its last case")

    def close(self, *, at_once: bool = False) -> None:
        """Let every worker finish and reap it; ``at_once`` (an interrupt) tells each to
        stop its case first (SIGTERM).

        A worker that finishes runs its exit hooks, which end the agent processes it started
        (a persistent command agent); one still running after a grace period is killed.
        """
        if not at_once:
            for worker in self._workers:
                self._say_goodbye(worker)
        for worker in self._workers:
            with contextlib.suppress(OSError):
                worker.connection.close()  # a worker waiting for its orders leaves
        if at_once:
            for worker in self._workers:
                with contextlib.suppress(OSError, AttributeError):
                    worker.process.terminate()  # SIGTERM: see _serve
        for worker in self._workers:
            worker.process.join(STOP_GRACE_SECS if at_once else FINISH_GRACE_SECS)
            if worker.process.is_alive():
                with contextlib.suppress(OSError, AttributeError):
                    worker.process.kill()
                worker.process.join()
        self._workers = []


def _died_between_cases(worker: _Worker, when: str) -> None:
    """A worker that was serving cases died while it ran none (a thread of an earlier case,
    say, ending it with ``ctypes``' ``_exit``): no case carries that, so the run fails for it
    (:func:`evalrunner.process_exit.note_unexplained_death`), as for an ``os._exit`` refused
    outside every case."""
    code = worker.process.exitcode
    if code is None or worker.death_known or not worker.admitted:
        return
    worker.death_known = True
    note_unexplained_death(f"{worker.process.name} ended {when} ({_ending(code)})")


def _admitted_share(
    fixtures: Sequence[Fixture], share: Sequence[int], admit: Admitter
) -> tuple[bool, dict[int, Case]]:
    """In a worker: its share admitted, each case by its fixture's index; and whether every
    file was admitted."""
    admission = admit(fixtures)
    index_of = {str(f.path): index for f, index in zip(fixtures, share, strict=True)}
    return not admission.errors, {index_of[str(case.source)]: case for case in admission.cases}


def _given_share(cases: Sequence[Case], share: Sequence[int]) -> tuple[bool, dict[int, Case]]:
    """In a worker over cases admitted by its parent: its share, by index."""
    return True, {index: cases[index] for index in share}


def _nothing_to_admit(fixtures: Sequence[Fixture]) -> Admission:
    raise AssertionError("a worker over admitted cases admits nothing")


def _serve(
    connection: Connection,
    parents: Sequence[Connection],
    load: Callable[[], tuple[bool, dict[int, Case]]],
    settings: RunSettings,
    supervising: bool,
    running: Any,
) -> None:
    """A forked worker: load (admit) the share, say what it holds, then run each list of
    cases the parent sends, until the parent hangs up.

    Each message to the parent is a batch of reports and what this process refused outside
    every case (``os._exit`` from a thread that outlived its case: see
    :func:`evalrunner.process_exit.own_refusal`), which the parent holds against the run."""
    for inherited in parents:
        inherited.close()
    # RunInterrupted here: stopped by the parent between cases (no case was under way,
    # nothing to say), or just as the finally began, before the handler was reset.
    with contextlib.suppress(RunInterrupted):
        try:
            with own_refusal() if supervising else contextlib.nullcontext():
                _serve_orders(connection, load, settings, running)
        finally:
            # Served: a SIGTERM from here on (the parent stopping the workers at once) ends
            # the process as SIGTERM does, not with a traceback from its shutdown.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _serve_orders(
    connection: Connection,
    load: Callable[[], tuple[bool, dict[int, Case]]],
    settings: RunSettings,
    running: Any,
) -> None:
    _start_worker(settings)
    built = _WORKER_SETTINGS
    assert built is not None
    # SIGTERM is how the parent stops forked workers on an interrupt: the case under way
    # ends as an interrupted case does serially (its agent, a command's process group, is
    # stopped), and the worker's exit hooks end the agents it started.
    signal.signal(signal.SIGTERM, _interrupted)
    clean, cases = load()
    summary = [(index, case.name, case.case_class) for index, case in sorted(cases.items())]
    with contextlib.suppress(OSError):
        connection.send((clean, summary))
    while True:
        try:
            order: list[int] | None = connection.recv()
            if order is None:  # the run is over: what was refused since, then leave
                connection.send(([], unclaimed()))
                return
        except (EOFError, OSError):
            return  # the parent stood the workers down
        if not _serve_order(connection, order, cases, built, running):
            return


def _serve_order(
    connection: Connection,
    order: Sequence[int],
    cases: dict[int, Case],
    built: RunSettings,
    running: Any,
) -> bool:
    """Run the cases of ``order`` and send their reports; whether to wait for more."""
    batch: list[tuple[int, CaseReport]] = []

    def starting() -> Iterator[tuple[int, Case]]:
        for index in order:
            running.value = index  # what the parent blames if this process dies now
            yield index, cases[index]

    try:
        sent = time.monotonic()
        # Held verdicts settle here: the worker's agent processes end before its last reports.
        for index, report in _in_order_settled(starting(), built):
            batch.append((index, _portable(report)))
            if running.value == index:
                running.value = -1
            # Batched, since each message wakes the parent; but never held back long, so
            # that progress flows.
            if len(batch) >= BATCH or time.monotonic() - sent >= BATCH_SECS:
                connection.send((batch, unclaimed()))
                batch, sent = [], time.monotonic()
        connection.send((batch, unclaimed()))
    except (EOFError, OSError):
        return False  # the parent stood the workers down, or stopped listening
    except RunInterrupted:
        # Stopped by the parent (an interrupt): what finished is still the parent's to report.
        with contextlib.suppress(OSError):
            connection.send((batch, unclaimed()))
        return False
    return True


def _interrupted(signum: int, frame: object) -> None:
    raise RunInterrupted(signum)


def _portable(report: CaseReport) -> CaseReport:
    """The report as the parent needs it: positions point into a failed case's text only,
    so a passed case sends none, and a failed one its positions found (not its text)."""
    return replace(report, positions={} if report.passed else dict(report.positions))
