"""``evalrunner convert``: every conversion admits to the same case, and nothing is mangled."""

from __future__ import annotations

import functools
import json
import string
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_document, parse_document
from evalrunner.fixture.positions import SourceMap
from evalrunner.model import Case, Format
from evalrunner.text import name_problem
from evalrunner.toolbox.convert import Conversion, convert, rebase, schema_reference

ROOT = Path(__file__).resolve().parent.parent
SUITE = sorted((ROOT / "evals" / "regression").iterdir())
runner = CliRunner()

TRICKY = [
    "no",
    "yes",
    "on",
    "1e3",
    "null",
    "~",
    "true",
    "012",
    "1:20",
    "2024-01-02",
    " leading",
    "trailing ",
    "two\nlines",
    "ends with newline\n",
    "\nstarts with newline",
    "crlf\r\nline",
    "tab\there",
    "trailing space \nnext",
    "日本語 café ☕ 🎉",
    "quote ' and \" both",
    '"""',
    "'''",
    "# not a comment",
    "- not a list",
    "key: value",
    "{not: flow}",
    "back\\slash",
    "\u2028line separator",
]


def parse(text: str, fmt: Format, name: str = "case") -> Case:
    document = parse_document(text.encode("utf-8"), fmt, Path(f"{name}.{fmt}"))
    assert not isinstance(document, list), [str(e) for e in document]
    case = admit(document)
    assert isinstance(case, Case), [str(e) for e in case]
    return case


def converted(text: str, source: Format, target: Format) -> Conversion:
    document = parse_document(text.encode("utf-8"), source, Path(f"in.{source}"))
    assert not isinstance(document, list), [str(e) for e in document]
    outcome = convert(document, target)
    assert isinstance(outcome, Conversion), [str(e) for e in outcome]
    return outcome


@pytest.mark.parametrize("target", ["json", "yaml", "toml"])
@pytest.mark.parametrize("fixture", SUITE, ids=[p.name for p in SUITE])
def test_every_suite_fixture_converts_to_the_same_case(fixture: Path, target: Format) -> None:
    document = load_document(fixture)
    assert not isinstance(document, list)
    outcome = convert(document, target)
    assert isinstance(outcome, Conversion)
    assert outcome.case == admit(document)
    assert parse(outcome.text, target) == outcome.case


def case_with(strings: list[str]) -> dict[str, Any]:
    """A valid case carrying ``strings`` in every kind of string field."""
    return {
        "name": "tricky",
        "description": "\n".join(strings),
        "turns": [
            {
                "user_input": f"x{s}",
                "steps": [
                    {
                        "response": {
                            "type": "tool_calls",
                            "tool_calls": [
                                {
                                    "id": f"c{i}",
                                    "name": "echo",
                                    "arguments": {"message": s, s: [s, None]},
                                }
                            ],
                        }
                    },
                    {"response": {"type": "text", "content": s}},
                ],
            }
            for i, s in enumerate(strings)
        ],
        "expects": {"tools_used": ["echo"], "response_not_contains": strings},
    }


def test_strings_that_formats_mangle_survive_every_conversion() -> None:
    original = json.dumps(case_with(TRICKY), ensure_ascii=False)
    case = parse(original, "json")
    for target in ("yaml", "toml", "json"):
        first = converted(original, "json", target)
        assert first.case == case
        for onward in ("yaml", "toml", "json"):
            assert converted(first.text, target, onward).case == case, (target, onward)


def test_yaml_output_quotes_what_yaml_1_1_would_misread() -> None:
    text = converted(json.dumps(case_with(["no", "1e3", "null", "on"])), "json", "yaml").text
    for word in ("no", "1e3", "null", "on"):
        assert f"content: {word}\n" not in text
        assert f'content: "{word}"\n' in text
    multi = converted(json.dumps(case_with(["two\nlines"])), "json", "yaml").text
    assert "content: |-\n" in multi


def test_null_in_arguments_becomes_the_argument_text_in_toml() -> None:
    data = case_with(["a"])
    outcome = converted(json.dumps(data), "json", "toml")
    assert 'arguments = \'{"a":["a",null],"message":"a"}\'' in outcome.text or (
        '{\\"a\\":[\\"a\\",null],\\"message\\":\\"a\\"}' in outcome.text
    )
    assert outcome.case == parse(json.dumps(data), "json")


YAML_WITH_COMMENTS = """\
# yaml-language-server: $schema=../schemas/case.bundle.schema.json
# Why this case exists.
name: commented  # the name
turns:
  - user_input: 'no'   # stays a string
    steps:
      # the only step
      - response: {type: text, content: "1e3"}
expects:
  response_contains: ["1e3"]
"""


