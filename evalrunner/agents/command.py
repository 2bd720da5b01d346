"""An agent in any language, run as a command, replayed over HTTP (``[eval] agent_command``).

Per case, the runner starts a :class:`~evalrunner.wire.endpoint.ReplayEndpoint` serving the case's
script in the OpenAI (chat completions and Responses) and Anthropic wire formats, then launches
the command with these in its environment:

* ``OPENAI_BASE_URL`` (``http://127.0.0.1:PORT/v1``, under which both OpenAI APIs are served)
  and ``ANTHROPIC_BASE_URL`` (``http://127.0.0.1:PORT``), which the official SDKs read;
* ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY`` set to a dummy value (nothing checks them);
* ``EVALRUNNER_WORKSPACE``, the case's private directory; ``NO_PROXY`` covering loopback.

The conversation is a small line protocol (``schemas/agent-command/``): for each turn the
runner writes one JSON object on the command's stdin, ``{"turn": 1, "user_input": "..."}``, and
reads one JSON object back from its stdout, ``{"reply": "..."}``. After the last turn stdin is
closed and the command should exit. Its stdout is reserved for reply lines (log to stderr). A
command that exits before replying, prints anything else, or outlives the case timeout fails
the case with an error saying so, with the end of its stderr.

Protocol 2 (persistent, opted into by the command): one process serves many cases. The
runner offers it in ``EVALRUNNER_PROTOCOLS`` (``1,2``). The first line a process reads is
always a protocol-1 turn line (the opening line); a command taking up protocol 2 answers it
with ``{"evalrunner": 2}`` instead of a reply, without acting on it. From then on every line
names its case by a per-case token: ``{"case": T, "turn": N, "user_input": ..., "workspace":
...}`` is answered with ``{"case": T, "reply": ..., "tool_calls"?: [...]}`` or
``{"case": T, "error": "..."}``; after the final reply (or a failure) ``{"case": T, "end":
true}`` is answered with ``{"case": T, "ended": true}``, and the process waits for the next
case; stdin closes at the end of the run, and the process must then exit with code 0 within
``agent_exit_grace_secs``. The endpoint keeps one address for the process's life and serves
the case under way. A line or a request belonging to another case, and an exit during a
case, fail the case; a process is reused after a failed case only when it ended that case
cleanly, never after a broken line, a crash or a timeout.

What a process does after it ended a case belongs to that case (:class:`HeldVerdict`): a
model request, a printed line, a traceback on stderr, a non-zero exit, or at the end of the
run a hang once its stdin closes, fails the case it ended last, never the next one. An exit
with code 0 after it ended a case is clean, as it is at the end of the run (the next case
then gets a fresh process). So that case's verdict is held until the process has taken its
next case or exited; the executor (:mod:`evalrunner.execution`) waits for it, and at the end
of a run ends the processes (:meth:`CommandAgentFactory.settle_cases`) to settle the last
ones. A front end that runs one case at a time (the pytest plugin, ``mutate``) so ends the
process after each case: under it, every case is a process's last. So an agent that fails
only as its stdin closes fails the run on every front end, but fails the last case of each of
its processes, which are not the same cases from one front end to another. That cannot be made
equal without timing: a fault as stdin closes cannot be told from one just after ``ended``
(a crash racing the close), and the latter must fail the case that ended everywhere.

Which case a model request belongs to is decided exactly, not by timing: from the ``ended``
line on, the endpoint serves no case, and it serves the next case only from the first request
that arrives once the process has *read* that case's first line (the unread bytes of its stdin
pipe, ``FIONREAD``, are zero). A process that sends a request after ``ended`` and reads its
next line afterwards, as a sequential agent does, has that request refused and charged to the
case it ended, however late it arrives. Only a process that reads its next line while a
request of the ended case is still in flight (a second thread) has taken the next case by
then, and the request is that case's. Where the platform cannot tell unread bytes on a pipe's
write end, the request is the next case's once that line was written.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import multiprocessing.util
import os
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import termios
import threading
import time
import weakref
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

from evalrunner.agents.reference import AgentContext
from evalrunner.boundary.conformance import ConversationMonitor
from evalrunner.boundary.tools import double_json, reject_constant
from evalrunner.config import DEFAULT_AGENT_EXIT_GRACE_SECS
from evalrunner.fixture.admit import argument_text
from evalrunner.fixture.load import unique_keys
from evalrunner.fixture.schemas import agent_reply_validator
from evalrunner.model import RunError, ToolCallRecord, render_json_path
from evalrunner.wire.endpoint import ReplayEndpoint

STOP_GRACE_SECS: Final = DEFAULT_AGENT_EXIT_GRACE_SECS
"""The default ``agent_exit_grace_secs``: how long a command may take to exit after its stdin
is closed (after its final reply, or at the end of the run in protocol 2), or in protocol 2
to answer the end line of a case, before it is killed; not doing it in time fails the case."""

MAX_LINE_BYTES = 8 * 1024 * 1024
"""The longest reply line read from a command; a longer one fails the case (memory stays
bounded whatever the command prints)."""

PROTOCOLS: Final = (1, 2)
"""The agent-command protocol versions this runner speaks; 2 is the persistent one."""

PERSISTENT: Final = 2
"""The protocol version in which one process serves many cases."""

OFFER_VARIABLE: Final = "EVALRUNNER_PROTOCOLS"
"""The environment variable that tells a command which protocol versions it may use."""

LINE_WRITE_WAIT_SECS: Final = 1.0
"""How long the endpoint waits for the write of a case's first line to return before it
decides whether a request is that case's (see :meth:`_AgentProcess.took_line`)."""

