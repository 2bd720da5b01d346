"""Anthropic messages on the wire (``POST /v1/messages``), for the replay endpoint.

Requests: a ``system`` prompt (a string or text blocks) and ``user``/``assistant`` messages
whose content is a string or a list of blocks. In the neutral history, text blocks become
``user``/``assistant`` text (concatenated), ``tool_use`` blocks become the assistant's tool
calls (their ``input`` as compact JSON with sorted keys, as a fixture's object arguments are),
and each ``tool_result`` block becomes a ``tool`` message; other blocks (images, thinking, ...)
carry no text and are skipped. Responses carry the fixture's tool-call ids; a call's ``input``
must be a JSON object, so a scripted call whose argument text is not one cannot be sent
(:meth:`AnthropicMessages.unservable`). Streams are ``event:`` + ``data:`` frames from
``message_start`` to ``message_stop``, the argument JSON sent as the fixture's exact text in
``input_json_delta`` pieces.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, NoReturn

from evalrunner.model import (
    JSONValue,
    Message,
    ModelRequest,
    ModelResponse,
    TextResponse,
    ToolCall,
    ToolCallsResponse,
    ToolSpec,
    argument_json,
)
from evalrunner.text import json_reason
from evalrunner.wire.common import (
    ANTHROPIC,
    Counted,
    SseEvent,
    ToolResult,
    WireRequest,
    WireRequestError,
    WireResponseError,
    answer_guard,
    answered,
    cut_short,
    event_json,
    finite_float,
    optional_string,
    reading,
    request_with_messages,
    require_list,
    require_name,
    require_object,
    require_string,
    sse_frame,
    stream_flag,
    stream_pieces,
    text_of_parts,
    token_count,
    tool_choice,
    tool_parameters,
    url_with_path,
    usage_counts,
)
from evalrunner.wire.params import sent_parameters

_ERROR_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    413: "request_too_large",
}


class AnthropicMessages:
    """The Anthropic messages API as a :class:`~evalrunner.wire.WireAPI`."""

    name = ANTHROPIC
    continues_responses = False

    def read_request(self, body: JSONValue) -> WireRequest:
        """Read a messages request body."""
        request, raw_messages = request_with_messages(body)
        messages: list[Message] = []
        system = _system(request.get("system"))
        if system is not None:
            messages.append(Message("system", system))
        results: list[ToolResult] = []
        user_text: str | None = None
        for index, raw in enumerate(raw_messages):
            where = f"messages[{index}]"
            message = require_object(raw, where)
            role = message.get("role")
            content = message.get("content")
            if role == "assistant":
                messages.append(_assistant(content, f"{where}.content"))
                user_text = None
            elif role == "user":
                turn_messages, turn_results = _user(content, f"{where}.content")
                messages += turn_messages
                results += turn_results
                # A user message opens a turn when it is what the user said, not tool results.
                user_text = None if turn_results else "".join(m.content for m in turn_messages)
            else:
                raise WireRequestError(f"{where}.role must be user or assistant (got {role!r})")
        return WireRequest(
            request=ModelRequest(
                messages=tuple(messages),
                tools=_tools(request.get("tools")),
                **tool_choice(request.get("tool_choice")),
                api=ANTHROPIC,
                model=optional_string(request.get("model"), "model"),
                stream=stream_flag(request),
                parameters=sent_parameters(ANTHROPIC, request),
            ),
            tool_results=tuple(results),
            user_text=user_text,
        )

    def unservable(self, response: ModelResponse) -> str | None:
        """A tool call whose argument text is not a JSON object cannot be sent as ``input``."""
        if isinstance(response, TextResponse):
            return None
        for call in response.tool_calls:
            reason = _not_an_object(call.arguments)
            if reason is not None:
                return (
                    f"tool call {json.dumps(call.id)} ({call.name}) has argument text that "
                    f"is not a JSON object ({reason}); the Anthropic messages API carries a "
                    "tool call's input as a JSON object, so this call cannot be sent to an "
                    "agent on that API. A fixture may script malformed arguments only for "
                    "agents on the OpenAI wire or for the reference agent; a live model that "
                    "sends them cannot be relayed to an agent on this API"
                )
        return None

    def response_id(self, serial: int) -> str:
        """``msg_replay_N``."""
        return f"msg_replay_{serial}"

    def response_body(self, response: ModelResponse, *, response_id: str, model: str) -> JSONValue:
        """A ``message`` object."""
        content: list[JSONValue]
        if isinstance(response, TextResponse):
            content = [{"type": "text", "text": response.content}]
        else:
            content = [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments)}
                for c in response.tool_calls
            ]
        message = _message_head(response_id, model)
        message["content"] = content
        message["stop_reason"] = _stop_reason(response)
        message["usage"] = {
            "input_tokens": response.input_tokens,
            "output_tokens": response.output_tokens,
        }
        return message

    def stream_events(
        self, response: ModelResponse, *, response_id: str, model: str, usage: bool
    ) -> list[str]:
        """``message_start``, a ``ping``, one ``content_block_start``/``_delta``.../``_stop``
        run per block, ``message_delta`` (stop reason, output tokens), ``message_stop``."""
        start = _message_head(response_id, model)
        start.update(
            content=[],
            stop_reason=None,
            usage={"input_tokens": response.input_tokens, "output_tokens": 0},
        )
        frames = [
            _event("message_start", {"message": start}),
            _event("ping", {}),
        ]
        if isinstance(response, TextResponse):
            opening: JSONValue = {"type": "text", "text": ""}
            frames += _block(0, opening, "text_delta", "text", response.content)
        else:
            for index, call in enumerate(response.tool_calls):
                opening = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
                frames += _block(index, opening, "input_json_delta", "partial_json", call.arguments)
        frames.append(
            _event(
                "message_delta",
                {
                    "delta": {"stop_reason": _stop_reason(response), "stop_sequence": None},
                    "usage": {"output_tokens": response.output_tokens},
                },
            )
        )
        frames.append(_event("message_stop", {}))
        return frames

    # --- the client side ------------------------------------------------------------------

    def request_url(self, base_url: str) -> str:
        """``{base_url}/v1/messages``: the base URL is the host root, as the SDK's is."""
        return url_with_path(base_url, "/v1/messages")

    def auth_headers(self, key: str) -> dict[str, str]:
        """The headers that carry the API key and the API version."""
        return {"x-api-key": key, "anthropic-version": API_VERSION}

    def request_body(
        self, request: ModelRequest, *, model: str, stream: bool, options: dict[str, JSONValue]
    ) -> dict[str, JSONValue]:
        """``request`` as a messages body: system prompts joined into ``system``, consecutive
        same-role blocks in one message, ``options`` sent as given (``max_tokens`` defaults
        to 1024: the API requires it)."""
        system = [m.content for m in request.messages if m.role == "system"]
        messages: list[dict[str, Any]] = []

        def add(role: str, block: dict[str, JSONValue]) -> None:
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": role, "content": [block]})

        for message in request.messages:
            if message.role == "system":
                continue
            if message.role == "tool":
                block: dict[str, JSONValue] = {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.content,
                }
                if message.is_error:
                    block["is_error"] = True
                add("user", block)
            elif message.role == "user":
                add("user", {"type": "text", "text": message.content})
            else:
                if message.content:
                    add("assistant", {"type": "text", "text": message.content})
                for call in message.tool_calls:
                    add("assistant", _tool_use(call))
                if not message.content and not message.tool_calls:
                    add("assistant", {"type": "text", "text": ""})
        body: dict[str, JSONValue] = {
            "model": model,
            "max_tokens": 1024,
            "messages": messages,  # type: ignore[dict-item]
            **options,
        }
        if system:
            body["system"] = "\n".join(system)
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        if stream:
            body["stream"] = True
        return body

    def read_response(self, body: JSONValue) -> ModelResponse:
        """The answer ``body`` as a response; :class:`WireResponseError` when it is not one."""
        with answer_guard(lambda: "the message"):
            return self._read_response(body)

    def _read_response(self, body: JSONValue) -> ModelResponse:
        """A ``message`` body as a response; :class:`WireResponseError` if it is not one."""
        with reading("the message"):
            answer = require_object(body, "the body")
            _raise_error(answer)
            blocks = [
                require_object(b, f"content[{i}]")
                for i, b in enumerate(require_list(answer.get("content"), "content"))
            ]
            usage: dict[str, JSONValue] = {}
            _usage_of(answer.get("usage"), usage)
            cut = cut_short(ANTHROPIC, answer.get("stop_reason"))
            return _response_of(blocks, _counted(usage), cut)

    def read_stream(self, events: Iterable[SseEvent]) -> ModelResponse:
        """The streamed answer as one response; :class:`WireResponseError` when it is not
        one."""
        counted = Counted(events)
        with answer_guard(lambda: f"stream event {counted.number}"):
            return self._read_stream(counted)

    def _read_stream(self, events: Iterable[SseEvent]) -> ModelResponse:
        """A ``message_start`` … ``message_stop`` stream as one response;
        :class:`WireResponseError` if an event is malformed or the stream ends early."""
        blocks: dict[int, dict[str, Any]] = {}
        usage: dict[str, JSONValue] = {}  # the usage counts some event gave
        cut: str | None = None
        stopped = False  # some message_delta said why the answer ended
        for number, event in enumerate(events, start=1):
            where = f"stream event {number}"
            data = event_json(event, where)
            kind = event.event or data.get("type")
            with reading(where):
                _raise_error(data)
                if kind == "message_start":
                    message = require_object(data.get("message"), "message")
                    _usage_of(message.get("usage"), usage)
                elif kind == "content_block_start":
                    index = _index(data)
                    block = require_object(data.get("content_block"), "content_block")
                    if block.get("type") == "text":
                        # Deltas are added to the text it starts with, which must be text.
                        require_string(block.get("text", ""), "content_block.text")
                    blocks[index] = {**block, "partial": ""}
                elif kind == "content_block_delta":
                    index = _index(data)
                    if index not in blocks:
                        raise WireRequestError(f"a delta for block {index}, which never started")
                    delta = require_object(data.get("delta"), "delta")
                    if delta.get("type") == "text_delta":
                        text = require_string(delta.get("text"), "delta.text")
                        current = blocks[index].get("text", "")
                        if not isinstance(current, str):
                            raise WireRequestError(f"a text delta for block {index}, not text")
                        blocks[index]["text"] = current + text
                    elif delta.get("type") == "input_json_delta":
                        partial = require_string(delta.get("partial_json"), "delta.partial_json")
                        blocks[index]["partial"] += partial
                elif kind == "message_delta":
                    _usage_of(data.get("usage"), usage)
                    closing = data.get("delta")
                    if isinstance(closing, dict):
                        stopped = stopped or isinstance(closing.get("stop_reason"), str)
                        cut = cut_short(ANTHROPIC, closing.get("stop_reason")) or cut
                elif kind == "message_stop":
                    break
        else:
            raise WireResponseError(
                "the stream ended before its message_stop event (cut off or malformed)"
            )
        if not stopped and cut is None:
            # A stream that never says why its answer ended may have been cut anywhere.
            cut = NO_STOP_REASON
        ordered: list[dict[str, JSONValue]] = []
        for index in sorted(blocks):
            block = blocks[index]
            partial = str(block.pop("partial"))
            if block.get("type") == "tool_use" and partial:
                try:
                    block["input"] = json.loads(
                        partial, parse_constant=_refuse_constant, parse_float=finite_float
                    )
                except (ValueError, RecursionError):
                    raise WireResponseError(
                        f"the streamed input of tool call block {index} is not valid JSON"
                    ) from None
            ordered.append(block)
        with reading("the streamed message"):
            return _response_of(ordered, _counted(usage), cut)

    def error_message(self, body: JSONValue) -> str | None:
        """The message of an error body, if ``body`` is one."""
        return _error_text(body)

    def error_body(self, status: int, message: str) -> JSONValue:
        """``{"type": "error", "error": {"type", "message"}}``."""
        error_type = _ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": error_type, "message": message}}


