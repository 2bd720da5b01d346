"""The OpenAI Responses API on the wire (``POST /v1/responses``), both directions.

The default API of the OpenAI Agents SDK and of ``client.responses.create`` in the ``openai``
SDK. Requests carry ``instructions`` (a system prompt) and ``input``: a string (one user
message) or a list of items:

- ``message`` items (``type`` may be left out) with role ``user``, ``system``, ``developer``
  or ``assistant``, whose content is a string or a list of parts (``input_text`` and
  ``output_text`` carry text; images, files and refusals carry none and are skipped);
- ``function_call`` items (``call_id``, ``name``, ``arguments`` text): the assistant's calls;
  consecutive assistant items make one assistant message in the neutral history;
- ``function_call_output`` items (``call_id``, ``output`` text or parts): a tool result. The
  API has no error flag on it, so a result fed back here says nothing of success.

Any other item type (hosted tools, reasoning, item references, ...) cannot be part of a
replayed conversation, and a request holding one is refused (400) with the item's place. Only
flat ``function`` tools are understood.

``previous_response_id`` continues a response this endpoint served: the real API keeps each
response's conversation, so a request naming one need not carry the history. The replay
endpoint does the same for the responses it served *in the current case* (``store`` false
keeps one from being continued, as the real API would not find it); that state lives in the
endpoint (:class:`~evalrunner.wire.endpoint.ReplayEndpoint`), and the monitor sees the whole
conversation. Naming any other id is refused with a message saying what would work.

Responses carry the fixture's tool-call ids as ``call_id`` and its argument text verbatim
(``arguments`` is a string here, as on chat completions). Streams are ``event:`` + ``data:``
frames from ``response.created`` to ``response.completed``, each with its ``sequence_number``.

Both directions live here: :class:`OpenAIResponses` reads requests and writes responses (the
replay endpoint), and :func:`request_body`, :func:`read_response` and :func:`read_stream`
write requests and read responses (the clients of :mod:`evalrunner.wire.client`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from evalrunner.model import (
    JSONValue,
    Message,
    ModelRequest,
    ModelResponse,
    TextResponse,
    ToolCall,
    ToolCallsResponse,
    ToolSpec,
)
from evalrunner.wire.common import (
    OPENAI_RESPONSES,
    Counted,
    ModelFailed,
    SseEvent,
    ToolResult,
    WireRequest,
    WireRequestError,
    WireResponseError,
    answer_guard,
    answered,
    event_json,
    offered_tools,
    optional_string,
    reading,
    refused_cut,
    require_list,
    require_name,
    require_object,
    require_string,
    sse_frame,
    stream_flag,
    stream_pieces,
    tool_parameters,
    url_with_path,
    usage_counts,
)
from evalrunner.wire.params import sent_parameters

CREATED = 0
"""The ``created_at`` timestamp of every response: replayed responses are the same every time."""

_ERROR_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
}

_MESSAGE_ROLES = {"user": "user", "system": "system", "developer": "system"}

_TEXT_PARTS = {"input_text", "output_text"}
"""Content parts whose ``text`` is conversation text."""

_SILENT_PARTS = {"input_image", "input_file", "input_audio", "refusal"}
"""Content parts that carry no text for the conversation (a refusal is never scripted, so one
sent back differs from the run anyway, which the monitor then says)."""

_ITEM_TYPES = "message, function_call, function_call_output"


class OpenAIResponses:
    """The OpenAI Responses API as a :class:`~evalrunner.wire.common.WireAPI`."""

    name = OPENAI_RESPONSES
    continues_responses = True

    def read_request(self, body: JSONValue) -> WireRequest:
        """Read a Responses API request body."""
        request = require_object(body, "the request body")
        if request.get("conversation") is not None:
            raise WireRequestError(
                "conversation (the Conversations API) is not replayed: send the history in "
                "input, or continue a response with previous_response_id"
            )
        messages: list[Message] = []
        instructions = optional_string(request.get("instructions"), "instructions")
        if instructions is not None:
            messages.append(Message("system", instructions))
        raw_input = request.get("input")
        if isinstance(raw_input, str):
            items: list[JSONValue] = [{"role": "user", "content": raw_input}]
        else:
            if not isinstance(raw_input, list):
                raise WireRequestError("input must be a string or an array of items")
            items = raw_input
            if not items:
                raise WireRequestError("input must not be empty")
        conversation = input_messages(items)
        messages += conversation
        last = conversation[-1]
        previous = optional_string(request.get("previous_response_id"), "previous_response_id")
        if previous is not None and not previous:
            raise WireRequestError("previous_response_id must not be empty")
        store = request.get("store")
        if store is not None and not isinstance(store, bool):
            raise WireRequestError("store must be a boolean")
        offered, choice = offered_tools(request.get("tool_choice"), _tools(request.get("tools")))
        return WireRequest(
            request=ModelRequest(
                messages=tuple(messages),
                tools=offered,
                **choice,
                api=OPENAI_RESPONSES,
                model=optional_string(request.get("model"), "model"),
                stream=stream_flag(request),
                parameters=sent_parameters(OPENAI_RESPONSES, request),
            ),
            tool_results=tuple(
                ToolResult(m.tool_call_id, m.content)
                for m in conversation
                if m.role == "tool" and m.tool_call_id is not None
            ),
            user_text=last.content if last.role == "user" else None,
            previous_response_id=previous,
            store=store is not False,
        )

    def unservable(self, response: ModelResponse) -> str | None:
        """Anything scripted can be sent: arguments travel as text."""
        return None

    def response_id(self, serial: int) -> str:
        """``resp_replay_N``."""
        return f"resp_replay_{serial}"

    def response_body(self, response: ModelResponse, *, response_id: str, model: str) -> JSONValue:
        """A ``response`` object, ``status: completed``."""
        return _response_object(
            response_id, model, "completed", _output_items(response, response_id), response
        )

    def stream_events(
        self, response: ModelResponse, *, response_id: str, model: str, usage: bool
    ) -> list[str]:
        """``response.created``, ``response.in_progress``, then per output item
        ``output_item.added``, its text or argument deltas and their ``done`` events,
        ``output_item.done``; then ``response.completed`` with the whole response (usage
        included: this API always sends it, so ``usage`` is not consulted)."""
        events = _Events()
        opening = _response_object(response_id, model, "in_progress", [], None)
        events.add("response.created", response=opening)
        events.add("response.in_progress", response=opening)
        items = _output_items(response, response_id)
        for index, item in enumerate(items):
            item_id = str(item["id"])
            if item["type"] == "message":
                text = response.content if isinstance(response, TextResponse) else ""
                events.add(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "content": []},
                )
                place: dict[str, JSONValue] = {
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": 0,
                }
                events.add("response.content_part.added", **place, part=_text_part(""))
                for piece in stream_pieces(text):
                    events.add("response.output_text.delta", **place, delta=piece, logprobs=[])
                events.add("response.output_text.done", **place, text=text, logprobs=[])
                events.add("response.content_part.done", **place, part=_text_part(text))
            else:
                arguments = str(item["arguments"])
                events.add(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "arguments": ""},
                )
                for piece in stream_pieces(arguments):
                    events.add(
                        "response.function_call_arguments.delta",
                        item_id=item_id,
                        output_index=index,
                        delta=piece,
                    )
                events.add(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=index,
                    arguments=arguments,
                )
            events.add("response.output_item.done", output_index=index, item=item)
        closing = _response_object(response_id, model, "completed", items, response)
        events.add("response.completed", response=closing)
        return events.frames

    def error_body(self, status: int, message: str) -> JSONValue:
        """``{"error": {"message", "type", "param", "code"}}``, as the API sends it."""
        error_type = _ERROR_TYPES.get(status, "replay_error")
        code = "run_error" if status >= 500 else None
        return {"error": {"message": message, "type": error_type, "param": None, "code": code}}

    # --- the client side, as a ClientWire (evalrunner.wire.client) ----------------------------

    def request_url(self, base_url: str) -> str:
        """``{base_url}/responses``: the base URL includes ``/v1``, as the SDK's does."""
        return url_with_path(base_url, "/responses")

    def auth_headers(self, key: str) -> dict[str, str]:
        """The header that carries the API key."""
        return {"Authorization": f"Bearer {key}"}

    def request_body(
        self, request: ModelRequest, *, model: str, stream: bool, options: dict[str, JSONValue]
    ) -> dict[str, JSONValue]:
        """``request`` as a Responses body carrying the whole conversation; ``options`` are
        sent as given, ``max_tokens`` under this API's name, ``max_output_tokens``."""
        body: dict[str, JSONValue] = request_body(request, model=model, stream=stream)
        for key, value in options.items():
            body["max_output_tokens" if key == "max_tokens" else key] = value
        return body

    def read_response(self, body: JSONValue) -> ModelResponse:
        """The answer ``body`` as a response; :class:`WireResponseError` when it is not one."""
        with answer_guard(lambda: "the response"):
            return self._read_response(body)

    def _read_response(self, body: JSONValue) -> ModelResponse:
        """A ``response`` object as a response; :class:`WireResponseError` if it is not one."""
        _raise_error(body)
        return read_response(body)

    def read_stream(self, events: Iterable[SseEvent]) -> ModelResponse:
        """The streamed answer as one response; :class:`WireResponseError` when it is not
        one."""
        counted = Counted(events)
        with answer_guard(lambda: f"stream event {counted.number}"):
            return self._read_stream(counted)

    def _read_stream(self, events: Iterable[SseEvent]) -> ModelResponse:
        """A stream's events as one response; :class:`WireResponseError` if an event is
        malformed or the stream ends before ``response.completed``."""
        payloads = (
            event_json(event, f"stream event {number}")
            for number, event in enumerate(events, start=1)
            if event.data.strip() != "[DONE]"
        )
        return read_stream(payloads)

    def error_message(self, body: JSONValue) -> str | None:
        """The message of an error body, if ``body`` is one."""
        error = body.get("error") if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        return message if isinstance(message, str) else None


