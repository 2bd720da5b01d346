"""``--jobs``: worker processes.

Where the platform can fork, a :class:`Crew` of workers each loads, admits and runs its own
share of the suite. Elsewhere (spawn), or when a run goes on past refused files
(``--continue-on-admission-errors``), :func:`in_pool` runs cases admitted here in a process
pool. Imported only by runs with jobs: a serial run starts no worker machinery.

The crew.

Shipping cases to workers and their reports back costs about as much as admitting a case, and
admitting every case in the parent first leaves the workers idle while it does. So each worker
takes every J-th fixture, loads and admits it, and tells the parent only what the selection
needs (fixture index, case name, class). The shares are fixed before the fork. Handed out
instead as the workers admit, the faster taking more, they balanced the bench's cheap cases
better, but a small suite's files all went to the first worker, which had admitted them
before the second started, and it then ran every case alone, however slow its agent.

The parent checks what spans the suite (unique names, ``-k``, the shard), then tells each
worker which of its cases to run; the reports come back in batches and are handed on in
suite order. Cases are never sent between processes.

The crew only runs a suite that admits cleanly: as soon as any share has a refused file, or
two shares use one case name, it stands down and the caller admits serially, so every refusal
reads exactly as in a serial run. Nothing runs before the whole suite is admitted.

Like the pool in :mod:`evalrunner.session`, a worker that dies (``os._exit``, a crash in
native code) fails only the case it was running: its cases not yet reported run again, each
in a process of its own.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalrunner.admit import admit, admit_documents
from evalrunner.agent import reference_agent
from evalrunner.cache import AdmissionCache
from evalrunner.load import Fixture, load_document
from evalrunner.model import Case, CaseClass, CaseReport, RunInterrupted
from evalrunner.session import (
    RunSettings,
    admit_with_cache,
    evaluate_with,
    report_without_run,
)

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

FINISH_GRACE_SECS = 30.0
"""How long a worker that has sent its last report may take to end its agents and exit."""

BATCH = 32
BATCH_SECS = 0.05
"""A worker sends its reports when it has BATCH of them, or BATCH_SECS after the last send."""

DEATH_CHECK_SECS = 0.5
"""How often the parent asks whether a worker that has sent nothing has died."""

STOP_GRACE_SECS = 5.0
"""How long a worker told to stop (an interrupt) may take to end its case and its agents."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """What the parent learns of one admitted case: enough to select it."""

    index: int
    """The fixture's place in the suite's fixture list."""
    name: str
    case_class: CaseClass | None


def can_fork() -> bool:
    """Whether this platform starts workers by fork (they inherit the fixture list and the
    settings, and nothing need be pickled to start them)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _keep(
    member: _Member,
    reports: list[tuple[int, CaseReport]],
    wanted: set[int],
    done: dict[int, CaseReport],
) -> None:
    """File a worker's message: each report of a wanted case, no longer pending."""
    for index, report in reports:
        if index in wanted:
            done[index] = report
            member.pending.pop(index, None)


