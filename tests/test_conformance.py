"""A green verdict must mean the agent works: deliberately broken agents, on every path, each
caught with a message that names the broken promise (issue 8).

Paths: Python factories (in-process), and command agents over each wire (OpenAI chat
completions, the OpenAI Responses API, Anthropic messages), streaming and not. The catalogue
of mutants (``evalrunner mutate``) is run against the gated suite on every path and must be
killed whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.tiers import first_by_default
from typer.testing import CliRunner

import evalrunner
from evalrunner import (
    AgentContext,
    Case,
    Message,
    ModelRequest,
    TextResponse,
    ToolCallRecord,
)
from evalrunner.agents.command import MAX_LINE_BYTES, command_agent_factory
from evalrunner.boundary.conformance import ConversationMonitor
from evalrunner.boundary.provider import ReplayProvider
from evalrunner.boundary.tools import dispatch, tool_spec
from evalrunner.cli import app
from evalrunner.expectations import NO_EVIDENCE
from evalrunner.fixture.admit import admit_documents
from evalrunner.fixture.load import discover, iter_documents
from evalrunner.model import (
    CaseReport,
    RunError,
    ToolCall,
    ToolCallsResponse,
    ToolSpec,
    Turn,
)
from evalrunner.mutation.mutants import IN_PROCESS, MUTANTS, PATHS
from evalrunner.mutation.runner import ProjectTools, run_mutants
from evalrunner.replay import run_case
from evalrunner.session import evaluate_case

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "tests" / "support"
CASES: dict[str, Case] = {
    case.name: case
    for case in admit_documents(iter_documents(discover(ROOT / "evals" / "regression"))).cases
}
ECHO = "echo-token-roundtrip"
MULTI_TURN = "multi-turn-tool-loop"
FAILING_CALL = "unknown-tool-reported-as-failed"
SEVERAL = "several-tool-calls-one-response"
# The Anthropic wire carries a tool call's arguments as an object: argument text that is not
# one cannot be sent (a run error), and text with its own spacing arrives re-serialised (the
# verbatim check fails honestly). The reference agent does not pass these there, so they kill
# nothing on that path.
NOT_ON_ANTHROPIC = {
    "malformed-arguments-rejected",
    "non-object-arguments-rejected",
    "string-arguments-passed-verbatim",
}


# --- Python factories ---------------------------------------------------------------------------


class Conformant:
    """A correct hand-written agent: the baseline every broken one below departs from."""

    def __init__(self, context: AgentContext) -> None:
        self.context = context
        self.history: list[Message] = []

    def ask(self) -> Any:
        return self.send(tuple(self.history))

    def send(self, messages: tuple[Message, ...]) -> Any:
        offered = tuple(tool_spec(tool) for tool in self.context.tools.values())
        return self.context.provider.complete(ModelRequest(messages, offered))

    def respond(self, user_input: str) -> str:
        self.history.append(Message("user", user_input))
        while True:
            response = self.ask()
            if isinstance(response, TextResponse):
                self.history.append(Message("assistant", response.content))
                return response.content
            self.history.append(Message("assistant", "", tool_calls=response.tool_calls))
            for call in response.tool_calls:
                record = self.run(call)
                self.report(record)
                self.history.append(Message("tool", record.result, tool_call_id=call.id))

    def run(self, call: Any) -> ToolCallRecord:
        return dispatch(self.context.tools, call)

    def report(self, record: ToolCallRecord) -> None:
        self.context.observer.on_tool_call(record)


class ConstantUser(Conformant):
    """Every request is one constant user message (the issue's first example)."""

    def ask(self) -> Any:
        return self.send((Message("user", "hello"),))


class OffersNoTools(Conformant):
    def send(self, messages: tuple[Message, ...]) -> Any:
        return self.context.provider.complete(ModelRequest(messages))


class DispatchesInReverse(Conformant):
    """Runs a batch's calls in reverse, but reports and feeds them in the model's order."""

    def respond(self, user_input: str) -> str:
        self.history.append(Message("user", user_input))
        while True:
            response = self.ask()
            if isinstance(response, TextResponse):
                self.history.append(Message("assistant", response.content))
                return response.content
            self.history.append(Message("assistant", "", tool_calls=response.tool_calls))
            records = {c.id: self.run(c) for c in reversed(response.tool_calls)}
            for call in response.tool_calls:
                self.report(records[call.id])
                self.history.append(Message("tool", records[call.id].result, tool_call_id=call.id))


class NeverFeedsBack(Conformant):
    def respond(self, user_input: str) -> str:
        self.history.append(Message("user", user_input))
        while True:
            response = self.ask()
            if isinstance(response, TextResponse):
                return response.content
            self.history.append(Message("assistant", "", tool_calls=response.tool_calls))
            for call in response.tool_calls:
                self.report(self.run(call))


class Silent(Conformant):
    def report(self, record: ToolCallRecord) -> None:
        return None


class ReportsOtherArguments(Conformant):
    def run(self, call: Any) -> ToolCallRecord:
        real = dispatch(self.context.tools, type(call)(call.id, call.name, '{"message":"other"}'))
        return ToolCallRecord(call.name, call.arguments, real.result, real.success, call.id)


class DiesWithCancelledError(Conformant):
    def report(self, record: ToolCallRecord) -> None:
        super().report(record)
        raise asyncio.CancelledError


class SwallowsRefusal(Conformant):
    def respond(self, user_input: str) -> str:
        reply = super().respond(user_input)
        with contextlib.suppress(RunError):  # swallowed: the case must fail all the same
            self.ask()  # one request beyond the script
        return reply


class ReportsDictName(Conformant):
    def report(self, record: ToolCallRecord) -> None:
        bad = ToolCallRecord({"not": "text"}, record.arguments, record.result, True, record.id)  # type: ignore[arg-type]
        try:
            super().report(bad)
        except RunError:
            super().report(record)  # swallowing the refusal does not help


class ReportsNoneResult(Conformant):
    def report(self, record: ToolCallRecord) -> None:
        super().report(ToolCallRecord(record.name, record.arguments, None, True, record.id))  # type: ignore[arg-type]


class ForgetsEarlierTurns(Conformant):
    def ask(self) -> Any:
        users = [i for i, m in enumerate(self.history) if m.role == "user"]
        return self.send(tuple(self.history[users[-1] :]))


class DuplicatesAResult(Conformant):
    def ask(self) -> Any:
        tools = [m for m in self.history if m.role == "tool"]
        return self.send(tuple(self.history + tools[-1:]))


class AddsAnArgument(Conformant):
    """Passes the tool one key more than the model sent, and reports what it passed."""

    def run(self, call: Any) -> ToolCallRecord:
        changed = json.dumps({**json.loads(call.arguments), "verbose": True})
        real = dispatch(self.context.tools, type(call)(call.id, call.name, changed))
        return ToolCallRecord(call.name, changed, real.result, real.success, call.id)


class EditsResults(Conformant):
    """Rewrites every result before feeding it back, and reports what it fed back."""

    def run(self, call: Any) -> ToolCallRecord:
        real = dispatch(self.context.tools, call)
        edited = f"Result: {real.result} (edited)"
        return ToolCallRecord(real.name, real.arguments, edited, real.success, real.id)


class TruncatesResults(Conformant):
    """Feeds back the first 20 characters of a result and a marker (framing on purpose)."""

    def run(self, call: Any) -> ToolCallRecord:
        real = dispatch(self.context.tools, call)
        cut = real.result[:20] + " [truncated]" if len(real.result) > 20 else real.result
        return ToolCallRecord(real.name, real.arguments, cut, real.success, real.id)


class ReplacesResults(Conformant):
    """Feeds back text that holds nothing of the result."""

    def run(self, call: Any) -> ToolCallRecord:
        real = dispatch(self.context.tools, call)
        return ToolCallRecord(real.name, real.arguments, "done", real.success, real.id)


class HidesTheError(Conformant):
    """Feeds a tool's failure back as failed, but without saying why."""

    def run(self, call: Any) -> ToolCallRecord:
        real = dispatch(self.context.tools, call)
        text = real.result if real.success else "the tool failed"
        return ToolCallRecord(real.name, real.arguments, text, real.success, real.id)


class OffersOtherNames(Conformant):
    """Offers its tools as mcp__NAME, but runs a call to NAME all the same."""

    def send(self, messages: tuple[Message, ...]) -> Any:
        offered = tuple(
            ToolSpec(f"mcp__{tool.name}", tool.description, dict(tool.parameters))
            for tool in self.context.tools.values()
        )
        return self.context.provider.complete(ModelRequest(messages, offered))


class OffersOtherNamesButRefuses(OffersOtherNames):
    """Offers mcp__NAME and, rightly, answers a call to NAME as an unknown tool."""

    def run(self, call: Any) -> ToolCallRecord:
        return dispatch({}, call)


def run_python(agent: type[Conformant], case: str = ECHO, **options: Any) -> CaseReport:
    return evaluate_case(CASES[case], agent_factory=agent, **options)


def test_the_hand_written_baseline_passes_every_gated_case() -> None:
    for case in CASES.values():
        report = evaluate_case(case, agent_factory=Conformant)
        assert report.passed, (case.name, report.error, report.grades)


@pytest.mark.parametrize(
    ("agent", "case", "promise"),
    [
        (ConstantUser, ECHO, "the latest user message should be the turn's user_input"),
        (NeverFeedsBack, ECHO, 'the result of tool call(s) "call_1" (echo) was not fed back'),
        (Silent, ECHO, "never reported dispatching them"),
        (ReportsOtherArguments, ECHO, "but the echo tool received"),
        (DiesWithCancelledError, ECHO, "the agent raised CancelledError"),
        (SwallowsRefusal, ECHO, "requested more model responses than the fixture scripts"),
        (ReportsDictName, ECHO, "whose name is a dict; name must be the tool's name"),
        (ReportsNoneResult, ECHO, "whose result is a NoneType; result must be the result text"),
        (ForgetsEarlierTurns, MULTI_TURN, "earlier messages were dropped"),
        (DuplicatesAResult, ECHO, "two results for tool call"),
        (OffersNoTools, ECHO, "the request offers the model no tools"),
        (DispatchesInReverse, "several-tool-calls-one-response", "dispatch the calls in the order"),
        (
            AddsAnArgument,
            ECHO,
            'the echo tool received "{\\"message\\":\\"token_7f3a\\",\\"verbose\\":true}" for '
            'tool call "call_1" (echo), but the model\'s call has the arguments',
        ),
        (
            EditsResults,
            ECHO,
            'the echo tool returned "token_7f3a" for tool call "call_1" (echo), but the agent '
            'fed back "Result: token_7f3a (edited)"',
        ),
        (ReplacesResults, ECHO, "framed_results = true in [eval]"),
        (OffersOtherNames, ECHO, 'names "echo", which its model request did not offer'),
    ],
)
def test_a_broken_python_agent_errors_naming_the_promise(
    agent: type[Conformant], case: str, promise: str
) -> None:
    report = run_python(agent, case)
    assert not report.passed
    assert report.error is not None and promise in report.error, report.error
    assert "Traceback" not in report.error


class MutatingEcho:
    """Changes what it was given, nested and at the top, once it has it."""

    name = "echo"
    description = "Echoes, then edits its arguments."
    parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012

    def call(self, arguments: dict[str, Any]) -> str:
        arguments["message"]["deep"] = "mutated"
        arguments["added"] = "later"
        return "ok"


class ReportsOtherNestedArguments(Conformant):
    def run(self, call: Any) -> ToolCallRecord:
        other = '{"message":{"deep":"other"}}'
        real = dispatch(self.context.tools, type(call)(call.id, call.name, other))
        return ToolCallRecord(call.name, call.arguments, real.result, real.success, call.id)


def test_the_message_quotes_what_the_tool_received_before_it_ran() -> None:
    # The invocation log writes a call's arguments only when a message needs them: from its
    # own copy, taken before the tool ran, so a tool editing its arguments changes nothing.
    report = evaluate_case(
        CASES[ECHO], agent_factory=ReportsOtherNestedArguments, tools={"echo": MutatingEcho()}
    )
    assert report.error is not None
    assert 'but the echo tool received "{\\"message\\":{\\"deep\\":\\"other\\"}}"' in (
        report.error
    ), report.error
    assert "mutated" not in report.error and "later" not in report.error


class RaisingEcho:
    name = "echo"
    description = "Always fails."
    parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012

    def call(self, arguments: dict[str, Any]) -> str:
        raise ValueError("echo is down")


class ClaimsSuccess(Conformant):
    def report(self, record: ToolCallRecord) -> None:
        claimed = ToolCallRecord(record.name, record.arguments, record.result, True, record.id)
        super().report(claimed)


def test_a_success_reported_for_a_tool_that_raised_is_caught() -> None:
    tools = {"echo": RaisingEcho()}
    assert not run_python(Conformant, tools=tools).error  # honest: graded, and fails its checks
    report = run_python(ClaimsSuccess, tools=tools)
    assert report.error is not None
    assert 'reported tool call "call_1" (echo) as a success, but the echo tool raised' in (
        report.error
    )


def monitored(*turns: Turn) -> ConversationMonitor:
    return ConversationMonitor(ReplayProvider(turns), [t.user_input for t in turns])


ECHO_SPEC = (ToolSpec("echo", "", {"type": "object"}),)


def test_empty_argument_text_may_come_back_as_an_empty_object() -> None:
    # What the OpenAI Agents SDK, pydantic-ai and LangGraph all do with arguments "".
    call = ToolCall("z1", "echo", "")
    monitor = monitored(Turn("go", (ToolCallsResponse((call,)), TextResponse("done"))))
    monitor.begin_turn(0)
    user = Message("user", "go")
    monitor.complete(ModelRequest((user,), ECHO_SPEC))
    echoed = Message("assistant", "", tool_calls=(ToolCall("z1", "echo", "{}"),))
    result = Message("tool", "x", tool_call_id="z1")
    monitor.complete(ModelRequest((user, echoed, result), ECHO_SPEC))
    assert monitor.error is None


def test_an_empty_reply_may_be_left_out_of_the_history() -> None:
    # The Anthropic API refuses an empty text block, so agents drop an empty reply.
    monitor = monitored(Turn("one", (TextResponse(""),)), Turn("two", (TextResponse("hi"),)))
    monitor.begin_turn(0)
    monitor.complete(ModelRequest((Message("user", "one"),)))
    monitor.end_turn([])
    monitor.begin_turn(1)
    monitor.complete(ModelRequest((Message("user", "one"), Message("user", "two"))))
    assert monitor.error is None


def test_one_request_too_many_after_the_reply_is_named_as_such() -> None:
    monitor = monitored(Turn("one", (TextResponse("hi"),)))
    monitor.begin_turn(0)
    monitor.complete(ModelRequest((Message("user", "one"),)))
    retry = (Message("user", "one"), Message("system", "Please return text or call a tool."))
    with pytest.raises(RunError):
        monitor.complete(ModelRequest(retry))
    assert monitor.error == "turn 1 requested more model responses than the fixture scripts for it"


def test_an_agent_raising_keyboardinterrupt_under_the_cli_fails_its_case_only() -> None:
    class RaisesInterrupt(Conformant):
        def respond(self, user_input: str) -> str:
            raise KeyboardInterrupt

    # The command line replaces Python's SIGINT handler: a KeyboardInterrupt is then the
    # agent's own doing, not the user's Ctrl-C.
    previous = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        report = run_python(RaisesInterrupt)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert report.error == "the agent raised KeyboardInterrupt: "


def test_a_real_ctrl_c_in_library_use_still_stops_the_run() -> None:
    class RaisesInterrupt(Conformant):
        def respond(self, user_input: str) -> str:
            raise KeyboardInterrupt

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        run_case(CASES[ECHO], agent_factory=RaisesInterrupt)


def test_trimmed_history_is_an_explicit_opt_out() -> None:
    record = run_case(CASES[MULTI_TURN], agent_factory=ForgetsEarlierTurns, trimmed_history=True)
    assert record.error is None
    record = run_case(CASES[MULTI_TURN], agent_factory=ConstantUser, trimmed_history=True)
    assert record.error is not None and "user_input" in record.error


class CarriesAnotherCase(Conformant):
    """Keeps one history for all cases: each request starts with another case's turns."""

    shared: list[Message] = []  # noqa: RUF012 (shared on purpose: the broken promise)

    def __init__(self, context: AgentContext) -> None:
        super().__init__(context)
        self.history = CarriesAnotherCase.shared


class KeepsTheLatestTurnOnly(Conformant):
    """Drops every turn but the latest two (its own case's): what trimming is for."""

    def ask(self) -> Any:
        users = [i for i, m in enumerate(self.history) if m.role == "user"]
        return self.send(tuple(self.history[users[max(0, len(users) - 2)] :]))


def test_trimmed_history_never_admits_another_cases_conversation() -> None:
    CarriesAnotherCase.shared.clear()
    first = run_case(CASES[ECHO], agent_factory=CarriesAnotherCase, trimmed_history=True)
    assert first.error is None, first.error
    for name in (ECHO, MULTI_TURN):
        record = run_case(CASES[name], agent_factory=CarriesAnotherCase, trimmed_history=True)
        assert record.error is not None
        assert "which this case never held (another case's conversation?)" in record.error, (
            record.error
        )
    record = run_case(CASES[MULTI_TURN], agent_factory=KeepsTheLatestTurnOnly, trimmed_history=True)
    assert record.error is None, record.error


def test_every_public_name_resolves() -> None:
    for name in evalrunner.__all__:
        assert getattr(evalrunner, name) is not None


class WreckedWorkspace(Conformant):
    """Leaves its workspace as something that is hard to remove."""

    how = "file"

    def respond(self, user_input: str) -> str:
        reply = super().respond(user_input)
        workspace = self.context.workspace
        if self.how == "file":
            shutil.rmtree(workspace)
            workspace.write_text("not a directory any more", encoding="utf-8")
        elif self.how == "link":
            shutil.rmtree(workspace)
            workspace.symlink_to("/")
        else:
            (workspace / "locked").mkdir()
            (workspace / "locked" / "inside.txt").write_text("x", encoding="utf-8")
            (workspace / "locked").chmod(0)
        self.__class__.left = workspace  # type: ignore[attr-defined]
        return reply


@pytest.mark.parametrize("how", ["file", "link", "locked"])
def test_an_agent_that_wrecks_its_workspace_fails_nothing_and_leaves_nothing(how: str) -> None:
    agent = type("Wrecker", (WreckedWorkspace,), {"how": how})
    report = run_python(agent, "multiline-reply-no-tools")
    assert report.passed, report.error
    left: Path = agent.left  # type: ignore[attr-defined]
    assert not left.exists() and not left.is_symlink()
    assert Path("/").is_dir()  # a link to / is unlinked, never followed


def test_a_result_edited_before_feeding_back_fails_the_whole_gated_suite() -> None:
    # Every case with a tool call that returns text: none passes with the results edited.
    edited = [
        case.name
        for case in CASES.values()
        if run_python(Conformant, case.name).passed
        and any(
            r.success and r.result != "(no output)"
            for r in run_case(case, agent_factory=Conformant).tool_calls
        )
    ]
    assert edited
    for name in edited:
        report = run_python(EditsResults, name)
        assert report.error is not None and "but the agent fed back" in report.error, name


def test_framed_results_lets_an_agent_frame_or_truncate_but_not_replace() -> None:
    for agent in (EditsResults, TruncatesResults):
        report = run_python(agent, ECHO, framed_results=True)
        assert report.error is None, report.error
    report = run_python(ReplacesResults, ECHO, framed_results=True)
    assert report.error is not None
    assert "holds neither the result nor a prefix of it" in report.error, report.error


def test_framed_results_holds_a_truncated_result_to_its_beginning() -> None:
    from evalrunner.boundary.conformance import _holds_result

    long = "0123456789" * 10
    assert _holds_result(f"Result: {long}", long)
    assert _holds_result(long[:16] + "... [cut]", long)
    assert not _holds_result(long[:15] + "... [cut]", long)
    assert not _holds_result("Result: 0123456789ABC", long)
    assert _holds_result("(short)", "short")
    assert not _holds_result("(shor)", "short")  # a result shorter than the prefix: whole


EDITING_AGENT = """
from evalrunner import ToolCallRecord
from evalrunner.agents.reference import ReferenceAgent


class Editing(ReferenceAgent):
    def _dispatch(self, call):
        real = super()._dispatch(call)
        return ToolCallRecord(
            real.name, real.arguments, f"Result: {real.result} (edited)", real.success, real.id
        )
"""


@pytest.mark.parametrize("setting", ["", "framed_results = true\n", "ENV"])
def test_framed_results_is_one_config_key_and_the_json_report_shows_it(
    tmp_path: Path, setting: str
) -> None:
    (tmp_path / "editing.py").write_text(EDITING_AGENT, encoding="utf-8")
    config = tmp_path / "evalrunner.toml"
    config.write_text(
        f"[eval]\nagent = 'editing:Editing'\n{setting if setting != 'ENV' else ''}",
        encoding="utf-8",
    )
    out = tmp_path / "report.json"
    env = {"EVALRUNNER_FRAMED_RESULTS": "true"} if setting == "ENV" else {}
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--config",
            str(config),
            "--suite",
            str(ROOT / "evals" / "regression"),
            "--json",
            str(out),
        ],
        env=env,
    )
    report = json.loads(out.read_text(encoding="utf-8"))
    if not setting:
        assert result.exit_code == 1
        assert "framed_results" not in report
        assert "but the agent fed back" in result.stdout
    else:
        assert result.exit_code == 0, result.stdout
        assert report["framed_results"] is True