def _raise_error(body: JSONValue) -> None:
    if not isinstance(body, dict):
        return
    error = body.get("error")
    if isinstance(error, dict) and body.get("object") != "response":
        raise WireResponseError(f"an error body: {error.get('message')!r}")


class _Events:
    """Stream frames in order, each numbered by ``sequence_number`` from 0 as the API does."""

    def __init__(self) -> None:
        self.frames: list[str] = []

    def add(self, kind: str, **fields: JSONValue) -> None:
        data: dict[str, JSONValue] = {"type": kind, "sequence_number": len(self.frames)}
        data.update(fields)
        self.frames.append(sse_frame(data, event=kind))


def _text_part(text: str) -> JSONValue:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _output_items(response: ModelResponse, response_id: str) -> list[dict[str, JSONValue]]:
    """The response's ``output``: one assistant message, or one ``function_call`` per call.
    Item ids are derived from the response id, so they are unique in the case too."""
    serial = response_id.removeprefix("resp_")
    if isinstance(response, TextResponse):
        return [
            {
                "type": "message",
                "id": f"msg_{serial}",
                "status": "completed",
                "role": "assistant",
                "content": [_text_part(response.content)],
            }
        ]
    return [
        {
            "type": "function_call",
            "id": f"fc_{serial}_{index}",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "status": "completed",
        }
        for index, call in enumerate(response.tool_calls)
    ]


