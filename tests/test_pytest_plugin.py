"""The pytest plugin: ``pytest --evalrunner [PATH ...]`` runs fixtures as test items, with the
verdicts of ``evalrunner run``, and does nothing without the flag."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.load import FIXTURE_SUFFIXES
from evalrunner.pytest_plugin import FIXTURE_SUFFIXES as PLUGIN_SUFFIXES

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "evals" / "regression"
PYTHON_AGENT = ROOT / "examples" / "python-agent"
WIRE_AGENT = ROOT / "tests" / "support" / "wire_agent.py"

PASSING = """\
name: passing
class: positive
turns:
  - user_input: say hi
    steps:
      - response: {type: text, content: hi there}
expects:
  response_contains: [hi]
"""

FAILING = """\
{"name": "failing", "class": "negative",
 "turns": [{"user_input": "say hi", "steps": [{"response": {"type": "text", "content": "bye"}}]}],
 "expects": {"response_contains": ["hi"], "max_tool_calls": 0}}
"""

ERRORING = """\
name = "erroring"
[[turns]]
user_input = "say hi"
[[turns.steps]]
response = { type = "text", content = "hi" }
[[turns.steps]]
response = { type = "text", content = "left over" }
[expects]
response_contains = ["hi"]
"""

MIXED = {"a.yaml": PASSING, "b.json": FAILING, "c.toml": ERRORING}

A_TEST = "def test_plain():\n    pass\n"


def write_suite(root: Path, files: dict[str, str], directory: str = "suite") -> Path:
    suite = root / directory
    suite.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (suite / name).write_text(text, encoding="utf-8")
    return suite


def junit_verdicts(path: Path) -> dict[str, bool]:
    """Case name -> passed, from a JUnit XML file pytest wrote."""
    verdicts = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        verdicts[case.attrib["name"]] = not failed
    return verdicts


def cli_verdicts(*args: str) -> dict[str, bool]:
    """Case name -> passed, from ``evalrunner run --format json`` in the working directory."""
    result = CliRunner().invoke(app, ["run", "--format", "json", *args], env={"NO_COLOR": "1"})
    assert result.exit_code in (0, 1), result.stderr
    return {case["name"]: case["passed"] for case in json.loads(result.stdout)["cases"]}


Runner = Callable[..., pytest.RunResult]


@pytest.fixture(scope="module", autouse=True)
def _the_pipeline_imported_once(tmp_path_factory: pytest.TempPathFactory) -> None:
    """An in-process run forgets the modules it imported when it ends (pytester restores
    ``sys.modules``): with the pipeline and pytest's lazily imported helpers imported once
    here, before any run, no run imports them again."""
    import faulthandler  # noqa: F401
    import pdb  # noqa: F401
    import unittest  # noqa: F401

    suite = tmp_path_factory.mktemp("warm") / "suite"
    shutil.copytree(REGRESSION, suite)
    result = CliRunner().invoke(
        app, ["run", "--no-cache", "--suite", str(suite), "--junit-xml", str(suite / "r.xml")]
    )
    assert result.exit_code == 0, result.output


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """Run pytest in this process (pytester's in-process run), with only this plugin and
    those named loaded, independent of what else is installed. (The tests of doing nothing
    without the flag run with every installed plugin, through the entry point; a test whose
    agent ends its process, or that starts xdist's workers, runs pytest as a process of its
    own: :func:`run_in_a_process`.)"""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def runner(*args: str) -> pytest.RunResult:
        return pytester.runpytest_inprocess("-p", "evalrunner.pytest_plugin", *args)

    return runner


@pytest.fixture
def run_in_a_process(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """:func:`run`, in a fresh interpreter, as a user runs it."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def runner(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess("-p", "evalrunner.pytest_plugin", *args)

    return runner


def collected(result: pytest.RunResult) -> list[str]:
    """The node ids ``--collect-only -q`` printed."""
    return [line for line in result.outlines if "::" in line]


# --- registration and doing nothing -----------------------------------------------------------


def test_the_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    entry_points = importlib.metadata.entry_points(group="pytest11")
    assert {(e.name, e.value) for e in entry_points if e.name == "evalrunner"} == {
        ("evalrunner", "evalrunner.pytest_plugin")
    }


def test_importing_the_plugin_imports_no_part_of_the_pipeline() -> None:
    code = (
        "import sys, evalrunner.pytest_plugin\n"
        "print(sorted(m for m in sys.modules if m.startswith(('evalrunner', 'jsonschema', "
        "'ruamel', 're2', 'referencing'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out.replace("'", '"')) == ["evalrunner", "evalrunner.pytest_plugin"]


def test_the_suffixes_are_those_of_the_loader() -> None:
    assert set(PLUGIN_SUFFIXES) == set(FIXTURE_SUFFIXES)


def test_without_the_flag_fixtures_are_not_collected(pytester: pytest.Pytester) -> None:
    write_suite(pytester.path, MIXED)
    pytester.makefile(".toml", evalrunner='[eval]\nsuite_dir = "suite"\n')
    pytester.makepyfile(test_plain=A_TEST)
    result = pytester.runpytest("--collect-only", "-q")
    assert collected(result) == ["test_plain.py::test_plain"]
    # Named explicitly, a fixture is still nobody's file.
    result = pytester.runpytest("--collect-only", "-q", "suite/a.yaml")
    assert collected(result) == []
    # Through the entry point, with every installed plugin, the flag collects them.
    result = pytester.runpytest("--collect-only", "-q", "--evalrunner", "suite/a.yaml")
    assert collected(result) == ["suite/a.yaml::passing"]
    # And without it a broken config is not read.
    pytester.makefile(".toml", evalrunner="[eval\n")
    assert pytester.runpytest("-q").ret == pytest.ExitCode.OK


def test_the_options_are_in_the_help(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", evalrunner="[eval\n")  # a broken config does not hide the help
    out = pytester.runpytest("--evalrunner", "--help").stdout.str()
    for option in (
        "--evalrunner ",
        "--evalrunner-config",
        "--evalrunner-agent-command",
        "--evalrunner-case-timeout",
    ):
        assert option in out


# --- collection -------------------------------------------------------------------------------


def test_one_item_per_case_named_by_the_case(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, MIXED)
    result = run("--evalrunner", "suite", "--collect-only", "-q")
    assert collected(result) == [
        "suite/a.yaml::passing",
        "suite/b.json::failing",
        "suite/c.toml::erroring",
    ]


def test_fixture_files_and_directories_named_are_collected_recursively(
    pytester: pytest.Pytester,
    run: Runner,
) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING})
    write_suite(pytester.path, {"b.json": FAILING}, "suite/deeper")
    write_suite(pytester.path, {"c.toml": ERRORING}, "suite/.hidden")
    write_suite(pytester.path, {"c.toml": ERRORING}, "other")
    result = run("--evalrunner", "suite", "other/c.toml", "--co", "-q")
    assert collected(result) == [
        "suite/a.yaml::passing",
        "suite/deeper/b.json::failing",
        "other/c.toml::erroring",
    ]


def test_links_back_up_the_tree_and_second_links_are_walked_once(
    pytester: pytest.Pytester, run: Runner
) -> None:
    suite = write_suite(pytester.path, {"a.yaml": PASSING})
    write_suite(pytester.path, {"b.json": FAILING}, "suite/deeper")
    (suite / "back").symlink_to("..", target_is_directory=True)  # a loop
    (suite / "self").symlink_to(".", target_is_directory=True)  # a loop
    (suite / "zz_again").symlink_to("deeper", target_is_directory=True)  # a second link
    (suite / "deeper" / "same.yaml").symlink_to("../a.yaml")  # a second link to a file
    result = run("--evalrunner", "suite", "--co", "-q")
    assert collected(result) == ["suite/a.yaml::passing", "suite/deeper/b.json::failing"]
    assert result.ret == 0


def test_links_that_lead_nowhere_are_refused_as_run_refuses_them(
    pytester: pytest.Pytester, run: Runner
) -> None:
    suite = write_suite(pytester.path, {"a.yaml": PASSING})
    (suite / "dangling.json").symlink_to("nowhere.json")
    (suite / "c2.yaml").symlink_to("c1.yaml")
    (suite / "c1.yaml").symlink_to("c2.yaml")
    result = run("--evalrunner", "suite")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "suite/c1.yaml: cannot read file: Too many levels of symbolic links",
            "*suite/dangling.json: cannot read file: No such file or directory",
            "*3 errors during collection*",
        ],
        consecutive=False,
    )
    assert cli_verdicts_refused(pytester.path, "suite") == [
        "suite/c1.yaml: cannot read file: Too many levels of symbolic links",
        "suite/c2.yaml: cannot read file: Too many levels of symbolic links",
        "suite/dangling.json: cannot read file: No such file or directory",
    ]


