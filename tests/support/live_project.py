"""The scaffolding the live-mode tests share (test_live_run, test_record, test_pytest_live and
their _breaks files): a project directory whose evalrunner.toml points ``[eval.live]`` at a
local :class:`~support.model_server.ModelServer`, the cases it holds, and the command lines run
in it with a clean environment (no ``EVALRUNNER_*`` settings, the key in ``LIVE_TEST_KEY``).

Plain functions, not fixtures: a test starts its model server first, then writes the project
with the server's ``base_url``, sometimes twice or in a subdirectory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from support.model_server import ModelServer

from evalrunner.config import LiveConfig
from evalrunner.live.provider import LiveModel
from evalrunner.model import TextResponse, ToolCall, ToolCallsResponse

KEY = "sk-live-KNOWN-SECRET-987654321"
WIRE_AGENT = Path(__file__).parent / "wire_agent.py"

LIVE_CASE = """\
name: live_echo
turns:
  - user_input: say hi through echo
expects:
  tools_used: [echo]
  response_contains: [hello]
"""
SCRIPTED_CASE = """\
name: scripted_hi
turns:
  - user_input: say hi
    steps:
      - response: {type: text, content: hi there}
expects:
  response_contains: [hi]
"""
CALL = ToolCallsResponse((ToolCall("call_7", "echo", '{"message":"hi"}'),), 20, 5)
TEXT = TextResponse("hello from the live model", 30, 4)


def write_project(
    root: Path,
    wire: str,
    base_url: str,
    cases: Mapping[str, str],
    *,
    eval_lines: str = "",
    live_lines: str = "",
) -> Path:
    """``root/evals`` holding ``cases`` (a name with a dot is the whole file name, any other
    gets ``.yaml``), and ``root/evalrunner.toml``: ``eval_lines`` go in ``[eval]`` after
    ``suite_dir``, ``live_lines`` after the ``[eval.live]`` settings, each written as given
    (so each ends its own lines)."""
    suite = root / "evals"
    suite.mkdir()
    for name, text in cases.items():
        (suite / (name if "." in name else f"{name}.yaml")).write_text(text, encoding="utf-8")
    (root / "evalrunner.toml").write_text(
        f'[eval]\nsuite_dir = "evals"\n{eval_lines}[eval.live]\nwire = "{wire}"\n'
        f'base_url = "{base_url}"\nmodel = "local-test"\napi_key_env = "LIVE_TEST_KEY"\n'
        f"timeout_secs = 5\nmax_retries = 0\n{live_lines}",
        encoding="utf-8",
    )
    return root


def project(
    tmp_path: Path,
    wire: str,
    base_url: str,
    extra: str = "",
    *,
    default_case: str = LIVE_CASE,
    **cases: str,
) -> Path:
    """The project of test_live_run and test_record: ``extra`` is a line of ``[eval]`` (left
    blank when empty), and with no ``cases`` the suite is ``default_case`` as live_echo.yaml."""
    chosen = cases or {"live_echo": default_case}
    return write_project(tmp_path, wire, base_url, chosen, eval_lines=f"{extra}\n")


def live_model_on(server: ModelServer, **settings: Any) -> LiveModel:
    """A :class:`LiveModel` speaking ``server``'s wire at its address, as model ``m`` with the
    key ``sk-test`` in ``K``, that retries without waiting; ``settings`` are further
    :class:`LiveConfig` fields (``stream``, ``max_retries``, ``max_total_tokens``, ...)."""
    config = LiveConfig(
        wire=server.wire, base_url=server.base_url, model="m", api_key_env="K", **settings
    )
    return LiveModel(config, environ={"K": "sk-test"}, sleep=lambda _: None)


def clean_env(key: str | None = KEY, **extra: str) -> dict[str, str]:
    """This process's environment without ``EVALRUNNER_*``, with ``LIVE_TEST_KEY`` set to
    ``key`` (unset for None), and then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALRUNNER_")}
    env.pop("LIVE_TEST_KEY", None)
    if key is not None:
        env["LIVE_TEST_KEY"] = key
    env.update(extra)
    return env


def run_in(cwd: Path, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``argv`` run to its end in ``cwd``, its output captured as text; 120 s is a hang guard."""
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def cli(
    cwd: Path, *args: str, key: str | None = KEY, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m evalrunner ARGS`` in ``cwd``, with :func:`clean_env`, ``NO_COLOR=1`` and
    ``env``."""
    argv = [sys.executable, "-m", "evalrunner", *args]
    return run_in(cwd, argv, clean_env(key, NO_COLOR="1", **env))


def start_cli(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """``python -m evalrunner ARGS`` started in ``cwd`` with ``clean_env()`` (the key, and no
    NO_COLOR), stdout and stderr piped as text, for a test to signal."""
    return subprocess.Popen(
        [sys.executable, "-m", "evalrunner", *args],
        cwd=cwd,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_requests(server: ModelServer, count: int) -> None:
    """Until ``server`` has seen ``count`` requests, or 60 s have passed: the caller checks."""
    deadline = time.monotonic() + 60
    while len(server.seen) < count and time.monotonic() < deadline:
        time.sleep(0.05)
