"""``evalrunner serve``: one case's replay endpoint on its own, for driving an agent by hand.

The endpoint infers turn boundaries from the requests (a new user message opens the next turn)
and stops by itself once the script is consumed: every scripted response served and every
tool call's result received. It also stops at the first run error (after answering it: nothing
more can be served), or when the user stops it (Ctrl-C).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalrunner.boundary.conformance import ConversationMonitor, Dispatch
from evalrunner.boundary.provider import ReplayProvider
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_document
from evalrunner.model import AdmissionError, Case, ToolCall
from evalrunner.wire.endpoint import Exchange, ReplayEndpoint


@dataclass(frozen=True, slots=True)
class ServeOutcome:
    """How a ``serve`` session ended and what crossed the tool boundary meanwhile."""

    served: int
    scripted: int
    tool_calls: tuple[Dispatch, ...]
    unresolved: tuple[ToolCall, ...]
    error: str | None = None
    consumed: bool = False
    """True when it ended because the whole script was served and answered."""


def load_case(path: Path) -> Case | list[AdmissionError]:
    """Load and admit one fixture file."""
    document = load_document(path)
    if isinstance(document, list):
        return document
    return admit(document)


def scripted_responses(case: Case) -> int:
    """How many model responses the case scripts, over all turns."""
    return sum(len(turn.responses) for turn in case.turns)


def serve_case(
    case: Case,
    *,
    port: int = 0,
    on_ready: Callable[[ReplayEndpoint], None],
    on_exchange: Callable[[Exchange], None],
    stop: threading.Event | None = None,
) -> ServeOutcome:
    """Serve ``case`` until its script is consumed, a run error, Ctrl-C, or ``stop`` is set.

    ``on_ready`` is called once the endpoint listens; ``on_exchange`` after each request is
    answered (from the serving thread). Ctrl-C (``KeyboardInterrupt``) ends the session
    normally: the outcome says what was served until then.
    """
    scripted = scripted_responses(case)
    monitor = ConversationMonitor(ReplayProvider(case.turns), [t.user_input for t in case.turns])
    done = stop if stop is not None else threading.Event()
    finished = threading.Event()

    def exchanged(exchange: Exchange) -> None:
        on_exchange(exchange)
        if endpoint.error is not None:
            done.set()
        elif endpoint.responses_served >= scripted and not endpoint.unresolved_calls():
            finished.set()
            done.set()

    endpoint = ReplayEndpoint(
        monitor,
        infer_turns=True,
        port=port,
        on_exchange=exchanged,
    )
    with endpoint, contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a user ends it
        on_ready(endpoint)
        done.wait()
    return ServeOutcome(
        served=endpoint.responses_served,
        scripted=scripted,
        tool_calls=monitor.fed_back(),
        unresolved=tuple(endpoint.unresolved_calls()),
        error=endpoint.error,
        consumed=finished.is_set(),
    )


def exchange_line(exchange: Exchange) -> str:
    """One log line for an answered request."""
    how = f" ({exchange.api}{', stream' if exchange.stream else ''})" if exchange.api else ""
    verdict = exchange.summary if exchange.status < 400 else f"refused: {exchange.summary}"
    return f"{exchange.method} {exchange.path}{how} -> {exchange.status} {verdict}"


def outcome_lines(outcome: ServeOutcome) -> list[str]:
    """The session's summary: each tool call recorded, then how it ended."""
    lines = [
        f"tool call {d.call.id} {d.call.name} {d.call.arguments} -> "
        f"{json.dumps(d.result, ensure_ascii=False)}{_flag(d.success)}"
        for d in outcome.tool_calls
    ]
    lines += [f"tool call {c.id} {c.name}: no result came back" for c in outcome.unresolved]
    if outcome.error is not None:
        lines.append(f"run error: {outcome.error}")
    elif outcome.consumed:
        lines.append(f"script consumed: {outcome.served} scripted response(s) served")
    else:
        lines.append(f"stopped: {outcome.served} of {outcome.scripted} scripted response(s) served")
    return lines


def _flag(success: bool | None) -> str:
    if success is None:
        return ""  # neither OpenAI wire has an error flag
    return " (ok)" if success else " (failed)"
