"""OpenAI chat completions on the wire (``POST /v1/chat/completions``), for the replay endpoint.

Requests: ``system``/``developer``, ``user``, ``assistant`` (with ``tool_calls``) and ``tool``
(with ``tool_call_id``) messages; content is a string, null, or a list of parts whose text
parts are concatenated. Only ``function`` tools are understood. Responses carry the fixture's
tool-call ids and its argument text verbatim (the API's ``arguments`` is a string). Streams are
``data:`` chunks ending in ``data: [DONE]``; the usage chunk is sent only when the request asks
for it (``stream_options.include_usage``), as the API does.
"""

from __future__ import annotations

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
    ToolResult,
    WireRequest,
    WireRequestError,
    optional_string,
    request_with_messages,
    require_list,
    require_object,
    require_string,
    sse_frame,
    stream_flag,
    stream_pieces,
    text_of_parts,
    tool_parameters,
)

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
    result_carrier = 'a "tool" message with its tool_call_id'
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
        options = request.get("stream_options")
        usage = isinstance(options, dict) and options.get("include_usage") is True
        return WireRequest(
            request=ModelRequest(
                messages=tuple(messages),
                tools=_tools(request.get("tools")),
                api=OPENAI,
                model=optional_string(request.get("model"), "model"),
                stream=stream_flag(request),
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

    def error_body(self, status: int, message: str) -> JSONValue:
        """``{"error": {"message", "type", "code"}}``."""
        error_type = _ERROR_TYPES.get(status, "replay_error")
        code = "run_error" if status >= 500 else None
        return {"error": {"message": message, "type": error_type, "code": code, "param": None}}


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
                id=require_string(call.get("id"), f"{at}.id"),
                name=require_string(function.get("name"), f"{at}.function.name"),
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
                name=require_string(function.get("name"), f"{at}.function.name"),
                description=optional_string(
                    function.get("description"), f"{at}.function.description"
                )
                or "",
                parameters=tool_parameters(function.get("parameters"), f"{at}.function.parameters"),
            )
        )
    return tuple(specs)
