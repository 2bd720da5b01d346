"""The load stage's fast paths decide only what the full path would decide.

Plain fixtures are read by libyaml's C parser (YAML) or by a bare ``json.loads``/``tomllib``
(JSON, TOML) without the walk for values JSON cannot hold; anything else goes to the full,
pure-Python path. Every test here compares the two on the same bytes: same data (types
included), or the same refusals with the same messages and positions.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from evalrunner import load, load_yaml, sourcemap
from evalrunner.load import RawDocument, parse_document
from evalrunner.model import AdmissionError, Format
from evalrunner.sourcemap import SourceMap

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


def _no_fast_path(text: str, raw: bytes) -> Any:
    raise load._NotPlain("forced")


def full_path(raw: bytes, fmt: Format) -> Outcome:
    """The outcome with every fast path switched off: the reference."""
    saved = dict(load._PLAIN_PARSERS)
    load._PLAIN_PARSERS.update(dict.fromkeys(saved, _no_fast_path))
    try:
        return _outcome(parse_document(raw, fmt, Path(f"x.{fmt}")))
    finally:
        load._PLAIN_PARSERS.update(saved)


def pure_yaml(raw: bytes) -> Outcome:
    """The outcome of YAML with the C parser missing, as on an installation without it."""
    saved = load_yaml._CParser
    load_yaml._CParser = None
    try:
        return _outcome(parse_document(raw, "yaml", Path("x.yaml")))
    finally:
        load_yaml._CParser = saved


def fast(raw: bytes, fmt: Format) -> Outcome:
    return _outcome(parse_document(raw, fmt, Path(f"x.{fmt}")))


def assert_same(raw: bytes, fmt: Format) -> Outcome:
    expected = full_path(raw, fmt)
    assert fast(raw, fmt) == expected, raw
    if fmt == "yaml":
        assert pure_yaml(raw) == expected, raw
    return expected


# --- the fast paths are taken ------------------------------------------------------------------


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


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
def test_plain_fixture_skips_the_walk(fmt: Format, monkeypatch: pytest.MonkeyPatch) -> None:
    if fmt == "yaml" and load_yaml._CParser is None:
        pytest.skip("ruamel.yaml.clib is not installed")

    def no_walk(*args: object, **kwargs: object) -> None:
        raise AssertionError("the walk ran on a plain fixture")

    monkeypatch.setattr(load, "_foreign_values", no_walk)
    document = parse_document(_dump(_bench_case(), fmt), fmt, Path(f"x.{fmt}"))
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


@pytest.mark.parametrize("path", list(_corpus()), ids=lambda p: str(p.relative_to(ROOT)))
def test_corpus_same_outcome(path: Path) -> None:
    assert_same(path.read_bytes(), load.FIXTURE_SUFFIXES[path.suffix.lower()])


# Each refused by the full path for a reason the fast paths must not miss, or accepted with a
# value they must build the same way.
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
        "a: |#c\n  x\n",
        "a: |\n  x\n  # not a comment\n",
        "|\n# body\n",
        "- >+\n   \n      # x\n",
        "a: |\n  \n    x\n",
        "a: |\r\n  \r\n    x\r\n",
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
        "a:\tb\n",
        "a: b\tc\n",
        "a: \x85b\n",
        "a: b\u2028c\n",
        "a: \ufeffb\n",
        "a: \x00\n",
        "{a: 1, b: [x, y], c: {d: e}}\n",
        '{"a":1}\n',
        '["a":b]\n',
        "['a' :1, 'b':2]\n",
        'x: {"a":["b":c]}\n',
        '[? "a":b]\n',
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


@pytest.mark.parametrize("literal", ["+_", "-_", "0x_", "0o_", "0b_", "._"])
def test_yaml_number_without_digits_is_refused(literal: str) -> None:
    """ruamel.yaml resolves these to numbers and then cannot convert them: a refusal at the
    value, as for any other number a fixture cannot hold, not a traceback."""
    for result in (fast(f"a: {literal}\n".encode(), "yaml"), pure_yaml(f"a: {literal}\n".encode())):
        assert result == (
            "refused",
            [(f"number {literal} has no digits; quote it to make it a string", 1, 4, ())],
        )


@pytest.mark.parametrize(
    ("fmt", "text"), [(fmt, text) for fmt, texts in EDGE_CASES.items() for text in texts]
)
def test_edge_case_same_outcome(fmt: Format, text: str) -> None:
    assert_same(text.encode("utf-8", "surrogatepass"), fmt)


def test_edge_cases_cover_both_outcomes() -> None:
    """The edge cases above are only worth their keep if both paths are exercised."""
    outcomes = [full_path(t.encode(), f)[0] for f, ts in EDGE_CASES.items() for t in ts]
    assert outcomes.count("data") > 20 and outcomes.count("refused") > 20


# --- the same outcome on generated text ----------------------------------------------------------

_YAML_SCALARS = [
    "a", "key", "true", "False", "null", "~", "12", "-3", "0x1F", "0o17", "017", "1_000",
    ".5", "1e3", "+.inf", ".NaN", "2024-01-02", "<<", "=", "yes", "0b101", "'q'", '"d"',
    '"a\\tb"', "'it''s'", "x y", "a:b", "-a", ":a", "?a", "a#b", "a #b", "|", ">", "|-",
    ">+", "|2", "[]", "{}", "[a, b]", "{a: b}", "{a:b}", '{"a":b}', "é", "😀", "", "!",
    "&a x", "*a", "!!str x", "...", "---", "- x", "? x", ": x", "a,b", "a]", '"m\n  l"',
    "'m\n\n  l'", "p\n  c", "\\", '"\\/"', '"\\x41"', '"\\N\\_\\L\\P"', '"\\U0001F600"',
    '"\\ud83d\\ude00"', '"\\udc00"', "\t", "|#", ">-#", "9223372036854775808", "1e400",
    '["a":b]', "['a':1, b]", '[? "a":b]', '{"a":[1]}', "|\n  ", ">+\n \n   ", "|-\n\n  ",
]  # fmt: skip


@st.composite
def _yaml_lines(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        indent = " " * draw(st.sampled_from([0, 0, 1, 2, 2, 4]))
        first = draw(st.sampled_from(_YAML_SCALARS))
        second = draw(st.sampled_from(_YAML_SCALARS))
        gap = draw(st.sampled_from([" ", "", "  ", "\t"]))
        shape = draw(st.sampled_from(["{i}{a}:{g}{b}", "{i}-{g}{a}", "{i}? {a}", "{i}{a}"]))
        lines.append(shape.format(i=indent, a=first, b=second, g=gap))
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return newline.join(lines) + draw(st.sampled_from(["", "\n"]))


@FUZZ
@given(text=_yaml_lines())
def test_generated_yaml_same_outcome(text: str) -> None:
    assert_same(text.encode("utf-8", "surrogatepass"), "yaml")


_FLOW_ATOMS = [
    "a", '"a"', "'a'", "1", '"x y"', "", "b c", '"q\\"q"', "'it''s'", "null", "-1", "~",
    '"a":b', "'a':b", "a:b", '"a": b', "? a", '? "a"', ": b", "&x", "*x", "-", "#c", " #c",
]  # fmt: skip
_FLOW_SEPARATORS = [", ", ",", " ,", ",\n", "\n", " ", ": ", ":", " : ", ",\n  ", "\t"]


def _flow_text(items: list[str], mapping: bool, separators: list[str], close: str) -> str:
    if mapping:
        pairs = [f"{items[i]}{separators[i]}{items[i + 1]}" for i in range(0, len(items) - 1, 2)]
        return "{" + ", ".join(pairs) + close.replace("]", "}")
    listed = "".join(f"{item}{sep}" for item, sep in zip(items, separators, strict=False))
    return "[" + listed + close


_flow = st.recursive(
    st.sampled_from(_FLOW_ATOMS),
    lambda inner: st.builds(
        _flow_text,
        st.lists(inner, max_size=4),
        st.booleans(),
        st.lists(st.sampled_from(_FLOW_SEPARATORS), min_size=4, max_size=4),
        st.sampled_from(["]", ",]", " ]", "\n]"]),
    ),
    max_leaves=10,
)


@FUZZ
@given(
    prefix=st.sampled_from(["", "a: ", "- ", "a:\n  ", "? ", "a: b\nc: "]),
    body=_flow,
    suffix=st.sampled_from(["", "\n", " # c\n", "\nd: e\n"]),
)
def test_generated_flow_yaml_same_outcome(prefix: str, body: str, suffix: str) -> None:
    assert_same((prefix + body + suffix).encode(), "yaml")


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


def _dumped(data: Any, fmt: Format, flow: bool | None) -> bytes | None:
    try:
        if fmt == "json":
            return json.dumps(data, ensure_ascii=flow is True).encode("utf-8", "surrogatepass")
        if fmt == "toml":
            return tomli_w.dumps(data).encode("utf-8", "surrogatepass")
        return _dump(data, fmt, flow=flow)
    except Exception:
        return None  # not expressible in that format


@FUZZ
@given(
    data=st.dictionaries(st.text(max_size=6), _values, max_size=4),
    fmt=st.sampled_from(["json", "yaml", "toml"]),
    flow=st.sampled_from([False, True, None]),
)
def test_generated_data_same_outcome(data: dict[str, Any], fmt: Format, flow: bool) -> None:
    raw = _dumped(data, fmt, flow)
    if raw is not None:
        assert_same(raw, fmt)


_NOISE = [
    "{", "}", "[", "]", ":", ",", '"', "'", "\n", "  ", "- ", "a", "=", "[[t]]", "[e]", "1",
    "-1", "1e999", "NaN", "inf", "\\u", "\\ud800", "\t", "#", "null", "true", "é", "\x00",
    "9999999999999999999", "0x", "1979-05-27", "07:32:00", ".",
]  # fmt: skip


@FUZZ
@given(parts=st.lists(st.sampled_from(_NOISE), max_size=40), fmt=st.sampled_from(["json", "toml"]))
def test_generated_noise_same_outcome(parts: list[str], fmt: Format) -> None:
    assert_same("".join(parts).encode("utf-8", "surrogatepass"), fmt)


def _mutations(seed: int, count: int) -> Iterator[tuple[Path, bytes]]:
    """Fixtures of the corpus with a few pieces inserted, replaced or cut, reproducibly."""
    rng = random.Random(seed)
    paths = [p for p in _corpus() if p.suffix in (".yaml", ".yml")]
    pieces = _YAML_SCALARS + [": ", "- ", "\n", "  ", "#", "'", '"']
    for _ in range(count):
        path = rng.choice(paths)
        text = path.read_text(encoding="utf-8", errors="replace")
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(text) + 1)
            cut = rng.choice([0, 0, 1, 3])
            text = text[:at] + rng.choice(pieces) + text[at + cut :]
        yield path, text.encode("utf-8", "surrogatepass")


@needs_c_parser
def test_mutated_yaml_same_outcome() -> None:
    for _path, raw in _mutations(seed=11, count=200):
        assert_same(raw, "yaml")


def _fast_only(fmt: Format) -> Callable[[bytes], Any]:
    return lambda raw: load._PLAIN_PARSERS[fmt](raw.decode(), raw)


@needs_c_parser
def test_fast_yaml_path_accepts_most_mutations() -> None:
    """Guards against a fast path that silently stops working (everything falling back)."""
    accepted = 0
    for _path, raw in _mutations(seed=5, count=200):
        try:
            _fast_only("yaml")(raw)
            accepted += 1
        except Exception:
            pass
    assert accepted > 20


# --- the nesting bound -------------------------------------------------------------------------


def _loop_only(text: str, fmt: Format) -> int | None:
    saved = load._certainly_shallow
    load._certainly_shallow = lambda text, fmt: False  # type: ignore[assignment]
    try:
        return load._over_deep_offset(text, fmt)
    finally:
        load._certainly_shallow = saved  # type: ignore[assignment]


_NESTING = ["[", "]", "{", "}", "[" * 20, "]" * 20, "{" * 20, '"', "'", "\\", "#", "\n", ".",
            "." * 20, "=", ",", "a", " "]  # fmt: skip


@FUZZ
@given(
    parts=st.lists(st.sampled_from(_NESTING), max_size=80),
    fmt=st.sampled_from(["json", "yaml", "toml"]),
)
def test_shallow_proof_agrees_with_the_loop(parts: list[str], fmt: Format) -> None:
    text = "".join(parts)
    if load._certainly_shallow(text, fmt):
        assert _loop_only(text, fmt) is None, text
    assert load._over_deep_offset(text, fmt) == _loop_only(text, fmt)


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
def test_shallow_proof_holds_for_a_large_fixture(fmt: Format) -> None:
    """A fixture with many brackets (well past the count that skips the check) and strings
    holding brackets and quotes is proven shallow without the character loop."""
    case = _bench_case()
    case["turns"] = [json.loads(json.dumps(turn)) for turn in case["turns"] * 40]
    case["description"] = "a [ { \" ' # . ] } string"
    text = _dump(case, fmt, flow=True).decode()
    assert text.count("[") + text.count("{") > 100
    assert load._certainly_shallow(text, fmt)
    deep = "[" * 65 + "]" * 65
    assert not load._certainly_shallow(deep, fmt)
    assert load._over_deep_offset(deep, fmt) == 64


# --- key positions -----------------------------------------------------------------------------


def _shallow_paths(data: Any) -> list[tuple[str, ...]]:
    """Every key path one or two levels deep that admission could ask about."""
    paths: list[tuple[str, ...]] = []
    if not isinstance(data, dict):
        return paths
    for key, value in data.items():
        paths.append((key,))
        if isinstance(value, dict):
            paths.extend((key, child) for child in value)
    return paths


def _reference_key_positions(text: str, fmt: Format, paths: list[Any]) -> dict[Any, Any]:
    """Key positions from the full index (JSON, TOML) or the round-trip parser (YAML)."""
    source_map = SourceMap(text, fmt)
    if fmt == "yaml":
        found = {}
        for path in paths:
            node = source_map._yaml_node(path[:-1])
            try:
                line, col = node.lc.key(path[-1])
            except (TypeError, AttributeError, KeyError):
                continue
            found[path] = (line + 1, col + 1)
        return found
    source_map._index()  # built first, so key_positions reads it
    return source_map.key_positions(paths)


def assert_key_positions(raw: bytes, fmt: Format) -> None:
    document = parse_document(raw, fmt, Path(f"x.{fmt}"))
    if not isinstance(document, RawDocument):
        return
    text = document.source_map.text
    paths = _shallow_paths(document.data)
    expected = _reference_key_positions(text, fmt, paths)
    assert SourceMap(text, fmt).key_positions(paths) == expected, text
    # as admission asks: the name and the kinds of checks
    if isinstance(document.data, dict) and isinstance(document.data.get("expects"), dict):
        asked = [("name",)] + [("expects", kind) for kind in document.data["expects"]]
        asked = [path for path in asked if path in expected]
        wanted = {path: expected[path] for path in asked}
        assert SourceMap(text, fmt).key_positions(asked) == wanted, text


@pytest.mark.parametrize("path", list(_corpus()), ids=lambda p: str(p.relative_to(ROOT)))
def test_corpus_key_positions(path: Path) -> None:
    assert_key_positions(path.read_bytes(), load.FIXTURE_SUFFIXES[path.suffix.lower()])


@FUZZ
@given(
    data=st.dictionaries(st.text(max_size=6), _values, max_size=5),
    fmt=st.sampled_from(["json", "yaml", "toml"]),
    flow=st.sampled_from([False, True, None]),
)
def test_generated_key_positions(data: dict[str, Any], fmt: Format, flow: bool) -> None:
    raw = _dumped(data, fmt, flow)
    if raw is not None:
        assert_key_positions(raw, fmt)


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
def test_key_positions_of_a_bench_case_need_no_full_index(fmt: Format) -> None:
    case = _bench_case()
    text = _dump(case, fmt).decode()
    paths: list[Any] = [("name",)] + [("expects", kind) for kind in case["expects"]]
    shallow = {
        "json": sourcemap._json_shallow_keys,
        "toml": sourcemap._toml_shallow_keys,
        "yaml": sourcemap._yaml_block_keys,
    }[fmt](text, paths)
    assert shallow is not None
    assert SourceMap(text, fmt).key_positions(paths) == _reference_key_positions(
        text, fmt, paths
    )


TOML_LAYOUTS = [
    'name = "n"\n[expects]\na = 1\nb = [\n  [1, 2],\n  { c = "[" },\n]\nc = 2\n',
    'name = "n"\nexpects = { a = 1 }\n',
    'name = "n"\nexpects.a = 1\n',
    'name = "n"\n[expects.a]\nx = 1\n[expects]\nb = 2\n',
    'name = "n"\n[[expects.a]]\nx = 1\n[[expects.a]]\nx = 2\n[expects]\nb = 1\n',
    'name = "n"\n[expects.a.deep]\nx = 1\n',
    'name = "n"\n["expects"]\na = 1\n',
    'name = "n"\n[expects]\n"a" = 1\n',
    'name = """\n[expects]\na = 1\n"""\n[expects]\na = 2\n',
    'x = [\n[1]\n]\nname = "n"\n[expects]\na = 1\n',
    'name = "n" # [expects]\n  [ expects ]  # c\n  a   =  1\r\n',
]


@pytest.mark.parametrize("text", TOML_LAYOUTS)
def test_toml_layouts_key_positions(text: str) -> None:
    assert_key_positions(text.encode(), "toml")
