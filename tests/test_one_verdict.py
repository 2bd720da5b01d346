"""One verdict (issue 23): every front end gives the verdict ``evalrunner run`` gives.

Generated suites (passing, failing, erroring, skipped and flaky cases, a case whose in-process
agent ends its process, itself or from a thread it starts) are run by ``run``, ``run -j 2``,
``--shard 1/3..3/3`` + ``merge``, ``pytest --evalrunner`` (and ``-n 2``, in the slow tier),
and the JSON report read back; each must give every case the verdict the suite's design says,
and the same exit code.

Each suite runs either the in-process agent (protocol 1's kinds) or a persistent command
agent (agent-command protocol 2), whose broken cases also break after the case ended: a model
request sent after its ``ended`` line, or a crash (a traceback, exit code 1) once it ended the
case. Those fail that case, and only that case, on every front end, whichever process served
it and whether a next case came.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tiers import slow
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.session import run_exit_code
from evalrunner.toolbox.merge import read_report

AGENT = """\
import os
import threading
from pathlib import Path

from evalrunner.agents.reference import ReferenceAgent


class Agent(ReferenceAgent):
    '''The reference agent, broken on purpose by what the user says.'''

    def respond(self, user_input: str) -> str:
        if user_input.startswith("HARDEXIT"):
            os._exit(0)  # would end the process with 0, a pass, and no report
        if user_input.startswith("THREADEXIT"):  # the same, from a thread it starts
            thread = threading.Thread(target=os._exit, args=(0,))
            thread.start()
            thread.join()
        if user_input.startswith("FLAKY"):
            # Passes the first run of the case in this front end's run, fails the others:
            # the marker is made atomically, whichever process runs which run.
            marker = Path(os.environ["VERDICT_MARKERS"]) / user_input
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return "a reply the script never made"
        return super().respond(user_input)
"""

PERSISTENT_AGENT = """\
import json
import os
import sys
import threading
import time
from pathlib import Path

from evalrunner.agents.reference import AgentContext, ReferenceAgent
from evalrunner.model import Message, ModelRequest, RunError
from evalrunner.boundary.observer import RecordingObserver
from evalrunner.boundary.tools import builtin_tools
from evalrunner.wire.client import WireClient

# A persistent (protocol 2) command agent: the reference loop over the replay endpoint,
# broken on purpose by what a case's user says.
model = WireClient("openai", os.environ["OPENAI_BASE_URL"])


def emit(line):
    print(json.dumps(line), flush=True)


sys.stdin.readline()  # the opening line: answered with the handshake only
emit({"evalrunner": 2})
case = agent = None
first = ""
for line in sys.stdin:
    message = json.loads(line)
    if message.get("end"):
        emit({"case": message["case"], "ended": True})
        if first.startswith("STRAY"):  # a request after the case ended
            try:
                model.complete(ModelRequest((Message("user", "One more thing."),)))
            except RunError:
                pass
        if first.startswith("CRASHAFTER"):
            raise RuntimeError("crashing once the case ended")
        case = agent = None
        continue
    if message["case"] != case:
        case, first = message["case"], message["user_input"]
        context = AgentContext(
            provider=model,
            tools=builtin_tools(),
            observer=RecordingObserver(),
            workspace=Path(message["workspace"]),
        )
        agent = ReferenceAgent(context)
    user = message["user_input"]
    if user.startswith("HARDEXIT"):
        os._exit(0)  # mid-case: the case errors
    if user.startswith("THREADEXIT"):  # the same, from a thread it starts
        threading.Thread(target=os._exit, args=(0,)).start()
        time.sleep(60)
    if user.startswith("FLAKY"):
        marker = Path(os.environ["VERDICT_MARKERS"]) / user
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            emit({"case": case, "reply": "a reply the script never made"})
            continue
    try:
        emit({"case": case, "reply": agent.respond(user)})
    except RunError as exc:
        emit({"case": case, "error": str(exc)})
"""

# Ordered so that under -j 2 (a worker takes every other case) the cases that end their
# worker's process share no worker with the flaky case (see FLAKY_WITH_EXITS).
KINDS = ("pass", "hardexit", "fail", "threadexit", "error", "skipped", "flaky")
PERSISTENT_KINDS = (*KINDS, "stray", "crashafter")
KINDS_OF = {1: KINDS, 2: PERSISTENT_KINDS}
"""The kinds of case each protocol's agent knows (1: in-process, 2: a persistent command)."""


