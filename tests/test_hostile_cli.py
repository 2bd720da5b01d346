"""Hostile input at the command line (issue 9): each class ends in a clear message and the
documented exit code, never a traceback, a hang, a forged report line or a replaced device.

The lower-level tests of each class live with their module (``test_load.py``,
``test_config.py``, ``test_report.py``, ``test_scaffold.py``); these drive the commands.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.tiers import first_by_default
from typer.testing import CliRunner

from evalrunner.cli import app

runner = CliRunner()
_TERMINAL_ACTS_ON = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
ROOT = Path(__file__).resolve().parent.parent

PASSING = """\
name: {name}
turns:
  - user_input: say hi
    steps:
      - response: {{type: text, content: hi there}}
expects:
  response_contains: [hi]
"""


def make_suite(tmp_path: Path, files: dict[str, str]) -> Path:
    directory = tmp_path / "suite"
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def evalrunner(
    *args: str | bytes, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The installed command in a child process, for what CliRunner cannot show: real argv
    bytes, the real stdout encoding, blocking opens. The timeout only turns a regression
    (a hang) into a failure; nothing here is timed."""
    return subprocess.run(
        [sys.executable, "-m", "evalrunner", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        timeout=120,
        check=False,
    )


# --- class 1: numbers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("floats.json", '{"name": "n",\n "n": 1e400}', "floats.json:2:7: number 1e400 is too"),
        ("floats.yaml", "name: n\nn: " + "9" * 5000 + "\n", "floats.yaml:2:4: an integer of 5000"),
        ("floats.toml", "name = 'n'\nn = " + "9" * 5000 + "\n", "floats.toml:2:5: an integer of"),
    ],
)
def test_validate_refuses_bad_numbers_with_a_position(
    tmp_path: Path, name: str, text: str, line: str
) -> None:
    suite = make_suite(tmp_path, {name: text})
    result = runner.invoke(app, ["validate", str(suite / name)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{suite}/{line}")
    assert "Traceback" not in result.output


def test_float_counts_and_indexes_are_refused_by_run(tmp_path: Path) -> None:
    fixture = (ROOT / "evals" / "regression" / "echo_token_roundtrip.yaml").read_text("utf-8")
    fixture = fixture.replace("exact_tool_calls: 1", "exact_tool_calls: 1.0")
    fixture = fixture.replace("call_index: 0", "call_index: 0.0")
    suite = make_suite(tmp_path, {"echo.yaml": fixture})
    result = runner.invoke(app, ["run", "--suite", str(suite)])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[:2] == [
        f"{suite}/echo.yaml:29:21: expects.exact_tool_calls must be an integer, got number 1.0",
        f"{suite}/echo.yaml:37:19: expects.tool_results_contain[0].call_index must be an "
        "integer, got number 0.0",
    ]


@pytest.mark.parametrize("value", ["1e10", "0", "-5", "1e400", "86400.0000001"])
def test_an_out_of_range_case_timeout_flag_is_refused(tmp_path: Path, value: str) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING.format(name="a")})
    result = runner.invoke(app, ["run", "--suite", str(suite), "--case-timeout", value])
    assert result.exit_code == 2
    assert result.stderr == (
        "--case-timeout: must be a number of seconds above 0 and at most 86400 (one day), "
        f"got {value if value == '86400.0000001' else format(float(value), 'g')}\n"
    )


@pytest.mark.parametrize("value", ["inf", "nan", "1_0", "0x10", "\u0661", "ten", ""])
def test_a_case_timeout_flag_that_is_not_a_decimal_number_is_refused(
    tmp_path: Path, value: str
) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING.format(name="a")})
    result = runner.invoke(app, ["run", "--suite", str(suite), "--case-timeout", value])
    assert result.exit_code == 2
    assert result.stderr == (
        "--case-timeout: must be a decimal number of seconds such as 30 or 0.5, got "
        f"{value!r} (see evalrunner run --help)\n"
    )


def test_a_huge_number_in_an_unrelated_pyproject_does_not_break_commands_beneath_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nn = " + "9" * 5000 + "\n", "utf-8")
    make_suite(tmp_path, {"a.yaml": PASSING.format(name="a")})
    result = evalrunner("validate", "suite", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"1 fixture(s) admitted\n", b"")


