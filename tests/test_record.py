"""``evalrunner record`` end to end against local model servers (issue 12): for each wire,
streaming and not, a live run becomes a fixture that ``validate`` admits and ``run`` replays
green; every agent path records; what cannot be recorded says why and writes nothing; the
redaction patterns and the key never reach a written byte; bad flags and config are refused
before any request is sent."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support import live_project
from support.live_project import (
    KEY,
    SCRIPTED_CASE,
    TEXT,
    WIRE_AGENT,
    start_cli,
    wait_for_requests,
)
from support.model_server import ModelServer, Reply
from support.tiers import first_by_default
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.load import load_document
from evalrunner.model import RunRecord, TextResponse, ToolCall, ToolCallsResponse
from evalrunner.redact import REDACTED, Redactor
from evalrunner.toolbox.record import Provenance, RecordSettings, _arguments, recorded_data

ROOT = Path(__file__).resolve().parent.parent
SECRET = "tok_ABCDEF123456"

# Not the shared LIVE_CASE and CALL: this case has an editor's schema line (which a recording
# carries over) and a description, and this call an id that --keep-ids must keep.
LIVE_CASE = """\
# yaml-language-server: $schema=../schemas/case.schema.json
name: live_echo
description: the agent echoes through the tool
turns:
  - user_input: say hi through echo
expects:
  tools_used: [echo]
  response_contains: [hello]
"""
CALL = ToolCallsResponse((ToolCall("call_live_Zx9", "echo", '{"message":"hi"}'),), 20, 5)


def project(tmp_path: Path, wire: str, base_url: str, extra: str = "", **cases: str) -> Path:
    """The shared live project, with this file's LIVE_CASE as its default case."""
    return live_project.project(tmp_path, wire, base_url, extra, default_case=LIVE_CASE, **cases)


EPOCH = "1764547200"  # 2025-12-01T00:00:00Z


def cli(
    cwd: Path, *args: str, key: str | None = KEY, process: bool = False, epoch: str = EPOCH
) -> subprocess.CompletedProcess[str]:
    """``evalrunner ARGS`` in ``cwd`` at a fixed SOURCE_DATE_EPOCH, with the environment of
    :func:`live_project.clean_env`: in this process (the command's own code, as ``python -m
    evalrunner`` runs it, without an interpreter's start-up each time), or with ``process``
    as a process of its own (for a Python agent, whose module this process must not keep)."""
    if process:
        return live_project.cli(cwd, *args, key=key, SOURCE_DATE_EPOCH=epoch)
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EVALRUNNER_")}
    env = {**unset, "LIVE_TEST_KEY": key, "NO_COLOR": "1", "SOURCE_DATE_EPOCH": epoch}
    with contextlib.chdir(cwd):
        done = CliRunner().invoke(app, list(args), env=env)
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return subprocess.CompletedProcess(list(args), done.exit_code, done.stdout, done.stderr)


def record(
    cwd: Path, *args: str, key: str | None = KEY, process: bool = False
) -> subprocess.CompletedProcess[str]:
    return cli(cwd, "record", "--out", "recorded", *args, key=key, process=process)


def written(cwd: Path) -> list[Path]:
    out = cwd / "recorded"
    return sorted(p for p in out.rglob("*") if p.is_file()) if out.exists() else []


def replays_green(cwd: Path, *args: str, process: bool = False) -> None:
    """The recorded fixtures admit, and replay green with the same agent, with no network."""
    validated = cli(cwd, "validate", "recorded")
    assert validated.returncode == 0, validated.stdout + validated.stderr
    replayed = cli(cwd, "run", "recorded", *args, key=None, process=process)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert " passed" in replayed.stdout and "not run" not in replayed.stdout


