"""A tiny agent command for tests of the agent-command runner, speaking the OpenAI wire with
urllib only. Its first argument picks a behaviour:

ok               a correct tool loop with an echo tool
garbage          prints a line that is not a reply
exit             writes to stderr and exits with code 3 before replying
hang             never replies
forget-result    dispatches the scripted calls but sends no tool results back
no-model         replies without ever calling the model
slow-exit        as ok, then takes 2.5 s to exit once its stdin is closed (a heavy SDK's teardown)
linger           as ok, then never exits once its stdin is closed

WIRE_AGENT_PARAMS, when set, is a JSON object of request parameters added to every request.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any


def chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
    tools = [{"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}]
    extra = json.loads(os.environ.get("WIRE_AGENT_PARAMS") or "{}")
    body = json.dumps({"model": "m", "messages": messages, "tools": tools, **extra}).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": "Bearer x"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        message: dict[str, Any] = json.load(response)["choices"][0]["message"]
        return message


def main() -> None:
    mode = sys.argv[1]
    messages: list[dict[str, Any]] = []
    for line in sys.stdin:
        user_input = json.loads(line)["user_input"]
        if mode == "garbage":
            print("hello, I am not JSON", flush=True)
            continue
        if mode == "exit":
            print("boom: the agent crashed", file=sys.stderr, flush=True)
            sys.exit(3)
        if mode == "hang":
            mark = os.environ.get("WIRE_AGENT_HANGING")
            if mark:  # a directory: say that this agent now hangs, for a test to wait on
                Path(mark, str(os.getpid())).touch()
            time.sleep(3600)
        if mode == "no-model":
            print(json.dumps({"reply": "I did not ask the model"}), flush=True)
            continue
        messages.append({"role": "user", "content": user_input})
        while True:
            message = chat(messages)
            messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                print(json.dumps({"reply": message.get("content") or ""}), flush=True)
                break
            if mode == "forget-result":
                continue
            for call in calls:
                arguments = json.loads(call["function"]["arguments"])
                result = arguments.get("message", "(empty)")
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    if mode == "slow-exit":
        time.sleep(2.5)
    if mode == "linger":
        time.sleep(3600)


if __name__ == "__main__":
    main()
