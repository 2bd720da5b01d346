"""Agent-command protocol 2: one process serves many cases, and every way the isolation between
cases, or the protocol itself, can break fails a case with a message that names it.

The agent is tests/support/persistent_agent.py: the reference loop over evalrunner's own wire
client, correct or broken on purpose. It logs one line per case it starts, so the tests can
count the processes that served a suite without looking at the clock.
"""

from __future__ import annotations

import json
import os
import pickle
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.tiers import each_once_by_default, first_by_default, slow

from evalrunner import SuiteReport, run_suite
from evalrunner.agents.command import OFFER_VARIABLE, command_agent_factory

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "tests" / "support" / "persistent_agent.py"

CASES = {
    "a_echo.yaml": """\
name: a-echo-two-turns
turns:
  - user_input: echo alpha
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c1, name: echo, arguments: {message: alpha}}]
      - response: {type: text, content: "said alpha"}
  - user_input: echo beta
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c2, name: echo, arguments: {message: beta}}]
      - response: {type: text, content: "said beta"}
expects:
  response_contains: [beta]
  exact_tool_calls: 2
  tool_results_contain:
    - {tool: echo, needle: alpha, call_index: 0}
    - {tool: echo, needle: beta, call_index: 1}
""",
    "b_text.yaml": """\
name: b-plain-text
turns:
  - user_input: say something plain
    steps:
      - response: {type: text, content: "a plain answer"}
expects:
  response_contains: [plain]
""",
    "c_unknown.yaml": """\
name: c-unknown-tool
turns:
  - user_input: call a tool that does not exist
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c9, name: nope, arguments: {}}]
      - response: {type: text, content: "that failed"}
expects:
  exact_tool_calls: 1
  tool_results_contain: [{tool: nope, needle: "Unknown tool"}]
""",
    "d_echo.yaml": """\
name: d-echo-gamma
turns:
  - user_input: echo gamma
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c3, name: echo, arguments: {message: gamma}}]
      - response: {type: text, content: "said gamma"}
expects:
  tool_results_contain: [{tool: echo, needle: gamma}]
""",
}

WIRES = ("openai", "openai-responses", "anthropic")
WIRES_AND_STREAMING = [(wire, stream) for stream in (False, True) for wire in WIRES]


def argv(wire: str, mode: str, stream: bool = False) -> list[str]:
    return [sys.executable, str(AGENT), wire, mode, *(["--stream"] if stream else [])]


class Outcome:
    """A suite run through the persistent agent: the report, and who served each case."""

    def __init__(self, report: SuiteReport, log: Path) -> None:
        self.report = report
        text = log.read_text(encoding="utf-8") if log.exists() else ""
        self.served = [tuple(line.split()) for line in text.splitlines()]

    @property
    def processes(self) -> int:
        return len({pid for pid, _ in self.served})

    def errors(self) -> list[str | None]:
        return [case.error for case in self.report.cases]


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in CASES.items():
        (suite / name).write_text(text, encoding="utf-8")
    log = tmp_path / "served.log"
    monkeypatch.setenv("PERSISTENT_AGENT_LOG", str(log))

    def go(
        wire: str,
        mode: str,
        stream: bool = False,
        timeout: float = 60,
        exit_grace: float = 5,
        cases: int = len(CASES),
    ) -> Outcome:
        """The suite's first ``cases`` cases: one when the promise is about every case alike
        (each failed case costs a process), two when it is about the next case."""
        log.unlink(missing_ok=True)
        for number, name in enumerate(CASES):
            if number >= cases:
                (suite / name).unlink(missing_ok=True)
        with command_agent_factory(
            argv(wire, mode, stream), cwd=ROOT, exit_grace=exit_grace
        ) as factory:
            report = run_suite(suite, agent_factory=factory, case_timeout=timeout)
        assert isinstance(report, SuiteReport)
        return Outcome(report, log)

    yield go


# --- a correct agent ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "stream"),
    [*WIRES_AND_STREAMING[: len(WIRES)], *first_by_default(WIRES_AND_STREAMING[len(WIRES) :])],
)
def test_one_process_serves_every_case(run: object, wire: str, stream: bool) -> None:
    outcome = run(wire, "ok", stream)  # type: ignore[operator]
    assert all(case.passed for case in outcome.report.cases), outcome.errors()
    assert len(outcome.served) == len(CASES) and outcome.processes == 1