def fixture(name: str, kind: str) -> str:
    """A case of ``kind``: what its turn says and what its script and checks are."""
    user = {
        "flaky": f"FLAKY-{name}",
        "hardexit": "HARDEXIT",
        "threadexit": "THREADEXIT",
        "stray": "STRAY say hi",
        "crashafter": "CRASHAFTER say hi",
    }.get(kind, "say hi")
    if kind == "skipped":  # a live case: not run in replay mode
        steps = ""
    else:
        reply = "bye" if kind == "fail" else "hi there"
        steps = f"    steps:\n      - response: {{type: text, content: {reply}}}\n"
        if kind == "error":  # a scripted response the agent never asks for: a run error
            steps += "      - response: {type: text, content: left over}\n"
    return (
        f"name: {name}\nturns:\n  - user_input: {user}\n{steps}"
        "expects:\n  response_contains: [hi]\n"
    )


def expected(kind: str, repeat: int) -> str:
    """The verdict the design gives a case of ``kind``."""
    if kind == "skipped":
        return "skipped"
    if kind == "pass" or (kind == "flaky" and repeat == 1):
        return "passed"
    return "failed"


@dataclass(frozen=True)
class Outcome:
    """What a front end said: each case's verdict and the exit code."""

    verdicts: dict[str, str]
    code: int


def suite_project(
    root: Path, kinds: list[str], repeat: int, protocol: int = 1
) -> tuple[Path, Path]:
    """A project with these cases and the breakable agent (in-process for protocol 1, a
    persistent command for 2); its suite and config file."""
    suite = root / "suite"
    suite.mkdir(parents=True)
    for index, kind in enumerate(kinds):
        name = f"c{index}-{kind}"
        (suite / f"{name}.yaml").write_text(fixture(name, kind), encoding="utf-8")
    if protocol == 1:
        (root / "verdict_agent.py").write_text(AGENT, encoding="utf-8")
        agent = 'agent = "verdict_agent:Agent"'
    else:
        script = root / "persistent_verdict_agent.py"
        script.write_text(PERSISTENT_AGENT, encoding="utf-8")
        agent = f"agent_command = {json.dumps(shlex.join([sys.executable, str(script)]))}"
        agent += "\ncase_timeout_secs = 60"  # a safety net, not a measurement
    config = root / "evalrunner.toml"
    config.write_text(
        f'[eval]\nsuite_dir = "suite"\n{agent}\nrepeat = {repeat}\n', encoding="utf-8"
    )
    return suite, config


@contextmanager
def markers(directory: Path) -> Iterator[None]:
    """A fresh directory of flaky-case markers for one front end's run."""
    directory.mkdir(parents=True)
    before = os.environ.get("VERDICT_MARKERS")
    os.environ["VERDICT_MARKERS"] = str(directory)
    try:
        yield
    finally:
        if before is None:
            del os.environ["VERDICT_MARKERS"]
        else:
            os.environ["VERDICT_MARKERS"] = before


def report_verdicts(data: dict[str, object]) -> dict[str, str]:
    cases = data["cases"]
    assert isinstance(cases, list)
    return {
        case["name"]: "skipped"
        if case.get("skipped")
        else ("passed" if case["passed"] else "failed")
        for case in cases
    }


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"NO_COLOR": "1"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout


def by_run(root: Path, suite: Path, config: Path, *flags: str) -> tuple[Outcome, Path]:
    """``evalrunner run`` (with ``flags``); its outcome and its JSON report file."""
    report = root / f"run{'-'.join(flags)}.json"
    with markers(root / f"markers-run{'-'.join(flags)}"):
        code, out = invoke(
            "run", str(suite), "--config", str(config), "--no-cache", "--format", "json",
            "--json", str(report), *flags,
        )  # fmt: skip
    return Outcome(report_verdicts(json.loads(out)), code), report


