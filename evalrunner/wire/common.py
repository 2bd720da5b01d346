"""What the replay endpoint needs from a model API's wire format, whichever API it is.

The endpoint (:mod:`evalrunner.wire.endpoint`) speaks OpenAI chat completions, the OpenAI
Responses API and Anthropic messages; each is one :class:`WireAPI`
(:mod:`evalrunner.wire.openai_chat`, :mod:`evalrunner.wire.openai_responses`,
:mod:`evalrunner.wire.anthropic`). A wire API reads a request body into the neutral
:class:`~evalrunner.model.ModelRequest` plus what the endpoint acts on (the tool results the
request carries, whether it opens a turn), and writes a scripted response back as one JSON body
or as server-sent events.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, Protocol, TypeVar

from evalrunner.model import (
    JSONValue,
    ModelRequest,
    ModelResponse,
    TextResponse,
    ToolCall,
    ToolCallsResponse,
    ToolSpec,
)
from evalrunner.wire import ANTHROPIC as ANTHROPIC
from evalrunner.wire import OPENAI as OPENAI
from evalrunner.wire import OPENAI_RESPONSES as OPENAI_RESPONSES
from evalrunner.wire import WIRES as WIRES

STREAM_PIECE_CHARS = 16
"""Streamed text and argument JSON are cut into pieces of at most this many characters, so that
an agent's stream assembly is exercised the way a real model's stream exercises it."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool call's result as an agent sends it back to the model.

    ``is_error`` is the API's failure flag; ``None`` where the API has none (both OpenAI APIs).
    """

    call_id: str
    content: str
    is_error: bool | None = None


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One model request as read off the wire.

    ``user_text`` is the text of the request's last message when that message is a new user
    message (not tool results): such a request opens a turn. ``stream_usage`` says whether a
    stream should end with token usage (OpenAI sends it only when asked).

    ``previous_response_id`` names a served response whose conversation the request continues
    (the Responses API): ``request.messages`` then hold only what the request itself carries,
    and the endpoint puts that conversation before them. ``store`` false asks that this
    response not be kept for such a continuation.
    """

    request: ModelRequest
    tool_results: tuple[ToolResult, ...] = ()
    user_text: str | None = None
    stream_usage: bool = True
    previous_response_id: str | None = None
    store: bool = True


class WireRequestError(Exception):
    """The body is JSON but not a request of this API; the endpoint answers 400."""


class WireAPI(Protocol):
    """One model API's request and response formats."""

    @property
    def name(self) -> str:
        """One of :data:`WIRES`: the value of :attr:`ModelRequest.api`."""
        ...

    @property
    def continues_responses(self) -> bool:
        """Whether a request may continue a served response by its id instead of carrying
        the history (``previous_response_id``): the endpoint then keeps each response's
        conversation for the case."""
        ...

    def read_request(self, body: JSONValue) -> WireRequest:
        """The request a parsed JSON body holds; raises :class:`WireRequestError`."""
        ...

    def unservable(self, response: ModelResponse) -> str | None:
        """Why this API cannot carry ``response`` faithfully, or ``None`` when it can."""
        ...

    def response_id(self, serial: int) -> str:
        """The id of the ``serial``-th response (1-based), in this API's style."""
        ...

    def response_body(self, response: ModelResponse, *, response_id: str, model: str) -> JSONValue:
        """``response`` as a non-streaming response body."""
        ...

    def stream_events(
        self, response: ModelResponse, *, response_id: str, model: str, usage: bool
    ) -> list[str]:
        """``response`` as server-sent event frames, in order, each ending in a blank line."""
        ...

    def error_body(self, status: int, message: str) -> JSONValue:
        """This API's error body for an HTTP ``status``."""
        ...


def tool_choice(raw: JSONValue) -> dict[str, Any]:
    """A request's ``tool_choice``, as :class:`ModelRequest` fields, in whichever API's shape:
    ``"none"``/``"auto"``/``"required"`` (OpenAI), ``{"type": "function", ...}`` naming a
    function (either OpenAI API), or ``{"type": "none"|"auto"|"any"|"tool", "name": ...}``
    (Anthropic). Anything else leaves the model's choice open (``auto``)."""
    kind = raw.get("type") if isinstance(raw, dict) else raw
    if kind == "none":
        return {"tool_choice": "none"}
    if kind in ("required", "any"):
        return {"tool_choice": "required"}
    if isinstance(raw, dict) and kind in ("tool", "function"):
        inner = raw.get("function")
        name = inner.get("name") if isinstance(inner, dict) else raw.get("name")
        if isinstance(name, str):
            return {"tool_choice": "tool", "forced_tool": name}
    return {}