def test_the_gated_suite_gets_the_reference_verdicts_over_one_process(tmp_path: Path) -> None:
    reference = run_suite(ROOT / "evals" / "regression")
    with command_agent_factory(argv("openai", "ok"), cwd=ROOT) as factory:
        persistent = run_suite(ROOT / "evals" / "regression", agent_factory=factory)
    assert isinstance(reference, SuiteReport) and isinstance(persistent, SuiteReport)
    assert [(c.name, c.passed, c.error) for c in persistent.cases] == [
        (c.name, c.passed, c.error) for c in reference.cases
    ]
    assert persistent.all_passed


def test_protocol_2_is_offered_to_every_command(tmp_path: Path) -> None:
    seen = tmp_path / "offer.txt"
    script = tmp_path / "offer.py"
    script.write_text(
        "import json, os, sys\nsys.stdin.readline()\n"
        f"open({str(seen)!r}, 'w').write(os.environ[{OFFER_VARIABLE!r}])\n"
        "print(json.dumps({'reply': 'a plain answer'}), flush=True)\n",
        encoding="utf-8",
    )
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "b.yaml").write_text(CASES["b_text.yaml"], encoding="utf-8")
    with command_agent_factory([sys.executable, str(script)], cwd=ROOT) as factory:
        run_suite(suite, agent_factory=factory)
    assert seen.read_text(encoding="utf-8") == "1,2"


def test_the_factory_pickles_as_its_command() -> None:
    factory = command_agent_factory(argv("openai", "ok"), cwd=ROOT)
    copy = pickle.loads(pickle.dumps(factory))
    assert copy.argv == factory.argv and copy.cwd == factory.cwd and copy is not factory


# --- the four promised failures, on every wire, streaming and not --------------------------


@pytest.mark.parametrize(("wire", "stream"), first_by_default(WIRES_AND_STREAMING))
def test_state_leaking_into_the_next_case_fails_it(run: object, wire: str, stream: bool) -> None:
    outcome = run(wire, "leak", stream)  # type: ignore[operator]
    first, second, *_ = outcome.errors()
    assert first is None
    assert second is not None and "history message 1 should be" in second, second


@pytest.mark.parametrize(("wire", "stream"), first_by_default(WIRES_AND_STREAMING))
def test_a_crash_mid_suite_fails_that_case_and_the_next_gets_a_fresh_process(
    run: object, wire: str, stream: bool
) -> None:
    outcome = run(wire, "crash-second", stream)  # type: ignore[operator]
    errors = outcome.errors()
    assert errors[0] is None and errors[2] is None and errors[3] is None, errors
    assert errors[1] is not None
    assert errors[1].startswith(
        "the agent command exited before replying to turn 1 (it exited with code 5)"
    )
    assert errors[1].endswith("its stderr ends:\ncrashing on purpose")
    assert outcome.processes == 2


@pytest.mark.parametrize(("wire", "stream"), first_by_default(WIRES_AND_STREAMING))
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("previous-case", "naming the previous case"),
        ("other-case", 'naming case "0123456789abcdef", not this one'),
    ],
)
def test_answering_the_wrong_case_fails_it(
    run: object, wire: str, stream: bool, mode: str, message: str
) -> None:
    outcome = run(wire, mode, stream, cases=2)  # type: ignore[operator]
    errors = outcome.errors()
    failed = [error for error in errors if error is not None]
    assert failed and all(message in error for error in failed), errors
    if mode == "previous-case":
        assert errors[0] is None and errors[1] is not None


def test_never_sending_the_handshake_fails_the_case(run: object) -> None:
    # The command waits for protocol-2 lines it never asked for: only the case timeout (a
    # safety net here, not a measurement) can end it. Nothing here depends on the wire.
    outcome = run("openai", "no-handshake", timeout=0.3, cases=1)  # type: ignore[operator]
    assert all(error == "timed out after 0.3s" for error in outcome.errors()), outcome.errors()


