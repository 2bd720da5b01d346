"""OpenAI chat completions on the wire (``POST /v1/chat/completions``), for the replay endpoint.

Requests: ``system``/``developer``, ``user``, ``assistant`` (with ``tool_calls``) and ``tool``
(with ``tool_call_id``) messages; content is a string, null, or a list of parts whose text
parts are concatenated. Only ``function`` tools are understood. Responses carry the fixture's
tool-call ids and its argument text verbatim (the API's ``arguments`` is a string). Streams are
``data:`` chunks ending in ``data: [DONE]``; the usage chunk is sent only when the request asks
for it (``stream_options.include_usage``), as the API does.
"""

from __future__ import annotations

from collections.abc import Iterable

from evalrunner.model import (
    JSONValue,
    Message,
    ModelRequest,
    ModelResponse,
    TextResponse,
    ToolCall,
    ToolSpec,
)
from evalrunner.wire.common import (
    OPENAI,
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
    offered_tools,
    optional_string,
    reading,
    refused_cut,
    request_with_messages,
    require_list,
    require_name,
    require_object,
    require_string,
    sse_frame,
    stream_flag,
    stream_pieces,
    text_of_parts,
    tool_parameters,
    url_with_path,
    usage_counts,
)
from evalrunner.wire.params import sent_parameters

CREATED = 0
"""The ``created`` timestamp of every response: replayed responses are the same every time."""

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}

_ERROR_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    413: "invalid_request_error",
}


