"""``pytest --evalrunner`` in live mode, against a local model server (issue 12): live cases
run and are graded, scripted ones are skipped, the budget fails what it kept from running,
``-n`` is refused, and the key never appears in pytest's output."""

from __future__ import annotations

import os
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

pytest_plugins = ["pytester"]


def project(root: Path, wire: str, base_url: str, extra: str = "", **cases: str) -> Path:
    """Unlike test_live_run's project: no default case, and ``extra`` ends ``[eval.live]``."""
    return write_project(root, wire, base_url, cases, live_lines=extra)


@pytest.fixture(scope="module", autouse=True)
def _the_pipeline_imported_once() -> None:
    """An in-process run forgets the modules it imported when it ends (pytester restores
    ``sys.modules``): with the live pipeline and pytest's lazily imported helpers imported
    once here, before any run, no run imports them again."""
    import faulthandler  # noqa: F401
    import pdb  # noqa: F401
    import unittest  # noqa: F401

    import httpx2  # noqa: F401
    import ruamel.yaml  # noqa: F401



def pytest_run(
    pytester: pytest.Pytester, *args: str, mode: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``pytest --evalrunner ARGS`` in pytester's directory, with :func:`clean_env`'s
    environment and only this plugin loaded: in this process (pytester's in-process run), or
    as a process of its own when it would start xdist's workers."""
    env = clean_env(KEY, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", NO_COLOR="1")
    if mode is not None:
        env["EVALRUNNER_MODE"] = mode
    argv = ["-p", "evalrunner.pytest_plugin", "--evalrunner", "-rA", "-p", "no:cacheprovider"]
    if "-n" in args:
        return run_in(pytester.path, [sys.executable, "-m", "pytest", *argv, *args], env)
    with pytest.MonkeyPatch.context() as patch:
        for name in [k for k in os.environ if k not in env]:
            patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        result = pytester.runpytest_inprocess(*argv, *args)
    return subprocess.CompletedProcess(
        list(args), int(result.ret), result.stdout.str(), result.stderr.str()
    )


@pytest.mark.parametrize("wire", ["openai", "openai-responses", "anthropic"])
def test_live_cases_run_and_scripted_ones_are_skipped(pytester: pytest.Pytester, wire: str) -> None:
    with ModelServer(wire, [Reply(CALL), Reply(TEXT)]) as server:
        project(pytester.path, wire, server.base_url, live=LIVE_CASE, scripted=SCRIPTED_CASE)
        done = pytest_run(pytester, "--evalrunner-mode", "live")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 skipped" in done.stdout
    assert "scripted case: not run in live mode" in done.stdout
    assert len(server.seen) == 2
    assert KEY not in done.stdout + done.stderr


def test_the_mode_comes_from_the_environment_too_and_a_command_agent_runs(
    pytester: pytest.Pytester,
) -> None:
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        project(pytester.path, "openai", server.base_url, live=LIVE_CASE)
        command = f"{sys.executable} {WIRE_AGENT} ok"
        done = pytest_run(pytester, "--evalrunner-agent-command", command, mode="live")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_live_case_that_fails_its_checks_fails(pytester: pytest.Pytester) -> None:
    with ModelServer("openai", [Reply(TextResponse("no tools", 1, 1))]) as server:
        project(pytester.path, "openai", server.base_url, live=LIVE_CASE)
        done = pytest_run(pytester, "--evalrunner-mode", "live")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert "tools_used" in done.stdout


def test_the_spent_budget_fails_what_it_kept_from_running(pytester: pytest.Pytester) -> None:
    cases = {f"live_{n}": LIVE_CASE.replace("live_echo", f"live_{n}") for n in range(3)}
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)] * 3) as server:
        project(pytester.path, "openai", server.base_url, "max_total_tokens = 60\n", **cases)
        done = pytest_run(pytester, "--evalrunner-mode", "live")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 failed, 1 passed" in done.stdout
    assert "not run: the token budget (max_total_tokens) was spent" in done.stdout
    assert len(server.seen) == 3


def test_replay_mode_still_skips_live_cases(pytester: pytest.Pytester) -> None:
    project(
        pytester.path, "openai", "http://127.0.0.1:9/v1", live=LIVE_CASE, scripted=SCRIPTED_CASE
    )
    done = pytest_run(pytester)
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
    pytester: pytest.Pytester, args: tuple[str, ...], toml: str, needle: str
) -> None:
    cwd = project(pytester.path, "openai", "http://127.0.0.1:9/v1", live=LIVE_CASE)
    if toml:
        path = cwd / "evalrunner.toml"
        path.write_text(path.read_text("utf-8").replace('model = "local-test"\n', toml), "utf-8")
    done = pytest_run(pytester, *args)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