@pytest.mark.parametrize("wire", first_by_default(WIRES))
def test_protocol_2_lines_without_the_handshake_are_not_replies(run: object, wire: str) -> None:
    outcome = run(wire, "v2-without-handshake", cases=1)  # type: ignore[operator]
    for error in outcome.errors():
        assert error is not None and "unknown field: 'case' was unexpected" in error, error


def test_the_process_outlives_a_case_the_wire_cannot_carry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Gated cases that script argument text the Anthropic wire cannot carry: the endpoint
    # refuses their request, the agent answers with an error line and ends the case cleanly,
    # and the same process serves the rest.
    log = tmp_path / "served.log"
    monkeypatch.setenv("PERSISTENT_AGENT_LOG", str(log))
    with command_agent_factory(argv("anthropic", "ok"), cwd=ROOT) as factory:
        report = run_suite(ROOT / "evals" / "regression", agent_factory=factory)
    assert isinstance(report, SuiteReport)
    errored = [case.error for case in report.cases if case.error is not None]
    assert errored and all("Anthropic" in error for error in errored), errored
    outcome = Outcome(report, log)
    assert len(outcome.served) == len(report.cases) and outcome.processes == 1


def test_an_error_line_fails_the_turn_and_the_process_serves_on(run: object) -> None:
    outcome = run("openai", 'error="the tool broke"')  # type: ignore[operator]
    failed = 'the agent command failed turn 1: "the tool broke"'
    assert outcome.errors() == [None, failed, None, None]
    assert outcome.processes == 1


# Each way of refusing (its wording, escaping, length cap) by default; the other hostile
# values in the slow tier.
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("error=17", 'printed an error line for turn 1 that is not valid: {"error": 17}'),
        slow("error=null", 'that is not valid: {"error": null}'),
        slow('error=""', "that is not valid"),
        slow('error="  "', "that is not valid"),
        slow('error={"x": 1}', "that is not valid"),
        ('error="\\u001b[2J\\u0000"', 'failed turn 1: "\\u001b[2J\\u0000"'),
        ('error="' + "x" * 100000 + '"', 'failed turn 1: "xxxxxxxx'),
        ('error-line={"case": "?", "error": "x", "reply": "y"}', "naming case"),
    ],
)
def test_a_hostile_error_line_is_refused_or_shown_safely(
    run: object, line: str, message: str
) -> None:
    outcome = run("openai", line)  # type: ignore[operator]
    error = outcome.errors()[1]
    assert error is not None and message in error, error
    assert len(error) < 2000 and "\x1b" not in error and "\x00" not in error


# --- the end of a case, and the time between cases -------------------------------------------


@pytest.mark.parametrize("wire", first_by_default(WIRES))
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("extra-request", "sent a model request outside any turn (after its final reply)"),
        ("extra-stdout", "the agent command printed more after its final reply: "),
        ("exit-7", "the agent command exited with code 7 after its final reply"),
        ("bad-ack", "the agent command answered the end of the case with "),
        (
            "crash-on-end",
            "RuntimeError: crashing on purpose when told to end the case",  # stderr's tail
        ),
    ],
)
def test_misbehaving_after_the_final_reply_fails_the_case(
    run: object, wire: str, mode: str, message: str
) -> None:
    outcome = run(wire, mode, cases=2)  # type: ignore[operator]
    for error in outcome.errors():
        assert error is not None and message in error, error
    assert outcome.processes == 2  # a process is never reused after a failed case


def test_not_ending_the_case_in_time_kills_the_process(run: object) -> None:
    outcome = run("openai", "no-ack", exit_grace=0.3, cases=2)  # type: ignore[operator]
    for error in outcome.errors():
        assert error is not None
        assert "did not answer the end of the case within 0.3s after its final reply" in error


# Each as its own message says it: seen as the agent ends the case, before the next case
# begins, or once the process has read the next case's first line.
AFTER_STRAY = [
    ("stray-request", "sent a model request"),
    ("print-between", "'{\"stray\": \"between cases\"}'"),
    # Its exit and the end of its traceback, or the traceback caught while it is written.
    ("crash-between", "crashing on purpose after the case ended|printed a traceback on stderr"),
]


