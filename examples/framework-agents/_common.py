"""Shared plumbing for the framework agents: the agent-command line protocol, the echo tool's
reference semantics (``examples/sdk-agents/echo_tool.py``), and an optional request log.

Set ``FW_LOG=/path/file.jsonl`` to append every HTTP request body the framework sends (one
JSON line each: method, url, body) -- for looking at exactly what a framework put on the
wire when evalrunner's conformance monitor refuses a request.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sdk-agents"))

import echo_tool

__all__ = ["FED_BACK", "argument_entry", "echo_tool", "echo_value", "install_request_log", "serve"]

FED_BACK: dict[str, str] = {}
"""Tool call id -> the result text as the framework last put it on the wire (an OpenAI
``tool`` message, or an Anthropic ``tool_result`` block's text). Frameworks render results
(errors, retries) in their own words; the reply line must report what the model was shown."""


def argument_entry(arguments: Any) -> Any:
    """A reply line's ``arguments``: the object when the text is a JSON object, else the text."""
    if isinstance(arguments, dict):
        return arguments
    parsed = echo_tool.parse_arguments(arguments)
    return parsed if isinstance(parsed, dict) else arguments


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def _note_results(body: Any) -> None:
    if not isinstance(body, dict):
        return
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            FED_BACK[message.get("tool_call_id", "")] = _text(message.get("content"))
        elif message.get("role") == "user" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    FED_BACK[block.get("tool_use_id", "")] = _text(block.get("content"))


def echo_value(message: Any) -> str:
    """The echo tool on an already-parsed ``message``: the text, ``(empty)`` when it is not a
    string, ``(no output)`` when it is empty."""
    text = message if isinstance(message, str) else "(empty)"
    return text or "(no output)"


def install_request_log() -> None:
    """Note the tool results in each request body httpx sends (:data:`FED_BACK`); also log the
    bodies when ``FW_LOG`` names a file."""
    path = os.environ.get("FW_LOG")

    def record(request: Any) -> None:
        try:
            body: Any = json.loads(request.content or b"null")
        except ValueError:
            body = (request.content or b"").decode("utf-8", "replace")
        _note_results(body)
        if not path:
            return
        with open(path, "a", encoding="utf-8") as log:
            log.write(
                json.dumps({"method": request.method, "url": str(request.url), "body": body}) + "\n"
            )

    # The SDKs here are built on httpx2; LangChain's stack may still use httpx.
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        _patch(module.Client, module.AsyncClient, record)


def _patch(client: Any, async_client: Any, record: Callable[[Any], None]) -> None:
    original_send = client.send
    original_async_send = async_client.send

    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        record(request)
        return original_send(self, request, *args, **kwargs)

    async def async_send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        record(request)
        return await original_async_send(self, request, *args, **kwargs)

    client.send = send
    async_client.send = async_send


def serve(respond: Callable[[str], dict[str, Any]]) -> None:
    """The agent-command protocol: one ``{"turn", "user_input"}`` line in, one reply line out."""
    for line in sys.stdin:
        turn = json.loads(line)
        reply_line = respond(turn["user_input"])
        # ASCII-escaped, so that any string (even a lone surrogate) can be written to stdout.
        print(json.dumps(reply_line), flush=True)
