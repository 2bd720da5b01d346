"""Conversation conformance: one monitor sees every model request of a case, on every path.

The :class:`ConversationMonitor` wraps the model side (the fixture's script, or a live model:
any :class:`~evalrunner.boundary.provider.ModelProvider`) and is what every agent talks to:
in-process
agents get it as ``context.provider``, and the replay endpoint hands it each request right
after decoding it. Before a request is answered, it is held against the run so far (SPEC §12,
issue 8); the run so far is what the model actually answered, scripted or live, so the same
checks hold in both modes:

* the first request of turn N ends with turn N's ``user_input``, verbatim;
* after a response with tool calls, the next request carries exactly one result for each call
  id handed out (none missing, none twice, none unknown), and the assistant message repeats
  those calls: same ids, same names, argument JSON equal to what the model sent;
* earlier turns' user messages, final replies and tool results are still there, in order
  (unless the case is run with ``trimmed_history``, which checks the current turn only).

A violation, an exhausted script, or any other refusal is a run error, and it is *sticky*: the
first one stays the case's error even if the agent catches it and carries on, and every later
request is refused with it. At the end of each turn the dispatches the agent reported (through
its observer, or in a command agent's reply line) are reconciled with the results it fed back,
and, for in-process agents, with what the tools themselves received.

The monitor also keeps the run's evidence: every request, the conversation as sent (the run
record's history), usage, and one dispatch record per tool call whose result came back.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, cast, runtime_checkable

from evalrunner.boundary.provider import ModelProvider
from evalrunner.boundary.tools import (
    InvocationLog,
    ToolInvocation,
    answer,
    parse_arguments,
    unanswered_message,
)
from evalrunner.model import (
    MESSAGE_ROLES,
    AnswerNotPassed,
    Message,
    ModelRequest,
    ModelResponse,
    RunError,
    TextResponse,
    ToolCall,
    ToolCallRecord,
    ToolCallsResponse,
    ToolDouble,
    argument_json,
    json_equal,
)


@runtime_checkable
class TurnScripted(Protocol):
    """A model side that is told where turns begin and end (the replay script)."""

    def begin_turn(self, index: int) -> None:
        """Serve turn ``index`` (0-based) from now on."""

    def end_turn(self) -> None:
        """Close the current turn; raises :class:`RunError` for what it left unused."""


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One tool call handed to the agent whose result came back.

    ``arguments`` and ``success`` are ``None`` where the agent's path gave no evidence of them
    (a command agent that does not report its dispatches; ``success`` on the OpenAI wire).
    """

    call: ToolCall
    result: str
    arguments: str | None = None
    success: bool | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a finished run showed at the model boundary, for the run record."""

    requests: tuple[ModelRequest, ...]
    history: tuple[Message, ...]
    dispatches: tuple[Dispatch, ...]
    llm_calls: int
    input_tokens: int
    output_tokens: int
    error: str | None
    responses: tuple[tuple[int, ModelResponse], ...] = ()
    """Every response the model gave, with its turn (0-based), in order: what a recorder
    writes as each turn's steps."""