def test_a_framed_results_value_that_is_not_a_boolean_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["run", "--suite", str(ROOT / "evals" / "regression")],
        env={"EVALRUNNER_FRAMED_RESULTS": "maybe"},
    )
    assert result.exit_code == 2
    assert "EVALRUNNER_FRAMED_RESULTS: must be true or false, got 'maybe'" in result.stderr


def test_a_message_with_an_unknown_role_is_refused_where_it_is_built() -> None:
    with pytest.raises(ValueError, match="a Message's role is one of system, user, assistant"):
        Message("function", "hi")  # type: ignore[arg-type]

    class BuildsAFunctionMessage(Conformant):
        def ask(self) -> Any:
            return self.send((*self.history, Message("function", "x")))  # type: ignore[arg-type]

    report = run_python(BuildsAFunctionMessage)
    assert report.error is not None
    assert "a Message's role is one of system, user, assistant, tool, not 'function'" in (
        report.error
    )

    class ChangesARole(Conformant):
        def ask(self) -> Any:
            changed = Message("assistant", "x")
            object.__setattr__(changed, "role", "function")
            return self.send((*self.history, changed))

    report = run_python(ChangesARole)
    assert report.error is not None
    assert 'message 2 has the role "function"' in report.error, report.error
    assert "the assistant message" not in report.error