def cli_verdicts_refused(where: Path, *args: str) -> list[str]:
    """The problems ``evalrunner run`` refuses a suite for, run from ``where``."""
    assert Path.cwd() == where
    done = CliRunner().invoke(app, ["run", *args], env={"NO_COLOR": "1"})
    assert done.exit_code == 2, done.stdout
    return done.stderr.splitlines()[:-1]


def test_k_selects_by_the_fixtures_path_as_run_does(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING})
    write_suite(pytester.path, {"b.json": FAILING}, "suite/sub")
    result = run("--evalrunner", "suite", "-k", "sub/", "--co", "-q")
    assert collected(result) == ["suite/sub/b.json::failing"]


def test_a_refused_fixture_among_links_stops_the_run_with_exit_2(
    pytester: pytest.Pytester, run: Runner
) -> None:
    suite = write_suite(pytester.path, {"a.yaml": PASSING, "broken.yaml": "name: [\n"})
    (suite / "back").symlink_to("..", target_is_directory=True)
    result = run("--evalrunner", "suite")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*1 error during collection*"])
    assert "passed" not in result.stdout.str()


def test_with_no_fixture_path_the_configured_suite_is_added(
    pytester: pytest.Pytester, run: Runner
) -> None:
    write_suite(pytester.path, MIXED, "evals/regression")
    pytester.makepyfile(test_plain=A_TEST)
    # Beside the tests: data and the project's own TOML, which are not cases.
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "numbers.json").write_text("[1, 2]", encoding="utf-8")
    pytester.makefile(".toml", pyproject='[tool.evalrunner.eval]\nsuite_dir = "evals/regression"\n')
    cases = ["evals/regression/a.yaml::passing", "evals/regression/b.json::failing"]
    cases.append("evals/regression/c.toml::erroring")

    result = run("--evalrunner", "--co", "-q")
    assert sorted(collected(result)) == sorted(["test_plain.py::test_plain", *cases])
    # A path that holds no fixture: the suite comes along.
    result = run("--evalrunner", "test_plain.py", "--co", "-q")
    assert collected(result) == ["test_plain.py::test_plain", *cases]
    # A fixture path: only what it names.
    result = run("--evalrunner", "evals/regression/b.json", "--co", "-q")
    assert collected(result) == ["evals/regression/b.json::failing"]


