"""An agent in any language, run as a command, replayed over HTTP (``[eval] agent_command``).

Per case, the runner starts a :class:`~evalrunner.endpoint.ReplayEndpoint` serving the case's
script in the OpenAI and Anthropic wire formats, then launches the command with these in its
environment:

* ``OPENAI_BASE_URL`` (``http://127.0.0.1:PORT/v1``) and ``ANTHROPIC_BASE_URL``
  (``http://127.0.0.1:PORT``), which the official SDKs read;
* ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY`` set to a dummy value (nothing checks them);
* ``EVALRUNNER_WORKSPACE``, the case's private directory; ``NO_PROXY`` covering loopback.

The conversation is a small line protocol (``schemas/agent-command/``): for each turn the
runner writes one JSON object on the command's stdin, ``{"turn": 1, "user_input": "..."}``, and
reads one JSON object back from its stdout, ``{"reply": "..."}``. After the last turn stdin is
closed and the command should exit. Its stdout is reserved for reply lines (log to stderr). A
command that exits before replying, prints anything else, or outlives the case timeout fails
the case with an error saying so, with the end of its stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, cast

from jsonschema.exceptions import ValidationError, best_match

from evalrunner.admit import argument_text
from evalrunner.agent import Agent, AgentContext, AgentFactory
from evalrunner.conformance import ConversationMonitor
from evalrunner.endpoint import ReplayEndpoint
from evalrunner.model import RunError, ToolCallRecord, render_json_path
from evalrunner.schemas import agent_reply_validator

STOP_GRACE_SECS = 2.0
"""How long a command may take to exit after its stdin is closed (after its final reply)
before it is killed; not exiting in time fails the case."""

MAX_LINE_BYTES = 8 * 1024 * 1024
"""The longest reply line read from a command; a longer one fails the case (memory stays
bounded whatever the command prints)."""


def split_command(command: str) -> list[str]:
    """Split a command line like a POSIX shell would, without running a shell."""
    return shlex.split(command)


def command_agent_factory(command: str | Sequence[str], *, cwd: Path) -> AgentFactory:
    """A factory that runs ``command`` (from ``cwd``) as the agent of each case."""
    argv = split_command(command) if isinstance(command, str) else list(command)
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

    def factory(context: AgentContext) -> Agent:
        return CommandAgent(context, argv, cwd=cwd)

    return factory


class CommandAgent:
    """Drives one external agent process through the turns of one case.

    The process runs in a session (and process group) of its own, so that ending it ends
    whatever it started. It runs its own tools (``runs_own_tools``); whether it reports its
    dispatches is decided by each reply line (``reports_dispatches``).
    """

    runs_own_tools = True

    def __init__(self, context: AgentContext, argv: list[str], *, cwd: Path) -> None:
        if not isinstance(context.provider, ConversationMonitor):
            raise RunError("a command agent needs the runner's conversation monitor as provider")
        self._argv = argv
        self._turn = 0
        self._observer = context.observer
        self.reports_dispatches = False
        self._awaiting = False  # a reply is being read: close() then kills without grace
        self._closing = threading.Event()  # close() has begun: a pending read gives up
        self._pending = b""  # bytes read past the last reply line
        self._lock = threading.Lock()
        self._endpoint = ReplayEndpoint(context.provider)
        self._endpoint.start()
        self._stderr_path = context.workspace / ".agent-command.stderr"
        self._stderr = self._stderr_path.open("w+b")
        env = {
            **os.environ,
            **self._endpoint.agent_environment(),
            "EVALRUNNER_WORKSPACE": str(context.workspace),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        try:
            self._process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                start_new_session=True,
            )
        except OSError as exc:
            self.close()
            raise RunError(
                f"cannot start agent command {shlex.join(argv)!r}: {exc.strerror or exc}"
            ) from None

    def respond(self, user_input: str) -> str:
        """Send one turn's input line and read the reply line."""
        self._turn += 1
        line = json.dumps({"turn": self._turn, "user_input": user_input}, ensure_ascii=False)
        stdin = cast(IO[bytes], self._process.stdin)
        stdout = cast(IO[bytes], self._process.stdout)
        try:
            stdin.write(line.encode("utf-8") + b"\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._failure(f"stopped reading its input before turn {self._turn}") from None
        self._awaiting = True
        try:
            answer = self._readline(stdout)
        finally:
            self._awaiting = False
        if self._endpoint.error is not None:
            raise RunError(self._endpoint.error)
        if not answer:
            if not self._closing.is_set() and not self._exits_soon():
                raise self._failure(f"closed its stdout before replying to turn {self._turn}")
            raise self._failure(f"exited before replying to turn {self._turn}")
        if len(answer) > MAX_LINE_BYTES:
            raise self._failure(
                f"printed a line of over {MAX_LINE_BYTES} bytes for turn {self._turn}; a "
                "reply line is one JSON object"
            )
        return self._reply(answer.decode("utf-8", errors="replace"))

    def _exits_soon(self) -> bool:
        """After its stdout ended: is the command exiting (its end is not reaped at once)?"""
        try:
            self._process.wait(timeout=STOP_GRACE_SECS)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _readline(self, stdout: IO[bytes]) -> bytes:
        """One line from the command (at most :data:`MAX_LINE_BYTES` + 1 bytes), or what was
        read when it hung up. Polls, so that close() on another thread (a timeout) ends the
        wait even while some process it left behind holds the pipe open."""
        fd = stdout.fileno()
        buffer = self._pending
        while b"\n" not in buffer and len(buffer) <= MAX_LINE_BYTES:
            if self._closing.is_set():
                return b""
            try:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if not ready:
                    continue
                chunk = os.read(fd, 1 << 16)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                self._pending = b""
                return buffer
            buffer += chunk
        line, newline, rest = buffer.partition(b"\n")
        self._pending = rest
        return line + newline if newline else buffer

    def _reply(self, answer: str) -> str:
        try:
            message = json.loads(
                answer, parse_constant=_no_constant, object_pairs_hook=_unique_keys
            )
        except (ValueError, RecursionError):
            message = None
        if not isinstance(message, dict):
            shown = answer.strip()
            shown = shown if len(shown) <= 200 else shown[:197] + "..."
            raise self._failure(
                f"printed {shown!r} for turn {self._turn}, not a reply line; stdout is for one "
                'JSON object per turn, {"reply": "..."} (log to stderr instead; see '
                "schemas/agent-command/reply.schema.json)"
            )
        problem = best_match(agent_reply_validator().iter_errors(message))
        if problem is not None:
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

    def _failure(self, what: str) -> RunError:
        self._stop(grace=1.0)
        code = self._process.returncode
        status = f" (it {_exit_status(code)})" if code is not None else ""
        return RunError(f"the agent command {what}{status}{self._stderr_note()}")

    def _stderr_note(self) -> str:
        tail = self._stderr_tail()
        return f"; its stderr ends:\n{tail}" if tail else ""

    def _stderr_tail(self, lines: int = 5) -> str:
        try:
            with self._stderr_path.open("rb") as stderr:
                size = stderr.seek(0, os.SEEK_END)
                stderr.seek(max(0, size - 64 * 1024))  # the end is what is shown
                text = stderr.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def _stop(self, grace: float) -> bool:
        """Close stdin and wait up to ``grace`` seconds; kill the process group if it lingers.
        True when the process exited by itself."""
        process = self._process
        with contextlib.suppress(OSError, ValueError):
            if process.stdin is not None:
                process.stdin.close()
        exited = True
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            exited = False
        self._kill_group()
        if not exited:
            process.wait()
        return exited

    def _kill_group(self) -> None:
        """End everything the command started (its session's process group)."""
        with contextlib.suppress(OSError):
            os.killpg(self._process.pid, signal.SIGKILL)

    def abort(self) -> None:
        """Stop at once (the case timed out or the run was interrupted): the process group
        is killed now, whatever a close() in progress is waiting for."""
        self._closing.set()
        if getattr(self, "_process", None) is not None:
            self._kill_group()

    def close(self) -> None:
        """End the process and the endpoint.

        After the final reply the command must exit by itself within
        :data:`STOP_GRACE_SECS` once its stdin is closed, with exit code 0, printing nothing
        more; otherwise a :class:`RunError` says which. While a reply is awaited (a timeout),
        the process group is killed at once.
        """
        self._closing.set()
        with self._lock:
            process = getattr(self, "_process", None)
            problem: str | None = None
            if process is not None:
                problem = self._end(process)
            self._endpoint.close()
            with contextlib.suppress(OSError):
                self._stderr.close()
        if problem is not None:
            raise RunError(f"the agent command {problem}")

    def _end(self, process: subprocess.Popen[bytes]) -> str | None:
        if process.returncode is not None and process.stdout is not None and process.stdout.closed:
            return None  # ended already
        if self._awaiting:
            self._kill_group()
            process.wait()
            return None  # the reading thread gives up at its next poll
        exited = process.returncode is not None or self._stop(grace=STOP_GRACE_SECS)
        self._kill_group()
        extra = self._rest_of_stdout(process)
        if not exited:
            return (
                f"did not exit within {STOP_GRACE_SECS:g}s after its stdin was closed (after "
                "its final reply); it was killed"
            )
        if extra:
            shown = extra.decode("utf-8", "replace").strip()
            shown = shown if len(shown) <= 200 else shown[:197] + "..."
            return f"printed more after its final reply: {shown!r}" + self._stderr_note()
        if process.returncode != 0:
            return (
                f"{_exit_status(process.returncode)} after its final reply" + self._stderr_note()
            )
        return None

    def _rest_of_stdout(self, process: subprocess.Popen[bytes]) -> bytes:
        """What the command printed after its last reply line (the writers are gone)."""
        stdout = process.stdout
        if stdout is None or stdout.closed:
            return b""
        data = self._pending
        with contextlib.suppress(OSError, ValueError):  # nothing more to read is no error
            os.set_blocking(stdout.fileno(), False)
            data += os.read(stdout.fileno(), 64 * 1024)
        self._close_stdout(process)
        return data

    @staticmethod
    def _close_stdout(process: subprocess.Popen[bytes]) -> None:
        if process.stdout is not None:
            with contextlib.suppress(OSError):
                process.stdout.close()


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):  # {"reply": "a", "reply": "b"} must not grade either one
        raise ValueError("a key appears twice")
    return value


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


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