TRACEBACK: Final = "Traceback (most recent call last):"
"""What a Python traceback on a command's stderr starts with."""


class HeldVerdict:
    """The verdict of a case that a persistent process ended cleanly, held until the process
    takes its next case or exits: what it does in between fails that case
    (:attr:`error`). Settled once; the first word stays."""

    def __init__(self) -> None:
        self._settled = threading.Event()
        self.error: str | None = None

    @property
    def settled(self) -> bool:
        """Whether the process has taken its next case or exited (the verdict is final)."""
        return self._settled.is_set()

    def settle(self, problem: str | None = None) -> None:
        """Final: the case stands, or (``problem``) fails with what the process did."""
        if self._settled.is_set():
            return
        if problem is not None:
            self.error = (
                f"the agent command (protocol {PERSISTENT}), after it ended this case, {problem}"
            )
        self._settled.set()


STRAY_REQUESTS = "sent a model request"
"""How the verdict held for a persistent agent's case words the model requests it sent once
it had ended the case (refused: no case was attached)."""


def _stray_requests(strays: Sequence[str]) -> str:
    more = f" (and {len(strays) - 1} more)" if len(strays) > 1 else ""
    return f"{STRAY_REQUESTS}{more}, refused: {strays[0]}"


def _when(phrase: str, problem: str) -> str:
    """``problem`` with when it was seen, unless it is a stray request: when the runner sees
    one (as the agent ends the case, before the next case begins, once the next case's first
    line was read, at the end of the run) is the threads' race, not what the agent did, so a
    single-threaded agent's stray request reads the same every time."""
    return problem if problem.startswith(STRAY_REQUESTS) else f"{phrase}, {problem}"


def command_agent_factory(
    command: str | Sequence[str], *, cwd: Path, exit_grace: float = STOP_GRACE_SECS
) -> CommandAgentFactory:
    """A factory that runs ``command`` (from ``cwd``) as the agent of each case; it gets
    ``exit_grace`` seconds to exit once its stdin is closed (``agent_exit_grace_secs``)."""
    # Split as a POSIX shell would, without running a shell.
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ValueError("agent_command is empty")
    program = argv[0]
    # Checked once, before any case: a missing program would otherwise fail every case alike.
    if os.sep in program:
        found = (cwd / program).is_file() and os.access(cwd / program, os.X_OK)
    else:
        found = shutil.which(program) is not None
    if not found:
        where = f"relative to {cwd}" if os.sep in program else "on PATH"
        raise ValueError(f"the program {program!r} is not an executable file {where}")
    return CommandAgentFactory(argv, cwd, exit_grace)


class CommandAgentFactory:
    """Builds each case's :class:`CommandAgent`, and keeps the processes that took up
    protocol 2 between cases, one per thread of work (so each ``--jobs`` worker has its own).

    Those processes end when :meth:`close` is called, when the factory is garbage-collected,
    or when the (worker) process exits, whichever comes first: their stdin is closed, and
    their process groups are killed after ``exit_grace`` seconds. Usable as a context
    manager. Pickles as its command (a copy starts processes of its own).
    """

    def __init__(self, argv: Sequence[str], cwd: Path, exit_grace: float = STOP_GRACE_SECS) -> None:
        self.argv = tuple(argv)
        self.cwd = cwd
        self.exit_grace = exit_grace
        self._pool = _Pool()
        weakref.finalize(self, self._pool.close)

    def __call__(self, context: AgentContext) -> CommandAgent:
        return CommandAgent(
            context, list(self.argv), cwd=self.cwd, pool=self._pool, exit_grace=self.exit_grace
        )

    def close(self) -> None:
        """End the processes waiting for a next case, which settles the verdicts they hold
        (:class:`HeldVerdict`): the end of a run. Idempotent; the factory stays usable."""
        self._pool.close()

    settle_cases = close
    """What the executor calls at the end of a run (:func:`close`)."""

    def __enter__(self) -> CommandAgentFactory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __reduce__(
        self,
    ) -> tuple[type[CommandAgentFactory], tuple[tuple[str, ...], Path, float]]:
        return (CommandAgentFactory, (self.argv, self.cwd, self.exit_grace))


