"""The rtoml fast path of TOML fixtures (``load._plain_toml``, through ``_fast_toml``) against
tomllib, the reference:
whenever the fast path gives data, tomllib gives the same data for the same text; every
text it declines, or that rtoml refuses, is left to tomllib. rtoml reads TOML 1.1, so the
texts by which 1.1 differs from tomllib's 1.0 are among those tried."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrunner import load

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(
    p.read_text("utf-8")
    for p in ROOT.rglob("*.toml")
    if ".venv" not in p.parts and p.name not in {"pyproject.toml", "evalrunner.toml"}
)

# TOML 1.1 (rtoml) against 1.0 (tomllib), and other corners.
TRICKY = [
    "a = {b = 1,\n c = 2}\n",
    "a = {b = 1, }\n",
    "a = {\n}\n",
    'a = "\\e"\n',
    'a = "\\x41"\n',
    "\ufeffa = 1\n",
    "a = 07:32\n",
    "a = 1979-05-27\n",
    "a = 1\na = 2\n",
    "[a]\nb = 1\n[a]\nc = 2\n",
    "a = 9223372036854775808\n",
    "a = -9223372036854775809\n",
    "a = 01\n",
    "a = 1.\n",
    "a = .5\n",
    "é = 1\n",
    "a = nan\n",
    "a = -inf\n",
    "a = 1e400\n",
    'a = "\\ud800"\n',
    'a = "\\U00110000"\n',
    'a = "x\ty"\n',
    "a = 1 # \x01\n",
    "a.b = 1\n[a]\nc = 2\n",
    "a = {b = 1}\n[a.c]\nd = 1\n",
    "a = []\n[[a]]\nb = 1\n",
    'a = """\nx"""\n',
    'a = """x \\\n  y"""\n',
    "a = 0xDEAD_BEEF\n",
    "a = 1__0\n",
    "a = [1, 'x', {b = 2}]\n",
    "a = [\n  1,\n  2,\n]\n",
    'a = "{"\nb = {c = "}"}\n',
    # An inline table over two lines, each balanced by a brace inside a string: TOML 1.1 only.
    'a = { b = "}",\n c = "{" }\n',
    "a = { b = '}',\n c = '{' }\n",
    'a = { b = "\\"}" ,\n c = "{" }\n',
    'a = { b = "#{" ,\n c = 1 }\n',
    'a = [ { b = "}",\n c = "{" } ]\n',
    'a = { b = """}\n{""", c = 1 }\n',
    'a = { b = "x#}" }\nc = 1 # {}\n',
    'a = { b = "x }\n',
    'a = { b = "x", c = 1, }\n',
    # Floats that overflow, which only an exponent can do past the long-number check.
    "a = 1e3_09\n",
    "a = 1.8e+308\n",
    "a = 5E309\n",
    "a = [1.0, 2e999]\n",
    "a = { b = 1e400 }\n",
    # Tables in another order than rtoml's: a table declared after what made it implicitly.
    "[a.b]\n[c]\n[a]\nx = 1\n",
    "[[t]]\n[[t.s.r.c]]\n[x]\n[t.s.r]\n",
    "[[t]]\n[[t.s]]\n[t.s.r]\n[[t.s.r.c]]\n[x]\n[[t.s]]\n[t.s.r]\n",
    "[[t]]\n[[t.s.r.c]]\n[x]\n[[t]]\n[t.s]\n",
    '["a".b]\n[c]\n[a]\n',
    "  [a.b]\n[c]\n\t[a]\n",
    "a = 'x\"y'\n",
    'a = "line\\nbreak"\n',
    "a = true\nb = false\n",
    "[[turns]]\nuser_input = 'hi'\n[[turns.steps]]\nresponse = {type = 'text', content = 'x'}\n",
]

TOKENS = [
    "[a]\n",
    "[a.b]\n",
    "[[a.b]]\n",
    "[c]\n",
    "a",
    "b",
    "name",
    "turns",
    "=",
    " ",
    "\n",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    ",",
    ".",
    '"',
    "'",
    "1",
    "-1",
    "1.5",
    "1e3",
    "true",
    "false",
    "nan",
    "inf",
    "#",
    "\\",
    "\\n",
    "\\e",
    "\\x41",
    "\\u00e9",
    "\t",
    "\r",
    "x",
    "é",
    "0x1",
    "_",
    ":",
    "-",
    "+",
    "1979-05-27",
]


def agrees(text: str) -> None:
    try:
        fast = load._plain_toml(text, text.encode("utf-8", "surrogatepass"))
    except Exception:
        return  # declined or refused: tomllib decides, as for any text
    reference = tomllib.loads(text, parse_float=load._finite_float)
    assert fast == reference, text
    assert type(fast) is type(reference)
    assert repr(fast) == repr(reference), text  # the same order of keys, at every level


@pytest.mark.skipif(load._rtoml_loads() is None, reason="rtoml is not installed")
@pytest.mark.parametrize("text", TRICKY + FIXTURES)
def test_the_fast_path_gives_tomllibs_data_or_declines(text: str) -> None:
    agrees(text)


@pytest.mark.skipif(load._rtoml_loads() is None, reason="rtoml is not installed")
@settings(deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join))
def test_token_soup_agrees(text: str) -> None:
    agrees(text)


@pytest.mark.skipif(load._rtoml_loads() is None, reason="rtoml is not installed")
@settings(deadline=None)
@given(
    st.sampled_from(FIXTURES or ["a = 1\n"]),
    st.integers(0, 10_000),
    st.sampled_from(TOKENS + ["", "\n\n", "}", "{", ",}"]),
    st.integers(0, 3),
)
def test_mutated_fixtures_agree(text: str, at: int, token: str, cut: int) -> None:
    where = at % (len(text) + 1)
    agrees(text[:where] + token + text[where + cut :])


@pytest.mark.skipif(load._rtoml_loads() is None, reason="rtoml is not installed")
def test_what_toml_1_1_allows_is_refused_as_tomllib_refuses_it() -> None:
    for text in TRICKY[:5]:
        refused = load.parse_document(text.encode("utf-8"), "toml", Path("x.toml"))
        assert isinstance(refused, list), text
        assert refused[0].message.startswith("invalid TOML"), refused


def test_floats_that_are_not_finite_are_found() -> None:
    assert load._finite_floats({"a": [1.0, {"b": 2.5}]})
    assert not load._finite_floats({"a": [1.0, {"b": math.inf}]})
    assert not load._finite_floats([math.nan])


@pytest.mark.skipif(load._rtoml_loads() is None, reason="rtoml is not installed")
@settings(deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from("abcd"),
            st.text(alphabet="{}#\"' x\\", max_size=5),
            st.booleans(),  # a literal string, where it can be one
            st.sampled_from([", ", ",\n", ",\n  "]),  # a newline in the table is TOML 1.1
        ),
        min_size=1,
        max_size=4,
        unique_by=lambda pair: pair[0],
    ),
    st.sampled_from(["t = ", "t = [ ", "[s]\nt = "]),
)
def test_inline_tables_holding_braces_in_strings_agree(
    pairs: list[tuple[str, str, bool, str]], opening: str
) -> None:
    import json

    parts = []
    for key, text, literal, separator in pairs:
        shown = f"'{text}'" if literal and "'" not in text else json.dumps(text)
        parts.append(f"{key} = {shown}{separator}")
    body = "".join(parts).rstrip(", \n")
    closing = " ]" if opening.endswith("[ ") else ""
    agrees(f"{opening}{{ {body} }}{closing}\n")


def test_a_two_line_inline_table_balanced_by_braces_in_strings_is_refused() -> None:
    text = 'a = { b = "}",\n c = "{" }\n'
    refused = load.parse_document(text.encode("utf-8"), "toml", Path("x.toml"))
    assert isinstance(refused, list), refused
    assert (refused[0].line, refused[0].col) == (1, 15), refused
    assert refused[0].message.startswith("invalid TOML"), refused


def test_the_bundled_toml_fixtures_take_the_fast_path() -> None:
    # Not a timing: what the checks above send to tomllib. A description in a multi-line
    # string at the top, and [[array]] elements that repeat a sub-table, are plain TOML.
    bundled = sorted((ROOT / "evals" / "regression").glob("*.toml"))
    assert len(bundled) >= 6
    for path in bundled:
        assert not load._read_otherwise_by_rtoml(path.read_text("utf-8")), path.name


@pytest.mark.parametrize(
    "text",
    [
        # An [[array]] header before the last triple quote may sit inside a multi-line
        # string: it forgets nothing, so the later [a] goes to tomllib.
        '[a.b]\n[c]\ns = """\n[[a]]\n"""\n[a]\n',
        "[a.b]\n[c]\ns = '''\n[[a]]\n'''\n[a]\n",
        # After the last one it is a header, and starts a new element.
        'd = """\nx"""\n[[t]]\n[t.s.r]\n[[t]]\n[t.s.r]\n',
    ],
)
def test_headers_inside_and_after_multiline_strings(text: str) -> None:
    agrees(text)


def test_an_array_header_after_the_last_triple_quote_starts_a_new_element() -> None:
    assert not load._read_otherwise_by_rtoml('d = """\nx"""\n[[t]]\n[t.s.r]\n[[t]]\n[t.s.r]\n')
    assert load._read_otherwise_by_rtoml('[a.b]\n[c]\ns = """\n[[a]]\n"""\n[a]\n')