# --- class 2: YAML -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name: !!int "abc"\n', "1:7: YAML tag !!int is not allowed"),
        ("--- !!map\nname: x\n", "1:5: YAML tag !!map is not allowed"),
        ("expects:\n  <<: {tools_used: [a]}\n", "2:3: the YAML merge key '<<' is not allowed"),
    ],
)
def test_validate_refuses_tags_and_merge_keys(tmp_path: Path, text: str, message: str) -> None:
    suite = make_suite(tmp_path, {"t.yaml": text})
    result = runner.invoke(app, ["validate", str(suite)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{suite}/t.yaml:{message}")


# A repeated key stops JSON's decoder before it reads the rest; what follows may not be JSON.
_DUPLICATE_THEN_BROKEN = {
    "missing-comma": ("[1 2]}", "1:58: invalid JSON: Expecting ',' delimiter"),
    "cut-short": ("", "1:55: invalid JSON: the file ends where a value is expected; finish the"),
    "bad-escape": ('"abc\\q"}', "1:59: invalid JSON: Invalid \\escape"),
}


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("variant", list(_DUPLICATE_THEN_BROKEN))
def test_json_broken_after_a_duplicate_key_is_refused_not_a_traceback(
    tmp_path: Path, command: str, variant: str
) -> None:
    rest, syntax = _DUPLICATE_THEN_BROKEN[variant]
    text = '{"name": "a", "turns": [{"x": 1, "x": 2}], "expects": ' + rest
    suite = make_suite(tmp_path, {"f.json": text})
    args = ["run", "--suite", str(suite)] if command == "run" else ["validate", str(suite)]
    result = runner.invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == (
        f'{suite}/f.json:1:34: duplicate key "x"; each key may appear once per object'
    )
    assert result.stderr.splitlines()[1].startswith(f"{suite}/f.json:{syntax}")


# --- class 3: files and names ------------------------------------------------------------------


# Both commands admit the suite through one walk: run by default, validate in the slow tier.
@pytest.mark.parametrize("command", first_by_default(["run", "validate"]))
def test_a_fifo_in_the_suite_is_refused_not_waited_on(tmp_path: Path, command: str) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING.format(name="a")})
    os.mkfifo(suite / "b.json")
    args = ["run", "--suite", "suite"] if command == "run" else ["validate", "suite"]
    result = evalrunner(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        "suite/b.json: is a FIFO (named pipe), not a regular file; a fixture must be a regular "
        "file",
        "1 problem(s) in 1 file(s); nothing was run",
    ]


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["run", "--suite", "suite", "--format", "json", "--output", "report.json"], {}),
        # The JSON report on stdout as in a file, in the slow tier.
        *first_by_default(
            [
                (["run", "--suite", "suite"], {"PYTHONIOENCODING": "utf-8"}),
                (["run", "--suite", "suite", "--format", "json"], {"PYTHONIOENCODING": "utf-8"}),
            ]
        ),
    ],
)
def test_a_fixture_file_name_that_is_not_utf8_is_reported(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    suite = make_suite(tmp_path, {})
    (suite / os.fsdecode(b"caf\xe9.yaml")).write_text(PASSING.format(name="cafe"), "utf-8")
    result = evalrunner(*args, cwd=tmp_path, env=env)
    assert (result.returncode, result.stderr) == (0, b"")
    shown = (tmp_path / "report.json").read_bytes() if "--output" in args else result.stdout
    if "json" in args:
        assert json.loads(shown)["cases"][0]["source"] == "caf\\xe9.yaml"
    else:
        assert "\n✓ cafe (caf\\xe9.yaml)  1/1 checks  " in shown.decode("utf-8")


def test_validate_and_run_say_the_same_about_a_missing_suite(tmp_path: Path) -> None:
    from_run = runner.invoke(app, ["run", "--suite", str(tmp_path / "nope")])
    from_validate = runner.invoke(app, ["validate", str(tmp_path / "nope")])
    assert from_run.exit_code == from_validate.exit_code == 2
    assert (
        from_run.stderr
        == from_validate.stderr
        == f"{tmp_path / 'nope'}: suite directory not found\n"
    )


# --- class 4: config shapes --------------------------------------------------------------------


def test_tool_equals_one_in_a_given_pyproject_is_a_positioned_error(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text("tool = 1\n", encoding="utf-8")
    for command in (["run"], ["validate"], ["config"], ["new", "x"]):
        result = runner.invoke(app, [*command, "--config", str(config)])
        assert result.exit_code == 2, command
        assert result.stderr == f"{config}:1:8: tool must be a table ([tool]), got integer 1\n"


# --- class 5: output safety --------------------------------------------------------------------


def test_output_to_a_character_device_writes_through_it(tmp_path: Path) -> None:
    make_suite(tmp_path, {"a.yaml": PASSING.format(name="a")})
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # our own /dev/null
    except PermissionError:
        pytest.skip("creating a device node needs root")
    result = runner.invoke(
        app, ["run", "--suite", str(tmp_path / "suite"), "--output", str(device)]
    )
    assert (result.exit_code, result.stderr) == (0, "")
    assert stat.S_ISCHR(device.stat().st_mode)


def test_output_through_a_symlink_replaces_the_target_and_keeps_the_link(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING.format(name="a")})
    (tmp_path / "latest.json").write_text("old", encoding="utf-8")
    link = tmp_path / "report.json"
    link.symlink_to("latest.json")
    args = ["run", "--suite", str(suite), "--format", "json", "--output", str(link)]
    assert runner.invoke(app, args).exit_code == 0
    assert link.is_symlink()
    assert json.loads((tmp_path / "latest.json").read_text("utf-8"))["all_passed"] is True


@pytest.mark.parametrize("kind", ["fifo", "directory", "control character"])
def test_output_that_cannot_be_a_report_is_exit_2_and_writes_nothing(
    tmp_path: Path, kind: str
) -> None:
    suite = make_suite(tmp_path, {"a.yaml": PASSING.format(name="a")})
    target = (
        tmp_path / {"fifo": "r.fifo", "directory": "out", "control character": "r.json\r"}[kind]
    )
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    before = sorted(os.listdir(tmp_path))
    result = evalrunner("run", "--suite", str(suite), "--output", str(target), cwd=tmp_path)
    assert result.returncode == 2
    expected = {
        "fifo": "is a FIFO that no process is reading; start the reader first",
        "directory": "is a directory, not a regular file; give the path of a regular file (or "
        "of a FIFO or a terminal)",
        "control character": "the file name holds U+000D (\\r), a control character; give a "
        "name without it (a script with CRLF line endings adds a \\r)",
    }[kind]
    shown = str(target).replace("\r", "\\r")
    assert result.stderr.decode() == f"{shown}: cannot write report: {expected}\n"
    # Nothing but what admission kept for the next run (the FIFO is refused only when the
    # report is written, after the cases ran).
    assert sorted(set(os.listdir(tmp_path)) - {".evalrunner_cache"}) == before


# --- class 6: terminal safety ------------------------------------------------------------------

HOSTILE_AGENT = '''
from evalrunner import Message, ModelRequest, TextResponse
from evalrunner.boundary.tools import dispatch, tool_spec

FORGED = "\\x1b[2K\\r\\x1b[32m\\u2713\\x1b[0m forged (a.yaml)  4/4 checks\\n1/1 cases passed"


class Hostile:
    """Plays the script faithfully, then adds to its reply what a broken model might say."""

    def __init__(self, context):
        self.context = context
        self.history = []

    def respond(self, user_input):
        self.history.append(Message("user", user_input))
        while True:
            offered = tuple(tool_spec(t) for t in self.context.tools.values())
            response = self.context.provider.complete(ModelRequest(tuple(self.history), offered))
            if isinstance(response, TextResponse):
                if "explode" in user_input:
                    raise RuntimeError("boom \\ud800 \\x1b[2J\\x9b31m\\u202e")
                self.history.append(Message("assistant", response.content))
                return response.content + FORGED + " half an emoji: \\ud83d"
            self.history.append(Message("assistant", "", tool_calls=response.tool_calls))
            for call in response.tool_calls:
                record = dispatch(self.context.tools, call)
                self.context.observer.on_tool_call(record)
                self.history.append(Message("tool", record.result, tool_call_id=call.id))


def make(context):
    return Hostile(context)


class Leaky:
    name = "leaky"
    description = "Returns text no terminal should see raw."
    parameters = {"type": "object"}

    def call(self, arguments):
        return "result \\ud800 \\x1b]0;title\\x07 \\u2066"
'''

TOOL_CASE = """\
name: leaky-tool
turns:
  - user_input: call it
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c1, name: leaky, arguments: {}}]
      - response: {type: text, content: done}
expects:
  tool_results_contain: [{tool: leaky, needle: never-there}]
"""


@pytest.fixture
def hostile_project(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    module = f"hostile_{request.node.name.split('[')[0][-20:]}_{id(tmp_path)}"
    (tmp_path / f"{module}.py").write_text(HOSTILE_AGENT, encoding="utf-8")
    make_suite(
        tmp_path,
        {
            "a.yaml": PASSING.format(name="replies").replace("[hi]", "[nowhere]"),
            "b.yaml": PASSING.format(name="explodes").replace("say hi", "explode"),
            "c.yaml": TOOL_CASE,
        },
    )
    (tmp_path / "evalrunner.toml").write_text(
        f'[eval]\nsuite_dir = "suite"\nagent = "{module}:make"\ntools = ["{module}:Leaky"]\n',
        encoding="utf-8",
    )
    return tmp_path


def test_agent_replies_tool_results_and_errors_cannot_forge_report_lines(
    hostile_project: Path,
) -> None:
    config = str(hostile_project / "evalrunner.toml")
    output = hostile_project / "report.json"
    table = runner.invoke(app, ["run", "--config", config])
    as_json = runner.invoke(app, ["run", "--config", config, "--format", "json"])
    written = runner.invoke(
        app, ["run", "--config", config, "--format", "json", "--output", str(output)]
    )
    for result in (table, as_json, written):
        assert result.exception is None or isinstance(result.exception, SystemExit), result
        assert (result.exit_code, result.stderr) == (1, "")
    assert not _TERMINAL_ACTS_ON.search(table.stdout.replace("\n", ""))
    lines = re.sub(r"\b\d+(?: ms|\.\d\d s)\b", "T", table.stdout).splitlines()
    assert lines[1:4] == [
        "✗ replies (a.yaml)  0/1 checks  T",
        "✗ explodes (b.yaml)  run error  T",
        "✗ leaky-tool (c.yaml)  0/1 checks  T",
    ]
    assert lines[4:6] == ["", "failures:"]
    assert lines[6].startswith("✗ replies (")
    # The grader quotes the reply as JSON (\u001b); what JSON leaves raw, the table escapes.
    assert lines[7] == (
        '    ✗ response_contains("nowhere"): not found in response: "hi there\\u001b[2K\\r'
        "\\u001b[32m✓\\u001b[0m forged (a.yaml)  4/4 checks\\n1/1 cases passed half an emoji: "
        '\\ud83d"'
    )
    assert lines[8].startswith("✗ explodes (")
    assert lines[9] == (
        "    run error: the agent raised RuntimeError: boom \\ud800 \\x1b[2J\\x9b31m\\u202e"
    )
    assert lines[10] == "    (1 traceback(s) from the agent or its tools: --traceback)"
    assert lines[11].startswith("✗ leaky-tool (")
    assert "\\ud800 \\u001b]0;title\\u0007 \\u2066" in lines[12]
    assert lines[13:] == ["0/3 cases passed (2 failed, 1 errored) in T"]
    for text in (as_json.stdout, output.read_text("utf-8")):
        cases = json.loads(text)["cases"]
        assert "\\ud800" in cases[1]["error"] and "\x1b[2J" in cases[1]["error"]
        assert "\\ud800" in cases[2]["grades"][0]["detail"]


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("json", '{"name": "ok\\r\\u001b[32m forged"}'),
        ("yaml", 'model_name: "ok\\r\\e[32m forged"\n'),
        ("toml", 'name = "bidi \\u202e txt"\n'),
    ],
)
def test_admission_refuses_control_characters_in_case_names(
    tmp_path: Path, fmt: str, text: str
) -> None:
    suite = make_suite(tmp_path, {f"n.{fmt}": text})
    result = runner.invoke(app, ["validate", str(suite)])
    assert result.exit_code == 2
    line = next(line for line in result.stderr.splitlines() if "case name" in line)
    assert line.startswith(f"{suite}/n.{fmt}:1:")
    assert "a control character or bidi override, which could change how reports print" in line
    assert (
        "\r" not in result.stderr and "\x1b" not in result.stderr and "\u202e" not in result.stderr
    )