def test_a_failed_call_must_be_fed_back_with_the_errors_message() -> None:
    tools = {"echo": RaisingEcho()}
    assert run_python(HidesTheError, tools=tools, framed_results=True).error is not None
    report = run_python(HidesTheError, tools=tools)
    assert report.error is not None
    assert 'raised "echo is down" for tool call "call_1" (echo)' in report.error, report.error
    assert "does not hold the error's message" in report.error


class ReturnsNothing:
    name = "echo"
    description = "Returns an empty result."
    parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012

    def call(self, arguments: dict[str, Any]) -> str:
        return ""


def test_an_empty_result_may_come_back_as_a_placeholder() -> None:
    record = run_case(CASES[ECHO], agent_factory=Conformant, tools={"echo": ReturnsNothing()})
    assert record.error is None, record.error
    assert record.tool_calls[0].result == "(no output)"


def test_a_tool_the_request_did_not_offer_must_not_run() -> None:
    honest = run_python(OffersOtherNamesButRefuses, ECHO)
    assert honest.error is None, honest.error  # graded (its checks fail), not a run error
    report = run_python(OffersOtherNames, ECHO)
    assert report.error is not None
    assert '(it offered "mcp__echo")' in report.error, report.error

    # Reported as a failure, but run all the same: the tools' log shows it ran.
    class LiesAboutIt(OffersOtherNames):
        def report(self, record: ToolCallRecord) -> None:
            super().report(
                ToolCallRecord(record.name, record.arguments, record.result, False, record.id)
            )

    lying = run_python(LiesAboutIt, ECHO)
    assert lying.error is not None
    assert 'the agent ran the echo tool for tool call "call_1" (echo)' in lying.error, lying.error


