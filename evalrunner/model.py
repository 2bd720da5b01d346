"""The plain values that flow between the pipeline stages.

``load`` yields :class:`RawDocument`, ``admit`` turns each into a :class:`Case` (or
:class:`AdmissionError` values), ``replay`` produces a :class:`RunRecord`, ``grade`` produces
:class:`GradeResult` values and ``report`` renders :class:`SuiteReport`. Everything here is a
frozen dataclass: stages never mutate what they were handed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, TypeAlias

JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"
"""What a fixture document is made of once parsed: JSON-compatible data, nothing else."""


def json_equal(left: object, right: object) -> bool:
    """Equal as JSON values: numbers by value (``1`` equals ``1.0``), a boolean never equals
    a number, objects by keys and values, arrays element by element. The one comparison of
    arguments, results and reply values, wherever the runner compares them."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    return type(left) is type(right) and left == right


def argument_json(value: object) -> str:
    """``value`` as tool-call argument text (SPEC §5): compact JSON, keys sorted, non-ASCII
    kept. The one definition: what a fixture's object arguments become, what the monitor
    compares a re-serialised or Anthropic-wire call by, and what a tool is logged as given."""
    return _ARGUMENT_ENCODER.encode(value)


_ARGUMENT_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""Built once: ``json.dumps`` with these options builds one on every call."""

JSONPath: TypeAlias = tuple[str | int, ...]
"""A location inside a document: object keys and array indices from the root."""

Format = Literal["json", "yaml", "toml"]
CaseClass = Literal["positive", "negative"]


def render_json_path(path: JSONPath) -> str:
    """``('turns', 0, 'steps')`` → ``$.turns[0].steps`` (the form jsonschema uses)."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += "[" + json.dumps(part, ensure_ascii=False) + "]"
    return out


@dataclass(frozen=True, slots=True)
class AdmissionError:
    """One reason a fixture (or config file) was refused, with where it is.

    ``line``/``col`` are 1-based; either may be ``None`` when the format gives no position
    (TOML schema errors whose key cannot be found). ``json_path`` is always present.
    """

    path: str
    message: str
    line: int | None = None
    col: int | None = None
    json_path: JSONPath = ()

    def __str__(self) -> str:
        if self.line is None and not self.json_path:
            return f"{self.path}: {self.message}"  # about the file as a whole
        if self.line is None:
            where = render_json_path(self.json_path)
            return f"{self.path}: at {where}: {self.message}"
        if self.col is None:
            return f"{self.path}:{self.line}: {self.message}"
        return f"{self.path}:{self.line}:{self.col}: {self.message}"

    def sort_key(self) -> tuple[str, int, int, str]:
        """Errors sort by file, then position (unpositioned ones last in their file)."""
        big = 1 << 30
        return (
            self.path,
            self.line if self.line is not None else big,
            self.col if self.col is not None else 0,
            self.message,
        )


# --- fixtures ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model issues it: ``arguments`` is the raw argument text.

    Arguments scripted as an object become compact JSON with sorted keys; arguments scripted as
    a string are kept verbatim so that fixtures can script malformed payloads.
    """

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class TextResponse:
    """The model answers with text: the end of a turn."""

    content: str
    input_tokens: int = 0
    output_tokens: int = 0
    cut_short: str | None = field(default=None, compare=False)
    """Why a live model stopped before a whole answer, as its API says it (``finish_reason
    "length"``, ``stop_reason "refusal"``, ...); ``None`` for a whole one (and every scripted
    one). An answer cut short is not graded as if it were whole."""
    usage_missing: str | None = field(default=None, compare=False)
    """The usage field a live answer left out or null while giving another (``usage.prompt_tokens``,
    say): its count is 0 here, so a token budget cannot be wholly enforced."""


@dataclass(frozen=True, slots=True)
class ToolCallsResponse:
    """The model asks for one or more tool calls, to be dispatched in order."""

    tool_calls: tuple[ToolCall, ...]
    input_tokens: int = 0
    output_tokens: int = 0
    cut_short: str | None = field(default=None, compare=False)
    """Why a live model stopped before a whole answer, as its API says it (``finish_reason
    "length"``, ``stop_reason "refusal"``, ...); ``None`` for a whole one (and every scripted
    one). An answer cut short is not graded as if it were whole."""
    usage_missing: str | None = field(default=None, compare=False)
    """The usage field a live answer left out or null while giving another (``usage.prompt_tokens``,
    say): its count is 0 here, so a token budget cannot be wholly enforced."""


ModelResponse: TypeAlias = TextResponse | ToolCallsResponse


@dataclass(frozen=True, slots=True)
class Turn:
    """One user message and the model responses scripted for it, in order."""

    user_input: str
    responses: tuple[ModelResponse, ...]
    expects: Expectations | None = None
    """The turn's own checks (``turns[i].expects``), graded on :meth:`RunRecord.turn`; ``None``
    when the turn declares none."""


@dataclass(frozen=True, slots=True)
class PayloadNeedle:
    """``{tool, needle, call_index?}``: a substring expected in one tool's arguments or result."""

    tool: str
    needle: str
    call_index: int | None = None


