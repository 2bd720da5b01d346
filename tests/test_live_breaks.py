"""Defects found by breaking live mode (max_concurrency, live case timeouts, pytest live mode,
key and base_url scrubbing), each kept as a test that failed on the code before its fix; the
subprocess timeouts are hang guards only."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support.live_project import CALL, LIVE_CASE, TEXT, WIRE_AGENT, clean_env, project
from support.model_server import ModelServer, Reply
from test_live_run import run

from evalrunner.model import TextResponse
from evalrunner.wire.openai_chat import OpenAIChat


def named(count: int) -> dict[str, str]:
    return {f"live_{n}": LIVE_CASE.replace("live_echo", f"live_{n}") for n in range(count)}


def add_toml(cwd: Path, text: str) -> None:
    toml = cwd / "evalrunner.toml"
    toml.write_text(toml.read_text("utf-8") + text, "utf-8")


# --- 1. a timed-out case's abandoned request keeps the concurrency slot ---


def test_a_timed_out_case_does_not_hold_up_the_next_case(tmp_path: Path) -> None:
    """live_0's model hangs; the case times out and "gives up its request in flight at once".
    live_1's model answers at once, so live_1 must pass. It times out instead: the abandoned
    request thread of live_0 still holds LiveModel._slots (max_concurrency = 1, the default)
    until the hang ends (the server's 10 s), so live_1's request waits for a slot past its
    own case timeout."""
    with ModelServer("openai", [Reply(hang=True), Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, **named(2))
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8").replace("timeout_secs = 5", "timeout_secs = 60"))
        done = run(cwd, "--mode", "live", "--case-timeout", "3", "--json", "out.json")
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    verdicts = {c["name"]: (c["passed"], c["error"]) for c in report["cases"]}
    assert verdicts["live_0"] == (False, "timed out after 3s")
    assert verdicts["live_1"] == (True, None), done.stdout


# --- 2. an interrupt with max_concurrency waits for every case to time out ---


def test_sigint_with_max_concurrency_stops_hung_agents_at_once(tmp_path: Path) -> None:
    """With max_concurrency = 2 the cases run on pool threads; SIGINT stops the live model
    (cutting requests) but does not give the cases up, so an agent command that hangs outside
    a model request keeps the run alive until the case timeout (here 40 s). One at a time
    (max_concurrency = 1) the same interrupt ends the run in well under a second."""
    hanging = tmp_path / "hanging"
    hanging.mkdir()
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url, **named(2))
        add_toml(cwd, "max_concurrency = 2\n")
        agent = f"{sys.executable} {WIRE_AGENT} hang"
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "evalrunner", "run", "--mode", "live"),
                *("--case-timeout", "40", "--agent-command", agent),
            ],
            cwd=cwd,
            env=clean_env(NO_COLOR="1", WIRE_AGENT_HANGING=str(hanging)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Both agent commands started and hanging (each says so), however slow the start.
        deadline = time.monotonic() + 60
        while len(list(hanging.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        try:
            stdout, stderr = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            # Not killed: a SIGKILL would orphan the agent commands. The run ends by itself at
            # the case timeout, which is the defect.
            process.communicate(timeout=90)
            pytest.fail("SIGINT did not stop the run within 15 s (it waits for the case timeout)")
    assert process.returncode == 130, stdout + stderr


# --- 3. the budget stop is hidden inside a repeated case ---


def test_the_budget_spent_in_a_repeated_case_still_stops_the_run_with_exit_3(
    tmp_path: Path,
) -> None:
    """--repeat 2, max_total_tokens = 60: run 1 spends 100 tokens (and fails its checks), so
    run 2 is not run ("not run: the token budget ..."). The run must say it was stopped by
    the budget and exit 3. It exits 1, with no "run stopped" line and "budget_spent": null,
    and counts run 2 as a failed run: combine_runs shows run 1's report, so
    the run core never sees the skipped run inside CaseReport.runs."""
    with ModelServer("openai", [Reply(TextResponse("no tools here", 50, 50))] * 2) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        add_toml(cwd, "max_total_tokens = 60\n")
        done = run(cwd, "--mode", "live", "--repeat", "2", "--json", "out.json")
    assert len(server.seen) == 1
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    assert report["budget_spent"] is not None, done.stdout
    assert "run stopped: the token budget is spent" in done.stdout
    assert done.returncode == 3, done.stdout + done.stderr


# --- 4. a base_url the schema refuses is quoted whole, password included ---


@pytest.mark.parametrize(
    "url",
    [
        "https://user:hunter2-PASSWORD@gateway.example/v1 ",  # a stray space
        "htps://user:hunter2-PASSWORD@gateway.example/v1",  # a typo in the scheme
        "https://gw.io/?k=hunter2-PASSWORD x",  # a query value, and a stray space
    ],
)
def test_a_refused_base_url_never_shows_its_secret(tmp_path: Path, url: str) -> None:
    """The schema's refusal of base_url quotes the value as it is ("got string
    \"https://user:hunter2-PASSWORD@...\""), in `evalrunner config` and `evalrunner run`
    alike; shown_url is only applied to a base_url that was admitted."""
    cwd = project(tmp_path, "openai", "https://placeholder.invalid/v1")
    toml = cwd / "evalrunner.toml"
    toml.write_text(
        toml.read_text("utf-8").replace(
            'base_url = "https://placeholder.invalid/v1"', f"base_url = {json.dumps(url)}"
        ),
        "utf-8",
    )
    config = subprocess.run(
        [sys.executable, "-m", "evalrunner", "config"],
        cwd=cwd,
        env=clean_env(NO_COLOR="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    done = run(cwd, "--mode", "live")
    assert config.returncode == 2 and done.returncode == 2
    assert "base_url" in config.stdout + config.stderr
    text = config.stdout + config.stderr + done.stdout + done.stderr
    assert "hunter2-PASSWORD" not in text


# --- 5. pytest live mode and xdist workers started with --tx ---


def test_pytest_live_mode_refuses_xdist_workers_given_by_tx(tmp_path: Path) -> None:
    """`-n` is refused in the controller, but `--tx 2*popen --dist load` starts workers without
    numprocesses: the controller is not refused, each worker raises the UsageError in
    pytest_configure (a traceback), and xdist replaces the crashed worker again and again
    ("replacing crashed worker gw71") until killed. Expected: a usage error, at once."""
    with ModelServer("openai", []) as server:
        suite = tmp_path / "evals"
        suite.mkdir()
        (suite / "live.yaml").write_text(LIVE_CASE, encoding="utf-8")
        (tmp_path / "evalrunner.toml").write_text(
            f'[eval]\nsuite_dir = "evals"\n[eval.live]\nbase_url = "{server.base_url}"\n'
            'model = "m"\napi_key_env = "LIVE_TEST_KEY"\n',
            encoding="utf-8",
        )
        env = clean_env(NO_COLOR="1")
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        argv = [
            *(sys.executable, "-m", "pytest", "-p", "evalrunner.pytest_plugin", "-p", "xdist"),
            *("-p", "no:cacheprovider", "--evalrunner", "--evalrunner-mode", "live"),
            *("--tx", "2*popen", "--dist", "load"),
        ]
        try:
            done = subprocess.run(
                argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
            )
        except subprocess.TimeoutExpired as hung:
            out = (hung.stdout or b"")[-300:]
            pytest.fail(f"pytest hung for 30 s; its output ends: {out!r}")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "leave out -n" in done.stderr


# --- 6. an interrupt under max_concurrency drops cases that had finished ---


class ByContentServer:
    """An OpenAI chat server that answers each request on its own merits (as the README asks
    of a stand-in under max_concurrency): a request whose text holds "HANG" is never answered
    (until close); otherwise a tool call first, then a text once the request holds a result."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.answered = 0
        self.closed = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                text = body.decode("utf-8")
                if "HANG" in text:
                    server.closed.wait(30)
                    self.close_connection = True
                    return
                response = TEXT if '"role": "tool"' in text or '"role":"tool"' in text else CALL
                data = json.dumps(
                    OpenAIChat().response_body(response, response_id="r", model="m")
                ).encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
                server.answered += 1

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> ByContentServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.closed.set()
        self._http.shutdown()
        self._http.server_close()


