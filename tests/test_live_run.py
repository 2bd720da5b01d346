"""``evalrunner run --mode live`` end to end against local model servers (no network): every
agent path (reference agent, Python factory, command agent through the replay endpoint), each
mode with the other kind of case, conformance on live answers, the token budget and its exit
code, and a known key scanned for in every output (issue 12)."""

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
from support.live_project import (
    CALL,
    KEY,
    LIVE_CASE,
    SCRIPTED_CASE,
    TEXT,
    WIRE_AGENT,
    cli,
    project,
    start_cli,
    wait_for_requests,
)
from support.model_server import ModelServer, Reply
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.model import TextResponse

ROOT = Path(__file__).resolve().parent.parent


def run(
    cwd: Path, *args: str, key: str | None = KEY, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``evalrunner run ARGS`` in ``cwd`` with the environment of :func:`cli`: in this process
    (the command's own code, without an interpreter's start-up each time), or with ``process``
    as a process of its own (for a Python agent, whose module this process must not keep)."""
    if process:
        return cli(cwd, "run", *args, key=key)
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EVALRUNNER_")}
    env = {**unset, "LIVE_TEST_KEY": key, "NO_COLOR": "1"}
    with contextlib.chdir(cwd):
        done = CliRunner().invoke(app, ["run", *args], env=env)
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return subprocess.CompletedProcess(["run", *args], done.exit_code, done.stdout, done.stderr)


def outputs(cwd: Path, done: subprocess.CompletedProcess[str]) -> str:
    """Everything the run wrote: its streams and every report file."""
    files = [p.read_text(encoding="utf-8") for p in cwd.glob("out.*")]
    return "\n".join([done.stdout, done.stderr, *files])


SDK_AGENTS = ROOT / "examples" / "sdk-agents"
AGENTS = {
    "reference": [],
    "command-urllib": ["--agent-command", f"{sys.executable} {WIRE_AGENT} ok"],
    # The official SDKs on the endpoint's side, whichever wire the live model speaks.
    "command-openai-sdk": [
        "--agent-command",
        f"{sys.executable} {SDK_AGENTS / 'openai_agent.py'} --stream",
    ],
    "command-anthropic-sdk": [
        "--agent-command",
        f"{sys.executable} {SDK_AGENTS / 'anthropic_agent.py'}",
    ],
}


@pytest.mark.parametrize(
    ("wire", "stream", "agent"),
    [
        # The default tier: every wire once, and a command agent.
        ("openai", 0, "reference"),
        ("openai-responses", 1, "reference"),
        ("anthropic", 0, "reference"),
        ("anthropic", True, "command-urllib"),
        *[
            pytest.param(*combination, marks=pytest.mark.slow)
            for combination in [
                ("openai", 1, "reference"),
                ("openai-responses", 0, "reference"),
                ("anthropic", 1, "reference"),
                ("openai", False, "command-urllib"),
                ("anthropic", True, "command-openai-sdk"),
                ("openai", True, "command-anthropic-sdk"),
            ]
        ],
    ],
)
def test_a_live_case_passes_on_every_wire_and_agent_path(
    tmp_path: Path, wire: str, stream: bool, agent: str
) -> None:
    with ModelServer(wire, [Reply(CALL), Reply(TEXT)]) as server:
        extra = ""
        cwd = project(tmp_path, wire, server.base_url, extra)
        if stream:
            toml = cwd / "evalrunner.toml"
            toml.write_text(toml.read_text(encoding="utf-8") + "stream = true\n", "utf-8")
        done = run(cwd, "--mode", "live", "--json", "out.json", *AGENTS[agent])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1/1 cases passed, 50 input + 9 output tokens" in done.stdout
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    assert report["mode"] == "live" and report["all_passed"] is True
    case = report["cases"][0]
    assert (case["input_tokens"], case["output_tokens"], case["llm_calls"]) == (50, 9, 2)
    assert len(server.seen) == 2
    second = server.seen[1].body
    assert second["model"] == "local-test"
    # As the docs say: stream = false (the default) sends no stream field at all.
    assert all(("stream" in seen.body) is bool(stream) for seen in server.seen)
    # The agent's result went back to the live model, and the monitor saw the same.
    assert "call_7" in json.dumps(second)


def test_a_python_factory_gets_the_live_provider(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, 'agent = "my_agent:make"')
        (cwd / "my_agent.py").write_text(
            "from evalrunner.agents.reference import reference_agent\n"
            "SEEN = []\n"
            "def make(context):\n"
            "    SEEN.append(type(context.provider).__name__)\n"
            "    assert SEEN == ['ConversationMonitor']\n"
            "    return reference_agent(context)\n",
            encoding="utf-8",
        )
        done = run(cwd, "--mode", "live", process=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "agent python:my_agent:make · live mode" in done.stdout
    assert "1/1 cases passed" in done.stdout


def test_replay_mode_reports_a_live_case_as_not_run(tmp_path: Path) -> None:
    cwd = project(
        tmp_path, "openai", "http://127.0.0.1:9/v1", live_echo=LIVE_CASE, scripted=SCRIPTED_CASE
    )
    done = run(cwd, "--json", "out.json", "--junit-xml", "out.xml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "- live_echo (live_echo.yaml)  skipped: live case (its turns script no steps): " in (
        done.stdout
    )
    assert "1/2 cases passed (1 not run)" in done.stdout
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    assert (report["passed"], report["failed"], report["skipped"]) == (1, 0, 1)
    live = next(c for c in report["cases"] if c["name"] == "live_echo")
    assert live["passed"] is False and live["skipped"].startswith("live case")
    junit = (cwd / "out.xml").read_text(encoding="utf-8")
    assert '<skipped message="live case (its turns script no steps)' in junit
    assert 'skipped="1"' in junit


def test_a_run_of_only_live_cases_in_replay_mode_is_not_green(tmp_path: Path) -> None:
    cwd = project(tmp_path, "openai", "http://127.0.0.1:9/v1")
    done = run(cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "0/1 cases passed (1 not run)" in done.stdout


def test_live_mode_skips_scripted_cases_and_says_so(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(
            tmp_path, "openai", server.base_url, live_echo=LIVE_CASE, scripted=SCRIPTED_CASE
        )
        done = run(cwd, "--mode", "live")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "- scripted_hi (scripted.yaml)  skipped: scripted case: not run in live mode" in (
        done.stdout
    )
    assert "1/2 cases passed (1 not run)" in done.stdout
    assert len(server.seen) == 2  # only the live case's requests


def test_conformance_holds_the_agent_to_what_the_live_model_answered(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        forget = ["--agent-command", f"{sys.executable} {WIRE_AGENT} forget-result"]
        done = run(cwd, "--mode", "live", *forget)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'the result of tool call(s) "call_7" (echo) was not fed back' in done.stdout
    assert len(server.seen) == 1  # the refused request never reached the live model


def test_the_budget_stops_the_run_cleanly_with_exit_3(tmp_path: Path) -> None:
    cases = {f"live_{n}": LIVE_CASE.replace("live_echo", f"live_{n}") for n in range(3)}
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)] * 3) as server:
        cwd = project(tmp_path, "openai", server.base_url, **cases)
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8") + "max_total_tokens = 60\n", "utf-8")
        done = run(cwd, "--mode", "live", "--json", "out.json", "--junit-xml", "out.xml")
    assert done.returncode == 3, done.stdout + done.stderr
    # Case 1 spends 59 tokens; case 2's first answer takes it to 84; its second request is
    # refused; case 3 is not run.
    assert "run stopped: the token budget is spent (84 of max_total_tokens = 60" in done.stdout
    assert "- live_2 (live_2.yaml)  skipped: not run: the token budget" in done.stdout
    assert len(server.seen) == 3
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    assert report["budget_spent"].startswith("the token budget is spent")
    assert report["all_passed"] is False
    assert [c["passed"] for c in report["cases"]] == [True, False, False]
    assert "token budget" in (cwd / "out.xml").read_text(encoding="utf-8")


def test_an_answer_without_usage_stops_even_a_one_case_run_with_exit_3(tmp_path: Path) -> None:
    # The budget cannot be enforced on answers that report no tokens: the run stops as if it
    # were spent, whether or not another case was left to skip.
    no_usage = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hi"}}]})
    with ModelServer("openai", [Reply(raw=no_usage.encode())]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8") + "max_total_tokens = 100\n", "utf-8")
        done = run(cwd, "--mode", "live", "--json", "out.json")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "run stopped: live model: the model's answer carries no token usage" in done.stdout
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    assert "cannot be enforced" in report["budget_spent"]


def test_cases_after_an_answer_without_usage_say_why_they_were_not_run(tmp_path: Path) -> None:
    # The budget was not spent: it cannot be counted. The later case must say so, not that
    # "the token budget was spent" (with 0 tokens spent of 100).
    no_usage = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hi"}}]})
    with ModelServer("openai", [Reply(raw=no_usage.encode())] * 2) as server:
        second = LIVE_CASE.replace("name: live_echo", "name: second")
        cwd = project(tmp_path, "openai", server.base_url, a=LIVE_CASE, b=second)
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8") + "max_total_tokens = 100\n", "utf-8")
        done = run(cwd, "--mode", "live", "--json", "out.json")
    assert done.returncode == 3, done.stdout + done.stderr
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    skipped = report["cases"][1]["skipped"]
    assert skipped == (
        "not run: the token budget (max_total_tokens) cannot be enforced: an earlier answer "
        "carried no token usage"
    )
    assert "spent" not in done.stdout.split("run stopped")[0]
    # as the docs say whenever no answer counted a token
    assert "0 input + 0 output tokens" not in done.stdout
    assert "token usage not reported by the model" in done.stdout


def test_without_a_budget_answers_without_usage_say_usage_was_not_reported(
    tmp_path: Path,
) -> None:
    no_usage = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hi"}}]})
    with ModelServer("openai", [Reply(raw=no_usage.encode())]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = run(cwd, "--mode", "live")
    assert done.returncode == 1, done.stdout + done.stderr  # the checks fail; no budget stop
    assert "0 input + 0 output tokens" not in done.stdout
    assert "token usage not reported by the model" in done.stdout


def test_a_wrong_key_stops_the_run_naming_the_variable(tmp_path: Path) -> None:
    refused = json.dumps({"error": {"message": f"bad key {KEY}"}}).encode()
    with ModelServer("anthropic", [Reply(status=401, raw=refused)]) as server:
        cwd = project(tmp_path, "anthropic", server.base_url)
        done = run(cwd, "--mode", "live", "--json", "out.json", "--junit-xml", "out.xml")
    assert done.returncode == 2  # every request would be refused alike: the run stops
    assert "the API refused the key in LIVE_TEST_KEY (HTTP 401)" in done.stdout
    assert KEY not in outputs(cwd, done)
    assert "0 input + 0 output tokens" not in done.stdout  # no answer counted a token
    assert "token usage not reported by the model" in done.stdout


def test_a_missing_key_is_a_run_error_naming_the_variable(tmp_path: Path) -> None:
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = run(cwd, "--mode", "live", key=None)
    assert done.returncode == 2  # every request would lack it alike: the run stops
    assert "the environment variable LIVE_TEST_KEY (api_key_env in [eval.live]) is not set" in (
        done.stdout
    )
    assert server.seen == []


def test_live_mode_refuses_jobs(tmp_path: Path) -> None:
    cwd = project(tmp_path, "openai", "http://127.0.0.1:9/v1")
    done = run(cwd, "--mode", "live", "--jobs", "2")
    assert done.returncode == 2
    assert done.stderr.startswith("--jobs: live mode runs its cases in this process")


def test_the_key_never_appears_in_any_output(tmp_path: Path) -> None:
    """Every way a live run can end, with a known key in the environment: each stream and
    report file is scanned for it, tracebacks included."""
    echoed = json.dumps({"error": {"message": f"you sent {KEY}"}}).encode()
    replies = [
        Reply(CALL),
        Reply(TEXT),  # case 1 passes
        Reply(status=500, raw=echoed),  # case 2: a server error echoing the key
        Reply(raw=b"{not json " + KEY.encode()),  # case 3: a malformed body holding the key
        Reply(status=400, raw=echoed),  # case 4: a final 4xx echoing the key
        Reply(CALL),  # case 5: the model repeats the key in a reply that fails its check
        Reply(TextResponse(f"bye, and your key is {KEY} (or {KEY[3:19]})", 1, 1)),
    ]
    cases = {f"live_{n}": LIVE_CASE.replace("live_echo", f"live_{n}") for n in range(1, 6)}
    with ModelServer("openai", replies) as server:
        cwd = project(tmp_path, "openai", server.base_url, **cases)
        done = run(
            cwd,
            "--mode",
            "live",
            "-v",
            "--traceback",
            "--json",
            "out.json",
            "--junit-xml",
            "out.xml",
        )
        github = run(cwd, "--mode", "live", "--format", "github")
    assert done.returncode == 1
    text = outputs(cwd, done) + github.stdout + github.stderr
    assert KEY not in text and KEY[3:19] not in text
    assert "[redacted]" in text
    assert 'not found in response: "bye, and your key is [redacted] (or [redacted])"' in text
    assert "Traceback" not in done.stderr
    config = subprocess.run(
        [sys.executable, "-m", "evalrunner", "config"],
        cwd=cwd,
        env={**os.environ, "LIVE_TEST_KEY": KEY},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert KEY not in config.stdout + config.stderr
    assert 'api_key_env = "LIVE_TEST_KEY"' in config.stdout


# --- max_concurrency: live cases at once --------------------------------------------------------


def concurrent_project(tmp_path: Path, server: ModelServer, cases: int, extra: str = "") -> Path:
    named = {f"live_{n}": LIVE_CASE.replace("live_echo", f"live_{n}") for n in range(cases)}
    cwd = project(tmp_path, "openai", server.base_url, **named)
    toml = cwd / "evalrunner.toml"
    toml.write_text(toml.read_text("utf-8") + f"max_concurrency = {cases}\n{extra}", "utf-8")
    return cwd


def test_max_concurrency_runs_live_cases_at_once_and_keeps_suite_order(tmp_path: Path) -> None:
    # The server holds the first three requests until all three have arrived: the run passes
    # only if three cases are in flight at once (one at a time, the first would wait in vain
    # and be answered 599).
    replies = [Reply(CALL)] * 3 + [Reply(TEXT)] * 3
    with ModelServer("openai", replies, gate=3) as server:
        cwd = concurrent_project(tmp_path, server, 3)
        done = run(cwd, "--mode", "live", "--json", "out.json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    assert [c["name"] for c in report["cases"]] == ["live_0", "live_1", "live_2"]
    assert all(c["passed"] for c in report["cases"])


def test_one_at_a_time_is_the_default(tmp_path: Path) -> None:
    replies = [Reply(CALL)] * 2 + [Reply(TEXT)] * 2
    with ModelServer("openai", replies, gate=2) as server:
        named = {f"live_{n}": LIVE_CASE.replace("live_echo", f"live_{n}") for n in range(2)}
        cwd = project(tmp_path, "openai", server.base_url, **named)
        # The request that waits in vain is given up in tenths of a second, not the default 5.
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8").replace("timeout_secs = 5", "timeout_secs = 0.3"))
        done = run(cwd, "--mode", "live")
    # The first request waited for a second that never came while its case was running.
    assert done.returncode == 1, done.stdout + done.stderr
    assert "✗ live_0 (live_0.yaml)  run error" in done.stdout


def test_the_budget_holds_with_cases_at_once(tmp_path: Path) -> None:
    replies = [Reply(CALL)] * 2 + [Reply(TEXT)] * 2 + [Reply(CALL), Reply(TEXT)] * 2
    with ModelServer("openai", replies, gate=2) as server:
        cwd = concurrent_project(tmp_path, server, 2, "max_total_tokens = 60\n")
        toml = cwd / "evalrunner.toml"
        for n in (2, 3):
            (cwd / "evals" / f"live_{n}.yaml").write_text(
                LIVE_CASE.replace("live_echo", f"live_{n}"), "utf-8"
            )
        done = run(cwd, "--mode", "live")
        assert toml.exists()
    assert done.returncode == 3, done.stdout + done.stderr
    assert "run stopped: the token budget is spent" in done.stdout
    assert "not run: the token budget" in done.stdout


def test_sigterm_cuts_the_cases_in_flight(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(hang=True)] * 3) as server:
        cwd = concurrent_project(tmp_path, server, 3)
        process = start_cli(cwd, "run", "--mode", "live", "--json", "out.json")
        wait_for_requests(server, 3)
        assert len(server.seen) == 3  # all three in flight
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stdout + stderr
    assert "run interrupted by SIGTERM" in stdout
    assert "Traceback" not in stderr
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    assert report["interrupted"] is True


# --- case timeouts in live mode -----------------------------------------------------------------


@pytest.mark.parametrize("agent", ["reference", "command-urllib"])
def test_the_case_timeout_holds_in_live_mode_and_cuts_the_request(
    tmp_path: Path, agent: str
) -> None:
    """A live model is not a finite script: the case timeout applies to every agent, and the
    request in flight is cut when the case is given up (the per-request timeout here is a
    minute; the subprocess guard is well under it)."""
    with ModelServer("openai", [Reply(hang=True)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8").replace("timeout_secs = 5", "timeout_secs = 60"))
        done = run(cwd, "--mode", "live", "--case-timeout", "1", *AGENTS[agent])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "timed out after 1s" in done.stdout