@dataclass(frozen=True, slots=True)
class ExpectedCall:
    """One expected dispatch of ``tool_calls_match``. JSON values are kept as compact JSON
    text (:func:`argument_json`), so expectations stay hashable."""

    tool: str
    arguments: str | None = None
    """JSON text of an object whose keys the dispatch's arguments must hold, equal as JSON."""
    arguments_schema: str | None = None
    """JSON text of a JSON Schema the dispatch's arguments must satisfy."""
    result_contains: str | None = None
    succeeded: bool | None = None


@dataclass(frozen=True, slots=True)
class ToolCallsMatch:
    """``tool_calls_match``: each expected call matched by a distinct dispatch."""

    calls: tuple[ExpectedCall, ...]
    order: Literal["in_order", "any"] = "in_order"
    extras: Literal["forbid", "allow"] = "forbid"


@dataclass(frozen=True, slots=True)
class ResponseJson:
    """``response_json``: the reply parses as JSON, satisfies ``schema`` (JSON text) and has
    each JSON Pointer of ``equals`` equal to a value (JSON text)."""

    schema: str | None = None
    equals: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Expectations:
    """The declared checks of a case, one field per expectation kind (``None`` = not declared).

    The field order is the grading order (SPEC §6). The kind registry in
    :mod:`evalrunner.expectations` must name exactly these fields; a test holds them together.
    """

    response_contains: tuple[str, ...] | None = None
    response_not_contains: tuple[str, ...] | None = None
    response_matches: tuple[str, ...] | None = None
    tools_used: tuple[str, ...] | None = None
    tools_not_used: tuple[str, ...] | None = None
    max_tool_calls: int | None = None
    min_tool_calls: int | None = None
    exact_tool_calls: int | None = None
    all_tools_succeeded: bool | None = None
    tool_arguments_contain: tuple[PayloadNeedle, ...] | None = None
    tool_results_contain: tuple[PayloadNeedle, ...] | None = None
    tools_offered: tuple[str, ...] | None = None
    tools_not_offered: tuple[str, ...] | None = None
    system_prompt_contains: tuple[str, ...] | None = None
    tool_calls_match: ToolCallsMatch | None = None
    response_json: ResponseJson | None = None


@dataclass(frozen=True, slots=True)
class DoubleRule:
    """One rule of a tool double: when the call's arguments hold ``when`` (a subset match of
    JSON values; ``None`` matches any call), the call returns ``returns`` (text verbatim, any
    other JSON value as compact JSON with sorted keys) or, with ``error``, fails with it."""

    when: Mapping[str, JSONValue] | None = field(default=None, hash=False)
    returns: JSONValue = field(default=None, hash=False)
    error: str | None = None

    @property
    def result_text(self) -> str:
        """What a call this rule answers returns (for a ``returns`` rule)."""
        return self.returns if isinstance(self.returns, str) else argument_json(self.returns)


@dataclass(frozen=True, slots=True)
class ToolDouble:
    """A tool a fixture declares (``tools:``): offered to the agent like any tool, answering
    each call by the first of its ``results`` rules that matches."""

    name: str
    results: tuple[DoubleRule, ...]
    description: str = ""
    parameters: Mapping[str, JSONValue] = field(default_factory=dict, hash=False)
    """JSON Schema of the arguments object (checked against the metaschema at admission)."""