def offered_tools(
    raw: JSONValue, tools: tuple[ToolSpec, ...]
) -> tuple[tuple[ToolSpec, ...], dict[str, Any]]:
    """The tools a request offers and its :func:`tool_choice` fields. ``tool_choice``
    ``{"type": "allowed_tools", ...}`` (either OpenAI API) restricts the model to some of
    ``tools``: only those are offered, so the checks on what was offered, and a scripted call
    to a tool left out, are judged by them. Chat completions nests the mode and the list in
    ``allowed_tools``; the Responses API does not."""
    if not isinstance(raw, dict) or raw.get("type") != "allowed_tools":
        return tools, tool_choice(raw)
    at, body = "tool_choice", raw
    if "allowed_tools" in raw:
        at = "tool_choice.allowed_tools"
        body = require_object(raw["allowed_tools"], at)
    mode = body.get("mode")
    if mode not in ("auto", "required"):
        raise WireRequestError(f'{at}.mode must be "auto" or "required"')
    have = {tool.name for tool in tools}
    allowed: set[str] = set()
    for index, entry in enumerate(require_list(body.get("tools"), f"{at}.tools")):
        here = f"{at}.tools[{index}]"
        item = require_object(entry, here)
        if item.get("type") != "function":
            raise WireRequestError(f'{here}.type must be "function" (other tools are not replayed)')
        function = item.get("function")
        if isinstance(function, dict):
            name = require_name(function.get("name"), f"{here}.function.name")
        else:
            name = require_name(item.get("name"), f"{here}.name")
        if name not in have:
            raise WireRequestError(
                f"{here} allows {json.dumps(name)}, which the request's tools do not offer"
            )
        allowed.add(name)
    choice = {"tool_choice": "required"} if mode == "required" else {}
    return tuple(tool for tool in tools if tool.name in allowed), choice


def wire_json(value: JSONValue | Mapping[str, JSONValue]) -> str:
    """Compact JSON for the wire. ASCII-escaped so that any text, even a lone surrogate a
    fixture's string may hold, encodes."""
    # allow_nan=False: "Infinity" is not JSON; a value that holds one is a bug upstream, and
    # it must surface as an error rather than reach an agent as an invalid body.
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def sse_frame(data: JSONValue | Mapping[str, JSONValue], event: str | None = None) -> str:
    """One server-sent event: an optional ``event:`` line and one ``data:`` line."""
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {wire_json(data)}\n\n"


def stream_pieces(text: str) -> list[str]:
    """``text`` cut into the pieces a stream sends (none for empty text)."""
    return [text[i : i + STREAM_PIECE_CHARS] for i in range(0, len(text), STREAM_PIECE_CHARS)]


def text_of_parts(parts: list[JSONValue], where: str) -> str:
    """The text blocks of a content list, concatenated; other blocks (images, ...) carry no
    text for the conversation and are skipped. Raises :class:`WireRequestError` on a part
    that is not an object or a text block without a string ``text``."""
    pieces: list[str] = []
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            raise WireRequestError(f"{where}[{index}] must be an object")
        if part.get("type") == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise WireRequestError(f"{where}[{index}].text must be a string")
            pieces.append(text)
    return "".join(pieces)


def request_with_messages(body: JSONValue) -> tuple[dict[str, JSONValue], list[JSONValue]]:
    """A request body (an object) and its non-empty ``messages`` list, which both APIs need."""
    request = require_object(body, "the request body")
    raw_messages = require_list(request.get("messages"), "messages")
    if not raw_messages:
        raise WireRequestError("messages must not be empty")
    return request, raw_messages


def require_object(value: JSONValue, where: str) -> dict[str, JSONValue]:
    """``value`` when it is a JSON object; else :class:`WireRequestError`."""
    if not isinstance(value, dict):
        raise WireRequestError(f"{where} must be an object")
    return value


def require_list(value: JSONValue, where: str) -> list[JSONValue]:
    """``value`` when it is a JSON array; else :class:`WireRequestError`."""
    if not isinstance(value, list):
        raise WireRequestError(f"{where} must be an array")
    return value


def require_name(value: JSONValue, where: str) -> str:
    """A tool call's id or name: a string that is not empty (an empty one names nothing the
    agent could dispatch or answer); else :class:`WireRequestError`."""
    text = require_string(value, where)
    if not text:
        raise WireRequestError(f"{where} must not be empty")
    return text