class ConversationMonitor(ModelProvider):
    """The one place that sees every model request of a case (see the module docstring).

    ``user_inputs`` are the turns' inputs, in order. The runner (or, for ``evalrunner
    serve``, the endpoint) brackets turns with :meth:`begin_turn` and :meth:`end_turn`.
    Thread-safe: the replay endpoint calls :meth:`complete` from its serving threads while the
    runner drives the turns.
    """

    def __init__(
        self,
        model: ModelProvider,
        user_inputs: Sequence[str],
        *,
        trimmed_history: bool = False,
        framed_results: bool = False,
        doubles: Sequence[ToolDouble] = (),
    ) -> None:
        self._model = model
        self._doubles = {double.name: double for double in doubles}
        # What isinstance(model, TurnScripted) asks, asked directly: against a runtime
        # Protocol it costs more than a whole model request.
        scripted = all(callable(getattr(model, name, None)) for name in ("begin_turn", "end_turn"))
        self._script = cast(TurnScripted, model) if scripted else None
        self._inputs = tuple(user_inputs)
        _SEEN_INPUTS.remember(self._inputs)
        self._trimmed = trimmed_history
        self._framed = framed_results
        self._lock = threading.RLock()
        self._turn: int | None = None
        self._turn_start = 0  # index in the transcript where the current turn begins
        self._requests_in_turn = 0
        self._replied = False  # the model answered this turn with text
        self._transcript: list[Message] = []
        self._pending: list[ToolCall] = []
        self._fed: list[tuple[ToolCall, Message]] = []  # this turn's results, as fed back
        self._handed: dict[str, int] = {}  # call id -> the turn it was handed out in
        # call id -> the names its request offered, for calls to a name it did not offer
        self._unoffered: dict[str, tuple[str, ...]] = {}
        self._all_fed: list[Dispatch] = []
        self._dispatches: list[Dispatch] = []
        self._requests: list[ModelRequest] = []
        self._responses = 0
        self._answers: list[tuple[int, ModelResponse]] = []
        self._input_tokens = 0
        self._output_tokens = 0
        self._finished = False
        self._api: str | None = None  # the wire of the latest request, None in-process
        self.error: str | None = None
        """The first run error of the case (sticky), or ``None``."""

    # --- turns ------------------------------------------------------------------------------

    def begin_turn(self, index: int) -> None:
        """Turn ``index`` (0-based) begins: its user input is what the next request must end
        with."""
        with self._lock:
            self._turn = index
            self._requests_in_turn = 0
            self._replied = False
            self._fed = []
            self._turn_start = len(self._transcript)
            if index < len(self._inputs):
                self._transcript.append(Message("user", self._inputs[index]))
            if self._script is not None:
                self._script.begin_turn(index)

    def end_turn(
        self,
        reports: Sequence[ToolCallRecord] | None,
        tools: InvocationLog | None = None,
    ) -> None:
        """Close the current turn and reconcile it.

        ``reports`` are the dispatches the agent reported during the turn (``None`` when its
        path does not report them); ``tools`` the log of what the case's in-process tools
        received (``None`` when the agent runs its own tools, out of process). Raises
        :class:`RunError` for leftover script, results never fed back, or reports that
        disagree with the evidence.
        """
        with self._lock:
            turn = self._turn
            if turn is None:
                return
            self._turn = None
            try:
                if self._pending:  # named first: it is why script was left over, if it was
                    raise RunError(
                        f"turn {turn + 1}: the result of tool call(s) {_calls(self._pending)} "
                        "was never fed back to the model; every tool call handed to the agent "
                        "must be answered in its next model request"
                    )
                if self._script is not None:
                    self._script.end_turn()
                elif self._requests_in_turn == 0:
                    raise RunError(
                        f"turn {turn + 1}: the agent replied without asking the model; a live "
                        "turn must send at least one model request, or its checks grade the "
                        "agent's own words, not the model's"
                    )
                dispatches = _reconcile(
                    turn,
                    self._fed,
                    reports,
                    tools,
                    self._api,
                    self._handed,
                    _Boundary(self._unoffered, self._framed),
                )
                if tools is None and self._doubles:  # in process, the doubles saw it all
                    _check_doubles(turn, dispatches, self._doubles, self._framed, self._unoffered)
                self._dispatches += dispatches
            except RunError as exc:
                self._fail(str(exc))
                raise

    def finish(self) -> None:
        """The agent has stopped: any model request from now on is a run error."""
        with self._lock:
            self._finished = True

    def refuse(self, message: str) -> str:
        """Record a refusal made elsewhere (an unreadable request, a response the wire
        cannot carry); returns the case's error, which may be an earlier one."""
        with self._lock:
            self._fail(message)
            return self.error or message

    # --- the model side -----------------------------------------------------------------------

    def complete(
        self,
        request: ModelRequest,
        *,
        unservable: Callable[[ModelResponse], str | None] | None = None,
    ) -> ModelResponse:
        """Check ``request`` against the script and the run so far, then answer it.

        ``unservable`` (from a wire) says why a response cannot be carried to the agent: it
        is then refused before it counts as served.
        """
        with self._lock:
            if isinstance(request, ModelRequest) and not isinstance(request.messages, tuple):
                # Kept as it was when sent: an agent's own list may grow afterwards.
                request = replace(request, messages=tuple(request.messages))
            self._requests.append(request)
            self._api = getattr(request, "api", None)
            if self.error is not None:
                raise RunError(self.error)
            try:
                response = self._answer(request, unservable)
            except RunError as exc:
                self._fail(str(exc))
                raise
            self._responses += 1
            self._answers.append((self._turn if self._turn is not None else -1, response))
            return response

    def _ask(self, request: ModelRequest, where: str) -> ModelResponse:
        """The model's answer to ``request``, its tokens counted at once: they were spent
        whether or not the answer reaches the agent (the report and a token budget must
        agree). An answer the model cut short is a run error, not an answer to grade."""
        try:
            response = self._model.complete(request)
        except AnswerNotPassed as refused:
            self._count(refused.response)
            raise
        self._count(response)
        if response.cut_short is not None:
            raise RunError(
                f"{where}: live model: the model's answer is incomplete "
                f"({response.cut_short}); an answer cut short is not graded as a whole one"
            )
        return response

    def _count(self, response: ModelResponse) -> None:
        self._input_tokens += response.input_tokens
        self._output_tokens += response.output_tokens

    def _answer(
        self, request: ModelRequest, unservable: Callable[[ModelResponse], str | None] | None
    ) -> ModelResponse:
        if self._turn is None:
            if self._finished:
                when = "after its final reply"
            elif self._responses:
                when = "between turns"
            else:
                when = "before the first turn"
            raise RunError(f"the agent sent a model request outside any turn ({when})")
        self._requests_in_turn += 1
        where = f"turn {self._turn + 1}, model request {self._requests_in_turn}"
        messages = _conversation(request, where)
        # Beyond the script (an unscripted turn, or one more request after the turn's final
        # reply), the script's own error says what happened: ask it first. A live model has
        # no script to say it, and must not be paid for an answer no agent should ask for.
        beyond = self._turn >= len(self._inputs) or self._replied
        if self._script is None and beyond:
            raise RunError(
                f"{where}: the model already gave this turn's final reply (text), so the turn "
                "is over; an agent must not ask the model again before the next user input"
                if self._replied
                else f"{where}: the case has only {len(self._inputs)} turn(s)"
            )
        response = self._ask(request, where) if beyond else None
        if self._turn < len(self._inputs):
            problem = self._mismatch(messages)
            if problem is not None:
                raise RunError(f"{where}: {problem}")
        if response is None:
            response = self._ask(request, where)
        reason = unservable(response) if unservable is not None else None
        if reason is not None:
            raise RunError(reason)
        if isinstance(response, ToolCallsResponse) and not request.tools:
            raise RunError(
                f"{where}: the request offers the model no tools, yet the model's answer calls "
                f"{_calls(response.tool_calls)}; a real model cannot call a tool it was not "
                "offered, so an agent that forgets to send its tools cannot work. Offer them "
                "(ModelRequest.tools; the API's tools field)"
            )
        if isinstance(response, ToolCallsResponse):
            problem = _choice_forbids(request, response)
            if problem is not None:
                raise RunError(f"{where}: {problem}")
        if isinstance(response, TextResponse):
            self._transcript.append(Message("assistant", response.content))
            self._replied = True
        else:
            self._transcript.append(Message("assistant", "", tool_calls=response.tool_calls))
            self._pending = list(response.tool_calls)
            offered: tuple[str, ...] | None = None
            for call in response.tool_calls:
                self._handed.setdefault(call.id, self._turn)
                if offered is None:
                    offered = tuple(getattr(spec, "name", "") for spec in request.tools)
                if call.name not in offered:
                    self._unoffered[call.id] = offered
                else:  # an id handed out again, to an offered tool this time
                    self._unoffered.pop(call.id, None)
        return response

    def _mismatch(self, messages: list[Message]) -> str | None:
        """Why ``messages`` (the request's conversation) is not the run so far, or None.

        When it is, the results it carries for the pending calls join the transcript.
        """
        assert self._turn is not None
        user_input = self._inputs[self._turn] if self._turn < len(self._inputs) else None
        if self._requests_in_turn == 1 and user_input is not None:
            latest = None
            for m in reversed(messages):  # the latest user message, looked for from the end
                if m.role == "user":
                    latest = m.content
                    break
            if latest != user_input:
                seen = "no user message" if latest is None else _quote(latest)
                return (
                    f"the latest user message should be the turn's user_input "
                    f"{_quote(user_input)} verbatim, but the request carries {seen}"
                )
        # An empty assistant reply carries nothing, and some APIs refuse an empty text block:
        # whether the agent keeps it in its history or not, the conversation is the same.
        # (not _empty_reply(m), written out: a call per message of every request adds up)
        messages = [
            m for m in messages if m.role != "assistant" or m.tool_calls or m.content.strip()
        ]
        start = 0
        if not self._trimmed:
            expected = [
                m
                for m in self._transcript
                if m.role != "assistant" or m.tool_calls or m.content.strip()
            ]
        else:
            expected = [m for m in self._transcript[self._turn_start :] if not _empty_reply(m)]
            opening = expected[0] if expected and expected[0].role == "user" else None
            starts = [
                i
                for i, m in enumerate(messages)
                if opening is not None and m.role == "user" and m.content == opening.content
            ]
            start = starts[-1] if starts else 0
            carried = self._never_held(messages[:start])
            if carried is not None:
                return carried
        body = messages[start:]
        dropped = 0 if self._trimmed else _dropped_prefix(expected, body)
        if dropped:
            return (
                f"the request lacks the first {dropped} message(s) of the conversation "
                f"(from {_describe(expected[0])}): earlier messages were dropped" + _TRIM_HINT
            )
        for index, want in enumerate(expected):
            if index >= len(body):
                return (
                    f"history message {start + index + 1} should be {_describe(want)}, but "
                    "the request ends before it: earlier messages were dropped or never added"
                    + ("" if self._trimmed else _TRIM_HINT)
                )
            problem = _differs(want, body[index])
            if problem is not None:
                return f"history message {start + index + 1} {problem}" + self._elsewhere(
                    body[index]
                )
        tail = body[len(expected) :]
        if not self._pending:
            if tail:
                return (
                    f"the request ends with {_describe(tail[0])}, which the run never held"
                    f"{self._elsewhere(tail[0])}; its latest message must be "
                    + (_describe(expected[-1]) if expected else "the turn's user input")
                )
            return None
        results = self._results(tail, self._pending)
        if isinstance(results, str):
            return results
        self._pending = []
        for call, message in results:
            self._transcript.append(message)
            self._fed.append((call, message))
            self._all_fed.append(Dispatch(call, message.content, None, _success_flag(message)))
        return None

    def _elsewhere(self, message: Message) -> str:
        """`` (from another case?)`` when ``message`` is a user message this case never had
        and an earlier case of this process did: a history kept across cases."""
        if message.role != "user" or message.content in self._inputs:
            return ""
        return " (from another case?)" if _SEEN_INPUTS.holds(message.content) else ""

    def _never_held(self, kept: list[Message]) -> str | None:
        """Under ``trimmed_history``: why the messages a request keeps before the current
        turn are not all earlier messages of this case, or None. Dropping earlier turns is
        allowed; carrying a conversation the case never held (another case's) is not."""
        earlier = [m for m in self._transcript[: self._turn_start] if not _empty_reply(m)]
        for index, message in enumerate(kept):
            if not any(_differs(held, message) is None for held in earlier):
                return (
                    f"history message {index + 1} is {_describe(message)}, which this case "
                    "never held (another case's conversation?); trimmed_history lets an agent "
                    "drop earlier turns of its own case, not carry messages from elsewhere"
                )
        return None

    def _results(
        self, tail: list[Message], pending: list[ToolCall]
    ) -> list[tuple[ToolCall, Message]] | str:
        """Pair the request's trailing messages with the pending calls, one result each."""
        by_id = {call.id: call for call in pending}
        paired: list[tuple[ToolCall, Message]] = []
        seen: set[str] = set()
        for message in tail:
            if message.role != "tool":
                return (
                    f"after the tool results the request carries {_describe(message)}; only "
                    f"the results of {_calls(pending)} may follow the assistant's tool calls"
                )
            call_id = message.tool_call_id
            if call_id is None or call_id not in by_id:
                handed = ", ".join(json.dumps(c.id) for c in pending)
                return (
                    f"the request carries a result for tool call id {_quote(call_id or '')}, "
                    f"which the model never handed out (it handed out {handed})"
                )
            if call_id in seen:
                return (
                    f"the request carries two results for tool call {_calls([by_id[call_id]])}; "
                    "each call gets exactly one"
                )
            seen.add(call_id)
            paired.append((by_id[call_id], message))
        missing = [call for call in pending if call.id not in seen]
        if missing:
            return (
                f"the result of tool call(s) {_calls(missing)} was not fed back; the request "
                "after a tool-call response must carry exactly one result per call id"
            )
        return paired

    def _fail(self, message: str) -> None:
        if self.error is None:
            self.error = message

    # --- what the runner reads -------------------------------------------------------------------

    @property
    def withheld_variables(self) -> tuple[str, ...]:
        """The environment variables an agent process must not be given: the model's
        (``withheld_variables``; a live model's key variable), none for a scripted one."""
        return self._model.withheld_variables

    @property
    def pending_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls handed out whose result has not come back yet."""
        with self._lock:
            return tuple(self._pending)

    @property
    def responses_served(self) -> int:
        """How many model responses have been handed out."""
        with self._lock:
            return self._responses

    @property
    def requests(self) -> tuple[ModelRequest, ...]:
        """Every model request received so far, refused ones included."""
        with self._lock:
            return tuple(self._requests)

    def fed_back(self) -> tuple[Dispatch, ...]:
        """Every result fed back so far, as the wire shows it (no agent reports laid over)."""
        with self._lock:
            return tuple(self._all_fed)

    def evidence(self) -> Evidence:
        """Everything observed so far, for the run record."""
        with self._lock:
            return Evidence(
                requests=tuple(self._requests),
                history=tuple(self._transcript),
                dispatches=tuple(self._dispatches),
                llm_calls=self._responses,
                input_tokens=self._input_tokens,
                output_tokens=self._output_tokens,
                error=self.error,
                responses=tuple(self._answers),
            )


# --- comparing a request with the run so far ------------------------------------------------------


def _conversation(request: object, where: str) -> list[Message]:
    """The request's messages without system prompts; a malformed request is a run error."""
    if not isinstance(request, ModelRequest):
        raise RunError(f"{where}: the agent sent a {type(request).__name__}, not a ModelRequest")
    messages = request.messages
    if not isinstance(messages, (tuple, list)):  # not "tuple | list": built on every call
        kind = type(messages).__name__
        raise RunError(f"{where}: ModelRequest.messages is a {kind}, not a tuple")
    out: list[Message] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise RunError(
                f"{where}: message {index + 1} is a {type(message).__name__}, not a Message"
            )
        if message.role not in MESSAGE_ROLES:  # a Message changed after it was built
            raise RunError(
                f"{where}: message {index + 1} has the role {_quote(str(message.role))}; a "
                f"Message's role is one of {', '.join(MESSAGE_ROLES)}"
            )
        if not isinstance(message.content, str):
            raise RunError(
                f"{where}: message {index + 1} has content of type "
                f"{type(message.content).__name__}, not str"
            )
        if message.role != "system":
            out.append(message)
    return out