class ForbidsToolCalls(Conformant):
    def send(self, messages: tuple[Message, ...]) -> Any:
        offered = tuple(tool_spec(tool) for tool in self.context.tools.values())
        return self.context.provider.complete(ModelRequest(messages, offered, tool_choice="none"))


class ForcesAnotherTool(Conformant):
    def send(self, messages: tuple[Message, ...]) -> Any:
        offered = tuple(tool_spec(tool) for tool in self.context.tools.values())
        return self.context.provider.complete(
            ModelRequest(messages, offered, tool_choice="tool", forced_tool="lookup")
        )


class ForcesTheScriptedTool(Conformant):
    def send(self, messages: tuple[Message, ...]) -> Any:
        offered = tuple(tool_spec(tool) for tool in self.context.tools.values())
        return self.context.provider.complete(
            ModelRequest(messages, offered, tool_choice="tool", forced_tool="echo")
        )


def test_a_tool_choice_that_rules_out_the_scripted_calls_is_a_run_error() -> None:
    report = run_python(ForbidsToolCalls)
    assert report.error is not None
    assert report.error.startswith(
        "turn 1, model request 1: the request's tool_choice forbids tool calls (none), yet "
        'the model\'s answer calls "call_1" (echo)'
    ), report.error
    report = run_python(ForcesAnotherTool)
    assert report.error is not None
    assert 'tool_choice forces a call to "lookup", yet the model\'s answer calls "call_1"' in (
        report.error
    )
    assert run_python(ForcesTheScriptedTool).passed
    # tool_choice none on a request answered with text is fine: only tool calls are ruled out.
    assert run_python(ForbidsToolCalls, "multiline-reply-no-tools").passed


def test_a_scripted_call_to_a_tool_never_offered_stays_legal() -> None:
    report = run_python(Conformant, FAILING_CALL)
    assert report.passed, (report.error, report.grades)


# --- command agents over the wires ----------------------------------------------------------------


