"""The docs' Live mode section (docs/how-to/live-and-recording.md) runs as written: its
fixture and config, with base_url pointed at a local model server, and each of its commands,
doing what the text says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from support.model_server import ModelServer, Reply

from evalrunner.model import TextResponse, ToolCall, ToolCallsResponse

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "how-to" / "live-and-recording.md"
SECTION = PAGE.read_text(encoding="utf-8").split("## Live mode\n", 1)[1]
SECTION = SECTION.split("\n## ", 1)[0]
KEY = "sk-docs-KNOWN-SECRET-24680"

# command → (exit code, text the output must hold)
EXPECTED = {
    "evalrunner run --mode live": (0, "1/1 cases passed, 40 input + 9 output tokens"),
    "evalrunner run": (1, "0/1 cases passed (1 not run)"),
    "evalrunner config": (0, 'api_key_env = "OPENAI_API_KEY"  # evalrunner.toml:'),
}


def block(language: str) -> str:
    (text,) = re.findall(rf"```{language}\n(.*?)```", SECTION, re.S)
    return str(text)


def test_the_live_mode_section_runs_as_written(tmp_path: Path) -> None:
    fixture = block("yaml")
    where = fixture.splitlines()[0].removeprefix("# ")
    (tmp_path / where).parent.mkdir(parents=True)
    (tmp_path / where).write_text(fixture, encoding="utf-8")
    config = block("toml")
    assert 'base_url = "https://api.openai.com/v1"' in config
    commands = [line.strip() for line in block("sh").splitlines() if line.strip()]
    assert commands == list(EXPECTED)
    call = ToolCallsResponse((ToolCall("c1", "echo", '{"message":"hello"}'),), 15, 5)
    with ModelServer("openai", [Reply(call), Reply(TextResponse("hello", 25, 4))]) as server:
        local = config.replace("https://api.openai.com/v1", server.base_url)
        (tmp_path / "evalrunner.toml").write_text(local, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVALRUNNER_")}
        env.update(OPENAI_API_KEY=KEY, NO_COLOR="1")
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        for command, (code, needle) in EXPECTED.items():
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
    assert server.seen[0].body["model"] == "gpt-4.1-mini"
    assert server.seen[0].headers["authorization"] == f"Bearer {KEY}"