def test_a_suite_below_the_arguments_is_collected_once_with_the_rest(
    pytester: pytest.Pytester, run: Runner
) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING}, "evals/regression")
    write_suite(pytester.path, {"b.json": FAILING}, "build/evals")
    pytester.makepyfile(test_plain=A_TEST)
    result = run("--evalrunner", "--co", "-q")
    assert collected(result) == ["test_plain.py::test_plain", "evals/regression/a.yaml::passing"]
    # A suite in a directory pytest does not walk into is collected all the same.
    pytester.makefile(".toml", evalrunner='[eval]\nsuite_dir = "build/evals"\n')
    result = run("--evalrunner", "--co", "-q")
    assert collected(result) == ["test_plain.py::test_plain", "build/evals/b.json::failing"]


LIVE = """\
name: live_only
turns:
  - user_input: say hi
expects:
  response_contains: [hi]
"""


def test_a_live_case_is_skipped_not_passed(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING, "live.yaml": LIVE}, "evals/regression")
    result = run("--evalrunner", "-q", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*live case (its turns script no steps): not run in replay*"])


def test_the_default_suite_is_evals_regression(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING}, "evals/regression")
    result = run("--evalrunner", "-q")
    result.assert_outcomes(passed=1)


# --- admission errors are collection errors ---------------------------------------------------