class CommandAgent:
    """Drives an external agent process through the turns of one case.

    The process runs in a session (and process group) of its own, so that ending it ends
    whatever it started. It runs its own tools (``runs_own_tools``); whether it reports its
    dispatches is decided by each reply line (``reports_dispatches``). With a ``pool``, a
    process that took up protocol 2 is taken from it and given back after a clean end of the
    case; :attr:`held_verdict` is then this case's verdict as the process may still overturn
    it (:class:`HeldVerdict`). A process that misbehaved after its previous case ended fails
    that case, and this case runs on a fresh process.
    """

    runs_own_tools = True

    def __init__(
        self,
        context: AgentContext,
        argv: list[str],
        *,
        cwd: Path,
        pool: _Pool | None = None,
        exit_grace: float = STOP_GRACE_SECS,
    ) -> None:
        if not isinstance(context.provider, ConversationMonitor):
            raise RunError("a command agent needs the runner's conversation monitor as provider")
        self._monitor = context.provider
        self._turn = 0
        self._observer = context.observer
        self._workspace = context.workspace
        self._pool = pool
        # Per case and unguessable: a reply or end carrying another case's token is a leak.
        self._case = secrets.token_hex(8)
        self._doubles = [double_json(double) for double in context.doubles]
        self.reports_dispatches = False
        self._awaiting = False  # a line is being read: close() then kills without grace
        self._lock = threading.Lock()
        self._closed = False
        self.held_verdict: HeldVerdict | None = None
        """After a clean end on a process kept for the next case: this case's verdict, until
        the process takes its next case or exits."""
        # The previous case of a leased process, settled once this case's first line is read.
        self._previous: HeldVerdict | None = None
        self._tainted = False  # the process misbehaved after its previous case: not reused
        self._start = (argv, cwd, context.workspace, exit_grace)
        leased = pool.lease() if pool is not None else None
        while leased is not None:
            code = leased.process.poll()
            problem = leased.since_ended(code)
            if problem is None and code is None:
                break
            # Gone (a clean exit 0 is no failure: the case had ended) or misbehaved.
            leased.settle_held(problem and _when("before its next case began", problem))
            leased.retire()
            leased = pool.lease() if pool is not None else None
        if leased is None:
            self._proc = _AgentProcess(argv, cwd, self._monitor, context.workspace, exit_grace)
            return
        self._proc = leased
        self._previous = leased.held
        # Served from the first request after the process has read this case's first line:
        # one before is the previous case's (see the module docstring). The line is marked
        # before the endpoint attaches, so a request arriving before it is written is a
        # stray too, not this case's.
        leased.mark_line()
        leased.endpoint.attach(self._monitor, when=leased.took_line)

    # --- turns ----------------------------------------------------------------------------

    def respond(self, user_input: str) -> str:
        """Send one turn's input line and read the reply line."""
        self._turn += 1
        proc = self._proc
        # Turn 1's line lists the case's tool doubles, for the command to serve.
        doubles = {"tools": self._doubles} if self._doubles and self._turn == 1 else {}
        if proc.protocol != PERSISTENT:
            # A turn line of protocol 1. The first (the opening line) a command taking up
            # protocol 2 answers with the handshake (and otherwise ignores) instead of a reply.
            answer = self._exchange({"turn": self._turn, "user_input": user_input, **doubles})
            message = _strict_json(answer)
            if proc.protocol == 1 or not (isinstance(message, dict) and "evalrunner" in message):
                proc.protocol = 1
                return self._reply(answer, message)
            self._accept_handshake(message)
            proc.protocol = PERSISTENT
        line = {
            "case": self._case,
            "turn": self._turn,
            "user_input": user_input,
            "workspace": str(self._workspace),
            **doubles,
        }
        try:
            answer = self._exchange(line)
        except RunError:
            if self._previous is None or proc.took_line():
                raise
            # It exited after ending its previous case and before reading this one's first
            # line: that is the previous case's failure, and this case starts afresh.
            left = self._left(proc)
            self._settle_previous(
                None if left is None else f"before it read its next case's first line, {left}"
            )
            proc.retire()
            argv, cwd, workspace, grace = self._start
            self._proc = _AgentProcess(argv, cwd, self._monitor, workspace, grace)
            self._turn -= 1
            return self.respond(user_input)
        return self._reply(answer, _strict_json(answer), case=self._case)

    def _settle_previous(self, problem: str | None = None) -> None:
        """The previous case of a leased process, once this case's first line was read (or
        the process is gone): a request refused since its end fails it."""
        held, self._previous = self._previous, None
        if held is None:
            return
        self._proc.reset_stderr()  # from now on, the tail an error shows is this case's
        strays = self._proc.endpoint.take_strays()
        if problem is None and strays:
            problem = _stray_requests(strays)
            self._tainted = True
        held.settle(problem)

    @staticmethod
    def _left(proc: _AgentProcess) -> str | None:
        """What a process that stopped reading after it ended its case did: None for a
        clean exit (code 0, nothing printed, no traceback)."""
        proc.exits_soon()
        code = proc.process.returncode
        if code is None:
            return "closed its stdin" + proc.stderr_note()
        return proc.since_ended(code)

    def _exchange(self, line: dict[str, object]) -> str:
        """Write one line, read the answer line."""
        proc = self._proc
        if not proc.write_line(line):
            raise self._failure(f"stopped reading its input before turn {self._turn}")
        self._awaiting = True
        try:
            answer = proc.read_line()
            if answer and self._previous is not None and not proc.took_line():
                # Printed before it read this case's first line: the previous case's output.
                self._settle_previous(
                    f"before it read its next case's first line, printed {_shown_bytes(answer)}"
                )
                self._tainted = True
                answer = proc.read_line()
        finally:
            self._awaiting = False
        if answer and self._previous is not None:
            self._settle_previous()
        if self._monitor.error is not None:
            raise RunError(self._monitor.error)
        if not answer:
            if not proc.closing.is_set() and not proc.exits_soon():
                raise self._failure(f"closed its stdout before replying to turn {self._turn}")
            raise self._failure(f"exited before replying to turn {self._turn}")
        if len(answer) > MAX_LINE_BYTES:
            raise self._failure(
                f"printed a line of over {MAX_LINE_BYTES} bytes for turn {self._turn}; a "
                "reply line is one JSON object"
            )
        return answer.decode("utf-8", errors="replace")

    def _accept_handshake(self, message: dict[str, Any]) -> None:
        version = message.get("evalrunner")
        if type(version) is not int or version != PERSISTENT:
            raise self._failure(
                f"answered the opening line with the handshake {_shown(message)}, asking for "
                f"protocol {_shown(version)}; this evalrunner takes up protocol {PERSISTENT} "
                f'with {{"evalrunner": {PERSISTENT}}} (or speaks protocol 1 to a command that '
                "replies to the opening line)"
            )
        if len(message) != 1:
            extra = sorted(key for key in message if key != "evalrunner")
            raise self._failure(
                f"answered the opening line with a handshake holding unknown field(s) "
                f"{_shown(extra)}; the handshake is exactly "
                f'{{"evalrunner": {PERSISTENT}}}'
            )
        if self._monitor.requests:
            raise self._failure(
                "sent model requests before its handshake; in protocol 2 the opening line "
                "only asks which protocol to speak, and the case begins with the next line"
            )

    def _reply(self, answer: str, message: object, *, case: str | None = None) -> str:
        if not isinstance(message, dict):
            raise self._failure(
                f"printed {_shown_bytes(answer.encode())} for turn {self._turn}, not a reply "
                'line; stdout is for one JSON object per turn, {"reply": "..."} (log to stderr '
                "instead; see schemas/agent-command/reply.schema.json)"
            )
        if case is not None:
            message = dict(message)
            self._check_case(message.pop("case", None), "reply line", case)
            if "error" in message:
                raise self._reported_error(message)
        validator = agent_reply_validator()
        if not validator.is_valid(message):
            from jsonschema.exceptions import best_match  # the most telling error, in its words

            problem: ValidationError = best_match(validator.iter_errors(message))
            where = render_json_path(tuple(problem.absolute_path))
            raise self._failure(
                f"printed a reply line for turn {self._turn} that is not valid: at {where}: "
                f"{_reply_problem(problem)} (see schemas/agent-command/reply.schema.json)"
            )
        reported = message.get("tool_calls")
        self.reports_dispatches = reported is not None
        for entry in reported or ():
            self._observer.on_tool_call(_record(entry))
        return str(message["reply"])

    def _reported_error(self, message: dict[str, Any]) -> RunError:
        """Protocol 2's ``{"case": T, "error": "..."}``: the command failed the turn and
        lives on; the case fails with its words."""
        text = message["error"]
        if not isinstance(text, str) or not text.strip() or len(message) != 1:
            return self._failure(
                f"printed an error line for turn {self._turn} that is not valid: "
                f'{_shown(message)}; it is {{"case": "{self._case}", "error": '
                '"<what went wrong>"} and nothing else'
            )
        return RunError(f"the agent command failed turn {self._turn}: {_shown(text, 500)}")

    def _check_case(self, token: object, what: str, case: str) -> None:
        if token == case:
            return
        if token is None:
            raise self._failure(
                f'printed a {what} for turn {self._turn} without "case"; in protocol '
                f"{PERSISTENT} every line names the case it answers, "
                f'{{"case": "{case}", ...}}'
            )
        if token == self._proc.previous_case:
            raise self._failure(
                f"printed a {what} for turn {self._turn} naming the previous case "
                f"({_shown(token)}), not this one ({case}): the previous case leaked into "
                "this one"
            )
        raise self._failure(
            f"printed a {what} for turn {self._turn} naming case {_shown(token)}, not this "
            f"one ({case}); a line answers the case of the line it was sent"
        )

    def _failure(self, what: str) -> RunError:
        proc = self._proc
        proc.stop(grace=1.0)
        code = proc.process.returncode
        status = f" (it {_exit_status(code)})" if code is not None else ""
        return RunError(f"the agent command {what}{status}{proc.stderr_note()}")

    # --- between cases ----------------------------------------------------------------------

    def _end_case(self, proc: _AgentProcess) -> str | None:
        """Protocol 2's end of a case: the end line, answered with the ended line; then the
        process waits in the pool for the next case. None when that went cleanly."""
        error_before = self._monitor.error
        if not proc.write_line({"case": self._case, "end": True}):
            proc.exits_soon()
            return self._ended_badly(proc, "")
        self._awaiting = True
        try:
            answer = proc.read_line(deadline=time.monotonic() + proc.exit_grace)
        finally:
            self._awaiting = False
        if answer is None:
            proc.retire()
            return (
                f"did not answer the end of the case within {proc.exit_grace:g}s after its "
                f'final reply (with {{"case": "{self._case}", "ended": true}}); it was killed'
            )
        if not answer:
            proc.exits_soon()
            return self._ended_badly(proc, "")
        # At once: a request sent after the ended line is a stray, charged to this case (one
        # sent before it had been answered before the line was printed).
        proc.endpoint.detach()
        if self._monitor.error != error_before:  # e.g. a model request after its final reply
            proc.retire()
            return None
        message = _strict_json(answer.decode("utf-8", errors="replace"))
        if message != {"case": self._case, "ended": True} or len(answer) > MAX_LINE_BYTES:
            if isinstance(message, dict) and "ended" in message:
                proc.retire()
                return (
                    f"answered the end of the case with {_shown_bytes(answer)}, not "
                    f'{{"case": "{self._case}", "ended": true}}' + proc.stderr_note()
                )
            return self._ended_badly(
                proc, f"printed more after its final reply: {_shown_bytes(answer)}"
            )
        extra = proc.read_available()
        if extra:
            return self._ended_badly(
                proc, f"printed more after ending the case: {_shown_bytes(extra)}"
            )
        proc.previous_case = self._case
        proc.hold()
        self.held_verdict = proc.held
        if self._pool is None or self._tainted:
            # Not reused (no pool; or it misbehaved after its previous case): its stdin is
            # closed now, and how it ends settles this case, as at the end of a run.
            _end_together([proc], when="as it was given no further case")
            return None
        self._pool.give_back(proc)
        return None

    def _ended_badly(self, proc: _AgentProcess, what: str) -> str:
        # The stderr note is read before the process is retired, which closes its stderr file
        # (a crash on the end line would otherwise show no traceback).
        note = proc.stderr_note()
        proc.retire()
        if not what:
            code = proc.process.returncode
            what = f"{_exit_status(code)} after its final reply"
        return what + (note or proc.stderr_note())

    # --- the end ----------------------------------------------------------------------------

    def abort(self) -> None:
        """Stop at once (the case timed out or the run was interrupted): the process group
        is killed now, whatever a close() in progress is waiting for."""
        proc = getattr(self, "_proc", None)
        if proc is not None:
            proc.closing.set()
            proc.kill_group()

    def close(self) -> None:
        """End the case on the process.

        Protocol 1: after the final reply the command must exit by itself within its exit
        grace (``agent_exit_grace_secs``) once its stdin is closed, with exit code 0, printing
        nothing more. Protocol 2: it must answer the end line within that time, having printed
        nothing more; it then waits for the next case. Otherwise a :class:`RunError` says
        which. While a reply is awaited (a timeout), or after the case failed, the process
        group is killed at once.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        proc = self._proc
        problem: str | None = None
        if self._previous is not None:  # this case never got an answer to its first line
            self._settle_previous()
        if proc.protocol == PERSISTENT:
            if self._awaiting or proc.closing.is_set() or proc.process.returncode is not None:
                proc.retire()  # the case has its error already; its process is not reused
            else:
                # Even after a run error (a refused request, an error line): a command that
                # ends the case cleanly has kept the protocol, and the next case is checked
                # on its own.
                problem = self._end_case(proc)
        else:
            proc.closing.set()
            problem = self._end(proc)
            proc.release()
        if problem is not None:
            raise RunError(f"the agent command {problem}")

    def _end(self, proc: _AgentProcess) -> str | None:
        process = proc.process
        if process.returncode is not None and process.stdout is not None and process.stdout.closed:
            return None  # ended already
        if self._awaiting:
            proc.kill_group()
            process.wait()
            return None  # the reading thread gives up at its next poll
        exited = process.returncode is not None or proc.stop(grace=proc.exit_grace)
        proc.kill_group()
        extra = proc.rest_of_stdout()
        if not exited:
            return (
                f"did not exit within {proc.exit_grace:g}s after its stdin was closed (after "
                "its final reply; agent_exit_grace_secs gives it longer); it was killed"
            )
        if extra:
            return f"printed more after its final reply: {_shown_bytes(extra)}" + (
                proc.stderr_note()
            )
        if process.returncode != 0:
            return f"{_exit_status(process.returncode)} after its final reply" + proc.stderr_note()
        return None


class _AgentProcess:
    """One run of the command: its process group, its replay endpoint (one address for the
    process's whole life, so that an SDK client made at start-up serves every case), its
    stderr and what was read past the last line of its stdout."""

    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        monitor: ConversationMonitor,
        workspace: Path,
        exit_grace: float = STOP_GRACE_SECS,
    ) -> None:
        self.protocol: int | None = None  # known from the answer to the opening line
        self.exit_grace = exit_grace
        self.previous_case: str | None = None
        self.held: HeldVerdict | None = None  # the verdict of the case it ended last
        self._stderr_mark = 0  # the size of its stderr when it ended that case
        self._marked = False  # the next line written is a case's first (see took_line)
        self._writing = False  # that line's write has begun
        self._line_written = False
        self._line_done = threading.Event()  # set once the write of that line has returned
        self._taken: bool | None = None  # whether it read that line, once known
        self.closing = threading.Event()  # set once the process is being ended: reads give up
        self.pending = b""  # bytes read past the last line
        withheld = monitor.withheld_variables  # the live key's variable: never the agent's
        self.endpoint = ReplayEndpoint(monitor)
        self.endpoint.start()
        # Unlinked, outside the case's workspace: it outlives cases and leaves nothing behind.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by release())
        fd = self._stderr.fileno()
        # Appending, so that emptying it at a case's start cannot leave the command writing
        # past the end.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
        self._released = False
        env = {
            **{name: value for name, value in os.environ.items() if name not in withheld},
            **self.endpoint.agent_environment(),
            "EVALRUNNER_WORKSPACE": str(workspace),
            OFFER_VARIABLE: ",".join(str(version) for version in PROTOCOLS),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        try:
            self.process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                start_new_session=True,
            )
        except OSError as exc:
            self.endpoint.close()
            self._stderr.close()
            raise RunError(
                f"cannot start agent command {shlex.join(argv)!r}: {exc.strerror or exc}"
            ) from None
        _track(self)

    # --- lines ------------------------------------------------------------------------------

    def write_line(self, line: dict[str, object]) -> bool:
        """Write one JSON line; False when the command no longer reads its stdin."""
        data = json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"
        stdin = cast(IO[bytes], self.process.stdin)
        written = False
        self._writing = self._marked
        try:
            stdin.write(data)
            stdin.flush()
            written = True
        except (BrokenPipeError, OSError, ValueError):
            pass  # stdin closed or the process gone: `written` stays False; its exit says why
        finally:
            if self._marked:
                self._marked, self._writing, self._line_written = False, False, written
                self._line_done.set()
        return written

    def mark_line(self) -> None:
        """The next line written is a case's first, whose reading :meth:`took_line` tells."""
        self._line_done.clear()
        self._marked, self._writing, self._line_written, self._taken = True, False, False, None

    def took_line(self) -> bool:
        """Whether the command has read the case's first line (:meth:`mark_line`): it was
        written and no byte of it is left unread in the pipe. Once true, it stays true; once
        stdin is closed, what was known then stays.

        Asked (by the endpoint) while that line is being written, it waits for the write to
        return, since the command may read the line before the write call returns; at most
        :data:`LINE_WRITE_WAIT_SECS`, after which a write still under way means the command
        is not reading (a line longer than the pipe holds, while it waits on a request)."""
        if self._taken is None and (self._marked or self._line_written):
            if self._marked and not self._writing:
                return False  # the line is not being written yet: it cannot have been read
            if not self._line_done.wait(LINE_WRITE_WAIT_SECS) or not self._line_written:
                return False
            unread = self._unread_input()
            if unread is None or unread == 0:
                self._taken = True
        return bool(self._taken)

    def _unread_input(self) -> int | None:
        """How many bytes written to the command's stdin it has not read; ``None`` where
        the platform does not say (``FIONREAD`` on a pipe's write end) or stdin is closed."""
        stdin = self.process.stdin
        if stdin is None or stdin.closed:
            return None
        count = array("i", [0])
        try:
            fcntl.ioctl(stdin.fileno(), termios.FIONREAD, count)
        except (OSError, ValueError):
            return None
        return count[0]

    def read_line(self, deadline: float | None = None) -> bytes | None:
        """One line from the command (at most :data:`MAX_LINE_BYTES` + 1 bytes), what was
        read when it hung up, or None once ``deadline`` (monotonic) has passed. Polls, so
        that a kill from another thread (a timeout) ends the wait even while some process
        it left behind holds the pipe open."""
        stdout = cast(IO[bytes], self.process.stdout)
        buffer = self.pending
        while b"\n" not in buffer and len(buffer) <= MAX_LINE_BYTES:
            if self.closing.is_set():
                return b""
            if deadline is not None and time.monotonic() >= deadline:
                self.pending = buffer
                return None
            try:
                ready, _, _ = select.select([stdout.fileno()], [], [], 0.05)
                if not ready:
                    continue
                chunk = os.read(stdout.fileno(), 1 << 16)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                self.pending = b""
                return buffer
            buffer += chunk
        line, newline, rest = buffer.partition(b"\n")
        self.pending = rest
        return line + newline if newline else buffer

    def read_available(self) -> bytes:
        """What the command has printed and nobody has read (without waiting)."""
        data, self.pending = self.pending, b""
        stdout = self.process.stdout
        if stdout is None:
            return data
        with contextlib.suppress(OSError, ValueError):
            while len(data) <= MAX_LINE_BYTES:
                ready, _, _ = select.select([stdout.fileno()], [], [], 0)
                chunk = os.read(stdout.fileno(), 1 << 16) if ready else b""
                if not chunk:
                    break
                data += chunk
        return data

    def rest_of_stdout(self) -> bytes:
        """What the command printed after its last reply line (the writers are gone)."""
        stdout = self.process.stdout
        if stdout is None or stdout.closed:
            return b""
        data = self.read_available()
        with contextlib.suppress(OSError):
            stdout.close()
        return data

    # --- the case it ended last -------------------------------------------------------------

    def hold(self) -> None:
        """It ended its case cleanly and waits for the next: that case's verdict is held
        (:class:`HeldVerdict`) until it takes the next case or exits."""
        self.held = HeldVerdict()
        try:
            self._stderr_mark = os.fstat(self._stderr.fileno()).st_size
        except (OSError, ValueError):
            self._stderr_mark = 0

    def settle_held(self, problem: str | None = None) -> None:
        """Settle the held verdict: the case stands, or fails with ``problem``."""
        if self.held is not None:
            self.held.settle(problem)

    def since_ended(self, code: int | None) -> str | None:
        """What it did since it ended its case, that fails that case: it exited with a
        non-zero ``code`` (an exit 0 is clean: the case had ended), sent a model request,
        printed on stdout, or printed a traceback."""
        strays = self.endpoint.take_strays()
        if code is not None and code != 0:
            return f"{_exit_status(code)}{self.stderr_note()}"
        if strays:
            return _stray_requests(strays)
        extra = self.read_available()
        if extra:
            return f"printed {_shown_bytes(extra)}"
        if self._traceback_since_ended():
            return f"printed a traceback on stderr{self.stderr_note()}"
        return None

    def _traceback_since_ended(self) -> bool:
        try:
            fd = self._stderr.fileno()
            size = os.fstat(fd).st_size
            start = min(self._stderr_mark, size)
            data = os.pread(fd, min(size - start, 1 << 20), start)
        except (OSError, ValueError):
            return False
        return TRACEBACK.encode() in data

    def end_of_run(self, exited: bool, when: str = "at the end of the run") -> None:
        """Settle the held verdict once its stdin was closed (``when``): a non-zero exit, a
        traceback, a hang (``exited`` false) or anything it did since it ended its case
        fails that case."""
        if self.held is None or self.held.settled:
            return
        closed = f"after its stdin was closed {when}"
        code = self.process.returncode
        if not exited:
            problem: str | None = (
                f"did not exit within {self.exit_grace:g}s {closed} (agent_exit_grace_secs "
                "gives it longer); it was killed"
            )
        elif code != 0:
            problem = f"{_exit_status(code)} {closed}{self.stderr_note()}"
        else:
            problem = self.since_ended(code)
        self.settle_held(_when("its last", problem) if problem is not None else None)

    # --- stderr -----------------------------------------------------------------------------

    def reset_stderr(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            os.ftruncate(self._stderr.fileno(), 0)

    def stderr_note(self) -> str:
        tail = self._stderr_tail()
        return f"; its stderr ends:\n{tail}" if tail else ""

    def _stderr_tail(self, lines: int = 5) -> str:
        try:
            fd = self._stderr.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - 64 * 1024)  # the end is what is shown
            text = os.pread(fd, size - start, start).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    # --- ending -----------------------------------------------------------------------------

    def exits_soon(self, timeout: float | None = None) -> bool:
        """Whether the command exits within ``timeout`` seconds; by default its exit grace
        (after its stdout ended: is it exiting? its end is not reaped at once)."""
        try:
            self.process.wait(timeout=self.exit_grace if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def close_stdin(self) -> None:
        if self._line_written and self._taken is None:
            # What closing forgets: whether the case's first line had been read.
            self._taken = self._unread_input() in (None, 0)
        with contextlib.suppress(OSError, ValueError):
            if self.process.stdin is not None:
                self.process.stdin.close()

    def stop(self, grace: float) -> bool:
        """Close stdin and wait up to ``grace`` seconds; kill the process group if it lingers.
        True when the process exited by itself."""
        self.close_stdin()
        exited = self.exits_soon(grace)
        self.kill_group()
        if not exited:
            self.process.wait()
        return exited

    def kill_group(self) -> None:
        """End everything the command started (its session's process group)."""
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def retire(self) -> None:
        """End the process now (it is not reused) and release what it holds."""
        self.closing.set()
        self.close_stdin()
        self.kill_group()
        self.process.wait()
        self.release()

    def release(self) -> None:
        """Close the endpoint, the pipes and the stderr file (idempotent)."""
        if self._released:
            return
        self._released = True
        self.settle_held()  # whoever ended it has said what fails the case, if anything
        self.endpoint.close()
        stdout = self.process.stdout
        if stdout is not None:
            with contextlib.suppress(OSError):
                stdout.close()
        with contextlib.suppress(OSError):
            self._stderr.close()
        _untrack(self)


def _end_together(processes: Sequence[_AgentProcess], when: str = "at the end of the run") -> None:
    """The end of the run for processes waiting between cases: their stdin is closed (they
    should exit), then after at most the longest of their exit graces for them all, their
    process groups are killed. How each ended settles its held verdict."""
    for proc in processes:
        proc.closing.set()
        proc.close_stdin()
    grace = max((proc.exit_grace for proc in processes), default=0.0)
    deadline = time.monotonic() + grace
    for proc in processes:
        exited = proc.exits_soon(max(0.0, deadline - time.monotonic()))
        proc.kill_group()
        proc.exits_soon(1.0)
        proc.end_of_run(exited, when)
        proc.release()


class _Pool:
    """The processes of one factory that wait for a next case, in this (worker) process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_AgentProcess] = []
        _POOLS.add(self)

    def lease(self) -> _AgentProcess | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def give_back(self, proc: _AgentProcess) -> None:
        with self._lock:
            self._idle.append(proc)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        _end_together(idle)

    def forget(self) -> None:
        """In a forked child: the parent's processes are not this process's to use or end."""
        self._lock = threading.Lock()
        self._idle = []


_POOLS: weakref.WeakSet[_Pool] = weakref.WeakSet()
_LIVE: set[_AgentProcess] = set()
_LIVE_LOCK = threading.Lock()
_EXIT_HOOK_PID: int | None = None


def _track(proc: _AgentProcess) -> None:
    global _EXIT_HOOK_PID
    with _LIVE_LOCK:
        _LIVE.add(proc)
        if os.getpid() != _EXIT_HOOK_PID:
            _EXIT_HOOK_PID = os.getpid()
            # multiprocessing's exit hook, not atexit: a --jobs worker ends with os._exit,
            # after running these, and never runs atexit.
            multiprocessing.util.Finalize(None, _end_all, exitpriority=10)


def _untrack(proc: _AgentProcess) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(proc)


def _end_all() -> None:
    """At exit: no agent process (and nothing it started) outlives the run."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    _end_together(live)


def _forget_the_parents_agents() -> None:
    global _LIVE_LOCK, _EXIT_HOOK_PID
    _LIVE_LOCK = threading.Lock()
    _LIVE.clear()
    _EXIT_HOOK_PID = None
    for pool in list(_POOLS):
        pool.forget()


os.register_at_fork(after_in_child=_forget_the_parents_agents)


def _strict_json(text: str) -> object:
    """The JSON value of a line, or None when it is not strict JSON (duplicate keys, NaN)."""
    try:
        return json.loads(text, parse_constant=reject_constant, object_pairs_hook=unique_keys)
    except (ValueError, RecursionError):
        return None


def _shown(value: object, limit: int = 60) -> str:
    """A value from a command, quoted for an error: JSON, escaped, cut short."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _shown_bytes(data: bytes) -> str:
    """What a command printed, quoted for an error: stripped, cut short."""
    shown = data.decode("utf-8", "replace").strip()
    return repr(shown if len(shown) <= 200 else shown[:197] + "...")


def _exit_status(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


def _reply_problem(error: ValidationError) -> str:
    """A reply-line schema error in words: what is wrong, what would be right."""
    value = json.dumps(error.instance, ensure_ascii=False)
    value = value if len(value) <= 60 else value[:57] + "..."
    if error.validator == "type":
        wanted = _TYPE_WORDS.get(str(error.validator_value), str(error.validator_value))
        return f"{value} is not {wanted}"
    if error.validator == "required":
        return f"a required field is missing ({error.message.split(' is a required')[0]})"
    if error.validator == "additionalProperties":
        return f"unknown field: {error.message.split('(')[-1].rstrip(')')}"
    if error.validator == "minLength":
        return "must not be empty"
    return error.message


_TYPE_WORDS = {
    "string": "a string",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
    "['object', 'string']": "an object or a string",
}


def _record(entry: dict[str, Any]) -> ToolCallRecord:
    """One reported dispatch of a reply line (already schema-valid) as a record; arguments
    given as an object become the same compact JSON text a fixture's object becomes."""
    return ToolCallRecord(
        name=entry["name"],
        arguments=argument_text(entry["arguments"]),
        result=entry["result"],
        success=entry["success"],
        id=entry["id"],
    )