def _choice_forbids(request: ModelRequest, response: ToolCallsResponse) -> str | None:
    """Why the request's ``tool_choice`` rules out the model's tool calls, or None."""
    choice = getattr(request, "tool_choice", "auto")
    if choice == "none":
        return (
            f"the request's tool_choice forbids tool calls (none), yet the model's answer "
            f"calls {_calls(response.tool_calls)}; a real model given this request could not "
            "have made these calls, so an agent that sends it cannot work"
        )
    if len(response.tool_calls) > 1 and _one_call_only(request):
        return (
            "the request forbids parallel tool calls (parallel_tool_calls: false, or "
            "disable_parallel_tool_use), yet the model's answer makes "
            f"{len(response.tool_calls)} calls ({_calls(response.tool_calls)}); a real model "
            "given this request could not have made them at once, so an agent that sends it "
            "cannot work with this script"
        )
    forced = getattr(request, "forced_tool", None)
    if choice == "tool" and forced is not None:
        other = [call for call in response.tool_calls if call.name != forced]
        if other:
            return (
                f"the request's tool_choice forces a call to {_quote(forced)}, yet the "
                f"model's answer calls {_calls(other)}; a real model given this request "
                "could not have made these calls"
            )
    return None


def _one_call_only(request: ModelRequest) -> bool:
    """Whether the request allows the model one tool call per answer: OpenAI's
    ``parallel_tool_calls: false``, Anthropic's ``tool_choice.disable_parallel_tool_use``."""
    parameters = getattr(request, "parameters", None) or {}
    if parameters.get("parallel_tool_calls") is False:
        return True
    choice = parameters.get("tool_choice")
    return isinstance(choice, dict) and choice.get("disable_parallel_tool_use") is True


