"""Adversarial tests of ``evalrunner record``: each test is a minimal reproduction of a broken
promise of the README's "Recording live runs as fixtures" section (or of the record issue).
Each failed on the code before its fix; each says what is expected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support.live_project import KEY, TEXT
from support.model_server import ModelServer, Reply
from test_record import CALL, LIVE_CASE, cli, project, record, written

from evalrunner.model import TextResponse, ToolCall, ToolCallsResponse

HELLO = TextResponse("hello", 3, 3)


def echo_call(arguments: str, call_id: str = "c1", name: str = "echo") -> ToolCallsResponse:
    return ToolCallsResponse((ToolCall(call_id, name, arguments),), 2, 2)


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


# --- hostile model output: a crash instead of a clear outcome --------------------------------


def test_a_lone_surrogate_in_a_reply_is_not_a_traceback(tmp_path: Path) -> None:
    # The server sends "hello \ud800" as a JSON escape; the live run passes (the reply holds
    # "hello"). The recording cannot be UTF-8: it must be refused with a reason, not crash.
    reply = TextResponse("hello \ud800 from the model", 3, 3)
    with ModelServer("openai", [Reply(CALL), Reply(reply)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = record(cwd)
    no_traceback(done)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not recorded  live_echo" in done.stdout
    assert written(cwd) == []


def test_a_lone_surrogate_in_tool_arguments_is_not_a_traceback(tmp_path: Path) -> None:
    call = echo_call('{"message": "hi \\udc00"}')
    with ModelServer("openai", [Reply(call), Reply(HELLO)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = record(cwd)
    no_traceback(done)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "live_echo" in done.stdout


def test_deeply_nested_tool_arguments_are_not_a_traceback(tmp_path: Path) -> None:
    # 500 levels parse (json's C scanner), then Redactor.value recurses in Python and dies.
    depth = 500
    call = echo_call('{"message": "hi", "x": ' + "[" * depth + "]" * depth + "}")
    with ModelServer("openai", [Reply(call), Reply(HELLO)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = record(cwd)
    no_traceback(done)
    assert "RecursionError" not in done.stderr
    assert "live_echo" in done.stdout, done.stdout + done.stderr[-500:]


# --- output paths: what must be refused before any request, and never replaced -----------------


def test_an_out_through_a_symlink_does_not_replace_the_live_case(tmp_path: Path) -> None:
    # `recorded` -> `evals`: recorded/live_echo.yaml IS evals/live_echo.yaml. The check compares
    # abspath (not realpath) with the case's source, so --overwrite replaces the live case.
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        os.symlink("evals", cwd / "recorded")
        done = record(cwd, "--overwrite")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "is the live case itself" in done.stderr
        assert server.seen == []
    assert (cwd / "evals" / "live_echo.yaml").read_text("utf-8") == LIVE_CASE


def test_an_out_that_lands_on_another_live_case_is_refused(tmp_path: Path) -> None:
    # evals/a.yaml records to evals/sub/a.yaml, which is the live case evals/sub/a.yaml.
    other = LIVE_CASE.replace("live_echo", "live_sub")
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)] * 2) as server:
        cwd = project(tmp_path, "openai", server.base_url, a=LIVE_CASE)
        (cwd / "evals" / "sub").mkdir()
        (cwd / "evals" / "sub" / "a.yaml").write_text(other, encoding="utf-8")
        done = cli(cwd, "record", "--out", "evals/sub", "--overwrite")
        assert done.returncode == 2, done.stdout + done.stderr
        assert server.seen == []
    assert (cwd / "evals" / "sub" / "a.yaml").read_text("utf-8") == other


def test_an_out_that_cannot_be_made_is_refused_before_any_request(tmp_path: Path) -> None:
    # README: the output paths are refused "before any request is sent". An --out whose
    # parent is a file cannot hold a fixture; prepare_output only runs after the live run.
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        (cwd / "afile").write_text("", "utf-8")
        done = cli(cwd, "record", "--out", "afile/sub")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "afile is not a directory" in done.stderr
        assert server.seen == [], f"{len(server.seen)} live request(s) were sent first"


FILE_APPEARS = """\
from pathlib import Path
from evalrunner.agents.reference import reference_agent

class Agent:
    def __init__(self, context):
        self.inner = reference_agent(context)

    def respond(self, user_input):
        target = Path("recorded") / "live_echo.yaml"
        if not target.exists():  # another `record` to the same --out got there first
            target.parent.mkdir(exist_ok=True)
            target.write_text("precious\\n")
        return self.inner.respond(user_input)

def make(context):
    return Agent(context)
"""


def test_a_fixture_that_appears_during_the_run_is_not_replaced_without_overwrite(
    tmp_path: Path,
) -> None:
    # Two `record` runs to the same --out (or anyone writing there meanwhile): the "already
    # exists" check is made once, before the run; the write then replaces whatever is there.
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, 'agent = "appears:make"')
        (cwd / "appears.py").write_text(FILE_APPEARS, encoding="utf-8")
        done = record(cwd)
    assert (cwd / "recorded" / "live_echo.yaml").read_text("utf-8") == "precious\n", (
        done.stdout + done.stderr
    )
    assert done.returncode != 0


EDITS_ITS_CASE = """\
from pathlib import Path
from evalrunner.agents.reference import reference_agent

class Agent:
    def __init__(self, context):
        self.inner = reference_agent(context)

    def respond(self, user_input):
        source = Path("evals") / "live_echo.yaml"
        source.write_text(source.read_text().replace("name: live_echo", "name: renamed"))
        return self.inner.respond(user_input)