def test_an_interrupt_reports_the_cases_that_finished_before_it(tmp_path: Path) -> None:
    """max_concurrency = 2: live_0's model hangs, live_1 passes (both its requests answered,
    59 tokens spent). SIGINT then stops the run. "The finished cases are reported", but
    live_1, finished before the signal, is not: the report says "0/0 cases passed, 0 input +
    0 output tokens ... run interrupted by SIGINT after 0 finished case(s)". _live_at_once
    yields reports in suite order only, and drops every finished report behind a case still
    in flight (the tokens spent on them vanish from the report too)."""
    hang = LIVE_CASE.replace("live_echo", "live_0").replace("say hi", "HANG, then say hi")
    with ByContentServer() as server:
        cwd = project(tmp_path, "openai", server.base_url, live_0=hang, live_1=named(2)["live_1"])
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8").replace("timeout_secs = 5", "timeout_secs = 60"))
        add_toml(cwd, "max_concurrency = 2\n")
        process = subprocess.Popen(
            [sys.executable, "-m", "evalrunner", "run", "--mode", "live", "--json", "out.json"],
            cwd=cwd,
            env=clean_env(NO_COLOR="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while server.answered < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.answered == 2  # live_1's two requests answered
        time.sleep(1)  # generous: live_1 grades in milliseconds
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stdout + stderr
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    finished = {c["name"]: c["passed"] for c in report["cases"]}
    assert finished.get("live_1") is True, stdout


# --- 7. a live case passes although the model was never asked ---


def test_a_live_case_whose_agent_never_asks_the_model_does_not_pass(tmp_path: Path) -> None:
    """A live case grades "what the real model and the agent did". An agent command that
    answers every turn with canned text and never sends a model request passes it in
    `run --mode live` ("1/1 cases passed, 0 input + 0 output tokens"), although replay mode
    fails the same agent ("turn 1 scripted 2 response(s) the agent never requested") and
    `evalrunner record` refuses it ("turn 1 made no model request"). Nothing in live mode
    holds a turn to at least one request to the live model."""
    case = LIVE_CASE.replace("  tools_used: [echo]\n", "").replace("[hello]", "[did not ask]")
    with ModelServer("openai", []) as server:
        cwd = project(tmp_path, "openai", server.base_url, live_echo=case)
        agent = f"{sys.executable} {WIRE_AGENT} no-model"
        done = run(cwd, "--mode", "live", "--agent-command", agent)
    assert server.seen == []
    assert done.returncode == 1, done.stdout + done.stderr
    assert "turn 1: the agent replied without asking the model" in done.stdout


# --- 8. a query in base_url: the path goes after it, and an echo of it is shown ---


def test_a_query_in_base_url_stays_after_the_path(tmp_path: Path) -> None:
    """README: a query value in base_url is "where some gateways take their key". The request
    URL is built as base_url + "/chat/completions", so the path lands inside the query: the
    server is asked for "/v1?key=gwtok/chat/completions" (path /v1, key "gwtok/chat/...")
    instead of "/v1/chat/completions?key=gwtok"."""
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url + "?key=gwtok")
        run(cwd, "--mode", "live")
    assert server.seen, "no request reached the server"
    assert server.seen[0].path == "/v1/chat/completions?key=gwtok"


def test_a_server_echo_of_the_base_url_secret_is_never_shown(tmp_path: Path) -> None:
    """base_url's user, password and query values are never shown "in run errors", but only
    the API key is struck from the server's own error message: a gateway that echoes the URL
    it was asked for ("no route for ...?key=gwtok-PRIVATE-42") puts the secret in the report."""
    secret = "gwtok-PRIVATE-42"
    echo = json.dumps({"error": {"message": f"no route for /v1?key={secret}"}}).encode()
    with ModelServer("openai", [Reply(status=404, raw=echo)]) as server:
        cwd = project(tmp_path, "openai", server.base_url + f"?key={secret}")
        done = run(cwd, "--mode", "live", "--json", "out.json")
    assert done.returncode == 1
    assert "HTTP 404" in done.stdout
    assert secret not in done.stdout + done.stderr + (cwd / "out.json").read_text("utf-8")
