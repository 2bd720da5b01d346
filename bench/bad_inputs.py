"""The bad-input corpus: for each category of hostile input, how many were tried and how many
were handled (an admitted Case, or errors with a position, or the documented run error), with
the slowest single input. A crash or an unpositioned refusal counts as not handled. Categories
9-14 (issue 9) are stricter: the input must be refused with a position, or end in exactly the
documented outcome (a device written in place, a FIFO refused without waiting, a report
without a character a terminal would act on).

    python bench/bad_inputs.py [--count 2000] [--seed 7]

Deterministic for a given seed. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import random
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from evalrunner import SuiteReport, run_suite
from evalrunner.config import Config, ConfigError, load_config
from evalrunner.expectations import grade
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_document, load_suite, parse_document
from evalrunner.model import (
    AdmissionError,
    Case,
    CaseReport,
    Expectations,
    Format,
    GradeResult,
    JSONValue,
    RunInterrupted,
    RunRecord,
)
from evalrunner.report import UnsafeOutput, render_json, render_table, write_atomic

ROOT = Path(__file__).resolve().parent.parent
FORMATS: list[Format] = ["json", "yaml", "toml"]


@dataclass
class Tally:
    tried: int = 0
    handled: int = 0
    slowest_ms: float = 0.0
    example_failure: str = ""

    def record(self, ok: bool, started: float, what: str) -> None:
        self.tried += 1
        self.handled += ok
        self.slowest_ms = max(self.slowest_ms, (time.perf_counter() - started) * 1000)
        if not ok and not self.example_failure:
            self.example_failure = what[:200]


def admitted_or_positioned(raw: bytes, fmt: Format) -> bool:
    document = parse_document(raw, fmt, Path(f"input.{fmt}"))
    outcome = document if isinstance(document, list) else admit(document)
    if isinstance(outcome, Case):
        return True
    return bool(outcome) and all(
        isinstance(e, AdmissionError) and (e.line is not None or e.json_path) for e in outcome
    )


def attempt(tally: Tally, what: str, check: Callable[[], bool]) -> None:
    started = time.perf_counter()
    try:
        ok = check()
    except Exception as exc:  # a crash is exactly what is being counted
        ok, what = False, f"{what}: {type(exc).__name__}: {exc}"
    tally.record(ok, started, what)


def arbitrary_bytes(rng: random.Random, count: int) -> Iterator[tuple[str, bytes, Format]]:
    for i in range(count):
        fmt = FORMATS[i % 3]
        yield f"bytes #{i}", rng.randbytes(rng.randint(0, 512)), fmt


def fresh(value: JSONValue) -> Any:
    """A private copy, so that mutations never make shared (or circular) structure."""
    return json.loads(json.dumps(value))


def mutations(rng: random.Random, count: int) -> Iterator[tuple[str, bytes, Format]]:
    seeds = [d.data for d in load_suite(ROOT / "evals" / "regression").documents]
    odd: list[JSONValue] = [
        "",
        " ",
        "\x00\x1f",
        "\u202e",
        "no",
        "1e3",
        "null",
        2**70,
        -1,
        1.5,
        [],
        {},
        [[[[]]]],
        "x" * 100_000,
        {"$ref": "file:///etc/passwd"},
    ]
    for i in range(count):
        data: Any = json.loads(json.dumps(rng.choice(seeds)))
        for _ in range(rng.randint(1, 4)):
            node, parent, key = data, None, None
            while isinstance(node, dict | list) and node and rng.random() < 0.7:
                parent = node
                key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
                node = node[key]
            op = rng.choice(["drop", "add", "rename", "retype", "nest"])
            if parent is None or key is None:
                continue
            if op == "drop":
                del parent[key]
            elif op == "add" and isinstance(node, dict):
                name = rng.choice(["nam", "expect", "turns ", "é", "$schema"])
                node[name] = fresh(rng.choice(odd))
            elif op == "rename" and isinstance(parent, dict):
                parent[str(key)[::-1]] = parent.pop(key)
            elif op == "nest":
                parent[key] = [[[node]]]
            else:
                parent[key] = fresh(rng.choice(odd))
        fmt = FORMATS[i % 3]
        if fmt == "toml":
            import tomli_w

            try:
                text = tomli_w.dumps(data)
            except (TypeError, ValueError):
                fmt, text = "json", json.dumps(data)
        elif fmt == "yaml":
            text = json.dumps(data, ensure_ascii=False)  # JSON is YAML 1.2 flow
        else:
            text = json.dumps(data)
        yield f"mutation #{i}", text.encode("utf-8", "surrogatepass"), fmt


def bombs() -> Iterator[tuple[str, bytes, Format]]:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)
    )
    yield "billion laughs", laughs.encode(), "yaml"
    for depth in (100, 10_000, 1_000_000):
        yield f"json depth {depth}", ("[" * depth + "]" * depth).encode(), "json"
        yield f"yaml flow depth {depth}", ("[" * depth + "]" * depth).encode(), "yaml"
        lines = min(depth, 500)  # 500 levels of indentation already make a 250 kB file
        block = "".join("  " * i + "- \n" for i in range(lines))
        yield f"yaml block depth {lines}", block.encode(), "yaml"
        yield f"toml depth {depth}", ("a = " + "[" * depth + "]" * depth).encode(), "toml"
        keys = ".".join(["k"] * min(depth, 500_000))
        yield f"toml dotted depth {min(depth, 500_000)}", f"{keys} = 1".encode(), "toml"
        yield f"toml header depth {min(depth, 500_000)}", f"[{keys}]".encode(), "toml"
    yield "2 MiB file", b" " * (2 * 1024 * 1024) + b"{}", "json"
    yield "long key", ('{"' + "k" * 100_000 + '": 1}').encode(), "json"


def encodings() -> Iterator[tuple[str, bytes, Format]]:
    text = (ROOT / "evals" / "regression" / "echo_token_roundtrip.yaml").read_text("utf-8")
    yield "utf-8 with BOM", b"\xef\xbb\xbf" + text.encode(), "yaml"
    yield "CRLF", text.replace("\n", "\r\n").encode(), "yaml"
    for codec in ("utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252", "shift_jis"):
        yield codec, (text + "\ncomment: é日\n").encode(codec, "replace"), "yaml"
    yield "invalid utf-8", b'{"name": "\xff\xfe\xc0"}', "json"
    yield "lone surrogate escape", b'{"name": "\\ud800"}', "json"


def code_from_data() -> Iterator[tuple[str, bytes, Format]]:
    for tag in (
        "!!python/object/apply:os.system ['true']",
        "!!python/name:os.system",
        "!!binary aGk=",
        "!!set {a: null}",
        "!include /etc/passwd",
        "!!timestamp 2024-01-01",
    ):
        yield tag, f"name: {tag}\nturns: []\nexpects: {{}}\n".encode(), "yaml"
    yield "$ref at root", b'{"$ref": "file:///etc/passwd"}', "json"
    yield (
        "$ref in expects",
        b'{"name": "x", "turns": [], "expects": {"$ref": "https://example.com"}}',
        "json",
    )


def regex_worst_case(tally: Tally) -> None:
    for size in (1_000, 100_000, 1_000_000):
        subject = "a" * size + "b"
        for pattern in ("(a+)+$", "(a|aa)+$", "(a*)*$", "^(a|a?)+$", "(.*a){20}"):
            record = RunRecord(final_response=subject)
            expects = Expectations(response_matches=(pattern,))
            # Whether it matches does not matter here; that it finishes, in linear time, does.
            attempt(
                tally,
                f"{pattern} on {size}",
                lambda e=expects, r=record: len(grade(e, r)) == 1,
            )


class _Block:
    name = "block"
    description = "never returns in time"
    parameters: dict[str, JSONValue] = {"type": "object"}  # noqa: RUF012

    def __init__(self) -> None:
        self.release = threading.Event()

    def call(self, arguments: dict[str, Any]) -> str:
        self.release.wait(60)
        return "late"


HANGS = """\
name: hangs-{i}
turns:
  - user_input: x
    steps:
      - response: {{type: tool_calls, tool_calls: [{{id: c1, name: block, arguments: {{}}}}]}}
      - response: {{type: text, content: y}}