BROKEN = {
    "bad.yaml": 'name: "bad\\rname"\nturns: []\nexpects: {}\nextra: 1\n',
    "dup1.json": FAILING,
    "dup2.json": FAILING,
    "ok.yaml": PASSING,
    "trailing.json": '{"name": "x",}',
}


def test_admission_errors_are_collection_errors_with_every_position(
    pytester: pytest.Pytester,
    run: Runner,
) -> None:
    write_suite(pytester.path, BROKEN)
    (pytester.path / "suite" / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    validated = CliRunner().invoke(app, ["validate", "suite"], env={})
    assert validated.exit_code == 2
    problems = [line for line in validated.stderr.splitlines() if line.startswith("suite/")]
    assert len(problems) >= 7  # four in bad.yaml, the duplicate, the comma, the encoding

    result = run("--evalrunner", "suite")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # nothing runs, as `run` runs nothing
    out = result.stdout.str()
    for problem in problems:
        assert problem in result.outlines, problem
    assert "ERROR collecting suite/bad.yaml" in out
    assert "ERROR collecting suite/dup2.json" in out
    assert "ERROR collecting suite/dup1.json" not in out
    assert "suite/bad.yaml:1:7: case name " in out
    assert "\r" not in out  # the control character is shown escaped, never acted on
    assert "Traceback" not in out and "evalrunner/" not in out


def test_each_fixture_file_named_is_collected_when_two_share_a_directory(
    pytester: pytest.Pytester, run: Runner
) -> None:
    # pytest collects the directory anew for each file argument in it: the second file must
    # not be taken for one already collected (it was "not found", and under -n nothing ran).
    write_suite(pytester.path, MIXED)
    result = run("--evalrunner", "suite/a.yaml", "suite/b.json", "suite/c.toml")
    result.assert_outcomes(passed=1, failed=2)
    result = run("--evalrunner", "suite/b.json", "suite/a.yaml")
    result.assert_outcomes(passed=1, failed=1)


def test_admitted_cases_run_with_continue_on_collection_errors(
    pytester: pytest.Pytester, run: Runner
) -> None:
    write_suite(pytester.path, BROKEN)
    result = run("--evalrunner", "suite", "--continue-on-collection-errors")
    result.assert_outcomes(passed=1, failed=1, errors=3)


# --- failures ---------------------------------------------------------------------------------


def test_a_failure_shows_the_failed_checks_and_the_run_error(
    pytester: pytest.Pytester, run: Runner
) -> None:
    write_suite(pytester.path, MIXED)
    result = run("--evalrunner", "suite", "-rf")
    result.assert_outcomes(passed=1, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.re_match_lines(
        [
            r"_+ evalrunner case: failing _+",
            r"1 of 2 checks failed",
            r'    ✗ response_contains\("hi"\): not found in response: "bye"',
            r"_+ evalrunner case: erroring _+",
            r"run error: turn 1 scripted 1 response\(s\) the agent never requested",
        ]
    )
    # Only the failed check, and nothing of evalrunner's own code.
    assert "max_tool_calls" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()
    # pytest 9 adds the first line to the summary; pytest 8 shows the node id alone.
    result.stdout.fnmatch_lines(["FAILED suite/b.json::failing*"])


def test_verbose_shows_every_check_of_a_failed_case(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, {"b.json": FAILING})
    result = run("--evalrunner", "suite", "-v")
    result.stdout.fnmatch_lines(["    ✗ response_contains(*", "    ✓ max_tool_calls(0)"])


# --- pytest's own options ---------------------------------------------------------------------


def test_k_selects_by_case_name_file_name_and_class(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, MIXED)

    def selected(expression: str) -> list[str]:
        result = run("--evalrunner", "suite", "--co", "-q", "-k", expression)
        return [line.split("::")[1] for line in collected(result)]

    assert selected("fail") == ["failing"]
    assert selected("toml") == ["erroring"]
    assert selected("negative") == ["failing"]
    assert selected("positive or erroring") == ["passing", "erroring"]
    assert selected("not (yaml or json)") == ["erroring"]


def test_m_selects_the_cases(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING})
    pytester.makepyfile(test_plain=A_TEST)
    result = run("--evalrunner", "suite", "test_plain.py", "-m", "evalrunner")
    result.assert_outcomes(passed=1, deselected=1)


def test_x_stops_at_the_first_failed_case(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, MIXED)
    result = run("--evalrunner", "suite", "-x")
    result.assert_outcomes(passed=1, failed=1)
    assert "erroring" not in result.stdout.str()


def test_junitxml_has_one_testcase_per_case_with_the_failure(
    pytester: pytest.Pytester, run: Runner
) -> None:
    write_suite(pytester.path, MIXED)
    run("--evalrunner", "suite", "--junitxml", "report.xml")
    cases = {c.attrib["name"]: c for c in ET.parse(pytester.path / "report.xml").iter("testcase")}
    assert set(cases) == {"passing", "failing", "erroring"}
    assert cases["passing"].find("failure") is None
    failure = cases["failing"].find("failure")
    assert failure is not None
    assert failure.attrib["message"].startswith("1 of 2 checks failed\n")
    assert 'response_contains("hi"): not found in response: "bye"' in failure.attrib["message"]
    error = cases["erroring"].find("failure")
    assert error is not None
    assert error.attrib["message"].startswith("run error: turn 1 scripted 1 response(s)")


# --- the verdicts of `evalrunner run` ---------------------------------------------------------


def test_verdicts_equal_run_on_the_bundled_suite(pytester: pytest.Pytester, run: Runner) -> None:
    shutil.copytree(REGRESSION, pytester.path / "regression")
    expected = cli_verdicts("--suite", "regression")
    assert len(expected) == len(list(REGRESSION.iterdir()))
    run("--evalrunner", "regression", "--junitxml", "report.xml")
    assert junit_verdicts(pytester.path / "report.xml") == expected


def test_verdicts_equal_run_with_failing_and_erroring_cases(
    pytester: pytest.Pytester, run: Runner
) -> None:
    suite = pytester.path / "suite"
    shutil.copytree(REGRESSION, suite)
    write_suite(pytester.path, MIXED)
    # A regression case made to fail: it expects words the reply does not hold.
    forbidden = json.loads((suite / "forbidden_tool_not_used.json").read_text("utf-8"))
    forbidden["expects"]["response_contains"] = ["words nobody says"]
    (suite / "forbidden_tool_not_used.json").write_text(json.dumps(forbidden), "utf-8")
    expected = cli_verdicts("--suite", "suite")
    assert sorted(expected.values()).count(False) == 3
    run("--evalrunner", "suite", "--junitxml", "report.xml")
    assert junit_verdicts(pytester.path / "report.xml") == expected


@pytest.mark.slow
def test_xdist_k_and_junitxml_give_the_verdicts_of_run(
    pytester: pytest.Pytester, run_in_a_process: Runner
) -> None:
    # Six interpreters: the slow tier. By default, docs/how-to/ci.md's `pytest --evalrunner
    # -n 2` (tests/test_docs_run.py) fails when the plugin breaks under xdist.
    run = run_in_a_process
    pytest.importorskip("xdist")
    shutil.copytree(REGRESSION, pytester.path / "suite")
    write_suite(pytester.path, MIXED)
    expected = cli_verdicts("--suite", "suite")
    result = run(
        "-p", "xdist", "-n", "2", "--evalrunner", "suite",
        "--junitxml", "all.xml",
    )  # fmt: skip
    result.stdout.fnmatch_lines(["*created: 2/2 workers*"])
    assert junit_verdicts(pytester.path / "all.xml") == expected
    result = run(
        "-p", "xdist", "-n", "2", "--evalrunner", "suite",
        "-k", "tool and not unknown", "--junitxml", "some.xml",
    )  # fmt: skip
    some = junit_verdicts(pytester.path / "some.xml")
    assert some == {name: passed for name, passed in expected.items() if name in some}
    assert 0 < len(some) < len(expected)
    assert all("tool" in name and "unknown" not in name for name in some)


def test_the_configured_agent_and_tools_are_used(
    pytester: pytest.Pytester, run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = pytester.path / "project"
    shutil.copytree(PYTHON_AGENT, project, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(project)
    expected = cli_verdicts()
    assert all(expected.values()) and len(expected) == 4  # the reference agent fails them all
    run("--evalrunner", "--junitxml", str(project / "r.xml"))
    assert junit_verdicts(project / "r.xml") == expected


# --- settings from the configuration and the options ------------------------------------------

TIMEOUT_CASE = """\
name: slow
turns:
  - user_input: take your time
    steps:
      - response: {type: text, content: done}
expects:
  response_contains: [done]
"""

SLOW_AGENT = """\
import time
from evalrunner import reference_agent


def make(context):
    time.sleep(30)
"""

FORGETFUL_AGENT = """\
from evalrunner import Message, ModelRequest, TextResponse
from evalrunner.boundary.tools import dispatch, tool_spec


class Forgetful:
    '''Sends each turn with only that turn's messages: history trimmed on purpose.'''

    def __init__(self, context):
        self.context = context

    def respond(self, user_input):
        history = [Message("user", user_input)]
        offered = tuple(tool_spec(t) for t in self.context.tools.values())
        while True:
            response = self.context.provider.complete(ModelRequest(tuple(history), offered))
            if isinstance(response, TextResponse):
                return response.content
            history.append(Message("assistant", "", tool_calls=response.tool_calls))
            for call in response.tool_calls:
                record = dispatch(self.context.tools, call)
                self.context.observer.on_tool_call(record)
                history.append(Message("tool", record.result, tool_call_id=call.id))
"""


RAISING_AGENT = """\
def make(context):
    return Raising()


class Raising:
    def respond(self, user_input):
        return deep_inside_the_agent()


def deep_inside_the_agent():
    raise LookupError("the agent's own bug")
"""


def test_a_failure_shows_what_the_agent_raised_with_its_traceback(
    pytester: pytest.Pytester, run: Runner
) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING})
    pytester.makepyfile(raising_agent_for_tb=RAISING_AGENT)
    pytester.makefile(
        ".toml", evalrunner='[eval]\nsuite_dir = "suite"\nagent = "raising_agent_for_tb:make"\n'
    )
    result = run("--evalrunner")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "run error: *LookupError*",
            "raised in the agent or its tools:",
            "*Traceback (most recent call last):",
            "*in deep_inside_the_agent",
            "*LookupError: the agent's own bug",
        ]
    )
    quiet = run("--evalrunner", "--tb=line")
    quiet.assert_outcomes(failed=1)
    assert "deep_inside_the_agent" not in quiet.stdout.str()
    # --tb=line's one line per failure is the fixture, the line of the case, and what failed
    quiet.stdout.fnmatch_lines(["suite/a.yaml:1: run error: the agent raised LookupError: *"])