def require_string(value: JSONValue, where: str) -> str:
    """``value`` when it is a string; else :class:`WireRequestError`."""
    if not isinstance(value, str):
        raise WireRequestError(f"{where} must be a string")
    return value


def optional_string(value: JSONValue, where: str) -> str | None:
    """``value`` when it is a string or absent (``None``); else :class:`WireRequestError`."""
    return None if value is None else require_string(value, where)


def stream_flag(body: dict[str, JSONValue]) -> bool:
    """The request's ``stream`` flag (absent or null = false)."""
    value = body.get("stream")
    if value is None:
        return False
    if not isinstance(value, bool):
        raise WireRequestError("stream must be a boolean")
    return value


def tool_parameters(value: JSONValue, where: str) -> dict[str, JSONValue]:
    """A tool's JSON Schema (absent = ``{}``)."""
    return {} if value is None else require_object(value, where)


# --- the client side: what a live client or an agent command sends, and reads back ------------


class WireResponseError(Exception):
    """A model's answer that is not a response of its API (malformed JSON, a broken stream,
    a missing field); the message says what was wrong, never what the request carried."""


class ModelFailed(WireResponseError):
    """An answer that says the model failed to answer (the Responses API's ``status:
    "failed"``, or its stream's ``error`` event), with the API's error ``code`` (``None``
    when it gave none) and message; ``failure`` says which of the two it was."""

    def __init__(
        self, code: str | None, message: str, failure: str = "the model failed to answer"
    ) -> None:
        super().__init__(f"{failure} ({code or 'no code'}): {message}")
        self.code = code
        self.message = message
        self.failure = failure


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One server-sent event: its ``event:`` name (``None`` without one) and its ``data:``
    lines joined."""

    event: str | None
    data: str


def parse_sse(lines: Iterable[str]) -> Iterator[SseEvent]:
    """The events of a server-sent event stream, given its lines (with or without their line
    endings). A last event cut off before its blank line is still yielded: whether the stream
    ended properly is for the API's reader to say."""
    event: str | None = None
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SseEvent(event, "\n".join(data))
            event, data = None, []
        elif line.startswith(":"):
            continue  # a comment (a keep-alive)
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
    if data:
        yield SseEvent(event, "\n".join(data))


def event_json(event: SseEvent, where: str) -> dict[str, JSONValue]:
    """An event's data as a JSON object; :class:`WireResponseError` when it is not one."""
    try:
        value = json.loads(event.data, parse_constant=_refuse_constant, parse_float=finite_float)
    except (ValueError, RecursionError):
        raise WireResponseError(f"{where} is not valid JSON: {_excerpt(event.data)}") from None
    if not isinstance(value, dict):
        raise WireResponseError(f"{where} is not a JSON object: {_excerpt(event.data)}")
    return value


def body_json(raw: bytes) -> JSONValue:
    """A response body parsed as JSON; :class:`WireResponseError` when it is not JSON."""
    try:
        value: JSONValue = json.loads(
            raw, parse_constant=_refuse_constant, parse_float=finite_float
        )
    except (ValueError, RecursionError):
        text = raw[:80].decode("utf-8", "replace")
        raise WireResponseError(f"the response body is not valid JSON: {_excerpt(text)}") from None
    return value


def token_count(usage: dict[str, JSONValue], key: str, where: str) -> int:
    """A usage field: a whole number of tokens, 0 when absent or null."""
    value = usage.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise WireResponseError(f"{where}.{key} must be a whole number of tokens")
    return value


def usage_counts(
    usage: dict[str, JSONValue],
    keys: tuple[str, str],
    where: str = "usage",
    also_input: tuple[str, ...] = (),
) -> tuple[int, int, str | None]:
    """A usage object's input and output counts (``keys``, in that order), and the field it
    leaves out or null while giving the other (``usage.prompt_tokens``, say), else ``None``:
    a count read as 0 that the model did spend. The ``also_input`` counts are input tokens
    the API reports apart from ``keys[0]``: they are added to it."""
    tokens_in = token_count(usage, keys[0], where)
    tokens_in += sum(token_count(usage, key, where) for key in also_input)
    given = [usage.get(key) is not None for key in keys]
    missing = f"{where}.{keys[given.index(False)]}" if any(given) and not all(given) else None
    return tokens_in, token_count(usage, keys[1], where), missing