@pytest.mark.parametrize("wire", ["openai", "openai-responses", "anthropic"])
@pytest.mark.parametrize("stream", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_round_trip_on_every_wire(tmp_path: Path, wire: str, stream: bool) -> None:
    with ModelServer(wire, [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, wire, server.base_url, scripted=SCRIPTED_CASE, live=LIVE_CASE)
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8") + f"stream = {str(stream).lower()}\n", "utf-8")
        done = record(cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "recorded      live_echo -> recorded/live.yaml (2 model response(s), 1 tool call(s))",
        "recorded 1 of 1 live case(s) into recorded (50 input + 9 output tokens); 1 scripted "
        "case(s) left alone",
    ]
    assert [p.name for p in written(cwd)] == ["live.yaml"]
    assert len(server.seen) == 2
    document = load_document(cwd / "recorded" / "live.yaml")
    assert not isinstance(document, list)
    data = document.data
    assert isinstance(data, dict)
    limit = "max_output_tokens" if wire == "openai-responses" else "max_tokens"
    assert data["recorded"] == {
        "wire": wire,
        "model": "local-test",
        "date": "2025-12-01T00:00:00Z",
        "evalrunner_version": "0.1.0",
        # What each request sent besides the conversation (before: nothing was kept).
        "parameters": [{"temperature": 0.0, limit: 1024}] * 2,
    }
    steps = data["turns"][0]["steps"]
    assert steps == [
        {
            "response": {
                "type": "tool_calls",
                "tool_calls": [{"id": "call_1", "name": "echo", "arguments": {"message": "hi"}}],
                "input_tokens": 20,
                "output_tokens": 5,
            }
        },
        {
            "response": {
                "type": "text",
                "content": "hello from the live model",
                "input_tokens": 30,
                "output_tokens": 4,
            }
        },
    ]
    assert data["expects"] == {"tools_used": ["echo"], "response_contains": ["hello"]}
    # The editor's schema line moved with the case (same depth: the same relative path).
    text = (cwd / "recorded" / "live.yaml").read_text("utf-8")
    assert text.startswith("# yaml-language-server: $schema=../schemas/case.schema.json\n")
    replays_green(cwd)


def test_a_recording_keeps_the_parameters_the_agent_sent(tmp_path: Path) -> None:
    params = {"temperature": 0.7, "tool_choice": "auto", "seed": 3, "user": "u"}
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = live_project.cli(
            cwd,
            "record",
            "--out",
            "recorded",
            "--agent-command",
            f"{sys.executable} {WIRE_AGENT} ok",
            SOURCE_DATE_EPOCH=EPOCH,
            WIRE_AGENT_PARAMS=json.dumps(params),
        )
    assert done.returncode == 0, done.stdout + done.stderr
    document = load_document(cwd / "recorded" / "live_echo.yaml")
    assert not isinstance(document, list) and isinstance(document.data, dict)
    sent = [{"temperature": 0.7, "max_tokens": 1024, "tool_choice": "auto", "seed": 3, "user": "u"}]
    assert document.data["recorded"]["parameters"] == sent * 2
    assert [seen.body["seed"] for seen in server.seen] == [3, 3]
    replays_green(cwd, "--agent-command", f"{sys.executable} {WIRE_AGENT} ok")


AGENT_PATHS = {
    "command": ["--agent-command", f"{sys.executable} {WIRE_AGENT} ok"],
    "openai-sdk": [
        "--agent-command",
        f"{sys.executable} {ROOT / 'examples' / 'sdk-agents' / 'openai_agent.py'} --stream",
    ],
}


# The SDK agent (an SDK imported for each case) in the slow tier; the urllib agent by default.
@pytest.mark.parametrize("agent", first_by_default(sorted(AGENT_PATHS)))
def test_a_command_agent_records_and_replays(tmp_path: Path, agent: str) -> None:
    with ModelServer("anthropic", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "anthropic", server.base_url)
        done = record(cwd, *AGENT_PATHS[agent])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "recorded      live_echo -> recorded/live_echo.yaml" in done.stdout
    replays_green(cwd, *AGENT_PATHS[agent])


FACTORY = """\
from evalrunner.agents.reference import reference_agent

def make(context):
    return reference_agent(context)
"""


def test_a_python_factory_records_and_replays(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, 'agent = "my_agent:make"')
        (cwd / "my_agent.py").write_text(FACTORY, encoding="utf-8")
        done = record(cwd, "--format", "toml", process=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.name for p in written(cwd)] == ["live_echo.toml"]
    text = (cwd / "recorded" / "live_echo.toml").read_text("utf-8")
    assert text.startswith("#:schema ../schemas/case.schema.json\n")
    replays_green(cwd, process=True)


def test_json_output_and_kept_ids(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = record(cwd, "--format", "json", "--keep-ids")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((cwd / "recorded" / "live_echo.json").read_text("utf-8"))
    assert data["$schema"] == "../schemas/case.schema.json"
    call = data["turns"][0]["steps"][0]["response"]["tool_calls"][0]
    assert call["id"] == "call_live_Zx9"
    replays_green(cwd)


NONDETERMINISTIC = """\
import os
from pathlib import Path
from evalrunner.agents.reference import reference_agent
from evalrunner.model import ModelRequest, Message

MARK = Path(os.environ.get("MARK_FILE", "mark"))

class Twice:
    def __init__(self, context):
        self.inner = reference_agent(context)
        self.context = context

    def respond(self, user_input):
        if MARK.exists():  # the second time it is run: it skips the tool
            return self.context.provider.complete(
                ModelRequest(messages=(Message("user", user_input),))
            ).content
        MARK.write_text("x")
        return self.inner.respond(user_input)

def make(context):
    return Twice(context)
"""


def test_an_agent_that_does_not_repeat_itself_is_not_recorded(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, 'agent = "twice:make"')
        (cwd / "twice.py").write_text(NONDETERMINISTIC, encoding="utf-8")
        done = record(cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not recorded  live_echo (live_echo.yaml): its recording does not replay green" in (
        done.stdout
    )
    assert "the agent does not do the same given the same model responses" in done.stdout
    assert "recorded 0 of 1 live case(s)" in done.stdout
    assert written(cwd) == []


def test_a_live_run_that_fails_its_checks_is_not_recorded(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(TextResponse("no tools today", 3, 1))]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = record(cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not recorded  live_echo (live_echo.yaml): the live run failed " in done.stdout
    assert "tools_used" in done.stdout
    assert "its fixture would fail its replay too" in done.stdout
    assert written(cwd) == []


def test_a_live_run_error_is_not_recorded_and_the_others_are(tmp_path: Path) -> None:
    second = LIVE_CASE.replace("live_echo", "live_two")
    replies = [Reply(status=500, raw=b"{}"), Reply(CALL), Reply(TEXT)]
    with ModelServer("openai", replies) as server:
        cwd = project(tmp_path, "openai", server.base_url, a=LIVE_CASE, b=second)
        done = record(cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not recorded  live_echo (a.yaml): the live run errored: live model: HTTP 500" in (
        done.stdout
    )
    assert "recorded      live_two -> recorded/b.yaml" in done.stdout
    assert [p.name for p in written(cwd)] == ["b.yaml"]


def test_a_turn_without_a_model_request_is_not_recorded(tmp_path: Path) -> None:
    case = LIVE_CASE.replace("  tools_used: [echo]\n", "").replace("[hello]", "[did not ask]")
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url, live_echo=case)
        done = record(cwd, "--agent-command", f"{sys.executable} {WIRE_AGENT} no-model")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the live run errored: turn 1: the agent replied without asking the model" in (
        done.stdout
    )
    assert written(cwd) == []


TWO_TURNS = LIVE_CASE.replace(
    "  - user_input: say hi through echo\n",
    "  - user_input: say hi through echo\n  - user_input: and once more\n",
)


def test_kept_ids_that_repeat_are_refused_with_a_suggestion(tmp_path: Path) -> None:
    # The same id in each turn: the live API may do that; a fixture's ids are one per call.
    replies = [Reply(CALL), Reply(TEXT), Reply(CALL), Reply(TEXT)]
    with ModelServer("openai", replies) as server:
        cwd = project(tmp_path, "openai", server.base_url, live_echo=TWO_TURNS)
        refused = record(cwd, "--keep-ids")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "its recording would be refused (turns[1].steps[0].response.tool_calls[0].id: " in (
        refused.stdout
    )
    assert "record without --keep-ids to renumber the calls; nothing was written" in (
        refused.stdout
    )
    assert written(cwd) == []
    with ModelServer("openai", replies) as server:
        (tmp_path / "again").mkdir()
        cwd = project(tmp_path / "again", "openai", server.base_url, live_echo=TWO_TURNS)
        renumbered = record(cwd)
    assert renumbered.returncode == 0, renumbered.stdout + renumbered.stderr
    data = load_document(cwd / "recorded" / "live_echo.yaml")
    assert not isinstance(data, list) and isinstance(data.data, dict)
    ids = [turn["steps"][0]["response"]["tool_calls"][0]["id"] for turn in data.data["turns"]]
    assert ids == ["call_1", "call_2"]
    replays_green(cwd)


def test_redaction_and_the_key_never_reach_a_written_byte(tmp_path: Path) -> None:
    case = LIVE_CASE.replace("say hi through echo", f"say hi through echo, token {SECRET}")
    call = ToolCallsResponse(
        (ToolCall("c1", "echo", json.dumps({"message": f"hi {SECRET}", SECRET: KEY})),), 2, 2
    )
    text = TextResponse(f"hello, {SECRET} and {KEY} were seen", 3, 3)
    with ModelServer("openai", [Reply(call), Reply(text)]) as server:
        cwd = project(
            tmp_path,
            "openai",
            server.base_url,
            '[eval.record]\nredact = ["tok_[A-Z0-9]+", "sk-live-[A-Za-z0-9-]+"]',
            live_echo=case,
        )
        done = record(cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    text_written = (cwd / "recorded" / "live_echo.yaml").read_text("utf-8")
    for secret in (SECRET, KEY, "KNOWN-SECRET"):
        assert secret not in text_written
        assert secret not in done.stdout + done.stderr
    assert f"token {REDACTED}" in text_written
    assert f"hello, {REDACTED} and {REDACTED} were seen" in text_written
    replays_green(cwd)


def test_the_key_is_struck_from_a_recording_without_any_pattern(tmp_path: Path) -> None:
    call = ToolCallsResponse((ToolCall("c1", "echo", json.dumps({"message": KEY})),), 2, 2)
    text = TextResponse(f"hello, your key is {KEY} (or {KEY[4:20]})", 3, 3)
    with ModelServer("openai", [Reply(call), Reply(text)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = record(cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    text_written = (cwd / "recorded" / "live_echo.yaml").read_text("utf-8")
    assert KEY not in text_written and KEY[4:20] not in text_written
    assert f"hello, your key is {REDACTED} (or {REDACTED})" in text_written
    replays_green(cwd)


def test_redaction_that_changes_what_the_agent_reads_is_caught(tmp_path: Path) -> None:
    # The check needs "hello"; the pattern strikes "o f" from "hello from ...", and nothing
    # from the check's own text. (A pattern that strikes the same text from both stays green.)
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, '[eval.record]\nredact = ["o f"]')
        done = record(cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "its recording does not replay green" in done.stdout
    assert "likely redaction (or striking the API key) changed text the agent or a check" in (
        done.stdout
    )
    assert written(cwd) == []


def test_the_budget_stops_recording_with_exit_3(tmp_path: Path) -> None:
    cases = {f"live_{n}": LIVE_CASE.replace("live_echo", f"live_{n}") for n in range(3)}
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)] * 3) as server:
        cwd = project(tmp_path, "openai", server.base_url, **cases)
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8") + "max_total_tokens = 60\n", "utf-8")
        done = record(cwd)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "recorded      live_0 -> recorded/live_0.yaml" in done.stdout
    assert "not recorded  live_2 (live_2.yaml): not run: the token budget" in done.stdout
    assert "the token budget is spent" in done.stderr
    assert [p.name for p in written(cwd)] == ["live_0.yaml"]


def test_cases_after_an_answer_without_usage_say_why_they_were_not_recorded(
    tmp_path: Path,
) -> None:
    cases = {f"live_{n}": LIVE_CASE.replace("live_echo", f"live_{n}") for n in range(2)}
    no_usage = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hi"}}]})
    with ModelServer("openai", [Reply(raw=no_usage.encode())] * 2) as server:
        cwd = project(tmp_path, "openai", server.base_url, **cases)
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8") + "max_total_tokens = 60\n", "utf-8")
        done = record(cwd)
    assert done.returncode == 3, done.stdout + done.stderr
    assert (
        "not recorded  live_1 (live_1.yaml): not run: the token budget (max_total_tokens) "
        "cannot be enforced: an earlier answer carried no token usage"
    ) in done.stdout
    assert "spent" not in done.stdout + done.stderr


@pytest.mark.parametrize("given", ["flag", "variable", "file"])
def test_a_repeat_above_1_is_refused_naming_where_it_came_from(tmp_path: Path, given: str) -> None:
    # record runs each live case once and writes that run: a repeat it silently ignored
    # would look like K recorded runs.
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        extra = "repeat = 3" if given == "file" else ""
        cwd = project(tmp_path, "openai", server.base_url, extra)
        args = ["--repeat", "3"] if given == "flag" else []
        env = {"EVALRUNNER_REPEAT": "3"} if given == "variable" else {}
        done = live_project.cli(
            cwd, "record", "--out", "recorded", *args, SOURCE_DATE_EPOCH="1764547200", **env
        )
        assert server.seen == []
    assert done.returncode == 2, done.stdout + done.stderr
    source = {"flag": "--repeat", "variable": "EVALRUNNER_REPEAT", "file": "evalrunner.toml"}
    message = done.stderr.strip().splitlines()[0]
    assert source[given] in message
    assert "record runs each live case once" in message and "--repeat 1" in message
    assert written(cwd) == []


def test_repeat_1_on_the_command_line_records_despite_the_file(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, "repeat = 3")
        done = record(cwd, "--repeat", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(written(cwd)) == 1


def test_without_a_budget_answers_without_usage_say_usage_was_not_reported(
    tmp_path: Path,
) -> None:
    call = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "echo", "arguments": '{"message":"hi"}'},
                        }
                    ],
                }
            }
        ]
    }
    text = {"choices": [{"message": {"role": "assistant", "content": "hello"}}]}
    replies = [Reply(raw=json.dumps(body).encode()) for body in (call, text)]
    with ModelServer("openai", replies) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = record(cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 input + 0 output tokens" not in done.stdout
    assert "(token usage not reported by the model)" in done.stdout


def test_sigterm_keeps_what_was_recorded_and_exits_143(tmp_path: Path) -> None:
    second = LIVE_CASE.replace("live_echo", "live_two")
    with ModelServer("openai", [Reply(CALL), Reply(TEXT), Reply(hang=True)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, a=LIVE_CASE, b=second)
        process = start_cli(cwd, "record", "--out", "recorded")
        wait_for_requests(server, 3)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stdout + stderr
    assert stderr.endswith(
        "record interrupted by SIGTERM: 1 fixture(s) written, each whole; 1 live case(s) not "
        "recorded\n"
    )
    assert "recorded      live_echo -> recorded/a.yaml" in stdout
    assert "recorded 1 of 2 live case(s)" in stdout
    assert [p.name for p in written(cwd)] == ["a.yaml"]
    assert cli(cwd, "validate", "recorded").returncode == 0


def test_an_agent_that_does_not_repeat_itself_is_named_so_when_redaction_changed_nothing(
    tmp_path: Path,
) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(
            tmp_path,
            "openai",
            server.base_url,
            'agent = "twice:make"\n[eval.record]\nredact = ["matches-nothing-here"]',
        )
        (cwd / "twice.py").write_text(NONDETERMINISTIC, encoding="utf-8")
        done = record(cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "likely the agent does not do the same given the same model responses" in done.stdout


def test_redaction_that_changes_a_check_is_noted(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, '[eval.record]\nredact = ["hel+o"]')
        done = record(cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "; note: redaction changed its checks (expects.response_contains[0]): review that "
        "they still test what they should"
    ) in done.stdout


def test_redaction_that_makes_two_names_alike_records_only_the_first(tmp_path: Path) -> None:
    second = LIVE_CASE.replace("live_echo", "live_other")
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)] * 2) as server:
        cwd = project(
            tmp_path,
            "openai",
            server.base_url,
            '[eval.record]\nredact = ["_[a-z]+$"]',
            a=LIVE_CASE,
            b=second,
        )
        done = record(cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not recorded  live[redacted] (b.yaml): its name (as written, after redaction) is " in (
        done.stdout
    )
    assert [p.name for p in written(cwd)] == ["a.yaml"]
    assert cli(cwd, "validate", "recorded").returncode == 0


