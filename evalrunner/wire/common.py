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

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from evalrunner.model import JSONValue, ModelRequest, ModelResponse

STREAM_PIECE_CHARS = 16
"""Streamed text and argument JSON are cut into pieces of at most this many characters, so that
an agent's stream assembly is exercised the way a real model's stream exercises it."""

ANTHROPIC = "anthropic"
OPENAI = "openai"
OPENAI_RESPONSES = "openai-responses"
WIRES = (OPENAI, OPENAI_RESPONSES, ANTHROPIC)
"""Every wire's name (:attr:`WireAPI.name`, :attr:`~evalrunner.model.ModelRequest.api`)."""


@dataclass(frozen=True)
class ToolResult:
    """A tool call's result as an agent sends it back to the model.

    ``is_error`` is the API's failure flag; ``None`` where the API has none (both OpenAI APIs).
    """

    call_id: str
    content: str
    is_error: bool | None = None


@dataclass(frozen=True)
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
    def result_carrier(self) -> str:
        """How this API carries a tool result, as said in error messages."""
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
