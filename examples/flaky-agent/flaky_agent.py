"""A deliberately flaky agent command: every other run it answers wrongly.

It keeps a run counter in the file named by ``FLAKY_AGENT_STATE`` (locked, so runs in
parallel workers count once each): runs 1, 3, 5, ... pass the scripted model's answer on,
runs 2, 4, ... answer something else. ``evalrunner run --repeat 5`` reports it as flaky, 3 of
5 runs passed. Standard library only; speaks the OpenAI chat completions wire.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import urllib.request


def next_run() -> int:
    """This run's number, counted in the state file."""
    with open(os.environ["FLAKY_AGENT_STATE"], "a+", encoding="utf-8") as state:
        fcntl.flock(state, fcntl.LOCK_EX)
        state.seek(0)
        number = int(state.read() or "0") + 1
        state.seek(0)
        state.truncate()
        state.write(str(number))
        return number


def ask(user_input: str) -> str:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": user_input}]})
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=body.encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer x"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        content: str = json.load(response)["choices"][0]["message"]["content"] or ""
        return content


def main() -> None:
    wrong = next_run() % 2 == 0
    for line in sys.stdin:
        answer = ask(json.loads(line)["user_input"])
        print(json.dumps({"reply": "I forgot" if wrong else answer}), flush=True)


if __name__ == "__main__":
    main()
