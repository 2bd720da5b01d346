"""Broken agents at the tool boundary fail their case on every front end (issue 23): ``run``,
``run -j 2``, ``--shard`` + ``merge`` and ``pytest --evalrunner``.

- An in-process agent that says it runs its own tools (``runs_own_tools``, as a command agent
  does) yet calls the case's tools with arguments other than the model's call: the runner
  saw the tools receive them, so it holds the agent to both sides whatever it claims.
- An in-process agent that raises, in the tool case's second turn, an exception whose
  ``__str__`` raises too: showing it must not stop the recording of the failure (the case once
  passed, and the next case on that thread hung).
- A command agent that offers echo as ``mcp__echo``, runs ``echo`` all the same and reports
  no dispatches, on an OpenAI wire (no error flag): nothing shows the call was answered as
  failed, so it fails.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "tests" / "support"

ECHO = """\
name: echo-token
turns:
  - user_input: echo the token
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: call_1, name: echo, arguments: {message: token_7f3a}}]
      - response: {type: text, content: "said token_7f3a"}
expects:
  tool_arguments_contain: [{tool: echo, needle: token_7f3a}]
  response_contains: [token_7f3a]
"""

PLAIN = """\
name: plain-text
turns:
  - user_input: say hi
    steps:
      - response: {type: text, content: hi there}
expects:
  response_contains: [hi]
"""

CLAIMS_OWN_TOOLS = """\
import json
from dataclasses import replace

from evalrunner.agents.reference import ReferenceAgent


class Agent(ReferenceAgent):
    '''Says it runs its own tools, runs the case's with a key added, and reports that.'''

    runs_own_tools = True

    def _dispatch(self, call):
        arguments = json.loads(call.arguments)
        arguments["extra"] = "added"
        return super()._dispatch(replace(call, arguments=json.dumps(arguments)))
"""


UNPRINTABLE = """\
from evalrunner.agents.reference import ReferenceAgent


class Mute(Exception):
    def __str__(self):
        raise RuntimeError("no message")


class Agent(ReferenceAgent):
    '''Raises, on its second turn, an exception that cannot be shown.'''

    turns = 0

    def respond(self, user_input):
        self.turns += 1
        if self.turns == 2:
            raise Mute()
        return super().respond(user_input)
"""

SECOND_TURN = """\
  - user_input: and again
    steps:
      - response: {type: text, content: "said token_7f3a again"}
"""


def project(root: Path, agent: str) -> None:
    suite = root / "suite"
    suite.mkdir()
    (suite / "a.yaml").write_text(ECHO, encoding="utf-8")
    (suite / "b.yaml").write_text(PLAIN, encoding="utf-8")
    if agent == "claims-own-tools":
        (root / "own_tools_agent.py").write_text(CLAIMS_OWN_TOOLS, encoding="utf-8")
        line = 'agent = "own_tools_agent:Agent"'
    elif agent == "unprintable-exception":
        two_turns = ECHO.replace("expects:\n", SECOND_TURN + "expects:\n")
        (suite / "a.yaml").write_text(two_turns, encoding="utf-8")
        (root / "mute_agent.py").write_text(UNPRINTABLE, encoding="utf-8")
        line = 'agent = "mute_agent:Agent"\ncase_timeout_secs = 60'
    else:
        argv = [sys.executable, str(SUPPORT / "broken_wire_agent.py"), "openai", agent]
        line = f"agent_command = {json.dumps(shlex.join(argv))}\ncase_timeout_secs = 60"
    (root / "evalrunner.toml").write_text(
        f'[eval]\nsuite_dir = "suite"\n{line}\n', encoding="utf-8"
    )


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(root)]), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "evalrunner", *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def verdicts(report: dict[str, object]) -> dict[str, bool]:
    cases = report["cases"]
    assert isinstance(cases, list)
    return {case["name"]: case["passed"] for case in cases}


WANT = {"echo-token": False, "plain-text": True}


@pytest.mark.parametrize(
    "agent", ["claims-own-tools", "unprintable-exception", "mcp-names-unreported"]
)
def test_a_broken_boundary_fails_its_case_on_every_front_end(tmp_path: Path, agent: str) -> None:
    project(tmp_path, agent)
    for jobs in ("1", "2"):
        done = cli(tmp_path, "run", "--no-cache", "--format", "json", "-j", jobs)
        assert done.returncode == 1, done.stdout + done.stderr
        assert verdicts(json.loads(done.stdout)) == WANT, jobs
    parts = []
    for index in (1, 2):
        part = tmp_path / f"shard-{index}.json"
        cli(tmp_path, "run", "--no-cache", "--shard", f"{index}/2", "--json", str(part))
        parts.append(str(part))
    merged = tmp_path / "merged.json"
    done = cli(tmp_path, "merge", *parts, "--json", str(merged))
    assert done.returncode == 1, done.stdout + done.stderr
    assert verdicts(json.loads(merged.read_text("utf-8"))) == WANT
    junit = tmp_path / "junit.xml"
    command = [sys.executable, "-m", "pytest", "-p", "evalrunner.pytest_plugin", "-q"]
    command += ["-p", "no:cacheprovider", "--rootdir", str(tmp_path), "--evalrunner"]
    done = subprocess.run(
        [*command, "--junitxml", str(junit)],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    failed = {
        case.attrib["name"]
        for case in ET.parse(junit).getroot().iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    }
    assert failed == {"echo-token"}
