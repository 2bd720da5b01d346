"""Stage 3, replay: run one admitted case through an agent and record what happened.

Each case gets a fresh replay provider, observer, agent and temporary workspace; cases cannot
see one another. A run error (script exhausted or left over, the iteration cap, an exception in
the agent) ends that case's run and is kept in the record; it never stops the suite.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from evalrunner.agent import (
    DEFAULT_MAX_TOOL_ITERATIONS,
    AgentContext,
    AgentFactory,
    reference_agent,
)
from evalrunner.model import Case, RunError, RunRecord
from evalrunner.observer import RecordingObserver
from evalrunner.provider import ReplayProvider
from evalrunner.tools import Tool, builtin_tools


@contextmanager
def case_workspace() -> Iterator[Path]:
    """A fresh, private directory for one case, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="evalrunner-case-") as path:
        yield Path(path)


def run_case(
    case: Case,
    *,
    agent_factory: AgentFactory = reference_agent,
    tools: Mapping[str, Tool] | None = None,
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS,
    workspace: Path | None = None,
    timeout: float | None = None,
) -> RunRecord:
    """Replay ``case`` turn by turn and return its :class:`RunRecord`.

    ``tools`` defaults to the built-in tools. Without ``workspace``, a temporary one is made
    and removed when the run ends. With ``timeout`` (seconds), the agent runs in a worker
    thread; if the case has not finished in time, the record says ``timed out after Ns`` and
    holds what was observed until then. Python cannot kill a thread, so a timed-out agent is
    abandoned (a daemon thread) rather than stopped; the run goes on to the next case.
    """
    if workspace is None:
        with case_workspace() as fresh:
            return run_case(
                case,
                agent_factory=agent_factory,
                tools=tools,
                max_tool_iterations=max_tool_iterations,
                workspace=fresh,
                timeout=timeout,
            )
    provider = ReplayProvider(case.turns)
    observer = RecordingObserver()
    context = AgentContext(
        provider=provider,
        tools=dict(tools) if tools is not None else builtin_tools(),
        observer=observer,
        workspace=workspace,
        max_tool_iterations=max_tool_iterations,
    )
    outcome = _Outcome()
    started = time.perf_counter()
    if timeout is None:
        _drive(case, agent_factory, context, provider, outcome)
    else:
        worker = threading.Thread(
            target=_drive,
            args=(case, agent_factory, context, provider, outcome),
            name=f"evalrunner case {case.name}",
            daemon=True,
        )
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            outcome.error = f"timed out after {timeout:g}s"
    duration_ms = int((time.perf_counter() - started) * 1000)
    return RunRecord(
        final_response=outcome.final_response,
        history=tuple(observer.messages),
        tool_calls=tuple(observer.tool_calls),
        input_tokens=provider.input_tokens,
        output_tokens=provider.output_tokens,
        llm_calls=provider.llm_calls,
        duration_ms=duration_ms,
        requests=tuple(provider.requests),
        error=outcome.error,
    )


class _Outcome:
    """What the turn loop produced; written by the (possibly worker) thread driving the case."""

    def __init__(self) -> None:
        self.final_response = ""
        self.error: str | None = None


def _drive(
    case: Case,
    agent_factory: AgentFactory,
    context: AgentContext,
    provider: ReplayProvider,
    outcome: _Outcome,
) -> None:
    try:
        agent = agent_factory(context)
        for index, turn in enumerate(case.turns):
            provider.begin_turn(index)
            reply = agent.respond(turn.user_input)
            if not isinstance(reply, str):
                raise RunError(f"the agent replied with {type(reply).__name__}, not text")
            if outcome.error is not None:
                return  # timed out meanwhile: the record has been taken already
            outcome.final_response = reply
            provider.end_turn()
    except RunError as exc:
        outcome.error = outcome.error or str(exc)
    except Exception as exc:
        outcome.error = outcome.error or f"the agent raised {type(exc).__name__}: {exc}"
    except SystemExit as exc:  # an agent calling sys.exit() must not end the whole run
        outcome.error = outcome.error or f"the agent called sys.exit({exc.code!r})"