def test_a_failed_rerecording_says_the_old_fixture_stays(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(TextResponse("no tools", 1, 1))]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        (cwd / "recorded").mkdir()
        (cwd / "recorded" / "live_echo.yaml").write_text("old\n", "utf-8")
        done = record(cwd, "--overwrite")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "; recorded/live_echo.yaml is left as it was" in done.stdout
    assert (cwd / "recorded" / "live_echo.yaml").read_text("utf-8") == "old\n"


# --- refused before any request is sent --------------------------------------------------------


def refused_unsent(cwd: Path, server: ModelServer, *args: str) -> str:
    done = record(cwd, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert server.seen == []
    assert "Traceback" not in done.stderr
    return done.stderr


def test_an_existing_fixture_is_not_replaced_without_overwrite(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        (cwd / "recorded").mkdir()
        (cwd / "recorded" / "live_echo.yaml").write_text("precious\n", "utf-8")
        stderr = refused_unsent(cwd, server)
        assert "recorded/live_echo.yaml: already exists; pass --overwrite to replace it" in stderr
        assert (cwd / "recorded" / "live_echo.yaml").read_text("utf-8") == "precious\n"
        done = record(cwd, "--overwrite")
    assert done.returncode == 0, done.stdout + done.stderr
    replays_green(cwd)


def test_recording_over_the_live_case_itself_is_refused(tmp_path: Path) -> None:
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = cli(cwd, "record", "--out", "evals", "--overwrite")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "evals/live_echo.yaml: is the live case itself, which recording would replace" in (
        done.stderr
    )
    assert server.seen == []


def test_two_cases_to_one_file_are_refused(tmp_path: Path) -> None:
    as_json = json.dumps(
        {
            "name": "other",
            "turns": [{"user_input": "x"}],
            "expects": {"response_contains": ["y"]},
        }
    )
    with ModelServer("openai", []) as server:
        cwd = project(
            tmp_path, "openai", server.base_url, **{"a.yaml": LIVE_CASE, "a.json": as_json}
        )
        stderr = refused_unsent(cwd, server, "--format", "toml")
    assert (
        "recorded/a.toml: both evals/a.json and evals/a.yaml would be recorded here; record "
        "without --format (each keeps its own)"
    ) in stderr


def test_a_name_the_output_directory_holds_in_another_file_is_refused(tmp_path: Path) -> None:
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        (cwd / "recorded").mkdir()
        (cwd / "recorded" / "older.yaml").write_text(
            LIVE_CASE.replace("turns:\n  - user_input: say hi through echo\n", SCRIPTED_TURNS),
            "utf-8",
        )
        stderr = refused_unsent(cwd, server)
    assert (
        "recorded/live_echo.yaml: recorded/older.yaml already holds a case named 'live_echo', "
        "so the recording would make two cases of that name in recorded"
    ) in stderr


SCRIPTED_TURNS = """turns:
  - user_input: say hi through echo
    steps:
      - response: {type: text, content: hello}
"""


@pytest.mark.parametrize("value", ["abc", "-5", "1.5", "99999999999999", "\uff11\uff12", "12 34"])
def test_a_source_date_epoch_that_is_not_seconds_is_refused(tmp_path: Path, value: str) -> None:
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = cli(cwd, "record", "--out", "recorded", epoch=value)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.startswith("SOURCE_DATE_EPOCH: must be a whole number of seconds")
        assert server.seen == []


def test_a_recorded_block_with_a_bad_date_is_refused_in_words(tmp_path: Path) -> None:
    fixture = tmp_path / "x.yaml"
    fixture.write_text(
        SCRIPTED_CASE
        + "recorded: {wire: openai, model: m, date: yesterday, evalrunner_version: '1'}\n",
        "utf-8",
    )
    done = cli(tmp_path, "validate", str(fixture))
    assert done.returncode == 2
    assert (
        "recorded.date must be a UTC time to the second, as evalrunner record writes it (for "
        'example 2026-12-01T09:00:00Z), got "yesterday"'
    ) in done.stderr


def test_an_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        (cwd / "recorded").write_text("", "utf-8")
        stderr = refused_unsent(cwd, server)
    assert "--out recorded: is not a directory" in stderr


def test_nothing_to_record_is_refused(tmp_path: Path) -> None:
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url, scripted=SCRIPTED_CASE)
        stderr = refused_unsent(cwd, server)
    assert "evals: no live case to record: its 1 admitted case(s) all script their steps" in (
        stderr
    )


def test_a_refused_fixture_stops_recording_before_it_starts(tmp_path: Path) -> None:
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url, bad="name: x\nturns: []\n")
        stderr = refused_unsent(cwd, server)
    assert "evals/bad.yaml:" in stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((), "Missing option '--out'"),
        (("--out", "x", "--format", "xml"), "--format"),
        (("--out", "x", "-k", "nothing_matches"), "-k 'nothing_matches': no case matches"),
        (("--out", "x", "--case-timeout", "-1"), "--case-timeout"),
        (("--out", "x", "--case-timeout", "nan"), "--case-timeout"),
        (("--out", "x", "--agent-command", "   "), "agent_command must not be blank"),
        (("--out", "x", "--agent-command", "'unclosed"), "not a command line a shell could"),
    ],
)
def test_bad_flags_are_refused_before_any_request(
    tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = cli(cwd, "record", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stderr
    assert server.seen == []


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ('redact = ["(unclosed"]', "evalrunner.toml:4:11: eval.record.redact[0]: pattern"),
        ('redact = ["ok", "a\\\\1"]', "eval.record.redact[1]: pattern 'a\\1' is not valid RE2"),
        ('redact = "sk-.*"', "eval.record.redact must be an array of strings, got string"),
        ("redact = [1]", "eval.record.redact[0] must be a string, got integer 1"),
        ('redact = [""]', "eval.record.redact[0] must not be empty"),
        ("redact = [" + ", ".join(['"x"'] * 101) + "]", "eval.record.redact"),
        ('redact = ["' + "a" * 1001 + '"]', "must be at most 1000 characters long"),
        ('redact = ["x"]\nredcat = 1', "unknown key 'redcat' in eval.record"),
        ('redact = ["x\\u0000"]', None),  # a NUL in a pattern is a valid RE2 literal
    ],
)
def test_bad_redact_config_is_refused_with_its_position(
    tmp_path: Path, table: str, needle: str | None
) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, f"[eval.record]\n{table}")
        done = record(cwd)
    if needle is None:
        assert done.returncode == 0, done.stdout + done.stderr
        return
    assert done.returncode == 2, done.stdout + done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stderr
    assert server.seen == []