class Crew:
    """``jobs`` forked workers over ``fixtures``; worker ``w`` takes fixtures ``w``,
    ``w + jobs``, ... (interleaved, so that neighbouring cases, often alike, spread out).

    ``evaluate`` replays and grades one case in a worker (built there by ``start``, which is
    called first in each worker, as a pool initializer would be). ``run_alone`` runs one case
    in a process of its own, for the cases of a worker that died.
    """

    def __init__(
        self,
        fixtures: Sequence[Fixture],
        *,
        jobs: int,
        max_bytes: int,
        cache_dir: Path | None,
        start: Callable[[], Callable[[Case], CaseReport]],
        run_alone: Callable[[Case], CaseReport],
    ) -> None:
        self._fixtures = fixtures
        self._max_bytes = max_bytes
        self._run_alone = run_alone
        self._members: list[_Member] = []
        context = multiprocessing.get_context("fork")
        jobs = max(1, min(jobs, len(fixtures)))
        try:
            for slot in range(jobs):
                share = list(range(slot, len(fixtures), jobs))
                ours, theirs = context.Pipe()
                # The parent's ends, this one's and the earlier workers', are closed in the
                # child: a worker holding one open would never see the parent hang up.
                parents = [ours, *(member.connection for member in self._members)]
                process = context.Process(
                    target=_serve,
                    args=(
                        theirs,
                        parents,
                        [fixtures[i] for i in share],
                        share,
                        max_bytes,
                        cache_dir,
                        start,
                    ),
                    daemon=True,
                    name=f"evalrunner worker {slot + 1}",
                )
                process.start()
                theirs.close()
                self._members.append(_Member(process, ours, share))
        except BaseException:
            self.close()
            raise

    def admitted(self) -> list[Admitted] | None:
        """Every admitted case, in fixture order; ``None`` when some file was refused or a
        worker could not say (the caller then admits serially, and reports exactly)."""
        found: list[Admitted] = []
        for member in self._members:
            try:
                clean, cases = member.connection.recv()
            except (EOFError, OSError):
                return None
            if not clean:
                return None
            found.extend(Admitted(*case) for case in cases)
        return sorted(found, key=lambda case: case.index)

    def run(self, order: Sequence[int]) -> Iterator[CaseReport]:
        """Run the cases of these fixture indices; their reports, in this order.

        Interrupted (:class:`RunInterrupted`), it stops the workers, takes the reports they
        had finished, yields those that follow in order, and re-raises."""
        wanted = set(order)
        owner = {index: member for member in self._members for index in member.share}
        for member in self._members:
            share = [index for index in order if owner[index] is member]
            member.connection.send(share)
            # A dict, not a list: each report takes its case off in constant time (a list's
            # remove is linear, and a large suite's reports would make it quadratic).
            member.pending = dict.fromkeys(share)
        done: dict[int, CaseReport] = {}
        live = [member for member in self._members if member.pending]
        position = [0]  # how many of ``order`` have been yielded
        try:
            while position[0] < len(order):
                if order[position[0]] in done:
                    position[0] += 1
                    yield done.pop(order[position[0] - 1])
                    continue
                self._gather(live, wanted, done)
        except RunInterrupted:
            self._drain(live, wanted, done)
            while position[0] < len(order) and order[position[0]] in done:
                position[0] += 1
                yield done.pop(order[position[0] - 1])
            raise

    def _gather(self, live: list[_Member], wanted: set[int], done: dict[int, CaseReport]) -> None:
        """Wait for a message of any live worker (or its death), and take it."""
        # A process the agent forked inherits the worker's end of the pipe and its sentinel,
        # and may hold both open after the worker died: so a worker's death is also asked of
        # the process itself (waitpid), every DEATH_CHECK_SECS.
        ready = set(wait([m.connection for m in live], timeout=DEATH_CHECK_SECS))
        for member in list(live):
            if member.connection in ready or member.connection.poll():
                self._take(member, wanted, done)
            elif member.process.exitcode is not None:
                self._buried(member, done)
            if not member.pending:
                live.remove(member)

    def _drain(self, live: list[_Member], wanted: set[int], done: dict[int, CaseReport]) -> None:
        """An interrupt: stop the workers, and take the reports they send as they stop."""
        for member in live:
            with contextlib.suppress(OSError, AttributeError):
                member.process.terminate()  # SIGTERM: see _serve
        deadline = time.monotonic() + STOP_GRACE_SECS
        for member in live:
            while time.monotonic() < deadline:
                try:
                    if not member.connection.poll(DEATH_CHECK_SECS):
                        if member.process.exitcode is not None:
                            break
                        continue
                    reports: list[tuple[int, CaseReport]] = member.connection.recv()
                except Exception:  # the end, or a message cut by the stop: nothing more
                    break
                _keep(member, reports, wanted, done)

    def _take(self, member: _Member, wanted: set[int], done: dict[int, CaseReport]) -> None:
        """Read one message of ``member``'s; at the pipe's end, bury it."""
        try:
            reports: list[tuple[int, CaseReport]] = member.connection.recv()
        except (EOFError, OSError):
            self._buried(member, done)
            return
        _keep(member, reports, wanted, done)

    def _buried(self, member: _Member, done: dict[int, CaseReport]) -> None:
        # The worker died with cases unreported: the one it was running killed it, and which
        # one that was is found by running each alone.
        member.process.join()
        for index in member.pending:
            done[index] = self._alone(index)
        member.pending = {}

    def _alone(self, index: int) -> CaseReport:
        fixture = self._fixtures[index]
        document = load_document(fixture.path, max_bytes=self._max_bytes)
        outcome = admit(document) if not isinstance(document, list) else document
        if isinstance(outcome, Case):
            return self._run_alone(outcome)
        # Admitted in the worker, refused now: the file changed on disk during the run.
        return CaseReport(
            name=fixture.source,
            source=fixture.source,
            case_class=None,
            grades=(),
            error=f"the fixture changed during the run and no longer admits: {outcome[0]}",
            path=str(fixture.path),
        )

    def close(self, *, at_once: bool = False) -> None:
        """Let every worker finish and reap it; ``at_once`` (an interrupt) tells each to
        stop its case first (SIGTERM).

        A worker that finishes runs its exit hooks, which end the agent processes it started
        (a persistent command agent); one still running after a grace period is killed.
        """
        for member in self._members:
            with contextlib.suppress(OSError):
                member.connection.close()  # a worker waiting for its orders leaves
        if at_once:
            for member in self._members:
                with contextlib.suppress(OSError, AttributeError):
                    member.process.terminate()  # SIGTERM: see _serve
        for member in self._members:
            member.process.join(STOP_GRACE_SECS if at_once else FINISH_GRACE_SECS)
            if member.process.is_alive():
                with contextlib.suppress(OSError, AttributeError):
                    member.process.kill()
                member.process.join()
        self._members = []


@dataclass
class _Member:
    process: Any
    connection: Connection
    share: list[int]
    pending: dict[int, None] = field(default_factory=dict)
    """The cases it was asked to run and has not reported yet."""