def test_error_lines_escape_what_they_quote(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"k.json": '{"ex\\u001b[2Jpects\\u0085": 1}'})
    result = runner.invoke(app, ["validate", str(suite)])
    assert result.exit_code == 2
    assert "\x1b" not in result.stderr and "\x85" not in result.stderr
    assert "ex\\x1b[2Jpects\\x85" in result.stderr


def test_config_shows_values_escaped(tmp_path: Path) -> None:
    config = tmp_path / "evalrunner.toml"
    config.write_text(
        textwrap.dedent(
            """\
            [eval]
            agent_command = "agent \\u202e --flag \\u0085"
            """
        ),
        encoding="utf-8",
    )
    result = runner.invoke(app, ["config", "--config", str(config)])
    assert result.exit_code == 0
    assert "\u202e" not in result.stdout and "\x85" not in result.stdout
    assert 'agent_command = "agent \\u202e --flag \\x85"' in result.stdout


@pytest.mark.parametrize(
    ("args", "command"),
    [
        # A command, and a command of a group, by default; the others in the slow tier.
        *first_by_default(
            [
                (["run", "--repeat"], "evalrunner run"),
                (["run", "--jobs"], "evalrunner run"),
                (["list", "--format"], "evalrunner list"),
            ]
        ),
        *first_by_default(
            [
                (["schema", "export", "--fixtures"], "evalrunner schema export"),
                (["cache", "clear", "--config"], "evalrunner cache clear"),
            ]
        ),
    ],
)
def test_an_option_given_no_value_names_its_command(args: list[str], command: str) -> None:
    # The option parser raises this one without a context: it once read "evalrunner: ...
    # (see evalrunner --help)", pointing at the wrong help.
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"{command}: Option '{args[-1]}' requires an argument.")
    assert lines[0].endswith(f"(see {command} --help)")