def make(context):
    return Agent(context)
"""


def test_a_live_case_edited_during_its_run_is_not_recorded_under_another_name(
    tmp_path: Path,
) -> None:
    # record_case re-reads the case's file after the run and builds the fixture from what is
    # there now; only a file that no longer loads counts as "changed during the run". The
    # line says one case was recorded, the file holds another.
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, 'agent = "edits:make"')
        (cwd / "edits.py").write_text(EDITS_ITS_CASE, encoding="utf-8")
        done = record(cwd)
    said = done.stdout.splitlines()[0]
    files = written(cwd)
    if files:
        text = files[0].read_text("utf-8")
        assert "recorded      live_echo" in said and "name: live_echo" in text, (said, text)
    else:
        assert "changed during the run" in said, said


# --- the key in a written fixture ------------------------------------------------------------


def test_the_key_as_json_escapes_in_verbatim_arguments_is_struck(tmp_path: Path) -> None:
    # Arguments with a key given twice are kept as the model's exact text (README). That text
    # is JSON: "\u0073\u006b..." IS the key to any reader (and to the agent, which decodes
    # it), but strike_key only looks for the key's literal characters.
    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY)
    call = echo_call('{"message": "' + escaped + '", "message": "hi"}')
    # It cannot be struck from the exact text, so the case is not recorded, and says why.
    with ModelServer("openai", [Reply(call), Reply(HELLO)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = record(cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "holds, written in JSON escapes, text that is struck from recordings" in done.stdout
    assert written(cwd) == []
    assert KEY not in done.stdout + done.stderr


# --- passing runs refused: arguments written as objects that cannot be admitted ---------------


@pytest.mark.parametrize(
    "arguments",
    [
        '{"message": "hi", "n": 99999999999999999999}',  # 20 digits: JSON, not 64-bit
        '{"message": "hi", "x": ' + "[" * 70 + "]" * 70 + "}",  # deeper than MAX_DEPTH 64
    ],
    ids=["integer-over-64-bits", "nesting-over-64"],
)
def test_arguments_that_admit_only_as_text_are_kept_as_text(tmp_path: Path, arguments: str) -> None:
    # The live run passes; _arguments turns the text into an object the fixture cannot hold,
    # so the recording is refused ("change the live case ...") though keeping the model's exact
    # text, as for 1.0e2 or a key given twice, would admit and replay green.
    with ModelServer("openai", [Reply(echo_call(arguments)), Reply(HELLO)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = record(cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.name for p in written(cwd)] == ["live_echo.yaml"]


def test_a_target_that_is_a_directory_is_refused_before_any_request(tmp_path: Path) -> None:
    # recorded/live_echo.yaml is a directory: with --overwrite it passes the pre-run check
    # (lexists), the live run is paid for, and only then write_atomic refuses it (exit 2).
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        (cwd / "recorded" / "live_echo.yaml").mkdir(parents=True)
        done = record(cwd, "--overwrite")
        assert done.returncode == 2, done.stdout + done.stderr
        assert server.seen == [], f"{len(server.seen)} live request(s) were sent first"


# --- striking the key -------------------------------------------------------------------------


def test_striking_a_long_key_finds_every_piece_in_one_pass() -> None:
    # OpenAI project keys are ~164 characters; every piece of 8 or more is struck, wherever
    # it is, and strings that hold none are left as they are.
    from evalrunner.redact import REDACTED, Redactor, strike_key

    key = "sk-proj-" + "".join(f"{n:02d}xY" for n in range(40))
    redactor = Redactor().striking(lambda text: strike_key(text, key))
    value = {"items": [f"word{i}" for i in range(5000)], key[10:30]: f"a{key}b{key[50:58]}c"}
    out = redactor.value(value, keys=True)
    assert isinstance(out, dict)
    assert out["items"] == value["items"]
    assert out[REDACTED] == f"a{REDACTED}b{REDACTED}c"
    assert strike_key(key[:7] + " " + key[100:107], key) == key[:7] + " " + key[100:107]
    assert strike_key("EMPTY and EMPTY", "EMPTY") == "EMPTY and EMPTY"  # not a secret


def test_overwrite_never_writes_through_a_link_that_leads_outside_out(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("precious: true\n", encoding="utf-8")
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        (tmp_path / "p").mkdir()
        cwd = project(tmp_path / "p", "openai", server.base_url)
        (cwd / "recorded").mkdir()
        os.symlink(outside, cwd / "recorded" / "live_echo.yaml")
        done = record(cwd, "--overwrite")
        no_traceback(done)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "leads outside it" in done.stderr and "recording writes only under --out" in (
            done.stderr
        )
        assert server.seen == []
    assert outside.read_text("utf-8") == "precious: true\n"


def test_overwrite_never_writes_through_a_linked_directory_outside_out(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with ModelServer("openai", [Reply(CALL), Reply(TEXT)]) as server:
        (tmp_path / "p").mkdir()
        cwd = project(tmp_path / "p", "openai", server.base_url)
        (cwd / "evals" / "inner").mkdir()
        (cwd / "evals" / "live_echo.yaml").rename(cwd / "evals" / "inner" / "live_echo.yaml")
        (cwd / "recorded").mkdir()
        os.symlink(elsewhere, cwd / "recorded" / "inner")
        done = record(cwd, "--overwrite")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "leads outside it" in done.stderr
    assert list(elsewhere.iterdir()) == []
