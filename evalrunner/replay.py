"""Stage 3, replay: run one admitted case through an agent and record what happened.

Each case gets a fresh replay provider, observer, agent and temporary workspace; cases cannot
see one another. A run error (script exhausted or left over, the iteration cap, an exception in
the agent) ends that case's run and is kept in the record; it never stops the suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from pathlib import Path

from evalrunner.agent import (
    DEFAULT_MAX_TOOL_ITERATIONS,
    AgentContext,
    AgentFactory,
    reference_agent,
)
from evalrunner.model import Case, ModelRequest, RunError, RunRecord, ToolCall, ToolCallRecord
from evalrunner.observer import RecordingObserver
from evalrunner.provider import ReplayProvider
from evalrunner.tools import ToolSource, fresh_tools


@contextmanager
def case_workspace() -> Iterator[Path]:
    """A fresh, private directory for one case, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="evalrunner-case-") as path:
        yield Path(path)


def run_case(
    case: Case,
    *,
    agent_factory: AgentFactory = reference_agent,
    tools: ToolSource | None = None,
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS,
    workspace: Path | None = None,
    timeout: float | None = None,
) -> RunRecord:
    """Replay ``case`` turn by turn and return its :class:`RunRecord`.

    ``tools`` defaults to the built-in tools; a function is called for this case's own.
    Without ``workspace``, a temporary one is made and removed when the run ends. With
    ``timeout`` (seconds), the agent runs in a worker thread; if the case has not finished in
    time, the record says ``timed out after Ns`` and holds what was observed until then.
    Python cannot kill a thread, so a timed-out agent is abandoned (a daemon thread, after its
    ``close()`` is called) rather than stopped; the run goes on to the next case.
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
        tools=fresh_tools(tools),
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
        try:
            worker.join(timeout)
        finally:
            if worker.is_alive():
                outcome.error = outcome.error or f"timed out after {timeout:g}s"
                _close(outcome.agent)  # e.g. kills an agent command blocked on a read
    duration_ms = int((time.perf_counter() - started) * 1000)
    tool_calls = tuple(observer.tool_calls)
    requests = tuple(provider.requests)
    error = outcome.error or _wire_cannot_grade(case, requests)
    return RunRecord(
        final_response=outcome.final_response,
        history=tuple(observer.messages),
        tool_calls=tool_calls,
        input_tokens=provider.input_tokens,
        output_tokens=provider.output_tokens,
        llm_calls=provider.llm_calls,
        duration_ms=duration_ms,
        requests=requests,
        error=error,
        unreported_calls=_unreported(provider.served_calls, tool_calls),
    )


def _unreported(
    served: list[ToolCall], reported: tuple[ToolCallRecord, ...]
) -> tuple[ToolCall, ...]:
    """Calls the script handed to the agent that the observer never heard about.

    Matched by call id, or, for records without one, by name and argument text.
    """
    ids = Counter(record.id for record in reported if record.id is not None)
    anonymous = Counter((r.name, r.arguments) for r in reported if r.id is None)
    missing = []
    for call in served:
        if ids[call.id] > 0:
            ids[call.id] -= 1
        elif anonymous[(call.name, call.arguments)] > 0:
            anonymous[(call.name, call.arguments)] -= 1
        else:
            missing.append(call)
    return tuple(missing)


def _wire_cannot_grade(case: Case, requests: tuple[ModelRequest, ...]) -> str | None:
    """A run error when the case asserts what its agent's wire cannot report."""
    if case.expects.all_tools_succeeded is not None and any(r.api == "openai" for r in requests):
        return (
            "the case asserts all_tools_succeeded, which the OpenAI chat completions wire "
            "cannot report (it has no flag for a failed tool call); assert the failure text "
            'with tool_results_contain instead (e.g. "Unknown tool")'
        )
    return None


class _Outcome:
    """What the turn loop produced; written by the (possibly worker) thread driving the case."""

    def __init__(self) -> None:
        self.final_response = ""
        self.error: str | None = None
        self.agent: object = None


def _close(agent: object) -> None:
    """Let an agent release what it holds (a process, a server), if it has a ``close()``."""
    close = getattr(agent, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            close()


def _drive(
    case: Case,
    agent_factory: AgentFactory,
    context: AgentContext,
    provider: ReplayProvider,
    outcome: _Outcome,
) -> None:
    loop: asyncio.AbstractEventLoop | None = None  # one per case, for agents written async
    try:
        agent = outcome.agent = agent_factory(context)
        for index, turn in enumerate(case.turns):
            provider.begin_turn(index)
            reply: object = agent.respond(turn.user_input)
            if inspect.isawaitable(reply):
                loop = loop or asyncio.new_event_loop()
                reply = loop.run_until_complete(_awaited(reply))
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
    finally:
        _close(outcome.agent)
        if loop is not None:
            loop.close()


async def _awaited(value: Awaitable[object]) -> object:
    return await value