API_VERSION = "2023-06-01"
"""The ``anthropic-version`` a live request sends."""


def _error_text(body: JSONValue) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return None


def _raise_error(body: dict[str, JSONValue]) -> None:
    message = _error_text(body)
    if message is not None or body.get("type") == "error":
        raise WireResponseError(f"the model answered with an error: {message or 'no message'}")


def _usage_of(value: JSONValue, usage: dict[str, JSONValue]) -> None:
    """``usage`` updated by the usage object ``value``: a count it gives (not null) replaces
    the one known. A stream gives its counts across events, so they are merged before they
    are read."""
    if value is None:
        return
    given = require_object(value, "usage")
    for key in (*_USAGE_KEYS, *_CACHE_KEYS):
        if given.get(key) is not None:
            usage[key] = token_count(given, key, "usage")


def _counted(usage: dict[str, JSONValue]) -> tuple[int, int, str | None]:
    """The input and output tokens of the merged ``usage``, and the usage field missing
    (:func:`~evalrunner.wire.common.usage_counts`). The input tokens written to or read from
    the prompt cache are billed input tokens that ``input_tokens`` leaves out: they are
    counted with it, or a budget would miss them."""
    return usage_counts(usage, _USAGE_KEYS, also_input=_CACHE_KEYS)


_USAGE_KEYS = ("input_tokens", "output_tokens")
_CACHE_KEYS = ("cache_creation_input_tokens", "cache_read_input_tokens")


