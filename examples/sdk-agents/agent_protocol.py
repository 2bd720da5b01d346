"""evalrunner's agent-command protocol, both versions, for the SDK agents of this directory.

:func:`serve` reads the runner's lines on stdin and prints the agent's lines on stdout. The
agent supplies ``start_case``: called once per case with the case's tool doubles (the
``"tools"`` of its turn-1 line, ``[]`` when it declares none), it returns the function that
handles that case's turns (user input in, reply line out), holding that case's conversation
and nothing else, so no state can pass from one case to the next.

- Protocol 1 (one process per case): one turn line in, one reply line out, until stdin closes.
- Protocol 2 (persistent), taken up when the runner offers it in ``EVALRUNNER_PROTOCOLS``:
  the first line (a protocol-1 turn line, the opening line) is answered with the handshake
  ``{"evalrunner": 2}`` and not acted on; then each line names its case,
  ``{"case": T, "turn": N, "user_input": ...}`` in, ``{"case": T, "reply": ...}`` out, and
  ``{"case": T, "end": true}`` is answered with ``{"case": T, "ended": true}``. A turn that
  raises is answered with ``{"case": T, "error": "..."}`` (the case fails; the process lives
  on). The process exits when stdin closes, at the end of the run.

What makes a process worth keeping is what it did at start-up: importing the SDK and making
its client. The client is made once; the replay endpoint's address stays the same for the
whole life of the process, so the client works for every case.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

TurnHandler = Callable[[str], dict[str, Any]]
CaseStarter = Callable[[list[dict[str, Any]]], TurnHandler]
"""Starts one case, given its tool doubles: its turn handler."""
"""One case's conversation: a user input in, the turn's reply line (without ``case``) out."""


def _emit(line: dict[str, Any]) -> None:
    # ASCII-escaped, so that any string (even a lone surrogate) can be written to stdout.
    print(json.dumps(line), flush=True)


def serve(start_case: CaseStarter, *, persistent: bool = True) -> None:
    """Serve every case the runner sends: in protocol 2 if the runner offers it and
    ``persistent`` is true, else in protocol 1 (one case, then exit)."""
    offered = os.environ.get("EVALRUNNER_PROTOCOLS", "").split(",")
    opening = sys.stdin.readline()
    if not opening:
        return
    if not persistent or "2" not in offered:
        first = json.loads(opening)
        handle = start_case(first.get("tools", []))
        _emit(handle(first["user_input"]))
        for line in sys.stdin:
            _emit(handle(json.loads(line)["user_input"]))
        return
    _emit({"evalrunner": 2})
    case: str | None = None
    handle: TurnHandler | None = None
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("end"):
            _emit({"case": message["case"], "ended": True})
            case, handle = None, None
            continue
        if handle is None or message["case"] != case:
            case, handle = message["case"], start_case(message.get("tools", []))
        try:
            reply = handle(message["user_input"])
        except Exception as exc:  # e.g. the endpoint refused a request: this case has failed
            traceback.print_exc()  # to stderr, which the runner shows
            # The process lives on for the next case; this one gets a fresh start anyway.
            _emit({"case": case, "error": f"{type(exc).__name__}: {exc}"})
            continue
        _emit({"case": case, **reply})
