"""Docs that run. Every page of the docs (README.md, evals/README.md, docs/**/*.md, each
example's README, run from the example's own directory, and CONTRIBUTING.md) is read as a
script, top to bottom, in a fresh copy of the project's suites and examples:

- a code block whose first line is a comment naming a file (``# my_agent.py``) is written to
  that file when the page reaches it;
- each line of a ``sh`` block, each ``run:`` step of a workflow that runs or installs
  evalrunner, and each ``$ `` line of a quoted transcript is a command, run when the page
  reaches it, which must exit and print as ``EXPECTED`` says (or ``EXPECTED`` says which test
  runs it instead, or why none can);
- every ``python`` block is executed; every YAML, JSON or TOML block is parsed, and admitted
  when it is a fixture or loaded when it is a config.

A command added to the docs without an entry below fails the first test, so the docs cannot
drift from this. The generated reference pages must be current, and the site must build with
``mkdocs build --strict``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from evalrunner import SuiteReport, run_suite
from evalrunner.config import ConfigError, load_config
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import parse_document
from evalrunner.model import Case

ROOT = Path(__file__).resolve().parent.parent
PAGES = (
    ["README.md", "evals/README.md"]
    + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))
    + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*/README.md"))
    + ["CONTRIBUTING.md"]
)

LIVE_DOCS = "run by tests/test_live_docs.py, in the Live mode section's project, on a local model"
RECORD_DOCS = "run by tests/test_record.py, in the Recording section's project, on a local model"
SDK_RUN = (0, "18/18 cases passed")
CI_RUN = "evalrunner run --junit-xml reports/evalrunner.xml --json reports/evalrunner.json"
CI_REPORTS = (0, "18/18 cases passed")
PIP_STEP = (
    "a workflow's install step: it installs from the package registry, as .ci/run does on a "
    "fresh clone"
)
SHARD_RUN = (
    "evalrunner run --shard ${{ matrix.shard }}/3 --continue-on-admission-errors "
    "--json reports/shard-${{ matrix.shard }}.json"
)
SHARD_MERGE = (
    "evalrunner merge reports/shard-*.json --json reports/evalrunner.json "
    "--junit-xml reports/evalrunner.xml"
)
SHARDS = "run by test_the_sharded_workflow_runs_and_merges, once for each shard of its matrix"
BENCH = "smoke-run by test_a_bench_command_the_docs_quote_runs, on a few cases"
TIERS = "a tier of the project's own tests: .ci/run runs every tier, this test among them"
FRAMEWORKS = (
    "not run by the tests: it installs an agent framework from the package registry (the "
    "network), and evalrunner depends on none of them"
)

# page → command → (exit code, text stdout or stderr must hold), or a string: why not here.
EXPECTED: dict[str, dict[str, tuple[int, str] | str]] = {
    "README.md": {
        "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/evalrunner run": (
            "run by .ci/run itself, on a fresh clone (it installs from the package registry)"
        ),
        "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/python -m pytest": (
            "this is the command that runs this test (.ci/run)"
        ),
        (
            "python3 -m venv .venv && .venv/bin/pip install '.[docs]' && "
            ".venv/bin/mkdocs build --strict --site-dir site"
        ): "the build is run by test_the_site_builds_strictly (the install by .ci/run)",
        "evalrunner run evals/regression/echo_token_roundtrip.yaml -v": (
            0,
            '    ✓ tool_results_contain("echo"[0], "token_7f3a")\n1/1 cases passed in ',
        ),
        'evalrunner run --agent-command "python examples/sdk-agents/openai_agent.py --stream"': (
            SDK_RUN
        ),
        "pip install PATH/TO/evalrunner": PIP_STEP,
        CI_RUN: CI_REPORTS,
    },
    "evals/README.md": {
        "evalrunner mutate": (0, "85/85 mutant runs killed"),
        "evalrunner mutate --first-kill": (0, "85/85 mutant runs killed"),
        "evalrunner mutate --path in-process": (0, "19/19 mutant runs killed"),
    },
    "CONTRIBUTING.md": {
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test,docs]'": (
            "run by .ci/run itself, on a fresh clone (it installs from the package registry)"
        ),
        ".venv/bin/python -m pytest": TIERS,
        ".venv/bin/python -m pytest -m slow": TIERS,
        ".venv/bin/python -m pytest -m fuzz": TIERS,
        ".venv/bin/python -m pytest -m editors": TIERS,
        '.venv/bin/python -m pytest -m ""': TIERS,
        ".venv/bin/python -m pytest --hypothesis-profile ci": TIERS,
    },
    "docs/index.md": {
        "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/evalrunner run": (
            "run by .ci/run itself, on a fresh clone (it installs from the package registry)"
        ),
        (
            "python3 -m venv .venv && .venv/bin/pip install '.[docs]' && "
            ".venv/bin/mkdocs build --strict --site-dir site"
        ): "the build is run by test_the_site_builds_strictly (the install by .ci/run)",
    },
    "docs/tutorials/first-suite.md": {
        "evalrunner run": (0, "18/18 cases passed"),
        'evalrunner new "Echo twice" --dir evals/my-evals': (
            0,
            "created evals/my-evals/echo_twice.yaml",
        ),
        "evalrunner validate evals/my-evals": (2, "expects declares only empty lists, which check"),
        "evalrunner run evals/my-evals": (0, "1/1 cases passed"),
    },
    "docs/tutorials/python-agent.md": {
        "evalrunner run": (0, "1/1 cases passed"),
    },
    "docs/tutorials/any-language.md": {
        'evalrunner run --agent-command "python examples/sdk-agents/openai_agent.py --stream"': (
            SDK_RUN
        ),
        'evalrunner run agent-evals --agent-command "python echo_agent.py"': (
            0,
            "1/1 cases passed",
        ),
        (
            "evalrunner run --agent-command "
            '"python examples/sdk-agents/openai_responses_agent.py --previous-response"'
        ): SDK_RUN,
    },
    "docs/how-to/persistent-agents.md": {
        'evalrunner run agent-evals --agent-command "python persistent_agent.py"': (
            0,
            "2/2 cases passed",
        ),
    },
    "docs/how-to/live-and-recording.md": {
        "evalrunner run --mode live": LIVE_DOCS,
        "evalrunner run": LIVE_DOCS,
        "evalrunner config": LIVE_DOCS,
        "evalrunner record evals/live --out evals/regression": RECORD_DOCS,
        "evalrunner validate evals/regression": RECORD_DOCS,
    },
    "docs/how-to/editors.md": {
        "evalrunner schema export evals/schemas": (0, "yaml-language-server: $schema="),
    },
    "docs/how-to/ci.md": {
        "pytest --evalrunner": (0, "18 passed"),
        "pytest --evalrunner evals/regression": (0, "18 passed"),
        "pytest --evalrunner evals/regression/echo_token_roundtrip.yaml": (0, "1 passed"),
        'pytest --evalrunner evals -k "echo or negative" -x --junitxml=report.xml': (
            0,
            "passed",
        ),
        "pytest --evalrunner -n 2": (0, "18 passed"),
        "pytest --evalrunner --evalrunner-mode live": (
            "run by tests/test_pytest_live.py, against a local model server"
        ),
        CI_RUN: CI_REPORTS,
        "pip install .": PIP_STEP,
        SHARD_RUN: SHARDS,
        SHARD_MERGE: SHARDS,
    },
    # An example's README runs from the example's directory.
    "examples/python-agent/README.md": {
        "evalrunner run": (0, "4/4 cases passed"),
    },
    "examples/framework-agents/README.md": {
        "python3 -m venv /tmp/fw-oa  && /tmp/fw-oa/bin/pip install -e . openai-agents": FRAMEWORKS,
        (
            "python3 -m venv /tmp/fw-pai && /tmp/fw-pai/bin/pip install -e . "
            "'pydantic-ai-slim[openai,anthropic]'"
        ): FRAMEWORKS,
        (
            "python3 -m venv /tmp/fw-lg  && /tmp/fw-lg/bin/pip install -e . langgraph "
            "langchain-openai langchain-anthropic"
        ): FRAMEWORKS,
        "python3 -m venv /tmp/fw-ant && /tmp/fw-ant/bin/pip install -e . anthropic": FRAMEWORKS,
        (
            '/tmp/fw-oa/bin/evalrunner run --agent-command "/tmp/fw-oa/bin/python '
            'examples/framework-agents/openai_agents_agent.py"'
        ): FRAMEWORKS,
    },
    "docs/how-to/repeats.md": {
        "evalrunner run --repeat 3 --jobs 2": (0, "repeats: 54/54 runs passed"),
        (
            "FLAKY_AGENT_STATE=flaky.state evalrunner run examples/flaky-agent/evals --repeat 5 "
            '--agent-command "python examples/flaky-agent/flaky_agent.py"'
        ): (1, "3/5 runs passed  FLAKY  pass^5 no  pass@5 yes  Wilson 95% [0.231, 0.882]"),
    },
    "docs/how-to/tool-doubles.md": {
        "evalrunner run weather-evals": (0, "1/1 cases passed"),
        (
            'evalrunner run weather-evals --agent-command "python '
            'examples/sdk-agents/anthropic_agent.py"'
        ): (0, "1/1 cases passed"),
        "evalrunner convert weather-evals/weather.yaml --to toml": (0, "[[tools]]"),
    },
    "docs/how-to/sequences-and-json.md": {
        "evalrunner run --config forecast.toml": (0, "1/1 cases passed"),
        "evalrunner run forecast-evals": (
            1,
            '✗ system_prompt_contains("weather"): not found in the system prompt of model '
            "request 1 of 2",
        ),
    },
    "docs/performance.md": {
        "env -u PYTHONDONTWRITEBYTECODE python bench/targets.py --count 1000 --rounds 3": BENCH,
        "python bench/memory.py": BENCH,
        "python bench/persistent_agents.py --rounds 1": BENCH,
        "python bench/promptfoo.py --rounds 3": (
            "not run by the tests: it needs promptfoo, installed with npm from the package "
            "registry (the network)"
        ),
    },
    "docs/how-to/mutants.md": {
        "evalrunner mutate": (0, "85/85 mutant runs killed"),
        "evalrunner mutate --first-kill": (0, "85/85 mutant runs killed"),
        "evalrunner mutate --path in-process": (0, "19/19 mutant runs killed"),
    },
}

# Commands that take minutes (every mutant on every path; an SDK imported once per case), and
# the pytest plugin's variants, each a pytest start over the suite: each runs once, in the slow
# tier, never in the page walk (in a project holding the files its page writes). The default
# tier keeps a fast case of each (mutate on one path and each SDK agent on a case elsewhere;
# the CI page's first pytest command in its walk).
SLOW = {
    "evalrunner mutate",
    "evalrunner mutate --first-kill",
    "evalrunner mutate --path in-process",
    "pytest --evalrunner evals/regression",
    "pytest --evalrunner evals/regression/echo_token_roundtrip.yaml",
    'pytest --evalrunner evals -k "echo or negative" -x --junitxml=report.xml',
    "pytest --evalrunner -n 2",
    'evalrunner run weather-evals --agent-command "python examples/sdk-agents/anthropic_agent.py"',
    'evalrunner run --agent-command "python examples/sdk-agents/openai_agent.py --stream"',
    (
        "evalrunner run --agent-command "
        '"python examples/sdk-agents/openai_responses_agent.py --previous-response"'
    ),
}

# The pages that say to run their commands elsewhere than the project's root.
PAGE_DIRS = {"examples/python-agent/README.md": "examples/python-agent"}

# The pages a user follows in a project of their own: they run in an empty directory outside
# any checkout, so a command that needs evalrunner's suites or examples fails there too.
OWN_PROJECT = {"docs/tutorials/python-agent.md"}

FILE_LINE = re.compile(r"^# ([\w./-]+\.(?:py|yaml|yml|json|toml))$")


def code_blocks(page: str) -> list[tuple[str, str]]:
    """Each fenced block of a page, in order: its language and its text."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [(m[0], m[1]) for m in re.findall(r"^```([\w-]*)\n(.*?)^```", text, re.S | re.M)]


