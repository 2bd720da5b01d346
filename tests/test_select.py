"""Selection: the ``-k`` expression parser and matcher, ``--shard`` parsing and slicing, and
suite order (issue 10 §1, §4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrunner.model import Shard
from evalrunner.selection import SelectionError
from evalrunner.selection.keywords import MAX_KEYWORD_LENGTH, MAX_KEYWORD_NESTING, parse_keyword
from evalrunner.selection.select import (
    MAX_SHARDS,
    case_identity,
    parse_shard,
    suite_order,
    take_shard,
)

ROOT = Path(__file__).resolve().parent.parent


def selects(expression: str, name: str, source: str = "x.yaml", cls: str | None = None) -> bool:
    return parse_keyword(expression).matches(name, source, cls)


# --- -k: what an identifier matches ------------------------------------------------------------


def test_an_identifier_is_a_case_insensitive_substring_of_name_path_or_class() -> None:
    assert selects("echo", "echo-roundtrip")
    assert selects("ECHO", "Echo-Roundtrip")
    assert selects("round", "echo-roundtrip")
    assert selects("smoke", "case", source="smoke/a.yaml")  # a subdirectory's name
    assert selects("a.yaml", "case", source="smoke/a.yaml")  # the file name
    assert selects("smoke/a", "case", source="smoke/a.yaml")
    assert selects("negative", "case", cls="negative")
    assert selects("NEG", "case", cls="negative")
    assert not selects("positive", "case", cls=None)
    assert not selects("echo", "reply-shape", source="reply.json", cls="positive")


def test_identifiers_may_hold_pytest_identifier_characters() -> None:
    for word in ["a:b", "a+b", "a-b", "a.b", "a[1]", "a\\b", "a/b", "ü_1"]:
        assert selects(word, f"x{word}y"), word


# --- -k: the grammar ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("alpha", True),
        ("not alpha", False),
        ("alpha and beta", True),
        ("alpha and gamma", False),
        ("gamma or beta", True),
        ("gamma or delta", False),
        ("not gamma and alpha", True),  # not binds tighter than and
        ("not (gamma or alpha)", False),
        ("gamma and delta or alpha", True),  # and binds tighter than or
        ("gamma and (delta or alpha)", False),
        ("not not alpha", True),
        ("((alpha))", True),
        ("alpha and not (beta and gamma)", True),
        ("\talpha\tand  beta ", True),
    ],
)
def test_precedence_and_parentheses_are_pytests(expression: str, expected: bool) -> None:
    assert selects(expression, "alpha-beta") is expected


def test_keywords_are_lower_case_only_as_in_pytest() -> None:
    # "AND" is an identifier, so "a AND b" is two names in a row: an error at the second.
    with pytest.raises(SelectionError, match="column 3"):
        parse_keyword("a AND b")
    assert selects("AND", "sAND")
    assert selects("Not", "knot")


def test_an_empty_expression_selects_every_case() -> None:
    assert selects("", "anything")
    assert selects("   ", "anything")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("a and", '-k \'a and\': column 6: expected a name, "not" or "(", got the end of'),
        ("and a", "-k 'and a': column 1: expected a name, \"not\" or \"(\", got 'and'"),
        ("a b", 'column 3: expected "and", "or" or the end of the expression, got the name'),
        ("(a", 'column 3: expected ")" to close the "(" at column 1'),
        ("a)", 'column 2: expected "and", "or" or the end of the expression, got \')\''),
        ("()", 'column 2: expected a name, "not" or "(", got \')\''),
        ("not", "column 4: expected a name"),
        ("a or or b", "column 6: expected a name"),
        ("a && b", "column 3: unexpected character '&' (U+0026)"),
        ("a\x1bb", "-k 'a\\x1bb': column 2: unexpected character U+001B; names are made of"),
        ("a\nb", "column 2: unexpected character U+000A"),
        ("a\u202eb", "-k 'a\\u202eb': column 2: unexpected character U+202E"),
        ("a\udcffb", "column 2: unexpected character U+DCFF"),
        ("a\x00", "column 2: unexpected character U+0000"),
        ('name == "x"', "column 6: unexpected character '='"),
    ],
)
def test_malformed_expressions_name_the_column(expression: str, message: str) -> None:
    with pytest.raises(SelectionError) as caught:
        parse_keyword(expression)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)


def test_nesting_is_bounded_with_a_position_not_a_recursion_error() -> None:
    fine = "(" * MAX_KEYWORD_NESTING + "a" + ")" * MAX_KEYWORD_NESTING
    assert selects(fine, "a")
    deep = "(" * (MAX_KEYWORD_NESTING + 1) + "a" + ")" * (MAX_KEYWORD_NESTING + 1)
    with pytest.raises(SelectionError, match=f"column {MAX_KEYWORD_NESTING + 1}: nested more"):
        parse_keyword(deep)
    with pytest.raises(SelectionError, match="nested more than"):
        parse_keyword("not " * 1000 + "a")
    with pytest.raises(SelectionError, match="nested more than"):
        parse_keyword("(" * 4000)


def test_long_flat_expressions_are_fine_and_huge_ones_refused() -> None:
    chain = " or ".join(["zz"] * 600) + " or a"
    assert len(chain) <= MAX_KEYWORD_LENGTH
    assert selects(chain, "a")
    assert not selects(" and ".join(["a"] * 600) + " and zz", "a")
    with pytest.raises(SelectionError, match=f"at most {MAX_KEYWORD_LENGTH} are accepted"):
        parse_keyword("a" * 10_000_000)
    with pytest.raises(SelectionError) as caught:
        parse_keyword("x" * 100 + " &")
    assert "..." in str(caught.value) and len(str(caught.value)) < 300


_WORDS = ["alpha", "beta", "gamma"]


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0) -> str:
    """Well-formed expressions in pytest's grammar."""
    choice = draw(st.integers(0, 4 if depth < 4 else 0))
    if choice == 0:
        return draw(st.sampled_from(_WORDS))
    if choice == 1:
        return "not " + draw(expressions(depth + 1))
    if choice == 2:
        return "(" + draw(expressions(depth + 1)) + ")"
    operator = " and " if choice == 3 else " or "
    return draw(expressions(depth + 1)) + operator + draw(expressions(depth + 1))


