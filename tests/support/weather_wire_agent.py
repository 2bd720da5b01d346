"""The weather agent of docs/how-to/sequences-and-json.md as an agent command, on a wire of
its choice, with urllib only: it serves the case's tool doubles (``echo_tool.CaseTools`` of
examples/sdk-agents) and asks under a system prompt about the weather.

    python weather_wire_agent.py openai|anthropic [BREAK]

BREAK, when given, is one thing to do wrong, for the checks over the wire to catch:

no-system        sends no system prompt
delete-account   offers a delete_account tool beside the case's
cities-3         rewrites the model's JSON answer to say "cities": 3
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "sdk-agents"))

import agent_protocol
import echo_tool

SYSTEM_PROMPT = "You answer questions about the weather. Call get_weather once for each city."
DELETE = ("delete_account", "Deletes the account.", {"type": "object", "properties": {}})


def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **headers}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.load(response)
        return answer


class Conversation:
    def __init__(self, wire: str, broken: str, doubles: list[dict[str, Any]]) -> None:
        self.wire, self.broken = wire, broken
        self.tools = echo_tool.CaseTools(doubles)
        self.messages: list[dict[str, Any]] = []
        if wire == "openai" and broken != "no-system":
            self.messages.append({"role": "system", "content": SYSTEM_PROMPT})

    def specs(self) -> list[tuple[str, str, dict[str, Any]]]:
        specs = self.tools.specs()
        return [*specs, DELETE] if self.broken == "delete-account" else specs

    def respond(self, user_input: str) -> dict[str, Any]:
        self.messages.append({"role": "user", "content": user_input})
        dispatched: list[dict[str, Any]] = []
        while True:
            text, calls = self.openai() if self.wire == "openai" else self.anthropic()
            if not calls:
                if self.broken == "cities-3":
                    text = text.replace('"cities": 2', '"cities": 3')
                return {"reply": text, "tool_calls": dispatched}
            for call_id, name, arguments in calls:
                entry = self.tools.dispatch(call_id, name, arguments)
                dispatched.append(entry)
                self.feed(call_id, entry)

    def openai(self) -> tuple[str, list[tuple[str, str, str]]]:
        tools = [
            {"type": "function", "function": {"name": n, "description": d, "parameters": p}}
            for n, d, p in self.specs()
        ]
        body = {"model": "m", "messages": self.messages, "tools": tools}
        url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
        message = post(url, body, {"Authorization": "Bearer x"})["choices"][0]["message"]
        self.messages.append(message)
        calls = [
            (c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls") or []
        ]
        return message.get("content") or "", calls

    def anthropic(self) -> tuple[str, list[tuple[str, str, str]]]:
        tools = [{"name": n, "description": d, "input_schema": p} for n, d, p in self.specs()]
        body: dict[str, Any] = {
            "model": "m",
            "max_tokens": 1024,
            "messages": self.messages,
            "tools": tools,
        }
        if self.broken != "no-system":
            body["system"] = SYSTEM_PROMPT
        url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
        message = post(url, body, {"x-api-key": "x", "anthropic-version": "2023-06-01"})
        self.messages.append({"role": "assistant", "content": message["content"]})
        text = "".join(b["text"] for b in message["content"] if b["type"] == "text")
        calls = [
            (b["id"], b["name"], json.dumps(b["input"]))
            for b in message["content"]
            if b["type"] == "tool_use"
        ]
        return text, calls

    def feed(self, call_id: str, entry: dict[str, Any]) -> None:
        if self.wire == "openai":
            self.messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": entry["result"]}
            )
            return
        result = {
            "type": "tool_result",
            "tool_use_id": call_id,
            "content": entry["result"],
            "is_error": not entry["success"],
        }
        # One user message holds every result of one assistant message.
        last = self.messages[-1]
        if last["role"] == "user" and isinstance(last["content"], list):
            last["content"].append(result)
        else:
            self.messages.append({"role": "user", "content": [result]})


def main() -> None:
    wire = sys.argv[1]
    broken = sys.argv[2] if len(sys.argv) > 2 else ""
    agent_protocol.serve(lambda doubles: Conversation(wire, broken, doubles).respond)


if __name__ == "__main__":
    main()