def says(error: str | None, message: str) -> bool:
    """Whether ``error`` says one of the ``|``-separated alternatives of ``message``."""
    return error is not None and any(option in error for option in message.split("|"))


@pytest.mark.parametrize("wire", first_by_default(WIRES))
@pytest.mark.parametrize(("mode", "message"), AFTER_STRAY)
def test_what_a_process_does_after_ending_a_case_fails_that_case(
    run: object, wire: str, mode: str, message: str
) -> None:
    # The agent misbehaves at once after its "ended" line, racing the next case's start:
    # whoever wins, the case it ended fails, and the next case is never blamed.
    outcome = run(wire, mode)  # type: ignore[operator]
    errors = outcome.errors()
    if mode == "print-between" and errors[0] is None:
        # A line printed just before the process reads the next case's first line may be
        # read as that case's (the runner tells by the pipe's unread bytes when it reads the
        # line, and a sequential agent reads on at once): then that case fails, still red.
        assert says(errors[1], message), errors
        assert errors[2:] == [None, None], (errors, outcome.served)
        return
    assert says(errors[0], message), errors[0]
    assert errors[1:] == [None, None, None], (errors, outcome.served)
    assert outcome.processes == 2  # the process that misbehaved serves no case after the next


@pytest.fixture
def front_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Run CASES through the persistent agent on one front end of the run core: ``serial``
    (run_suite), ``jobs-2`` (forked workers: a, c on one, b, d on the other), ``one-case``
    (a suite of a alone) or ``case-verdict`` (the pytest plugin's and mutate's core call, on
    a). The reports' errors, by case name."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in CASES.items():
        (suite / name).write_text(text, encoding="utf-8")
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "a_echo.yaml").write_text(CASES["a_echo.yaml"], encoding="utf-8")
    monkeypatch.setenv("PERSISTENT_AGENT_LOG", str(tmp_path / "served.log"))
    monkeypatch.setenv("PERSISTENT_AGENT_AFTER", "echo alpha")  # after case a, everywhere

    def go(front_end: str, mode: str, exit_grace: float = 5) -> dict[str, str | None]:
        with command_agent_factory(
            argv("openai", mode), cwd=ROOT, exit_grace=exit_grace
        ) as factory:
            if front_end == "case-verdict":
                from evalrunner.execution import RunSettings
                from evalrunner.fixture.admit import admit
                from evalrunner.fixture.load import load_document
                from evalrunner.session import case_verdict

                case = admit(load_document(alone / "a_echo.yaml"))  # type: ignore[arg-type]
                assert not isinstance(case, list)
                settings = RunSettings(agent_factory=factory, case_timeout=60)
                report = case_verdict(case, settings)  # type: ignore[arg-type]
                return {report.name: report.error}
            where = alone if front_end == "one-case" else suite
            jobs = 2 if front_end == "jobs-2" else 1
            outcome = run_suite(where, agent_factory=factory, case_timeout=60, jobs=jobs)
        assert isinstance(outcome, SuiteReport)
        return {case.name: case.error for case in outcome.cases}

    yield go


FRONT_ENDS = ["serial", "jobs-2", "one-case", "case-verdict"]


# Every misbehaviour and every front end by default; each on each in the slow tier.
@pytest.mark.parametrize(
    ("mode", "message", "front_end"), each_once_by_default(AFTER_STRAY, FRONT_ENDS)
)
def test_after_ending_a_case_fails_that_case_on_every_front_end(
    front_ends: object, front_end: str, mode: str, message: str
) -> None:
    errors = front_ends(front_end, mode)  # type: ignore[operator]
    failed = errors.pop("a-echo-two-turns")
    if mode == "print-between" and failed is None:
        # Read as the next case's (see the test above): one other case fails, saying so.
        blamed = [error for error in errors.values() if error is not None]
        assert len(blamed) == 1 and says(blamed[0], message), errors
        return
    assert says(failed, message), failed
    assert all(error is None for error in errors.values()), errors


