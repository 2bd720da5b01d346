"""``evalrunner run``'s report sinks and levels (issue 10 §2-3): the terminal report in
--format, --output, --json and --junit-xml beside it, paths readied (or refused) before the
run, --format github and its automatic choice under GitHub Actions, -q and -v."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from support.junit_xsd import junit_schema
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.schemas import report_validator

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()

PASSING = """\
name: passing
turns:
  - user_input: say hi
    steps:
      - response: {type: text, content: hi there}
expects:
  response_contains: [hi]
"""
FAILING = """\
name: failing
turns:
  - user_input: say hi
    steps:
      - response: {type: text, content: bye}
expects:
  max_tool_calls: 0
  response_contains: [hi]
"""
REFUSED = "name: refused\nturns: []\nexpects: {}\n"


def make_suite(tmp_path: Path, files: dict[str, str]) -> Path:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in files.items():
        (suite / name).write_text(text, encoding="utf-8")
    return suite


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["run", *args], env=env or {})
    assert result.exception is None or isinstance(result.exception, SystemExit), result
    return result.exit_code, result.stdout, result.stderr


def timeless(text: str) -> str:
    return re.sub(r"\b\d+ ms\b|\b\d+\.\d\d s\b|\b\d+ min \d+ s\b", "T", text)


# --- sinks ------------------------------------------------------------------------------------


def test_json_and_junit_files_beside_the_table_in_new_directories(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING, "b.yaml": FAILING})
    json_file = tmp_path / "reports" / "json" / "run.json"
    junit = tmp_path / "reports" / "junit" / "deeper" / "run.xml"
    code, out, err = invoke(
        "--suite", str(suite), "--json", str(json_file), "--junit-xml", str(junit)
    )
    assert (code, err) == (1, "")
    assert timeless(out).splitlines()[-1] == "1/2 cases passed (1 failed) in T"
    data = json.loads(json_file.read_text("utf-8"))
    assert list(report_validator().iter_errors(data)) == []
    assert data["agent"] == "reference"
    assert [c["path"] for c in data["cases"]] == [str(suite / "a.yaml"), str(suite / "b.yaml")]
    xml = junit.read_text("utf-8")
    junit_schema().validate(xml)
    assert f'classname="{suite / "b.yaml"}" name="failing"' in xml
    assert '<property name="agent" value="reference" />' in xml


def test_output_keeps_its_meaning_beside_the_new_sinks(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING})
    output, json_file = tmp_path / "out.json", tmp_path / "also.json"
    args = ("--suite", str(suite), "--format", "json", "--output", str(output))
    code, out, _ = invoke(*args, "--json", str(json_file))
    assert code == 0
    assert out.startswith("suite ")  # the JSON went to the file; stdout shows the table
    first = json.loads(output.read_text("utf-8"))
    second = json.loads(json_file.read_text("utf-8"))
    assert {**first, "duration_ms": 0} == {**second, "duration_ms": 0}
    # --output without --format is the table
    code, out, _ = invoke("--suite", str(suite), "--output", str(output))
    assert output.read_text("utf-8") == out


def test_a_refused_run_writes_the_junit_file_and_no_json(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING, "z.yaml": REFUSED})
    json_file, junit = tmp_path / "r.json", tmp_path / "r" / "r.xml"
    json_file.write_text("from the previous run", encoding="utf-8")
    code, out, err = invoke(
        "--suite", str(suite), "--json", str(json_file), "--junit-xml", str(junit)
    )
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == "2 problem(s) in 1 file(s); nothing was run"
    assert json_file.read_text("utf-8") == "from the previous run"
    xml = junit.read_text("utf-8")
    junit_schema().validate(xml)
    assert f'<testcase classname="{suite / "z.yaml"}" name="admission"' in xml
    assert f"{suite / 'z.yaml'}:2:8: turns needs at least 1 item(s), got none" in xml


def test_an_interrupted_run_writes_every_file(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING, "b.yaml": TOOL_CASE})
    (tmp_path / "stopper_for_report_cli.py").write_text(STOPPER, encoding="utf-8")
    config = tmp_path / "evalrunner.toml"
    config.write_text('[eval]\ntools = ["stopper_for_report_cli:Stop"]\n', encoding="utf-8")
    json_file, junit = tmp_path / "r.json", tmp_path / "r.xml"
    code, out, _ = invoke(
        "--config",
        str(config),
        "--suite",
        str(suite),
        "--json",
        str(json_file),
        "--junit-xml",
        str(junit),
    )
    assert code == 130
    assert out.splitlines()[-1] == (
        "run interrupted by SIGINT after 1 finished case(s); the rest did not run"
    )
    assert json.loads(json_file.read_text("utf-8"))["interrupted"] is True
    xml = junit.read_text("utf-8")
    junit_schema().validate(xml)
    assert 'name="run interrupted"' in xml and 'type="SIGINT"' in xml


TOOL_CASE = """\
name: stops
turns:
  - user_input: go
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c1, name: stop, arguments: {}}]
      - response: {type: text, content: done}
