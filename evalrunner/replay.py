"""Stage 3, replay: run one admitted case through an agent and record what happened.

Each case gets a fresh replay provider behind a conversation monitor, observer, tools, agent and
temporary workspace; cases cannot see one another. A run error (script exhausted or left over,
a conformance violation, the iteration cap, any exception that ends the agent) ends that case's
run and is kept in the record; it never stops the suite.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import os
import queue
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

from evalrunner.agents.reference import (
    DEFAULT_MAX_TOOL_ITERATIONS,
    AgentContext,
    AgentFactory,
    reference_agent,
)
from evalrunner.boundary.conformance import ConversationMonitor
from evalrunner.boundary.observer import RecordingObserver
from evalrunner.boundary.provider import ModelProvider, ReplayProvider, declared
from evalrunner.boundary.tools import (
    InvocationLog,
    ToolSource,
    fresh_tools,
    recorded_tools,
    with_doubles,
)
from evalrunner.model import Case, RunError, RunInterrupted, RunRecord, ToolCallRecord, TurnEnd
from evalrunner.process_exit import ProcessExitAttempt, process_exit_refused, watched

__all__ = ["ProcessExitAttempt", "process_exit_refused", "run_case"]


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(OSError):
            path.unlink()
        return

    def writable_then_retry(function: Any, name: str, _: object) -> None:
        # A directory the agent made read-only cannot be emptied until it is writable again.
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)
            function(name)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=writable_then_retry)
    else:
        shutil.rmtree(path, onerror=writable_then_retry)


class LazyWorkspace:
    """A case's workspace, made the first time the agent asks for it and removed (if it was
    made) by :meth:`remove`. Thread-safe: an agent may ask from any thread."""

    def __init__(self) -> None:
        self._path: Path | None = None
        self._removed = False
        self._lock = threading.Lock()

    def __call__(self) -> Path:
        with self._lock:
            if self._removed:
                raise RunError("the case's workspace was asked for after the case ended")
            if self._path is None:
                import tempfile  # only for the cases whose agent asks for a workspace

                self._path = Path(tempfile.mkdtemp(prefix="evalrunner-case-"))
            return self._path

    @property
    def made(self) -> bool:
        """Whether the agent asked for it."""
        return self._path is not None

    def remove(self) -> None:
        """Remove the directory if it was made; asking for it afterwards is a run error."""
        with self._lock:
            self._removed = True
            path, self._path = self._path, None
        if path is not None:
            _remove(path)


def run_case(
    case: Case,
    *,
    agent_factory: AgentFactory = reference_agent,
    tools: ToolSource | None = None,
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS,
    workspace: Path | None = None,
    timeout: float | None = None,
    trimmed_history: bool = False,
    provider: ModelProvider | None = None,
    framed_results: bool = False,
) -> RunRecord:
    """Replay ``case`` turn by turn and return its :class:`RunRecord`.

    ``provider`` is the model side (default: a :class:`ReplayProvider` serving the case's
    script; in live mode, a live provider). The monitor wraps whichever it is.

    ``tools`` defaults to the built-in tools; a function is called for this case's own.
    Without ``workspace``, a temporary one is made when the agent first reads
    ``context.workspace``, and removed when the run ends. With ``timeout`` (seconds), the
    agent runs on a case thread (one, reused from case to case, each case in a fresh
    :mod:`contextvars` context), unless the case runs only the reference agent and the
    built-in tools on its own script, which always end by themselves; if the case has not
    finished in time, the record says ``timed out after Ns`` and holds what was observed
    until then. Python cannot kill a
    thread, so a timed-out agent is abandoned with its thread (a daemon, after the agent's
    ``close()`` is called) rather than stopped; the next case gets a new thread.

    Every model request goes through a :class:`ConversationMonitor` (conformance checks,
    sticky errors); ``trimmed_history`` tells it the agent drops earlier turns on purpose,
    ``framed_results`` that it frames or truncates tool results on purpose.
    """
    if provider is not None:
        provider = declared(provider)
    lazy: LazyWorkspace | None = None
    where: Path | LazyWorkspace
    if workspace is None:
        where = lazy = LazyWorkspace()
    else:
        where = workspace
    try:
        monitor = ConversationMonitor(
            provider if provider is not None else ReplayProvider(case.turns),
            [turn.user_input for turn in case.turns],
            trimmed_history=trimmed_history,
            framed_results=framed_results,
            doubles=case.tools,
        )
        run = _CaseRun(case, agent_factory, tools, max_tool_iterations, where, monitor)
        run.provider = provider
        started = time.perf_counter()
        # A live model is not a finite script: its cases keep their timeout whatever the agent.
        # A double's schema may hold a pattern that backtracks for ever: its case keeps the timeout.
        ends = provider is None and not case.tools and _ends_by_itself(agent_factory, tools)
        # Watched: an os._exit from a thread the agent started (or one it caught on its own
        # thread) is this case's run error (:mod:`evalrunner.process_exit`).
        with watched() as watch:
            if timeout is None or ends:
                run.drive()
            else:
                _drive_in_time(run, timeout)
        if watch.attempts and run.error is None:
            run.error = _exit_attempted(watch.attempts)
        duration_ms = int((time.perf_counter() - started) * 1000)
        return _record(run, duration_ms)
    finally:
        if lazy is not None:
            lazy.remove()


def _ends_by_itself(agent_factory: AgentFactory, tools: ToolSource | None) -> bool:
    """Whether the case runs only evalrunner's own code, which cannot hang: the reference agent
    asks the model once per step of a finite script (or is stopped by the iteration cap), and
    the built-in tools return at once. A timeout guards code evalrunner did not write, so such
    a case runs on the calling thread and costs no hand-over to the case thread."""
    return agent_factory is reference_agent and tools is None


def _drive_in_time(run: _CaseRun, timeout: float) -> None:
    """Drive ``run`` on a case thread, giving up on it after ``timeout`` seconds."""
    thread = _CaseThread.take()
    finished = thread.start_case(run.drive)
    try:
        # Not Thread.join: interrupted by a signal handler's exception, join can mark a live
        # thread as stopped (CPython's bpo-45274 handling), and the agent of an interrupted
        # case would then never be closed.
        in_time = _wait(finished, timeout, run.provider)
    except BaseException:
        thread.abandon()
        run.abort()  # interrupted: the agent (an agent command's process group) ends too
        raise
    if in_time is None:  # the run was stopped while this case ran off the main thread
        thread.abandon()
        run.error = run.error or "the run was stopped before this case finished"
        run.given_up = (None,)
        run.abort()
        return
    if in_time:
        thread.give_back()
        return
    thread.abandon()
    # A live request waiting to be retried (a 429's Retry-After) is the likely cause: said.
    retrying = run.provider.retrying if run.provider is not None else None
    cause = f" ({retrying})" if retrying is not None else ""
    run.error = run.error or f"timed out after {timeout:g}s{cause}"
    # What the monitor knew until now stays the root cause; what giving up makes fail (a
    # live request cut) is not one.
    run.given_up = (run.monitor.error,)
    run.abort()  # e.g. kills an agent command blocked on a read


STOP_POLL_SECS = 0.1
"""How often a case running off the main thread looks whether its run was stopped: signals
reach only the main thread, so live cases run at once learn of an interrupt this way."""


def _wait(finished: threading.Event, timeout: float, provider: object) -> bool | None:
    """Whether the case finished within ``timeout``; ``None`` when its provider says the run
    was stopped first (live cases at once, on threads a signal does not reach)."""
    if provider is None or not hasattr(provider, "stopped"):
        return finished.wait(timeout)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return finished.is_set()
        if finished.wait(min(left, STOP_POLL_SECS)):
            return True
        if provider.stopped:
            return None


class _CaseThread:
    """A daemon thread that runs cases one after another, so that a case with a timeout
    costs a hand-over, not a thread start.

    Idle threads wait in a pool (one per caller running cases at the same time). A thread
    whose case timed out or was interrupted is abandoned: it leaves when (if ever) the
    agent returns, and is never given another case.
    """

    _idle: ClassVar[list[_CaseThread]] = []
    _pool_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], None], threading.Event]] = (
            queue.SimpleQueue()
        )
        self._abandoned = False
        self._thread = threading.Thread(target=self._serve, name="evalrunner case", daemon=True)
        self._thread.start()

    @classmethod
    def forget_all(cls) -> None:
        """After a fork: the pooled threads stayed behind in the parent."""
        cls._idle = []
        cls._pool_lock = threading.Lock()

    @classmethod
    def take(cls) -> _CaseThread:
        """An idle case thread, or a new one."""
        with cls._pool_lock:
            if cls._idle:
                return cls._idle.pop()
        return cls()

    def start_case(self, drive: Callable[[], None]) -> threading.Event:
        """Run ``drive`` on this thread; the event is set when it returns."""
        finished = threading.Event()
        self._jobs.put((drive, finished))
        return finished

    def give_back(self) -> None:
        """Return the thread to the pool, its case finished."""
        with self._pool_lock:
            self._idle.append(self)

    def abandon(self) -> None:
        """Leave the thread to its case; it ends when the case does."""
        self._abandoned = True

    def _serve(self) -> None:
        while True:
            drive, finished = self._jobs.get()
            try:
                # A fresh context per case: context variables an agent sets do not reach
                # the next case, as they would not on a thread of its own.
                contextvars.Context().run(drive)
            finally:
                # Nor does an event loop the agent set as this thread's current one.
                if "asyncio" in sys.modules:  # only an agent could have set one
                    with contextlib.suppress(Exception):
                        sys.modules["asyncio"].set_event_loop(None)
                finished.set()
            if self._abandoned:
                return


def _record(run: _CaseRun, duration_ms: int) -> RunRecord:
    evidence = run.monitor.evidence()
    no_arguments = no_success = False
    records: list[ToolCallRecord] = []
    for d in evidence.dispatches:  # one loop, not three passes: every case takes this path
        if d.arguments is None:
            no_arguments = True
        if d.success is None:
            no_success = True
        # Placeholders where the path gave no evidence: the checks that read these fields
        # fail on `unobserved` instead of grading them.
        records.append(
            ToolCallRecord(
                name=d.call.name,
                arguments=d.arguments if d.arguments is not None else "",
                result=d.result,
                success=d.success if d.success is not None else False,
                id=d.call.id,
            )
        )
    unobserved = ("arguments",) * no_arguments + ("success",) * no_success
    tool_calls = tuple(records)
    return RunRecord(
        final_response=run.final_response,
        history=evidence.history,
        tool_calls=tool_calls,
        input_tokens=evidence.input_tokens,
        output_tokens=evidence.output_tokens,
        llm_calls=evidence.llm_calls,
        duration_ms=duration_ms,
        requests=evidence.requests,
        responses=evidence.responses,
        # The monitor's error comes first: it is the root cause even when the agent caught
        # it and failed (or hung) later in some other way.
        error=_printable(
            (run.given_up[0] if run.given_up is not None else evidence.error) or run.error
        ),
        unobserved=unobserved,
        tracebacks=(*(run.log.tracebacks() if run.log is not None else ()), *run.tracebacks),
        turn_ends=tuple(run.turn_ends),
    )


class _CaseRun:
    """One case's turn loop, driven on the calling thread or on a worker (with a timeout)."""

    def __init__(
        self,
        case: Case,
        agent_factory: AgentFactory,
        tools: ToolSource | None,
        max_tool_iterations: int,
        workspace: Path | LazyWorkspace,
        monitor: ConversationMonitor,
    ) -> None:
        self.case = case
        self.agent_factory = agent_factory
        self.tools = tools
        self.max_tool_iterations = max_tool_iterations
        self.workspace = workspace
        self.monitor = monitor
        self.observer = RecordingObserver()
        self.final_response = ""
        self.error: str | None = None
        self.agent: object = None
        self.tracebacks: list[str] = []
        self.log: InvocationLog | None = None
        self._closed = False
        self._aborted = False
        self._ended = False
        """Every turn ended: a tool call from now on is outside every turn."""
        self._close_lock = threading.Lock()
        self.given_up: tuple[str | None] | None = None
        """Set when the case timed out: the monitor's error at that moment."""
        self.provider: ModelProvider | None = None
        """A provider given by the caller (live mode): told when the case is given up, so
        that its request in flight is cut rather than waited for."""
        self.turn_ends: list[TurnEnd] = []
        """Where each finished turn ended, kept only for a case with per-turn checks."""
        self._per_turn = any(turn.expects is not None for turn in case.turns)

    def drive(self) -> None:
        """Build the tools and the agent, run every turn, then close the agent. Whatever
        escapes (a failure in recording how the agent failed) fails the case: the case never
        passes, and the thread lives on, for want of an error written down."""
        try:
            self._drive()
        except BaseException as exc:
            if _really_interrupted(exc):
                raise
            self.error = self.error or (
                f"the case's run stopped on {type(exc).__name__} while evalrunner recorded "
                "what the agent did; it cannot be graded"
            )

    def _drive(self) -> None:
        loop: AbstractEventLoop | None = None  # one per case, for agents written async
        try:
            configured = fresh_tools(self.tools)
            if self.case.tools:
                # A call no double answers is the case's run error, sticky like a violation.
                configured = with_doubles(configured, self.case.tools, self.monitor.refuse)
            case_tools, log = recorded_tools(configured)
            self.log = log
            context = AgentContext(
                provider=self.monitor,
                tools=case_tools,
                observer=self.observer,
                workspace=self.workspace,
                max_tool_iterations=self.max_tool_iterations,
                doubles=self.case.tools,
            )
            agent = self.agent_factory(context)
            with self._close_lock:
                self.agent = agent
                aborted = self._aborted
            if aborted:  # the case was given up while the agent was being built
                stop = getattr(agent, "abort", None)
                if callable(stop):
                    stop()
                return
            for index, turn in enumerate(self.case.turns):
                self.monitor.begin_turn(index)
                reply: object = agent.respond(turn.user_input)
                # A str is never awaitable; asking the Awaitable ABC costs more than a step.
                if type(reply) is not str and inspect.isawaitable(reply):
                    import asyncio  # a heavy import, needed only by agents written async

                    loop = loop or asyncio.new_event_loop()
                    reply = loop.run_until_complete(_awaited(reply))
                if not isinstance(reply, str):
                    raise RunError(f"the agent replied with {type(reply).__name__}, not text")
                reply = str.__str__(reply)  # a str subclass's own methods must not grade it
                if self.error is not None:
                    return  # timed out meanwhile: the record has been taken already
                self.final_response = reply
                self._end_turn(agent, log)
                if self._per_turn:
                    evidence = self.monitor.evidence()
                    self.turn_ends.append(
                        TurnEnd(reply, len(evidence.requests), len(evidence.dispatches))
                    )
            self._ended = True
            self.monitor.finish()
            self.close()
        except RunError as exc:
            self.error = self.error or _shown(exc, str)
        except BaseException as exc:
            if _really_interrupted(exc):
                raise
            self.error = self.error or _agent_exception(exc)
            self.tracebacks.append("".join(traceback.format_exception(exc)))
        finally:
            self.close()
            if loop is not None:
                loop.close()

    def _end_turn(self, agent: object, log: InvocationLog) -> None:
        violation = self.observer.violation
        if violation is not None:
            raise RunError(self.monitor.refuse(violation))
        # An agent that says it runs its own tools (a command agent) is believed only while the
        # case's tools received nothing: once they did, the runner sees both sides of the
        # boundary and holds the agent to them, whatever it claims.
        in_process = not getattr(agent, "runs_own_tools", False) or log.pending
        # Only an agent running its own tools out of process may go without reports: an
        # in-process agent always reports, and its tools' record is always checked.
        reports = (
            self.observer.take()
            if in_process or getattr(agent, "reports_dispatches", True)
            else None
        )
        self.monitor.end_turn(reports, log if in_process else None)

    def abort(self) -> None:
        """Give the case up (a timeout, an interrupt): the agent is stopped at once, even
        while the driving thread is still closing it, and closed."""
        with self._close_lock:
            self._aborted = True
            agent = self.agent
        for holder in (self.provider, agent):
            stop = getattr(holder, "abort", None)
            if callable(stop):
                with contextlib.suppress(Exception):
                    stop()
        self.close()

    def close(self) -> None:
        """Let the agent release what it holds (once); a :class:`RunError` from its
        ``close()`` (a command that crashed after its final reply, ...) fails the case."""
        with self._close_lock:
            if self._closed or self.agent is None:
                return
            self._closed = True
        close = getattr(self.agent, "close", None)
        if callable(close):
            try:
                close()
            except RunError as exc:
                self.error = self.error or str(exc)
            except Exception as exc:
                self.error = self.error or f"the agent's close() raised {type(exc).__name__}: {exc}"
        self._called_after_last_turn()

    def _called_after_last_turn(self) -> None:
        """A tool an in-process agent calls in ``close()`` is outside every turn, so no turn's
        reconciliation sees it: the call is unreported, and the checks on what was used
        would pass a run that called a forbidden tool."""
        if not self._ended or self.log is None or getattr(self.agent, "runs_own_tools", False):
            return
        late = self.log.take()
        if late:
            first, arguments = late[0], late[0].arguments_text
            shown = arguments if len(arguments) <= 120 else arguments[:117] + "..."
            self.error = self.error or (
                f"after the last turn ended (in the agent's close()), the {first.tool} tool "
                f"was called with {json.dumps(shown, ensure_ascii=False)}; no model call "
                "asked for it, and an agent must not call tools once its last turn is over"
            )


