"""No fixture content can run code, read or write a file outside the case workspace, or reach
the network: YAML tags, ``$ref``s and ``$schema``s pointing at local files or URLs, and paths in
any field are all just data.

Proof by audit hook (PEP 578): every file open, directory change, process start, network call
and dynamic code execution made while such fixtures are loaded, admitted, replayed and graded
is recorded, and the only files touched must be the fixtures themselves and the per-case
workspace.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalrunner import SuiteReport, run_suite
from evalrunner.fixture.load import load_document

WATCHED = (
    "open",
    "os.",
    "shutil.",
    "subprocess.",
    "socket.",
    "urllib.",
    "http.client",
    "exec",
    "compile",
    "ctypes.",
    "import",
    "pickle.",
    "marshal.",
)

_events: list[tuple[str, tuple[Any, ...]]] | None = None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _events is not None and event.startswith(WATCHED):
        _events.append((event, args))


sys.addaudithook(_hook)


@contextmanager
def recorded() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    global _events
    _events = []
    try:
        yield _events
    finally:
        _events = None


MARKER = Path(tempfile.gettempdir()) / "evalrunner-pwned-marker"

HOSTILE = {
    # YAML tags that other loaders would execute or construct
    "tag_apply.yaml": (
        f"name: !!python/object/apply:os.system ['touch {MARKER}']\n"
        "turns: []\nexpects: {tools_used: [echo]}\n"
    ),
    "tag_name.yaml": "name: !!python/name:os.system\nturns: []\nexpects: {}\n",
    "tag_custom.yaml": "name: !include /etc/passwd\nturns: []\nexpects: {}\n",
    # $ref where a resolver might follow it
    "ref_root.json": '{"$ref": "file:///etc/passwd", "name": "r", "turns": [], "expects": {}}',
    "ref_expects.json": (
        '{"name": "r2", "turns": [{"user_input": "x", "steps": [{"response": {"type": "text",'
        ' "content": "x"}}]}], "expects": {"$ref": "https://example.com/evil.json"}}'
    ),
}

# Admitted and run: the payloads sit in fields that hold data, and must stay data.
RUNS = """\
$schema: "file:///etc/shadow"
name: paths-are-data
turns:
  - user_input: "../../../../etc/passwd"
    steps:
      - response:
          type: tool_calls
          tool_calls:
            - id: c1
              name: echo
              arguments:
                message: "/etc/passwd"
                $ref: "file:///etc/passwd"
                path: "../../outside.txt"
            - id: c2
              name: "../../bin/sh"
              arguments: '{"$ref": "https://example.com/x.json"}'
      - response: {type: text, content: "~/.ssh/id_rsa"}
expects:
  tool_arguments_contain: [{tool: echo, needle: "/etc/passwd"}]
  tool_results_contain: [{tool: "../../bin/sh", needle: "Unknown tool"}]
"""


def _touched_paths(events: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    paths = []
    for event, args in events:
        if event == "open" and args and isinstance(args[0], str | bytes | Path):
            paths.append(str(args[0]))
    return paths


def test_hostile_fixtures_are_refused_without_side_effects(tmp_path: Path) -> None:
    MARKER.unlink(missing_ok=True)
    files = []
    for name, text in HOSTILE.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        files.append(path)
    for path in files:  # warm-up: imports and schema loading happen before recording
        load_document(path)
    run_suite(tmp_path)

    with recorded() as events:
        outcome = run_suite(tmp_path)

    assert not isinstance(outcome, SuiteReport), "hostile fixtures must be refused"
    messages = "\n".join(outcome.lines())
    assert "YAML tag !!python/object/apply:os.system is not allowed" in messages
    assert "YAML tag !!python/name:os.system is not allowed" in messages
    assert "YAML tag !include is not allowed" in messages
    assert "unknown key '$ref' in the case" in messages
    assert "unknown key '$ref' in expects" in messages
    assert not MARKER.exists()
    assert sorted(_touched_paths(events)) == sorted(str(p) for p in files)
    kinds = {event for event, _ in events}
    assert not kinds & {"os.system", "subprocess.Popen", "socket.connect", "urllib.Request"}
    assert not [e for e, _ in events if e in {"exec", "compile", "import"}]


def test_paths_and_refs_in_data_are_never_followed(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    fixture = suite / "paths.yaml"
    fixture.write_text(RUNS, encoding="utf-8")
    assert isinstance(run_suite(suite), SuiteReport)  # warm-up

    with recorded() as events:
        outcome = run_suite(suite)

    assert isinstance(outcome, SuiteReport) and outcome.all_passed, outcome
    workspace_prefix = str(Path(tempfile.gettempdir()) / "evalrunner-case-")
    touched = _touched_paths(events)
    assert str(fixture) in touched  # the hook did see the run
    # The reference agent never asks for its workspace, so none is made.
    assert not [a for e, a in events if e == "os.mkdir"]
    for path in touched:
        assert path == str(fixture) or path.startswith(workspace_prefix), path
    kinds = {event for event, _ in events}
    assert not kinds & {"os.system", "subprocess.Popen", "socket.connect", "urllib.Request"}
    assert not [e for e, _ in events if e in {"exec", "compile", "import"}]
    assert not (tmp_path / "outside.txt").exists()