def test_config_shows_the_redact_patterns(tmp_path: Path) -> None:
    cwd = project(tmp_path, "openai", "http://127.0.0.1:9/v1", '[eval.record]\nredact = ["a+"]')
    done = cli(cwd, "config")
    assert done.returncode == 0, done.stderr
    assert '[eval.record]\nredact = ["a+"]  # ' in done.stdout


# --- the pieces --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ('{"a":1}', {"a": 1}),
        ('{"a":1.5,"b":[true,null]}', {"a": 1.5, "b": [True, None]}),
        ('{"a": 1}', '{"a": 1}'),  # spaced: kept as the model wrote it
        ('{"b":1,"a":2}', '{"b":1,"a":2}'),  # keys in the model's order: kept as text
        ('{"a": 1.0e2}', '{"a": 1.0e2}'),  # would print back as 100.0: kept as text
        ('{"a": 1, "a": 2}', '{"a": 1, "a": 2}'),  # a key twice: kept as text
        ('{"a": NaN}', '{"a": NaN}'),
        ("[1, 2]", "[1, 2]"),
        ("", ""),
        ("not json", "not json"),
        ("[" * 100_000, "[" * 100_000),
    ],
)
def test_arguments_are_an_object_only_when_that_says_the_same(text: str, written: object) -> None:
    assert _arguments(text) == written