def run_command(wire: str, mode: str, case: str = ECHO) -> CaseReport:
    argv = [sys.executable, str(SUPPORT / "broken_wire_agent.py"), wire, mode]
    factory = command_agent_factory(shlex.join(argv), cwd=ROOT)
    return evaluate_case(CASES[case], agent_factory=factory, case_timeout=60)


WIRES = ("openai", "openai-responses", "anthropic")


@pytest.mark.parametrize("wire", WIRES)
def test_results_fed_back_out_of_the_reported_order_are_caught(wire: str) -> None:
    # The order of the results in the next request is the only evidence of the order an
    # agent running its own tools ran them in; in process, the tools' log is.
    report = run_command(wire, "reversed-feed", SEVERAL)
    assert report.error is not None, report.grades
    assert (
        'turn 1: the agent fed back the result of tool call "call_2" (echo) before that of '
        '"call_1" (echo), but reported dispatching them in the other order'
    ) in report.error
    assert run_command(wire, "ok", SEVERAL).passed


def test_reports_must_follow_the_order_results_were_fed_back() -> None:
    calls = (ToolCall("w1", "echo", '{"message":"a"}'), ToolCall("w2", "echo", '{"message":"b"}'))
    for reported, error in ((calls[::-1], False), (calls, True)):
        monitor = monitored(Turn("go", (ToolCallsResponse(calls), TextResponse("done"))))
        monitor.begin_turn(0)
        user = Message("user", "go")
        monitor.complete(ModelRequest((user,), ECHO_SPEC))
        asked = Message("assistant", "", tool_calls=calls)
        fed = tuple(Message("tool", c.id, tool_call_id=c.id) for c in calls[::-1])
        monitor.complete(ModelRequest((user, asked, *fed), ECHO_SPEC))
        reports = [ToolCallRecord(c.name, c.arguments, c.id, True, c.id) for c in reported]
        if error:
            with pytest.raises(RunError, match='"w1" \\(echo\\), but reported dispatching'):
                monitor.end_turn(reports, None)
        else:
            monitor.end_turn(reports, None)
            assert monitor.error is None


@pytest.mark.parametrize("wire", WIRES)
def test_the_broken_agents_baseline_passes(wire: str) -> None:
    for case in (ECHO, MULTI_TURN, FAILING_CALL):
        report = run_command(wire, "ok", case)
        assert report.passed, (case, report.error, report.grades)


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("mode", "promise"),
    [
        ("duplicate-result", "two results for tool call"),
        ("unknown-result", "which the model never handed out"),
        ("crash", "was killed by SIGSEGV after its final reply"),
        ("exit-7", "exited with code 7 after its final reply"),
        ("extra-stdout", "printed more after its final reply: 'one more line'"),
    ],
)
def test_a_broken_command_agent_errors_naming_the_promise(
    wire: str, mode: str, promise: str
) -> None:
    report = run_command(wire, mode)
    assert report.error is not None and promise in report.error, report.error


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("mode", "promise"),
    [
        ("mcp-names", 'names "echo", which its model request did not offer (it offered "mcp__'),
        ("tool-choice-none", "the request's tool_choice forbids tool calls (none)"),
    ],
)
def test_a_request_that_could_not_have_made_the_scripted_calls_fails_over_the_wire(
    wire: str, mode: str, promise: str
) -> None:
    report = run_command(wire, mode)
    assert report.error is not None and promise in report.error, report.error


@pytest.mark.parametrize(
    ("wire", "promise"),
    [
        ("openai", "whether the agent ran it cannot be seen, since it reported no dispatches"),
        (
            "openai-responses",
            "whether the agent ran it cannot be seen, since it reported no dispatches",
        ),
        ("anthropic", "yet the agent fed its result back with is_error=false"),
    ],
)
def test_a_call_to_a_tool_not_offered_fails_over_the_wire_without_reports(
    wire: str, promise: str
) -> None:
    """Offering echo as mcp__echo, running echo all the same and reporting nothing: on the
    Anthropic wire the error flag shows the call ran; on the OpenAI wires nothing shows
    whether it did, and a call to a tool not offered must be seen answered as failed."""
    report = run_command(wire, "mcp-names-unreported")
    assert report.error is not None and promise in report.error, report.error
    assert 'names "echo", which its model request did not offer (it offered "mcp__echo")' in (
        report.error
    )


@pytest.mark.parametrize("wire", WIRES)
def test_over_the_wire_the_agents_report_of_results_stays_the_evidence(wire: str) -> None:
    # The runner cannot see an out-of-process tool: a result edited before it is fed back,
    # and reported as fed back, is no run error; the checks grade what the model was shown.
    report = run_command(wire, "edited-results")
    assert report.error is None, report.error


# The race is the runner's, not a wire's: one wire by default, every wire in the slow tier.
@pytest.mark.parametrize("wire", first_by_default(WIRES))
def test_an_extra_request_after_the_final_reply_fails_every_time(wire: str) -> None:
    # The verdict must not depend on timing: the runner waits for the command to exit before
    # it takes the record, and the request is refused (and remembered) before the exit.
    for _ in range(8):
        report = run_command(wire, "extra-request")
        assert report.error is not None
        assert "model request outside any turn (after its final reply)" in report.error


@pytest.mark.parametrize("wire", WIRES)
def test_reported_arguments_are_graded_not_the_script(wire: str) -> None:
    report = run_command(wire, "other-arguments")
    assert report.error is None and not report.passed
    failed = {g.check for g in report.grades if not g.passed}
    assert 'tool_arguments_contain("echo", "token_7f3a")' in failed


def test_a_lie_about_success_is_caught_by_the_anthropic_error_flag() -> None:
    report = run_command("anthropic", "lie-success", FAILING_CALL)
    assert report.error is not None
    assert "as a success, but fed its result back with is_error=true" in report.error


@pytest.mark.parametrize("wire", ["openai", "openai-responses"])
def test_a_lie_about_success_fails_the_check_on_the_openai_wires(wire: str) -> None:
    # Neither OpenAI API has an error flag to catch the lie with, so the reported success is
    # what is graded: the lie makes all_tools_succeeded(false) fail, never pass.
    report = run_command(wire, "lie-success", "malformed-arguments-rejected")
    assert report.error is None and not report.passed
    assert any(g.check == "all_tools_succeeded(false)" and not g.passed for g in report.grades)
    # A success reported for a call to a tool the request did not offer is a lie on its face.
    report = run_command(wire, "lie-success", FAILING_CALL)
    assert report.error is not None
    assert 'names "shell_exec", which its model request did not offer' in report.error
    assert "yet the agent reported it as a success" in report.error