@dataclass(frozen=True, slots=True)
class Case:
    """An admitted fixture: schema-valid, coherent, falsifiable, normalized across formats.

    ``source`` (the file it came from) and ``positions`` do not take part in equality, so the
    same case written in JSON, YAML and TOML admits to equal values.
    """

    name: str
    turns: tuple[Turn, ...]
    expects: Expectations
    description: str | None = None
    case_class: CaseClass | None = None
    tools: tuple[ToolDouble, ...] = ()
    """The case's tool doubles (``tools:``), in fixture order."""
    source: Path = field(default=Path(), compare=False)
    positions: Mapping[str, tuple[int, int]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """1-based (line, column) in ``source`` of the key ``name`` (``"name"``) and of each
    expectation kind's key (``"expects.<kind>"``), where the text gives them: reports point
    at the expectation a failed check comes from. An admitted case holds no fixture text:
    its positions are found in the file when first read
    (:class:`evalrunner.fixture.load.KeyPositions`)."""

    @property
    def live(self) -> bool:
        """A live case: no turn scripts steps, so only a real model can answer it."""
        return not any(turn.responses for turn in self.turns)


# --- runs -------------------------------------------------------------------------------------

DEFAULT_MAX_TOOL_ITERATIONS = 10
"""Model calls per turn the reference agent makes before it gives up (``max_tool_iterations``)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the agent offers the model about one tool."""

    name: str
    description: str
    parameters: dict[str, JSONValue]


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of the conversation history, in a provider-neutral shape.

    ``is_error`` is a tool result's failure flag where the wire carries one (Anthropic's
    ``is_error``); ``None`` elsewhere.
    """

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool | None = None

    def __post_init__(self) -> None:
        # Refused where it is built: a history holding a role no API has ("function") would
        # otherwise be read as some other message, far from the code that made it.
        if self.role not in MESSAGE_ROLES:
            raise ValueError(
                f"a Message's role is one of {', '.join(MESSAGE_ROLES)}, not {self.role!r}"
            )


MESSAGE_ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
"""The roles a :class:`Message` may have."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What an agent sends the model: the conversation so far and the tools on offer.

    Requests that arrive over HTTP also say which API they used (``"openai"`` or
    ``"anthropic"``), the model name the agent asked for, and whether it asked for a stream.
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    api: str | None = None
    model: str | None = None
    stream: bool = False
    parameters: Mapping[str, JSONValue] = field(default_factory=dict, compare=False, hash=False)
    """The request parameters the agent sent (:data:`evalrunner.wire.params.PARAMETERS`, in
    neutral form), which live mode passes on to the model; empty for an in-process agent."""
    tool_choice: Literal["auto", "none", "required", "tool"] = "auto"
    """Which tool calls the request allows: any (``auto``), none, at least one
    (``required``), or a call to :attr:`forced_tool` only (``tool``)."""
    forced_tool: str | None = None
    """With ``tool_choice="tool"``: the one tool the model must call."""


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One dispatch as it crossed the tool boundary.

    ``arguments`` is the argument text exactly as the agent received it and ``result`` exactly
    what the model is shown next: these two are what boundary expectations grade.
    """

    name: str
    arguments: str
    result: str
    success: bool
    id: str | None = None


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """Where one turn of a run ended: its final reply, and how many model requests and
    dispatches the run had made by then."""

    reply: str
    requests: int
    tool_calls: int


@dataclass(frozen=True, slots=True)
class RunRecord:
    """Everything observed while one case ran. The only input of grading besides the case."""

    final_response: str = ""
    history: tuple[Message, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    llm_calls: int = 0
    duration_ms: int = 0
    requests: tuple[ModelRequest, ...] = ()
    responses: tuple[tuple[int, ModelResponse], ...] = ()
    """Every model response served, with its turn (0-based), in order (for a recorder)."""
    error: str | None = None
    unobserved: tuple[str, ...] = ()
    """Dispatch fields this agent path gave no evidence of (``"arguments"``, ``"success"``):
    checks that read them fail and say how to supply the evidence, never pass on scripted
    data."""
    tracebacks: tuple[str, ...] = ()
    """The full tracebacks of exceptions raised in the agent or its in-process tools (shown
    with ``--traceback``)."""
    turn_ends: tuple[TurnEnd, ...] = ()
    """Each finished turn's final reply and where its requests and dispatches end, in order
    (for :meth:`turn`); empty when the case declares no per-turn checks."""

    def turn(self, index: int) -> RunRecord:
        """The run as turn ``index`` (0-based) saw it: its final reply, the requests and
        dispatches made during it, the responses served in it. What per-turn checks grade; a
        turn that never ended reads as a run that did nothing."""
        if index >= len(self.turn_ends):
            return replace(RunRecord.empty(), unobserved=self.unobserved)
        end = self.turn_ends[index]
        start = self.turn_ends[index - 1] if index else TurnEnd("", 0, 0)
        return replace(
            self,
            final_response=end.reply,
            tool_calls=self.tool_calls[start.tool_calls : end.tool_calls],
            requests=self.requests[start.requests : end.requests],
            responses=tuple(pair for pair in self.responses if pair[0] == index),
            turn_ends=(),
        )

    @property
    def tools_called(self) -> tuple[str, ...]:
        """Tool names in dispatch order, derived from :attr:`tool_calls`."""
        return tuple(call.name for call in self.tool_calls)

    @property
    def all_tools_succeeded(self) -> bool:
        """True when every dispatch succeeded (vacuously true when there were none)."""
        return all(call.success for call in self.tool_calls)

    @classmethod
    def empty(cls) -> RunRecord:
        """The run that did nothing: admission grades every case against it (falsifiability)."""
        return cls()


@dataclass(frozen=True, slots=True)
class GradeResult:
    """The outcome of one declared check."""

    check: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class CaseReport:
    """One case's verdict: its grades, or the run error that stopped it."""

    name: str
    source: str
    case_class: CaseClass | None
    grades: tuple[GradeResult, ...]
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    llm_calls: int = 0
    duration_ms: int = 0
    path: str = ""
    """The fixture's path as the run found it (``source`` is its file name); empty when not
    known."""
    tracebacks: tuple[str, ...] = field(default=(), compare=False)
    """Tracebacks of exceptions raised in the agent or its tools (shown with --traceback)."""
    positions: Mapping[str, tuple[int, int]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """:attr:`Case.positions` of the case, for reports that point into the fixture."""
    skipped: str | None = None
    """Why the case was not run (a live case in replay mode, a scripted case in live mode,
    the token budget spent); ``None`` for a case that ran. A skipped case is not a pass."""
    budget_cut: bool = field(default=False, compare=False)
    """Live mode: the token budget stopped this run, refusing one of its requests (its
    ``error`` then says so) or the case before it started (its ``skipped`` does). Set where
    the budget refused, never read back from a message's text (an agent's own error may quote
    one); the run core reads it (:mod:`evalrunner.repeats`, ``budget_spent``). Not in the
    JSON report, whose ``skipped`` and ``budget_spent`` say it; compared as the cause behind
    the verdict, not a verdict, so not in equality."""
    runs: tuple[CaseReport, ...] = ()
    """With ``--repeat K`` above 1: every run of the case, in order (each without runs of its
    own). The case's grades and error are then those of its first failed run (its first run
    when all passed), and its tokens, model calls and duration the sums over the runs; empty
    for a case run once."""

    @property
    def passed(self) -> bool:
        """A case passes when it ran without error and every check passed."""
        return self.skipped is None and self.error is None and all(g.passed for g in self.grades)


@dataclass(frozen=True, slots=True)
class Shard:
    """``--shard I/N``: the run takes slice ``index`` (from 1) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True, slots=True)
class CaseFingerprint:
    """One selected case as a shard saw it: its name, fixture source and the SHA-256 of the
    fixture's bytes."""

    name: str
    source: str
    sha256: str


@dataclass(frozen=True, slots=True)
class SuiteFingerprint:
    """The suite a shard was dealt from: the paths run, the ``-k`` expression, and every
    selected case (of all shards), in suite order. Shards of one run carry equal ones."""

    paths: tuple[str, ...]
    keyword: str | None
    cases: tuple[CaseFingerprint, ...]


@dataclass(frozen=True, slots=True)
class SuiteReport:
    """The outcome of a whole run, as rendered by :mod:`evalrunner.report`."""

    suite: str
    mode: str
    cases: tuple[CaseReport, ...]
    duration_ms: int = 0
    interrupted: int | None = None
    """The signal number that stopped the run early (``cases`` then holds the finished ones)."""
    trimmed_history: bool = False
    """The run let agents trim earlier turns from their history (``[eval] trimmed_history``)."""
    framed_results: bool = False
    """The run let agents frame or truncate tool results (``[eval] framed_results``)."""
    keyword: str | None = None
    """The ``-k`` expression that selected the cases, if one was given."""
    shard: Shard | None = None
    """The slice of the selected cases this run took (``--shard``), if any."""
    selected: int | None = None
    """With a shard: how many cases all shards together hold."""
    admission_errors: tuple[AdmissionError, ...] = ()
    """Files refused while the admitted cases ran (``--continue-on-admission-errors``)."""
    agent: str | None = None
    """The agent under test: ``reference``, ``python:module:factory`` or ``command:<cmd>``
    (``None``: not said by whoever ran the suite)."""
    budget_spent: str | None = None
    """Live mode: the sentence saying the token budget stopped the run (cases were left
    unrun or cut off), or ``None``."""
    live_stopped: str | None = None
    """Live mode: the run error every request would have met alike (the key refused with
    HTTP 401, a redirect), which stopped the run at its first case to meet it, or ``None``."""
    repeat: int = 1
    """How many times each case ran (``--repeat K``); with more than one, each case holds its
    :attr:`CaseReport.runs` and passes only when every run passed."""
    fingerprint: SuiteFingerprint | None = None
    """With a shard: the suite it was dealt from (``merge`` refuses shards of two versions)."""
    late_exits: tuple[str, ...] = ()
    """What ended, or tried to end, a process of the run outside every case: an ``os._exit``
    no case held (a daemon thread that outlived its case), a ``--jobs`` worker death no case
    explains (:func:`evalrunner.process_exit.unclaimed`). No case carries them, so the run
    itself is not a pass."""

    @property
    def passed(self) -> int:
        """Number of cases that passed."""
        return sum(1 for c in self.cases if c.passed)

    @property
    def skipped(self) -> int:
        """Number of cases that were not run (:attr:`CaseReport.skipped`)."""
        return sum(1 for c in self.cases if c.skipped is not None)

    @property
    def failed(self) -> int:
        """Number of cases that ran and failed or errored."""
        return len(self.cases) - self.passed - self.skipped

    @property
    def all_passed(self) -> bool:
        """True when the run finished (no signal, no budget stop), no file was refused, no
        case failed, nothing ended a process of the run outside its cases, and some case ran
        if any was selected: a run that graded nothing is not green."""
        return (
            self.failed == 0
            and self.interrupted is None
            and self.budget_spent is None
            and self.live_stopped is None
            and not self.late_exits
            and not self.admission_errors
            and (self.passed > 0 or not self.cases)
        )


@dataclass(frozen=True, slots=True)
class RunRefused:
    """Why a run could not start: bad usage or config, admission errors, no fixtures, a mode
    that is not available. Exit code 2."""

    reasons: tuple[str, ...] = ()
    admission_errors: tuple[AdmissionError, ...] = ()

    def lines(self) -> tuple[str, ...]:
        """Every problem, one line each, as printed on stderr."""
        return self.reasons + tuple(str(e) for e in self.admission_errors)


class RunError(Exception):
    """Something went wrong while replaying one case; it fails that case only."""


class AnswerNotPassed(RunError):
    """The model answered, but its answer is not passed to the agent (the message says why):
    ``response`` is that answer, whose tokens were spent all the same and are counted."""

    def __init__(self, message: str, response: ModelResponse) -> None:
        super().__init__(message)
        self.response = response


class RunInterrupted(BaseException):
    """A signal asked the run to stop (raised by the command line's SIGINT/SIGTERM handlers).

    A ``BaseException``, like ``KeyboardInterrupt``, so that no agent's ``except Exception``
    can swallow it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
