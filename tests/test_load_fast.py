"""YAML is read two ways, and both hold every rule of fixtures alike.

Data is built from libyaml's parser events (ruamel.yaml.clib) when it is installed; whatever
that build refuses, and every document without it, is read by ruamel.yaml's strict
pure-Python loader, which words refusals. The tests here compare the two on the same bytes:
same data (types included), or the same refusals with the same messages and positions. Where
the two grammars differ (libyaml reads YAML 1.1), libyaml's acceptance stands.

JSON and TOML have one parser each; their edge cases here are held to a data-or-placed-refusal
outcome. The nesting bound's string-level proof is held to the character loop it stands in for.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from evalrunner.fixture import load
from evalrunner.fixture import yaml as load_yaml
from evalrunner.fixture.limits import MAX_DEPTH
from evalrunner.fixture.load import RawDocument, parse_document
from evalrunner.model import AdmissionError, Format

ROOT = Path(__file__).resolve().parent.parent
FUZZ = settings(
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
needs_c_parser = pytest.mark.skipif(
    load_yaml._CParser is None, reason="ruamel.yaml.clib (libyaml's C parser) is not installed"
)

Outcome = tuple[str, Any]


def _strict(value: Any, *, ordered: bool = True) -> Any:
    """``value`` with every scalar tagged by its type, so that ``True`` and ``1`` differ; key
    order counts unless ``ordered`` is false."""
    if isinstance(value, dict):
        items = [(key, _strict(item, ordered=ordered)) for key, item in value.items()]
        return ("dict", items if ordered else sorted(items))
    if isinstance(value, list):
        return ("list", [_strict(item, ordered=ordered) for item in value])
    return (type(value).__name__, repr(value))


def _outcome(result: RawDocument | list[AdmissionError]) -> Outcome:
    if isinstance(result, RawDocument):
        return ("data", _strict(result.data))
    return ("refused", [(e.message, e.line, e.col, e.json_path) for e in result])


def with_c_parser(raw: bytes) -> Outcome:
    """The outcome of YAML as installed (libyaml's events first, when it is there)."""
    return _outcome(parse_document(raw, "yaml", Path("x.yaml")))


def pure_yaml(raw: bytes) -> Outcome:
    """The outcome of YAML with the C parser missing, as on an installation without it."""
    saved = load_yaml._CParser
    load_yaml._CParser = None
    try:
        return _outcome(parse_document(raw, "yaml", Path("x.yaml")))
    finally:
        load_yaml._CParser = saved


def outcome(raw: bytes, fmt: Format) -> Outcome:
    return _outcome(parse_document(raw, fmt, Path(f"x.{fmt}")))


def assert_same(raw: bytes) -> Outcome:
    """YAML gives the same outcome with libyaml's C parser and without it."""
    expected = pure_yaml(raw)
    assert with_c_parser(raw) == expected, raw
    return expected


# --- the C parser is used ----------------------------------------------------------------------


def _bench_case() -> dict[str, Any]:
    return {
        "name": "fast-path",
        "class": "positive",
        "turns": [
            {
                "user_input": "Echo hi.",
                "steps": [
                    {
                        "response": {
                            "type": "tool_calls",
                            "tool_calls": [
                                {"id": "c1", "name": "echo", "arguments": {"message": "hi"}}
                            ],
                            "input_tokens": 20,
                        }
                    },
                    {"response": {"type": "text", "content": "Echoed: hi"}},
                ],
            }
        ],
        "expects": {"tools_used": ["echo"], "exact_tool_calls": 1, "score": 0.5, "ok": True},
    }


def _dump(data: Any, fmt: Format, *, flow: bool | None = False) -> bytes:
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False).encode()
    if fmt == "toml":
        return tomli_w.dumps(data).encode()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = flow
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue().encode()