def _serve(
    connection: Connection,
    parents: Sequence[Connection],
    fixtures: Sequence[Fixture],
    share: Sequence[int],
    max_bytes: int,
    cache_dir: Path | None,
    start: Callable[[], Callable[[Case], CaseReport]],
) -> None:
    """A worker: admit the share, say what was admitted, run what the parent asks for."""
    for inherited in parents:
        inherited.close()
    evaluate = start()
    # SIGTERM is how the parent stops a crew on an interrupt: the case under way ends as an
    # interrupted case does serially (its agent, a command's process group, is stopped),
    # and the worker's exit hooks end the agents it started.
    signal.signal(signal.SIGTERM, _interrupted)
    if cache_dir is not None:
        admission = admit_with_cache(fixtures, AdmissionCache(cache_dir), max_bytes)
    else:
        admission = admit_documents(load_document(f.path, max_bytes=max_bytes) for f in fixtures)
    index_of = {os.fspath(f.path): index for f, index in zip(fixtures, share, strict=True)}
    cases = {index_of[os.fspath(case.source)]: case for case in admission.cases}
    summary = [(index, case.name, case.case_class) for index, case in sorted(cases.items())]
    with contextlib.suppress(OSError):
        connection.send((not admission.errors, summary))
    batch: list[tuple[int, CaseReport]] = []
    try:
        order: list[int] = connection.recv()
        sent = time.monotonic()
        for index in order:
            batch.append((index, _portable(evaluate(cases[index]))))
            # Batched, since each message wakes the parent (a message a case cost as much as
            # a tenth of the case); but never held back long, so that progress flows.
            if len(batch) >= BATCH or time.monotonic() - sent >= BATCH_SECS:
                connection.send(batch)
                batch, sent = [], time.monotonic()
        if batch:
            connection.send(batch)
    except (EOFError, OSError):
        return  # the parent stood the crew down, or stopped listening: nothing to say
    except RunInterrupted:
        # Stopped by the parent (an interrupt): what finished is still the parent's to report.
        with contextlib.suppress(OSError):
            if batch:
                connection.send(batch)
        return


def _interrupted(signum: int, frame: object) -> None:
    raise RunInterrupted(signum)


def _portable(report: CaseReport) -> CaseReport:
    """The report as the parent needs it: positions point into a failed case's text only,
    so a passed case sends none, and a failed one its positions found (not its text)."""
    return replace(report, positions={} if report.passed else dict(report.positions))


# --- the pool, and what both share ------------------------------------------------------------


def evaluator_in_worker(settings: RunSettings) -> Callable[[Case], CaseReport]:
    _start_worker(settings)
    built = _WORKER_SETTINGS
    assert built is not None
    return partial(evaluate_with, settings=built)


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
    _WORKER_SETTINGS = settings.in_worker() if settings.in_worker is not None else settings


def _told_to_stop(signum: int, frame: object) -> None:
    """A worker's SIGTERM (the pool's, or one running a case alone): the case under way ends
    as an interrupted case ends serially (its agent stopped), and no case starts after it.

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
    _RUNNING_CASES = True
    try:
        for index, case in batch:
            if _STOP_SIGNAL is not None:  # told to stop: no case starts (see _told_to_stop)
                raise RunInterrupted(_STOP_SIGNAL)
            reports.append((index, evaluate_with(case, settings)))
    finally:
        _RUNNING_CASES = False
    return reports


def in_pool(cases: Sequence[Case], settings: RunSettings) -> Iterator[CaseReport]:
    # Imported here: a crew (every run with jobs where the platform forks) needs none of the
    # pool machinery, and concurrent.futures brings logging with it (11 ms before the fork).
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

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
            done[index] = run_alone(cases[index], context, shipped)
        yield done.pop(index)


def _pool(
    context: multiprocessing.context.BaseContext, jobs: int, settings: RunSettings
) -> ProcessPoolExecutor:
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=_start_worker, initargs=(settings,)
    )


def run_alone(
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
            # Not a bare recv(): a process the agent forked may hold the pipe (and the
            # sentinel) open after the worker died; only waitpid says so for certain.
            while not reader.poll(DEATH_CHECK_SECS):
                if process.exitcode is not None and not reader.poll():
                    raise EOFError
            report: CaseReport = reader.recv()
        except EOFError:  # died without a word
            process.join()
            return report_without_run(
                case,
                error=f"the worker process running this case died "
                f"({_ending(process.exitcode)}): the agent or a tool ended the process "
                "(os._exit, a crash in native code)",
            )
        process.join()
        return report
    except BaseException:
        if process.pid is not None:  # started: its case ends, and its exit hooks its agents
            _stop([process])
        raise
    finally:
        reader.close()


def _run_alone_in_worker(settings: RunSettings, case: Case, writer: Any) -> None:
    _start_worker(settings)
    try:
        ((_, report),) = _run_in_worker([(0, case)])
    except RunInterrupted:
        return  # stopped by the parent, which reports the interrupt: nothing to say
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
    """End the workers now (an interrupt): each is told to stop (SIGTERM), so that its case
    ends and stops its agent, as a crew's workers are, and leaves once the pool has the
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