def commands_of(block: str) -> list[str]:
    """The commands of a shell block, one a line (a line ending in ``\\`` goes on)."""
    commands: list[str] = []
    for line in re.sub(r"\\\n\s*", "", block).splitlines():
        command = re.sub(r"\s+#.*$", "", line).strip()
        if command:
            commands.append(command)
    return commands


# A step of a CI workflow the docs show: its command is a command of the page.
RUN_STEP = re.compile(r"^\s*-?\s*run:\s*((?:evalrunner|pip)\b.*)$", re.M)


# A transcript the docs quote: a line ``$ command``, then what it printed.
TRANSCRIPT = re.compile(r"^\$ (.+)$", re.M)


def block_commands(language: str, block: str) -> list[str]:
    """The commands a block gives: each line of a shell block, each ``run:`` step of a
    workflow that runs evalrunner or installs it, and each ``$ `` line of a transcript."""
    if language in ("sh", "bash", "shell"):
        return commands_of(block)
    if language in ("yaml", "yml"):
        return [step.strip() for step in RUN_STEP.findall(block)]
    return [command.strip() for command in TRANSCRIPT.findall(block)]


def transcripts(page: str) -> dict[str, list[str]]:
    """Each command a page quotes with its output: the output's lines (``...`` elides)."""
    found: dict[str, list[str]] = {}
    for language, block in code_blocks(page):
        if language in ("sh", "bash", "shell", "yaml", "yml"):
            continue
        parts = TRANSCRIPT.split(block)
        for command, output in zip(parts[1::2], parts[2::2], strict=True):
            lines = [line.rstrip() for line in output.splitlines()]
            found[command.strip()] = [line for line in lines if line and line != "..."]
    return found


