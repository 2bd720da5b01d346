"""--traceback: the full traceback of what a user's Python agent or tool raised, under its
failed case; without it, one line says it is there."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from evalrunner.cli import app

ROOT = Path(__file__).resolve().parent.parent

MODULE = """
def helper():
    raise ValueError("the agent tripped over its own feet")


class Agent:
    def __init__(self, context):
        pass

    def respond(self, user_input):
        helper()


def make(context):
    return Agent(context)


class Broken:
    name = "echo"
    description = "An echo that is down."
    parameters = {"type": "object"}

    def call(self, arguments):
        raise ConnectionError("echo backend unreachable")
"""


def project(tmp_path: Path, table: str) -> Path:
    (tmp_path / "user_code.py").write_text(MODULE, encoding="utf-8")
    config = tmp_path / "evalrunner.toml"
    suite = ROOT / "evals" / "regression"
    config.write_text(f'[eval]\nsuite_dir = "{suite}"\n{table}', encoding="utf-8")
    return config


def run(config: Path, *flags: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["run", "--config", str(config), "-q", *flags], env={})
    return result.exit_code, result.stdout


def test_an_agents_traceback_is_shown_with_the_flag(tmp_path: Path) -> None:
    config = project(tmp_path, 'agent = "user_code:make"\n')
    code, out = run(config, "-k", "multiline", "--traceback")
    assert code == 1
    assert "    | Traceback (most recent call last):" in out
    assert 'user_code.py", line 3, in helper' in out
    assert "    | ValueError: the agent tripped over its own feet" in out


def test_without_the_flag_one_line_says_it_is_there(tmp_path: Path) -> None:
    config = project(tmp_path, 'agent = "user_code:make"\n')
    code, out = run(config, "-k", "multiline")
    assert code == 1
    assert "Traceback" not in out
    assert "    (1 traceback(s) from the agent or its tools: --traceback)" in out


def test_a_tools_traceback_is_shown_under_the_case_it_failed(tmp_path: Path) -> None:
    config = project(tmp_path, 'tools = ["user_code:Broken"]\nbuiltin_tools = false\n')
    code, out = run(config, "-k", "echo-token-roundtrip", "--traceback")
    assert code == 1
    assert "    | ConnectionError: echo backend unreachable" in out
    assert 'user_code.py", line 24, in call' in out