def answered(
    calls: tuple[ToolCall, ...] | list[ToolCall],
    text: str,
    usage: tuple[int, int, str | None],
    cut_short: str | None = None,
) -> ModelResponse:
    """The response an answer gives: its tool calls, else its text, with its usage and why
    it was cut short (``None`` when whole)."""
    tokens_in, tokens_out, missing = usage
    if calls:
        return ToolCallsResponse(
            tuple(calls), tokens_in, tokens_out, cut_short=cut_short, usage_missing=missing
        )
    return TextResponse(text, tokens_in, tokens_out, cut_short=cut_short, usage_missing=missing)


CUT_SHORT: dict[str, tuple[str, dict[str, str]]] = {
    OPENAI: (
        "finish_reason",
        {
            "length": "the output limit (max_tokens) was reached",
            "content_filter": "a content filter withheld the rest",
        },
    ),
    OPENAI_RESPONSES: (
        'status "incomplete", reason',
        {
            "max_output_tokens": "the output limit (max_output_tokens) was reached",
            "content_filter": "a content filter withheld the rest",
        },
    ),
    ANTHROPIC: (
        "stop_reason",
        {
            "max_tokens": "the output limit (max_tokens) was reached",
            "model_context_window_exceeded": "the model's context window was filled",
            "refusal": "the model refused to answer",
            "pause_turn": "the model paused its turn, to be continued in another request",
        },
    ),
}
"""Per wire, the field that says why an answer ended, and the values of it that end an
answer before it is whole, with what each means (read by :func:`cut_short`)."""


def cut_short(wire: str, reason: JSONValue) -> str | None:
    """Why an answer of ``wire`` whose end-reason field holds ``reason`` was cut short, as
    :data:`CUT_SHORT` words it; ``None`` for a reason that ends a whole answer."""
    field, reasons = CUT_SHORT[wire]
    if isinstance(reason, str) and reason in reasons:
        return f'{field} "{reason}": {reasons[reason]}'
    return None


def refused_cut(refusal: str | None) -> str | None:
    """Why an answer that carries a refusal (``refusal`` its text) is no answer: that text
    is the model's reason for not replying, and grading it, or the empty text beside it, as
    a reply would judge an answer never given. ``None`` without one."""
    if not refusal:
        return None
    return f"refusal {_excerpt(refusal, 200)}: the model refused to answer"


def url_with_path(base_url: str, path: str) -> str:
    """``base_url`` with ``path`` appended to its path, its query (a gateway's key, say) kept
    after it: ``https://h/v1?k=x`` and ``/chat/completions`` give
    ``https://h/v1/chat/completions?k=x``."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path, fragment=""))


def reading(where: str) -> _Reading:
    """A context in which a malformed request-side value (a :class:`WireRequestError` from
    the ``require_*`` helpers) is a malformed *response*, named as such."""
    return _Reading(where)


class _Reading:
    def __init__(self, where: str) -> None:
        self._where = where

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, WireRequestError):
            raise WireResponseError(f"{self._where}: {exc}") from None


T = TypeVar("T")


class Counted(Generic[T]):
    """An iterable that counts what it has handed out (:attr:`number`, the last one's
    1-based place): a stream reader's guard names the event it failed at."""

    def __init__(self, items: Iterable[T]) -> None:
        self._items = items
        self.number = 0

    def __iter__(self) -> Iterator[T]:
        for item in self._items:
            self.number += 1
            yield item


@contextlib.contextmanager
def answer_guard(where: Callable[[], str]) -> Iterator[None]:
    """A context in which any value of the wrong kind a reader trips on becomes a
    :class:`WireResponseError` naming ``where()``. The readers check each field they read;
    this is the net under them, so that no answer, however garbled, surfaces as a crash of
    evalrunner's own. Text that is not UTF-8 (a :class:`UnicodeError`) and the transport's
    own errors pass through: they are not the answer's fields."""
    try:
        yield
    except (WireResponseError, UnicodeError):
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError) as exc:
        raise WireResponseError(
            f"{where()}: a field holds a value of a kind the API does not send "
            f"({type(exc).__name__})"
        ) from None


def _excerpt(text: str, limit: int = 60) -> str:
    shown = text if len(text) <= limit else text[: limit - 3] + "..."
    return json.dumps(shown)


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def finite_float(text: str) -> float:
    """A JSON number as a float, refusing one too large for a float (``1e400``): it would
    read as infinity, which no JSON text can carry on to the agent or the next request."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a float")
    return value