@needs_c_parser
def test_yaml_built_from_events_skips_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_walk(*args: object, **kwargs: object) -> None:
        raise AssertionError("the walk ran on YAML built from libyaml's events")

    monkeypatch.setattr(load, "_foreign_values", no_walk)
    document = parse_document(_dump(_bench_case(), "yaml"), "yaml", Path("x.yaml"))
    assert isinstance(document, RawDocument)
    assert _strict(document.data, ordered=False) == _strict(_bench_case(), ordered=False)


@needs_c_parser
def test_yaml_is_read_by_the_c_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = load_yaml._CParser

    def counting(text: str) -> Any:
        made.append(text)
        return real(text)

    def no_pure_loader() -> None:
        raise AssertionError("the pure-Python loader ran on a plain fixture")

    monkeypatch.setattr(load_yaml, "_CParser", counting)
    monkeypatch.setattr(load_yaml, "_yaml_loader", no_pure_loader)
    raw = _dump(_bench_case(), "yaml")
    document = parse_document(raw, "yaml", Path("x.yaml"))
    assert isinstance(document, RawDocument)
    assert made == [raw.decode()]
    assert _strict(document.data, ordered=False) == _strict(_bench_case(), ordered=False)


def test_without_the_c_parser_yaml_still_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load_yaml, "_CParser", None)
    document = parse_document(_dump(_bench_case(), "yaml"), "yaml", Path("x.yaml"))
    assert isinstance(document, RawDocument)
    assert _strict(document.data, ordered=False) == _strict(_bench_case(), ordered=False)


# --- the same outcome on the corpora -----------------------------------------------------------


def _corpus() -> Iterator[Path]:
    for directory in ("tests/data", "evals", "examples"):
        for path in sorted((ROOT / directory).rglob("*")):
            if path.suffix.lower() in load.FIXTURE_SUFFIXES and path.is_file():
                yield path