expects: {{tools_used: [block]}}
"""


def hung_cases(tally: Tally, count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp)
        for i in range(count):
            (suite / f"hang_{i:03d}.yaml").write_text(HANGS.format(i=i), encoding="utf-8")
        block = _Block()
        started = time.perf_counter()
        outcome = run_suite(suite, tools={"block": block}, case_timeout=0.05)
        block.release.set()
        cases = outcome.cases if isinstance(outcome, SuiteReport) else ()
        for case in cases:
            tally.tried += 1
            tally.handled += case.error == "timed out after 0.05s"
        tally.slowest_ms = (time.perf_counter() - started) * 1000 / max(count, 1)


def interrupts(tally: Tally, count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp)
        for i in range(3):
            (suite / f"hang_{i:03d}.yaml").write_text(HANGS.format(i=i), encoding="utf-8")

        class Interrupting(_Block):
            def call(self, arguments: dict[str, Any]) -> str:
                raise RunInterrupted(rng_signal.pop())

        for i in range(count):
            rng_signal = [signal.SIGINT if i % 2 else signal.SIGTERM]
            expected = rng_signal[0]
            started = time.perf_counter()
            outcome = run_suite(suite, tools={"block": Interrupting()})
            ok = isinstance(outcome, SuiteReport) and outcome.interrupted == expected
            tally.record(ok, started, f"interrupt #{i}")


def output_failures(tally: Tally, count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "report.json"
        target.write_text("previous", encoding="utf-8")
        real_fsync = os.fsync
        for i in range(count):
            code = (errno.ENOSPC, errno.EROFS, errno.EIO)[i % 3]

            def failing(fd: int, code: int = code) -> None:
                raise OSError(code, os.strerror(code))

            os.fsync = failing
            started = time.perf_counter()
            try:
                write_atomic(target, "new report")
                ok = False
            except OSError:
                ok = target.read_text("utf-8") == "previous" and len(os.listdir(tmp)) == 1
            finally:
                os.fsync = real_fsync
            tally.record(ok, started, f"write failure #{i}")


# --- issue 9 ---------------------------------------------------------------------------------


def refused_with_position(raw: bytes, fmt: Format) -> bool:
    """Refused (at load or admission), every error positioned."""
    document = parse_document(raw, fmt, Path(f"input.{fmt}"))
    outcome = document if isinstance(document, list) else admit(document)
    return isinstance(outcome, list) and bool(outcome) and all(e.line is not None for e in outcome)


_CASE = {
    "json": '{{"name": "n", "turns": [{{"user_input": "u", "steps": [{{"response": '
    '{{"type": "text", "content": "c", "input_tokens": {tokens}}}}}]}}], '
    '"expects": {{"{kind}": {value}}}}}',
    "yaml": "name: n\nturns:\n  - user_input: u\n    steps:\n      - response: "
    "{{type: text, content: c, input_tokens: {tokens}}}\nexpects:\n  {kind}: {value}\n",
    "toml": 'name = "n"\n[[turns]]\nuser_input = "u"\n[[turns.steps]]\nresponse = '
    '{{ type = "text", content = "c", input_tokens = {tokens} }}\n[expects]\n{kind} = {value}\n',
}


def numbers() -> Iterator[tuple[str, bytes, Format]]:
    """Floats where integers belong, integers no 64 bits hold, floats that overflow."""
    huge = ["9" * 4301, "9" * 5000, "-" + "9" * 100_000, "9223372036854775808"]
    for fmt in FORMATS:
        for kind in ("exact_tool_calls", "max_tool_calls", "min_tool_calls"):
            for value in ("1.0", "1e0", "2.5", *huge):
                text = _CASE[fmt].format(kind=kind, value=value, tokens=0)
                yield f"{fmt} {kind}={value[:12]}", text.encode(), fmt
        for tokens in ("1.0", "1e400", *huge):
            text = _CASE[fmt].format(kind="exact_tool_calls", value=1, tokens=tokens)
            yield f"{fmt} input_tokens={tokens[:12]}", text.encode(), fmt
        index = {
            "json": '[{"tool": "t", "needle": "n", "call_index": 0.0}]',
            "yaml": "[{tool: t, needle: n, call_index: 0.0}]",
            "toml": '[{ tool = "t", needle = "n", call_index = 0.0 }]',
        }[fmt]
        text = _CASE[fmt].format(kind="tool_results_contain", value=index, tokens=0)
        yield f"{fmt} call_index=0.0", text.encode(), fmt
    yield "yaml hex", ("n: 0x" + "f" * 5000).encode(), "yaml"
    yield "toml hex", ("n = 0x" + "f" * 5000).encode(), "toml"
    yield "yaml binary", ("n: 0b1" + "0" * 64).encode(), "yaml"


def yaml_tags_and_merges() -> Iterator[tuple[str, bytes, Format]]:
    for tag, value in (
        ("!!int", '"abc"'),
        ("!!bool", '"maybe"'),
        ("!!float", '"x"'),
        ("!!null", "1"),
        ("!!str", "12"),
        ("!!map", "{}"),
        ("!!seq", "[]"),
        ("!!timestamp", "x"),
        ("!", "x"),
        ("!local", "x"),
        ("!<tag:yaml.org,2002:int>", "1"),
    ):
        yield f"tag {tag}", f"name: {tag} {value}\n".encode(), "yaml"
        yield f"document tag {tag}", f"--- {tag} {value}\n".encode(), "yaml"
        yield f"key tag {tag}", f"? {tag} {value}\n: 1\n".encode(), "yaml"
    for text in (
        "a: {b: 1}\nc:\n  <<: {d: 1}\n  d: 2\n",
        "<<: {name: x}\n",
        "a: [{<<: [{x: 1}, {y: 2}]}]\n",
        "expects:\n  <<: {tools_used: [a]}\n  tools_used: [b]\n",
    ):
        yield "merge key", text.encode(), "yaml"


def _without_blocking(check: Callable[[], bool]) -> bool:
    """Run ``check`` in a thread: one that is still blocked after 30 s is a failure."""
    done: list[bool] = []
    worker = threading.Thread(target=lambda: done.append(check()), daemon=True)
    worker.start()
    worker.join(30)
    return bool(done) and done[0]


def special_files(tally: Tally) -> None:
    """FIFOs, sockets, devices and directories named like fixtures; names that are not UTF-8."""
    import socket
    import stat as stat_module

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        made: list[Path] = []
        for fmt in ("json", "yaml", "yml", "toml"):
            fifo = root / f"fifo.{fmt}"
            os.mkfifo(fifo)
            made.append(fifo)
            directory = root / f"dir.{fmt}"
            directory.mkdir()
            made.append(directory)
            for device in ("/dev/zero", "/dev/null", "/dev/urandom"):
                link = root / f"link{Path(device).name}.{fmt}"
                link.symlink_to(device)
                made.append(link)
            try:
                node = root / f"char.{fmt}"
                os.mknod(node, stat_module.S_IFCHR | 0o600, os.makedev(1, 5))
                made.append(node)
            except PermissionError:
                pass
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(root / "sock.json"))
        made.append(root / "sock.json")
        try:
            for path in made:
                attempt(
                    tally,
                    path.name,
                    lambda p=path: _without_blocking(  # type: ignore[misc]
                        lambda: _refused_as_not_regular(p)
                    ),
                )
        finally:
            server.close()
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp) / "suite"
        suite.mkdir()
        for i, raw_name in enumerate((b"caf\xe9", b"\xff\xfe", b"a\x1b[2Jb", b"r\rn")):
            name = os.fsdecode(raw_name + f"_{i}.yaml".encode())
            (suite / name).write_text(HANGS.format(i=i).replace("block", "echo"), "utf-8")

        def whole_run() -> bool:
            outcome = run_suite(suite)
            if not isinstance(outcome, SuiteReport):
                return False
            table, data = render_table(outcome), render_json(outcome)
            write_atomic(Path(tmp) / "report.json", data)
            table.encode("utf-8")
            return not _TERMINAL_ACTS_ON.search(table.replace("\n", "") + data.replace("\n", ""))

        attempt(tally, "suite of names that are not UTF-8", whole_run)


def _refused_as_not_regular(path: Path) -> bool:
    outcome = load_document(path)
    return isinstance(outcome, list) and "not a regular file" in outcome[0].message


_TERMINAL_ACTS_ON = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_PROBLEM = re.compile(r"^\S[^\n]*?(:\d+(:\d+)?)?: \S[^\n]*$")


def config_shapes(tally: Tally, rng: random.Random, count: int) -> None:
    """Configs of every shape at every level: a Config, or positioned problems in words."""
    values: list[str] = [
        "1",
        "1.0",
        "-1",
        "1e10",
        "nan",
        "inf",
        "9" * 5000,
        '"x"',
        '""',
        '"a\\u0000b"',
        "true",
        "[]",
        "[1]",
        '["a.b:c"]',
        "{}",
        "{a = 1}",
        "2024-01-01",
        '"replay"',
        '" LIVE "',
        '"a.b:c"',
        '"no_colon"',
        "0x" + "f" * 30,
    ]
    keys = [
        "suite_dir",
        "mode",
        "max_tool_iterations",
        "case_timeout_secs",
        "agent",
        "tools",
        "builtin_tools",
        "agent_command",
        "suite_dri",
        "eval",
        "tool",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(count):
            for stale in root.iterdir():
                stale.unlink()
            pyproject = i % 2 == 0
            lines = []
            shape = rng.randrange(6)
            if shape == 0:
                lines.append(f"tool = {rng.choice(values)}")
            elif shape == 1:
                lines.append(f"eval = {rng.choice(values)}")
            elif shape == 2 and pyproject:
                lines += ["[tool]", f"evalrunner = {rng.choice(values)}"]
            else:
                lines.append("[tool.evalrunner.eval]" if pyproject else "[eval]")
                for key in rng.sample(keys, rng.randint(1, 4)):
                    lines.append(f"{key} = {rng.choice(values)}")
            name = "pyproject.toml" if pyproject else "evalrunner.toml"
            (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")

            def check(path: Path = root / name) -> bool:
                for given in (path, None):
                    try:
                        outcome = load_config(config_file=given, cwd=root, env={})
                    except ConfigError as exc:
                        if not exc.problems or not all(
                            _PROBLEM.match(p) and "is not of type" not in p for p in exc.problems
                        ):
                            return False
                    else:
                        if not isinstance(outcome, Config):
                            return False
                return True

            attempt(tally, " / ".join(lines)[:200], check)


def output_targets(tally: Tally) -> None:
    """What --output may name: each must end in exactly the documented outcome."""
    import socket
    import stat as stat_module

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def device() -> bool:
            node = root / "null"
            try:
                os.mknod(node, stat_module.S_IFCHR | 0o666, os.makedev(1, 3))
            except PermissionError:
                return True  # not root: nothing a rename could replace
            write_atomic(node, "report")
            return stat_module.S_ISCHR(node.lstat().st_mode)

        def fifo_unread() -> bool:
            fifo = root / "unread.fifo"
            os.mkfifo(fifo)
            try:
                write_atomic(fifo, "report")
            except UnsafeOutput:
                return stat_module.S_ISFIFO(fifo.lstat().st_mode)
            return False

        def fifo_read() -> bool:
            fifo = root / "read.fifo"
            os.mkfifo(fifo)
            reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            try:
                write_atomic(fifo, "report")
                return os.read(reader, 100) == b"report"
            finally:
                os.close(reader)

        def symlink() -> bool:
            (root / "target.json").write_text("old", "utf-8")
            (root / "link.json").symlink_to("target.json")
            write_atomic(root / "link.json", "new")
            return (root / "link.json").is_symlink() and (root / "target.json").read_text(
                "utf-8"
            ) == "new"

        def refused(path: Path) -> bool:
            before = sorted(os.listdir(root))
            try:
                write_atomic(path, "report")
            except UnsafeOutput:
                return sorted(os.listdir(root)) == before
            return False

        (root / "adir").mkdir()
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(root / "a.sock"))
        checks: list[tuple[str, Callable[[], bool]]] = [
            ("character device", device),
            ("fifo nobody reads", fifo_unread),
            ("fifo being read", fifo_read),
            ("symlink", symlink),
            ("directory", lambda: refused(root / "adir")),
            ("socket", lambda: refused(root / "a.sock")),
        ]
        for char in ("\r", "\n", "\x1b", "\x7f", "\x85", "\u202e", "\u2066"):
            checks.append((f"name with {char!r}", partial(refused, root / f"r{char}.json")))
        try:
            for what, check in checks:
                attempt(tally, what, lambda c=check: _without_blocking(c))  # type: ignore[misc]
        finally:
            server.close()


def terminal_text(tally: Tally, rng: random.Random, count: int) -> None:
    """Reports of text full of controls, bidi overrides and lone surrogates; names too."""
    alphabet = [chr(c) for c in range(0x20)] + [
        "\x7f",
        "\x85",
        "\x9b",
        "\u202e",
        "\u2066",
        "\ud800",
        "\udfff",
        "\ud83d",
        "a",
        "✓",
        " ",
    ]

    def hostile(n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    for i in range(count):
        text = hostile(rng.randint(1, 40))
        report = SuiteReport(
            suite=hostile(5),
            mode="replay",
            cases=(
                CaseReport(
                    hostile(8),
                    os.fsdecode(b"f\xff.yaml"),
                    None,
                    (GradeResult(hostile(10), False, text),),
                ),
                CaseReport("ok", "ok.yaml", None, (), error=text),
            ),
        )

        def check(report: SuiteReport = report, text: str = text) -> bool:
            table, data = render_table(report), render_json(report)
            table.encode("utf-8")
            data.encode("utf-8")
            clean = not _TERMINAL_ACTS_ON.search(table.replace("\n", "") + data.replace("\n", ""))
            # A run error's own lines (split at "\n") are shown one per row, indented.
            rows = 10 + text.count("\n")
            return clean and len(table.split("\n")) - 1 == rows and bool(json.loads(data))

        attempt(tally, f"report #{i}", check)
        name = hostile(rng.randint(1, 10)).replace("\ud800", "").replace("\udfff", "")
        name = name.replace("\ud83d", "")
        if not re.search("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", name):
            continue
        fixture = json.dumps(
            {
                "name": "x" + name,
                "turns": [
                    {"user_input": "u", "steps": [{"response": {"type": "text", "content": "c"}}]}
                ],
                "expects": {"response_contains": ["c"]},
            }
        )
        attempt(tally, f"name #{i}", partial(refused_with_position, fixture.encode(), "json"))


def _category_order(item: tuple[str, Tally]) -> tuple[int, str]:
    """``1a``, ``1b``, ``2``, ... ``14``: by number, then by letter."""
    number = item[0].split()[0]
    digits = number.rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(digits), number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    sys.setrecursionlimit(1000)  # the default: nothing may rely on raising it

    categories: dict[str, Tally] = {}
    corpora: list[tuple[str, Iterator[tuple[str, bytes, Format]]]] = [
        ("1a arbitrary bytes", arbitrary_bytes(rng, args.count)),
        ("1b mutated fixtures", mutations(rng, args.count)),
        ("2  resource bombs", bombs()),
        ("7  encodings", encodings()),
        ("8  code from data", code_from_data()),
    ]
    for label, corpus in corpora:
        tally = categories.setdefault(label, Tally())
        for what, raw, fmt in corpus:
            attempt(tally, what, lambda raw=raw, fmt=fmt: admitted_or_positioned(raw, fmt))
    for label, corpus in (
        ("9  numbers", numbers()),
        ("10 YAML tags, merge keys", yaml_tags_and_merges()),
    ):
        tally = categories.setdefault(label, Tally())
        for what, raw, fmt in corpus:
            attempt(tally, what, partial(refused_with_position, raw, fmt))
    special_files(categories.setdefault("11 special files, odd names", Tally()))
    config_shapes(categories.setdefault("12 config shapes", Tally()), rng, max(args.count // 4, 50))
    output_targets(categories.setdefault("13 --output targets", Tally()))
    terminal_text(categories.setdefault("14 terminal text", Tally()), rng, max(args.count // 4, 50))
    regex_worst_case(categories.setdefault("3  catastrophic regexes", Tally()))
    hung_cases(categories.setdefault("4  hung cases (timeout)", Tally()), 20)
    interrupts(categories.setdefault("5  interrupts (SIGINT/SIGTERM)", Tally()), 20)
    output_failures(categories.setdefault("6  report write failures", Tally()), 30)

    print(f"python {sys.version.split()[0]}, seed {args.seed}")
    print(f"{'category':32} {'tried':>6} {'handled':>8} {'slowest':>10}")
    for label, tally in sorted(categories.items(), key=_category_order):
        print(f"{label:32} {tally.tried:>6} {tally.handled:>8} {tally.slowest_ms:>8.1f}ms")
        if tally.example_failure:
            print(f"    first unhandled: {tally.example_failure}")
    total = sum(t.tried for t in categories.values())
    handled = sum(t.handled for t in categories.values())
    print(f"all: {handled}/{total} handled")


if __name__ == "__main__":
    main()