def test_yaml_to_yaml_keeps_comments_and_quotes() -> None:
    outcome = converted(YAML_WITH_COMMENTS, "yaml", "yaml")
    for comment in ("# Why this case exists.", "# the name", "# stays a string", "# the only step"):
        assert comment in outcome.text
    assert "'no'" in outcome.text
    assert outcome.text.startswith("# yaml-language-server: $schema=../schemas/case.bundle")


def test_schema_association_moves_to_the_target_form(tmp_path: Path) -> None:
    as_toml = converted(YAML_WITH_COMMENTS, "yaml", "toml").text
    assert as_toml.startswith("#:schema ../schemas/case.bundle.schema.json\n")
    as_json = json.loads(converted(as_toml, "toml", "json").text)
    assert next(iter(as_json.items())) == ("$schema", "../schemas/case.bundle.schema.json")
    back = converted(json.dumps(as_json), "json", "yaml").text
    assert back.startswith("# yaml-language-server: $schema=../schemas/case.bundle.schema.json")
    assert "$schema:" not in back


def test_schema_paths_are_rebased_to_the_output(tmp_path: Path) -> None:
    assert rebase("../schemas/b.json", Path("evals/a/x.yaml"), Path("evals/b/c/y.toml")) == (
        "../../schemas/b.json"
    )
    assert rebase("https://e.example/s.json", Path("a/x.yaml"), Path("b/y.toml")) == (
        "https://e.example/s.json"
    )
    assert rebase("../s.json", Path("a/x.yaml"), None) == "../s.json"


def test_schema_reference_is_found_in_each_form() -> None:
    for text, fmt in [
        (YAML_WITH_COMMENTS, "yaml"),
        ('#:schema ../schemas/case.bundle.schema.json\nname = "x"\n', "toml"),
        ('{"$schema": "../schemas/case.bundle.schema.json", "name": "x"}', "json"),
    ]:
        document = parse_document(text.encode(), fmt, Path(f"x.{fmt}"))  # type: ignore[arg-type]
        assert not isinstance(document, list)
        assert schema_reference(document) == "../schemas/case.bundle.schema.json"


# --- the command -------------------------------------------------------------------------------


def test_convert_cli_writes_atomically_and_refuses_bad_input(tmp_path: Path) -> None:
    source = ROOT / "evals" / "regression" / "echo_token_roundtrip.yaml"
    out = tmp_path / "echo.toml"
    result = runner.invoke(app, ["convert", str(source), "--to", "toml", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert parse(out.read_text("utf-8"), "toml") == admit(load_document(source))  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir()] == ["echo.toml"]  # no temporary file left

    to_stdout = runner.invoke(app, ["convert", str(source), "--to", "json"])
    assert to_stdout.exit_code == 0
    assert json.loads(to_stdout.stdout)["name"] == "echo-token-roundtrip"

    wrong_suffix = runner.invoke(app, ["convert", str(source), "--to", "toml", "-o", "x.yaml"])
    assert wrong_suffix.exit_code == 2
    assert "must end in .toml" in wrong_suffix.stderr

    broken = ROOT / "tests" / "data" / "broken" / "r2_unknown_key.json"
    refused = runner.invoke(
        app, ["convert", str(broken), "--to", "yaml", "-o", str(tmp_path / "b.yaml")]
    )
    assert refused.exit_code == 2
    assert "r2_unknown_key.json:" in refused.stderr and "unknown key" in refused.stderr
    assert not (tmp_path / "b.yaml").exists()
    assert "Traceback" not in refused.output

    deeper = tmp_path / "new" / "dirs" / "echo.yml"
    made = runner.invoke(app, ["convert", str(source), "--to", "yaml", "-o", str(deeper)])
    assert made.exit_code == 0, made.output
    assert parse(deeper.read_text("utf-8"), "yaml") == admit(load_document(source))  # type: ignore[arg-type]
    # a refused fixture makes no directory
    refused = runner.invoke(
        app, ["convert", str(broken), "--to", "yaml", "-o", str(tmp_path / "none" / "b.yaml")]
    )
    assert refused.exit_code == 2 and not (tmp_path / "none").exists()
    (tmp_path / "afile").write_text("x", "utf-8")
    blocked = runner.invoke(
        app, ["convert", str(source), "--to", "yaml", "-o", str(tmp_path / "afile" / "c.yaml")]
    )
    assert blocked.exit_code == 2 and "Traceback" not in blocked.output
    assert "c.yaml: cannot write" in blocked.stderr


# --- property: random valid cases survive JSON → YAML → TOML → JSON ----------------------------

text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=12,
) | st.sampled_from(TRICKY)
non_empty = text.filter(lambda s: s != "")
non_blank = non_empty.filter(lambda s: not s.isspace())  # as needles and tool names must be
# Case names may hold no control characters or bidi overrides (admission refuses them).
names = non_empty.filter(lambda s: name_problem(s) is None)
json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
tokens = st.integers(0, 10**6)


