"""Docs that run: every shell example of README.md and evals/README.md is executed here, on a
copy of the repository, and must do what the text around it promises. A command added to
the docs without an entry below fails the first test, so the docs cannot drift from this."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "evals/README.md")

LIVE_DOCS = "run by tests/test_live_docs.py, in the Live mode section's project, on a local model"
RECORD_DOCS = "run by tests/test_record.py, in the Recording section's project, on a local model"

# command → (exit code, text the output must hold), or a string: why it is not run here.
EXPECTED: dict[str, tuple[int, str] | str] = {
    "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/evalrunner run": (
        "run by .ci/run itself, on a fresh clone (it installs from the package registry)"
    ),
    "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/python -m pytest": (
        "this is the command that runs this test (.ci/run)"
    ),
    'evalrunner run --agent-command "python examples/sdk-agents/openai_agent.py --stream"': (
        0,
        "18/18 cases passed",
    ),
    (
        "evalrunner run --agent-command "
        '"python examples/sdk-agents/openai_responses_agent.py --previous-response"'
    ): (0, "18/18 cases passed"),
    "evalrunner schema export evals/schemas": (0, "yaml-language-server: $schema="),
    "evalrunner run --repeat 3 --jobs 2": (0, "repeats: 54/54 runs passed"),
    (
        "FLAKY_AGENT_STATE=flaky.state evalrunner run examples/flaky-agent/evals --repeat 5 "
        '--agent-command "python examples/flaky-agent/flaky_agent.py"'
    ): (1, "3/5 runs passed  FLAKY  pass^5 no  pass@5 yes  Wilson 95% [0.231, 0.882]"),
    "evalrunner mutate": (0, "73/73 mutant runs killed"),
    "evalrunner mutate --first-kill": (0, "73/73 mutant runs killed"),
    "evalrunner mutate --path in-process": (0, "16/16 mutant runs killed"),
    "evalrunner run --mode live": LIVE_DOCS,
    "evalrunner run": LIVE_DOCS,
    "evalrunner config": LIVE_DOCS,
    "evalrunner record evals/live --out evals/regression": RECORD_DOCS,
    "evalrunner validate evals/regression": RECORD_DOCS,
}


def shell_examples() -> list[str]:
    commands: list[str] = []
    for doc in DOCS:
        text = (ROOT / doc).read_text(encoding="utf-8")
        for block in re.findall(r"```(?:sh|bash|shell)\n(.*?)```", text, re.S):
            for line in block.splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command:
                    commands.append(command)
    return commands


def test_every_shell_example_is_accounted_for() -> None:
    assert sorted(set(shell_examples())) == sorted(EXPECTED)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("docs") / "repo"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(".venv", ".git", "node_modules", "__pycache__", ".*cache"),
    )
    return copy


@pytest.mark.parametrize("command", [c for c, v in EXPECTED.items() if isinstance(v, tuple)])
def test_a_shell_example_does_what_the_docs_promise(checkout: Path, command: str) -> None:
    code, needle = EXPECTED[command]  # type: ignore[misc]
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "NO_COLOR": "1"}
    done = subprocess.run(
        command, shell=True, cwd=checkout, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-2000:]
    assert needle in done.stdout