STRAY_WORDING = (
    "the agent command (protocol 2), after it ended this case, sent a model request, refused: "
    "no case is running: the agent had ended its case, so this request can only come from a "
    "finished case"
)
# Left: a request that reaches the endpoint before the runner has read the "ended" line is
# the case's conversation monitor's, worded as a request after its final reply.
MONITOR_RACE = "the agent sent a model request outside any turn (after its final reply)"


@pytest.mark.parametrize("front_end", ["serial", "one-case"])
def test_a_stray_request_reads_the_same_whenever_the_runner_sees_it(
    front_ends: object, front_end: str
) -> None:
    # Serially it is seen before the next case begins or once it read its first line; in a
    # one-case run at the end of the run, where no next case exists to speak of.
    errors = front_ends(front_end, "stray-request")  # type: ignore[operator]
    failed = errors.pop("a-echo-two-turns")
    assert failed in (STRAY_WORDING, MONITOR_RACE), failed
    assert all(error is None for error in errors.values()), errors


END_OF_RUN = [
    ("exit-at-end", "exited with code 1 after its stdin was closed at the end of the run"),
    ("traceback-at-end", "printed a traceback on stderr"),
    ("ignore-eof", "did not exit within 0.3s after its stdin was closed at the end of the run"),
]
LAST_CASES = {
    "serial": ["d-echo-gamma"],
    "jobs-2": ["c-unknown-tool", "d-echo-gamma"],  # each worker's last case
    "one-case": ["a-echo-two-turns"],
    "case-verdict": ["a-echo-two-turns"],
}


@pytest.mark.parametrize(
    ("mode", "message", "front_end"), each_once_by_default(END_OF_RUN, FRONT_ENDS)
)
def test_a_process_ending_badly_at_the_end_of_the_run_fails_its_last_case(
    front_ends: object, front_end: str, mode: str, message: str
) -> None:
    # Only the hang waits out its grace; the others get the default, so that a loaded
    # machine's slow interpreter exit is not taken for a hang.
    grace = 0.3 if mode == "ignore-eof" else 5
    errors = front_ends(front_end, mode, exit_grace=grace)  # type: ignore[operator]
    for name, error in errors.items():
        if name in LAST_CASES[front_end]:
            assert error is not None, errors
            assert error.startswith(
                "the agent command (protocol 2), after it ended this case, its last, "
            ), error
            assert message in error, error
        else:
            assert error is None, errors
    if mode == "exit-at-end":  # the traceback it printed is shown
        for name in LAST_CASES[front_end]:
            assert "broken on purpose at the end of the run" in str(errors[name])


# The clean paths on the serial front end by default (each front end's clean exits are the
# other cases of the tests above); on every front end in the slow tier.
@pytest.mark.parametrize("front_end", first_by_default(FRONT_ENDS))
def test_an_exit_0_after_ending_a_case_is_clean_and_the_next_case_gets_a_fresh_process(
    front_ends: object, front_end: str
) -> None:
    errors = front_ends(front_end, "exit-between")  # type: ignore[operator]
    assert errors and all(error is None for error in errors.values()), errors


@pytest.mark.parametrize("front_end", first_by_default(FRONT_ENDS))
def test_a_clean_exit_at_the_end_of_the_run_stays_green(
    front_ends: object, front_end: str
) -> None:
    errors = front_ends(front_end, "ok")  # type: ignore[operator]
    assert errors and all(error is None for error in errors.values()), errors


@pytest.mark.parametrize("wire", first_by_default(WIRES))
def test_a_timeout_mid_case_kills_the_process_and_the_next_case_gets_a_fresh_one(
    run: object, wire: str
) -> None:
    outcome = run(wire, "hang-second", timeout=3)  # type: ignore[operator]
    errors = outcome.errors()
    assert errors == [None, "timed out after 3s", None, None]
    assert outcome.processes == 2


def test_model_requests_before_the_handshake_fail_the_case(run: object) -> None:
    outcome = run("openai", "request-before-handshake", cases=1)  # type: ignore[operator]
    for error in outcome.errors():
        assert error is not None and "sent model requests before its handshake" in error


# --- hostile lines --------------------------------------------------------------------------


