"""A command agent speaking protocol 2 (persistent), correct or broken on purpose, for
tests/test_persistent_agents.py.

    persistent_agent.py WIRE MODE [--stream]

WIRE is openai, openai-responses or anthropic. The agent is evalrunner's reference loop over
evalrunner's own wire client (standard library HTTP), reporting every dispatch. If
``PERSISTENT_AGENT_LOG`` names a file, one line ``<pid> <parent pid>`` is appended to it per
case started, so a test can tell how many processes served a suite and for which worker.

MODE:
ok                        nothing broken
leak                      one conversation for every case (state leaks into the next case)
crash-second              exits with code 5 in the run's second case, before replying
hang-second               never replies in the run's second case (both need the log)
previous-case             from the second case on, replies naming the previous case's token
other-case                replies naming a made-up case
no-case                   replies without "case"
case=JSON                 replies naming the given value as its case
no-handshake              reads the opening line, then waits for protocol-2 lines it never gets
v2-without-handshake      answers the opening line with a protocol-2 reply, no handshake
handshake=JSON            answers the opening line with the given line instead
request-before-handshake  acts on the opening line (asks the model), then sends the handshake
extra-request             asks the model once more after its final reply, before ending the case
extra-stdout              prints a line after its final reply, before ending the case
exit-7                    exits with code 7 when told to end a case
crash-on-end              raises when told to end a case (a traceback, exit code 1)
no-ack                    never answers the end of a case
bad-ack                   answers the end of a case with "ended": false
stray-request             asks the model after ending the first case, before the next one
print-between             prints a line after ending the first case
exit-between              exits with code 0 after ending the run's first case
crash-between             raises after ending the run's first case (a traceback, exit code 1)
                          (these three act after the case whose first user input is
                          PERSISTENT_AGENT_AFTER, if set, else after the run's first case; with
                          PERSISTENT_AGENT_GATE set, once the file PERSISTENT_AGENT_GATE/go
                          exists, and then create PERSISTENT_AGENT_GATE/done)
ignore-eof                does not exit when its stdin closes (the runner must kill it)
exit-at-end               raises when its stdin closes: a traceback, and exit code 1
traceback-at-end          prints a traceback when its stdin closes, and exits with code 0
error=JSON                answers the run's second case with {"case": T, "error": JSON}
error-line=LINE           answers the run's second case with LINE

A model request the endpoint refuses is answered with an error line, as the SDK examples do.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from evalrunner.agents.reference import AgentContext, ReferenceAgent
from evalrunner.boundary.observer import RecordingObserver
from evalrunner.boundary.tools import builtin_tools
from evalrunner.model import Message, ModelRequest, RunError, ToolCallRecord
from evalrunner.wire.client import WireClient

WIRE, MODE = sys.argv[1], sys.argv[2]
STREAM = "--stream" in sys.argv[3:]


def emit(line: object) -> None:
    print(json.dumps(line), flush=True)


def client() -> WireClient:
    base = os.environ["ANTHROPIC_BASE_URL" if WIRE == "anthropic" else "OPENAI_BASE_URL"]
    return WireClient(WIRE, base, stream=STREAM)


class Conversation:
    """One case's agent (or, in leak mode, everyone's)."""

    def __init__(self, model: WireClient, workspace: str) -> None:
        self.observer = RecordingObserver()
        context = AgentContext(
            provider=model,
            tools=builtin_tools(),
            observer=self.observer,
            workspace=Path(workspace),
        )
        self.agent = ReferenceAgent(context)

    def turn(self, user_input: str) -> dict[str, Any]:
        reply = self.agent.respond(user_input)
        return {"reply": reply, "tool_calls": [report(r) for r in self.observer.take()]}


def report(record: ToolCallRecord) -> dict[str, Any]:
    try:
        value: Any = json.loads(record.arguments)
    except ValueError:
        value = None
    return {
        "id": record.id,
        "name": record.name,
        "arguments": value if isinstance(value, dict) else record.arguments,
        "result": record.result,
        "success": record.success,
    }


def log_case() -> int:
    """Log the case's start; how many cases every process of the run has started so far."""
    path = os.environ.get("PERSISTENT_AGENT_LOG")
    if not path:
        return 0
    with open(path, "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {os.getppid()}\n")
    with open(path, encoding="utf-8") as log:
        return len(log.readlines())