@settings(deadline=None, database=None)
@given(expression=expressions(), present=st.sets(st.sampled_from(_WORDS)))
def test_matching_agrees_with_python_boolean_logic(expression: str, present: set[str]) -> None:
    # Python's not/and/or have the same precedence as pytest's grammar.
    expected = eval(expression, {"__builtins__": {}}, {w: w in present for w in _WORDS})
    name = "-".join(sorted(present)) or "none"
    assert parse_keyword(expression).matches(name, "f.yaml", None) is expected


@settings(deadline=None, database=None)
@given(
    pieces=st.lists(
        st.sampled_from(
            ["a", "b", " ", "(", ")", "and", "or", "not", "\x1b", "\t", "=", "é", "\udcff"]
        ),
        max_size=40,
    )
)
def test_any_text_parses_or_is_a_selection_error(pieces: list[str]) -> None:
    text = "".join(pieces)
    try:
        keyword = parse_keyword(text)
    except SelectionError as exc:
        assert str(exc).startswith("-k '") and "column" in str(exc)
        return
    keyword.matches("a-b", "a/b.yaml", "positive")  # never raises


# --- --shard -----------------------------------------------------------------------------------


def test_shard_parses_i_of_n() -> None:
    assert parse_shard("1/3") == Shard(1, 3)
    assert parse_shard("3/3") == Shard(3, 3)
    assert parse_shard(" 2/5 ") == Shard(2, 5)
    assert parse_shard(f"{MAX_SHARDS}/{MAX_SHARDS}") == Shard(MAX_SHARDS, MAX_SHARDS)
    assert str(Shard(2, 7)) == "2/7"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--shard: expected I/N, shard I of N, such as 1/3; got ''"),
        ("3", "--shard: expected I/N"),
        ("1/3/5", "--shard: expected I/N"),
        ("-1/3", "--shard: expected I/N"),
        ("1.0/3", "--shard: expected I/N"),
        ("a/b", "--shard: expected I/N"),
        ("\uff11/\uff13", "--shard: expected I/N"),  # full-width digits are not ASCII digits
        ("1/3\x1b[2J", "got '1/3\\x1b[2J'"),
        ("9" * 5000 + "/3", "--shard: expected I/N"),
        ("0/3", "--shard 0/3: the shard number I must be from 1 to N (3)"),
        ("4/3", "--shard 4/3: the shard number I must be from 1 to N (3); shards are numbered"),
        ("1/0", "--shard 1/0: the shard count N must be from 1 to 10000, got 0"),
        ("1/10001", "the shard count N must be from 1 to 10000, got 10001"),
        ("1/999999", "the shard count N must be from 1 to 10000, got 999999"),
    ],
)
def test_bad_shards_are_refused_with_what_would_be_right(text: str, message: str) -> None:
    with pytest.raises(SelectionError) as caught:
        parse_shard(text)
    assert message in str(caught.value)
    assert len(str(caught.value)) < 200
    assert "\x1b" not in str(caught.value)