def test_redactor_strikes_non_empty_matches_only() -> None:
    redactor = Redactor(["x*", "sk-[a-z]+"])
    assert redactor.text("axxb sk-abc é") == f"a{REDACTED}b {REDACTED} é"
    assert redactor.value({"sk-key": ["sk-v", 1, None]}, keys=True) == {
        REDACTED: [REDACTED, 1, None]
    }
    assert redactor.value({"sk-key": "v"}) == {"sk-key": "v"}
    assert not Redactor() and Redactor(["a"])


def test_recorded_data_groups_responses_by_turn(tmp_path: Path) -> None:
    path = tmp_path / "two.json"
    path.write_text(
        json.dumps(
            {
                "name": "two",
                "turns": [{"user_input": "one"}, {"user_input": "two"}],
                "expects": {"response_contains": ["b"]},
            }
        ),
        "utf-8",
    )
    document = load_document(path)
    assert not isinstance(document, list)
    call = ToolCallsResponse((ToolCall("x", "echo", "{}"), ToolCall("y", "echo", "{}")))
    responses = ((0, call), (0, TextResponse("a")), (1, call), (1, TextResponse("b")))
    data = recorded_data(
        document,
        RunRecord(responses=responses),
        tmp_path / "out" / "two.json",
        RecordSettings(Provenance("anthropic", "m", "2026-01-01T00:00:00Z")),
    )
    ids = [
        [c["id"] for s in turn["steps"] for c in s["response"].get("tool_calls", [])]
        for turn in data["turns"]
    ]
    assert ids == [["call_1", "call_2"], ["call_3", "call_4"]]
    assert [len(turn["steps"]) for turn in data["turns"]] == [2, 2]
    assert list(data) == ["name", "turns", "expects", "recorded"]