NO_STOP_REASON = "no stop_reason in any stream event: the stream never said the answer was whole"


def _index(data: dict[str, JSONValue]) -> int:
    index = data.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise WireRequestError("index must be a number")
    return index


def _response_of(
    blocks: list[dict[str, JSONValue]],
    usage: tuple[int, int, str | None],
    cut_short: str | None = None,
) -> ModelResponse:
    """Text blocks joined, or the tool calls (text beside them is the model thinking aloud,
    which the neutral response does not carry)."""
    calls: list[ToolCall] = []
    text: list[str] = []
    for index, block in enumerate(blocks):
        at = f"content[{index}]"
        if block.get("type") == "text":
            text.append(require_string(block.get("text"), f"{at}.text"))
        elif block.get("type") == "tool_use":
            calls.append(
                ToolCall(
                    id=require_name(block.get("id"), f"{at}.id"),
                    name=require_name(block.get("name"), f"{at}.name"),
                    arguments=argument_json(require_object(block.get("input"), f"{at}.input")),
                )
            )
    return answered(calls, "".join(text), usage, cut_short)


def _tool_use(call: ToolCall) -> dict[str, JSONValue]:
    try:
        value = json.loads(call.arguments)
    except ValueError:
        value = None
    # The wire carries an object; argument text that is not one cannot travel (the endpoint
    # refuses to script it for this API), so what is sent here is a best effort.
    arguments = value if isinstance(value, dict) else {}
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}


