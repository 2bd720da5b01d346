"""Stage 2, admit: admission rules 2-8 of SPEC §4, with real messages and exact positions.

Also the one-pass, sorted reporting of every problem of every file, and the committed broken
suite in ``tests/data/broken`` (one small fixture per rule, across the three formats).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema_rs
import pytest
from ruamel.yaml import YAML

from evalrunner.expectations.response import compile_pattern
from evalrunner.fixture.admit import admit, admit_suite
from evalrunner.fixture.load import load_document, load_paths, load_suite
from evalrunner.fixture.schemas import CASE_ID, case_validator
from evalrunner.model import AdmissionError, Case
from evalrunner.toolbox.export import bundle

BROKEN = Path(__file__).parent / "data" / "broken"


@pytest.fixture(autouse=True)
def _fast_path_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every document admitted in these tests is judged by jsonschema too: jsonschema-rs (which
    decides alone when it says valid) must give the same verdict."""
    validator = case_validator()
    fast = validator.fast
    assert fast is not None

    class Checked:
        def is_valid(self, data: object) -> bool:
            verdict = bool(fast.is_valid(data))
            assert verdict is validator.reference.is_valid(data), data
            return verdict

    monkeypatch.setattr(validator, "fast", Checked())


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def outcome(tmp_path: Path, name: str, text: str) -> Case | list[AdmissionError]:
    document = load_document(write(tmp_path, name, text))
    assert not isinstance(document, list), [str(e) for e in document]
    return admit(document)


def errors(tmp_path: Path, name: str, text: str) -> list[AdmissionError]:
    result = outcome(tmp_path, name, text)
    assert isinstance(result, list), f"{name} was admitted: {result}"
    return result


def only(found: list[AdmissionError]) -> AdmissionError:
    assert len(found) == 1, [str(e) for e in found]
    return found[0]


def spots(found: list[AdmissionError]) -> list[tuple[int | None, int | None, str]]:
    return [(e.line, e.col, e.message) for e in found]


def yaml_case(expects: str, turns: str | None = None) -> str:
    """A YAML case with one turn replying "ok" unless ``turns`` is given; line 6 holds
    ``expects:`` and ``expects`` lines start on line 7, indented by two. The turn scripts the
    tool calls the checks need first (:func:`script_for`), so that a correct run can pass."""
    turns = turns or script_for(expects)
    return f"name: case\nturns:\n{turns}expects:\n{expects}"


def script_for(expects: str) -> str:
    """Three lines of turns: a tool-call step with the calls the tool checks of ``expects``
    need (admission refuses checks no correct run of the script can pass), then "ok"."""
    text = "  - user_input: hi\n    steps:\n      - response: {type: text, content: ok}\n"
    try:
        declared = YAML(typ="safe", pure=True).load("expects:\n" + expects)["expects"]
    except Exception:  # a test of malformed input: no script to derive
        return text
    if not isinstance(declared, dict):
        return text
    need: dict[str, int] = {}
    for name in declared.get("tools_used") or ():
        if isinstance(name, str) and name.strip():
            need[name] = max(need.get(name, 0), 1)
    for kind in ("tool_arguments_contain", "tool_results_contain"):
        for entry in declared.get(kind) or ():
            tool = entry.get("tool") if isinstance(entry, dict) else None
            if isinstance(tool, str) and tool.strip():
                index = entry.get("call_index") if isinstance(entry.get("call_index"), int) else 0
                need[entry["tool"]] = max(need.get(entry["tool"], 0), index + 1)
    names = [name for name, times in need.items() for _ in range(times)]
    wanted = [declared.get(k) for k in ("exact_tool_calls", "min_tool_calls")]
    target = next((w for w in wanted if isinstance(w, int) and not isinstance(w, bool)), 0)
    names += ["echo"] * max(0, target - len(names))
    if not names:
        return text
    calls = ", ".join(
        f"{{id: c{i}, name: {json.dumps(name)}, arguments: {{message: ok}}}}"
        for i, name in enumerate(names)
    )
    steps = f"[{{response: {{type: tool_calls, tool_calls: [{calls}]}}}}, "
    steps += "{response: {type: text, content: ok}}]"
    return (
        f"  - user_input: hi\n    # the calls the checks need, then the reply\n    steps: {steps}\n"
    )


# --- rule 2: the schema ------------------------------------------------------------------------


def test_unknown_key_suggests_the_close_match_at_its_position(tmp_path: Path) -> None:
    error = only(errors(tmp_path, "a.yaml", yaml_case("  response_contain: [ok]\n")))
    assert error.message == (
        "unknown key 'response_contain' in expects (did you mean 'response_contains'?)"
    )
    assert (error.line, error.col) == (7, 3)
    assert str(error) == f"{tmp_path / 'a.yaml'}:7:3: {error.message}"


def test_unknown_key_with_no_close_match_lists_what_is_allowed(tmp_path: Path) -> None:
    text = yaml_case("  response_contains: [ok]\n").replace("name: case\n", "name: case\nzzz: 1\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == (
        "unknown key 'zzz' in the case (allowed: $schema, class, description, expects, "
        "model_name, name, recorded, tools, turns)"
    )
    assert (error.line, error.col) == (2, 1)


def test_unknown_keys_anywhere_are_refused(tmp_path: Path) -> None:
    text = """{
  "name": "case",
  "turns": [
    {"user_input": "hi", "note": 1, "steps": [
      {"response": {"type": "tool_calls", "tool_calls": [
        {"id": "c1", "name": "echo", "arguments": {"free": {"form": true}}, "extra": 2}
      ]}, "delay": 3},
      {"response": {"type": "text", "content": "ok", "conten": "x"}}
    ]}
  ],
  "expects": {
    "tools_used": ["echo"],
    "tool_arguments_contain": [{"tool": "echo", "needle": "x", "index": 0}]
  }
}
"""
    assert spots(errors(tmp_path, "a.json", text)) == [
        (4, 26, "unknown key 'note' in turns[0] (allowed: expects, steps, user_input)"),
        (
            6,
            77,
            "unknown key 'extra' in turns[0].steps[0].response.tool_calls[0] "
            "(allowed: arguments, id, name)",
        ),
        (7, 11, "unknown key 'delay' in turns[0].steps[0] (allowed: response)"),
        (
            8,
            54,
            "unknown key 'conten' in turns[0].steps[1].response (did you mean 'content'?)",
        ),
        (
            13,
            64,
            "unknown key 'index' in expects.tool_arguments_contain[0] (did you mean 'call_index'?)",
        ),
    ]