@settings(deadline=None, database=None)
@given(
    names=st.lists(st.text(min_size=1, max_size=8), unique=True, max_size=40),
    count=st.integers(1, 12),
)
def test_shards_partition_the_cases_evenly_and_keep_their_order(
    names: list[str], count: int
) -> None:
    slices = [
        take_shard(names, Shard(index, count), lambda n: case_identity("f.yaml", n))
        for index in range(1, count + 1)
    ]
    taken = [name for piece in slices for name in piece]
    assert sorted(taken) == sorted(names)  # every case once
    sizes = [len(piece) for piece in slices]
    assert max(sizes) - min(sizes) <= 1
    for piece in slices:
        assert piece == [n for n in names if n in piece]  # the given order is kept


def test_a_case_s_shard_does_not_depend_on_where_it_is_listed() -> None:
    names = [f"case-{i}" for i in range(30)]
    identity = lambda n: case_identity("f.yaml", n)  # noqa: E731
    forward = take_shard(names, Shard(2, 4), identity)
    backward = take_shard(names[::-1], Shard(2, 4), identity)
    assert sorted(forward) == sorted(backward)


# Computed once from SHA-256 and written down: a change of hash, identity or dealing (which
# would send cases to other shards on machines running another version) fails here.
GOLDEN = {
    1: ["c-00", "c-04", "c-05", "c-06"],
    2: ["c-02", "c-07", "c-09"],
    3: ["c-01", "c-03", "c-08"],
}


def test_shards_are_the_same_on_every_machine() -> None:
    names = [f"c-{i:02d}" for i in range(10)]
    for index, expected in GOLDEN.items():
        got = take_shard(names, Shard(index, 3), lambda n: case_identity("dir/a.yaml", n))
        assert got == expected, index


def test_shards_do_not_depend_on_pythons_string_hash() -> None:
    program = (
        "from evalrunner.selection.select import take_shard, case_identity\n"
        "from evalrunner.model import Shard\n"
        "names = [f'c-{i:02d}' for i in range(10)]\n"
        "print(take_shard(names, Shard(1, 3), lambda n: case_identity('dir/a.yaml', n)))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", program],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=ROOT,
        ).stdout
        for seed in ("0", "1", "12345")
    }
    assert outputs == {repr(GOLDEN[1]) + "\n"}


def test_identity_is_the_reported_path_and_name_as_bytes() -> None:
    assert case_identity("sub/a.yaml", "x") == b"sub/a.yaml\x00x"
    # A file name that is not UTF-8 is hashed as the report shows it.
    assert case_identity(os.fsdecode(b"caf\xe9.yaml"), "x") == b"caf\\xe9.yaml\x00x"


# --- suite order -------------------------------------------------------------------------------


def test_suite_order_compares_path_components_then_names() -> None:
    entries = [
        ("b.yaml", "z"),
        ("a/z.yaml", "y"),
        ("a.yaml", "x"),
        ("a/b/c.yaml", "w"),
        ("a-b.yaml", "v"),
        ("a.yaml", "u"),
    ]
    ordered = sorted(entries, key=lambda e: suite_order(*e))
    assert ordered == [
        ("a/b/c.yaml", "w"),  # "a" < "a-b.yaml" < "a.yaml": a directory's files stay together
        ("a/z.yaml", "y"),
        ("a-b.yaml", "v"),
        ("a.yaml", "u"),
        ("a.yaml", "x"),
        ("b.yaml", "z"),
    ]