def test_case_timeout_comes_from_config_and_option(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, {"slow.yaml": TIMEOUT_CASE})
    pytester.makepyfile(sleepy_agent_for_timeout=SLOW_AGENT)
    pytester.makefile(
        ".toml",
        evalrunner='[eval]\nsuite_dir = "suite"\nagent = "sleepy_agent_for_timeout:make"\n'
        "case_timeout_secs = 0.3\n",
    )
    result = run("--evalrunner")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["run error: timed out after 0.3s*"])
    result = run("--evalrunner", "--evalrunner-case-timeout", "0.2")
    result.stdout.fnmatch_lines(["run error: timed out after 0.2s*"])


def test_trimmed_history_comes_from_config(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, {"two.toml": (REGRESSION / "multi_turn_tool_loop.toml").read_text()})
    pytester.makepyfile(forgetful_agent_for_trim=FORGETFUL_AGENT)
    config = '[eval]\nsuite_dir = "suite"\nagent = "forgetful_agent_for_trim:Forgetful"\n'
    pytester.makefile(".toml", evalrunner=config)
    result = run("--evalrunner")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*earlier messages were dropped*"])
    pytester.makefile(".toml", evalrunner=config + "trimmed_history = true\n")
    run("--evalrunner").assert_outcomes(passed=1)


