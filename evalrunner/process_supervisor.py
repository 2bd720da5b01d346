"""The command line run in a child process that the process the user started supervises, so
that the exit code is the run's verdict whatever the project's code does to its process.

The command line imports the project's code (a Python ``agent``, ``tools``) into its own
process. ``os._exit`` is refused there for the process's life (:mod:`evalrunner.process_exit`),
but an end that no refusal stops (``ctypes`` calling C's ``_exit``, ``os.execv``, a crash, a
signal) would end it with a status of its own choosing: from an ``atexit`` hook after a
failing run, ``0`` over the ``1`` it decided; from a daemon thread in the middle of the run,
``0`` with nothing printed and no report. So the process the user started forks first, before
anything of the command line is imported, and only waits:

- the child runs the command line as before. Right after the command decided its exit code,
  and before the interpreter's teardown runs anyone's ``atexit`` hooks, it writes that code
  (the verdict) to a pipe, then exits as usual;
- the parent exits with the verdict. A verdict of 0 holds only if the child then also ended
  with 0: otherwise the parent exits with the child's status. A child that ended without a
  verdict gets a one-line error naming how it ended, and exit 1; one that SIGINT or SIGTERM
  ended by its default action (outside the run's own handling) ends the parent the same way,
  as it ended the one process before.

Signals. The child is in the parent's process group, so what a terminal sends to its
foreground group (Ctrl-C) reaches the child itself, as it reached the one process before; a
second delivery shortly after the first can change how an interrupted run ends (it lands in
the unwinding of the first), so the parent must not forward those. What a process sends to
the PID the user started (``kill``, a CI runner, ``Popen.send_signal``) reaches only the
parent, which forwards SIGINT and SIGTERM to the child. The parent holds both blocked and
takes them with ``sigwaitinfo``: a terminal's signal comes from the kernel (``SI_KERNEL``),
one sent by a process says so (``si_code`` ``SI_USER``, ``SI_QUEUE``, ``SI_TKILL``, all
``<= 0``), and only those are forwarded. A process that signals the whole process group
(``kill -TERM -PGID``, ``timeout``) reaches the child twice, once itself and once forwarded:
Linux does not say whether a signal was sent to a process or to its group.

If the parent is killed (SIGKILL, which it cannot catch), the child, on Linux, is sent
SIGTERM (``PR_SET_PDEATHSIG``, through libc, as the standard library has no ``prctl``): it
stops as a run stopped by SIGTERM does, with its report of the finished cases. Elsewhere
the child runs on to its end, its exit code unheard.

What runs in the child's own process can still write to the verdict's pipe, as it can forge
anything of that process; what this closes is an *end* of the process that its code chose.
Where the platform cannot fork, or has no ``sigwaitinfo`` to tell a terminal's signal from a
process's (macOS), the command line runs in the process the user started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

_FORWARDED = (signal.SIGINT, signal.SIGTERM)
"""The stop signals (:mod:`evalrunner.stop_signals`) a process may send to the PID the user
started, for the run to see."""

_WAITED = (*_FORWARDED, signal.SIGCHLD)

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def can_supervise() -> bool:
    """Whether the command line can run in a supervised child on this platform."""
    return hasattr(os, "fork") and hasattr(signal, "sigwaitinfo")


def supervise(command_line: Callable[[], None]) -> None:
    """Run ``command_line`` in a forked child and end this process with its verdict.

    Returns (and raises) only in the child, as ``command_line`` does there: the caller's code
    after the call is the child's. The parent never returns."""
    parent = os.getpid()
    reader, writer = os.pipe()
    # Blocked before the fork, so that a signal arriving at any moment after it is taken by
    # the parent's wait below instead of its default action.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
    # A SIGCHLD ignored by whoever started us would reap the child before its status is read.
    chld = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    child = os.fork()
    if child == 0:
        os.close(reader)
        signal.signal(signal.SIGCHLD, chld)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _end_with_parent(parent)
        _run_child(command_line, writer)
        return
    os.close(writer)
    _exit_as(_wait(child), reader)


def _end_with_parent(parent: int) -> None:
    """On Linux, SIGTERM to this child when the parent dies before it."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
    except (OSError, AttributeError):  # a libc without prctl: as on other platforms
        return
    if os.getppid() != parent:  # the parent died before the request was made
        os.kill(os.getpid(), signal.SIGTERM)


def _run_child(command_line: Callable[[], None], writer: int) -> None:
    try:
        command_line()
    except SystemExit as done:
        _give_verdict(writer, _status_of(done.code))
        raise
    except KeyboardInterrupt:
        # Ctrl-C before the command line's own handling is in place: what it would say then.
        _give_verdict(writer, 130)
        raise SystemExit(130) from None
    except BaseException:
        # The interpreter prints the traceback and exits 1: that is the verdict too.
        _give_verdict(writer, 1)
        raise
    _give_verdict(writer, 0)


def _status_of(code: object) -> int:
    """The exit status ``SystemExit(code)`` ends a process with."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1  # a message, which the interpreter prints


def _give_verdict(writer: int, status: int) -> None:
    # OSError: the parent is gone (killed); no one waits for the verdict, the run ends as it is.
    with contextlib.suppress(OSError):
        os.write(writer, bytes([status]))
    os.close(writer)


def _wait(child: int) -> int:
    """Wait for ``child``, forwarding the stop signals a process sent here; its wait status."""
    while True:
        info = signal.sigwaitinfo(_WAITED)
        if info.si_signo == signal.SIGCHLD:
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid == child:
                return status
        elif info.si_code <= 0:  # sent by a process, not by a terminal (SI_KERNEL)
            try:
                os.kill(child, info.si_signo)
            except ProcessLookupError:  # it is ending: its SIGCHLD is on the way
                continue


def _exit_as(status: int, reader: int) -> NoReturn:
    """End this process with the child's verdict, held against how the child ended."""
    os.set_blocking(reader, False)
    try:
        # Not read to its end: a process the child forked may still hold the pipe open.
        verdict = os.read(reader, 1)
    except BlockingIOError:
        verdict = b""
    ended = _how_it_ended(status)
    child_code = os.waitstatus_to_exitcode(status)
    if not verdict and -child_code in _FORWARDED:
        # A stop signal that found the child without its handlers (while a report goes to a
        # FIFO, say) ended it by the signal's default action: so it ends this process, as it
        # ended the one process before.
        _die_by(signal.Signals(-child_code))
    if not verdict:
        _say(
            f"evalrunner's run ended before it gave its verdict: the process {ended} "
            "(project code ended it: a native _exit or exec, a crash, a signal)"
        )
        code = 1
    elif verdict[0] == 0 and child_code != 0:
        _say(
            f"evalrunner's run passed, but its process then {ended} "
            "(project code ended it, e.g. from an atexit hook): not a pass"
        )
        code = child_code if child_code > 0 else 128 - child_code
    else:
        code = verdict[0]
    # No teardown here: whatever was registered before the fork is the child's to run.
    os._exit(code)


def _die_by(sig: signal.Signals) -> NoReturn:
    signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)  # not reached: the signal's default action ends the process


def _how_it_ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"


def _say(line: str) -> None:
    stream = sys.stderr
    if stream is None:  # started with stderr closed
        return
    with contextlib.suppress(OSError, ValueError):  # stderr closed or broken: nowhere to say it
        stream.write(f"{line}\n")
        stream.flush()