def by_shards(root: Path, suite: Path, config: Path) -> Outcome:
    """``--shard 1/3`` .. ``3/3``, then ``merge``."""
    parts = []
    with markers(root / "markers-shards"):
        for index in (1, 2, 3):
            part = root / f"shard-{index}.json"
            code, _ = invoke(
                "run", str(suite), "--config", str(config), "--no-cache", "--format", "json",
                "--json", str(part), "--shard", f"{index}/3",
            )  # fmt: skip
            assert code in (0, 1), code
            parts.append(str(part))
    merged = root / "merged.json"
    code, _ = invoke("merge", *parts, "--json", str(merged))
    return Outcome(report_verdicts(json.loads(merged.read_text("utf-8"))), code)


def read_back(report: Path) -> Outcome:
    """The JSON report read back (as ``merge`` reads it), and the core's exit code for it."""
    back = read_report(report).report
    verdicts = {
        case.name: "skipped" if case.skipped else ("passed" if case.passed else "failed")
        for case in back.cases
    }
    return Outcome(verdicts, run_exit_code(back))


def by_pytest(root: Path, suite: Path, config: Path, *flags: str) -> Outcome:
    """``pytest --evalrunner`` in a fresh interpreter; verdicts from its JUnit XML."""
    junit = root / f"pytest{'-'.join(flags)}.xml"
    directory = root / f"markers-pytest{'-'.join(flags)}"
    directory.mkdir()
    env = {
        **os.environ,
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "VERDICT_MARKERS": str(directory),
    }
    command = [sys.executable, "-m", "pytest", "-p", "evalrunner.pytest_plugin"]
    command += ["-p", "no:cacheprovider", "-q", "--rootdir", str(root), *flags]
    command += ["--evalrunner", str(suite), "--evalrunner-config", str(config)]
    done = subprocess.run(
        [*command, "--junitxml", str(junit)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert junit.exists(), done.stdout + done.stderr  # the summary is written, whatever ran
    verdicts = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("skipped") is not None:
            verdicts[case.attrib["name"]] = "skipped"
        elif case.find("failure") is not None or case.find("error") is not None:
            verdicts[case.attrib["name"]] = "failed"
        else:
            verdicts[case.attrib["name"]] = "passed"
    return Outcome(verdicts, done.returncode)


def flaky_with_exits(kinds: list[str]) -> bool:
    """FLAKY_WITH_EXITS: a flaky case in a suite with a case that ends its process."""
    return "flaky" in kinds and bool({"hardexit", "threadexit"} & set(kinds))


FLAKY_WITH_EXITS = (
    "Left out of the generated suites: under -j 2 a case that ends its worker's process makes "
    "the worker's unreported cases run again, each alone, and a flaky case run again is run "
    "twice. Its verdict then differs from a serial run's, in a run that fails either way."
)

suites = st.sampled_from([1, 2]).flatmap(
    lambda protocol: st.tuples(
        st.lists(st.sampled_from(KINDS_OF[protocol]), min_size=1, max_size=4).filter(
            lambda kinds: not flaky_with_exits(kinds)
        ),
        st.sampled_from([1, 2]),
        st.just(protocol),
    )
)


def designed(kinds: list[str], repeat: int) -> Outcome:
    verdicts = {f"c{i}-{kind}": expected(kind, repeat) for i, kind in enumerate(kinds)}
    graded = [v for v in verdicts.values() if v != "skipped"]
    code = 1 if "failed" in graded or not graded else 0
    return Outcome(verdicts, code)


def assert_every_front_end_agrees(
    root: Path, kinds: list[str], repeat: int, protocol: int = 1
) -> None:
    """``run``, its JSON report read back, ``-j 2``, shards + ``merge`` and the pytest plugin
    each give the designed per-case verdicts and exit code."""
    suite, config = suite_project(root, kinds, repeat, protocol)
    want = designed(kinds, repeat)
    serial, report = by_run(root, suite, config)
    assert serial == want
    assert read_back(report) == want
    assert by_run(root, suite, config, "-j", "2")[0] == want
    assert by_shards(root, suite, config) == want
    assert by_pytest(root, suite, config) == want


# Each protocol and each of a single run and repeats by default; every pairing in the slow tier.
@pytest.mark.parametrize(
    ("protocol", "repeat"),
    [(1, 2), (2, 1), slow(1, 1), slow(2, 2)],
)
def test_every_front_end_gives_the_verdict_of_the_design_for_every_kind(
    tmp_path: Path, protocol: int, repeat: int
) -> None:
    """The default tier's examples: one suite with a case of every kind of the protocol."""
    assert_every_front_end_agrees(tmp_path, list(KINDS_OF[protocol]), repeat, protocol)


# Each example runs five front ends, so the profile's depth is capped here; each example gets
# its own directory from the session's factory (a function-scoped tmp_path would be shared).
END_TO_END = settings(deadline=None, max_examples=min(settings.default.max_examples, 40))


@pytest.mark.slow
@END_TO_END
@given(suites)
def test_every_front_end_gives_the_verdict_of_the_design(
    tmp_path_factory: pytest.TempPathFactory, drawn: tuple[list[str], int, int]
) -> None:
    kinds, repeat, protocol = drawn
    root = tmp_path_factory.mktemp("verdicts")
    assert_every_front_end_agrees(root, kinds, repeat, protocol)


@pytest.mark.slow
@END_TO_END
@given(suites)
def test_pytest_with_xdist_gives_the_verdict_of_the_design(
    tmp_path_factory: pytest.TempPathFactory, drawn: tuple[list[str], int, int]
) -> None:
    pytest.importorskip("xdist")
    kinds, repeat, protocol = drawn
    root = tmp_path_factory.mktemp("verdicts")
    suite, config = suite_project(root, kinds, repeat, protocol)
    assert by_pytest(root, suite, config, "-p", "xdist", "-n", "2") == designed(kinds, repeat)


def test_a_keyword_matching_no_case_is_no_pass_on_either_front_end(tmp_path: Path) -> None:
    """Documented in docs/how-to/ci.md: each front end keeps its own tool's code for an empty
    selection, run's refusal (2) and pytest's "no tests ran" (5); neither is a pass."""
    suite, config = suite_project(tmp_path, ["pass"], 1)
    code, _ = invoke("run", str(suite), "--config", str(config), "--no-cache", "-k", "nothing")
    assert code == 2
    assert by_pytest(tmp_path, suite, config, "-k", "nothing").code == 5


# --- mutate grades as the project's runs grade --------------------------------------------------

EXIT_TOOL = """\
import os


class ExitTool:
    name = "boom"
    description = "Ends the process."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments):
        os._exit(0)  # would end mutate with 0, its "every mutant killed"
"""

USES_BOOM = """\
name: uses-boom
turns:
  - user_input: go
    steps:
      - response:
          type: tool_calls
          tool_calls:
            - {id: call_1, name: boom, arguments: {}}
      - response: {type: text, content: done}
expects:
  tools_used: [boom]
"""


def mutate(project: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app,
        ["mutate", "--config", str(project / "evalrunner.toml"), "--path", "in-process", *args],
        env={"NO_COLOR": "1"},
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout


def test_mutate_fails_loudly_when_a_project_tool_ends_the_process(tmp_path: Path) -> None:
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "boom.yaml").write_text(USES_BOOM, encoding="utf-8")
    (tmp_path / "exit_tool.py").write_text(EXIT_TOOL, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "suite"\ntools = ["exit_tool:ExitTool"]\n', encoding="utf-8"
    )
    code, out = mutate(tmp_path)
    assert code == 2, out
    assert (
        "error: the reference agent's run of 'uses-boom' on the in-process path ended its "
        "process: the agent called os._exit(0)"
    ) in out
    assert out.rstrip().endswith("mutate: the baseline cannot run; no mutant was judged")


LATE_TOOL = """\
from pathlib import Path

from evalrunner.process_exit import note_unexplained_death

CALLS = Path(__file__).parent / "calls"
AT = int((Path(__file__).parent / "late-at").read_text())


class LateTool:
    name = "boom"
    description = "Ends a process of the run outside every case, once."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments):
        calls = int(CALLS.read_text()) + 1 if CALLS.exists() else 1
        CALLS.write_text(str(calls))
        if calls == AT:
            # What a daemon thread an earlier case left does when it ends a --jobs worker:
            # a process of the run ended outside every case, noted for the run.
            note_unexplained_death("evalrunner worker 1 (exit code 0) died between cases")
        return "done"
"""


@pytest.mark.parametrize("during", ["baseline", "mutant"])
def test_mutate_fails_loudly_when_a_process_ends_outside_every_case(
    tmp_path: Path, during: str
) -> None:
    """During the baseline it cannot run (exit 2); during a mutant's run that mutant is not
    judged, neither killed nor a survivor, and mutate exits 2 all the same: the project's
    tools are to fix, not the suite. It used to be "the baseline cannot run" either way."""
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "boom.yaml").write_text(USES_BOOM, encoding="utf-8")
    module = f"late_tool_{during}"  # one module per test: an import is kept by the process
    (tmp_path / f"{module}.py").write_text(LATE_TOOL, encoding="utf-8")
    (tmp_path / "late-at").write_text("1" if during == "baseline" else "2", encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text(
        f'[eval]\nsuite_dir = "suite"\ntools = ["{module}:LateTool"]\n', encoding="utf-8"
    )
    code, out = mutate(tmp_path)
    assert code == 2, out
    problem = (
        "an agent or tool ended, or tried to end, a process of the run outside any case "
        "(evalrunner worker 1 (exit code 0) died between cases)"
    )
    if during == "baseline":
        said = f"error: while the reference agent ran the suite on the in-process path, {problem}"
        assert said in out
        assert out.rstrip().endswith("mutate: the baseline cannot run; no mutant was judged")
        return
    (unjudged,) = [line for line in out.splitlines() if "NOT JUDGED" in line]
    name = unjudged.split()[0]
    assert f"error: {name} on in-process was not judged: while it ran, {problem}" in out
    assert name not in out.split("cases and the mutants they kill", 1)[1].split("\n")[1]
    assert out.rstrip().endswith(
        "mutate: not every mutant could be judged; fix the project's tools, then mutate"
    )


def test_a_process_ended_after_the_last_mutant_blames_no_mutant_and_is_exit_2() -> None:
    from evalrunner.mutation.runner import MutantOutcome, MutationReport, render_mutation

    killed = MutantOutcome("silent", "in-process", ("c",))
    report = MutationReport(("c",), ("in-process",), (killed,), late_exits=("os._exit(0)",))
    assert report.exit_code == 2 and not report.unjudged and not report.survivors
    out = render_mutation(report)
    assert "silent" in out and "killed (1)" in out and "1/1 mutant runs killed" in out
    assert (
        "error: after the last mutant, an agent or tool ended, or tried to end, a process of "
        "the run outside any case (os._exit(0))"
    ) in out
    assert out.rstrip().endswith(
        "mutate: not every mutant could be judged; fix the project's tools, then mutate"
    )


def test_mutate_fails_loudly_when_the_baseline_passes_no_case(tmp_path: Path) -> None:
    (tmp_path / "suite").mkdir()
    failing = fixture("never", "fail")
    (tmp_path / "suite" / "never.yaml").write_text(failing, encoding="utf-8")
    (tmp_path / "evalrunner.toml").write_text('[eval]\nsuite_dir = "suite"\n', encoding="utf-8")
    code, out = mutate(tmp_path)
    assert code == 2, out
    assert "error: the reference agent passes no case on the in-process path" in out


@pytest.mark.parametrize("trimmed", [False, True])
def test_mutate_grades_with_the_projects_trimmed_history(trimmed: bool) -> None:
    """A project that lets its agent trim history does not call a trimming mutant killed:
    the mutant passes that project's gate."""
    from evalrunner.fixture.admit import admit
    from evalrunner.fixture.load import load_document
    from evalrunner.model import Case
    from evalrunner.mutation.mutants import IN_PROCESS
    from evalrunner.mutation.runner import run_mutants

    root = Path(__file__).resolve().parent.parent
    document = load_document(root / "evals" / "regression" / "multi_turn_tool_loop.toml")
    assert not isinstance(document, list)
    case = admit(document)
    assert isinstance(case, Case)
    report = run_mutants([case], paths=[IN_PROCESS], first_kill=True, trimmed_history=trimmed)
    (forgets,) = [o for o in report.outcomes if o.mutant == "forgets-earlier-turns"]
    assert forgets.survived is trimmed