def ask_once_more(model: WireClient) -> None:
    with contextlib.suppress(RunError):
        model.complete(ModelRequest((Message("user", "One more thing."),)))


def wait_for(path: Path) -> None:
    """Until the test says when: what happens between cases must happen between them."""
    deadline = time.monotonic() + 60  # a safety net, not a measurement
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def answer_opening(model: WireClient, opening: str) -> bool:
    """Answer the opening line; False when this agent never speaks protocol 2 lines."""
    if MODE == "no-handshake":
        return True  # and then wait for lines that never come
    if MODE == "v2-without-handshake":
        emit({"case": "?", "reply": "hello"})
        return False
    if MODE.startswith("handshake="):
        print(MODE.removeprefix("handshake="), flush=True)
        return True
    if MODE == "request-before-handshake":
        Conversation(model, os.environ["EVALRUNNER_WORKSPACE"]).turn(
            json.loads(opening)["user_input"]
        )
    emit({"evalrunner": 2})
    return True


def main() -> int:
    assert "2" in os.environ["EVALRUNNER_PROTOCOLS"].split(","), "protocol 2 not offered"
    model = client()
    opening = sys.stdin.readline()
    if not opening or not answer_opening(model, opening):
        return 0
    cases_seen = in_run = 0
    first_input = ""
    case: str | None = None
    previous: str | None = None
    conversation: Conversation | None = None
    shared: Conversation | None = None
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("end"):
            if MODE == "extra-request":
                ask_once_more(model)
            elif MODE == "extra-stdout":
                emit({"stray": "after the final reply"})
            elif MODE == "exit-7":
                return 7
            elif MODE == "crash-on-end":
                raise RuntimeError("crashing on purpose when told to end the case")
            elif MODE == "no-ack":
                time.sleep(3600)
            ended = MODE != "bad-ack"
            emit({"case": message["case"], "ended": ended})
            after = os.environ.get("PERSISTENT_AGENT_AFTER")
            acts = first_input == after if after else in_run == 1
            if acts and MODE == "crash-between":
                raise RuntimeError("crashing on purpose after the case ended")
            if acts and MODE in ("stray-request", "print-between", "exit-between"):
                gated = os.environ.get("PERSISTENT_AGENT_GATE")
                if gated:
                    wait_for(Path(gated) / "go")
                if MODE == "stray-request":
                    ask_once_more(model)
                elif MODE == "print-between":
                    emit({"stray": "between cases"})
                if gated:
                    (Path(gated) / "done").touch()
                if MODE == "exit-between":
                    return 0
            previous, case, conversation = case, None, None
            continue
        if message["case"] != case:
            case = message["case"]
            first_input = message["user_input"]
            cases_seen += 1
            in_run = log_case()
            if MODE == "leak":
                shared = shared or Conversation(model, message["workspace"])
                conversation = shared
            else:
                conversation = Conversation(model, message["workspace"])
        if in_run == 2 and MODE == "crash-second":
            print("crashing on purpose", file=sys.stderr, flush=True)
            return 5
        if in_run == 2 and MODE == "hang-second":
            time.sleep(3600)
        assert conversation is not None
        if in_run == 2 and MODE.startswith("error="):
            emit({"case": case, "error": json.loads(MODE.removeprefix("error="))})
            continue
        if in_run == 2 and MODE.startswith("error-line="):
            print(MODE.removeprefix("error-line="), flush=True)
            continue
        try:
            answer = conversation.turn(message["user_input"])
        except RunError as exc:  # a refused request: this case has failed, the process lives on
            emit({"case": case, "error": str(exc)})
            continue
        named: object = case
        if MODE == "previous-case" and previous is not None:
            named = previous
        elif MODE == "other-case":
            named = "0123456789abcdef"
        elif MODE.startswith("case="):
            named = json.loads(MODE.removeprefix("case="))
        if MODE == "no-case":
            emit(answer)
        else:
            emit({"case": named, **answer})
    if MODE == "ignore-eof":
        time.sleep(3600)
    if MODE == "exit-at-end":
        raise RuntimeError("broken on purpose at the end of the run")
    if MODE == "traceback-at-end":
        trace = "Traceback (most recent call last):\n  ...\nRuntimeError: on purpose"
        print(trace, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