def _printable(text: str | None) -> str | None:
    """Error text that any report can carry: a lone surrogate (an agent's string cut in the
    middle of a character) becomes its escape."""
    if text is None:
        return None
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _really_interrupted(exc: BaseException) -> bool:
    """A signal stopping the whole run, as opposed to an agent raising a BaseException.

    :class:`RunInterrupted` is raised by the command line's signal handlers; a
    ``KeyboardInterrupt`` is a real Ctrl-C only on the main thread and only while Python's own
    SIGINT handler is installed (library use). Anything else ends the agent, not the run.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    if isinstance(exc, RunInterrupted):
        return True
    return (
        isinstance(exc, KeyboardInterrupt)
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )


def _exit_attempted(statuses: list[int]) -> str:
    shown = ", ".join(f"os._exit({status!r})" for status in statuses)
    return (
        f"the agent or a tool (or a thread it started) called {shown}, which would have ended "
        "the whole run"
    )


def _agent_exception(exc: BaseException) -> str:
    if isinstance(exc, ProcessExitAttempt):
        return (
            f"the agent called os._exit({_shown(exc.code, repr)}), which would have ended the "
            "whole run"
        )
    if isinstance(exc, SystemExit):  # an agent calling sys.exit() must not end the whole run
        return f"the agent called sys.exit({_shown(exc.code, repr)})"
    return f"the agent raised {type(exc).__name__}: {_shown(exc, str)}"


def _shown(value: object, show: Callable[[object], str]) -> str:
    """``show(value)`` for a value the agent made: its ``__str__`` or ``__repr__`` may raise,
    and that must fail the case with a message, not end the thread that records the error
    (the case would then pass)."""
    try:
        return show(value)
    except Exception as exc:
        return f"<unprintable: its {show.__name__}() raised {type(exc).__name__}>"


async def _awaited(value: Awaitable[object]) -> object:
    return await value


# A forked worker (--jobs) inherits the pool but none of its threads.
os.register_at_fork(after_in_child=_CaseThread.forget_all)