def test_agent_command_comes_from_config_and_option(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING}, "evals/regression")
    command = shlex.join([sys.executable, str(WIRE_AGENT)])
    pytester.makefile(
        ".toml", evalrunner=f"[eval]\nagent_command = {json.dumps(command + ' ok')}\n"
    )
    run("--evalrunner").assert_outcomes(passed=1)
    result = run("--evalrunner", "--evalrunner-agent-command", f"{command} exit")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["run error: *"])
    assert "boom: the agent crashed" in result.stdout.str()


def test_another_config_file_can_be_named(pytester: pytest.Pytester, run: Runner) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING}, "elsewhere")
    pytester.makefile(".toml", custom='[eval]\nsuite_dir = "elsewhere"\n')
    result = run("--evalrunner", "--evalrunner-config", "custom.toml", "-q")
    result.assert_outcomes(passed=1)


# --- hostile input: clear errors, never a traceback -------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            "[eval]\ncase_timeout_secs = -1\nbogus = 1\n",
            [
                "ERROR: evalrunner: *evalrunner.toml:2:21: eval.case_timeout_secs must be above "
                "0, got integer -1",
                "*evalrunner.toml:3:1: unknown key 'bogus' in eval*",
            ],
        ),
        ("[eval\n", ["ERROR: evalrunner: *evalrunner.toml:1:*"]),
        (
            '[eval]\nagent = "no_such_module_here:make"\n',
            [
                "ERROR: evalrunner: *evalrunner.toml:2:9: [[]eval[]] agent: "
                "no_such_module_here:make: cannot import no_such_module_here: "
                "ModuleNotFoundError*"
            ],
        ),
        (
            '[eval]\nsuite_dir = "nowhere"\n',
            ["ERROR: evalrunner: nowhere: suite directory not found"],
        ),
        (
            '[eval]\nmode = "live"\n',
            ["ERROR: evalrunner: live mode needs a model: set model in ?eval.live? (the model*"],
        ),
    ],
    ids=["bad-values", "bad-toml", "bad-agent", "no-suite", "live"],
)
def test_a_config_problem_is_a_usage_error(
    pytester: pytest.Pytester, run: Runner, config: str, expected: list[str]
) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING}, "evals/regression")
    pytester.makefile(".toml", evalrunner=config)
    result = run("--evalrunner")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(expected)
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--evalrunner-case-timeout", "-3"], "ERROR: evalrunner: --evalrunner-case-timeout: *"),
        (
            ["--evalrunner-case-timeout", "1_0"],
            "*argument --evalrunner-case-timeout: must be a decimal number of seconds*",
        ),
        (["--evalrunner-agent-command", " "], "ERROR: evalrunner: --evalrunner-agent-command: *"),
        (
            ["--evalrunner-config", "nope.toml"],
            "ERROR: evalrunner: nope.toml: config file not found",
        ),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, run: Runner, args: list[str], expected: str
) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING}, "evals/regression")
    result = run("--evalrunner", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


def test_an_empty_suite_is_a_usage_error(pytester: pytest.Pytester, run: Runner) -> None:
    (pytester.path / "evals" / "regression").mkdir(parents=True)
    result = run("--evalrunner")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: evalrunner: evals/regression: no fixtures found*"])


@pytest.mark.parametrize(
    "name",
    [b"caf\xe9.yaml", b"new\nline.yaml", b"esc\x1b[31m.yaml", "日本語 and spaces.yaml".encode()],
    ids=["latin-1", "newline", "escape", "unicode"],
)
def test_odd_file_names_run_with_escaped_ids(
    pytester: pytest.Pytester, run: Runner, name: bytes
) -> None:
    suite = write_suite(pytester.path, {"a.yaml": PASSING})
    (suite / os.fsdecode(name)).write_bytes(FAILING.replace("failing", "odd").encode())
    result = run("--evalrunner", "suite", "-v", "--junitxml", "r.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stderr.str()
    # pytest 8 splits a JUnit name at the first "[", even one in the file's name.
    verdicts = junit_verdicts(pytester.path / "r.xml")
    assert {name.rsplit("::", 1)[-1]: ok for name, ok in verdicts.items()} == {
        "passing": True,
        "odd": False,
    }
    out = result.stdout.str()
    assert "\x1b[31m.yaml" not in out and "new\nline" not in out
    shown = name.decode("utf-8", "surrogateescape")
    if shown.isprintable():
        assert f"suite/{shown}::odd FAILED" in out
    else:
        escaped = shown.encode("unicode_escape").decode().replace("\\udce9", "\\xe9")
        assert f"suite/{escaped}::odd FAILED" in out


def test_a_broken_file_with_an_odd_name_is_a_clean_collection_error(
    pytester: pytest.Pytester, run: Runner
) -> None:
    suite = write_suite(pytester.path, {"a.yaml": PASSING})
    (suite / os.fsdecode(b"caf\xe9.yaml")).write_bytes(b"name: [\n")
    result = run("--evalrunner", "suite")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting suite/caf\\xe9.yaml*", "suite/caf\\xe9.yaml:*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_the_plugin_and_discovery_agree_on_what_is_a_fixture() -> None:
    from evalrunner import pytest_plugin
    from evalrunner.fixture import load

    names = [
        "a.json",
        "a.YAML",
        "a.yml",
        "a.toml",
        "a.txt",
        ".hidden.json",
        "case.schema.json",
        "CASE.SCHEMA.JSON",
        "schema.json",
        "a.schema.yaml",
        "json",
        ".json",
        "a.",
    ]
    for name in names:
        assert pytest_plugin._is_fixture_name(name) == load._is_fixture_name(name), name


# --- the core's verdict, not one of the plugin's own (issue 23) -------------------------------

EXITING_AGENT = """\
import os

from evalrunner.agents.reference import ReferenceAgent


class Exits(ReferenceAgent):
    def respond(self, user_input):
        os._exit(0)  # ends the process with 0, which would read as a pass
"""

FLAKY_AGENT = """\
import itertools

from evalrunner.agents.reference import ReferenceAgent

RUNS = itertools.count()


class Flaky(ReferenceAgent):
    def respond(self, user_input):
        if next(RUNS) % 2:  # every other run replies what the script never said
            return "a reply the script never made"
        return super().respond(user_input)
"""

LIVE_ONLY = "name: live-only\nturns:\n  - user_input: hi\nexpects:\n  response_contains: [x]\n"


def test_an_agent_that_ends_its_process_fails_its_case_and_pytest_reports(
    pytester: pytest.Pytester, run_in_a_process: Runner
) -> None:
    run = run_in_a_process
    write_suite(pytester.path, {"a.yaml": PASSING})
    pytester.makepyfile(exiting_agent=EXITING_AGENT)
    pytester.makefile(
        ".toml", evalrunner='[eval]\nsuite_dir = "suite"\nagent = "exiting_agent:Exits"\n'
    )
    result = run("--evalrunner", "--junitxml", "report.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)  # the summary is written: the process did not end
    result.stdout.fnmatch_lines(["*run error: the agent called os._exit(0)*"])
    assert junit_verdicts(pytester.path / "report.xml") == {"passing": False}


def test_repeat_from_config_gives_the_flaky_verdict_of_run(
    pytester: pytest.Pytester, run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_suite(pytester.path, {"a.yaml": PASSING})
    pytester.makepyfile(flaky_agent=FLAKY_AGENT)
    pytester.makefile(
        ".toml", evalrunner='[eval]\nsuite_dir = "suite"\nagent = "flaky_agent:Flaky"\nrepeat = 5\n'
    )
    # pytest first: its in-process run forgets the agent's module (and its count) after it.
    outcome = run("--evalrunner")
    assert outcome.ret == pytest.ExitCode.TESTS_FAILED
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*passed 3 of 5 runs*"])
    monkeypatch.chdir(pytester.path)
    result = CliRunner().invoke(app, ["run", "--format", "json"], env={"NO_COLOR": "1"})
    assert result.exit_code == 1 and json.loads(result.stdout)["repeat"]["flaky"] == 1


def test_a_suite_whose_every_case_is_skipped_fails_as_graded_nothing(
    pytester: pytest.Pytester, run: Runner
) -> None:
    write_suite(pytester.path, {"live.yaml": LIVE_ONLY})
    pytester.makefile(".toml", evalrunner='[eval]\nsuite_dir = "suite"\n')
    result = run("--evalrunner", "--junitxml", "report.xml")
    result.assert_outcomes(skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["evalrunner: graded nothing: every selected case was skipped*"])
    # One graded case among skipped ones is a run that graded something, as for `run`.
    write_suite(pytester.path, {"a.yaml": PASSING})
    assert run("--evalrunner").ret == pytest.ExitCode.OK