def shell_examples(page: str) -> list[str]:
    return [
        command
        for language, block in code_blocks(page)
        for command in block_commands(language, block)
    ]


def test_every_shell_example_is_accounted_for() -> None:
    for page in PAGES:
        assert sorted(set(shell_examples(page))) == sorted(EXPECTED.get(page, {})), page
    assert set(EXPECTED) <= set(PAGES)


def copy_project(into: Path) -> Path:
    """The suites and examples, as a user's checkout has them (the package is installed)."""
    into.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", ".*cache", "node_modules")
    for name in ("evals", "examples"):
        shutil.copytree(ROOT / name, into / name, ignore=ignore)
    return into


def run_command(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALRUNNER_", "GITHUB_"))}
    env.update(
        PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
        NO_COLOR="1",
        PYTEST_ADDOPTS="-p no:cacheprovider",
    )
    return subprocess.run(
        command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def check(command: str, expected: tuple[int, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code, needle = expected
    done = run_command(command, cwd)
    output = done.stdout + done.stderr
    assert done.returncode == code, (command, output[-4000:])
    assert needle in output, (command, output[-4000:])
    return done


def page_project(tmp_path: Path, page: str) -> Path:
    """Where a page's commands and snippets run: a copy of the checkout, or an empty
    directory of the user's own."""
    if page in OWN_PROJECT:
        own = tmp_path / "own-project"
        own.mkdir()
        return own
    return copy_project(tmp_path / "project") / PAGE_DIRS.get(page, "")


def runnable_pages() -> list[str]:
    return [
        page
        for page in PAGES
        if any(isinstance(v, tuple) and c not in SLOW for c, v in EXPECTED.get(page, {}).items())
    ]


@pytest.mark.parametrize("page", runnable_pages())
def test_a_page_runs_as_written(tmp_path: Path, page: str) -> None:
    project = page_project(tmp_path, page)
    expected = EXPECTED[page]
    for language, block in code_blocks(page):
        first = block.split("\n", 1)[0]
        target = FILE_LINE.match(first)
        if target:
            (project / target[1]).parent.mkdir(parents=True, exist_ok=True)
            (project / target[1]).write_text(block, encoding="utf-8")
        for command in block_commands(language, block):
            outcome = expected[command]
            if isinstance(outcome, tuple) and command not in SLOW:
                check(command, outcome, project)


def test_the_sharded_workflow_runs_and_merges(tmp_path: Path) -> None:
    """The CI guide's matrix, run as its jobs would: each shard, then the merge, which gives
    the report of the whole run."""
    project = copy_project(tmp_path / "project")
    assert {SHARD_RUN, SHARD_MERGE} <= set(shell_examples("docs/how-to/ci.md"))
    names: list[str] = []
    for shard in (1, 2, 3):
        done = run_command(SHARD_RUN.replace("${{ matrix.shard }}", str(shard)), project)
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads((project / f"reports/shard-{shard}.json").read_text("utf-8"))
        names += [case["name"] for case in report["cases"]]
    assert len(names) == len(set(names)) == 18, names
    done = run_command(SHARD_MERGE, project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "18/18 cases passed" in done.stdout + done.stderr, done.stdout + done.stderr
    merged = json.loads((project / "reports/evalrunner.json").read_text("utf-8"))
    assert sorted(case["name"] for case in merged["cases"]) == sorted(names)
    assert (project / "reports/evalrunner.xml").is_file()


def slow_examples() -> dict[str, tuple[int, str]]:
    """Each slow command once, with what the docs promise of it (the same on every page)."""
    found: dict[str, tuple[int, str]] = {}
    for commands in EXPECTED.values():
        for command, outcome in commands.items():
            if command in SLOW and isinstance(outcome, tuple):
                assert found.setdefault(command, outcome) == outcome, command
    return found


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(slow_examples()))
def test_a_slow_shell_example_does_what_the_docs_promise(tmp_path: Path, command: str) -> None:
    project = copy_project(tmp_path / "project")
    # The files the pages that show the command write (its suite, its agent), as the page
    # walk would have written them before reaching it.
    for page in PAGES:
        if command not in EXPECTED.get(page, {}):
            continue
        for _, block in code_blocks(page):
            target = FILE_LINE.match(block.split("\n", 1)[0])
            if target:
                (project / target[1]).parent.mkdir(parents=True, exist_ok=True)
                (project / target[1]).write_text(block, encoding="utf-8")
    done = check(command, slow_examples()[command], project)
    # A transcript the docs quote of the command: each line it shows, the run prints.
    for page in PAGES:
        for line in transcripts(page).get(command, []):
            assert line in done.stdout.splitlines(), (page, line, done.stdout[-4000:])


# A bench command the performance page quotes → the same command on a few cases (the figures
# are the page's, measured once; the test holds the command and its flags to the script).
BENCH_SMOKE = {
    "env -u PYTHONDONTWRITEBYTECODE python bench/targets.py --count 1000 --rounds 3": (
        "env -u PYTHONDONTWRITEBYTECODE python bench/targets.py --count 20 --rounds 1"
    ),
    "python bench/memory.py": "python bench/memory.py --count 20",
    # The SDK agents take minutes a round; the stand-in runs the same two protocols.
    "python bench/persistent_agents.py --rounds 1": (
        "python bench/persistent_agents.py --rounds 1 --standin-only"
    ),
}


def test_every_bench_command_the_docs_quote_has_a_smoke_run() -> None:
    quoted = {c for c, v in EXPECTED["docs/performance.md"].items() if v == BENCH}
    assert quoted == set(BENCH_SMOKE)
    for command, smoke in BENCH_SMOKE.items():
        # The documented flags are all kept; only the amounts shrink (or the SDKs are skipped).
        flags = [word for word in command.split() if word.startswith("--")]
        assert all(flag in smoke.split() for flag in flags), (command, smoke)


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(BENCH_SMOKE))
def test_a_bench_command_the_docs_quote_runs(command: str) -> None:
    done = run_command(BENCH_SMOKE[command], ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def snippets(*languages: str) -> list[Any]:
    found = []
    for page in PAGES:
        for index, (language, block) in enumerate(code_blocks(page)):
            if language in languages:
                found.append(pytest.param(page, index, block, id=f"{page}#{index}"))
    return found


@pytest.mark.parametrize("page,index,block", snippets("python"))
def test_a_python_snippet_runs(tmp_path: Path, page: str, index: int, block: str) -> None:
    project = page_project(tmp_path, page)
    if page in OWN_PROJECT:  # the files the page wrote before this snippet are there
        for _, earlier in code_blocks(page)[:index]:
            target = FILE_LINE.match(earlier.split("\n", 1)[0])
            if target:
                (project / target[1]).parent.mkdir(parents=True, exist_ok=True)
                (project / target[1]).write_text(earlier, encoding="utf-8")
    script = project / "snippet.py"
    script.write_text(block, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    if "def make_agent(" in block:
        # An agent the docs offer must pass the bundled suite.
        spec = importlib.util.spec_from_file_location("docs_agent", script)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        bundled = copy_project(tmp_path / "checkout") / "evals" / "regression"
        outcome = run_suite(bundled, agent_factory=module.make_agent)
        assert isinstance(outcome, SuiteReport) and outcome.all_passed


@pytest.mark.parametrize("page,index,block", snippets("yaml", "json", "toml"))
def test_a_data_snippet_parses_and_fixtures_admit(
    tmp_path: Path, page: str, index: int, block: str
) -> None:
    language = code_blocks(page)[index][0]
    if language == "yaml":
        from ruamel.yaml import YAML

        data = YAML(typ="safe", pure=True).load(block)
    elif language == "json":
        data = json.loads(block)
    else:
        data = tomllib.loads(block)
    if isinstance(data, dict) and "turns" in data:
        document = parse_document(block.encode(), language, tmp_path / f"snippet.{language}")
        assert not isinstance(document, list), document
        case = admit(document)
        assert isinstance(case, Case), case
    elif language == "toml" and isinstance(data, dict) and "eval" in data:
        config = tmp_path / "evalrunner.toml"
        config.write_text(block, encoding="utf-8")
        try:
            load_config(config_file=config, cwd=tmp_path, env={})
        except ConfigError as exc:
            raise AssertionError(f"{page}: {exc}") from None


# page → (the line the page says to delete from its file block, the run error it then quotes)
BREAKAGES = {
    "docs/tutorials/python-agent.md": (
        'self.history.append(Message("assistant", "", tool_calls=response.tool_calls))',
        "turn 1, model request 2: history message 2 should be the assistant's tool calls "
        '"c1" (upper), but is a result for tool call "c1"',
    ),
    "docs/tutorials/any-language.md": (
        'history.append({"role": "assistant", "content": message["content"]})',
        'turn 2, model request 1: history message 4 should be the assistant message "It said '
        'hello.", but is the user message "And again?"',
    ),
}


@pytest.mark.parametrize("page", sorted(BREAKAGES))
def test_the_breakage_a_tutorial_describes_gives_the_error_it_quotes(
    tmp_path: Path, page: str
) -> None:
    line, error = BREAKAGES[page]
    text = re.sub(r"\s+", " ", (ROOT / page).read_text(encoding="utf-8"))
    assert f"`{line}`" in text and f"`{error}`" in text
    project = page_project(tmp_path, page)
    for _, block in code_blocks(page):
        target = FILE_LINE.match(block.split("\n", 1)[0])
        if target:
            (project / target[1]).parent.mkdir(parents=True, exist_ok=True)
            kept = [row for row in block.splitlines(keepends=True) if row.strip() != line]
            (project / target[1]).write_text("".join(kept), encoding="utf-8")
    if page.endswith("python-agent.md"):
        command = "evalrunner run --no-cache"
    else:
        command = 'evalrunner run agent-evals --agent-command "python echo_agent.py" --no-cache'
    done = run_command(command, project)
    assert done.returncode == 1, done.stdout + done.stderr
    assert error in done.stdout, done.stdout


def test_the_broken_expectation_of_the_first_suite_gives_the_failure_it_quotes(
    tmp_path: Path,
) -> None:
    page = "docs/tutorials/first-suite.md"
    text = re.sub(r"\s+", " ", (ROOT / page).read_text(encoding="utf-8"))
    assert "change `call_index: 1` to `call_index: 0` on the `pong` line" in text
    [quoted] = [b for lang, b in code_blocks(page) if lang == "text" and b.startswith("failures:")]
    *lines, summary = quoted.rstrip("\n").splitlines()
    project = copy_project(tmp_path / "project")
    write_file_blocks(page, project)
    fixture = project / "evals/my-evals/echo_twice.yaml"
    pong = "    - {tool: echo, needle: pong, call_index: 1}\n"
    assert pong in fixture.read_text(encoding="utf-8")
    fixture.write_text(
        fixture.read_text(encoding="utf-8").replace(pong, pong.replace("1}", "0}")), "utf-8"
    )
    done = run_command("evalrunner run evals/my-evals", project)
    assert done.returncode == 1, done.stdout + done.stderr
    for line in lines:
        assert line in done.stdout.splitlines(), (line, done.stdout)
    # The time the page quotes is one run's.
    assert summary.split(" in ")[0] + " in " in done.stdout, (summary, done.stdout)


def test_the_schema_typo_the_doubles_guide_shows_gives_the_error_it_quotes(tmp_path: Path) -> None:
    """The guide shows a fragment and the refusal of a file that starts with it: the rest of
    the case goes below the fragment, so the line and column are the fragment's."""
    page = "docs/how-to/tool-doubles.md"
    blocks = code_blocks(page)
    [index] = [i for i, (lang, b) in enumerate(blocks) if lang == "yaml" and "requried" in b]
    fragment = blocks[index][1]
    language, quoted = blocks[index + 1]
    assert language == "text" and quoted.startswith("typo.yaml:"), quoted
    rest = (
        "name: typo\n"
        "turns:\n"
        "  - user_input: Weather in Oslo?\n"
        "    steps:\n"
        "      - response:\n"
        "          type: tool_calls\n"
        "          tool_calls: [{id: w1, name: get_weather, arguments: {city: Oslo}}]\n"
        "      - response: {type: text, content: 12C}\n"
        "expects:\n"
        "  response_contains: [12C]\n"
    )
    (tmp_path / "typo.yaml").write_text(fragment + rest, encoding="utf-8")
    done = run_command("evalrunner validate typo.yaml", tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert quoted.strip() in (done.stdout + done.stderr).splitlines(), done.stdout + done.stderr


def write_file_blocks(page: str, into: Path) -> None:
    """Every block of ``page`` that names a file, written to that file under ``into``."""
    for _, block in code_blocks(page):
        target = FILE_LINE.match(block.split("\n", 1)[0])
        if target:
            (into / target[1]).parent.mkdir(parents=True, exist_ok=True)
            (into / target[1]).write_text(block, encoding="utf-8")


def test_the_tutorial_agent_fails_a_case_with_tool_doubles_as_the_tutorial_says(
    tmp_path: Path,
) -> None:
    error = (
        'turn 1: the agent never offered the tool double get_weather (it offered "echo"), so '
        'tool call "w1" (get_weather) was fed back as "Unknown tool: get_weather"'
    )
    page = "docs/tutorials/any-language.md"
    text = re.sub(r"\s+", " ", (ROOT / page).read_text(encoding="utf-8"))
    assert f"`{error}`" in text and "command-protocol.md#tool-doubles" in text
    write_file_blocks(page, tmp_path)
    write_file_blocks("docs/how-to/tool-doubles.md", tmp_path)
    command = 'evalrunner run weather-evals --agent-command "python echo_agent.py" --no-cache'
    done = run_command(command, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert error in done.stdout and '"tools" on the turn-1 line' in done.stdout, done.stdout


def test_the_export_new_suggests_is_the_one_the_editors_guide_gives(tmp_path: Path) -> None:
    [new] = [c for c in shell_examples("docs/tutorials/first-suite.md") if " new " in c]
    [export] = shell_examples("docs/how-to/editors.md")
    done = run_command(new, copy_project(tmp_path / "project"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"`{export}` writes it" in done.stderr, done.stderr
    tutorial = re.sub(r"\s+", " ", (ROOT / "docs/tutorials/first-suite.md").read_text("utf-8"))
    assert f"`{export}`" in tutorial


def test_two_example_cases_of_one_name_are_one_case(tmp_path: Path) -> None:
    """A reader who copies two examples into one suite must not meet a duplicate name: two
    fixtures in the docs share a name only when they are the same case (or one is an
    abridged view of it, or a live case and its recording)."""
    seen: dict[str, tuple[str, Case, bool]] = {}
    for page in PAGES:
        for language, block in code_blocks(page):
            if language not in ("yaml", "json", "toml") or "turns" not in block:
                continue
            document = parse_document(block.encode(), language, tmp_path / f"x.{language}")
            if isinstance(document, list):
                continue  # a fragment or a refusal the page shows; the test above admits cases
            case = admit(document)
            if not isinstance(case, Case):
                continue
            # An abridged view, or a live case (no steps), which its recording may follow.
            abridged = "(abridged)" in block.split("\n", 1)[0] or "steps" not in block
            first = seen.setdefault(case.name, (page, case, abridged))
            if first[1] != case and not (abridged or first[2]):
                raise AssertionError(f"{case.name!r}: different cases in {first[0]} and {page}")


def test_the_three_formats_of_the_fixtures_page_are_one_case(tmp_path: Path) -> None:
    cases = []
    for language, block in code_blocks("docs/reference/fixtures.md")[:3]:
        document = parse_document(block.encode(), language, tmp_path / f"example.{language}")
        assert not isinstance(document, list), document
        cases.append(admit(document))
    assert [type(c) for c in cases] == [Case, Case, Case]
    assert cases[0] == cases[1] == cases[2]


def generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_pages_are_current() -> None:
    for rel, text in generator().pages().items():
        committed = (ROOT / rel).read_text(encoding="utf-8")
        assert committed == text, f"{rel} is stale: run python docs/gen_reference.py"


def test_the_generator_finds_every_command_and_subcommand() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    for command in ("run", "validate", "mutate", "schema export", "cache clear"):
        assert f"## `evalrunner {command}`" in page


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install '.[docs]'")
    pytest.importorskip("material", reason="the docs extra is not installed: pip install '.[docs]'")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()


def test_the_run_suite_signature_the_docs_give_is_the_real_one() -> None:
    import inspect

    first = next(iter(inspect.signature(run_suite).parameters.values()))
    assert first.annotation in ("Path | Sequence[Path]",), first.annotation
    page = (ROOT / "docs" / "explanation" / "how-a-run-works.md").read_text(encoding="utf-8")
    assert f"`run_suite({first.name}, ...)`" in page
    assert f"`{first.name}` is one `Path`, a suite\n  directory, or a list of paths" in page


def test_the_readme_links_every_page_of_the_site_and_no_other() -> None:
    """The site's navigation is the one list of pages; the README's Documentation section
    follows it, so a page added to the site is not missing from the front door."""
    from ruamel.yaml import YAML

    def pages_of(entry: Any) -> list[str]:
        if isinstance(entry, str):
            return [entry]
        if isinstance(entry, list):
            return [page for item in entry for page in pages_of(item)]
        return [page for value in entry.values() for page in pages_of(value)]

    # mkdocs.yml may hold python tags, which a safe loader refuses: only nav is read.
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = YAML(typ="safe", pure=True).load(config[config.index("\nnav:") :])["nav"]
    site = {f"docs/{page}" for page in pages_of(nav)} - {"docs/index.md"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)\)", section))
    assert site, "no pages found in mkdocs.yml's nav"
    assert linked == site, (sorted(site - linked), sorted(linked - site))


def test_the_readme_is_a_front_door_without_internal_material() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    for needle in ("SPEC", "§", "tests/test_", "this round", "issue "):
        assert needle not in readme, needle
    assert not re.search(r"\b[0-9a-f]{7,40}\b", readme), "a commit hash"
    for page in PAGES[2:]:
        text = (ROOT / page).read_text(encoding="utf-8")
        assert "SPEC" not in text and "§" not in text, page