# Each way of refusing (its wording, escaping, length cap) by default; the other hostile
# values in the slow tier.
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"evalrunner": 3}', "asking for protocol 3"),
        slow('{"evalrunner": 1}', "asking for protocol 1"),
        ('{"evalrunner": "2"}', 'asking for protocol "2"'),
        slow('{"evalrunner": true}', "asking for protocol true"),
        slow('{"evalrunner": 2.0}', "asking for protocol 2.0"),
        slow('{"evalrunner": null}', "asking for protocol null"),
        slow('{"evalrunner": [2]}', "asking for protocol [2]"),
        slow('{"evalrunner": 1e400}', "asking for protocol Infinity"),
        slow('{"evalrunner": ' + "9" * 5000 + "}", "not a reply line"),
        slow('{"evalrunner": 2' + "0" * 300 + "}", "asking for protocol 2000"),
        ('{"evalrunner": "\\u0000\\u001b[31m"}', 'asking for protocol "\\u0000\\u001b[31m"'),
        ('{"evalrunner": 2, "resume": true}', 'unknown field(s) ["resume"]'),
        slow('{"evalrunner": 2, "evalrunner": 2}', "not a reply line"),
        slow('{"evalrunner": NaN}', "not a reply line"),
        slow('"evalrunner"', "not a reply line"),
        ("{" * 100000, "not a reply line"),
    ],
)
def test_a_bad_handshake_is_refused_with_a_clear_error(
    run: object, line: str, message: str
) -> None:
    outcome = run("openai", f"handshake={line}", cases=1)  # type: ignore[operator]
    for error in outcome.errors():
        assert error is not None and error.startswith("the agent command "), error
        assert message in error and "Traceback" not in error, error
        assert "\x1b" not in error and "\x00" not in error


# Each way of refusing (its wording, escaping, length cap) by default; the other hostile
# values in the slow tier.
@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("null", 'without "case"'),
        ("17", "naming case 17, not this one"),
        slow('["a"]', 'naming case ["a"], not this one'),
        slow('{"case": 1}', 'naming case {"case": 1}, not this one'),
        ('"\\u0000\\u001b[2J"', 'naming case "\\u0000\\u001b[2J", not this one'),
        ('"' + "x" * 100000 + '"', 'naming case "xxxxxxxx'),
        slow("true", "naming case true, not this one"),
    ],
)
def test_a_hostile_case_token_in_a_reply_is_refused(run: object, token: str, message: str) -> None:
    outcome = run("openai", f"case={token}", cases=1)  # type: ignore[operator]
    for error in outcome.errors():
        assert error is not None and message in error, error
        assert len(error) < 2000 and "\x1b" not in error


def test_a_reply_without_its_case_is_refused(run: object) -> None:
    outcome = run("anthropic", "no-case", cases=1)  # type: ignore[operator]
    for error in outcome.errors():
        assert error is not None and 'printed a reply line for turn 1 without "case"' in error


# --- processes end with the run ------------------------------------------------------------