def test_without_reports_a_check_with_no_evidence_fails_and_says_how_to_supply_it() -> None:
    argv = [sys.executable, str(SUPPORT / "wire_agent.py"), "ok"]
    factory = command_agent_factory(shlex.join(argv), cwd=ROOT)
    report = evaluate_case(CASES[ECHO], agent_factory=factory, case_timeout=60)
    details = {g.check: g.detail for g in report.grades if not g.passed}
    assert details["all_tools_succeeded(true)"] == NO_EVIDENCE["success"]
    assert details['tool_arguments_contain("echo", "token_7f3a")'] == NO_EVIDENCE["arguments"]
    assert report.error is None and not report.passed


@pytest.fixture
def no_stray_sleepers() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = subprocess.run(
            ["pgrep", "-f", "import time; time.sleep(60)"], capture_output=True, text=True
        )
        if not found.stdout.strip():
            return
        time.sleep(0.05)
    pytest.fail("a grandchild of the agent command outlived its case")


@pytest.mark.usefixtures("no_stray_sleepers")
def test_a_grandchild_holding_stdout_does_not_outlive_the_case() -> None:
    report = run_command("openai", "grandchild")
    assert report.passed, report.error


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            '{"reply": "x", "tool_calls": [{"id": "c", "name": "echo", "arguments": {}, '
            '"result": "r", "success": "yes"}]}',
            'at $.tool_calls[0].success: "yes" is not true or false',
        ),
        (
            '{"reply": "x", "tool_calls": [{"id": "c", "name": "echo", "arguments": [1, 2], '
            '"result": "r", "success": true}]}',
            "at $.tool_calls[0].arguments: [1, 2] is not an object or a string",
        ),
        ('{"reply": 3}', "at $.reply: 3 is not a string"),
        ('{"reply": "x", "extra": 1}', "at $: unknown field: 'extra' was unexpected"),
    ],
)
def test_a_malformed_reply_line_names_the_field(tmp_path: Path, line: str, problem: str) -> None:
    script = tmp_path / "agent.py"
    script.write_text(
        f"import sys\nsys.stdin.readline()\nprint({line!r}, flush=True)\n", encoding="utf-8"
    )
    factory = command_agent_factory(shlex.join([sys.executable, str(script)]), cwd=ROOT)
    report = evaluate_case(CASES["multiline-reply-no-tools"], agent_factory=factory)
    assert report.error is not None
    assert f"printed a reply line for turn 1 that is not valid: {problem}" in report.error


def test_a_command_that_closes_stdout_but_runs_on_is_named_as_such(tmp_path: Path) -> None:
    script = tmp_path / "mute.py"
    script.write_text(
        "import os, sys, time\nsys.stdin.readline()\nos.close(1)\ntime.sleep(60)\n",
        encoding="utf-8",
    )
    factory = command_agent_factory(shlex.join([sys.executable, str(script)]), cwd=ROOT)
    report = evaluate_case(CASES[ECHO], agent_factory=factory, case_timeout=60)
    assert report.error is not None
    assert report.error.startswith(
        "the agent command closed its stdout before replying to turn 1 (it was killed by SIGKILL)"
    )


