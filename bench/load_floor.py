"""How close loading is to the parsing floor, per format, on the bench's fixture.

The floor is the bare parse of the same text: ``json.loads``, ``tomllib.loads``, and for YAML
libyaml's C parser producing its events (what the load stage builds from) and, below that,
scanning without building any event object. Against it: ``parse_document`` (decode, strict
checks, data) and ``load_document`` (the same plus reading the file). Each figure is the
best of R rounds of N calls. Prints figures; asserts nothing.

    python bench/load_floor.py [--count 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import tomli_w
from ruamel.yaml import YAML

from evalrunner.fixture import yaml as load_yaml
from evalrunner.fixture.load import load_document, parse_document

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the same fixture as the throughput bench
from throughput import fixture


def texts() -> dict[str, str]:
    """The bench fixture written in each format, as bench/throughput.py writes it."""
    data = fixture(7)
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return {
        "json": json.dumps(data, indent=2),
        "yaml": buffer.getvalue(),
        "toml": tomli_w.dumps(data),
    }


def per_call(count: int, rounds: int, action: Callable[[], object]) -> float:
    """Best time of one call, in seconds, over ``rounds`` rounds of ``count`` calls."""
    action()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(count):
            action()
        best = min(best, (time.perf_counter() - start) / count)
    return best


def c_events(text: str) -> Callable[[], object]:
    def run() -> None:
        get_event = load_yaml._CParser(text).get_event
        while get_event() is not None:
            pass

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    count, rounds = args.count, args.rounds
    sources = texts()
    floors: dict[str, list[tuple[str, Callable[[], object]]]] = {
        "json": [("json.loads", lambda: json.loads(sources["json"]))],
        "toml": [("tomllib.loads", lambda: tomllib.loads(sources["toml"]))],
        "yaml": [],
    }
    if load_yaml._CParser is not None:
        floors["yaml"] = [
            ("CParser events", c_events(sources["yaml"])),
            ("CParser scan only", lambda: load_yaml._CParser(sources["yaml"]).raw_parse()),
        ]
    print(
        f"python {sys.version.split()[0]}, best of {rounds} rounds of {count} calls; "
        f"YAML C parser: {'yes' if load_yaml._CParser is not None else 'no (pure Python)'}"
    )
    print(f"{'format':6} {'what':28} {'us/fixture':>10} {'fixtures/s':>11} {'x floor':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, text in sources.items():
            raw = text.encode()
            path = Path(tmp) / f"case.{fmt}"
            path.write_bytes(raw)
            rows = list(floors[fmt])
            rows.append(("parse_document", lambda: parse_document(raw, fmt, path)))  # noqa: B023
            rows.append(("load_document (file read)", lambda: load_document(path)))  # noqa: B023
            floor = None
            for what, action in rows:
                seconds = per_call(count if fmt == "json" else count // 4, rounds, action)
                if floor is None and not what.startswith(("parse_", "load_")):
                    floor = seconds
                ratio = f"{seconds / floor:7.1f}x" if floor else "       -"
                print(f"{fmt:6} {what:28} {seconds * 1e6:10.1f} {1 / seconds:11.0f} {ratio}")


if __name__ == "__main__":
    main()
