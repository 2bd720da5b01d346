"""Stage 1, load: suite discovery (SPEC §3) and admission rule 1, strict parsing (SPEC §4).

Every refusal is asserted on its real message and its 1-based ``line:col``.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import cast

import pytest

from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import (
    DEFAULT_MAX_BYTES,
    MAX_DEPTH,
    SuiteNotFound,
    discover,
    load_document,
    load_paths,
    load_suite,
    parse_document,
)
from evalrunner.model import AdmissionError, Case

VALID_JSON = """{
  "name": "ok",
  "turns": [{"user_input": "hi", "steps": [{"response": {"type": "text", "content": "ok"}}]}],
  "expects": {"response_contains": ["ok"]}
}
"""

VALID_YAML = """name: ok
turns:
  - user_input: hi
    steps:
      - response: {type: text, content: ok}
expects:
  response_contains: [ok]
"""

VALID_TOML = """name = "ok"

[[turns]]
user_input = "hi"

[[turns.steps]]
response = { type = "text", content = "ok" }

[expects]
response_contains = ["ok"]
"""


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def refused(tmp_path: Path, name: str, content: str | bytes, **kw: int) -> list[AdmissionError]:
    """Load a fixture that must be refused at load time; its errors."""
    outcome = load_document(write(tmp_path, name, content), **kw)
    assert isinstance(outcome, list), f"expected {name} to be refused, it parsed: {outcome}"
    assert outcome, "a refusal carries at least one error"
    return outcome


def only(errors: list[AdmissionError]) -> AdmissionError:
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


def where(error: AdmissionError) -> tuple[int | None, int | None]:
    return error.line, error.col


def admitted(tmp_path: Path, name: str, content: str | bytes) -> Case:
    document = load_document(write(tmp_path, name, content))
    assert not isinstance(document, list), [str(e) for e in document]
    case = admit(document)
    assert isinstance(case, Case), [str(e) for e in case]
    return case


# --- discovery (SPEC §3) -----------------------------------------------------------------------


def test_discover_is_sorted_recursive_and_skips_dotfiles_and_other_files(
    tmp_path: Path,
) -> None:
    # Issue 10 §1: subdirectories are searched (SPEC §3 said they were not), dot-directories
    # are not.
    for name in ["b.yaml", "a.json", "c.toml", "d.yml", ".hidden.json", "notes.txt", "x.JSONC"]:
        write(tmp_path, name, VALID_JSON)
    nested = tmp_path / "nested"
    nested.mkdir()
    write(nested, "deep.json", VALID_JSON)
    hidden = tmp_path / ".git"
    hidden.mkdir()
    write(hidden, "secret.json", VALID_JSON)
    assert [p.relative_to(tmp_path).as_posix() for p in discover(tmp_path)] == [
        "a.json",
        "b.yaml",
        "c.toml",
        "d.yml",
        "nested/deep.json",
    ]


def test_discover_orders_by_name_not_by_creation(tmp_path: Path) -> None:
    for name in ["z.json", "m.toml", "a.yaml", "b_2.json", "b_10.json"]:
        write(tmp_path, name, VALID_JSON)
    assert [p.name for p in discover(tmp_path)] == [
        "a.yaml",
        "b_10.json",
        "b_2.json",
        "m.toml",
        "z.json",
    ]


def test_yml_is_a_yaml_fixture(tmp_path: Path) -> None:
    write(tmp_path, "case.yml", VALID_YAML)
    loaded = load_suite(tmp_path)
    assert loaded.errors == ()
    assert [d.format for d in loaded.documents] == ["yaml"]


def test_empty_suite_is_suite_not_found(tmp_path: Path) -> None:
    write(tmp_path, ".hidden.json", VALID_JSON)
    write(tmp_path, "README.md", "# not a fixture")
    with pytest.raises(SuiteNotFound, match="no fixtures found"):
        discover(tmp_path)
    with pytest.raises(SuiteNotFound):
        load_suite(tmp_path)


def test_missing_directory_is_suite_not_found(tmp_path: Path) -> None:
    with pytest.raises(SuiteNotFound, match="suite directory not found"):
        load_suite(tmp_path / "nope")


def test_a_file_is_not_a_suite_directory(tmp_path: Path) -> None:
    with pytest.raises(SuiteNotFound):
        discover(write(tmp_path, "a.json", VALID_JSON))


def test_load_suite_parses_every_format(tmp_path: Path) -> None:
    write(tmp_path, "a.json", VALID_JSON)
    write(tmp_path, "b.yaml", VALID_YAML)
    write(tmp_path, "c.toml", VALID_TOML)
    loaded = load_suite(tmp_path)
    assert loaded.errors == ()
    assert [d.format for d in loaded.documents] == ["json", "yaml", "toml"]
    assert loaded.documents[0].data == loaded.documents[1].data == loaded.documents[2].data


def test_load_suite_keeps_going_after_a_broken_file(tmp_path: Path) -> None:
    write(tmp_path, "a.json", "{")
    write(tmp_path, "b.yaml", VALID_YAML)
    write(tmp_path, "c.toml", "x = ")
    loaded = load_suite(tmp_path)
    assert [d.path.name for d in loaded.documents] == ["b.yaml"]
    assert sorted(Path(e.path).name for e in loaded.errors) == ["a.json", "c.toml"]


def test_load_paths_mixes_files_and_directories(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    write(suite, "a.json", VALID_JSON)
    single = write(tmp_path, "single.toml", VALID_TOML)
    loaded = load_paths([suite, single])
    assert [d.path.name for d in loaded.documents] == ["a.json", "single.toml"]


def test_load_document_refuses_an_unknown_extension(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "case.txt", VALID_JSON))
    assert "not a fixture file" in error.message
    assert ".json" in error.message


# --- the document root -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "kind"),
    [
        ("list.json", "[1, 2]", "array"),
        ("scalar.json", '"just a string"', "string"),
        ("number.json", "3", "integer"),
        ("list.yaml", "- a\n- b\n", "array"),
        ("scalar.yaml", "hello\n", "string"),
        ("empty.yaml", "", "null"),
        ("comment.yaml", "# nothing\n", "null"),
    ],
)
def test_a_non_object_root_is_a_clear_error(
    tmp_path: Path, name: str, text: str, kind: str
) -> None:
    document = load_document(write(tmp_path, name, text))
    assert not isinstance(document, list), "a list root is data, refused by admission"
    outcome = admit(document)
    assert isinstance(outcome, list)
    error = only(outcome)
    assert error.message == (
        f"a fixture must be an object (a mapping or table) at the top level, got {kind}"
    )
    assert where(error) == (1, 1)


# --- rule 1: JSON ------------------------------------------------------------------------------


def test_json_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    text = '{\n  "name": "x",\n  "turns": [1 2]\n}\n'
    error = only(refused(tmp_path, "bad.json", text))
    assert error.message == "invalid JSON: Expecting ',' delimiter"
    assert where(error) == (3, 15)
    assert str(error) == f"{tmp_path / 'bad.json'}:3:15: invalid JSON: Expecting ',' delimiter"


# The decoder's message for each is written to be followed by its position ("Invalid control
# character at"); the refusal gives the position itself, and says what would be right.
@pytest.mark.parametrize(
    ("text", "spot", "message"),
    [
        (
            '{"name": "a\x01"}',
            (1, 12),
            "a string holds U+0001 (\\x01), a control character; write it as the escape \\u0001",
        ),
        (
            '{"name": "a\tb"}',
            (1, 12),
            "a string holds U+0009 (\\t), a control character; write it as the escape \\t",
        ),
        (
            '{"name": "abc',
            (1, 10),
            "a string starts here and is never closed; end it with a double quote",
        ),
        (
            '{"name": // the case\n "a"}',
            (1, 10),
            "comments are not JSON; remove them (YAML fixtures may hold # comments)",
        ),
        ('{"name": /* x */ "a"}', (1, 10), "comments are not JSON; remove them"),
        ('{\n  "name": True}', (2, 11), "True is not JSON; write true"),
        ('{"name": None}', (1, 10), "None is not JSON; write null"),
        (
            '{"name": hello}',
            (1, 10),
            'the bare word hello is not a JSON value; quote a string ("hello")',
        ),
        ("{\"name\": 'a'}", (1, 10), 'strings take double quotes ("text"), not single ones'),
        ('{"name": ', (1, 10), "the file ends where a value is expected; finish the value"),
        ('{"name": -}', (1, 10), "Expecting value"),
    ],
)
def test_json_syntax_errors_say_what_would_be_right(
    tmp_path: Path, text: str, spot: tuple[int, int], message: str
) -> None:
    error = only(refused(tmp_path, "bad.json", text))
    assert where(error) == spot
    assert error.message.startswith(f"invalid JSON: {message}")
    assert not error.message.endswith((" at", " starting"))


def test_json_trailing_comma_is_refused(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "bad.json", '{\n  "name": "x",\n}\n'))
    assert error.message.startswith("invalid JSON:")
    assert where(error) == (3, 1)


def test_json_duplicate_key_points_at_the_repeat(tmp_path: Path) -> None:
    text = '{\n  "name": "x",\n  "expects": {\n    "tools_used": ["a"],\n'
    text += '    "tools_used": []\n  }\n}\n'
    error = only(refused(tmp_path, "dup.json", text))
    assert error.message == 'duplicate key "tools_used"; each key may appear once per object'
    assert where(error) == (5, 5)
    assert error.json_path == ("expects", "tools_used")


def test_json_every_duplicate_key_is_reported(tmp_path: Path) -> None:
    text = '{"a": 1, "a": 2,\n "b": {"c": 1, "c": 2}}'
    errors = refused(tmp_path, "dup.json", text)
    assert [(e.json_path, where(e)) for e in errors] == [(("a",), (1, 10)), (("b", "c"), (2, 16))]


# The decoder stops at the first object that closes holding a repeat, before it has read the
# rest: a syntax error after it used to reach the scanner that places repeats (a traceback).
@pytest.mark.parametrize(
    ("rest", "syntax"),
    [
        ("[1 2]}", (1, 58, "invalid JSON: Expecting ',' delimiter")),
        (
            "",
            (
                1,
                55,
                "invalid JSON: the file ends where a value is expected; finish the value and "
                "close each bracket",
            ),
        ),
        ('"abc\\q"}', (1, 59, "invalid JSON: Invalid \\escape")),
    ],
    ids=["missing-comma", "cut-short", "bad-escape"],
)
def test_json_text_that_stops_being_json_after_a_duplicate_key_is_refused_at_both(
    tmp_path: Path, rest: str, syntax: tuple[int, int, str]
) -> None:
    text = '{"name": "a", "turns": [{"x": 1, "x": 2}], "expects": ' + rest
    errors = refused(tmp_path, "dup.json", text)
    assert [(e.line, e.col, e.message) for e in errors] == [
        (1, 34, 'duplicate key "x"; each key may appear once per object'),
        syntax,
    ]
    assert errors[0].json_path == ("turns", 0, "x")


def test_json_a_duplicate_key_after_a_syntax_error_is_not_guessed_at(tmp_path: Path) -> None:
    # The repeat in the first object stops the decoder; past the syntax error the text is not
    # JSON, so the second object's repeat is not reported at a guessed position.
    text = '{"a": {"x": 1, "x": 2}, "b": [1 2], "c": {"y": 1, "y": 2}}'
    errors = refused(tmp_path, "dup.json", text)
    assert [(e.col, e.message) for e in errors] == [
        (16, 'duplicate key "x"; each key may appear once per object'),
        (33, "invalid JSON: Expecting ',' delimiter"),
    ]


@pytest.mark.parametrize(
    ("literal", "shown"), [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity")]
)
def test_json_non_finite_numbers_are_refused_at_their_position(
    tmp_path: Path, literal: str, shown: str
) -> None:
    text = '{\n  "name": "x",\n  "expects": {"max_tool_calls": ' + literal + "}\n}\n"
    error = only(refused(tmp_path, "nan.json", text))
    assert error.message == f"{shown} is not allowed; numbers must be finite"
    assert where(error) == (3, 33)
    assert error.json_path == ("expects", "max_tool_calls")


def test_json_large_exponent_overflowing_to_infinity_is_refused(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "big.json", '{"x": 1e999}'))
    assert error.message == (
        "number 1e999 is too large for a 64-bit float (at most about 1.8e308); "
        "quote it to make it a string"
    )
    assert where(error) == (1, 7)


# --- rule 1: YAML ------------------------------------------------------------------------------


def test_yaml_duplicate_key(tmp_path: Path) -> None:
    text = "name: x\nexpects:\n  tools_used: [a]\n  tools_used: [b]\n"
    error = only(refused(tmp_path, "dup.yaml", text))
    assert error.message == "duplicate key 'tools_used'; each key may appear once per mapping"
    assert where(error) == (4, 3)


def test_yaml_every_duplicate_key_and_out_of_range_number_is_reported(tmp_path: Path) -> None:
    # As JSON and TOML do: the loader stopped at the first, and the next run at the next.
    text = (
        "name: x\n"
        "turns:\n"
        "  - user_input: {a: 1, a: 2}\n"
        "expects:\n"
        "  max_tool_calls: 99999999999999999999999\n"
        "  min_tool_calls: 1e400\n"
        "expects: {}\n"
    )
    errors = refused(tmp_path, "dup.yaml", text)
    assert [(e.message.split(";")[0].split(":")[0], where(e)) for e in errors] == [
        ("duplicate key 'a'", (3, 24)),
        ("integer 99999999999999999999999 is out of range", (5, 19)),
        ("number 1e400 is too large for a 64-bit float (at most about 1.8e308)", (6, 19)),
        ("duplicate key 'expects'", (7, 1)),
    ]


def test_yaml_multiple_documents_are_refused(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "two.yaml", "name: a\n---\nname: b\n"))
    assert "one YAML document" in error.message
    assert where(error) == (2, 1)


def test_yaml_explicit_single_document_is_fine(tmp_path: Path) -> None:
    assert admitted(tmp_path, "one.yaml", "---\n" + VALID_YAML + "...\n").name == "ok"


@pytest.mark.parametrize(
    ("value", "tag"),
    [
        ("!!python/object:os.system {}", "!!python/object:os.system"),
        ("!!python/object/apply:os.system ['echo pwned']", "!!python/object/apply:os.system"),
        ("!!python/name:os.system ''", "!!python/name:os.system"),
        ("!custom 1", "!custom"),
        ("!<tag:example.com,2024:thing> x", "tag:example.com,2024:thing"),
    ],
)
def test_yaml_tags_are_refused_and_nothing_is_constructed(
    tmp_path: Path, value: str, tag: str
) -> None:
    error = only(refused(tmp_path, "tag.yaml", f"name: x\ndescription: {value}\n"))
    assert error.message == (
        f"YAML tag {tag} is not allowed; fixtures hold plain data only "
        "(remove the tag; quote a value to make it a string)"
    )
    assert where(error) == (2, 14)


def test_yaml_anchor_is_refused(tmp_path: Path) -> None:
    text = "name: x\nexpects:\n  tools_used: &t [a]\n  tools_not_used: *t\n"
    error = only(refused(tmp_path, "anchor.yaml", text))
    assert error.message == "YAML anchors are not allowed in fixtures; write the value out in full"
    assert where(error) == (3, 15)


def test_yaml_billion_laughs_is_refused_at_the_first_anchor(tmp_path: Path) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    error = only(refused(tmp_path, "lol.yaml", "\n".join(lines) + "\n"))
    assert "anchors are not allowed" in error.message
    assert where(error) == (1, 4)


def test_yaml_alias_without_anchor_is_refused(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "alias.yaml", "name: x\ndescription: *nowhere\n"))
    assert error.line == 2
    assert "alias" in error.message.lower()


def test_yaml_1_1_directive_is_refused(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "old.yaml", "%YAML 1.1\n---\nname: x\nclass: no\n"))
    assert error.message == "%YAML 1.1 directive: fixtures are YAML 1.2 (remove the directive)"
    assert where(error) == (1, 1)  # the directive itself


def test_yaml_1_2_no_stays_a_string(tmp_path: Path) -> None:
    document = load_document(write(tmp_path, "no.yaml", "a: no\nb: yes\nc: off\nd: 0o17\n"))
    assert not isinstance(document, list)
    assert document.data == {"a": "no", "b": "yes", "c": "off", "d": 15}


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("2024-01-31", "date"),
        ("2024-01-31T10:00:00Z", "datetime"),
        ("2024-01-31 10:00:00", "datetime"),
    ],
)
def test_yaml_dates_are_refused(tmp_path: Path, value: str, kind: str) -> None:
    error = only(refused(tmp_path, "date.yaml", f"name: x\ndescription: {value}\n"))
    assert error.message == f"{kind} values are not allowed; quote the value to make it a string"
    assert where(error) == (2, 14)
    assert error.json_path == ("description",)


def test_yaml_quoted_date_is_a_string(tmp_path: Path) -> None:
    document = load_document(write(tmp_path, "date.yaml", "description: '2024-01-31'\n"))
    assert not isinstance(document, list)
    assert document.data == {"description": "2024-01-31"}


@pytest.mark.parametrize(
    ("key", "shown"), [("2", "2"), ("true", "true"), ("null", "null"), ("1.5", "1.5")]
)
def test_yaml_non_string_keys_are_refused_at_the_key(tmp_path: Path, key: str, shown: str) -> None:
    text = f"name: x\nexpects:\n  tools_used: [a]\n  {key}: [b]\n"
    error = only(refused(tmp_path, "key.yaml", text))
    assert error.message == f"mapping key {shown} is not a string; quote it"
    assert where(error) == (4, 3)


@pytest.mark.parametrize(
    ("value", "shown"), [(".nan", "NaN"), (".inf", "Infinity"), ("-.inf", "-Infinity")]
)
def test_yaml_non_finite_numbers_are_refused(tmp_path: Path, value: str, shown: str) -> None:
    error = only(refused(tmp_path, "nan.yaml", f"name: x\nx: {value}\n"))
    assert error.message == f"{shown} is not allowed; numbers must be finite"
    assert where(error) == (2, 4)


@pytest.mark.parametrize(
    ("text", "tag"), [("a: !!binary aGVsbG8=\n", "!!binary"), ("a: !!set {x}\n", "!!set")]
)
def test_yaml_binary_and_sets_are_refused(tmp_path: Path, text: str, tag: str) -> None:
    error = only(refused(tmp_path, "rich.yaml", text))
    assert error.message.startswith(f"YAML tag {tag} is not allowed")
    assert where(error) == (1, 4)


def test_yaml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "bad.yaml", "name: x\nturns: [a\n  b: c\n"))
    assert error.message.startswith("invalid YAML:")
    assert where(error) == (3, 4)


# --- rule 1: TOML ------------------------------------------------------------------------------


def test_toml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "bad.toml", 'name = "x"\n\n[expects]\nmax_tool_calls = \n'))
    assert error.message == (
        'invalid TOML: Invalid value; a value is a "string", a number, true or false, a date, '
        "an array [ ... ] or an inline table { ... }"
    )
    assert where(error) == (4, 18)


@pytest.mark.parametrize(
    ("text", "position", "hint"),
    [
        # Where tomllib says only what is wrong, the message goes on with what would be right.
        ("a = { b = 1,\n c = 2 }\n", (1, 13), "must close on the line it opens"),
        ('a = { b = "}",\n c = "{" }\n', (1, 15), "must close on the line it opens"),
        ('t = [\n  { id = "c1",\n    name = "echo" },\n]\n', (2, 15), "must close on the line"),
        ("a = { b = 1, }\n", (1, 14), "no comma before its closing '}'"),
        ("a = 1\na = 2\n", (2, 6), "each key may be set once per table"),
        ("a.b = 1\na.b.c = 2\n", (2, 10), "cannot also hold keys of its own"),
        ("[x]\n[x]\n", (2, 3), "a table is declared once"),
        ("a.b = 1\n[a]\n", (2, 3), "or by dotted keys"),
        ("a = { b = 1\n}\n", (1, 12), "must close on the line it opens"),
        ("a = 'abc\nb = 1\n", (3, 1), "must close on its line"),
        ('a = "abc\n', (1, 9), "must close on its line"),
    ],
)
def test_toml_syntax_errors_say_what_would_be_right(
    tmp_path: Path, text: str, position: tuple[int, int], hint: str
) -> None:
    error = only(refused(tmp_path, "bad.toml", text))
    assert error.message.startswith("invalid TOML: ")
    assert hint in error.message, error.message
    assert where(error) == position
    assert "\n" not in error.message


def test_a_toml_error_on_a_line_past_the_text_gets_no_inline_table_hint() -> None:
    from evalrunner.fixture.load import _toml_hint

    assert _toml_hint("Invalid initial character for a key part", "a = {", 9) == ""
    assert _toml_hint("Something new from tomllib", "a = 1", 1) == ""


def test_toml_duplicate_key_is_a_syntax_error(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "dup.toml", 'name = "x"\nname = "y"\n'))
    assert error.message.startswith("invalid TOML:")
    assert error.line == 2


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("2024-01-31", "date"),
        ("10:30:00", "time"),
        ("2024-01-31T10:30:00", "datetime"),
        ("1979-05-27T07:32:00Z", "datetime"),
    ],
)
def test_toml_dates_and_times_are_refused(tmp_path: Path, value: str, kind: str) -> None:
    text = f'name = "x"\n\n[expects]\nwhen = {value}\n'
    error = only(refused(tmp_path, "date.toml", text))
    assert error.message == f"{kind} values are not allowed; quote the value to make it a string"
    assert where(error) == (4, 8)
    assert error.json_path == ("expects", "when")


@pytest.mark.parametrize(
    ("value", "shown"), [("nan", "NaN"), ("inf", "Infinity"), ("-inf", "-Infinity")]
)
def test_toml_non_finite_numbers_are_refused(tmp_path: Path, value: str, shown: str) -> None:
    error = only(refused(tmp_path, "nan.toml", f'name = "x"\nx = {value}\n'))
    assert error.message == f"{shown} is not allowed; numbers must be finite"
    assert where(error) == (2, 5)


def test_toml_problems_are_reported_in_order(tmp_path: Path) -> None:
    errors = refused(
        tmp_path, "dates.toml", "a = 2024-01-01\nb = 10:00:00\nc = 1979-05-27T07:32:00Z\n"
    )
    assert [where(e) for e in errors] == [(1, 5), (2, 5), (3, 5)]


# --- rule 1: all formats -----------------------------------------------------------------------


def test_default_size_cap_is_one_mebibyte() -> None:
    assert DEFAULT_MAX_BYTES == 1024 * 1024


@pytest.mark.parametrize("name", ["big.json", "big.yaml", "big.toml"])
def test_files_over_the_size_cap_are_refused(tmp_path: Path, name: str) -> None:
    error = only(refused(tmp_path, name, "#" + "x" * 200, max_bytes=100))
    assert "over the 100-byte cap" in error.message
    assert error.path == str(tmp_path / name)
    assert where(error) == (1, 1)


def test_an_oversized_file_is_never_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "huge.json", "[" + " " * 5000 + "]")
    reads: list[int] = []
    real_read = os.read

    def counting_read(fd: int, size: int) -> bytes:
        reads.append(size)
        return real_read(fd, size)

    monkeypatch.setattr(os, "read", counting_read)
    assert isinstance(load_document(path, max_bytes=100), list)
    assert sum(reads) == 101


def test_a_file_at_the_size_cap_is_accepted(tmp_path: Path) -> None:
    text = VALID_JSON
    path = write(tmp_path, "exact.json", text)
    assert not isinstance(load_document(path, max_bytes=len(text.encode())), list)


def test_parse_document_enforces_the_size_cap_too(tmp_path: Path) -> None:
    outcome = parse_document(b"{}" * 10, "json", tmp_path / "x.json", max_bytes=5)
    assert isinstance(outcome, list)
    assert "over the 5-byte cap" in only(outcome).message


def test_load_suite_passes_the_size_cap_on(tmp_path: Path) -> None:
    write(tmp_path, "a.json", VALID_JSON)
    loaded = load_suite(tmp_path, max_bytes=10)
    assert loaded.documents == ()
    assert "cap" in only(list(loaded.errors)).message


@pytest.mark.parametrize("name", ["bad.json", "bad.yaml", "bad.toml"])
def test_invalid_utf8_is_refused_with_its_position(tmp_path: Path, name: str) -> None:
    content = b'name: "ok"\n\ndescription: "caf\xe9 \xff"\n'
    error = only(refused(tmp_path, name, content))
    assert error.message == "not valid UTF-8 at byte 29: fixtures must be UTF-8 text"
    assert where(error) == (3, 18)


@pytest.mark.parametrize("name", ["bad.json", "bad.yaml", "bad.toml"])
def test_invalid_utf8_after_a_byte_order_mark_counts_the_files_bytes(
    tmp_path: Path, name: str
) -> None:
    # The same text as above behind a UTF-8 byte-order mark: three bytes later in the file,
    # at the same line and column (the mark is no character of the text).
    content = b'\xef\xbb\xbfname: "ok"\n\ndescription: "caf\xe9 \xff"\n'
    error = only(refused(tmp_path, name, content))
    assert error.message == "not valid UTF-8 at byte 32: fixtures must be UTF-8 text"
    assert where(error) == (3, 18)


def test_invalid_utf8_column_counts_characters_not_bytes(tmp_path: Path) -> None:
    content = "a: é€\nb: ü".encode() + b"\xff\n"
    error = only(refused(tmp_path, "u.yaml", content))
    assert where(error) == (2, 5)


@pytest.mark.parametrize(
    ("name", "text"), [("a.json", VALID_JSON), ("a.yaml", VALID_YAML), ("a.toml", VALID_TOML)]
)
def test_utf8_bom_is_accepted(tmp_path: Path, name: str, text: str) -> None:
    plain = admitted(tmp_path, "plain_" + name, text)
    with_bom = admitted(tmp_path, "bom_" + name, b"\xef\xbb\xbf" + text.encode())
    assert plain == with_bom


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bad.json", '{\n  "name": "x",\n  "turns": [1 2]\n}\n'),
        ("dup.yaml", "name: x\nexpects:\n  a: 1\n  a: 2\n"),
        ("bad.toml", 'name = "x"\n\n[expects]\nmax_tool_calls = \n'),
        ("date.toml", 'name = "x"\n\n[expects]\nwhen = 2024-01-31\n'),
        ("date.yaml", "name: x\n\ndescription: 2024-01-31\n"),
    ],
)
def test_crlf_gives_the_same_positions_as_lf(tmp_path: Path, name: str, text: str) -> None:
    lf = only(refused(tmp_path, "lf_" + name, text))
    crlf = only(refused(tmp_path, "crlf_" + name, text.replace("\n", "\r\n")))
    assert (lf.message, where(lf)) == (crlf.message, where(crlf))
    assert lf.line is not None


def test_bom_does_not_shift_columns(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "bom.json", b'\xef\xbb\xbf{"a": 1,}'))
    assert where(error) == (1, 9)


# --- nesting depth -----------------------------------------------------------------------------

DEEP = 100_000


@pytest.mark.parametrize(
    ("name", "text", "position"),
    [
        ("list.json", "[" * DEEP + "]" * DEEP, (1, MAX_DEPTH + 1)),
        ("object.json", '{"a":' * DEEP + "1" + "}" * DEEP, (1, 5 * MAX_DEPTH + 1)),
        ("flow.yaml", "[" * DEEP + "]" * DEEP, (1, MAX_DEPTH + 1)),
        ("flowmap.yaml", "{a: " * DEEP + "1" + "}" * DEEP, (1, 4 * MAX_DEPTH + 1)),
        ("array.toml", "a = " + "[" * DEEP + "]" * DEEP, (1, MAX_DEPTH + 5)),
        ("inline.toml", "a = " + "{b = " * DEEP + "1" + "}" * DEEP, (1, 5 * MAX_DEPTH + 5)),
    ],
)
def test_nesting_deeper_than_max_depth_is_refused_without_recursion_error(
    tmp_path: Path, name: str, text: str, position: tuple[int, int]
) -> None:
    error = only(refused(tmp_path, name, text))
    assert error.message == f"nesting deeper than {MAX_DEPTH} levels; flatten the data"
    assert where(error) == position


def test_yaml_block_nesting_is_capped(tmp_path: Path) -> None:
    text = "".join("  " * i + "a:\n" for i in range(MAX_DEPTH + 10))
    error = only(refused(tmp_path, "block.yaml", text))
    assert error.message == f"nesting deeper than {MAX_DEPTH} levels; flatten the data"
    assert error.line is not None


def test_yaml_block_sequence_nesting_is_capped(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "seq.yaml", "- " * 5000 + "1\n"))
    assert error.message == f"nesting deeper than {MAX_DEPTH} levels; flatten the data"


def test_toml_dotted_keys_cannot_nest_past_max_depth(tmp_path: Path) -> None:
    """Dotted keys build nesting without brackets; admission must still never recurse on it."""
    text = VALID_TOML + "\n[[turns.steps]]\nresponse.x." + ".".join(["a"] * 5000) + " = 1\n"
    error = only(refused(tmp_path, "dotted.toml", text))
    assert error.message == f"nesting deeper than {MAX_DEPTH} levels; flatten the data"
    assert error.line == 13


def test_toml_table_headers_cannot_nest_past_max_depth(tmp_path: Path) -> None:
    text = "[" + ".".join(["t"] * (MAX_DEPTH + 5)) + "]\nx = 1\n"
    error = only(refused(tmp_path, "header.toml", text))
    assert error.message == f"nesting deeper than {MAX_DEPTH} levels; flatten the data"
    assert error.line == 1


def test_nesting_at_max_depth_is_accepted(tmp_path: Path) -> None:
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    document = load_document(write(tmp_path, "ok.json", text))
    assert not isinstance(document, list)


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path: Path) -> None:
    text = '{"description": "' + "[" * 500 + '"}'
    document = load_document(write(tmp_path, "s.json", text))
    assert not isinstance(document, list)
    toml = 'description = "' + "{" * 500 + "\"\nother = '" + "[" * 500 + "'\n"
    assert not isinstance(load_document(write(tmp_path, "s.toml", toml)), list)


@pytest.mark.parametrize(
    ("name", "content", "position"),
    [
        ("s.json", '{"name": "x\\ud800"}', (1, 10)),
        ("s.yaml", 'name: "\\ud800"\n', (1, 7)),
        ("k.json", '{"\\udc00": 1}', (1, 2)),
    ],
)
def test_lone_surrogate_escapes_are_refused(
    tmp_path: Path, name: str, content: str, position: tuple[int, int]
) -> None:
    error = only(refused(tmp_path, name, content))
    assert "lone surrogate" in error.message
    assert where(error) == position


def test_escaped_surrogate_pairs_are_text(tmp_path: Path) -> None:
    path = write(tmp_path, "ok.json", '{"name": "\\ud83d\\ude80"}')
    document = load_document(path)
    assert not isinstance(document, list)
    assert document.data == {"name": "🚀"}


def test_a_toml_dotted_key_deeper_than_the_cap_is_refused_before_parsing(tmp_path: Path) -> None:
    # tomllib takes quadratic time on long dotted keys: 500,000 parts would hang the loader.
    keys = ".".join(["k"] * 500_000)
    for text in (f"{keys} = 1\n", f"[{keys}]\n"):
        error = only(refused(tmp_path, "dotted.toml", text))
        assert error.message.startswith(f"nesting deeper than {MAX_DEPTH} levels")
        assert where(error)[0] == 1


def test_dots_in_toml_values_and_quoted_keys_are_not_nesting(tmp_path: Path) -> None:
    floats = ", ".join(["1.5"] * 200)
    text = (
        f'"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z" = "{"." * 300}"\nf = [{floats}]\n'
    )
    document = load_document(write(tmp_path, "dots.toml", text))
    assert not isinstance(document, list), document


@pytest.mark.parametrize(
    ("codec", "named"), [("utf-16", "UTF-16"), ("utf-32", "UTF-32"), ("utf-16-be", None)]
)
def test_other_encodings_are_refused(tmp_path: Path, codec: str, named: str | None) -> None:
    raw = "name: café\n".encode(codec)
    if named is None:
        raw = b"\xfe\xff" + raw  # big-endian UTF-16 with its byte-order mark
        named = "UTF-16"
    error = only(refused(tmp_path, "other.yaml", raw))
    assert error.message.startswith(f"file is {named} ")
    assert "save it as UTF-8" in error.message
    assert where(error) == (1, 1)


def test_latin1_is_invalid_utf8_with_its_position(tmp_path: Path) -> None:
    error = only(refused(tmp_path, "latin.yaml", "name: café\n".encode("latin-1")))
    assert error.message.startswith("not valid UTF-8 at byte 9")
    assert where(error) == (1, 10)


# --- numbers: real integers, 64 bits, finite floats (issue 9, class 1) -------------------------

FLOAT_COUNTS = {
    "json": (
        '{"name": "n", "turns": [{"user_input": "hi", "steps": [{"response": '
        '{"type": "text", "content": "ok"}}]}],\n'
        ' "expects": {"exact_tool_calls": 1.0,\n'
        '  "tool_results_contain": [{"tool": "echo", "needle": "x", "call_index": 0.0}]}}\n'
    ),
    "yaml": (
        "name: n\nturns:\n  - user_input: hi\n    steps:\n"
        "      - response: {type: text, content: ok}\nexpects:\n  exact_tool_calls: 1.0\n"
        "  tool_results_contain: [{tool: echo, needle: x, call_index: 0.0}]\n"
    ),
    "toml": (
        'name = "n"\n[[turns]]\nuser_input = "hi"\n[[turns.steps]]\n'
        'response = { type = "text", content = "ok" }\n[expects]\nexact_tool_calls = 1.0\n'
        'tool_results_contain = [{ tool = "echo", needle = "x", call_index = 0.0 }]\n'
    ),
}
FLOAT_COUNT_POSITIONS = {
    "json": [(2, 34), (3, 74)],
    "yaml": [(7, 21), (8, 62)],
    "toml": [(7, 20), (8, 69)],
}


@pytest.mark.parametrize("fmt", ["json", "yaml", "toml"])
def test_integer_fields_refuse_floats_with_their_positions(tmp_path: Path, fmt: str) -> None:
    document = load_document(write(tmp_path, f"floats.{fmt}", FLOAT_COUNTS[fmt]))
    assert not isinstance(document, list), [str(e) for e in document]
    outcome = admit(document)
    assert isinstance(outcome, list), "1.0 passed for an integer"
    assert [(e.message, where(e)) for e in outcome] == [
        (
            "expects.exact_tool_calls must be an integer, got number 1.0",
            FLOAT_COUNT_POSITIONS[fmt][0],
        ),
        (
            "expects.tool_results_contain[0].call_index must be an integer, got number 0.0",
            FLOAT_COUNT_POSITIONS[fmt][1],
        ),
    ]


HUGE = "9" * 5000


@pytest.mark.parametrize(
    ("name", "text", "position"),
    [
        ("huge.json", '{"name": "x",\n "n": ' + HUGE + "}", (2, 7)),
        ("neg.json", '{"a": [1, -' + HUGE + "]}", (1, 11)),
        ("huge.yaml", "name: x\nn: " + HUGE + "\n", (2, 4)),
        ("hex.yaml", "n: 0x" + "f" * 5000 + "\n", (1, 4)),
        ("huge.toml", 'name = "x"\n[t]\nn = ' + HUGE + "\n", (3, 5)),
        ("inline.toml", "a = [1, { b = " + HUGE + " }]\n", (1, 15)),
    ],
)
def test_integers_of_thousands_of_digits_are_refused_with_a_position(
    tmp_path: Path, name: str, text: str, position: tuple[int, int]
) -> None:
    # Python refuses to convert more than 4,300 digits: that was a ValueError traceback.
    error = only(refused(tmp_path, name, text))
    assert error.message.startswith("an integer of 5000 digits is out of range")
    assert error.message.endswith(
        "integers must be between -9223372036854775808 and 9223372036854775807 (64 bits); "
        "quote it to make it a string"
    )
    assert where(error) == position


@pytest.mark.parametrize(
    ("name", "text", "position"),
    [
        ("big.json", '{"n": 9223372036854775808}', (1, 7)),
        ("big.yaml", "n: -9223372036854775809\n", (1, 4)),
        ("big.toml", "n = 0x1_0000_0000_0000_0000\n", (1, 5)),
    ],
)
def test_integers_beyond_64_bits_are_refused(
    tmp_path: Path, name: str, text: str, position: tuple[int, int]
) -> None:
    error = only(refused(tmp_path, name, text))
    assert " is out of range: integers must be between -9223372036854775808 and " in error.message
    assert where(error) == position


@pytest.mark.parametrize(
    "text",
    ["n: 9223372036854775807\nm: -9223372036854775808\n", "n: 0b" + "1" * 63 + "\n"],
)
def test_the_64_bit_extremes_are_accepted(tmp_path: Path, text: str) -> None:
    assert not isinstance(load_document(write(tmp_path, "edge.yaml", text)), list)


@pytest.mark.parametrize(
    ("name", "text", "position"),
    [
        ("big.yaml", "x: 1e400\n", (1, 4)),
        ("big.toml", "x = 1e400\n", (1, 5)),
        ("long.json", '{"x": ' + HUGE + ".5e10}", (1, 7)),
    ],
)
def test_floats_that_overflow_are_refused_as_too_large(
    tmp_path: Path, name: str, text: str, position: tuple[int, int]
) -> None:
    error = only(refused(tmp_path, name, text))
    assert error.message.startswith("number ")
    assert "is too large for a 64-bit float (at most about 1.8e308)" in error.message
    assert where(error) == position


# --- YAML: every tag, the merge key (issue 9, class 2) -----------------------------------------


@pytest.mark.parametrize(
    ("text", "tag", "position"),
    [
        ('name: !!int "abc"\n', "!!int", (1, 7)),
        ('name: !!bool "maybe"\n', "!!bool", (1, 7)),
        ("--- !!map\nname: x\n", "!!map", (1, 5)),
        ("name: !!str 12\n", "!!str", (1, 7)),
        ("name: ! x\n", "!", (1, 7)),
        ("turns: !!seq []\n", "!!seq", (1, 8)),
        ("name: !!null ''\n", "!!null", (1, 7)),
        ("name: !!float 1\n", "!!float", (1, 7)),
        ("%TAG !e! tag:example.com,2024:\n---\nname: !e!x y\n", "tag:example.com,2024:x", (3, 7)),
        ("? !!str key\n: 1\n", "!!str", (1, 3)),
    ],
)
def test_every_yaml_tag_is_refused_core_tags_too(
    tmp_path: Path, text: str, tag: str, position: tuple[int, int]
) -> None:
    error = only(refused(tmp_path, "tagged.yaml", text))
    assert error.message == (
        f"YAML tag {tag} is not allowed; fixtures hold plain data only "
        "(remove the tag; quote a value to make it a string)"
    )
    assert where(error) == position


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("name: x\nexpects:\n  <<: {tools_used: [a]}\n  tools_used: [b]\n", (3, 3)),
        ("a: {<<: {b: 1}}\n", (1, 5)),
        ("- x\n- <<: [{a: 1}]\n", (2, 3)),
    ],
)
def test_the_yaml_merge_key_is_refused(
    tmp_path: Path, text: str, position: tuple[int, int]
) -> None:
    error = only(refused(tmp_path, "merge.yaml", text))
    assert error.message == (
        "the YAML merge key '<<' is not allowed in fixtures; write the keys out in full "
        "(quote it, '<<', if it is meant as a key)"
    )
    assert where(error) == position


def test_a_quoted_merge_key_is_just_a_key(tmp_path: Path) -> None:
    document = load_document(write(tmp_path, "quoted.yaml", "'<<': {a: 1}\n"))
    assert not isinstance(document, list)
    assert document.data == {"<<": {"a": 1}}


# --- files that are not regular files, and names that are not UTF-8 (issue 9, class 3) ---------


def _load_without_hanging(path: Path) -> object:
    """load_document in a thread: a regression (blocking on a FIFO) fails instead of hanging
    the test session. The limit only guards against that; nothing here is timed."""
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(load_document(path)), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), f"load_document blocked on {path}"
    return outcome[0]


def test_a_fifo_named_like_a_fixture_is_refused_and_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    outcome = _load_without_hanging(fifo)
    assert isinstance(outcome, list)
    assert [str(e) for e in outcome] == [
        f"{fifo}: is a FIFO (named pipe), not a regular file; a fixture must be a regular file"
    ]


def test_a_socket_a_directory_and_a_link_to_a_device_are_refused(tmp_path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "sock.json"))
        (tmp_path / "dir.toml").mkdir()
        (tmp_path / "zero.yaml").symlink_to("/dev/zero")
        messages = {
            path.name: only(cast(list[AdmissionError], _load_without_hanging(path))).message
            for path in sorted(tmp_path.iterdir())
        }
    finally:
        server.close()
    assert messages == {
        "dir.toml": "is a directory, not a regular file; a fixture must be a regular file",
        "sock.json": "is a socket, not a regular file; a fixture must be a regular file",
        "zero.yaml": "is a character device, not a regular file; a fixture must be a regular file",
    }


def test_a_suite_with_a_fifo_is_refused_as_a_whole(tmp_path: Path) -> None:
    write(tmp_path, "ok.json", VALID_JSON)
    os.mkfifo(tmp_path / "pipe.json")
    loaded = load_suite(tmp_path)
    assert [d.path.name for d in loaded.documents] == ["ok.json"]
    assert [e.message for e in loaded.errors] == [
        "is a FIFO (named pipe), not a regular file; a fixture must be a regular file"
    ]


def test_a_file_name_that_is_not_utf8_is_shown_with_its_bytes_escaped(tmp_path: Path) -> None:
    name = os.fsdecode(b"caf\xe9\x1b.json")
    error = only(refused(tmp_path, name, "{"))
    assert error.path == f"{tmp_path}/caf\\xe9\\x1b.json"
    assert str(error).encode("utf-8")  # printable, so it can be written anywhere


def test_validate_and_run_say_the_same_about_a_missing_suite(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(SuiteNotFound) as from_run:
        discover(missing)
    with pytest.raises(SuiteNotFound) as from_validate:
        load_paths([missing])
    assert (
        str(from_run.value) == str(from_validate.value) == f"{missing}: suite directory not found"
    )


@pytest.mark.parametrize("version", ["1.3", "1.0", "2.0", "1.99999999999999999999", ""])
def test_a_yaml_version_directive_other_than_1_2_is_refused_at_its_position(
    tmp_path: Path, version: str
) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(f"# a comment first\n%YAML {version}\n---\nname: x\n", encoding="utf-8")
    outcome = load_document(path)
    assert isinstance(outcome, list)
    assert [(e.line, e.col) for e in outcome] == [(2, 1)]
    assert outcome[0].message.endswith("directive: fixtures are YAML 1.2 (remove the directive)")
