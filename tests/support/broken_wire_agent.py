"""Command agents that break one promise at the wire, for tests/test_conformance.py.

Standard library only. A correct tool loop on a wire (first argument: openai for chat
completions, openai-responses for the Responses API, or anthropic),
with echo as its tool and every dispatch reported in the reply line, broken by the mode named
in the second argument:

ok                  nothing broken
duplicate-result    sends the first call's result twice
unknown-result      adds a result for a call id the model never handed out
extra-request       sends one more model request after its final reply, then exits 0
crash               kills itself with SIGSEGV after its final reply
exit-7              exits with code 7 after its final reply
extra-stdout        prints one more line after its final reply
other-arguments     reports other arguments than the model sent (and runs echo on them)
lie-success         reports a failed call as a success
grandchild          leaves a grandchild holding stdout open, then exits 0
mcp-names           offers its tool as mcp__echo, but runs a call to echo all the same
mcp-names-unreported  the same, and its reply lines report no dispatches (no "tool_calls")
tool-choice-none    sends tool_choice "none" (forbidding tool calls) on every request
edited-results      feeds back "Result: X (edited)" for every result, and reports that
reversed-feed       feeds a batch's results back in reverse, but reports them in the model's order
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

WIRE, MODE = sys.argv[1], sys.argv[2]


ECHO_SCHEMA = {"type": "object", "properties": {"message": {"type": "string"}}}
OFFERED = "mcp__echo" if MODE.startswith("mcp-names") else "echo"
OPENAI_TOOLS = [{"type": "function", "function": {"name": OFFERED, "parameters": ECHO_SCHEMA}}]
ANTHROPIC_TOOLS = [{"name": OFFERED, "input_schema": ECHO_SCHEMA}]
RESPONSES_TOOLS = [{"type": "function", "name": OFFERED, "parameters": ECHO_SCHEMA}]
CHOICE: dict[str, Any] = {}
if MODE == "tool-choice-none":
    CHOICE = {"tool_choice": {"type": "none"} if WIRE == "anthropic" else "none"}


def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
    openai = WIRE.startswith("openai")
    base = os.environ["OPENAI_BASE_URL"] if openai else os.environ["ANTHROPIC_BASE_URL"]
    request = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "anthropic-version": "2023-06-01"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.load(response)
        return answer


def echo(arguments_text: str) -> tuple[str, bool]:
    try:
        arguments = json.loads(arguments_text)
    except ValueError as exc:
        return f"Invalid arguments for echo: {exc}", False
    if not isinstance(arguments, dict):
        return "Invalid arguments for echo: expected a JSON object", False
    message = arguments.get("message")
    return (message if isinstance(message, str) else "(empty)") or "(no output)", True


def run_call(name: str, arguments: str) -> tuple[str, bool]:
    if name != "echo":
        return f"Unknown tool: {name}", False
    result, ok = echo(arguments)
    return (f"Result: {result} (edited)" if MODE == "edited-results" else result), ok


def turn_openai(messages: list[dict[str, Any]], user_input: str) -> tuple[str, list[Any]]:
    messages.append({"role": "user", "content": user_input})
    reports: list[Any] = []
    while True:
        body = {"model": "m", "messages": messages, "tools": OPENAI_TOOLS, **CHOICE}
        message = post("/chat/completions", body)["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        echoed: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if calls:
            echoed["tool_calls"] = calls
        messages.append(echoed)
        if not calls:
            return message.get("content") or "", reports
        for index, call in enumerate(calls):
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            if MODE == "other-arguments":
                arguments = json.dumps({"message": "something else"})
            result, ok = run_call(name, arguments)
            reports.append(report(call["id"], name, arguments, result, ok))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            if index == 0 and MODE == "duplicate-result":
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if MODE == "unknown-result":
            messages.append({"role": "tool", "tool_call_id": "call_invented", "content": "x"})
        if MODE == "reversed-feed":
            messages[-len(calls) :] = messages[-len(calls) :][::-1]


def turn_responses(items: list[dict[str, Any]], user_input: str) -> tuple[str, list[Any]]:
    items.append({"role": "user", "content": user_input})
    reports: list[Any] = []
    while True:
        body = {"model": "m", "input": items, "tools": RESPONSES_TOOLS, **CHOICE}
        answer = post("/responses", body)
        items += answer["output"]
        calls = [item for item in answer["output"] if item["type"] == "function_call"]
        if not calls:
            text = [
                part["text"]
                for item in answer["output"]
                if item["type"] == "message"
                for part in item["content"]
            ]
            return "".join(text), reports
        for index, call in enumerate(calls):
            name, arguments = call["name"], call["arguments"]
            if MODE == "other-arguments":
                arguments = json.dumps({"message": "something else"})
            result, ok = run_call(name, arguments)
            reports.append(report(call["call_id"], name, arguments, result, ok))
            output = {"type": "function_call_output", "call_id": call["call_id"], "output": result}
            items.append(output)
            if index == 0 and MODE == "duplicate-result":
                items.append(dict(output))
        if MODE == "unknown-result":
            invented = {"type": "function_call_output", "call_id": "call_invented", "output": "x"}
            items.append(invented)
        if MODE == "reversed-feed":
            items[-len(calls) :] = items[-len(calls) :][::-1]


def turn_anthropic(messages: list[dict[str, Any]], user_input: str) -> tuple[str, list[Any]]:
    messages.append({"role": "user", "content": user_input})
    reports: list[Any] = []
    while True:
        body = {
            "model": "m",
            "max_tokens": 100,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
            **CHOICE,
        }
        answer = post("/v1/messages", body)
        messages.append({"role": "assistant", "content": answer["content"]})
        uses = [b for b in answer["content"] if b["type"] == "tool_use"]
        if not uses:
            return "".join(b.get("text", "") for b in answer["content"]), reports
        blocks: list[dict[str, Any]] = []
        for index, use in enumerate(uses):
            arguments = json.dumps(use["input"])
            if MODE == "other-arguments":
                arguments = json.dumps({"message": "something else"})
            result, ok = run_call(use["name"], arguments)
            reports.append(report(use["id"], use["name"], arguments, result, ok))
            block = {"type": "tool_result", "tool_use_id": use["id"], "content": result}
            if not ok:
                block["is_error"] = True
            blocks.append(block)
            if index == 0 and MODE == "duplicate-result":
                blocks.append(dict(block))
        if MODE == "unknown-result":
            blocks.append({"type": "tool_result", "tool_use_id": "toolu_invented", "content": "x"})
        if MODE == "reversed-feed":
            blocks.reverse()
        messages.append({"role": "user", "content": blocks})


def report(call_id: str, name: str, arguments: str, result: str, ok: bool) -> dict[str, Any]:
    try:
        value: Any = json.loads(arguments)
    except ValueError:
        value = arguments
    return {
        "id": call_id,
        "name": name,
        "arguments": value if isinstance(value, dict) else arguments,
        "result": result,
        "success": True if MODE == "lie-success" else ok,
    }


def main() -> int:
    messages: list[dict[str, Any]] = []
    turn = {"openai": turn_openai, "openai-responses": turn_responses}.get(WIRE, turn_anthropic)
    for line in sys.stdin:
        reply, reports = turn(messages, json.loads(line)["user_input"])
        line = {"reply": reply, "tool_calls": reports}
        if MODE.endswith("-unreported"):
            del line["tool_calls"]
        print(json.dumps(line), flush=True)
    if MODE == "extra-request":
        with contextlib.suppress(urllib.error.HTTPError):
            turn(messages, "one more thing")
    elif MODE == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif MODE == "exit-7":
        return 7
    elif MODE == "extra-stdout":
        print("one more line", flush=True)
    elif MODE == "grandchild":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