@st.composite
def responses(draw: st.DrawFn, call_ids: list[str]) -> dict[str, Any]:
    if draw(st.booleans()):
        response: dict[str, Any] = {"type": "text", "content": draw(text)}
    else:
        calls = []
        for _ in range(draw(st.integers(1, 2))):
            call_ids.append(f"call_{len(call_ids)}")
            arguments = draw(st.dictionaries(text, json_values, max_size=3) | text)
            calls.append({"id": call_ids[-1], "name": draw(non_empty), "arguments": arguments})
        response = {"type": "tool_calls", "tool_calls": calls}
    for key in ("input_tokens", "output_tokens"):
        if draw(st.booleans()):
            response[key] = draw(tokens)
    return response


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    call_ids: list[str] = []
    turns = [
        {
            "user_input": draw(non_empty.filter(lambda s: not s.isspace())),
            "steps": [
                {"response": draw(responses(call_ids))} for _ in range(draw(st.integers(1, 2)))
            ],
        }
        for _ in range(draw(st.integers(1, 2)))
    ]
    # Every turn ends in a reply: a script whose turn ends in a tool call is refused.
    for turn in turns:
        if turn["steps"][-1]["response"]["type"] != "text":
            turn["steps"].append({"response": {"type": "text", "content": draw(text)}})
    needle = {"tool": draw(non_blank), "needle": draw(non_blank)}
    if draw(st.booleans()):
        needle["call_index"] = draw(st.integers(0, 3))
    # a non-blank string the empty run's reply cannot contain: always falsifiable
    wanted = draw(st.lists(non_blank, min_size=1, max_size=2))
    # nothing admission refuses as a contradiction: forbidden text inside required text (in
    # NFC), a forbidden tool the payload check needs, fewer calls than the payload check needs
    nfc = functools.partial(unicodedata.normalize, "NFC")
    banned = draw(st.lists(non_blank, max_size=2))
    expects: dict[str, Any] = {
        "response_contains": wanted,
        "response_not_contains": [b for b in banned if not any(nfc(b) in nfc(w) for w in wanted)],
        "tools_not_used": [t for t in draw(st.lists(non_blank, max_size=2)) if t != needle["tool"]],
        "response_matches": [draw(st.sampled_from(["^a", "x+", r"\d", "(?i)ok"]))],
        "tool_results_contain": [needle],
    }
    if draw(st.booleans()):
        # not below the scripted calls, which a correct agent all dispatches
        low = max(needle.get("call_index", 0) + 1, len(call_ids))
        expects["max_tool_calls"] = draw(st.integers(low, low + 4))
    case: dict[str, Any] = {"name": draw(names), "turns": turns, "expects": expects}
    if draw(st.booleans()):
        case["description"] = draw(text)
    if draw(st.booleans()):
        case["class"] = draw(st.sampled_from(["positive", "negative"]))
    return case


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_random_cases_survive_json_yaml_toml_json(data: dict[str, Any]) -> None:
    original = json.dumps(data, ensure_ascii=False)
    case = parse(original, "json")
    as_yaml = converted(original, "json", "yaml")
    as_toml = converted(as_yaml.text, "yaml", "toml")
    back = converted(as_toml.text, "toml", "json")
    assert as_yaml.case == as_toml.case == back.case == case
    assert parse(back.text, "json") == case


# --- TOML positions on what tomli-w writes -----------------------------------------------------


def leaf_paths(node: object, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in leaf_paths(v, path + (k,))] or [path]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in leaf_paths(v, path + (i,))] or [path]
    return [path]


