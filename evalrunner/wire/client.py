"""A model provider that talks to an OpenAI- or Anthropic-compatible endpoint over HTTP.

The client side of :mod:`evalrunner.wire.openai_chat`, :mod:`evalrunner.wire.openai_responses`
and :mod:`evalrunner.wire.anthropic`: it
writes a neutral :class:`~evalrunner.model.ModelRequest` as a request body and reads the
answer (a JSON body, or a server-sent event stream) back into a
:class:`~evalrunner.model.ModelResponse`. Standard library only, so that an agent command built
on it (the mutants run as command agents, :mod:`evalrunner.mutants`) starts fast.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

from evalrunner.model import (
    ModelRequest,
    ModelResponse,
    RunError,
    TextResponse,
    ToolCall,
    ToolCallsResponse,
)
from evalrunner.wire import openai_responses
from evalrunner.wire.common import ANTHROPIC, OPENAI, OPENAI_RESPONSES, WIRES

TIMEOUT_SECS = 60.0


class WireClient:
    """A :class:`~evalrunner.provider.ModelProvider` over HTTP.

    ``api`` is one of :data:`~evalrunner.wire.common.WIRES`; ``base_url`` is what the
    API's SDK takes (``.../v1`` for both OpenAI APIs, the host root for Anthropic). The whole
    conversation is sent with every request (on the Responses API with ``store`` false).
    """

    def __init__(self, api: str, base_url: str, *, stream: bool = False, model: str = "m") -> None:
        if api not in WIRES:
            raise ValueError(f"unknown api {api!r}: one of {', '.join(WIRES)}")
        self.api = api
        self.base_url = base_url.rstrip("/")
        self.stream = stream
        self.model = model

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request``; an error status becomes a :class:`RunError` with its message."""
        headers: dict[str, str] = {}
        if self.api == OPENAI:
            url, body = self.base_url + "/chat/completions", _openai_body(request)
        elif self.api == OPENAI_RESPONSES:
            url = self.base_url + "/responses"
            body = openai_responses.request_body(request, model=self.model, stream=self.stream)
        else:
            url, body = self.base_url + "/v1/messages", _anthropic_body(request)
            headers = {"anthropic-version": "2023-06-01"}
        body["model"] = self.model
        if self.stream:
            body["stream"] = True
        data = json.dumps(body).encode("utf-8")
        http = urllib.request.Request(
            url, data=data, headers={"Content-Type": "application/json", **headers}
        )
        try:
            with urllib.request.urlopen(http, timeout=TIMEOUT_SECS) as reply:
                if self.stream:
                    events = _sse(reply)
                    if self.api == OPENAI:
                        return _openai_stream(events)
                    if self.api == OPENAI_RESPONSES:
                        return openai_responses.read_stream(events)
                    return _anthropic_stream(events)
                answer = json.load(reply)
                if self.api == OPENAI:
                    return _openai_answer(answer)
                if self.api == OPENAI_RESPONSES:
                    return openai_responses.read_response(answer)
                assert self.api == ANTHROPIC
                return _anthropic_answer(answer)
        except urllib.error.HTTPError as exc:
            raise RunError(f"the model endpoint answered {exc.code}: {_error_text(exc)}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RunError(f"the model endpoint could not be read: {exc}") from None
        except (KeyError, TypeError, AttributeError) as exc:
            # JSON, but not this API's shape (a field missing, or of another type): a run
            # error naming the API, not a traceback out of the agent.
            raise RunError(
                f"the model endpoint's answer is not a well-formed {self.api} response "
                f"({type(exc).__name__}: {exc})"
            ) from None


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.load(exc)
        return str(body["error"]["message"])
    except Exception:
        return exc.reason if isinstance(exc.reason, str) else "error"


def _sse(reply: Any) -> Iterator[Any]:
    """The ``data:`` payloads of a server-sent event stream, parsed (``[DONE]`` ends it)."""
    for raw in reply:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        yield json.loads(payload)


# --- OpenAI chat completions -------------------------------------------------------------------


def _openai_body(request: ModelRequest) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "tool":
            messages.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
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
    tools = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in request.tools
    ]
    body: dict[str, Any] = {"messages": messages}
    if tools:
        body["tools"] = tools
    return body


def _openai_answer(answer: Any) -> ModelResponse:
    message = answer["choices"][0]["message"]
    usage = answer.get("usage") or {}
    tokens = (int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
    calls = message.get("tool_calls") or []
    if calls:
        return ToolCallsResponse(
            tuple(
                ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls
            ),
            *tokens,
        )
    return TextResponse(message.get("content") or "", *tokens)


def _openai_stream(events: Iterator[Any]) -> ModelResponse:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in events:
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            for piece in delta.get("tool_calls") or ():
                call = calls.setdefault(piece["index"], {"id": "", "name": "", "arguments": ""})
                function = piece.get("function") or {}
                call["id"] = piece.get("id") or call["id"]
                call["name"] = function.get("name") or call["name"]
                call["arguments"] += function.get("arguments") or ""
    if calls:
        ordered = [calls[i] for i in sorted(calls)]
        return ToolCallsResponse(
            tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in ordered)
        )
    return TextResponse("".join(text))


# --- Anthropic messages ---------------------------------------------------------------------


def _anthropic_body(request: ModelRequest) -> dict[str, Any]:
    system = [m.content for m in request.messages if m.role == "system"]
    messages: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})

    for message in request.messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            block: dict[str, Any] = {
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
    body: dict[str, Any] = {"max_tokens": 1024, "messages": messages}
    if system:
        body["system"] = "\n".join(system)
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    return body


def _tool_use(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments)
    except ValueError:
        value = None
    # The wire carries an object; argument text that is not one cannot travel (the endpoint
    # refuses to script it for this API), so what is sent here is a best effort.
    arguments = value if isinstance(value, dict) else {}
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}


def _anthropic_answer(answer: Any) -> ModelResponse:
    usage = answer.get("usage") or {}
    tokens = (int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)))
    text = "".join(b["text"] for b in answer["content"] if b.get("type") == "text")
    calls = tuple(
        ToolCall(b["id"], b["name"], _compact(b["input"]))
        for b in answer["content"]
        if b.get("type") == "tool_use"
    )
    return ToolCallsResponse(calls, *tokens) if calls else TextResponse(text, *tokens)


def _anthropic_stream(events: Iterator[Any]) -> ModelResponse:
    blocks: dict[int, dict[str, Any]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "content_block_start":
            blocks[event["index"]] = {**event["content_block"], "partial": ""}
        elif kind == "content_block_delta":
            delta = event["delta"]
            block = blocks[event["index"]]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta.get("type") == "input_json_delta":
                block["partial"] += delta["partial_json"]
    ordered = [blocks[i] for i in sorted(blocks)]
    calls = tuple(
        ToolCall(b["id"], b["name"], _compact(json.loads(b["partial"] or "{}")))
        for b in ordered
        if b.get("type") == "tool_use"
    )
    if calls:
        return ToolCallsResponse(calls)
    return TextResponse("".join(b.get("text", "") for b in ordered if b.get("type") == "text"))


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