def no_process_left(marker: str) -> bool:
    """True once no process whose command line holds ``marker`` is left (waits a little)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        if not found.stdout.strip():
            return True
        time.sleep(0.05)
    return False


def test_a_process_that_ignores_its_stdin_closing_is_ended_and_fails_its_last_case(
    run: object,
) -> None:
    outcome = run("openai", "ignore-eof", exit_grace=0.3)  # type: ignore[operator]
    *others, last = outcome.errors()
    assert others == [None, None, None] and outcome.processes == 1
    assert last is not None and "did not exit within 0.3s" in last, last
    assert no_process_left(f"{AGENT} openai ignore-eof")


def test_a_dropped_factory_ends_its_processes(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "b.yaml").write_text(CASES["b_text.yaml"], encoding="utf-8")
    factory = command_agent_factory(argv("anthropic", "ignore-eof"), cwd=ROOT, exit_grace=0.3)
    report = run_suite(suite, agent_factory=factory)
    assert isinstance(report, SuiteReport) and not report.all_passed
    del factory, report
    assert no_process_left(f"{AGENT} anthropic ignore-eof")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_command_line_ends_every_process_at_the_end_of_the_run(
    tmp_path: Path, jobs: str
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in CASES.items():
        (suite / name).write_text(text, encoding="utf-8")
    log = tmp_path / "served.log"
    marker = f"ignore-eof-jobs-{jobs}"
    command = shlex.join(argv("openai", "ignore-eof")) + f" {marker}"
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", "run", "--suite", str(suite), "--agent-command",
         command, "--jobs", jobs, "--format", "json", "--agent-exit-grace-secs", "0.3"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PERSISTENT_AGENT_LOG": str(log)},
    )
    # The processes ignore their stdin closing: each one's last case fails, and the run.
    assert done.returncode == 1, done.stdout + done.stderr
    cases = json.loads(done.stdout)["cases"]
    hung = [case["name"] for case in cases if not case["passed"]]
    assert hung == (["d-echo-gamma"] if jobs == "1" else ["c-unknown-tool", "d-echo-gamma"])
    assert all("did not exit within 0.3s" in case["error"] for case in cases if case["error"])
    served = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
    workers = {parent for _, parent in served}
    agents = {pid for pid, _ in served}
    # One process per worker, never shared: each agent process has one parent.
    assert len(agents) == len(workers) <= int(jobs)
    assert no_process_left(marker)


@pytest.mark.parametrize("sig", first_by_default([signal.SIGINT, signal.SIGTERM]))
def test_a_signal_ends_the_persistent_processes(tmp_path: Path, sig: signal.Signals) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in CASES.items():
        (suite / name).write_text(text, encoding="utf-8")
    log = tmp_path / "served.log"
    marker = f"hang-second-signal-{int(sig)}"
    command = shlex.join(argv("openai", "hang-second")) + f" {marker}"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evalrunner",
            "run",
            "--suite",
            str(suite),
            "--agent-command",
            command,
            "--case-timeout",
            "100",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PERSISTENT_AGENT_LOG": str(log)},
    )
    deadline = time.monotonic() + 60
    # The second case has begun on the one process: it hangs there until the signal.
    while len(log.read_text(encoding="utf-8").splitlines() if log.exists() else []) < 2:
        assert time.monotonic() < deadline, "the second case never started"
        time.sleep(0.05)
    process.send_signal(sig)
    process.communicate(timeout=60)
    assert process.returncode == 128 + sig
    assert no_process_left(marker)


class _GatedFactory:
    """The command factory, holding the third case between its agent's construction (the
    endpoint attached to the case) and its first line: the agent's request after ending the
    second case is let go exactly then, and arrives before the line is written. (The third:
    the process has taken a leased case's first line before.)"""

    def __init__(self, factory: object, gate: Path) -> None:
        self._factory = factory
        self._gate = gate
        self._built = 0

    def __call__(self, context: object) -> object:
        agent = self._factory(context)  # type: ignore[operator]
        self._built += 1
        if self._built == 3:
            (self._gate / "go").touch()
            deadline = time.monotonic() + 60  # a safety net, not a measurement
            while not (self._gate / "done").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return agent

    def settle_cases(self) -> None:
        self._factory.settle_cases()  # type: ignore[attr-defined]


def test_a_request_after_ended_that_comes_before_the_next_line_is_the_ended_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window between the next case's attaching and its first line being written: a
    # request in it once passed the ended case and was served as the next case's.
    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv("PERSISTENT_AGENT_GATE", str(gate))
    monkeypatch.setenv("PERSISTENT_AGENT_LOG", str(tmp_path / "served.log"))
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("a_echo.yaml", "b_text.yaml", "c_unknown.yaml"):
        (suite / name).write_text(CASES[name], encoding="utf-8")
    monkeypatch.setenv("PERSISTENT_AGENT_AFTER", "say something plain")  # after case b
    with command_agent_factory(argv("openai", "stray-request"), cwd=ROOT) as factory:
        gated = _GatedFactory(factory, gate)
        report = run_suite(suite, agent_factory=gated, case_timeout=60)
    assert isinstance(report, SuiteReport)
    assert (gate / "done").exists()
    errors = [case.error for case in report.cases]
    assert errors[1] is not None and "sent a model request" in errors[1], errors
    assert errors[0] is None and errors[2] is None, errors