# --- the docs' recording section runs as written ------------------------------------------------

README = (ROOT / "docs" / "how-to" / "live-and-recording.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    import re

    return [str(b) for b in re.findall(rf"```{language}\n(.*?)```", text, re.S)]


def test_the_record_section_runs_as_written(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    (live_case,) = blocks(section("Live mode"), "yaml")
    where = live_case.splitlines()[0].removeprefix("# ")
    assert where == "evals/live/echo.yaml"
    (tmp_path / where).parent.mkdir(parents=True)
    (tmp_path / where).write_text(live_case, encoding="utf-8")
    text = section("Recording live runs as fixtures")
    (config,) = blocks(text, "toml")
    (commands_block,) = blocks(text, "sh")
    (expected_fixture,) = blocks(text, "yaml")
    commands = [line.strip() for line in commands_block.splitlines() if line.strip()]
    expected = {
        "evalrunner record evals/live --out evals/regression": (
            0,
            "recorded      echo_through_the_tool -> evals/regression/echo.yaml (2 model "
            "response(s), 1 tool call(s))\nrecorded 1 of 1 live case(s) into evals/regression "
            "(40 input + 9 output tokens)\n",
        ),
        "evalrunner validate evals/regression": (0, ""),
        "evalrunner run": (0, "1/1 cases passed"),
    }
    assert commands == list(expected)
    epoch = int(datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC).timestamp())
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALRUNNER_")}
    env.update(ANTHROPIC_API_KEY=KEY, NO_COLOR="1", SOURCE_DATE_EPOCH=str(epoch))
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    call = ToolCallsResponse((ToolCall("toolu_01", "echo", '{"message":"hello"}'),), 15, 5)
    with ModelServer("anthropic", [Reply(call), Reply(TextResponse("hello", 25, 4))]) as server:
        assert 'base_url = "https://api.anthropic.com"' in config
        local = config.replace("https://api.anthropic.com", server.base_url)
        (tmp_path / "evalrunner.toml").write_text(local, encoding="utf-8")
        for command, (code, needle) in expected.items():
            done = subprocess.run(
                command,
                shell=True,
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == code, (command, done.stdout, done.stderr)
            assert needle in done.stdout, (command, done.stdout)
            assert KEY not in done.stdout + done.stderr
        assert server.seen[0].body["model"] == "claude-sonnet-4-5"
    recorded = (tmp_path / "evals" / "regression" / "echo.yaml").read_text("utf-8")
    assert recorded == expected_fixture
    # The refusal the section quotes, for a pattern RE2 cannot compile.
    (tmp_path / "evalrunner.toml").write_text(
        local.replace("sk-ant-[A-Za-z0-9_-]{20,}", "(unclosed"), encoding="utf-8"
    )
    done = subprocess.run(
        ["evalrunner", "record", "evals/live", "--out", "elsewhere"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    quoted = text.split("(`evalrunner.toml:", 1)[1].split("...`)", 1)[0]
    assert done.stderr.startswith("evalrunner.toml:" + quoted.replace("\n  ", " "))


@pytest.mark.parametrize("arguments", ['{"message": "hi"}', '{"z":1,"message":"hi"}'])
def test_a_check_on_the_exact_argument_text_records_and_replays(
    tmp_path: Path, arguments: str
) -> None:
    # The live run passes on the model's own text; record must not rewrite it as compact,
    # key-sorted JSON (and then blame the agent when the replay differs).
    case = LIVE_CASE.replace(
        "  tools_used: [echo]\n",
        "  tools_used: [echo]\n  tool_arguments_contain:\n"
        f"    - {{tool: echo, needle: {json.dumps(arguments)}}}\n",
    )
    call = ToolCallsResponse((ToolCall("c1", "echo", arguments),), 20, 5)
    with ModelServer("openai", [Reply(call), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, live=case)
        done = record(cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not deterministic" not in done.stdout
    document = load_document(cwd / "recorded" / "live.yaml")
    assert not isinstance(document, list) and isinstance(document.data, dict)
    (step, _) = document.data["turns"][0]["steps"]
    assert step["response"]["tool_calls"][0]["arguments"] == arguments
    replays_green(cwd)