def no_process_left(marker: str) -> bool:
    """True once no process whose command line holds ``marker`` is left (waits a little)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        if not found.stdout.strip():
            return True
        time.sleep(0.05)
    subprocess.run(["pkill", "-f", marker], check=False)
    return False


def test_a_timeout_in_the_stop_grace_still_ends_the_process_group(tmp_path: Path) -> None:
    # The command replies, then lingers: while the runner waits out the grace after the
    # final reply, the case times out, and the whole group must end with it.
    script = tmp_path / "linger.py"
    script.write_text(
        "import json, sys, time\nsys.stdin.readline()\n"
        'print(json.dumps({"reply": "x"}), flush=True)\ntime.sleep(60)\n',
        encoding="utf-8",
    )
    command = f"sh -c '{sys.executable} {script}; sleep 61.5'"
    factory = command_agent_factory(command, cwd=ROOT)
    report = evaluate_case(CASES["multiline-reply-no-tools"], agent_factory=factory, case_timeout=1)
    assert report.error is not None
    assert no_process_left("sleep 61.5") and no_process_left(str(script))


@pytest.mark.parametrize("sig", first_by_default([signal.SIGINT, signal.SIGTERM]))
def test_a_signal_ends_the_agent_commands_process_group(
    tmp_path: Path, sig: signal.Signals
) -> None:
    hang = tmp_path / "hang_for_signal.py"
    hang.write_text("import sys, time\nsys.stdin.readline()\ntime.sleep(62)\n", "utf-8")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "one.toml").write_bytes(
        (ROOT / "evals" / "regression" / "multiline_reply_no_tools.toml").read_bytes()
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evalrunner",
            "run",
            "--suite",
            str(suite),
            "--agent-command",
            f"{sys.executable} {hang}",
            "--case-timeout",
            "100",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = f"^{re.escape(sys.executable)} {re.escape(str(hang))}"  # the agent, not the run
    deadline = time.monotonic() + 30
    while not subprocess.run(["pgrep", "-f", started], capture_output=True).stdout:
        assert time.monotonic() < deadline, "the agent command never started"
        time.sleep(0.05)
    process.send_signal(sig)
    process.communicate(timeout=60)
    assert process.returncode == 128 + sig
    assert no_process_left(started)


@pytest.mark.parametrize(
    "line", ['{"reply": "nope", "reply": "ok"}', '{"reply": "x", "tool_calls": NaN}']
)
def test_a_reply_line_that_is_not_strict_json_is_refused(tmp_path: Path, line: str) -> None:
    script = tmp_path / "agent.py"
    script.write_text(
        f"import sys\nsys.stdin.readline()\nprint({line!r}, flush=True)\n", encoding="utf-8"
    )
    factory = command_agent_factory(shlex.join([sys.executable, str(script)]), cwd=ROOT)
    report = evaluate_case(CASES["multiline-reply-no-tools"], agent_factory=factory)
    assert report.error is not None and "not a reply line" in report.error


def test_stdout_without_newlines_is_capped_not_buffered(tmp_path: Path) -> None:
    script = tmp_path / "flood.py"
    script.write_text(
        "import sys\nsys.stdin.readline()\n"
        "while True:\n    sys.stdout.write('x' * 65536)\n    sys.stdout.flush()\n",
        encoding="utf-8",
    )
    factory = command_agent_factory(shlex.join([sys.executable, str(script)]), cwd=ROOT)
    report = evaluate_case(CASES[ECHO], agent_factory=factory, case_timeout=60)
    assert report.error is not None
    assert f"printed a line of over {MAX_LINE_BYTES} bytes for turn 1" in report.error


# --- the mutants ----------------------------------------------------------------------------


def test_the_gated_suite_kills_every_mutant_in_process() -> None:
    """The default tier's share of the matrix below: every mutant that breaks an in-process
    agent is killed on that path (the command paths have their own fast cases above)."""
    report = run_mutants(list(CASES.values()), paths=(IN_PROCESS,), first_kill=True)
    assert report.survivors == ()
    assert {o.mutant for o in report.outcomes} == {m.name for m in MUTANTS if not m.command_only}


@pytest.mark.slow
def test_the_gated_suite_kills_every_mutant_on_every_path() -> None:
    report = run_mutants(list(CASES.values()), paths=PATHS, first_kill=True)
    assert report.survivors == ()
    assert {(p, c) for p, c, _ in report.baseline_failures} == {
        ("anthropic", name) for name in NOT_ON_ANTHROPIC
    }
    ran = {(o.mutant, o.path) for o in report.outcomes}
    for mutant in MUTANTS:
        for path in PATHS:
            if not (mutant.command_only and path == IN_PROCESS):
                assert (mutant.name, path) in ran


@pytest.mark.slow
def test_streamed_wires_kill_every_mutant_too() -> None:
    report = run_mutants(list(CASES.values()), paths=WIRES, stream=True, first_kill=True)
    assert report.survivors == ()


def test_the_mutant_table_keeps_its_columns_apart_for_every_path_name() -> None:
    from evalrunner.mutation.runner import MutantOutcome, MutationReport, render_mutation

    outcomes = tuple(
        MutantOutcome(m.name, path, () if path == "anthropic" else ("echo-token-roundtrip",))
        for m in MUTANTS
        for path in PATHS
    )
    table = render_mutation(MutationReport(("echo-token-roundtrip",), PATHS, outcomes))
    header, first = table.splitlines()[:2]
    for path in PATHS:
        assert f" {path} " in header + " "  # never run into its neighbour
    # Each row's cells start where their column's name does.
    starts = [header.index(path) for path in PATHS]
    assert [first[i - 1] for i in starts] == [" "] * len(PATHS)
    assert [first[i] for i in starts] == ["k", "k", "k", "S"]


def test_mutate_exits_1_and_names_a_survivor_with_a_hint(tmp_path: Path) -> None:
    # A suite of one text-only case cannot see tool-boundary mutants.
    (tmp_path / "greeting.yaml").write_text(
        "name: greeting\nturns:\n  - user_input: hi\n    steps:\n"
        "      - response: {type: text, content: Hello there}\n"
        "expects:\n  response_contains: [Hello]\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app, ["mutate", "--suite", str(tmp_path), "--path", "in-process"], env={}
    )
    assert result.exit_code == 1, result.output
    assert re.search(r"^drops-tool-result\s+SURVIVED", result.stdout, re.M)
    assert "survivor: drops-tool-result on in-process; a case that would kill it:" in result.stdout
    assert re.search(r"^replies-without-model\s+killed \(1\)", result.stdout, re.M)
    # The hint names the tool the mutant offers, which a check can then name.
    assert (
        "survivor: offers-extra-tool on in-process; a case that would kill it: "
        "tools_not_offered: [delete_account] (the tool this mutant offers)"
    ) in result.stdout


def test_mutate_leaves_live_cases_out_rather_than_counting_them(tmp_path: Path) -> None:
    (tmp_path / "greeting.yaml").write_text(
        "name: greeting\nturns:\n  - user_input: hi\n    steps:\n"
        "      - response: {type: text, content: Hello there}\n"
        "expects:\n  response_contains: [Hello]\n",
        encoding="utf-8",
    )
    (tmp_path / "live.yaml").write_text(
        "name: live_only\nturns:\n  - user_input: hi\nexpects:\n  response_contains: [x]\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app, ["mutate", "--suite", str(tmp_path), "--path", "in-process"], env={}
    )
    # Not a baseline failure, and no kills: the live case has no script for mutants to break.
    notes = [line for line in result.stdout.splitlines() if "live_only" in line]
    assert notes == [
        "note: 'live_only' is a live case (no scripted steps), left out: mutants break "
        "scripted runs"
    ], result.output
    assert re.search(r"^replies-without-model\s+killed \(1\)", result.stdout, re.M)


def test_the_evals_readme_lists_the_catalogue_as_it_is() -> None:
    readme = (ROOT / "evals" / "README.md").read_text(encoding="utf-8")
    rows = [
        f"| `{m.name}` | {m.breaks} | {m.hint} | {'command agents' if m.command_only else 'all'} |"
        for m in MUTANTS
    ]
    table = readme.split("| mutant | the promise it breaks |", 1)[1].split("\n\n", 1)[0]
    assert table.splitlines()[2:] == rows


def test_mutate_gives_the_mutants_the_projects_tools() -> None:
    example = ROOT / "examples" / "python-agent"
    result = CliRunner().invoke(
        app,
        ["mutate", "--config", str(example / "evalrunner.toml"), "--path", "in-process"],
        env={},
    )
    # The example's cases call its own tools: with them, the reference agent passes two of
    # them, and those kill the tool-boundary mutants.
    assert re.search(r"^drops-tool-result\s+killed \(2\)", result.stdout, re.M), result.output
    assert "so it kills nothing there: failed tool_results_contain(" in result.stdout


@pytest.mark.slow
def test_a_command_mutant_serves_every_case_of_a_path_from_one_process(tmp_path: Path) -> None:
    # mutate runs each mutant's cases as `run` does, so a command mutant that takes up
    # protocol 2 serves them all: one process per mutant, not one per case.
    log = tmp_path / "pids.log"
    (tmp_path / "pidtool.py").write_text(
        "import os, sys\n"
        "class Pid:\n"
        "    name = 'pid'\n"
        "    description = 'Says which process ran it.'\n"
        "    parameters = {'type': 'object'}\n"
        "    def call(self, arguments):\n"
        f"        with open({str(log)!r}, 'a') as out:\n"
        "            out.write(f'{sys.argv[-1]} {os.getpid()}\\n')\n"
        "        return 'ok'\n",
        encoding="utf-8",
    )
    suite = tmp_path / "evals"
    suite.mkdir()
    for name in ("first", "second"):
        case = {
            "name": name,
            "turns": [
                {
                    "user_input": "Which process?",
                    "steps": [
                        {
                            "response": {
                                "type": "tool_calls",
                                "tool_calls": [{"id": "c1", "name": "pid", "arguments": {}}],
                            }
                        },
                        {"response": {"type": "text", "content": "done"}},
                    ],
                }
            ],
            "expects": {"tools_used": ["pid"]},
        }
        (suite / f"{name}.json").write_text(json.dumps(case), encoding="utf-8")
    admission = admit_documents(iter_documents(discover(suite)))
    assert admission.ok, admission.errors
    report = run_mutants(
        admission.cases, paths=("openai",), tools=ProjectTools(("pidtool:Pid",), tmp_path)
    )
    assert report.baseline_failures == () and report.baseline_broken == (), report
    pids: dict[str, set[str]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        mutant, pid = line.split()
        pids.setdefault(mutant, set()).add(pid)
    assert len(pids["reference"]) == 1, pids
    assert len(pids["feeds-wrong-result"]) == 1, pids


def test_a_command_mutant_that_fails_a_case_serves_the_next_in_protocol_2(tmp_path: Path) -> None:
    # A refused request fails that case with an error line and the process lives on, so a
    # mutant whose every case fails does not cost a process per case.
    import socket

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    lines = [
        {"turn": 1, "user_input": "hi"},
        {"case": "a1", "turn": 1, "user_input": "hi", "workspace": str(tmp_path)},
        {"case": "a1", "end": True},
        {"case": "b2", "turn": 1, "user_input": "hi", "workspace": str(tmp_path)},
    ]
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner.mutation.mutants", "--wire", "openai"]
        + ["ignores-user-input"],
        input="".join(json.dumps(line) + "\n" for line in lines),
        env={**os.environ, "EVALRUNNER_PROTOCOLS": "1,2"}
        | {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "x"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert [sorted(a) for a in answers] == [
        ["evalrunner"],
        ["case", "error"],
        ["case", "ended"],
        ["case", "error"],
    ], answers
    assert answers[3]["case"] == "b2" and answers[3]["error"].startswith("RunError: ")


def test_mutate_with_jobs_reports_what_a_serial_run_reports() -> None:
    args = ["mutate", "--suite", str(ROOT / "evals" / "regression"), "--path", "in-process"]
    serial = CliRunner().invoke(app, [*args, "-j", "1"], env={})
    parallel = CliRunner().invoke(app, [*args, "-j", "2"], env={})
    assert serial.exit_code == parallel.exit_code == 0, parallel.output
    assert parallel.stdout == serial.stdout


def test_mutate_runs_one_command_mutant_per_cpu_by_default() -> None:
    """Mutants run the bundled reference agent, never the user's, so running them at once
    is safe by default; -j 1 runs them one at a time."""
    import inspect

    from evalrunner.cli.mutate import mutate

    assert inspect.signature(mutate).parameters["jobs"].default == "auto"


@pytest.mark.slow
def test_command_mutants_run_at_once_report_what_a_serial_run_reports() -> None:
    suite = str(ROOT / "evals" / "regression")
    args = ["mutate", "--suite", suite, "--path", "openai", "--path", "in-process"]
    serial = CliRunner().invoke(app, [*args, "--jobs", "1"], env={})
    parallel = CliRunner().invoke(app, args, env={})  # one per CPU, by default
    assert serial.exit_code == parallel.exit_code == 0, parallel.output
    assert parallel.stdout == serial.stdout


@pytest.mark.parametrize("jobs", ["0", "x", "257"])
def test_mutate_refuses_a_jobs_count_out_of_range(jobs: str) -> None:
    result = CliRunner().invoke(app, ["mutate", "--jobs", jobs], env={})
    assert result.exit_code == 2
    assert f"--jobs: must be a number from 1 to 256, or auto; got {jobs!r}" in result.stderr


def test_mutate_refuses_an_unknown_path() -> None:
    result = CliRunner().invoke(app, ["mutate", "--path", "grpc"], env={})
    assert result.exit_code == 2
    assert "--path 'grpc': not an agent path" in result.stderr


def test_threads_left_by_cases_are_not_ours() -> None:
    # A hung agent is abandoned with its case thread; none of the cases above hangs, so the
    # only case threads left are idle ones, waiting for the next case.
    from evalrunner.replay import _CaseThread

    alive = {t for t in threading.enumerate() if t.name.startswith("evalrunner case")}
    assert alive <= {idle._thread for idle in _CaseThread._idle}


class ReturnsANumber:
    name = "echo"
    description = "Returns a number, not text (a project tool breaking its contract)."
    parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012

    def call(self, arguments: dict[str, Any]) -> Any:
        return 42


class FeedsBack(Conformant):
    """Calls the tool itself and feeds back ``fed`` as a success."""

    fed = "42"

    def run(self, call: Any) -> ToolCallRecord:
        self.context.tools[call.name].call(json.loads(call.arguments))
        return ToolCallRecord(call.name, call.arguments, self.fed, True, call.id)


def test_a_result_that_is_not_text_must_come_back_as_its_text_or_json() -> None:
    tools = {"echo": ReturnsANumber()}
    assert run_python(FeedsBack, tools=tools).error is None

    class Lies(FeedsBack):
        fed = "forty-three, trust me"

    report = run_python(Lies, tools=tools)
    assert report.error is not None
    assert 'returned "42" (not text)' in report.error, report.error


class OneCallAtATime(Conformant):
    """Forbids parallel tool calls, in the shape of ``api``."""

    api = "openai"

    def send(self, messages: tuple[Message, ...]) -> Any:
        offered = tuple(tool_spec(tool) for tool in self.context.tools.values())
        parameters: dict[str, Any] = (
            {"parallel_tool_calls": False}
            if self.api == "openai"
            else {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}
        )
        return self.context.provider.complete(
            ModelRequest(messages, offered, parameters=parameters)
        )


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_request_that_forbids_parallel_calls_cannot_get_several(api: str) -> None:
    agent = type("Agent", (OneCallAtATime,), {"api": api})
    report = run_python(agent, SEVERAL)
    assert report.error is not None
    assert "the request forbids parallel tool calls" in report.error, report.error
    assert run_python(agent, ECHO).passed  # one call per answer is what it allows


def test_a_history_message_of_an_earlier_case_is_hinted_as_another_cases() -> None:
    # A persistent agent that keeps one history for every case: the second case's request
    # opens with the first case's conversation.
    first = monitored(Turn("hint-first-case input", (TextResponse("one"),)))
    first.begin_turn(0)
    first.complete(ModelRequest((Message("user", "hint-first-case input"),), ()))
    second = monitored(Turn("hint-second-case input", (TextResponse("two"),)))
    second.begin_turn(0)
    leaked = (
        Message("user", "hint-first-case input"),
        Message("assistant", "one"),
        Message("user", "hint-second-case input"),
    )
    with pytest.raises(RunError) as raised:
        second.complete(ModelRequest(leaked, ()))
    assert str(raised.value).endswith("(from another case?)"), raised.value
    # A message no case held gets no such hint.
    third = monitored(Turn("hint-third-case input", (TextResponse("three"),)))
    third.begin_turn(0)
    invented = (Message("user", "never any case's input"), Message("user", "hint-third-case input"))
    with pytest.raises(RunError) as raised:
        third.complete(ModelRequest(invented, ()))
    assert "another case" not in str(raised.value), raised.value