def _event(kind: str, data: dict[str, JSONValue]) -> str:
    # The SDK drops a frame without an event: line, and expects the type repeated in the data.
    return sse_frame({"type": kind, **data}, event=kind)


def _block(index: int, opening: JSONValue, delta_type: str, delta_key: str, text: str) -> list[str]:
    frames = [_event("content_block_start", {"index": index, "content_block": opening})]
    frames += [
        _event(
            "content_block_delta",
            {"index": index, "delta": {"type": delta_type, delta_key: piece}},
        )
        for piece in stream_pieces(text)
    ]
    frames.append(_event("content_block_stop", {"index": index}))
    return frames


def _message_head(response_id: str, model: str) -> dict[str, JSONValue]:
    return {
        "id": response_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "stop_sequence": None,
    }


def _stop_reason(response: ModelResponse) -> str:
    return "tool_use" if isinstance(response, ToolCallsResponse) else "end_turn"


class _NotAnObject(ValueError):
    """Argument text that the Anthropic wire cannot carry as a tool call's ``input`` object."""


def _refuse_constant(name: str) -> NoReturn:
    raise _NotAnObject(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        # An object sent as input cannot hold a key twice: a duplicate would be silently
        # dropped, and the agent would receive other arguments than the fixture scripts.
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _NotAnObject(f"key {json.dumps(key)} appears twice")
            seen.add(key)
    return value


def _not_an_object(text: str) -> str | None:
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        return f"not JSON: {json_reason(exc)}"
    except RecursionError:
        return "nested too deeply"
    except _NotAnObject as exc:
        return str(exc)
    except ValueError as exc:  # an integer of more digits than Python converts
        return f"not JSON the wire can carry: {exc}"
    if _has_non_finite(value):
        return "a number is out of range (it overflows to infinity, which JSON cannot carry)"
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean"}.get(type(value), "a number")
        return "null" if value is None else kind
    return None


def _has_non_finite(value: object) -> bool:
    """True when a parsed value holds a float that is not finite (``1e400`` parses as inf)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _system(value: JSONValue) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return text_of_parts(value, "system")
    raise WireRequestError("system must be a string or an array of text blocks")


def _blocks(content: JSONValue, where: str) -> list[dict[str, JSONValue]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [
        require_object(block, f"{where}[{i}]")
        for i, block in enumerate(require_list(content, where))
    ]


def _user(content: JSONValue, where: str) -> tuple[list[Message], list[ToolResult]]:
    """A user message's blocks, in order: runs of text blocks as one user message each, and
    every tool_result block as a tool message."""
    messages: list[Message] = []
    results: list[ToolResult] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            messages.append(Message("user", "".join(text)))
            text.clear()

    for index, block in enumerate(_blocks(content, where)):
        at = f"{where}[{index}]"
        kind = block.get("type")
        if kind == "text":
            text.append(require_string(block.get("text"), f"{at}.text"))
        elif kind == "tool_result":
            flush()
            result = _tool_result(block, at)
            results.append(result)
            messages.append(
                Message(
                    "tool", result.content, tool_call_id=result.call_id, is_error=result.is_error
                )
            )
    flush()
    if not messages:
        messages.append(Message("user", ""))  # e.g. an image alone: still the user's turn
    return messages, results


def _tool_result(block: dict[str, JSONValue], where: str) -> ToolResult:
    call_id = require_string(block.get("tool_use_id"), f"{where}.tool_use_id")
    raw = block.get("content")
    if raw is None:
        content = ""
    elif isinstance(raw, str):
        content = raw
    elif isinstance(raw, list):
        content = text_of_parts(raw, f"{where}.content")
    else:
        raise WireRequestError(f"{where}.content must be a string or an array of blocks")
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise WireRequestError(f"{where}.is_error must be a boolean")
    return ToolResult(call_id, content, bool(is_error))


def _assistant(content: JSONValue, where: str) -> Message:
    text: list[str] = []
    calls: list[ToolCall] = []
    for index, block in enumerate(_blocks(content, where)):
        at = f"{where}[{index}]"
        kind = block.get("type")
        if kind == "text":
            text.append(require_string(block.get("text"), f"{at}.text"))
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    id=require_name(block.get("id"), f"{at}.id"),
                    name=require_name(block.get("name"), f"{at}.name"),
                    arguments=argument_json(require_object(block.get("input"), f"{at}.input")),
                )
            )
    return Message("assistant", "".join(text), tool_calls=tuple(calls))


def _tools(value: JSONValue) -> tuple[ToolSpec, ...]:
    if value is None:
        return ()
    specs: list[ToolSpec] = []
    for index, raw in enumerate(require_list(value, "tools")):
        at = f"tools[{index}]"
        tool = require_object(raw, at)
        specs.append(
            ToolSpec(
                name=require_string(tool.get("name"), f"{at}.name"),
                description=optional_string(tool.get("description"), f"{at}.description") or "",
                # Server tools (web search, ...) have no input_schema: kept with an empty one.
                parameters=tool_parameters(tool.get("input_schema"), f"{at}.input_schema"),
            )
        )
    return tuple(specs)