def _response_object(
    response_id: str,
    model: str,
    status: str,
    output: Iterable[Mapping[str, JSONValue]],
    response: ModelResponse | None,
) -> dict[str, JSONValue]:
    """A ``response`` object with every field the SDK's type requires."""
    usage: JSONValue = None
    if response is not None:
        usage = {
            "input_tokens": response.input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": response.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": response.input_tokens + response.output_tokens,
        }
    return {
        "id": response_id,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": [dict(item) for item in output],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }


# --- reading a request's input ---------------------------------------------------------------


def input_messages(items: list[JSONValue]) -> list[Message]:
    """The neutral conversation that ``input`` items hold, in order (see the module
    docstring); raises :class:`WireRequestError` naming the first item that is not one."""
    messages: list[Message] = []
    for index, raw in enumerate(items):
        where = f"input[{index}]"
        item = require_object(raw, where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role == "assistant":
                _add_assistant(messages, _content(item.get("content"), f"{where}.content"), ())
                continue
            neutral = _MESSAGE_ROLES.get(role) if isinstance(role, str) else None
            if neutral is None:
                raise WireRequestError(
                    f"{where}.role must be one of user, system, developer, assistant (got "
                    f"{_shown(role)})"
                )
            content = _content(item.get("content"), f"{where}.content")
            messages.append(Message("user" if neutral == "user" else "system", content))
        elif kind == "function_call":
            call = ToolCall(
                id=require_string(item.get("call_id"), f"{where}.call_id"),
                name=require_string(item.get("name"), f"{where}.name"),
                arguments=require_string(item.get("arguments"), f"{where}.arguments"),
            )
            _add_assistant(messages, "", (call,))
        elif kind == "function_call_output":
            call_id = require_string(item.get("call_id"), f"{where}.call_id")
            output = _content(item.get("output"), f"{where}.output")
            messages.append(Message("tool", output, tool_call_id=call_id))
        elif isinstance(kind, str):
            raise WireRequestError(
                f"{where}.type {_shown(kind)} cannot be replayed: a replayed conversation "
                f"holds only {_ITEM_TYPES} items (the script has no hosted tools, reasoning "
                "or stored items to refer to)"
            )
        else:
            raise WireRequestError(f"{where}.type must be a string")
    return messages


def _add_assistant(messages: list[Message], text: str, calls: tuple[ToolCall, ...]) -> None:
    """Add to the assistant message in progress, or begin one: one response's output items
    (a message, then calls) are one assistant message in the neutral history."""
    if messages and messages[-1].role == "assistant":
        previous = messages[-1]
        messages[-1] = Message(
            "assistant", previous.content + text, tool_calls=previous.tool_calls + calls
        )
    else:
        messages.append(Message("assistant", text, tool_calls=calls))


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=True) if value is not None else "none"
    return text if len(text) <= 60 else text[:57] + "..."


def _content(value: JSONValue, where: str) -> str:
    """A message's ``content`` or a call output's ``output``: text, or content parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _parts_text(value, where)
    raise WireRequestError(f"{where} must be a string or an array of content parts")


def _parts_text(parts: list[JSONValue], where: str) -> str:
    pieces: list[str] = []
    for index, raw in enumerate(parts):
        at = f"{where}[{index}]"
        part = require_object(raw, at)
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            pieces.append(require_string(part.get("text"), f"{at}.text"))
        elif kind not in _SILENT_PARTS:
            known = ", ".join(sorted(_TEXT_PARTS | _SILENT_PARTS))
            raise WireRequestError(f"{at}.type must be one of {known} (got {_shown(kind)})")
    return "".join(pieces)


def _tools(value: JSONValue) -> tuple[ToolSpec, ...]:
    if value is None:
        return ()
    specs: list[ToolSpec] = []
    for index, raw in enumerate(require_list(value, "tools")):
        at = f"tools[{index}]"
        tool = require_object(raw, at)
        if tool.get("type") != "function":
            raise WireRequestError(
                f'{at}.type must be "function" (got {_shown(tool.get("type"))}; hosted tools '
                "are not replayed)"
            )
        specs.append(
            ToolSpec(
                name=require_string(tool.get("name"), f"{at}.name"),
                description=optional_string(tool.get("description"), f"{at}.description") or "",
                parameters=tool_parameters(tool.get("parameters"), f"{at}.parameters"),
            )
        )
    return tuple(specs)


# --- the client side -------------------------------------------------------------------------


def request_body(request: ModelRequest, *, model: str, stream: bool) -> dict[str, Any]:
    """``request`` as a Responses API request body carrying the whole conversation (``store``
    false: nothing needs to be kept for a later request)."""
    instructions = [m.content for m in request.messages if m.role == "system"]
    items: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "user":
            items.append({"type": "message", "role": "user", "content": message.content})
        elif message.role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id,
                    "output": message.content,
                }
            )
        elif message.role == "assistant":
            if message.content or not message.tool_calls:
                items.append({"type": "message", "role": "assistant", "content": message.content})
            items += [
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                }
                for call in message.tool_calls
            ]
    body: dict[str, Any] = {"model": model, "input": items, "store": False}
    if instructions:
        body["instructions"] = "\n".join(instructions)
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            }
            for t in request.tools
        ]
    if stream:
        body["stream"] = True
    return body


def read_response(answer: JSONValue, where: str = "the response") -> ModelResponse:
    """A ``response`` object as a neutral response; :class:`WireResponseError` naming the
    field when it is not one (or did not complete)."""
    with reading(where):
        body = require_object(answer, "the body")
        if body.get("object") != "response":
            raise WireResponseError(
                f'{where} is not a response object: its "object" must be "response"'
            )
        status = body.get("status")
        cut: str | None = None
        if status == "incomplete":
            cut = _incomplete(body.get("incomplete_details"))
        elif status == "failed":
            raise _failed(body.get("error"))
        elif status not in (None, "completed"):
            shown = status if isinstance(status, str) else type(status).__name__
            raise WireResponseError(f"{where} did not complete (status {shown!r})")
        text: list[str] = []
        refusal: list[str] = []
        calls: list[ToolCall] = []
        for index, raw in enumerate(require_list(body.get("output") or [], "output")):
            at = f"output[{index}]"
            item = require_object(raw, at)
            kind = item.get("type")
            if kind == "message":
                for number, part in enumerate(
                    require_list(item.get("content") or [], f"{at}.content")
                ):
                    piece = require_object(part, f"{at}.content[{number}]")
                    if piece.get("type") == "output_text":
                        text.append(
                            require_string(piece.get("text"), f"{at}.content[{number}].text")
                        )
                    elif piece.get("type") == "refusal":
                        refusal.append(
                            require_string(
                                piece.get("refusal"), f"{at}.content[{number}].refusal"
                            )
                        )
            elif kind == "function_call":
                calls.append(_function_call(item, at))
        usage = require_object(body.get("usage") or {}, "usage")
        tokens = usage_counts(usage, ("input_tokens", "output_tokens"))
    return answered(calls, "".join(text), tokens, refused_cut("".join(refusal)) or cut)


def _failed(error: JSONValue) -> ModelFailed:
    """The failure a ``failed`` response's ``error`` (``{"code", "message"}``) names."""
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return ModelFailed(
        code if isinstance(code, str) else None,
        message if isinstance(message, str) else "no message",
    )


INCOMPLETE = {
    "max_output_tokens": "the output limit (max_output_tokens) was reached",
    "content_filter": "a content filter withheld the rest",
}
"""The ``incomplete_details.reason`` values the API gives, and what they mean."""


def _incomplete(details: JSONValue) -> str:
    """Why a response is ``incomplete``, as its ``incomplete_details`` say."""
    reason = details.get("reason") if isinstance(details, dict) else None
    if isinstance(reason, str) and reason in INCOMPLETE:
        return f'status "incomplete", reason "{reason}": {INCOMPLETE[reason]}'
    return 'status "incomplete"'


def _function_call(item: Mapping[str, JSONValue], where: str) -> ToolCall:
    return ToolCall(
        require_name(item.get("call_id"), f"{where}.call_id"),
        require_name(item.get("name"), f"{where}.name"),
        require_string(item.get("arguments"), f"{where}.arguments"),
    )


def read_stream(events: Iterable[JSONValue]) -> ModelResponse:
    """A stream's events as a neutral response, assembled from the deltas (as an SDK does)
    and checked against ``response.completed``, which must arrive; :class:`WireResponseError`
    naming the event and field when one is not this API's."""
    items: dict[int, dict[str, Any]] = {}
    for number, raw in enumerate(events, start=1):
        where = f"stream event {number}"
        with reading(where):
            event = require_object(raw, "the event")
            kind = require_string(event.get("type"), "type")
            if kind == "error":
                message = event.get("message")
                said = message if isinstance(message, str) else "no message"
                raise WireResponseError(f"the stream carried an error: {said}")
            if kind == "response.failed":  # its response says why (status "failed")
                read_response(event.get("response"), f"{where}'s response")
                raise WireResponseError(f"{where} is response.failed, but its response is not")
            if kind in ("response.completed", "response.incomplete"):
                final = read_response(event.get("response"), f"{where}'s response")
                assembled = _assembled([items[i] for i in sorted(items)], final)
                if assembled != final:
                    raise WireResponseError(f"the stream's deltas disagree with its {kind}")
                return final
            if kind not in _DELTAS:
                continue
            index = event.get("output_index")
            if isinstance(index, bool) or not isinstance(index, int):
                raise WireRequestError("output_index must be a whole number")
            if kind == "response.output_item.added":
                item = require_object(event.get("item"), "item")
                items[index] = {**item, "text": "", "arguments": ""}
                continue
            if index not in items:
                raise WireRequestError(f"output_index {index} names no item added before it")
            delta = require_string(event.get("delta"), "delta")
            items[index]["text" if kind == _TEXT_DELTA else "arguments"] += delta
    raise WireResponseError("the stream ended before its response.completed event")


_TEXT_DELTA = "response.output_text.delta"
_DELTAS = frozenset(
    {"response.output_item.added", _TEXT_DELTA, "response.function_call_arguments.delta"}
)


def _assembled(items: list[dict[str, Any]], final: ModelResponse) -> ModelResponse:
    calls = tuple(
        _function_call(item, f"the {item.get('type')} item")
        for item in items
        if item.get("type") == "function_call"
    )
    tokens = (final.input_tokens, final.output_tokens)
    if calls:
        return ToolCallsResponse(calls, *tokens)
    return TextResponse("".join(i["text"] for i in items if i.get("type") == "message"), *tokens)
