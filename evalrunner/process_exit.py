"""``os._exit`` called by an agent or a tool: refused, so that it cannot end a run with its own
exit code (``os._exit(0)`` would read as a green run, with no report).

``os._exit`` skips every ``finally``, ``atexit`` hook and flush, so a front end that let it
through would exit with the agent's code before saying anything. It is refused wherever the
runner's own process runs user code:

- while a case runs (:func:`watched` around it): on the agent's own thread the refusal ends
  the agent like any exception; on another thread (one the agent started) it ends that thread,
  and the watch gives the attempt to every case running at that moment, since a thread
  started by an agent carries no mark of its case. Serially that is the case running at that
  moment: the one that started the thread, unless a daemon thread outlived an earlier case
  and fires during a later one, which then fails (a red in the wrong place, where telling the
  two apart would need a thread's ancestry, which Python does not keep); with live cases on
  threads, every case then running (a red too many rather than a green);
- while the configured agent and tools are imported and built (:func:`watched` in
  :mod:`evalrunner.plugins`): the import fails, as an import that raises does;
- for the rest of a front end's process, once :func:`refuse_for_life` was called (the command
  line's and the pytest plugin's processes, which are evalrunner's alone): from an ``atexit``
  hook, or from a daemon thread that outlived its case. There is no case to blame then: the
  run core takes what :func:`unclaimed` holds into the run's report
  (:attr:`~evalrunner.model.SuiteReport.late_exits`, by
  :func:`evalrunner.session.with_late_exits`), which fails the run, and a front end takes
  it again the same way just before its exit code. An attempt made later still (in an
  ``atexit`` hook, during interpreter teardown) can no longer change the verdict, which is
  out, but neither can it replace the exit code: the refusal keeps the code the front end
  chose.

A ``--jobs`` worker is a process of its own, forked, where ``os._exit`` is let through (see
below): a worker that dies has its unreported cases run again, each alone, and the one that
ends its process is the case's run error (:mod:`evalrunner.execution`). When none does, what
killed the worker came from outside those cases (a daemon thread of an earlier case), and the
death is noted here (:func:`note_unexplained_death`) to fail the run as an unclaimed call does.
A pytest-xdist worker refuses for its life as any pytest session running cases does, and
hands what it did not claim to the controller, which decides the exit code.

The supervised worker of a serial run (:mod:`evalrunner.execution`) is forked too, but there
the refusal is the worker's own (:func:`own_refusal`): a case's ``os._exit`` fails the case as
it does serially, and what the worker refused outside every case it hands to its parent,
which fails the run for it. What no refusal stops (``ctypes``' ``_exit``, ``exec``, a signal)
ends the worker, which the parent sees.

Outside a watch, a non-zero status is let through: it cannot read as a pass, and foreign code
in the process (pytest-xdist's worker gives up on a hung session with ``os._exit(1)``) relies
on it. A process forked meanwhile (an agent's own child, a ``--jobs`` worker) exits when it
asks to: what is refused is ending *this* process, and the pool's parent finds a worker that
died.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast


class ProcessExitAttempt(BaseException):
    """Raised in place of ending the process when user code calls ``os._exit`` while it is
    refused. A BaseException, so that an agent's ``except Exception`` does not swallow it."""

    def __init__(self, code: object) -> None:
        super().__init__(
            f"os._exit({code!r}) was refused: it would have ended evalrunner's process, "
            "and with it the run's report and exit code"
        )
        self.code = code


@dataclass(eq=False)  # each watch is itself: two with the same attempts are not one
class Watch:
    """A span of user code whose ``os._exit`` attempts are its own (their statuses)."""

    attempts: list[int] = field(default_factory=list)


