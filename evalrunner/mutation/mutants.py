"""Mutant agents: proof that a suite catches broken agent machinery.

Each :class:`Mutant` is the reference agent with exactly one promise broken (a result dropped,
a call dispatched twice, an earlier turn forgotten, ...). ``evalrunner mutate`` runs a suite
against every mutant on every agent path: in-process (a Python factory), and as a command
agent over each wire: OpenAI chat completions, the OpenAI Responses API and Anthropic messages
(this module is also that command:
``python -m evalrunner.mutation.mutants --wire openai|openai-responses|anthropic [--stream]
MUTANT``).
A mutant is *killed* by a case that fails or errors against it; a suite that lets one survive
does not check the promise it breaks.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalrunner.agents.reference import Agent, AgentContext, ReferenceAgent
from evalrunner.boundary.observer import RecordingObserver
from evalrunner.boundary.provider import ModelProvider
from evalrunner.boundary.tools import Tool, builtin_tools, double_from_json, with_doubles
from evalrunner.model import (
    Message,
    ModelRequest,
    ModelResponse,
    RunError,
    TextResponse,
    ToolCall,
    ToolCallRecord,
    ToolSpec,
    argument_json,
)

IN_PROCESS = "in-process"
WIRE_PATHS = ("openai", "openai-responses", "anthropic")
"""The command-agent paths, one per wire (:data:`evalrunner.wire.common.WIRES`, not imported
here: the in-process path needs no HTTP)."""
PATHS = (IN_PROCESS, *WIRE_PATHS)
"""Every agent path a mutant runs on."""


@dataclass(frozen=True, slots=True)
class Mutant:
    """One broken agent: what it breaks, how to kill it, and how to build it."""

    name: str
    breaks: str
    hint: str
    factory: Callable[[AgentContext], Agent]
    command_only: bool = False
    """Breaks something only an external process can (its exit, its stdout)."""


class _Mutated(ReferenceAgent):
    """The reference agent, with a counter the mutants use to break one thing once."""

    def __init__(self, context: AgentContext) -> None:
        super().__init__(context)
        self.dispatches = 0
        self.turns = 0

    def respond(self, user_input: str) -> str:
        self.turns += 1
        return super().respond(user_input)

    def _dispatch(self, call: ToolCall) -> ToolCallRecord:
        self.dispatches += 1
        return super()._dispatch(call)


class DropsToolResult(_Mutated):
    def _feed(self, call: ToolCall, record: ToolCallRecord) -> None:
        if self.dispatches > 1:
            super()._feed(call, record)


class FeedsWrongResult(_Mutated):
    def _feed(self, call: ToolCall, record: ToolCallRecord) -> None:
        self._append(Message("tool", record.result + " (edited)", tool_call_id=call.id))


class DispatchesTwice(_Mutated):
    def _dispatch(self, call: ToolCall) -> ToolCallRecord:
        record = super()._dispatch(call)
        if self.dispatches == 1:
            self._report(super()._dispatch(call))
        return record


class DispatchesUnscripted(_Mutated):
    def _dispatch(self, call: ToolCall) -> ToolCallRecord:
        record = super()._dispatch(call)
        if self.dispatches == 1:
            extra = ToolCall("unscripted_1", "echo", '{"message":"unscripted"}')
            self._report(super()._dispatch(extra))
        return record


class CorruptsArguments(_Mutated):
    def _dispatch(self, call: ToolCall) -> ToolCallRecord:
        return super()._dispatch(ToolCall(call.id, call.name, _corrupt(call.arguments)))


class MisreportsArguments(_Mutated):
    """Runs the tool on corrupted arguments but reports the model's."""

    def _dispatch(self, call: ToolCall) -> ToolCallRecord:
        record = super()._dispatch(ToolCall(call.id, call.name, _corrupt(call.arguments)))
        return ToolCallRecord(record.name, call.arguments, record.result, record.success, call.id)


class MisreportsSuccess(_Mutated):
    def _report(self, record: ToolCallRecord) -> None:
        super()._report(
            ToolCallRecord(record.name, record.arguments, record.result, True, record.id)
        )


