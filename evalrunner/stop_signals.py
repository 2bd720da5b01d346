"""SIGINT and SIGTERM during a run: they stop it as :class:`~evalrunner.model.RunInterrupted`,
which the pipeline turns into a report of the finished cases, and they wait while a report file
is renamed into place.

Both context managers leave signals alone outside the main thread (evalrunner embedded in
another program), where Python cannot install handlers.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from evalrunner.model import RunInterrupted

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a run: Ctrl-C, and what CI runners and ``kill`` send."""


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise RunInterrupted(signum)


@contextmanager
def signals_stop_the_run() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM raise :class:`RunInterrupted` (its ``signum`` says
    which); the previous handlers are restored on the way out."""
    with _handled(_raise_interrupted):
        yield


@contextmanager
def signals_ignored() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM are ignored: a report half-renamed by a second Ctrl-C
    helps nobody."""
    with _handled(signal.SIG_IGN):
        yield


@contextmanager
def _handled(handler: Callable[[int, FrameType | None], Any] | signal.Handlers) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
