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
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, cast

from evalrunner.agent import Agent, AgentContext, AgentFactory
from evalrunner.endpoint import ReplayEndpoint
from evalrunner.model import RunError
from evalrunner.provider import ReplayProvider
from evalrunner.schemas import agent_reply_validator

STOP_GRACE_SECS = 2.0
"""How long a command may take to exit after its stdin is closed, before it is killed."""


def split_command(command: str) -> list[str]:
    """Split a command line like a POSIX shell would, without running a shell."""
    return shlex.split(command)


def command_agent_factory(command: str | Sequence[str], *, cwd: Path) -> AgentFactory:
    """A factory that runs ``command`` (from ``cwd``) as the agent of each case."""
    argv = split_command(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ValueError("agent_command is empty")

    def factory(context: AgentContext) -> Agent:
        return CommandAgent(context, argv, cwd=cwd)

    return factory


class CommandAgent:
    """Drives one external agent process through the turns of one case."""

    def __init__(self, context: AgentContext, argv: list[str], *, cwd: Path) -> None:
        self._argv = argv
        self._turn = 0
        self._endpoint = ReplayEndpoint(cast(ReplayProvider, context.provider), context.observer)
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
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
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
        stdin = cast(IO[str], self._process.stdin)
        stdout = cast(IO[str], self._process.stdout)
        try:
            stdin.write(line + "\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._failure(f"stopped reading its input before turn {self._turn}") from None
        answer = stdout.readline()
        if self._endpoint.error is not None:
            raise RunError(self._endpoint.error)
        if not answer:
            raise self._failure(f"exited before replying to turn {self._turn}")
        return self._reply(answer)

    def _reply(self, answer: str) -> str:
        try:
            message = json.loads(answer)
        except (json.JSONDecodeError, RecursionError):
            message = None
        if message is None or not agent_reply_validator().is_valid(message):
            shown = answer.strip()
            shown = shown if len(shown) <= 200 else shown[:197] + "..."
            raise self._failure(
                f"printed {shown!r} for turn {self._turn}, not a reply line; stdout is for one "
                'JSON object per turn, {"reply": "..."} (log to stderr instead)'
            )
        return str(message["reply"])

    def _failure(self, what: str) -> RunError:
        self._stop(grace=1.0)
        code = self._process.returncode
        status = f" (exit code {code})" if code is not None else ""
        tail = self._stderr_tail()
        return RunError(
            f"the agent command {what}{status}" + (f"; its stderr ends: {tail}" if tail else "")
        )

    def _stderr_tail(self, lines: int = 5) -> str:
        try:
            text = self._stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def _stop(self, grace: float) -> None:
        process = self._process
        with contextlib.suppress(OSError, ValueError):
            if process.stdin is not None:
                process.stdin.close()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def close(self) -> None:
        """End the process (closing stdin, then killing it if it lingers) and the endpoint."""
        process = getattr(self, "_process", None)
        if process is not None and process.poll() is None:
            self._stop(grace=STOP_GRACE_SECS)
        if process is not None and process.stdout is not None:
            with contextlib.suppress(OSError):
                process.stdout.close()
        self._endpoint.close()
        with contextlib.suppress(OSError):
            self._stderr.close()
