"""The bad-input corpus: for each category of hostile input, how many were tried and how many
were handled (an admitted Case, or errors with a position, or the documented run error), with
the slowest single input. A crash or an unpositioned refusal counts as not handled.

    python bench/bad_inputs.py [--count 2000] [--seed 7]

Deterministic for a given seed. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalrunner import SuiteReport, run_suite
from evalrunner.admit import admit
from evalrunner.grade import grade
from evalrunner.load import load_suite, parse_document
from evalrunner.model import (
    AdmissionError,
    Case,
    Expectations,
    Format,
    JSONValue,
    RunInterrupted,
    RunRecord,
)
from evalrunner.report import write_atomic

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
    regex_worst_case(categories.setdefault("3  catastrophic regexes", Tally()))
    hung_cases(categories.setdefault("4  hung cases (timeout)", Tally()), 20)
    interrupts(categories.setdefault("5  interrupts (SIGINT/SIGTERM)", Tally()), 20)
    output_failures(categories.setdefault("6  report write failures", Tally()), 30)

    print(f"python {sys.version.split()[0]}, seed {args.seed}")
    print(f"{'category':32} {'tried':>6} {'handled':>8} {'slowest':>10}")
    for label, tally in sorted(categories.items()):
        print(f"{label:32} {tally.tried:>6} {tally.handled:>8} {tally.slowest_ms:>8.1f}ms")
        if tally.example_failure:
            print(f"    first unhandled: {tally.example_failure}")
    total = sum(t.tried for t in categories.values())
    handled = sum(t.handled for t in categories.values())
    print(f"all: {handled}/{total} handled")


if __name__ == "__main__":
    main()
