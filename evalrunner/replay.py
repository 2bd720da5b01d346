"""Stage 3, replay: run one admitted case through an agent and record what happened.

Each case gets a fresh replay provider, observer, agent and temporary workspace; cases cannot
see one another. A run error (script exhausted or left over, the iteration cap, an exception in
the agent) ends that case's run and is kept in the record; it never stops the suite.
"""

from __future__ import annotations

import tempfile
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
) -> RunRecord:
    """Replay ``case`` turn by turn and return its :class:`RunRecord`.

    ``tools`` defaults to the built-in tools. Without ``workspace``, a temporary one is made
    and removed when the run ends.
    """
    if workspace is None:
        with case_workspace() as fresh:
            return run_case(
                case,
                agent_factory=agent_factory,
                tools=tools,
                max_tool_iterations=max_tool_iterations,
                workspace=fresh,
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
    final_response = ""
    error: str | None = None
    started = time.perf_counter()
    try:
        agent = agent_factory(context)
        for index, turn in enumerate(case.turns):
            provider.begin_turn(index)
            reply = agent.respond(turn.user_input)
            if not isinstance(reply, str):
                raise RunError(f"the agent replied with {type(reply).__name__}, not text")
            final_response = reply
            provider.end_turn()
    except RunError as exc:
        error = str(exc)
    except Exception as exc:
        error = f"the agent raised {type(exc).__name__}: {exc}"
    duration_ms = int((time.perf_counter() - started) * 1000)
    return RunRecord(
        final_response=final_response,
        history=tuple(observer.messages),
        tool_calls=tuple(observer.tool_calls),
        input_tokens=provider.input_tokens,
        output_tokens=provider.output_tokens,
        llm_calls=provider.llm_calls,
        duration_ms=duration_ms,
        requests=tuple(provider.requests),
        error=error,
    )