def _empty_reply(message: Message) -> bool:
    return message.role == "assistant" and not message.tool_calls and not message.content.strip()


def _dropped_prefix(expected: list[Message], body: list[Message]) -> int:
    """How many leading messages of ``expected`` the request left out, when what it does
    carry lines up with the rest; 0 when it does not start that way."""
    if not body or not expected or _differs(expected[0], body[0]) is None:
        return 0
    for skip in range(1, len(expected)):
        rest = expected[skip:]
        if len(body) >= len(rest) and all(
            _differs(want, got) is None for want, got in zip(rest, body, strict=False)
        ):
            return skip
    return 0


class _SeenInputs:
    """The user inputs of the cases this process has run, the latest ones (bounded): a
    mismatched history message that is one of them is hinted to be another case's."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._inputs: dict[str, None] = {}
        self._lock = threading.Lock()

    def remember(self, inputs: Sequence[str]) -> None:
        with self._lock:
            for text in inputs:
                self._inputs.pop(text, None)
                self._inputs[text] = None
            while len(self._inputs) > self.LIMIT:
                del self._inputs[next(iter(self._inputs))]

    def holds(self, text: str) -> bool:
        with self._lock:
            return text in self._inputs


_SEEN_INPUTS = _SeenInputs()


def _differs(want: Message, got: Message) -> str | None:
    """How ``got`` differs from the message the run holds at its place, or None."""
    if want.role == "user":
        if got.role != "user" or got.content != want.content:
            return f"should be the user message {_quote(want.content)}, but is {_describe(got)}"
        return None
    if want.role == "tool":
        if got.role != "tool" or got.tool_call_id != want.tool_call_id:
            return f"should be {_describe(want)}, but is {_describe(got)}"
        if got.content != want.content:
            return (
                f"should be the result {_quote(want.content)} fed back earlier for tool call "
                f"{_quote(want.tool_call_id or '')}, but is {_quote(got.content)}"
            )
        return None
    if got.role != "assistant":
        return f"should be {_describe(want)}, but is {_describe(got)}"
    if want.tool_calls:
        return _calls_differ(want.tool_calls, got.tool_calls)
    if got.tool_calls:
        return f"should be the assistant's reply {_quote(want.content)}, but is {_describe(got)}"
    if got.content.strip() != want.content.strip():
        return (
            f"should be the assistant's reply {_quote(want.content)}, but is {_quote(got.content)}"
        )
    return None


def _calls_differ(want: tuple[ToolCall, ...], got: tuple[ToolCall, ...]) -> str | None:
    if len(got) != len(want):
        return f"should repeat the assistant's tool calls {_calls(want)}, but holds " + (
            _calls(got) if got else "none"
        )
    for scripted, echoed in zip(want, got, strict=True):
        if echoed.id != scripted.id or echoed.name != scripted.name:
            return (
                f"should repeat the assistant's tool calls {_calls(want)}, but holds {_calls(got)}"
            )
        if not same_arguments(scripted.arguments, echoed.arguments):
            return (
                f"repeats tool call {_quote(scripted.id)} ({scripted.name}) with arguments "
                f"{_quote(echoed.arguments)}, but the model sent {_quote(scripted.arguments)}"
            )
    return None


def same_arguments(scripted: str, seen: str) -> bool:
    """Equal argument text, or equal JSON values (an agent may re-serialise the object)."""
    if scripted == seen:
        return True
    if not scripted.strip() and seen.strip() in ("", "{}"):
        return True  # no argument text: the APIs' clients send it back as an empty object
    left, right = _json_or_none(scripted), _json_or_none(seen)
    if left is _NOT_JSON or right is _NOT_JSON:
        return False
    return json_equal(left, right)


_NOT_JSON = object()

_TRIM_HINT = (
    ". An agent that trims its history on purpose can say so with trimmed_history = true in [eval]"
)


def _json_or_none(text: str) -> object:
    try:
        return parse_arguments(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _describe(message: Message) -> str:
    if message.role == "user":
        return f"the user message {_quote(message.content)}"
    if message.role == "tool":
        return f"a result for tool call {_quote(message.tool_call_id or '')}"
    if message.role != "assistant":
        return f"a {message.role} message {_quote(message.content)}"
    if message.tool_calls:
        return f"the assistant's tool calls {_calls(message.tool_calls)}"
    return f"the assistant message {_quote(message.content)}"


def _calls(calls: Sequence[ToolCall]) -> str:
    return ", ".join(f"{_quote(call.id)} ({call.name})" for call in calls)


def _quote(text: str, limit: int = 120) -> str:
    shown = text if len(text) <= limit else text[: limit - 3] + "..."
    return json.dumps(shown, ensure_ascii=False)


# --- reconciling what the agent reported with what was observed -----------------------------------


@dataclass(frozen=True, slots=True)
class _Boundary:
    """What the tool side of a turn is held to besides the reports."""

    unoffered: Mapping[str, tuple[str, ...]]
    """Call id -> the names its request offered, for each call to a name it did not offer."""
    framed: bool
    """``framed_results``: the agent frames or truncates results on purpose."""


def _reconcile(
    turn: int,
    fed: list[tuple[ToolCall, Message]],
    reports: Sequence[ToolCallRecord] | None,
    tools: InvocationLog | None,
    api: str | None,
    handed: Mapping[str, int],
    boundary: _Boundary,
) -> list[Dispatch]:
    """The turn's dispatch records: results fed back, with the agent's reports laid over them.

    Without reports, only what the wire shows is known (and ``success`` only where the wire
    has an error flag). With reports, every fed-back call must be reported once, by its id
    and name, with the result that was fed back; and every reported dispatch must have been
    fed back. Records follow the order the agent reported (or fed back) them. A call to a
    name its request did not offer must have been answered as a failed call.
    """
    where = f"turn {turn + 1}"
    if reports is None:
        plain = [
            Dispatch(call, message.content, None, _success_flag(message)) for call, message in fed
        ]
        flagged = "fed its result back with is_error=false"
        _check_unoffered(where, plain, boundary.unoffered, flagged)
        _check_unoffered_seen(where, plain, boundary.unoffered)
        return plain
    by_id = {call.id: (call, message) for call, message in fed}
    unmatched = dict(by_id)
    out: list[Dispatch] = []
    for report in reports:
        key = report.id
        if key is None:  # older agents report without ids: take the next call of that name
            key = next((k for k, (c, _) in unmatched.items() if c.name == report.name), None)
        if key is None or key not in by_id:
            shown = f"{_quote(report.id)} " if report.id is not None else ""
            other_turn = handed.get(report.id or "")
            if other_turn is not None and other_turn != turn:
                why = f" in this turn (the model handed it out in turn {other_turn + 1})"
            elif other_turn is None and report.id is not None:
                why = " (the model never handed out that id)"
            else:
                why = ""
            raise RunError(
                f"{where}: the agent reported dispatching tool call {shown}({report.name}), "
                f"but no such call's result was fed back to the model{why}"
            )
        if key not in unmatched:
            raise RunError(
                f"{where}: the agent reported dispatching tool call {_quote(key)} "
                f"({report.name}) more than once"
            )
        call, message = unmatched.pop(key)
        if report.name != call.name:
            raise RunError(
                f"{where}: the agent reported tool call {_quote(call.id)} as a call to "
                f"{_quote(report.name)}, but the model called {_quote(call.name)}"
            )
        if report.result != message.content:
            raise RunError(
                f"{where}: the agent reported result {_quote(report.result)} for tool call "
                f"{_quote(call.id)} ({call.name}), but fed back {_quote(message.content)}"
            )
        if message.is_error is not None and message.is_error == report.success:
            raise RunError(
                f"{where}: the agent reported tool call {_quote(call.id)} ({call.name}) as "
                f"{'a success' if report.success else 'a failure'}, but fed its result back "
                f"with is_error={json.dumps(message.is_error)}"
            )
        # Reported as values equal to those handed out (an agent that parsed them reports the
        # object): the tool received the handed-out text, the one the fixture's checks read.
        sent = _as_sent(call.arguments, api)
        received = sent if same_arguments(sent, report.arguments) else report.arguments
        out.append(Dispatch(call, report.result, received, report.success))
    if unmatched:
        calls = [call for call, _ in unmatched.values()]
        raise RunError(
            f"{where}: the agent fed back the result of tool call(s) {_calls(calls)} but never "
            "reported dispatching them; report every dispatch (observer.on_tool_call, or "
            '"tool_calls" in a command agent\'s reply line)'
        )
    _check_unoffered(where, out, boundary.unoffered, "reported it as a success")
    if tools is not None:
        _check_invocations(where, out, tools.take(), tools.names, boundary)
    else:
        _check_fed_order(where, out, fed)
    return out


def _check_fed_order(where: str, out: list[Dispatch], fed: list[tuple[ToolCall, Message]]) -> None:
    """An agent running its own tools out of process: the order it fed the results back in is
    the only evidence of the order it ran them in, so its reports must follow it (in process,
    the tools' own log is held to the reports instead)."""
    position = {call.id: i for i, (call, _) in enumerate(fed)}
    latest: Dispatch | None = None
    for dispatch in out:
        if latest is not None and position[dispatch.call.id] < position[latest.call.id]:
            call, before = dispatch.call, latest.call
            raise RunError(
                f"{where}: the agent fed back the result of tool call {_quote(call.id)} "
                f"({call.name}) before that of {_quote(before.id)} ({before.name}), but "
                "reported dispatching them in the other order; dispatch the calls in the order "
                "the model gave them, and report and feed them back in that order"
            )
        latest = dispatch


def _check_unoffered(
    where: str, dispatches: Sequence[Dispatch], unoffered: Mapping[str, tuple[str, ...]], how: str
) -> None:
    """A call to a tool its request did not offer was answered as a failed call: an agent
    that runs a tool it never offered the model has a broken tool registry."""
    for dispatch in dispatches:
        offered = unoffered.get(dispatch.call.id)
        if offered is not None and dispatch.success:
            raise RunError(
                f"{where}: tool call {_quote(dispatch.call.id)} names "
                f"{_quote(dispatch.call.name)}, which its model request did not offer "
                f"({_offered(offered)}), yet the agent {how}; a call to a tool that was not "
                "offered must be answered as a failed call (an unknown tool)"
            )


def _check_unoffered_seen(
    where: str, dispatches: Sequence[Dispatch], unoffered: Mapping[str, tuple[str, ...]]
) -> None:
    """Without reports, on a wire with no error flag (both OpenAI APIs), whether the agent ran
    a tool its request did not offer cannot be seen: the fed-back text alone does not say
    whether a tool ran. Such a call must be seen answered as a failed call, so the case
    fails and says which evidence to give; passing it would let an agent that offers its
    tools under other names (``mcp__echo``) and runs ``echo`` all the same pass. A call to
    an offered tool needs no such proof: running it is what the model asked for."""
    for dispatch in dispatches:
        offered = unoffered.get(dispatch.call.id)
        if offered is not None and dispatch.success is None:
            raise RunError(
                f"{where}: tool call {_quote(dispatch.call.id)} names "
                f"{_quote(dispatch.call.name)}, which its model request did not offer "
                f"({_offered(offered)}); whether the agent ran it cannot be seen, since it "
                "reported no dispatches and this wire has no error flag. A call to a tool "
                "that was not offered must be answered as a failed call (an unknown tool): "
                'report every dispatch ("tool_calls" in the reply line, with success false)'
            )


def _offered(names: Sequence[str]) -> str:
    return "it offered " + ", ".join(_quote(n) for n in names) if names else "it offered none"


def _check_invocations(
    where: str,
    dispatches: list[Dispatch],
    invocations: Sequence[ToolInvocation],
    tool_names: frozenset[str],
    boundary: _Boundary,
) -> None:
    """Every call a tool received was reported, with the arguments the tool received; and a
    dispatch reported as a success of one of the case's tools reached that tool.

    Both sides of the boundary are then held to the model's: each tool received the
    arguments of the model's call (as JSON values), ran only if its request offered it, and
    what it returned (or the message it raised) is what was fed back for that call.
    """
    open_dispatches = list(dispatches)
    last = -1  # the report matched last: the tools must have been called in report order
    for invocation in invocations:
        same_name = [d for d in open_dispatches if d.call.name == invocation.tool]
        match = next((d for d in same_name if _received(d.arguments, invocation.arguments)), None)
        if match is None:
            if same_name:
                other = same_name[0]
                raise RunError(
                    f"{where}: the agent reported arguments {_quote(other.arguments or '')} "
                    f"for tool call {_quote(other.call.id)} ({other.call.name}), but the "
                    f"{invocation.tool} tool received {_quote(invocation.arguments_text)}"
                )
            raise RunError(
                f"{where}: the {invocation.tool} tool was called with "
                f"{_quote(invocation.arguments_text)}, but the agent reported no such dispatch "
                "(a call the model did not ask for, or one dispatched twice)"
            )
        position = dispatches.index(match)
        if position < last:
            before = dispatches[last].call
            raise RunError(
                f"{where}: the tools received tool call {_quote(match.call.id)} "
                f"({match.call.name}) after {_quote(before.id)} ({before.name}), but the agent "
                "reported them in the model's order; dispatch the calls in the order the model "
                "gave them"
            )
        last = position
        open_dispatches.remove(match)
        if invocation.raised and match.success:
            raise RunError(
                f"{where}: the agent reported tool call {_quote(match.call.id)} "
                f"({match.call.name}) as a success, but the {invocation.tool} tool raised"
            )
        problem = _boundary_problem(match, invocation, boundary)
        if problem is not None:
            raise RunError(f"{where}: {problem}")
    for left in open_dispatches:
        if left.success and left.call.name in tool_names:
            raise RunError(
                f"{where}: the agent reported tool call {_quote(left.call.id)} "
                f"({left.call.name}) as a success, but the {left.call.name} tool never "
                "received it"
            )


def _check_doubles(
    turn: int,
    dispatches: Sequence[Dispatch],
    doubles: Mapping[str, ToolDouble],
    framed: bool,
    unoffered: Mapping[str, tuple[str, ...]],
) -> None:
    """An agent that runs its own tools (a command agent) served the case's tool doubles as
    the fixture says: for the model's arguments, each call's result fed back is the double's
    answer, and a call no rule answers is the case's run error, as it is in process."""
    where = f"turn {turn + 1}"
    for dispatch in dispatches:
        call = dispatch.call
        double = doubles.get(call.name)
        arguments = _json_or_none(call.arguments) if double is not None else None
        if double is None or not isinstance(arguments, dict):
            continue  # not a double, or arguments the agent must refuse before any tool runs
        answered = answer(double, arguments)
        if answered is None:
            raise RunError(unanswered_message(call.name, arguments))
        kind, text = answered
        named = f"tool call {_quote(call.id)} ({call.name})"
        fed = dispatch.result
        if kind == "returns":
            wanted = text or "(no output)"
            if fed == wanted or (framed and _holds_result(fed, wanted)):
                if dispatch.success is False:
                    raise RunError(
                        f"{where}: the tool double {call.name} answered {named} with a result, "
                        "but the agent fed it back as a failed call"
                    )
                continue
        elif text in fed and dispatch.success is not True:
            continue
        never_served = _never_served(call, fed, unoffered)
        if never_served is not None:
            raise RunError(f"{where}: {never_served}")
        if kind == "returns":
            raise RunError(
                f"{where}: the tool double {call.name} returns {_quote(wanted)} for {named}, "
                f"but the agent fed back {_quote(fed)}; the result fed back must be what the "
                "tool returned"
            )
        how = "as a success" if dispatch.success is True else f"as {_quote(fed)}"
        raise RunError(
            f"{where}: the tool double {call.name} fails {named} with {_quote(text)}, "
            f"but the agent fed it back {how}; a failed call's result must say why it failed"
        )


def _never_served(call: ToolCall, fed: str, unoffered: Mapping[str, tuple[str, ...]]) -> str | None:
    """Why a double's call went unserved, when the agent never took the double up: its
    request did not offer it, or it fed back an unknown tool. A command agent that ignores
    the turn-1 line's ``tools`` fails this way, and "the result must be what the tool
    returned" would send its author looking at the wrong code."""
    offered = unoffered.get(call.id)
    if offered is None and "unknown tool" not in fed.lower():
        return None
    if offered is not None:
        why = f"the agent never offered the tool double {call.name} ({_offered(offered)})"
    else:
        why = f"the agent does not serve the tool double {call.name}"
    return (
        f"{why}, so tool call {_quote(call.id)} ({call.name}) was fed back as {_quote(fed)}; "
        'a command agent receives the case\'s tool doubles as "tools" on the turn-1 line, '
        "and must offer each to the model and answer its calls as the double's rules say"
    )


def _boundary_problem(
    dispatch: Dispatch, invocation: ToolInvocation, boundary: _Boundary
) -> str | None:
    """How one tool invocation differs from the model's side of its call, or None."""
    call = dispatch.call
    named = f"tool call {_quote(call.id)} ({call.name})"
    offered = boundary.unoffered.get(call.id)
    if offered is not None:
        return (
            f"the agent ran the {invocation.tool} tool for {named}, but its model request did "
            f"not offer {_quote(call.name)} ({_offered(offered)}); a call to a tool that was "
            "not offered must be answered as a failed call (an unknown tool), not run"
        )
    wanted = _json_or_none(call.arguments) if call.arguments.strip() else {}
    if wanted is _NOT_JSON or not json_equal(wanted, dict(invocation.arguments)):
        return (
            f"the {invocation.tool} tool received {_quote(invocation.arguments_text)} for "
            f"{named}, but the model's call has the arguments {_quote(call.arguments)}; a tool "
            "must receive the arguments the model sent"
        )
    fed = dispatch.result
    if invocation.raised:
        if invocation.message and invocation.message not in fed:
            return (
                f"the {invocation.tool} tool raised {_quote(invocation.message)} for {named}, "
                f"but the agent fed back {_quote(fed)}, which does not hold the error's "
                "message; a failed call's result must say why it failed"
            )
        return None
    returned = invocation.returned
    if returned is not None and not isinstance(returned, str):
        # Not text (a tool returning 42 or a dict): fed back as its text or as JSON of it,
        # never as something else.
        try:
            text = str(returned)
        except Exception:
            text = f"a {type(returned).__name__} that cannot be shown"
        parsed = _json_or_none(fed)
        if fed == text or (parsed is not _NOT_JSON and json_equal(parsed, returned)):
            return None
        return (
            f"the {invocation.tool} tool returned {_quote(text)} (not text) for "
            f"{named}, but the agent fed back {_quote(fed)}; the result fed back must be what "
            "the tool returned, as text or as JSON"
        )
    if not returned or fed == returned:
        return None  # an empty result may be fed back as a placeholder, e.g. "(no output)"
    if boundary.framed and _holds_result(fed, returned):
        return None
    if boundary.framed:
        return (
            f"the {invocation.tool} tool returned {_quote(returned)} for {named}, but the "
            f"agent fed back {_quote(fed)}, which holds neither the result nor a prefix of it "
            f"of at least {_FRAMED_PREFIX} characters (framed_results allows framing and "
            "truncating a result, not changing it)"
        )
    return (
        f"the {invocation.tool} tool returned {_quote(returned)} for {named}, but the agent "
        f"fed back {_quote(fed)}; the result fed back must be what the tool returned. An "
        "agent that frames or truncates results on purpose can say so with "
        "framed_results = true in [eval]"
    )


_FRAMED_PREFIX = 16
"""Under ``framed_results``, the shortest prefix of a result (or all of a shorter one) that
the fed-back text must hold: a truncated result keeps at least its beginning."""


def _holds_result(fed: str, returned: str) -> bool:
    """Whether ``fed`` holds ``returned``, or a prefix of it of :data:`_FRAMED_PREFIX`
    characters at least (a truncated result)."""
    if returned in fed:
        return True
    return returned[: min(len(returned), _FRAMED_PREFIX)] in fed


def _as_sent(arguments: str, api: str | None) -> str:
    """The argument text as the agent received it: verbatim, except on the Anthropic wire,
    which carries an object (so the agent never saw the fixture's spacing or key order)."""
    if api != "anthropic":
        return arguments
    value = _json_or_none(arguments)
    if not isinstance(value, dict):
        return arguments
    return argument_json(value)


def _success_flag(message: Message) -> bool | None:
    """What a fed-back result says of success: the wire's error flag, where it has one."""
    return None if message.is_error is None else not message.is_error


def _received(reported: str | None, received: Mapping[str, object]) -> bool:
    if reported is None:
        return False
    value = _json_or_none(reported)
    return value is not _NOT_JSON and json_equal(value, dict(received))
