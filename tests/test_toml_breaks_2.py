"""Found by a breaker, fixed since: the TOML syntax-error hints (``load._toml_hint``) and the
string scan they read a line's structure with."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalrunner.fixture import load
from evalrunner.model import AdmissionError

# --- quadratic scans of a line's strings -------------------------------------------------------

# A line with a '{' and an unclosed basic string full of escaped quotes: the string scan was
# tried again from every '"', each running to the end of the line, so its time was quadratic
# (20 KB took seconds; a fixture under the 1 MiB cap, hours). Held without a clock: every
# quote and '#' the scan meets must start a match, which makes it one pass.
_QUOTES = 'a = { b = 1, = "' + '\\"' * 10_000 + "\n"

HOSTILE_LINES = [
    _QUOTES.rstrip("\n"),
    'a = { b = "' + "\\" * 5_001,
    "a = { b = '" + "x" * 5_000,
    'a = { b = "x\\' + '"' * 3,
    "#" + '"' * 100,
    "'" * 101,
    '"' * 101,
]


@pytest.mark.parametrize("line", HOSTILE_LINES, ids=range(len(HOSTILE_LINES)))
def test_every_quote_and_hash_the_string_scan_meets_starts_a_match(line: str) -> None:
    position = 0
    while position < len(line):
        if line[position] in "\"'#":
            match = load._TOML_LINE_STRINGS.match(line, position)
            assert match is not None, position
            position = max(match.end(), position + 1)
        else:
            position += 1


def test_an_unclosed_string_full_of_escaped_quotes_is_refused() -> None:
    outcome = load.parse_document(_QUOTES.encode(), "toml", Path("x.toml"))
    assert isinstance(outcome, list)
    assert load._toml_hint("Invalid initial character for a key part", _QUOTES, 1) != ""


# --- hints -------------------------------------------------------------------------------------


def refusal(text: str) -> AdmissionError:
    outcome = load.parse_document(text.encode(), "toml", Path("x.toml"))
    assert isinstance(outcome, list) and len(outcome) == 1, outcome
    return outcome[0]


def test_a_table_made_by_dotted_keys_is_not_called_a_repeated_header() -> None:
    # One [a] header only: a was made by the dotted key. The hint says each [table] header
    # may appear once, and points at [[name]]: neither is the problem.
    error = refusal("a.b = 1\n[a]\n")
    assert "each [table] header may appear once" not in error.message, error.message


@pytest.mark.parametrize(
    "text",
    [
        # README: "an inline table over two lines" gets a hint; these get tomllib's words only
        # ("Unclosed inline table").
        "a = { b = 1, c = 2\n}\n",
        "a = { b = 1\n}\n",
    ],
)
def test_an_inline_table_closed_on_the_next_line_gets_the_hint(text: str) -> None:
    error = refusal(text)
    assert "must close on the line it opens" in error.message, error.message


def test_an_unclosed_literal_string_gets_the_unclosed_string_hint() -> None:
    # README: "an unclosed string" gets a hint. 'abc (a literal string) gets tomllib's
    # 'Expected "'" at the end of the file', at the end of the file (3:1), no hint.
    error = refusal("a = 'abc\nb = 1\n")
    assert "must close on its line" in error.message, error.message