class OpenAIChat:
    """The OpenAI chat completions API as a :class:`~evalrunner.wire.WireAPI`."""

    name = OPENAI
    continues_responses = False

    def read_request(self, body: JSONValue) -> WireRequest:
        """Read a chat completions request body."""
        request, raw_messages = request_with_messages(body)
        messages: list[Message] = []
        results: list[ToolResult] = []
        for index, raw in enumerate(raw_messages):
            message = _message(require_object(raw, f"messages[{index}]"), f"messages[{index}]")
            messages.append(message)
            if message.role == "tool" and message.tool_call_id is not None:
                results.append(ToolResult(message.tool_call_id, message.content))
        last = messages[-1]
        for legacy in ("functions", "function_call"):
            if legacy in request:
                # Refused, not ignored: functions it offered would go unseen by the checks
                # on what was offered, and its replies would need the legacy shape.
                raise WireRequestError(
                    f"{legacy} belongs to the legacy function-calling API, which is not "
                    'replayed; offer the functions as "tools": [{"type": "function", '
                    '"function": {...}}] and choose with "tool_choice"'
                )
        offered, choice = offered_tools(request.get("tool_choice"), _tools(request.get("tools")))
        options = request.get("stream_options")
        usage = isinstance(options, dict) and options.get("include_usage") is True
        return WireRequest(
            request=ModelRequest(
                messages=tuple(messages),
                tools=offered,
                **choice,
                api=OPENAI,
                model=optional_string(request.get("model"), "model"),
                stream=stream_flag(request),
                parameters=sent_parameters(OPENAI, request),
            ),
            tool_results=tuple(results),
            user_text=last.content if last.role == "user" else None,
            stream_usage=usage,
        )

    def unservable(self, response: ModelResponse) -> str | None:
        """Anything scripted can be sent: arguments travel as text."""
        return None

    def response_id(self, serial: int) -> str:
        """``chatcmpl-replay-N``."""
        return f"chatcmpl-replay-{serial}"

    def response_body(self, response: ModelResponse, *, response_id: str, model: str) -> JSONValue:
        """A ``chat.completion`` object."""
        message: dict[str, JSONValue] = {"role": "assistant", "refusal": None}
        if isinstance(response, TextResponse):
            message["content"] = response.content
            finish = "stop"
        else:
            message["content"] = None
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in response.tool_calls
            ]
            finish = "tool_calls"
        return {
            "id": response_id,
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": _usage(response),
        }

    def stream_events(
        self, response: ModelResponse, *, response_id: str, model: str, usage: bool
    ) -> list[str]:
        """``chat.completion.chunk`` events: the role, content or tool-call fragments (each
        call's first fragment carries its id and name, the rest argument pieces), the finish
        reason, the usage if asked for, then ``[DONE]``."""

        def chunk(delta: dict[str, JSONValue], finish: str | None = None) -> str:
            choice: dict[str, JSONValue] = {
                "index": 0,
                "delta": delta,
                "finish_reason": finish,
                "logprobs": None,
            }
            return sse_frame(_chunk(response_id, model, [choice]))

        if isinstance(response, TextResponse):
            frames = [chunk({"role": "assistant", "content": ""})]
            frames += [chunk({"content": piece}) for piece in stream_pieces(response.content)]
            frames.append(chunk({}, "stop"))
        else:
            frames = [chunk({"role": "assistant", "content": None})]
            for index, call in enumerate(response.tool_calls):
                opening: JSONValue = {
                    "index": index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
                frames.append(chunk({"tool_calls": [opening]}))
                frames += [
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                    for piece in stream_pieces(call.arguments)
                ]
            frames.append(chunk({}, "tool_calls"))
        if usage:
            closing = _chunk(response_id, model, [])
            closing["usage"] = _usage(response)
            frames.append(sse_frame(closing))
        frames.append("data: [DONE]\n\n")
        return frames

    # --- the client side ------------------------------------------------------------------

    def request_url(self, base_url: str) -> str:
        """``{base_url}/chat/completions``: the base URL includes ``/v1``, as the SDK's does."""
        return url_with_path(base_url, "/chat/completions")

    def auth_headers(self, key: str) -> dict[str, str]:
        """The header that carries the API key."""
        return {"Authorization": f"Bearer {key}"}

    def request_body(
        self, request: ModelRequest, *, model: str, stream: bool, options: dict[str, JSONValue]
    ) -> dict[str, JSONValue]:
        """``request`` as a chat completions body; ``options`` (``temperature``,
        ``max_tokens``, ...) are sent as given. A stream asks for its usage chunk."""
        messages: list[JSONValue] = []
        for message in request.messages:
            if message.role == "tool":
                call_id, content = message.tool_call_id, message.content
                messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
            elif message.role == "assistant" and message.tool_calls:
                messages.append(
                    {
                        "role": "assistant",
                        "content": message.content or None,
                        "tool_calls": [
                            {
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments},
                            }
                            for call in message.tool_calls
                        ],
                    }
                )
            else:
                messages.append({"role": message.role, "content": message.content})
        body: dict[str, JSONValue] = {"model": model, "messages": messages, **options}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def read_response(self, body: JSONValue) -> ModelResponse:
        """The answer ``body`` as a response; :class:`WireResponseError` when it is not one."""
        with answer_guard(lambda: "the chat completion"):
            return self._read_response(body)

    def _read_response(self, body: JSONValue) -> ModelResponse:
        """A ``chat.completion`` body as a response; :class:`WireResponseError` if it is not
        one (or is an error body)."""
        with reading("the chat completion"):
            answer = require_object(body, "the body")
            _raise_error(answer)
            choices = require_list(answer.get("choices"), "choices")
            if not choices:
                raise WireResponseError("the chat completion has no choices")
            choice = require_object(choices[0], "choices[0]")
            message = require_object(choice.get("message"), "choices[0].message")
            content = optional_string(message.get("content"), "choices[0].message.content")
            calls = _tool_calls(message.get("tool_calls"), "choices[0].message")
            usage = _usage_of(answer.get("usage"))
            refusal = optional_string(message.get("refusal"), "choices[0].message.refusal")
            cut = refused_cut(refusal) or cut_short(OPENAI, choice.get("finish_reason"))
        return answered(calls, content or "", usage, cut)

    def read_stream(self, events: Iterable[SseEvent]) -> ModelResponse:
        """The streamed answer as one response; :class:`WireResponseError` when it is not
        one."""
        counted = Counted(events)
        with answer_guard(lambda: f"stream chunk {counted.number}"):
            return self._read_stream(counted)

    def _read_stream(self, events: Iterable[SseEvent]) -> ModelResponse:
        """A stream of ``chat.completion.chunk`` events, up to ``[DONE]``, as one response;
        :class:`WireResponseError` if a chunk is malformed or the stream ends early."""
        text: list[str] = []
        calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        usage: tuple[int, int, str | None] = (0, 0, None)
        cut: str | None = None
        finished = False
        refusal: list[str] = []
        for number, event in enumerate(events, start=1):
            if event.data.strip() == "[DONE]":
                break
            where = f"stream chunk {number}"
            chunk = event_json(event, where)
            with reading(where):
                _raise_error(chunk)
                if chunk.get("usage") is not None:
                    usage = _usage_of(chunk.get("usage"))
                for raw_choice in require_list(chunk.get("choices", []), "choices"):
                    choice = require_object(raw_choice, "choice")
                    # Only the first choice is the answer, as a body's choices[0] is: the
                    # pieces of other choices (asked for by n > 1) are another answer, and
                    # joining them would grade text the first answer never said.
                    if _choice_index(choice.get("index")) != 0:
                        continue
                    finish = choice.get("finish_reason")
                    finished = finished or isinstance(finish, str)
                    cut = cut_short(OPENAI, finish) or cut
                    delta = require_object(choice.get("delta"), "delta")
                    piece = optional_string(delta.get("content"), "delta.content")
                    if piece:
                        text.append(piece)
                    refused = optional_string(delta.get("refusal"), "delta.refusal")
                    if refused:
                        refusal.append(refused)
                    for raw in require_list(delta.get("tool_calls") or [], "delta.tool_calls"):
                        fragment = require_object(raw, "delta.tool_calls[]")
                        index = fragment.get("index")
                        if isinstance(index, bool) or not isinstance(index, int):
                            raise WireRequestError("delta.tool_calls[].index must be a number")
                        call = calls.setdefault(index, ["", "", ""])
                        function = require_object(fragment.get("function") or {}, "function")
                        call[0] = optional_string(fragment.get("id"), "id") or call[0]
                        call[1] = optional_string(function.get("name"), "name") or call[1]
                        call[2] += optional_string(function.get("arguments"), "arguments") or ""
        else:
            raise WireResponseError(
                "the stream ended before its closing data: [DONE] (cut off or malformed)"
            )
        cut = refused_cut("".join(refusal)) or cut
        if not finished and cut is None:
            # A stream that never says why its answer ended may have been cut anywhere.
            cut = NO_FINISH
        if calls:
            ordered = [calls[i] for i in sorted(calls)]
            for call_id, name, _ in ordered:
                if not call_id or not name:
                    raise WireResponseError("a streamed tool call came without its id or name")
            return answered([ToolCall(*c) for c in ordered], "", usage, cut)
        return answered([], "".join(text), usage, cut)

    def error_message(self, body: JSONValue) -> str | None:
        """The message of an error body, if ``body`` is one."""
        return _error_text(body)

    def error_body(self, status: int, message: str) -> JSONValue:
        """``{"error": {"message", "type", "code"}}``."""
        error_type = _ERROR_TYPES.get(status, "replay_error")
        code = "run_error" if status >= 500 else None
        return {"error": {"message": message, "type": error_type, "code": code, "param": None}}