expects:
  tools_used: [stop]
"""
STOPPER = """
import multiprocessing
import os
import signal
import threading


class Stop:
    name = "stop"
    description = "Stops the run as Ctrl-C would, while its case is running."
    parameters = {"type": "object"}

    def call(self, arguments):
        # The project's tools run in the worker process the run supervises: Ctrl-C reaches
        # the run's own process, which stops the worker. (Run here, the tool signals this
        # process, whose main thread waits for this case.) The case never finishes.
        parent = multiprocessing.parent_process()
        if parent is not None:
            os.kill(parent.pid, signal.SIGINT)
        else:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        threading.Event().wait(10)
        return "stopped"
"""


# --- paths refused before the run -------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--output", "--json", "--junit-xml"])
def test_a_path_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path, flag: str) -> None:
    suite = make_suite(tmp_path, {"a.yaml": FAILING})  # would exit 1 had it run
    (tmp_path / "file").write_text("", encoding="utf-8")
    target = tmp_path / "file" / "sub" / "r"
    code, out, err = invoke("--suite", str(suite), flag, str(target))
    assert (code, out) == (2, "")
    assert err == (
        f"{target}: cannot write report: {tmp_path / 'file'} is not a directory, so no "
        "directory can be made there; give a path whose parents are directories or do not "
        "exist yet\n"
    )


def test_a_directory_is_refused_before_the_run(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": FAILING})
    code, out, err = invoke("--suite", str(suite), "--junit-xml", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == (
        f"{tmp_path}: cannot write report: is a directory, not a regular file; give the path of "
        "a regular file (or of a FIFO or a terminal)\n"
    )


def test_two_reports_to_one_file_are_refused_before_the_run(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": FAILING})
    target = tmp_path / "r.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, out, err = invoke("--suite", str(suite), "--json", str(target), "--junit-xml", str(link))
    assert (code, out) == (2, "")
    assert err == (
        f"{link}: --junit-xml names the file --json writes; give each report its own file\n"
    )
    assert not target.exists()


def test_several_reports_may_go_to_dev_null(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING})
    code, _, err = invoke("--suite", str(suite), "--json", os.devnull, "--junit-xml", os.devnull)
    assert (code, err) == (0, "")


def test_a_file_that_cannot_be_written_after_the_run_is_exit_2_and_the_rest_is_written(
    tmp_path: Path,
) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING})
    fifo = tmp_path / "nobody-reads.fifo"
    os.mkfifo(fifo)
    json_file = tmp_path / "r.json"
    code, out, err = invoke(
        "--suite", str(suite), "--junit-xml", str(fifo), "--json", str(json_file)
    )
    assert code == 2
    assert timeless(out).endswith("1/1 cases passed in T\n")  # the verdict is still shown
    assert err == (
        f"{fifo}: cannot write report: is a FIFO that no process is reading; start the reader "
        "first\n"
    )
    assert json.loads(json_file.read_text("utf-8"))["all_passed"] is True


# --- --format github ----------------------------------------------------------------------


def test_github_format_prints_annotations_then_the_table(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING, "b.yaml": FAILING})
    code, out, _ = invoke("--suite", str(suite), "--format", "github")
    assert code == 1
    lines = timeless(out).splitlines()
    assert lines[0] == (
        f"::error file={escape(suite / 'b.yaml')},line=8,col=3,title=failing::"
        'response_contains("hi"): not found in response: "bye"'
    )
    assert lines[1] == f"suite {suite} · agent reference · replay mode"
    assert lines[-1] == "1/2 cases passed (1 failed) in T"


def escape(path: Path) -> str:
    return str(path).replace("%", "%25").replace(":", "%3A").replace(",", "%2C")


def test_github_actions_chooses_the_github_format(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"b.yaml": FAILING})
    actions = {"GITHUB_ACTIONS": "true"}
    _, out, _ = invoke("--suite", str(suite), env=actions)
    assert out.startswith("::error file=")
    _, out, _ = invoke("--suite", str(suite), "--format", "table", env=actions)
    assert out.startswith("suite ")
    _, out, _ = invoke("--suite", str(suite), env={"GITHUB_ACTIONS": "false"})
    assert out.startswith("suite ")
    # The choice is for the log: --output without --format still writes the table.
    output = tmp_path / "table.txt"
    _, out, _ = invoke("--suite", str(suite), "--output", str(output), env=actions)
    assert out.startswith("::error file=")
    assert output.read_text("utf-8").startswith("suite ")


def test_github_format_annotates_a_refused_run(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"z.yaml": REFUSED})
    code, out, err = invoke("--suite", str(suite), "--format", "github")
    assert code == 2
    assert out.splitlines() == [
        f"::error file={escape(suite / 'z.yaml')},line=2,col=8,"
        "title=evalrunner%3A fixture refused::turns needs at least 1 item(s), got none",
        f"::error file={escape(suite / 'z.yaml')},line=3,col=1,"
        "title=evalrunner%3A fixture refused::expects declares no checks; add at least one "
        "check, e.g. response_contains or exact_tool_calls",
    ]
    assert len(err.splitlines()) == 3  # the usual lines on stderr too


# --- -q and -v ------------------------------------------------------------------------------


def test_quiet_and_verbose(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING, "b.yaml": FAILING})
    _, quiet, _ = invoke("--suite", str(suite), "-q")
    assert timeless(quiet).splitlines() == [
        "failures:",
        f"✗ failing ({suite / 'b.yaml'}:1)",
        '    ✗ response_contains("hi"): not found in response: "bye"',
        "1/2 cases passed (1 failed) in T",
    ]
    _, verbose, _ = invoke("--suite", str(suite), "--verbose")
    assert timeless(verbose).splitlines()[1:6] == [
        "✓ passing (a.yaml)  1/1 checks  T",
        '    ✓ response_contains("hi")',
        "✗ failing (b.yaml)  1/2 checks  T",
        '    ✗ response_contains("hi"): not found in response: "bye"',
        "    ✓ max_tool_calls(0)",
    ]
    code, out, err = invoke("--suite", str(suite), "-q", "-v")
    assert (code, out) == (2, "")
    assert err == "-q/--quiet and -v/--verbose: they ask for opposite things; give one\n"


def test_the_agent_is_named(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING})
    config = tmp_path / "evalrunner.toml"
    config.write_text(
        '[eval]\nagent = "evalrunner.agents.reference:reference_agent"\n', encoding="utf-8"
    )
    code, out, _ = invoke("--config", str(config), "--suite", str(suite), "--format", "json")
    assert code == 0
    assert json.loads(out)["agent"] == "python:evalrunner.agents.reference:reference_agent"


def test_a_hostile_case_name_stays_inside_its_annotation(tmp_path: Path) -> None:
    name = "x::warning file=a.yaml::forged,%0A::error::y"
    suite = make_suite(tmp_path, {"b.yaml": FAILING.replace("name: failing", f"name: '{name}'")})
    junit = tmp_path / "r.xml"
    code, out, _ = invoke("--suite", str(suite), "--format", "github", "--junit-xml", str(junit))
    assert code == 1
    annotations = [line for line in out.splitlines() if line.startswith("::")]
    assert annotations == [
        f"::error file={escape(suite / 'b.yaml')},line=8,col=3,"
        "title=x%3A%3Awarning file=a.yaml%3A%3Aforged%2C%250A%3A%3Aerror%3A%3Ay::"
        'response_contains("hi"): not found in response: "bye"'
    ]
    junit_schema().validate(junit.read_text("utf-8"))