@dataclass
class _Guard:
    real: Callable[[int], NoReturn] | None = None
    """``os._exit`` as it was before the refusal; ``None`` while nothing refuses."""
    owner: int = 0
    users: int = 0
    for_life: bool = False
    watches: list[Watch] = field(default_factory=list)
    unclaimed: list[int | str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


_GUARD = _Guard()
_PLATFORM: Any = sys.modules.get(os.name) or sys.modules.get("posix")
"""The module os takes ``_exit`` from (``posix``, or ``nt`` on Windows)."""


def _refused(status: int) -> NoReturn:
    guard = _GUARD
    real = guard.real
    assert real is not None, "refused while not installed"
    if os.getpid() != guard.owner:
        real(status)
    with guard.lock:
        watches = list(guard.watches)
        if not watches and status != 0:
            passed = True
        else:
            passed = False
            for watch in watches:
                watch.attempts.append(status)
            if not watches:
                guard.unclaimed.append(status)
    if passed:
        real(status)
    raise ProcessExitAttempt(status)


def _install() -> bool:
    """Refuse ``os._exit`` in this process (once more); ``False`` in a process forked from
    one that refuses it, where it stays the parent's refusal, which lets the child exit."""
    guard = _GUARD
    with guard.lock:
        if guard.real is not None:
            if guard.owner != os.getpid():
                return False
            guard.users += 1
            return True
        guard.real = os._exit
        guard.owner = os.getpid()
        guard.users = 1
    os._exit = _refused
    # os re-exports the platform module's function: the refusal covers that name too, so
    # that `posix._exit(0)` is refused as `os._exit(0)` is.
    if getattr(_PLATFORM, "_exit", None) is guard.real:
        _PLATFORM._exit = _refused
    if threading.excepthook is not _quiet_excepthook:
        _QUIET.previous = threading.excepthook
        threading.excepthook = _quiet_excepthook
    return True


def _uninstall() -> None:
    guard = _GUARD
    with guard.lock:
        guard.users -= 1
        if guard.users > 0 or guard.for_life or guard.real is None:
            return
        real, guard.real = guard.real, None
    os._exit = cast(Any, real)  # the function it replaced, whatever its signature
    if getattr(_PLATFORM, "_exit", None) is _refused:
        _PLATFORM._exit = real
    if threading.excepthook is _quiet_excepthook:
        threading.excepthook = _QUIET.previous


@dataclass
class _Previous:
    previous: Callable[[threading.ExceptHookArgs], object] = threading.excepthook
    previous_unraisable: Callable[[sys.UnraisableHookArgs], object] = sys.unraisablehook


_QUIET = _Previous()


def _quiet_excepthook(args: threading.ExceptHookArgs) -> None:
    """A thread that ended on a refused ``os._exit`` says so in one line, not a traceback:
    the attempt itself is reported with its case (or fails the run)."""
    if not said_thread_exit(args):
        _QUIET.previous(args)


def said_thread_exit(args: threading.ExceptHookArgs) -> bool:
    """For a ``threading.excepthook``: when the thread ended on a refused ``os._exit``, say
    so in one line on stderr and return ``True`` (the exception is handled); ``False`` for
    any other exception, which the hook passes on."""
    if args.exc_type is not ProcessExitAttempt:
        return False
    name = args.thread.name if args.thread is not None else "a thread"
    # stderr closed: the attempt is still reported with its case or the run.
    with contextlib.suppress(OSError, AttributeError, ValueError):
        sys.stderr.write(f"evalrunner: thread {name!r}: {args.exc_value}\n")
    return True


def _quiet_unraisablehook(args: sys.UnraisableHookArgs) -> None:
    """An ``atexit`` hook that ended on a refused ``os._exit`` says so in one line: the exit
    code stays the one the front end gave."""
    if args.exc_type is ProcessExitAttempt:
        with contextlib.suppress(OSError, AttributeError, ValueError):
            sys.stderr.write(f"evalrunner: an exit hook: {args.exc_value}\n")
        return
    _QUIET.previous_unraisable(args)


@contextmanager
def process_exit_refused() -> Iterator[None]:
    """While inside (nestable), ``os._exit`` in this process is refused as the module says;
    on the way out the real one is back, unless :func:`refuse_for_life` was called."""
    counted = _install()
    try:
        yield
    finally:
        if counted:
            _uninstall()


def refuse_for_life() -> None:
    """Refuse ``os._exit`` in this process until it exits: for a process that is a front end
    of evalrunner's alone (the command line, a pytest session running cases)."""
    if _install():
        with _GUARD.lock:
            _GUARD.for_life = True
        if sys.unraisablehook is not _quiet_unraisablehook:
            _QUIET.previous_unraisable = sys.unraisablehook
            sys.unraisablehook = _quiet_unraisablehook


@contextmanager
def watched() -> Iterator[Watch]:
    """A span of user code: every ``os._exit`` refused while it lasts, on any thread, is
    appended to the watch (and to every other watch open at that moment)."""
    watch = Watch()
    with process_exit_refused():
        with _GUARD.lock:
            _GUARD.watches.append(watch)
        try:
            yield watch
        finally:
            with _GUARD.lock:
                _GUARD.watches.remove(watch)


def unclaimed() -> list[str]:
    """What ended, or tried to end, a process of the run outside every case, taken (each is
    reported once): the refused ``os._exit`` calls that no watch held (made between cases,
    or after the last one), and the worker deaths :func:`note_unexplained_death` noted."""
    with _GUARD.lock:
        taken, _GUARD.unclaimed = _GUARD.unclaimed, []
    return [f"os._exit({status})" if isinstance(status, int) else status for status in taken]


def note_unexplained_death(what: str) -> None:
    """A ``--jobs`` worker died while it had cases to run, and each of them, run again in a
    process of its own, ended cleanly: what killed it came from outside those cases (a daemon
    thread of an earlier case that called ``os._exit``). No case carries it, so the run
    fails, as it does for a refused call no watch held."""
    with _GUARD.lock:
        _GUARD.unclaimed.append(what)


def late_exit_problem(attempts: list[str]) -> str:
    """The sentence that says why a run whose process was ended outside its cases (what
    :func:`unclaimed` gave) is not a pass."""
    return (
        f"an agent or tool ended, or tried to end, a process of the run outside any case "
        f"({'; '.join(attempts)}), from a thread that outlived its case or between cases; "
        "the run is not a pass"
    )


@contextmanager
def own_refusal() -> Iterator[None]:
    """In a process forked to run cases for a front end that refuses ``os._exit`` (the
    supervised worker of a serial run, :mod:`evalrunner.execution`): while inside, the
    refusal is this process's own, so that a case's call reads as it reads serially and a
    call outside every case is kept for :func:`unclaimed` (which the worker hands to its
    parent). On the way out the process may exit again (multiprocessing ends a worker with
    ``os._exit``)."""
    guard = _GUARD
    with guard.lock:
        owned = guard.real is not None
        if owned:
            guard.owner = os.getpid()
    try:
        yield
    finally:
        if owned:
            with guard.lock:
                guard.owner = 0  # no process's: every call passes (see _refused)


def _after_fork_in_child() -> None:
    # The lock may have been held by another thread at the fork; the watches and attempts
    # are the parent's cases'.
    _GUARD.lock = threading.Lock()
    _GUARD.watches = []
    _GUARD.unclaimed = []


os.register_at_fork(after_in_child=_after_fork_in_child)