def _error_text(body: JSONValue) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return error if isinstance(error, str) else None


def _raise_error(body: dict[str, JSONValue]) -> None:
    message = _error_text(body)
    if message is not None:
        raise WireResponseError(f"the model answered with an error: {message}")


def _choice_index(value: JSONValue) -> int:
    """A streamed choice's ``index``; a choice without one is the first."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireResponseError("choice.index must be a whole number")
    return value


def _usage_of(value: JSONValue) -> tuple[int, int, str | None]:
    if value is None:
        return (0, 0, None)
    return usage_counts(require_object(value, "usage"), ("prompt_tokens", "completion_tokens"))


NO_FINISH = "no finish_reason in any stream chunk: the stream never said the answer was whole"


def _chunk(response_id: str, model: str, choices: list[JSONValue]) -> dict[str, JSONValue]:
    return {
        "id": response_id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": choices,
    }


def _usage(response: ModelResponse) -> JSONValue:
    return {
        "prompt_tokens": response.input_tokens,
        "completion_tokens": response.output_tokens,
        "total_tokens": response.input_tokens + response.output_tokens,
    }


def _content(value: JSONValue, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return text_of_parts(value, where)
    raise WireRequestError(f"{where} must be a string, null or an array of content parts")


def _message(raw: dict[str, JSONValue], where: str) -> Message:
    role = raw.get("role")
    content = _content(raw.get("content"), f"{where}.content")
    if role == "tool":
        call_id = require_string(raw.get("tool_call_id"), f"{where}.tool_call_id")
        return Message("tool", content, tool_call_id=call_id)
    if role == "assistant":
        return Message("assistant", content, tool_calls=_tool_calls(raw.get("tool_calls"), where))
    neutral = _ROLES.get(role) if isinstance(role, str) else None
    if neutral == "system":
        return Message("system", content)
    if neutral == "user":
        return Message("user", content)
    raise WireRequestError(
        f"{where}.role must be one of system, developer, user, assistant, tool (got "
        f"{role!r}); the legacy function role is not supported"
    )


def _tool_calls(value: JSONValue, where: str) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    calls: list[ToolCall] = []
    for index, raw in enumerate(require_list(value, f"{where}.tool_calls")):
        at = f"{where}.tool_calls[{index}]"
        call = require_object(raw, at)
        function = require_object(call.get("function"), f"{at}.function")
        calls.append(
            ToolCall(
                id=require_name(call.get("id"), f"{at}.id"),
                name=require_name(function.get("name"), f"{at}.function.name"),
                arguments=require_string(function.get("arguments"), f"{at}.function.arguments"),
            )
        )
    return tuple(calls)


def _tools(value: JSONValue) -> tuple[ToolSpec, ...]:
    if value is None:
        return ()
    specs: list[ToolSpec] = []
    for index, raw in enumerate(require_list(value, "tools")):
        at = f"tools[{index}]"
        tool = require_object(raw, at)
        if tool.get("type") != "function":
            raise WireRequestError(f'{at}.type must be "function" (other tools are not replayed)')
        function = require_object(tool.get("function"), f"{at}.function")
        specs.append(
            ToolSpec(
                name=require_name(function.get("name"), f"{at}.function.name"),
                description=optional_string(
                    function.get("description"), f"{at}.function.description"
                )
                or "",
                parameters=tool_parameters(function.get("parameters"), f"{at}.function.parameters"),
            )
        )
    return tuple(specs)