@pytest.mark.parametrize(
    "path",
    [path for path in _corpus() if load.FIXTURE_SUFFIXES[path.suffix.lower()] == "yaml"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_corpus_same_outcome(path: Path) -> None:
    assert_same(path.read_bytes())


# Each refused for a reason no path may miss, or accepted with a value every path must build
# the same way.
EDGE_CASES: dict[Format, list[str]] = {
    "yaml": [
        "a: 1\na: 2\n",
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "<<: {a: 1}\n",
        "a: 2024-01-02\n",
        "a: 2024-01-02 10:00:00\n",
        "1: a\n",
        "true: a\n",
        "null: a\n",
        "? [a]\n: b\n",
        "a: .inf\n",
        "a: -.INF\n",
        "a: .nan\n",
        "a: 1e400\n",
        "a: 9223372036854775808\n",
        "a: -9223372036854775808\n",
        "a: 9223372036854775807\n",
        "a: 0x7fffffffffffffff\n",
        "a: 0x8000000000000000\n",
        "a: 0o17\n",
        "a: 017\n",
        "a: 0b101\n",
        "a: 1_000\n",
        "a: +12\n",
        "a: +_\n",
        "a: ._\n",
        "a: 0x_\n",
        "[0b_]\n",
        "a: 1.5e3\n",
        "a: .5\n",
        "a: 1.\n",
        "a: yes\n",
        "a: True\n",
        "a: NULL\n",
        "a: ~\n",
        "a:\n",
        "= : 1\n",
        "a: =\n",
        '"\\ud800": 1\n',
        'a: "\\ud83d\\ude00"\n',
        'a: "\\U0001F600"\n',
        "a: |\n  x\n  # not a comment\n",
        "|\n# body\n",
        "a: |\n\n    x\n",
        "a: |\n    \n  x\n",
        "just text\n",
        "",
        "# only a comment\n",
        "---\n",
        "--- a\n",
        "a: 1\n---\nb: 2\n",
        "a: 1\n...\n",
        "%YAML 1.2\n---\na: 1\n",
        "%YAML 1.1\n---\na: yes\n",
        "%TAG ! tag:x,2000:\n---\na: 1\n",
        "a: \x85b\n",
        "a: b\u2028c\n",
        "a: \ufeffb\n",
        "a: \x00\n",
        "{a: 1, b: [x, y], c: {d: e}}\n",
        '{"a":1}\n',
        '["a": b]\n',
        "[a, b]\n",
        "- a\n- b\n",
        "a: 'it''s'\nb: \"q\\tq\"\nc: >\n  folded\n  text\nd: |-\n  kept\n",
        "a:\r\n  - 1\r\n  - 2\r\n",
        "a: [" * 64 + "]" * 64 + "\n",
        "a: [" * 62 + "]" * 62 + "\n",
        "a: [" * 63 + "]" * 63 + "\n",
    ],
    "json": [
        '{"a": 1, "a": 2}',
        '{"a": {"b": 1, "b": 1}}',
        '{"a": NaN}',
        '{"a": -Infinity}',
        '{"a": 1e400}',
        '{"a": 1e308}',
        '{"a": 123456789012345678}',
        '{"a": 9223372036854775807}',
        '{"a": 9223372036854775808}',
        '{"a": -9223372036854775808}',
        '{"a": 0.0000000000000000000001}',
        '{"a": "\\ud800"}',
        '{"\\udc00": 1}',
        '{"a": "\\ud83d\\ude00"}',
        '{"a": "\\\\ud800"}',
        '{"a": 1,}',
        "[1, 2]",
        "",
        "[" * 64 + "]" * 64,
        "[" * 65 + "]" * 65,
    ],
    "toml": [
        "a = 1\na = 2\n",
        "a = 1979-05-27\n",
        "a = 07:32:00\n",
        "a = 1979-05-27T07:32:00Z\n",
        "a = inf\n",
        "a = -nan\n",
        "a = 1e400\n",
        "a = 9223372036854775807\n",
        "a = 9223372036854775808\n",
        "a = 0x7FFFFFFFFFFFFFFF\n",
        "a = 0xFFFF_FFFF_FFFF_FFFF\n",
        "a = 0o777777777777777777777\n",
        "a = 1_000\n",
        "a = 1.5\n",
        'a = "dead_beef_cafe_feed"\n',
        'a = "info about nan and inf"\n',
        "a.b.c = 1\n",
        "[a.b]\nc = {d = [1, {e = 2}]}\n",
        "".join(f"[{'.'.join(['t'] * n)}]\nx = 1\n" for n in range(1, 66)),
        "[" + ".".join(["t"] * 63) + "]\nx = {y = 1}\n",
        "[" + ".".join(["t"] * 62) + "]\nx = {y = 1}\n",
        "x = " + "[" * 63 + "]" * 63 + "\n",
    ],
}


# Text libyaml reads and the strict loader refuses (a comment against a block scalar's header,
# a block scalar opening with a line of spaces, tabs as separators, a quoted flow key against
# its value): libyaml's acceptance stands where it is installed.
LIBYAML_ONLY = [
    "a: |#c\n  x\n",
    "- >+\n   \n      # x\n",
    "a: |\n  \n    x\n",
    "a: |\r\n  \r\n    x\r\n",
    "a:\tb\n",
    "a: b\tc\n",
    '["a":b]\n',
    "['a' :1, 'b':2]\n",
    'x: {"a":["b":c]}\n',
    '[? "a":b]\n',
]


@pytest.mark.parametrize("literal", ["+_", "-_", "0x_", "0o_", "0b_", "._"])
def test_yaml_number_without_digits_is_refused(literal: str) -> None:
    """ruamel.yaml resolves these to numbers and then cannot convert them: a refusal at the
    value, as for any other number a fixture cannot hold, not a traceback."""
    raw = f"a: {literal}\n".encode()
    for result in (with_c_parser(raw), pure_yaml(raw)):
        assert result == (
            "refused",
            [(f"number {literal} has no digits; quote it to make it a string", 1, 4, ())],
        )


@pytest.mark.parametrize("text", EDGE_CASES["yaml"])
def test_yaml_edge_case_same_outcome(text: str) -> None:
    assert_same(text.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("text", LIBYAML_ONLY)
def test_what_libyaml_reads_is_accepted(text: str) -> None:
    assert pure_yaml(text.encode())[0] == "refused"
    expected = "refused" if load_yaml._CParser is None else "data"
    assert with_c_parser(text.encode())[0] == expected


@pytest.mark.parametrize(
    ("fmt", "text"), [(fmt, text) for fmt in ("json", "toml") for text in EDGE_CASES[fmt]]
)
def test_edge_case_is_data_or_placed_refusals(fmt: Format, text: str) -> None:
    verdict, detail = outcome(text.encode("utf-8", "surrogatepass"), fmt)
    if verdict == "refused":
        assert detail and all(line is not None for _, line, _, _ in detail), detail


def test_edge_cases_cover_both_outcomes() -> None:
    """The edge cases above are only worth their keep if both outcomes are exercised."""
    outcomes = [outcome(t.encode(), f)[0] for f, ts in EDGE_CASES.items() for t in ts]
    assert outcomes.count("data") > 20 and outcomes.count("refused") > 20


# --- the same outcome on generated data --------------------------------------------------------


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["", "no", "1e3", "null", "~", "0x1F", "2024-01-02", "<<", "\t", "a\nb"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@FUZZ
@given(
    data=st.dictionaries(st.text(max_size=6), _values, max_size=4),
    flow=st.sampled_from([False, True, None]),
)
def test_generated_data_same_outcome(data: dict[str, Any], flow: bool | None) -> None:
    try:
        raw = _dump(data, "yaml", flow=flow)
    except Exception:
        return  # not expressible in YAML
    assert_same(raw)


# --- the nesting bound -------------------------------------------------------------------------


def _character_loop(text: str, fmt: Format) -> int | None:
    """The nesting bound as a loop over every character: the definition the loader's token
    scan is held to."""
    depth = dots = 0
    quote = ""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'" and (fmt != "json" or ch == '"'):
            quote = ch
        elif ch == "#" and fmt != "json":
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return i
        elif ch in "]}":
            depth -= 1
        elif fmt == "toml" and ch == ".":
            dots += 1
            if dots > MAX_DEPTH:
                return i
        elif fmt == "toml" and ch in "\n=,":
            dots = 0
        i += 1
    return None


_NESTING = ["[", "]", "{", "}", "[" * 20, "]" * 20, "{" * 20, '"', "'", "\\", "#", "\n", ".",
            "." * 20, "=", ",", "a", " "]  # fmt: skip


@FUZZ
@given(
    parts=st.lists(st.sampled_from(_NESTING), max_size=80),
    fmt=st.sampled_from(["json", "yaml", "toml"]),
)
def test_the_nesting_bound_agrees_with_the_character_loop(parts: list[str], fmt: Format) -> None:
    text = "".join(parts)
    expected = _character_loop(text, fmt)
    # The loader skips counting when there are too few brackets (and dots) to go too deep.
    if text.count("[") + text.count("{") + (text.count(".") if fmt == "toml" else 0) > MAX_DEPTH:
        assert load._over_deep_offset(text, fmt) == expected, text
    else:
        assert load._over_deep_offset(text, fmt) is None and expected is None, text


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
def test_the_nesting_bound_on_a_large_fixture(fmt: Format) -> None:
    """A fixture with many brackets (well past the count that skips the check) and strings
    holding brackets and quotes is within the bound; 65 levels are not."""
    case = _bench_case()
    case["turns"] = [json.loads(json.dumps(turn)) for turn in case["turns"] * 40]
    case["description"] = "a [ { \" ' # . ] } string"
    text = _dump(case, fmt, flow=True).decode()
    assert text.count("[") + text.count("{") > 100
    assert load._over_deep_offset(text, fmt) is None
    deep = "[" * 65 + "]" * 65
    assert load._over_deep_offset(deep, fmt) == 64