class SwapsCallOrder(_Mutated):
    def _order(self, calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
        return tuple(reversed(calls))


class ForgetsEarlierTurns(_Mutated):
    def _ask(self) -> ModelResponse:
        users = [i for i, m in enumerate(self._history) if m.role == "user"]
        recent = self._history[users[-1] :]
        return self._context.provider.complete(ModelRequest(tuple(recent), self._specs))


class IgnoresUserInput(_Mutated):
    def _ask(self) -> ModelResponse:
        messages = [Message("user", "Hello.") if m.role == "user" else m for m in self._history]
        return self._context.provider.complete(ModelRequest(tuple(messages), self._specs))


class DropsAssistantCalls(_Mutated):
    def _ask(self) -> ModelResponse:
        messages = [m for m in self._history if not (m.role == "assistant" and m.tool_calls)]
        return self._context.provider.complete(ModelRequest(tuple(messages), self._specs))


EXTRA_TOOL = "delete_account"
"""The tool :class:`OffersExtraTool` offers, which its survivor hint names."""


class OffersExtraTool(_Mutated):
    """Offers the model a tool the agent does not have (``delete_account``), as a read-only
    agent wired to a dangerous tool would."""

    def _ask(self) -> ModelResponse:
        extra = ToolSpec(EXTRA_TOOL, "Deletes the user's account.", {"type": "object"})
        request = ModelRequest(tuple(self._history), (*self._specs, extra))
        return self._context.provider.complete(request)


class WithdrawsTools(_Mutated):
    """Offers its tools in its first model request only."""

    def __init__(self, context: AgentContext) -> None:
        super().__init__(context)
        self.asked = 0

    def _ask(self) -> ModelResponse:
        self.asked += 1
        specs = self._specs if self.asked == 1 else ()
        return self._context.provider.complete(ModelRequest(tuple(self._history), specs))


class RepliesWithoutModel(_Mutated):
    def respond(self, user_input: str) -> str:
        return "I can answer that without asking the model."


class WrapsReply(_Mutated):
    """Post-processes the model's reply: a JSON answer arrives wrapped in a Markdown fence."""

    def respond(self, user_input: str) -> str:
        return "```json\n" + super().respond(user_input) + "\n```"


class SwallowsProviderError(_Mutated):
    def _ask(self) -> ModelResponse:
        try:
            return super()._ask()
        except RunError:
            return TextResponse("Sorry, something went wrong.")

    def respond(self, user_input: str) -> str:
        reply = super().respond(user_input)
        if self.turns == 1:
            super()._ask()  # one request too many, its refusal swallowed above
        return reply


class StopsAfterFirstToolCall(_Mutated):
    def respond(self, user_input: str) -> str:
        try:
            return super().respond(user_input)
        except _StopTurn:
            return "Done."

    def _feed(self, call: ToolCall, record: ToolCallRecord) -> None:
        super()._feed(call, record)
        raise _StopTurn


class _StopTurn(Exception):
    """Ends a turn early from inside the loop."""


class DiesMidTurn(_Mutated):
    def _feed(self, call: ToolCall, record: ToolCallRecord) -> None:
        super()._feed(call, record)
        import asyncio  # here, not at the top: every mutant process would import it at start-up

        raise asyncio.CancelledError  # a BaseException: must not pass for a finished turn


class Silent(_Mutated):
    def _report(self, record: ToolCallRecord) -> None:
        return None


class ExitsNonZero(_Mutated):
    """Command only: crashes once its input ends, after a correct final reply."""


class PrintsAfterReply(_Mutated):
    """Command only: prints a stray line after its final reply."""


class AsksAfterReply(_Mutated):
    """Command only: sends one more model request after its final reply."""


def _corrupt(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments + "~"
    if isinstance(value, dict):
        return argument_json(
            {k: (v[::-1] + "~" if isinstance(v, str) else v) for k, v in value.items()}
        )
    return arguments + "~"


MUTANTS: tuple[Mutant, ...] = (
    Mutant("drops-tool-result", "results fed back", "any case with a tool call", DropsToolResult),
    Mutant(
        "feeds-wrong-result",
        "results fed back unchanged",
        "a tool call whose result is reported (tool_results_contain)",
        FeedsWrongResult,
    ),
    Mutant(
        "dispatches-twice", "no extra dispatch", "exact_tool_calls on a tool case", DispatchesTwice
    ),
    Mutant(
        "dispatches-unscripted",
        "no dispatch the model did not ask for",
        "exact_tool_calls or tools_not_used",
        DispatchesUnscripted,
    ),
    Mutant(
        "corrupts-arguments",
        "arguments passed as the model sent them",
        "tool_arguments_contain / tool_results_contain on a value in the arguments",
        CorruptsArguments,
    ),
    Mutant(
        "misreports-arguments",
        "dispatches reported as they happened",
        "any tool case in-process (the tools record what they get); on the wires, "
        "tool_results_contain on a value the tool echoes back",
        MisreportsArguments,
    ),
    Mutant(
        "misreports-success",
        "failed tool calls reported as failures",
        "all_tools_succeeded: false on a failing call",
        MisreportsSuccess,
    ),
    Mutant(
        "swaps-call-order",
        "calls dispatched in the model's order",
        "call_index on a response with several calls",
        SwapsCallOrder,
    ),
    Mutant(
        "forgets-earlier-turns",
        "turns kept in order",
        "any case with two turns",
        ForgetsEarlierTurns,
    ),
    Mutant("ignores-user-input", "the user's input is sent", "any case", IgnoresUserInput),
    Mutant(
        "drops-assistant-calls",
        "the model's tool calls kept in the history",
        "any case with a tool call",
        DropsAssistantCalls,
    ),
    Mutant(
        "offers-extra-tool",
        "only the agent's own tools offered",
        f"tools_not_offered: [{EXTRA_TOOL}] (the tool this mutant offers), or any tool the "
        "agent must not have",
        OffersExtraTool,
    ),
    Mutant(
        "withdraws-tools",
        "every model request offers the tools",
        "tools_offered on a case with two model requests or more",
        WithdrawsTools,
    ),
    Mutant(
        "replies-without-model",
        "every reply comes from the model",
        "any case",
        RepliesWithoutModel,
    ),
    Mutant(
        "wraps-reply",
        "the reply passed on as the model wrote it",
        "response_json, or response_matches anchored with ^ and $",
        WrapsReply,
    ),
    Mutant(
        "swallows-provider-error",
        "no swallowed error",
        "any case (the refused extra request is sticky)",
        SwallowsProviderError,
    ),
    Mutant(
        "stops-after-first-tool-call",
        "the loop runs until the model replies with text",
        "a turn with two tool rounds",
        StopsAfterFirstToolCall,
    ),
    Mutant("dies-mid-turn", "no swallowed error", "any case with a tool call", DiesMidTurn),
    Mutant(
        "silent",
        "every dispatch reported",
        "any case with a tool call (Python agents must report)",
        Silent,
    ),
    Mutant(
        "exits-non-zero",
        "a command ends cleanly",
        "any case (command agents only)",
        ExitsNonZero,
        command_only=True,
    ),
    Mutant(
        "prints-after-reply",
        "stdout carries reply lines only",
        "any case (command agents only)",
        PrintsAfterReply,
        command_only=True,
    ),
    Mutant(
        "asks-after-reply",
        "no model request after the final reply",
        "any case (command agents only)",
        AsksAfterReply,
        command_only=True,
    ),
)
"""The catalogue, in the order reports list it."""


REFERENCE = Mutant("reference", "nothing", "", ReferenceAgent)
"""The unmutated reference agent, run the same way: the baseline of every path."""


def mutant(name: str) -> Mutant:
    """The mutant called ``name``; :class:`KeyError` if there is none."""
    return {candidate.name: candidate for candidate in MUTANTS}[name]


# --- as a command agent ---------------------------------------------------------------------------


def _serve_command(
    chosen: Mutant, wire: str, stream: bool, tools: dict[str, Tool] | None = None
) -> int:
    """The agent-command protocol around one mutant, over ``wire``: one line per turn in, one
    reply line (with the turn's reported dispatches) out. Protocol 2 when the runner offers
    it: a fresh mutant per case, in one process for the whole run."""
    from evalrunner.wire.client import WireClient  # only the command needs HTTP

    # Both OpenAI APIs are served under the same base URL, as the openai SDK expects.
    base = os.environ["ANTHROPIC_BASE_URL" if wire == "anthropic" else "OPENAI_BASE_URL"]
    client = WireClient(wire, base, stream=stream)
    offered = os.environ.get("EVALRUNNER_PROTOCOLS", "").split(",")
    if "2" not in offered:
        return _serve_one_case(chosen, client, tools)
    if not sys.stdin.readline():  # the opening line: answered with the handshake only
        return 0
    _emit({"evalrunner": 2})
    case: object = None
    agent: Agent | None = None
    observer = RecordingObserver()
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("end"):
            code = _after_final_reply(agent, client)
            if code is not None:
                return code
            _emit({"case": message["case"], "ended": True})
            case, agent = None, None
            continue
        if agent is None or message["case"] != case:
            case, observer = message["case"], RecordingObserver()
            case_tools = _with_doubles(tools, message)
            agent = chosen.factory(
                _context(client, observer, case_tools, Path(message["workspace"]))
            )
        reply = _respond(chosen, agent, message["user_input"])
        if isinstance(reply, Exception):
            # A refused request or the mutant's own failure fails this case only: the
            # process lives on for the next, as a persistent agent does. Mutants that die
            # (a BaseException) still end it.
            _emit({"case": case, "error": f"{type(reply).__name__}: {reply}"})
            agent = None  # the case is over: its end line is answered, nothing more
            continue
        if isinstance(reply, BaseException):
            return 1
        reports = [_reported(record) for record in observer.take()]
        _emit({"case": case, "reply": reply, "tool_calls": reports})
    return 0


def _serve_one_case(chosen: Mutant, client: ModelProvider, tools: dict[str, Tool] | None) -> int:
    """Protocol 1: the turns of one case, until stdin closes."""
    workspace = Path(os.environ.get("EVALRUNNER_WORKSPACE", "."))
    observer = RecordingObserver()
    agent: Agent | None = None
    for line in sys.stdin:
        message = json.loads(line)
        if agent is None:  # turn 1's line lists the case's tool doubles
            agent = chosen.factory(
                _context(client, observer, _with_doubles(tools, message), workspace)
            )
        reply = _respond(chosen, agent, message["user_input"])
        if isinstance(reply, BaseException):
            return 1
        reports = [_reported(record) for record in observer.take()]
        _emit({"reply": reply, "tool_calls": reports})
    code = _after_final_reply(agent, client)
    return 0 if code is None else code


def _context(
    client: ModelProvider,
    observer: RecordingObserver,
    tools: dict[str, Tool] | None,
    workspace: Path,
) -> AgentContext:
    return AgentContext(
        provider=client,
        tools=builtin_tools() if tools is None else tools,
        observer=observer,
        workspace=workspace,
    )


def _with_doubles(tools: dict[str, Tool] | None, line: dict[str, Any]) -> dict[str, Tool] | None:
    """The tools for a case whose turn-1 ``line`` may list tool doubles."""
    doubles = line.get("tools")
    if not doubles:
        return tools
    base = builtin_tools() if tools is None else tools
    return with_doubles(base, [double_from_json(double) for double in doubles])


def _respond(chosen: Mutant, agent: Agent, user_input: str) -> str | BaseException:
    """The agent's reply, or what it raised (said on stderr too)."""
    try:
        reply = agent.respond(user_input)
    except BaseException as exc:
        print(f"{chosen.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return exc
    assert isinstance(reply, str)
    return reply


def _after_final_reply(agent: Agent | None, client: ModelProvider) -> int | None:
    """What the command-only mutants do once a case has had its final reply; an exit code
    when the mutant ends the process there."""
    if isinstance(agent, AsksAfterReply):
        with contextlib.suppress(RunError):
            client.complete(ModelRequest((Message("user", "One more thing."),)))
    if isinstance(agent, PrintsAfterReply):
        print("stray output after the final reply", flush=True)
    if isinstance(agent, ExitsNonZero):
        return 3
    return None


def _emit(line: dict[str, object]) -> None:
    print(json.dumps(line), flush=True)


def _reported(record: ToolCallRecord) -> dict[str, object]:
    try:
        value = json.loads(record.arguments)
        json.dumps(value, allow_nan=False)  # 1e400 parses as inf, which JSON cannot carry
    except ValueError:
        value = None
    arguments: object = value if isinstance(value, dict) else record.arguments
    return {
        "id": record.id,
        "name": record.name,
        "arguments": arguments,
        "result": record.result,
        "success": record.success,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m evalrunner.mutation.mutants --wire openai|openai-responses|anthropic [--stream]
    MUTANT``."""
    parser = argparse.ArgumentParser(prog="python -m evalrunner.mutation.mutants")
    parser.add_argument("--wire", choices=WIRE_PATHS, required=True)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--tool", action="append", default=[], help="package.module:name")
    parser.add_argument("--tools-from", default=".", help="where --tool modules are imported from")
    parser.add_argument("--no-builtin-tools", action="store_true")
    parser.add_argument("mutant", choices=[REFERENCE.name, *(m.name for m in MUTANTS)])
    args = parser.parse_args(argv)
    chosen = REFERENCE if args.mutant == REFERENCE.name else mutant(args.mutant)
    tools = None
    if args.tool or args.no_builtin_tools:
        from evalrunner.plugins import load_tools  # only for a project's own tools

        tools = load_tools(
            args.tool, Path(args.tools_from), include_builtin=not args.no_builtin_tools
        )
    return _serve_command(chosen, args.wire, args.stream, tools)


if __name__ == "__main__":
    raise SystemExit(main())
