"""The model side of the agent's boundary: the :class:`ModelProvider` interface and the
:class:`ReplayProvider` that serves a fixture's script.

An agent only ever calls :meth:`ModelProvider.complete`. The live provider
(:mod:`evalrunner.live.provider`) implements the same interface; the conversation monitor wraps
whichever one a case runs on, and the runner hands it in (``run_case(provider=...)``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from evalrunner.model import (
    ModelRequest,
    ModelResponse,
    RunError,
    Turn,
)


@runtime_checkable
class ModelProvider(Protocol):
    """Answers a model request with text or tool calls.

    An agent only calls :meth:`complete`. The runner also reads :attr:`retrying` and
    :attr:`withheld_variables`, which a provider inherits (as ``None`` and ``()``) by
    subclassing this class; the live provider gives its own."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        """The model's response to ``request``; raises :class:`RunError` if it cannot give one."""
        ...

    @property
    def retrying(self) -> str | None:
        """While a request waits to be sent again: the wait and its cause (an HTTP 429,
        say), for a case timeout to name; else ``None``."""
        return None

    @property
    def withheld_variables(self) -> tuple[str, ...]:
        """The environment variables an agent process must not be given (a live model's key
        variable); none by default."""
        return ()


class _Completing(Protocol):
    def complete(self, request: ModelRequest) -> ModelResponse: ...


class DeclaredProvider(ModelProvider):
    """A provider that defines :meth:`~ModelProvider.complete` alone (an agent needs no
    more), given what the runner also reads: its own ``retrying`` and ``withheld_variables``
    when it has them, else the defaults of :class:`ModelProvider`. Every other attribute
    (``begin_turn``, ``end_turn``, ...) is the provider's own."""

    def __init__(self, provider: _Completing) -> None:
        self.provider = provider

    def complete(self, request: ModelRequest) -> ModelResponse:
        """The wrapped provider's response."""
        return self.provider.complete(request)

    @property
    def retrying(self) -> str | None:
        """The wrapped provider's, else ``None``."""
        said: str | None = getattr(self.provider, "retrying", None)
        return said

    @property
    def withheld_variables(self) -> tuple[str, ...]:
        """The wrapped provider's, else none."""
        withheld: tuple[str, ...] = getattr(self.provider, "withheld_variables", ())
        return withheld

    def __getattr__(self, name: str) -> object:
        return getattr(self.provider, name)


def declared(provider: _Completing) -> ModelProvider:
    """``provider`` as the runner reads it: itself when it declares every member of
    :class:`ModelProvider` (subclassing it does), else a :class:`DeclaredProvider` over it,
    so that a provider written with ``complete`` alone runs as it did."""
    return provider if isinstance(provider, ModelProvider) else DeclaredProvider(provider)


class ReplayProvider(ModelProvider):
    """Serves the scripted responses of a case, one FIFO queue per turn (SPEC §5).

    The runner brackets each turn with :meth:`begin_turn` and :meth:`end_turn`; responses never
    bleed from one turn into another. Turns are numbered from 1 in messages. Every request is
    kept, and usage is counted from the responses served (the conversation monitor keeps the
    evidence the run record holds).
    """

    def __init__(self, turns: Sequence[Turn]) -> None:
        self._queues = [deque(turn.responses) for turn in turns]
        self._turn: int | None = None
        self.requests: list[ModelRequest] = []
        self.llm_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def begin_turn(self, index: int) -> None:
        """Serve turn ``index`` (0-based) from now on; asking for a model response in a turn
        the fixture does not script is a run error."""
        self._turn = index

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Pop the current turn's next scripted response."""
        self.requests.append(request)
        if self._turn is None:
            raise RunError("the agent requested a model response outside any turn")
        if self._turn >= len(self._queues):
            raise RunError(
                f"the agent began turn {self._turn + 1}, but the fixture scripts only "
                f"{len(self._queues)} turn(s)"
            )
        queue = self._queues[self._turn]
        if not queue:
            raise RunError(
                f"turn {self._turn + 1} requested more model responses than the fixture "
                "scripts for it"
            )
        response = queue.popleft()
        self.llm_calls += 1
        self.input_tokens += response.input_tokens
        self.output_tokens += response.output_tokens
        return response

    def end_turn(self) -> None:
        """Close the current turn; leftover responses are a run error."""
        if self._turn is None:
            return
        left = len(self._queues[self._turn]) if self._turn < len(self._queues) else 0
        turn = self._turn
        self._turn = None
        if left:
            raise RunError(f"turn {turn + 1} scripted {left} response(s) the agent never requested")