@settings(deadline=None)
@given(cases())
def test_toml_positions_find_every_key_tomli_w_writes(data: dict[str, Any]) -> None:
    """Every value of a TOML document, however tomli-w lays it out (tables, arrays of tables,
    inline tables, multi-line arrays), is located at a line that holds it."""
    for call in (c for t in data["turns"] for s in t["steps"]
                 for c in s["response"].get("tool_calls", [])):  # fmt: skip
        call["arguments"] = "x"  # TOML has no null; arguments are free-form anyway
    toml_text = tomli_w.dumps(data)
    source_map = SourceMap(toml_text, "toml")
    lines = toml_text.split("\n")  # not splitlines(): U+0085 and U+2028 are not TOML newlines
    for path in leaf_paths(data):
        spot = source_map.locate(path, key=True, root_fallback=False)
        assert spot is not None, path
        line, col = spot
        assert 1 <= line <= len(lines) and col >= 1, path
        last_key = next((p for p in reversed(path) if isinstance(p, str)), None)
        if last_key is not None and isinstance(path[-1], str) and last_key.isidentifier():
            assert lines[line - 1][col - 1 :].startswith(last_key), (path, lines[line - 1])


NESTED_INLINE = """\
name = "inline"
turns = [
  { user_input = "hi", steps = [
      { response = { type = "tool_calls", tool_calls = [
          { id = "c1", name = "echo", arguments = {} },
          { id = "c2", name = "", arguments = {} },
      ] } },
      { response = { type = "text", content = "ok", extra = 1 } },
  ] },
]

[expects]
tool_arguments_contain = [
  { tool = "echo", needle = "a" },
  { tool = "echo", neddle = "b" },
]
"""


def test_toml_schema_errors_deep_in_inline_tables_carry_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "inline.toml"
    path.write_text(NESTED_INLINE, "utf-8")
    document = load_document(path)
    assert not isinstance(document, list)
    errors = admit(document)
    assert isinstance(errors, list)
    assert [(e.line, e.col, e.message) for e in errors] == [
        (6, 31, "turns[0].steps[0].response.tool_calls[1].name must not be empty"),
        (8, 53, "unknown key 'extra' in turns[0].steps[1].response "
                "(allowed: content, input_tokens, output_tokens, type)"),
        (15, 3, "missing required key 'needle' in expects.tool_arguments_contain[1]"),
        (15, 20, "unknown key 'neddle' in expects.tool_arguments_contain[1] "
                 "(did you mean 'needle'?)"),
    ]  # fmt: skip


def test_toml_positions_with_quoted_and_dotted_keys(tmp_path: Path) -> None:
    text = (
        '"name" = "q"\n[[turns]]\n"user_input" = "hi"\n[[turns.steps]]\n'
        'response.type = "text"\nresponse."content" = 5\n\n[expects]\n'
        '"response_contains" = ["x"]\n'
    )
    path = tmp_path / "q.toml"
    path.write_text(text, "utf-8")
    document = load_document(path)
    assert not isinstance(document, list)
    errors = admit(document)
    assert isinstance(errors, list)
    assert [(e.line, e.col) for e in errors] == [(6, 22)]
    assert errors[0].message.startswith("turns[0].steps[0].response.content must be a string")


def test_printable_ascii_keys_in_arguments_survive() -> None:
    data = case_with(["a"])
    data["turns"][0]["steps"][0]["response"]["tool_calls"][0]["arguments"] = {
        ch: ch for ch in string.punctuation + " "
    }
    original = json.dumps(data)
    for target in ("yaml", "toml"):
        assert converted(original, "json", target).case == parse(original, "json")


def test_toml_output_writes_each_step_as_one_inline_table() -> None:
    from typer.testing import CliRunner

    from evalrunner.cli import app

    source = Path(__file__).resolve().parent.parent / "evals" / "regression"
    result = CliRunner().invoke(
        app, ["convert", str(source / "multi_turn_tool_loop.toml"), "--to", "toml"], env={}
    )
    assert result.exit_code == 0, result.output
    assert "[turns.steps.response]" not in result.stdout
    assert "[[turns.steps]]" not in result.stdout
    assert "steps = [\n  { response = { type = " in result.stdout


def test_convert_finds_a_file_in_the_configured_suite(tmp_path: Path) -> None:
    import os

    from typer.testing import CliRunner

    from evalrunner.cli import app

    example = Path(__file__).resolve().parent.parent / "examples" / "python-agent"
    before = Path.cwd()
    os.chdir(tmp_path)  # the file is not here: --config's suite has it
    try:
        result = CliRunner().invoke(
            app,
            [
                "convert",
                "no_echo_here.yaml",
                "--to",
                "json",
                "--config",
                str(example / "evalrunner.toml"),
            ],
            env={},
        )
        missing = CliRunner().invoke(app, ["convert", "no_echo_here.yaml", "--to", "json"], env={})
    finally:
        os.chdir(before)
    assert result.exit_code == 0, result.output
    assert '"name": "no-echo-here"' in result.stdout
    assert missing.exit_code == 2  # no config here: not found, said so
