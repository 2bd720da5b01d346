"""``evalrunner serve``: one case's endpoint on its own, turns inferred from the requests; it stops
once the script is consumed, at a run error, or on Ctrl-C."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.model import Case
from evalrunner.wire.endpoint import Exchange, ReplayEndpoint
from evalrunner.wire.serve import ServeOutcome, exchange_line, load_case, outcome_lines, serve_case

FIXTURE = """\
name: served-echo
turns:
  - user_input: Please echo token_7f3a.
    steps:
      - response:
          type: tool_calls
          tool_calls:
            - {id: call_1, name: echo, arguments: {message: token_7f3a}}
      - response: {type: text, content: Echoed token_7f3a.}
  - user_input: Thanks.
    steps:
      - response: {type: text, content: You are welcome.}
expects:
  tool_results_contain: [{tool: echo, needle: token_7f3a}]
"""

USER = {"role": "user", "content": "Please echo token_7f3a."}
ASSISTANT = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "echo", "arguments": '{"message":"token_7f3a"}'},
        }
    ],
}
TOOL = {"role": "tool", "tool_call_id": "call_1", "content": "token_7f3a"}
CONVERSATION = [
    [USER],
    [USER, ASSISTANT, TOOL],
    [
        USER,
        ASSISTANT,
        TOOL,
        {"role": "assistant", "content": "Echoed token_7f3a."},
        {"role": "user", "content": "Thanks."},
    ],
]

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def chat(base_url: str, messages: list[dict[str, Any]] | bytes) -> int:
    tools = [{"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}]
    body = {"messages": messages, "tools": tools}
    data = messages if isinstance(messages, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        base_url + "/v1/chat/completions",
        data=data,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with _NO_PROXY.open(request, timeout=30) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        with error:
            return error.code


def messages(base_url: str, conversation: list[dict[str, Any]]) -> int:
    """POST an Anthropic messages request; the status."""
    tools = [{"name": "echo", "input_schema": {"type": "object"}}]
    body = {"model": "m", "max_tokens": 64, "messages": conversation, "tools": tools}
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        base_url + "/v1/messages",
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", "anthropic-version": "2023-06-01"},
    )
    try:
        with _NO_PROXY.open(request, timeout=30) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        with error:
            return error.code


@pytest.fixture
def fixture_file(tmp_path: Path) -> Path:
    path = tmp_path / "served.yaml"
    path.write_text(FIXTURE, encoding="utf-8")
    return path


@pytest.fixture
def case(fixture_file: Path) -> Case:
    loaded = load_case(fixture_file)
    assert isinstance(loaded, Case), loaded
    return loaded


@pytest.fixture(autouse=True)
def no_thread_left_behind() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not left, f"threads left running: {left}"


class Session:
    """serve_case running in a thread, as the CLI runs it on the main thread."""

    def __init__(self, case: Case) -> None:
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.exchanges: list[Exchange] = []
        self.endpoint: ReplayEndpoint | None = None
        self.outcome: ServeOutcome | None = None
        self.thread = threading.Thread(target=self._run, args=(case,))
        self.thread.start()
        assert self.ready.wait(30)

    def _run(self, case: Case) -> None:
        try:
            self.outcome = serve_case(
                case, on_ready=self._ready, on_exchange=self.exchanges.append, stop=self.stop
            )
        finally:
            self.ready.set()

    def _ready(self, endpoint: ReplayEndpoint) -> None:
        self.endpoint = endpoint
        self.ready.set()

    @property
    def base_url(self) -> str:
        assert self.endpoint is not None
        return self.endpoint.base_url

    def end(self) -> ServeOutcome:
        self.thread.join(30)
        assert not self.thread.is_alive()
        assert self.outcome is not None
        return self.outcome


def test_serve_stops_by_itself_once_the_script_is_consumed(case: Case) -> None:
    session = Session(case)
    for messages in CONVERSATION:
        assert chat(session.base_url, messages) == 200
    outcome = session.end()  # no stop asked for: it ended on its own
    assert outcome.consumed
    assert outcome.error is None
    assert (outcome.served, outcome.scripted) == (3, 3)
    assert [c.result for c in outcome.tool_calls] == ["token_7f3a"]
    assert outcome_lines(outcome) == [
        # no "(ok)": the OpenAI wire has no error flag, so success is not known
        'tool call call_1 echo {"message":"token_7f3a"} -> "token_7f3a"',
        "script consumed: 3 scripted response(s) served",
    ]
    # Each exchange is logged once its answer is sent (the last one stops the server), and the
    # client's next request, on a connection of its own, may be logged first: the set is
    # exact, the order is the served order only when the machine keeps up.
    assert sorted(exchange_line(e) for e in session.exchanges) == sorted(
        [
            "POST /v1/chat/completions (openai) -> 200 tool_calls: call_1 echo",
            'POST /v1/chat/completions (openai) -> 200 text: "Echoed token_7f3a."',
            'POST /v1/chat/completions (openai) -> 200 text: "You are welcome."',
        ]
    )


def test_serve_stops_at_a_run_error(case: Case) -> None:
    session = Session(case)
    assert chat(session.base_url, [USER]) == 200
    assert chat(session.base_url, [USER, ASSISTANT]) == 500  # the tool result is missing
    outcome = session.end()
    assert not outcome.consumed
    assert outcome.error is not None
    assert '"call_1" (echo)' in outcome.error
    lines = outcome_lines(outcome)
    assert lines[0] == "tool call call_1 echo: no result came back"
    assert lines[-1] == (
        'run error: turn 1, model request 2: the result of tool call(s) "call_1" (echo) was not '
        "fed back; the request after a tool-call response must carry exactly one result per "
        "call id"
    )
    assert exchange_line(session.exchanges[-1]).startswith(
        "POST /v1/chat/completions (openai) -> 500 refused: "
    )


@pytest.mark.parametrize(("is_error", "flag"), [(False, " (ok)"), (True, " (failed)")])
def test_serve_shows_the_anthropic_error_flag(case: Case, is_error: bool, flag: str) -> None:
    session = Session(case)
    user = {"role": "user", "content": USER["content"]}
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call_1", "name": "echo", "input": {"message": "token_7f3a"}}
        ],
    }
    result = {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": "token_7f3a",
        "is_error": is_error,
    }
    assert messages(session.base_url, [user]) == 200
    assert (
        messages(session.base_url, [user, assistant, {"role": "user", "content": [result]}]) == 200
    )
    session.stop.set()
    outcome = session.end()
    assert outcome.error is None
    assert [(d.call.id, d.success) for d in outcome.tool_calls] == [("call_1", not is_error)]
    assert outcome_lines(outcome)[0] == (
        f'tool call call_1 echo {{"message":"token_7f3a"}} -> "token_7f3a"{flag}'
    )


def test_serve_stopped_early_says_how_far_it_got(case: Case) -> None:
    session = Session(case)
    assert chat(session.base_url, [USER]) == 200
    session.stop.set()
    outcome = session.end()
    assert not outcome.consumed
    assert outcome.error is None
    assert outcome_lines(outcome)[-1] == "stopped: 1 of 3 scripted response(s) served"


def test_serve_refuses_a_fixture_that_is_not_admitted(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nturns: []\nexpects: {}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["serve", "--case", str(bad)])
    assert result.exit_code == 2
    assert "bad.yaml" in result.stderr
    assert "nothing served" in result.stderr


def test_serve_refuses_a_missing_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", "--case", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert "cannot read file" in result.stderr


# --- the command itself, as a process ----------------------------------------------------------


def start_serve(fixture: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """Launch ``evalrunner serve`` and read its environment lines off stdout."""
    process = subprocess.Popen(
        [sys.executable, "-m", "evalrunner", "serve", "--case", str(fixture)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    environment: dict[str, str] = {}
    for line in process.stdout:
        if line.startswith("  export "):
            key, _, value = line.removeprefix("  export ").strip().partition("=")
            environment[key] = value
            if key == "ANTHROPIC_API_KEY":
                break
    return process, environment


def test_serve_command_end_to_end(fixture_file: Path) -> None:
    process, environment = start_serve(fixture_file)
    try:
        assert environment["OPENAI_BASE_URL"] == environment["ANTHROPIC_BASE_URL"] + "/v1"
        assert environment["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
        for messages in CONVERSATION:
            assert chat(environment["ANTHROPIC_BASE_URL"], messages) == 200
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 0, stderr
    assert "POST /v1/chat/completions (openai) -> 200 tool_calls: call_1 echo" in stderr
    assert "script consumed: 3 scripted response(s) served" in stderr


def test_serve_command_exits_1_after_a_run_error(fixture_file: Path) -> None:
    process, environment = start_serve(fixture_file)
    try:
        assert chat(environment["ANTHROPIC_BASE_URL"], b"{not json") == 400
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 1, stderr
    assert "run error: the request body is not JSON" in stderr


def test_serve_command_stops_on_ctrl_c(fixture_file: Path) -> None:
    process, environment = start_serve(fixture_file)
    try:
        assert chat(environment["ANTHROPIC_BASE_URL"], [USER]) == 200
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 0, stderr
    assert "stopped: 1 of 3 scripted response(s) served" in stderr
    assert "Traceback" not in stderr


def test_serve_exits_2_when_the_port_is_taken(fixture_file: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            app, ["serve", "--case", str(fixture_file), "--port", str(port)]
        )
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr


ASSERTS_SUCCESS = FIXTURE.replace("expects:\n", "expects:\n  all_tools_succeeded: true\n")


def test_serve_does_not_claim_run_refuses_all_tools_succeeded(tmp_path: Path) -> None:
    fixture = tmp_path / "case.yaml"
    fixture.write_text(ASSERTS_SUCCESS, encoding="utf-8")
    process, _ = start_serve(fixture)
    assert process.stderr is not None
    seen = ""
    try:
        for line in process.stderr:  # the notes come before the line saying when it stops
            seen += line
            if line.startswith("stops once the script is consumed"):
                break
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    stderr = seen + rest
    assert "note: this case asserts all_tools_succeeded" in stderr, stderr
    assert "refuses" not in stderr
    assert '"tool_calls" in its reply line' in stderr
