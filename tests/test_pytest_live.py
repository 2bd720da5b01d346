"""``pytest --evalrunner`` in live mode, against a local model server (issue 12): live cases
run and are graded, scripted ones are skipped, the budget fails what it kept from running,
``-n`` is refused, and the key never appears in pytest's output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support.live_project import (
    CALL,
    LIVE_CASE,
    SCRIPTED_CASE,
    TEXT,
    WIRE_AGENT,
    clean_env,
    run_in,
    write_project,
)
from support.model_server import ModelServer, Reply

from evalrunner.model import TextResponse

KEY = "sk-pytest-KNOWN-SECRET-13579"


def project(tmp_path: Path, wire: str, base_url: str, extra: str = "", **cases: str) -> Path:
    """Unlike test_live_run's project: no default case, and ``extra`` ends ``[eval.live]``."""
    return write_project(tmp_path, wire, base_url, cases, live_lines=extra)


def pytest_run(cwd: Path, *args: str, mode: str | None = None) -> subprocess.CompletedProcess[str]:
    env = clean_env(KEY, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", NO_COLOR="1")
    if mode is not None:
        env["EVALRUNNER_MODE"] = mode
    argv = [sys.executable, "-m", "pytest", "-p", "evalrunner.pytest_plugin", "--evalrunner"]
    argv += ["-rA", "-p", "no:cacheprovider", *args]
    return run_in(cwd, argv, env)


@pytest.mark.parametrize("wire", ["openai", "openai-responses", "anthropic"])
def test_live_cases_run_and_scripted_ones_are_skipped(tmp_path: Path, wire: str) -> None:
    with ModelServer(wire, [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, wire, server.base_url, live=LIVE_CASE, scripted=SCRIPTED_CASE)
        done = pytest_run(cwd, "--evalrunner-mode", "live")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 skipped" in done.stdout
    assert "scripted case: not run in live mode" in done.stdout
    assert len(server.seen) == 2
    assert KEY not in done.stdout + done.stderr


def test_the_mode_comes_from_the_environment_too_and_a_command_agent_runs(
    tmp_path: Path,
) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, live=LIVE_CASE)
        command = f"{sys.executable} {WIRE_AGENT} ok"
        done = pytest_run(cwd, "--evalrunner-agent-command", command, mode="live")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_live_case_that_fails_its_checks_fails(tmp_path: Path) -> None:
    with ModelServer("openai", [Reply(TextResponse("no tools", 1, 1))]) as server:
        cwd = project(tmp_path, "openai", server.base_url, live=LIVE_CASE)
        done = pytest_run(cwd, "--evalrunner-mode", "live")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert "tools_used" in done.stdout


def test_the_spent_budget_fails_what_it_kept_from_running(tmp_path: Path) -> None:
    cases = {f"live_{n}": LIVE_CASE.replace("live_echo", f"live_{n}") for n in range(3)}
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)] * 3) as server:
        cwd = project(tmp_path, "openai", server.base_url, "max_total_tokens = 60\n", **cases)
        done = pytest_run(cwd, "--evalrunner-mode", "live")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 failed, 1 passed" in done.stdout
    assert "not run: the token budget (max_total_tokens) was spent" in done.stdout
    assert len(server.seen) == 3


def test_replay_mode_still_skips_live_cases(tmp_path: Path) -> None:
    cwd = project(
        tmp_path, "openai", "http://127.0.0.1:9/v1", live=LIVE_CASE, scripted=SCRIPTED_CASE
    )
    done = pytest_run(cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 skipped" in done.stdout
    assert "live case (its turns script no steps)" in done.stdout


@pytest.mark.parametrize(
    ("args", "toml", "needle"),
    [
        (("--evalrunner-mode", "sideways"), "", "mode must be 'replay' or 'live', got 'sideways'"),
        (("--evalrunner-mode", "live", "-p", "xdist", "-n", "2"), "", "leave out -n"),
        (("--evalrunner-mode", "live"), 'model = "x"\nbogus = 1\n', "unknown key 'bogus'"),
        (("--evalrunner-mode", "live\x1b[2J"), "", "mode must be 'replay' or 'live'"),
    ],
)
def test_live_mode_problems_are_usage_errors(
    tmp_path: Path, args: tuple[str, ...], toml: str, needle: str
) -> None:
    cwd = project(tmp_path, "openai", "http://127.0.0.1:9/v1", live=LIVE_CASE)
    if toml:
        path = cwd / "evalrunner.toml"
        path.write_text(path.read_text("utf-8").replace('model = "local-test"\n', toml), "utf-8")
    done = pytest_run(cwd, *args)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