def test_schema_key_is_allowed_at_top_level_only(tmp_path: Path) -> None:
    ok = outcome(
        tmp_path, "ok.yaml", "$schema: ./case.schema.json\n" + yaml_case("  tools_used: [x]\n")
    )
    assert isinstance(ok, Case)
    text = yaml_case("  $schema: x\n  tools_used: [x]\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message.startswith("unknown key '$schema' in expects (")
    assert (error.line, error.col) == (7, 3)


def test_schema_key_in_a_turn_is_refused(tmp_path: Path) -> None:
    turns = "  - user_input: hi\n    $schema: x\n    steps:\n"
    turns += "      - response: {type: text, content: ok}\n"
    error = only(errors(tmp_path, "a.yaml", yaml_case("  response_contains: [ok]\n", turns)))
    assert error.message == (
        "unknown key '$schema' in turns[0] (allowed: expects, steps, user_input)"
    )
    assert (error.line, error.col) == (4, 5)


@pytest.mark.parametrize(
    ("expects", "message", "col"),
    [
        (
            "  max_tool_calls: '3'\n",
            'expects.max_tool_calls must be an integer, got string "3"',
            19,
        ),
        (
            "  max_tool_calls: 2.5\n",
            "expects.max_tool_calls must be an integer, got number 2.5",
            19,
        ),
        ("  tools_used: echo\n", 'expects.tools_used must be an array, got string "echo"', 15),
        ("  tools_used: [1]\n", "expects.tools_used[0] must be a string, got integer 1", 16),
        (
            "  all_tools_succeeded: 'yes'\n",
            'expects.all_tools_succeeded must be a boolean, got string "yes"',
            24,
        ),
        (
            "  exact_tool_calls: true\n",
            "expects.exact_tool_calls must be an integer, got boolean true",
            21,
        ),
        ("  exact_tool_calls: -1\n", "expects.exact_tool_calls must be at least 0, got -1", 21),
    ],
)
def test_wrong_types_are_refused(tmp_path: Path, expects: str, message: str, col: int) -> None:
    error = only(errors(tmp_path, "a.yaml", yaml_case(expects)))
    assert error.message == message
    assert (error.line, error.col) == (7, col)


@pytest.mark.parametrize(
    "kind",
    [
        "response_contains",
        "response_not_contains",
        "response_matches",
        "tools_used",
        "tools_not_used",
    ],
)
def test_empty_string_in_an_expects_list_is_refused(tmp_path: Path, kind: str) -> None:
    text = yaml_case(f"  exact_tool_calls: 1\n  {kind}: [x, '']\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == f"expects.{kind}[1] must not be empty"
    assert (error.line, error.col) == (8, len(kind) + 9)


@pytest.mark.parametrize("kind", ["tool_arguments_contain", "tool_results_contain"])
@pytest.mark.parametrize("field", ["tool", "needle"])
def test_empty_tool_or_needle_is_refused(tmp_path: Path, kind: str, field: str) -> None:
    entry = {"tool": "echo", "needle": "x"}
    entry[field] = ""
    text = yaml_case(
        f"  {kind}:\n    - tool: '{entry['tool']}'\n      needle: '{entry['needle']}'\n"
    )
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == f"expects.{kind}[0].{field} must not be empty"
    assert (error.line, error.col) == (8 if field == "tool" else 9, 13 if field == "tool" else 15)


BLANK_TEXT = "give the text to look for, or check for whitespace with response_matches and \\s"
BLANK_TOOL = "give the tool's name"


@pytest.mark.parametrize(
    ("kind", "hint"),
    [
        ("response_contains", BLANK_TEXT),
        ("response_not_contains", BLANK_TEXT),
        ("tools_used", BLANK_TOOL),
        ("tools_not_used", BLANK_TOOL),
    ],
)
@pytest.mark.parametrize("blank", ["' '", '"\\t"', '"\\n  "', '"\\u3000"'])
def test_blank_string_in_an_expects_list_is_refused(
    tmp_path: Path, kind: str, hint: str, blank: str
) -> None:
    text = yaml_case(f"  exact_tool_calls: 1\n  {kind}: [x, {blank}]\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == f"expects.{kind}[1] must not be blank (it is only whitespace); {hint}"
    assert (error.line, error.col) == (8, len(kind) + 9)


@pytest.mark.parametrize("kind", ["tool_arguments_contain", "tool_results_contain"])
@pytest.mark.parametrize(
    ("field", "hint"),
    [("tool", BLANK_TOOL), ("needle", "give the text to look for in the payload")],
)
def test_blank_tool_or_needle_is_refused(tmp_path: Path, kind: str, field: str, hint: str) -> None:
    entry = {"tool": "echo", "needle": "x"}
    entry[field] = " \t "
    text = yaml_case(f"  {kind}:\n    - tool: {json.dumps(entry['tool'])}\n")
    text += f"      needle: {json.dumps(entry['needle'])}\n"
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == (
        f"expects.{kind}[0].{field} must not be blank (it is only whitespace); {hint}"
    )
    assert (error.line, error.col) == (8 if field == "tool" else 9, 13 if field == "tool" else 15)


def test_a_needle_of_visible_text_around_spaces_or_an_invisible_character_is_admitted(
    tmp_path: Path,
) -> None:
    # Not blank: a zero-width space is a character a reply can really hold (and a check for it
    # can fail); spaces around text are part of the text.
    text = yaml_case('  response_not_contains: ["\\u200b", " ok "]\n  tools_used: [x]\n')
    assert isinstance(outcome(tmp_path, "a.yaml", text), Case)


def test_editors_see_blank_needles_too() -> None:
    # The rule lives in the published schema, so an editor's validator (here jsonschema-rs on
    # the Draft 7 bundle editors are given) refuses what admission refuses.
    validator = jsonschema_rs.Draft7Validator(bundle(CASE_ID))
    case = {
        "name": "c",
        "turns": [{"user_input": "hi", "steps": [{"response": {"type": "text", "content": "ok"}}]}],
        "expects": {"tools_used": ["x"]},
    }
    assert validator.is_valid(case)
    for kind, value in [
        ("response_contains", ["  "]),
        ("response_not_contains", ["\t"]),
        ("tools_used", [" "]),
        ("tools_not_used", ["\n"]),
        ("tool_arguments_contain", [{"tool": " ", "needle": "x"}]),
        ("tool_results_contain", [{"tool": "x", "needle": "  "}]),
    ]:
        assert not validator.is_valid({**case, "expects": {kind: value}}), kind


def test_needle_without_tool_is_refused(tmp_path: Path) -> None:
    text = yaml_case("  tool_results_contain:\n    - needle: x\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == "missing required key 'tool' in expects.tool_results_contain[0]"
    assert (error.line, error.col) == (8, 7)


def test_zero_turns_is_refused(tmp_path: Path) -> None:
    text = 'name = "case"\nturns = []\n\n[expects]\ntools_used = ["x"]\n'
    error = only(errors(tmp_path, "a.toml", text))
    assert error.message == "turns needs at least 1 item(s), got none"
    assert (error.line, error.col) == (2, 9)


def test_missing_turns_and_expects_are_refused(tmp_path: Path) -> None:
    assert spots(errors(tmp_path, "a.json", '{"name": "x"}')) == [
        (1, 1, "missing required key 'turns' in the case"),
        (
            1,
            1,
            "the case declares no checks; add expects (for the whole run) or expects in a "
            "turn, with at least one check, e.g. response_contains or exact_tool_calls",
        ),
    ]


def test_turn_with_no_steps_is_refused(tmp_path: Path) -> None:
    turns = "  - user_input: hi\n    steps: []\n"
    error = only(errors(tmp_path, "a.yaml", yaml_case("  tools_used: [x]\n", turns)))
    assert error.message == "turns[0].steps needs at least 1 item(s), got none"
    assert (error.line, error.col) == (4, 12)


def test_tool_calls_response_with_no_calls_is_refused(tmp_path: Path) -> None:
    turns = "  - user_input: hi\n    steps:\n      - response: {type: tool_calls, tool_calls: []}\n"
    error = only(errors(tmp_path, "a.yaml", yaml_case("  tools_used: [x]\n", turns)))
    assert (
        error.message == "turns[0].steps[0].response.tool_calls needs at least 1 item(s), got none"
    )
    assert (error.line, error.col) == (5, 50)


def test_unknown_response_type_is_refused(tmp_path: Path) -> None:
    turns = "  - user_input: hi\n    steps:\n      - response: {type: txt, content: ok}\n"
    error = only(errors(tmp_path, "a.yaml", yaml_case("  tools_used: [x]\n", turns)))
    assert error.message == 'unknown response type "txt"; expected "text" or "tool_calls"'
    assert (error.line, error.col) == (5, 26)


def test_text_response_without_content_is_refused(tmp_path: Path) -> None:
    turns = "  - user_input: hi\n    steps:\n      - response: {type: text}\n"
    error = only(errors(tmp_path, "a.yaml", yaml_case("  tools_used: [x]\n", turns)))
    assert error.message == "missing required key 'content' in turns[0].steps[0].response"
    assert (error.line, error.col) == (5, 19)


@pytest.mark.parametrize("arguments", ["5", "[1, 2]", "null", "true"])
def test_tool_call_arguments_must_be_object_or_string(tmp_path: Path, arguments: str) -> None:
    turns = (
        "  - user_input: hi\n    steps:\n      - response:\n          type: tool_calls\n"
        f"          tool_calls:\n            - {{id: c1, name: echo, arguments: {arguments}}}\n"
    )
    error = only(errors(tmp_path, "a.yaml", yaml_case("  tools_used: [echo]\n", turns)))
    assert error.message.startswith(
        "turns[0].steps[0].response.tool_calls[0].arguments must be an object or a string, got "
    )
    assert (error.line, error.col) == (8, 47)


def test_negative_token_count_is_refused(tmp_path: Path) -> None:
    turns = "  - user_input: hi\n    steps:\n"
    turns += "      - response: {type: text, content: ok, input_tokens: -1}\n"
    error = only(errors(tmp_path, "a.yaml", yaml_case("  tools_used: [x]\n", turns)))
    assert error.message == "turns[0].steps[0].response.input_tokens must be at least 0, got -1"
    assert (error.line, error.col) == (5, 59)


def test_both_name_and_model_name_are_refused(tmp_path: Path) -> None:
    text = yaml_case("  tools_used: [x]\n").replace(
        "name: case\n", "name: case\nmodel_name: other\n"
    )
    error = only(errors(tmp_path, "a.yaml", text))
    assert (
        error.message == "the case has both 'name' and 'model_name'; keep one (name is preferred)"
    )
    assert (error.line, error.col) == (2, 1)


def test_neither_name_nor_model_name_is_refused(tmp_path: Path) -> None:
    text = yaml_case("  tools_used: [x]\n").replace("name: case\n", "description: d\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == "missing required key 'name' in the case"
    assert (error.line, error.col) == (1, 1)


def test_model_name_alone_is_accepted(tmp_path: Path) -> None:
    text = yaml_case("  tools_used: [x]\n").replace("name: case\n", "model_name: zc\n")
    case = outcome(tmp_path, "a.yaml", text)
    assert isinstance(case, Case)
    assert case.name == "zc"


def test_empty_name_is_refused(tmp_path: Path) -> None:
    error = only(errors(tmp_path, "a.yaml", yaml_case("  tools_used: [x]\n").replace("case", "''")))
    assert error.message == "name must not be empty"
    assert (error.line, error.col) == (1, 7)


def test_unknown_class_is_refused(tmp_path: Path) -> None:
    text = "class: neutral\n" + yaml_case("  tools_used: [x]\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == 'class must be "positive" or "negative", got "neutral"'
    assert (error.line, error.col) == (1, 8)


BLANK_INPUT = "must not be blank (it is only whitespace); write what the user says"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("'   '", BLANK_INPUT),
        ("''", "must not be empty"),
        ('"\\t\\n"', BLANK_INPUT),
    ],
)
def test_blank_user_input_is_refused_once(tmp_path: Path, value: str, message: str) -> None:
    turns = f"  - user_input: {value}\n    steps:\n      - response: {{type: text, content: ok}}\n"
    error = only(errors(tmp_path, "a.yaml", yaml_case("  response_contains: [ok]\n", turns)))
    assert error.message == f"turns[0].user_input {message}"
    assert (error.line, error.col) == (3, 17)


# --- rule 3: at least one effective check -------------------------------------------------------


def test_empty_expects_is_refused(tmp_path: Path) -> None:
    error = only(errors(tmp_path, "a.yaml", yaml_case("  {}\n")))
    assert error.message == (
        "expects declares no checks; add at least one check, "
        "e.g. response_contains or exact_tool_calls"
    )
    assert (error.line, error.col) == (6, 1)


def test_expects_of_only_empty_lists_is_refused(tmp_path: Path) -> None:
    text = yaml_case("  response_contains: []\n  tools_used: []\n  tool_results_contain: []\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message.startswith("expects declares only empty lists, which check nothing;")
    assert (error.line, error.col) == (7, 22)  # the first empty list: the part to fill in


def test_empty_list_beside_an_effective_check_is_fine(tmp_path: Path) -> None:
    assert isinstance(
        outcome(tmp_path, "a.yaml", yaml_case("  tools_used: []\n  response_contains: [ok]\n")),
        Case,
    )


# --- rule 4: bounds ----------------------------------------------------------------------------


def test_min_tool_calls_zero_is_refused(tmp_path: Path) -> None:
    error = only(errors(tmp_path, "a.yaml", yaml_case("  min_tool_calls: 0\n")))
    assert error.message == "expects.min_tool_calls must be at least 1, got 0"
    assert (error.line, error.col) == (7, 19)


def test_min_above_max_is_refused(tmp_path: Path) -> None:
    error = only(
        errors(tmp_path, "a.yaml", yaml_case("  max_tool_calls: 2\n  min_tool_calls: 3\n"))
    )
    assert error.message == (
        "expects.min_tool_calls (3) is greater than expects.max_tool_calls (2); no run can "
        "satisfy both"
    )
    assert (error.line, error.col) == (8, 19)


@pytest.mark.parametrize(
    ("expects", "message"),
    [
        (
            "  min_tool_calls: 2\n  exact_tool_calls: 1\n",
            "expects.exact_tool_calls (1) is below expects.min_tool_calls (2); drop one of them "
            "or make them agree",
        ),
        (
            "  max_tool_calls: 2\n  exact_tool_calls: 3\n",
            "expects.exact_tool_calls (3) is above expects.max_tool_calls (2); drop one of them "
            "or make them agree",
        ),
    ],
)
def test_exact_outside_bounds_is_refused(tmp_path: Path, expects: str, message: str) -> None:
    error = only(errors(tmp_path, "a.yaml", yaml_case(expects)))
    assert error.message == message
    assert (error.line, error.col) == (8, 21)


def test_incoherent_bounds_report_every_conflict(tmp_path: Path) -> None:
    text = yaml_case("  min_tool_calls: 3\n  max_tool_calls: 2\n  exact_tool_calls: 5\n")
    assert [(e.line, e.col) for e in errors(tmp_path, "a.yaml", text)] == [(7, 19), (9, 21)]


def test_coherent_bounds_are_accepted(tmp_path: Path) -> None:
    text = yaml_case("  min_tool_calls: 1\n  max_tool_calls: 3\n  exact_tool_calls: 2\n")
    assert isinstance(outcome(tmp_path, "a.yaml", text), Case)


# --- rule 5: RE2 patterns ----------------------------------------------------------------------

RE2_HINT = "(RE2 has no backreferences or lookaround)"


@pytest.mark.parametrize(
    ("pattern", "hint"),
    [
        (r"(a)\1", True),
        ("(?=ok)", True),
        ("(?!ok)", True),
        ("(?<=o)k", True),
        ("(?<!x)ok", True),
        ("[ok", False),
        ("ok(", False),
    ],
)
def test_bad_patterns_are_refused(tmp_path: Path, pattern: str, hint: bool) -> None:
    text = yaml_case(f"  response_contains: [ok]\n  response_matches:\n    - '{pattern}'\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message.startswith(
        f"expects.response_matches[0] {json.dumps(pattern)} is not valid RE2: "
    )
    assert "is not valid RE2: " in error.message
    assert (RE2_HINT in error.message) is hint
    assert error.message.endswith("patterns use the RE2 syntax of Go and Rust's regex crate")
    assert (error.line, error.col) == (9, 7)


def test_every_bad_pattern_is_reported(tmp_path: Path) -> None:
    text = yaml_case("  response_matches: ['o+k', '(?=a)', 'ok', '(b)\\1']\n")
    found = errors(tmp_path, "a.yaml", text)
    assert [(e.line, e.col, e.json_path[-1]) for e in found] == [(7, 29, 1), (7, 44, 3)]


def test_good_re2_patterns_are_accepted(tmp_path: Path) -> None:
    text = yaml_case("  response_matches: ['^o\\w$', '(?i)OK', '\\bok\\b', '[[:alpha:]]+']\n")
    assert isinstance(outcome(tmp_path, "a.yaml", text), Case)


def matches_everything(pattern: str) -> str:
    return (
        f"expects.response_matches[0] {json.dumps(pattern)} matches every reply, because it "
        "can match the empty "
        "string somewhere in any text, so this check can never fail; require at least one "
        'character (e.g. "x+" rather than "x*", no empty alternative as in "a|"), or anchor it '
        '(e.g. "^$" to match only an empty reply)'
    )


@pytest.mark.parametrize(
    "pattern", ["foo|", "a*", "^", "$", "(x)?", "\\b|\\B", "(?m)^", "x*$", "(?i)(yes)?"]
)
def test_a_pattern_that_matches_every_reply_is_refused(tmp_path: Path, pattern: str) -> None:
    text = yaml_case(f"  response_contains: [ok]\n  response_matches:\n    - '{pattern}'\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == matches_everything(pattern)
    assert (error.line, error.col) == (9, 7)


@pytest.mark.parametrize("pattern", ["^$", "\\b", "\\B", "^foo", "(?m)^ok$", "a*b", "\\S"])
def test_a_pattern_that_some_reply_escapes_is_admitted(tmp_path: Path, pattern: str) -> None:
    text = yaml_case(f"  response_contains: [ok]\n  response_matches:\n    - '{pattern}'\n")
    assert isinstance(outcome(tmp_path, "a.yaml", text), Case)


def test_a_pattern_that_matches_everything_is_the_one_reason_given(tmp_path: Path) -> None:
    # Alone it also passes on the empty run; the pattern's own message says why, once.
    error = only(errors(tmp_path, "a.yaml", yaml_case("  response_matches: ['x*']\n")))
    assert error.message == matches_everything("x*")
    assert (error.line, error.col) == (7, 22)


def test_patterns_are_judged_in_nfc_like_the_reply(tmp_path: Path) -> None:
    # "e" + U+0301 and "é" are the same text; the pattern is compiled as NFC.
    text = yaml_case('  response_matches: ["^cafe\\u0301$"]\n  tools_used: [x]\n')
    case = outcome(tmp_path, "a.yaml", text)
    assert isinstance(case, Case)
    assert compile_pattern(case.expects.response_matches[0]).search("café")


# --- contradictions: checks no run can pass together ---------------------------------------------


def test_a_tool_both_used_and_not_used_is_refused_at_the_forbidding_entry(tmp_path: Path) -> None:
    text = yaml_case("  tools_used: [echo, web]\n  tools_not_used: [rm, web]\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == (
        'expects.tools_not_used[1] "web" is also in expects.tools_used[1]; no run can both '
        "call it and not call it; remove it from one of the lists"
    )
    assert (error.line, error.col) == (8, 24)


@pytest.mark.parametrize("kind", ["tool_arguments_contain", "tool_results_contain"])
def test_a_payload_check_of_a_forbidden_tool_is_refused(tmp_path: Path, kind: str) -> None:
    text = yaml_case(f"  tools_not_used: [echo, rm]\n  {kind}:\n    - {{tool: rm, needle: x}}\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == (
        f'expects.{kind}[0] needs a call to "rm", which expects.tools_not_used[1] forbids; '
        "no run can pass both; drop one of them"
    )
    assert (error.line, error.col) == (9, 14)


def test_the_same_text_required_and_forbidden_is_refused(tmp_path: Path) -> None:
    text = yaml_case("  response_contains: [done, ok]\n  response_not_contains: [error, ok]\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == (
        'expects.response_not_contains[1] "ok" is the same text as expects.response_contains[1] '
        '"ok"; no reply can both contain it and not contain it, so no reply can pass both; '
        "remove or change one of them"
    )
    assert (error.line, error.col) == (8, 34)


def test_forbidden_text_inside_required_text_is_refused(tmp_path: Path) -> None:
    text = yaml_case("  response_contains: [abc]\n  response_not_contains: [b]\n")
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == (
        'expects.response_not_contains[0] "b" occurs inside expects.response_contains[0] "abc"; '
        'a reply that contains "abc" always contains "b", so no reply can pass both; '
        "remove or change one of them"
    )
    assert (error.line, error.col) == (8, 27)


def test_text_that_is_the_same_only_in_nfc_is_refused_and_shown_apart(tmp_path: Path) -> None:
    text = yaml_case(
        '  response_contains: ["un caf\\u00e9"]\n  response_not_contains: ["cafe\\u0301"]\n'
    )
    error = only(errors(tmp_path, "a.yaml", text))
    assert error.message == (
        'expects.response_not_contains[0] "cafe\\u0301" occurs inside '
        'expects.response_contains[0] "un café" (in Unicode NFC, the form checks compare in); '
        'a reply that contains "un café" always contains "cafe\\u0301", so no reply can pass '
        "both; remove or change one of them"
    )


@pytest.mark.parametrize(
    "expects",
    [
        # the required text can be present without the longer forbidden one
        "  response_contains: [abc]\n  response_not_contains: [abcd]\n",
        # in NFC "é" is one character: "cafe" is not inside "café"
        '  response_contains: ["caf\\u00e9"]\n  response_not_contains: [cafe]\n',
        "  tools_used: [echo]\n  tools_not_used: [Echo]\n",
        "  tools_used: [echo, echo]\n  max_tool_calls: 1\n",
        "  tools_used: [echo]\n  tool_results_contain: [{tool: echo, needle: x, call_index: 1}]\n"
        "  exact_tool_calls: 2\n",
        "  all_tools_succeeded: false\n  max_tool_calls: 1\n",
        "  tools_not_used: [rm]\n  tool_results_contain: [{tool: echo, needle: x}]\n",
    ],
)
def test_checks_that_some_run_passes_together_are_admitted(tmp_path: Path, expects: str) -> None:
    assert isinstance(outcome(tmp_path, "a.yaml", yaml_case(expects)), Case)


@pytest.mark.parametrize(
    ("expects", "message", "spot"),
    [
        (
            "  tools_used: [echo]\n  max_tool_calls: 0\n",
            "expects.max_tool_calls (0) is below the 1 tool call(s) the other checks need "
            '(1 to "echo" '
            "for expects.tools_used[0]); no run can satisfy them all; raise it to 1 or drop one "
            "of those checks",
            (8, 19),
        ),
        (
            "  exact_tool_calls: 0\n  tools_used: [echo]\n",
            "expects.exact_tool_calls (0) is below the 1 tool call(s) the other checks need "
            '(1 to "echo" '
            "for expects.tools_used[0]); no run can satisfy them all; raise it to 1 or drop one "
            "of those checks",
            (7, 21),
        ),
        (
            "  tools_used: [echo, web, echo]\n  max_tool_calls: 1\n",
            "expects.max_tool_calls (1) is below the 2 tool call(s) the other checks need "
            '(1 to "echo" '
            'for expects.tools_used[0]; 1 to "web" for expects.tools_used[1]); no run can '
            "satisfy them all; raise it to 2 or drop one of those checks",
            (8, 19),
        ),
        (
            "  tools_used: [echo]\n"
            "  tool_arguments_contain: [{tool: echo, needle: a, call_index: 2}]\n"
            "  exact_tool_calls: 2\n",
            "expects.exact_tool_calls (2) is below the 3 tool call(s) the other checks need "
            '(3 to "echo" '
            "for expects.tool_arguments_contain[0] with call_index 2); no run can satisfy them "
            "all; raise it to 3 or drop one of those checks",
            (9, 21),
        ),
        (
            "  all_tools_succeeded: false\n  max_tool_calls: 0\n",
            "expects.max_tool_calls (0) is below the 1 tool call(s) the other checks need "
            "(a failed one "
            "for expects.all_tools_succeeded: false); no run can satisfy them all; raise it to 1 "
            "or drop one of those checks",
            (8, 19),
        ),
    ],
)
def test_a_call_limit_below_what_the_checks_need_is_refused(
    tmp_path: Path, expects: str, message: str, spot: tuple[int, int]
) -> None:
    error = only(errors(tmp_path, "a.yaml", yaml_case(expects)))
    assert error.message == message
    assert (error.line, error.col) == spot


CONTRADICTIONS = {
    "json": """{
  "name": "case",
  "turns": [{"user_input": "hi", "steps": [{"response": {"type": "text", "content": "ok"}}]}],
  "expects": {
    "tools_used": ["echo"],
    "tools_not_used": ["echo"],
    "response_contains": ["abc"],
    "response_not_contains": ["b"],
    "response_matches": ["x*"],
    "max_tool_calls": 0,
    "tool_results_contain": [{"tool": "echo", "needle": "x"}]
  }
}
""",
    "yaml": """name: case
turns:
  - user_input: hi
    steps:
      - response: {type: text, content: ok}
expects:
  tools_used: [echo]
  tools_not_used: [echo]
  response_contains: [abc]
  response_not_contains: [b]
  response_matches: ['x*']
  max_tool_calls: 0
  tool_results_contain:
    - {tool: echo, needle: x}
""",
    "toml": """name = "case"

[[turns]]
user_input = "hi"
steps = [{ response = { type = "text", content = "ok" } }]

[expects]
tools_used = ["echo"]
tools_not_used = ["echo"]
response_contains = ["abc"]
response_not_contains = ["b"]
response_matches = ["x*"]
max_tool_calls = 0

[[expects.tool_results_contain]]
tool = "echo"
needle = "x"
""",
}


@pytest.mark.parametrize(
    ("fmt", "spots_expected"),
    [
        ("json", [(6, 24), (8, 31), (9, 26), (10, 23), (11, 39)]),
        ("yaml", [(8, 20), (10, 27), (11, 22), (12, 19), (14, 14)]),
        ("toml", [(9, 19), (11, 26), (12, 21), (13, 18), (16, 8)]),
    ],
)
def test_every_new_refusal_carries_its_position_in_every_format(
    tmp_path: Path, fmt: str, spots_expected: list[tuple[int, int]]
) -> None:
    found = errors(tmp_path, f"a.{fmt}", CONTRADICTIONS[fmt])
    assert [(e.line, e.col) for e in found] == spots_expected
    assert [e.json_path for e in found] == [
        ("expects", "tools_not_used", 0),
        ("expects", "response_not_contains", 0),
        ("expects", "response_matches", 0),
        ("expects", "max_tool_calls"),
        ("expects", "tool_results_contain", 0, "tool"),
    ]


# --- rule 6: unique tool-call ids --------------------------------------------------------------


def test_duplicate_tool_call_ids_are_refused(tmp_path: Path) -> None:
    turns = (
        "  - user_input: hi\n    steps:\n      - response:\n          type: tool_calls\n"
        "          tool_calls:\n"
        "            - {id: c1, name: echo, arguments: {}}\n"
        "            - {id: c2, name: echo, arguments: {}}\n"
        "      - response: {type: text, content: ok}\n"
        "  - user_input: again\n    steps:\n      - response:\n          type: tool_calls\n"
        "          tool_calls:\n"
        "            - {id: c1, name: echo, arguments: '{}'}\n"
        "      - response: {type: text, content: ok}\n"
    )
    error = only(errors(tmp_path, "a.yaml", yaml_case("  exact_tool_calls: 3\n", turns)))
    assert error.message == (
        'turns[1].steps[0].response.tool_calls[0].id "c1" is already used at '
        "turns[0].steps[0].response.tool_calls[0]; tool-call ids must be unique "
        "within a case"
    )
    assert (error.line, error.col) == (16, 20)
    assert error.json_path == ("turns", 1, "steps", 0, "response", "tool_calls", 0, "id")


# --- rule 7: falsifiability ---------------------------------------------------------------------

UNFALSIFIABLE = (
    "every check passes on a run that did nothing (no reply, no tool calls), so this case can "
    "never fail; add a check the scripted run must satisfy, such as response_contains, "
    "tools_used or exact_tool_calls"
)


@pytest.mark.parametrize(
    "expects",
    [
        "  tools_not_used: [rm]\n",
        "  response_not_contains: [error]\n",
        "  max_tool_calls: 3\n",
        "  all_tools_succeeded: true\n",
        "  exact_tool_calls: 0\n",
        "  max_tool_calls: 0\n",
        "  response_matches: ['^$']\n",
        "  tools_not_used: [rm]\n  response_not_contains: [x]\n  max_tool_calls: 2\n"
        "  all_tools_succeeded: true\n  tools_used: []\n",
    ],
)
def test_expectations_that_pass_on_the_empty_run_are_refused(tmp_path: Path, expects: str) -> None:
    error = only(errors(tmp_path, "a.yaml", yaml_case(expects)))
    assert error.message == UNFALSIFIABLE
    assert (error.line, error.col) == (6, 1)


@pytest.mark.parametrize(
    "expects",
    [
        "  all_tools_succeeded: false\n",
        "  min_tool_calls: 1\n",
        "  exact_tool_calls: 1\n",
        "  response_contains: [ok]\n",
        "  response_matches: ['.']\n",
        "  tools_used: [echo]\n",
        "  tool_arguments_contain: [{tool: echo, needle: x}]\n",
        "  tool_results_contain: [{tool: echo, needle: x, call_index: 0}]\n",
        "  tools_not_used: [rm]\n  response_contains: [ok]\n",
    ],
)
def test_one_check_that_fails_on_the_empty_run_is_enough(tmp_path: Path, expects: str) -> None:
    assert isinstance(outcome(tmp_path, "a.yaml", yaml_case(expects)), Case)


# --- rule 8 and suite-wide reporting ------------------------------------------------------------


def test_duplicate_names_across_files_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", yaml_case("  tools_used: [x]\n"))
    turn = '{"user_input": "hi", "steps": [{"response": {"type": "text", "content": "ok"}}]}'
    text = f'{{\n  "turns": [{turn}],\n  "model_name": "case",\n'
    text += '  "expects": {"response_contains": ["ok"]}\n}\n'
    write(tmp_path, "b.json", text)
    admission = admit_suite(load_suite(tmp_path))
    error = only(list(admission.errors))
    assert error.path == str(tmp_path / "b.json")
    assert error.message == (
        f'case name "case" is already used by {tmp_path / "a.yaml"}; '
        "names must be unique in a suite"
    )
    assert (error.line, error.col) == (3, 17)
    assert not admission.ok


def test_a_clean_suite_is_admitted(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", yaml_case("  tools_used: [x]\n"))
    write(tmp_path, "b.yaml", yaml_case("  tools_used: [x]\n").replace("case", "other"))
    admission = admit_suite(load_suite(tmp_path))
    assert admission.ok
    assert [c.name for c in admission.cases] == ["case", "other"]
    assert [c.source.name for c in admission.cases] == ["a.yaml", "b.yaml"]


def test_every_problem_of_every_file_in_one_pass_sorted(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", yaml_case("  min_tool_calls: 0\n  tools_usd: [x]\n"))
    write(tmp_path, "a.json", '{"name": "x",\n "turns": [],\n "expects": {}}')
    write(tmp_path, "c.toml", "name = \n")
    write(tmp_path, "d.yaml", yaml_case("  tools_used: [x]\n").replace("name: case", "name: x"))
    admission = admit_suite(load_suite(tmp_path))
    lines = [str(e) for e in admission.errors]
    assert lines == [
        f"{tmp_path / 'a.json'}:2:11: turns needs at least 1 item(s), got none",
        f"{tmp_path / 'a.json'}:3:2: expects declares no checks; add at least one check, "
        "e.g. response_contains or exact_tool_calls",
        f"{tmp_path / 'b.yaml'}:7:19: expects.min_tool_calls must be at least 1, got 0",
        f"{tmp_path / 'b.yaml'}:8:3: unknown key 'tools_usd' in expects "
        "(did you mean 'tools_used'?)",
        f'{tmp_path / "c.toml"}:1:8: invalid TOML: Invalid value; a value is a "string", a '
        "number, true or false, a date, an array [ ... ] or an inline table { ... }",
    ]
    assert [c.name for c in admission.cases] == ["x"]
    assert list(admission.errors) == sorted(admission.errors, key=AdmissionError.sort_key)


def test_schema_errors_do_not_hide_other_rules_in_well_formed_parts(tmp_path: Path) -> None:
    turns = (
        "  - user_input: ''\n    steps:\n      - response:\n          type: tool_calls\n"
        "          tool_calls:\n"
        "            - {id: c1, name: echo, arguments: {}}\n"
        "            - {id: c1, name: echo, arguments: {}}\n"
        "      - response: {type: text, content: ok}\n"
    )
    text = yaml_case("  max_tool_calls: 1\n  min_tool_calls: 2\n", turns)
    # A blank user_input leaves the script as written: its repeated id is still reported.
    found = [(e.line, e.col) for e in errors(tmp_path, "a.yaml", text)]
    assert found == [(3, 17), (9, 20), (13, 19)]
    turns = turns.replace("user_input: ''", "user_input: hi")
    text = yaml_case("  max_tool_calls: 1\n  min_tool_calls: 2\n  bogus: 1\n", turns)
    found = [(e.line, e.col) for e in errors(tmp_path, "b.yaml", text)]
    assert found == [(9, 20), (13, 19), (14, 3)]


def test_positions_are_the_same_through_load_paths(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", yaml_case("  response_contain: [ok]\n"))
    admission = admit_suite(load_paths([path]))
    assert [(e.line, e.col) for e in admission.errors] == [(7, 3)]


# --- the committed broken suite -----------------------------------------------------------------

ERROR_LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<message>\S.*)$")

# file → (line, col, a fragment of the message) for its first problem
BROKEN_EXPECTED: dict[str, tuple[int, int, str]] = {
    "r1_json_syntax.json": (4, 3, "invalid JSON: Expecting ',' delimiter"),
    "r1_json_duplicate_key.json": (4, 3, 'duplicate key "turns"'),
    "r1_json_nan.json": (9, 23, "NaN is not allowed"),
    "r1_yaml_duplicate_key.yaml": (8, 3, "duplicate key 'tools_used'"),
    "r1_yaml_two_documents.yaml": (8, 1, "one YAML document"),
    "r1_yaml_python_tag.yaml": (2, 14, "YAML tag !!python/object/apply:os.system is not allowed"),
    "r1_yaml_alias_bomb.yaml": (2, 10, "YAML anchors are not allowed"),
    "r1_yaml_1_1.yaml": (1, 1, "%YAML 1.1 directive"),
    "r1_yaml_date.yml": (2, 14, "date values are not allowed"),
    "r1_yaml_int_key.yaml": (8, 3, "mapping key 3 is not a string"),
    "r1_toml_syntax.toml": (10, 27, "invalid TOML: Unclosed array"),
    "r1_toml_datetime.toml": (2, 15, "datetime values are not allowed"),
    "r1_invalid_utf8.json": (2, 19, "not valid UTF-8"),
    "r2_unknown_key.json": (9, 15, "did you mean 'response_contains'?"),
    "r2_wrong_type.toml": (12, 18, "expects.max_tool_calls must be an integer"),
    "r2_empty_string.yaml": (7, 27, "expects.response_contains[1] must not be empty"),
    "r2_unknown_response_type.toml": (7, 21, 'unknown response type "txt"'),
    "r2_turn_without_steps.yaml": (4, 12, "turns[0].steps needs at least 1 item(s)"),
    "r2_root_is_a_list.json": (1, 1, "a fixture must be an object"),
    "r3_empty_expects.toml": (10, 21, "expects declares only empty lists"),
    "r2_blank_needle.yaml": (9, 27, "expects.response_not_contains[0] must not be blank"),
    "r4_min_above_max.yaml": (
        8,
        19,
        "expects.min_tool_calls (3) is greater than expects.max_tool_calls (2)",
    ),
    "r4_tool_used_and_not_used.json": (16, 33, 'expects.tools_not_used[1] "echo" is also in'),
    "r4_payload_of_forbidden_tool.toml": (14, 8, "which expects.tools_not_used[0] forbids"),
    "r4_forbidden_text_inside_required.json": (
        11,
        31,
        '"cafe\\u0301" occurs inside expects.response_contains[0] "un café" (in Unicode NFC',
    ),
    "r4_calls_below_need.yaml": (14, 19, "expects.max_tool_calls (1) is below the 2 tool call(s)"),
    "r5_pattern_matches_everything.toml": (
        12,
        21,
        'expects.response_matches[0] "yes|" matches every reply',
    ),
    "r5_backreference.json": (9, 36, "(RE2 has no backreferences or lookaround)"),
    "r6_duplicate_ids.toml": (19, 6, 'tool_calls[1].id "call_1" is already used'),
    "r7_unfalsifiable.yaml": (6, 1, "every check passes on a run that did nothing"),
    "r8_duplicate_name_b.toml": (1, 8, 'case name "shared-name" is already used by'),
}


def test_broken_suite_names_every_file_with_a_position() -> None:
    admission = admit_suite(load_suite(BROKEN))
    lines = [str(e) for e in admission.errors]
    assert lines == [str(e) for e in sorted(admission.errors, key=AdmissionError.sort_key)]
    for line in lines:
        assert ERROR_LINE.match(line), f"not <path>:<line>:<col>: <message>: {line}"
        assert "Traceback" not in line
    fixtures = {p.name for p in BROKEN.iterdir() if not p.name.startswith(".")}
    named = {Path(e.path).name for e in admission.errors}
    # the first of two cases sharing a name is fine; only the second is refused
    assert named == fixtures - {"r8_duplicate_name_a.json", "README.md"}
    assert set(BROKEN_EXPECTED) == named
    first: dict[str, AdmissionError] = {}
    for error in admission.errors:
        first.setdefault(Path(error.path).name, error)
    for name, (line, col, fragment) in BROKEN_EXPECTED.items():
        error = first[name]
        assert (error.line, error.col) == (line, col), f"{name}: {error}"
        assert fragment in error.message, f"{name}: {error}"
    assert [c.name for c in admission.cases] == ["shared-name"]  # the refused twin is not kept


def test_a_schema_error_in_one_kind_does_not_hide_the_rules_of_the_others(tmp_path: Path) -> None:
    fixture = tmp_path / "two.yaml"
    fixture.write_text(
        "name: two\nturns:\n  - user_input: hi\n    steps:\n"
        "      - response: {type: text, content: hello}\n"
        "expects:\n  response_contains: 5\n  response_contain: [typo]\n"
        "  min_tool_calls: 3\n  exact_tool_calls: 1\n  response_matches: ['a*']\n",
        encoding="utf-8",
    )
    document = load_document(fixture)
    assert not isinstance(document, list)
    outcome = admit(document)
    assert isinstance(outcome, list)
    lines = [(e.line, e.message.split(" ")[0]) for e in outcome]
    assert (7, "expects.response_contains") in lines  # the schema error
    assert any(e.line == 8 and "'response_contain'" in e.message for e in outcome)  # the typo
    assert (10, "expects.exact_tool_calls") in lines  # bounds among the well-formed kinds
    assert (11, "expects.response_matches[0]") in lines  # the unfalsifiable pattern
    # The rules about the case as a whole wait until every kind is well-formed.
    assert not any("every check passes" in e.message for e in outcome)
