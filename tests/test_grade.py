"""Grading (SPEC §6): every expectation kind, passing and failing, with the exact check labels
and failure details; grading order; and falsifiability of the gated suite."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from evalrunner.expectations import KINDS, NO_EVIDENCE, grade
from evalrunner.expectations._format import listing, quote
from evalrunner.expectations.kinds import kinds_table
from evalrunner.expectations.response import PatternError, compile_pattern, matches_every_text
from evalrunner.fixture.admit import admit_suite
from evalrunner.fixture.load import load_suite
from evalrunner.fixture.schemas import schema_tree
from evalrunner.model import (
    Case,
    Expectations,
    GradeResult,
    PayloadNeedle,
    RunRecord,
    ToolCallRecord,
)
from evalrunner.replay import run_case

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "evals" / "regression"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def rec(name: str, arguments: str = "{}", result: str = "", success: bool = True) -> ToolCallRecord:
    return ToolCallRecord(name, arguments, result, success)


def run(final_response: str = "", *calls: ToolCallRecord) -> RunRecord:
    return RunRecord(final_response=final_response, tool_calls=tuple(calls))


def only(expects: Expectations, record: RunRecord) -> GradeResult:
    results = grade(expects, record)
    assert len(results) == 1, results
    return results[0]


# A run with a failed unknown tool, two echo calls and a failed echo.
MIXED = run(
    'The answer is "42" — 東京',
    rec("echo", '{"message":"first"}', "first"),
    rec("web_fetch", '{"url":"https://example.com"}', "Unknown tool: web_fetch", False),
    rec("echo", '{"message":"second"}', "second"),
    rec("echo", "{bad", "Invalid arguments for echo: Expecting value", False),
)


# --- response_contains / response_not_contains / response_matches ------------------------------


def test_response_contains_pass() -> None:
    assert only(Expectations(response_contains=("42",)), MIXED) == GradeResult(
        'response_contains("42")', True, ""
    )


def test_response_contains_fail_quotes_as_json() -> None:
    result = only(Expectations(response_contains=('say "hi"',)), MIXED)
    assert result == GradeResult(
        'response_contains("say \\"hi\\"")',
        False,
        'not found in response: "The answer is \\"42\\" — 東京"',
    )


def test_response_contains_is_case_sensitive() -> None:
    assert not only(Expectations(response_contains=("the answer",)), MIXED).passed


def test_response_contains_each_entry_is_its_own_check() -> None:
    results = grade(Expectations(response_contains=("answer", "missing", "東京")), MIXED)
    assert [(r.check, r.passed) for r in results] == [
        ('response_contains("answer")', True),
        ('response_contains("missing")', False),
        ('response_contains("東京")', True),
    ]


def test_response_contains_on_empty_response() -> None:
    assert only(Expectations(response_contains=("x",)), RunRecord.empty()) == GradeResult(
        'response_contains("x")', False, 'not found in response: ""'
    )


def test_response_contains_newline_in_label_is_escaped() -> None:
    result = only(Expectations(response_contains=("a\nb",)), run("a\nb"))
    assert result == GradeResult('response_contains("a\\nb")', True, "")


def test_response_not_contains_pass() -> None:
    assert only(Expectations(response_not_contains=("secret",)), MIXED) == GradeResult(
        'response_not_contains("secret")', True, ""
    )


def test_response_not_contains_fail() -> None:
    assert only(Expectations(response_not_contains=("東京",)), MIXED) == GradeResult(
        'response_not_contains("東京")',
        False,
        'unexpectedly present in response: "The answer is \\"42\\" — 東京"',
    )


def test_response_matches_pass_is_a_search() -> None:
    # not anchored: matches in the middle of the response
    assert only(Expectations(response_matches=("[0-9]+",)), MIXED) == GradeResult(
        'response_matches("[0-9]+")', True, ""
    )
    assert only(Expectations(response_matches=("answer",)), MIXED).passed


def test_response_matches_fail() -> None:
    assert only(Expectations(response_matches=("^42",)), MIXED) == GradeResult(
        'response_matches("^42")',
        False,
        'no match in response: "The answer is \\"42\\" — 東京"',
    )


def test_response_matches_label_quotes_backslashes() -> None:
    result = only(Expectations(response_matches=(r"\d+",)), run("no digits"))
    assert result.check == 'response_matches("\\\\d+")'
    assert result.passed is False


def test_response_matches_multiline_flag() -> None:
    response = "line one\n2. Run the suite\nline three"
    assert only(Expectations(response_matches=(r"(?m)^2\. Run the suite$",)), run(response)).passed
    assert not only(Expectations(response_matches=(r"^2\. Run the suite$",)), run(response)).passed


def test_response_matches_uses_re2_linear_time() -> None:
    # Catastrophic backtracking for a backtracking engine; RE2 returns promptly.
    result = only(Expectations(response_matches=("(a+)+$",)), run("a" * 5000 + "b"))
    assert result.passed is False
    assert result.check == 'response_matches("(a+)+$")'
    assert result.detail.startswith('no match in response: "aaaa')


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=a)", r"(?<=a)b", "(unclosed"])
def test_patterns_outside_re2_do_not_compile(pattern: str) -> None:
    with pytest.raises(PatternError):
        compile_pattern(pattern)


# --- Unicode: NFC comparison and look-alike text in labels and details ------------------------

NFC_CAFE = "caf\u00e9"  # é as one code point
NFD_CAFE = "cafe\u0301"  # e plus a combining acute accent: looks the same


def test_response_not_contains_compares_in_nfc_and_the_detail_shows_the_difference() -> None:
    result = only(Expectations(response_not_contains=(NFC_CAFE,)), run(f"un {NFD_CAFE} noir"))
    assert result == GradeResult(
        'response_not_contains("café")',
        False,
        'unexpectedly present in response: "un cafe\\u0301 noir" '
        '(compared in Unicode NFC form: "un café noir")',
    )


def test_response_contains_an_nfd_needle_finds_nfc_text_and_its_label_escapes_it() -> None:
    assert only(Expectations(response_contains=(NFD_CAFE,)), run("un café")) == GradeResult(
        'response_contains("cafe\\u0301")', True, ""
    )
    failed = only(Expectations(response_contains=(NFD_CAFE,)), run("un cafe"))
    assert failed.detail == 'not found in response: "un cafe"'  # already NFC: no note


def test_nfc_keeps_a_letter_and_its_accent_together() -> None:
    # In NFC "é" is one character: a needle "e" is not in it, however the reply spells it.
    assert not only(Expectations(response_contains=("cafe",)), run(NFD_CAFE)).passed
    assert only(Expectations(response_not_contains=("cafe",)), run(NFD_CAFE)).passed


def test_response_matches_compares_pattern_and_response_in_nfc() -> None:
    assert only(Expectations(response_matches=(f"^{NFC_CAFE}$",)), run(NFD_CAFE)).passed
    assert only(Expectations(response_matches=(f"^{NFD_CAFE}$",)), run(NFC_CAFE)).passed
    failed = only(Expectations(response_matches=("^x",)), run(NFD_CAFE))
    assert failed.detail == (
        'no match in response: "cafe\\u0301" (compared in Unicode NFC form: "café")'
    )


@pytest.mark.parametrize(
    ("kind", "what", "shown"),
    [
        ("tool_arguments_contain", "arguments", '"{\\"message\\":\\"cafe\\u0301\\"}"'),
        ("tool_results_contain", "results", '"cafe\\u0301"'),
    ],
)
def test_payload_needles_compare_in_nfc(kind: str, what: str, shown: str) -> None:
    call = rec("echo", f'{{"message":"{NFD_CAFE}"}}', NFD_CAFE)
    found = grade(Expectations(**{kind: (PayloadNeedle("echo", NFC_CAFE),)}), run("", call))
    assert [r.passed for r in found] == [True]
    normal = json.dumps(unicodedata.normalize("NFC", json.loads(shown)), ensure_ascii=False)
    missing = only(Expectations(**{kind: (PayloadNeedle("echo", "thé"),)}), run("", call))
    assert missing == GradeResult(
        f'{kind}("echo", "thé")',
        False,
        f'{what} of "echo": [{shown}] (compared in Unicode NFC form: [{normal}])',
    )
    indexed = only(Expectations(**{kind: (PayloadNeedle("echo", "thé", 0),)}), run("", call))
    assert indexed.detail == (
        f'{what} of call 0 to "echo": {shown} (compared in Unicode NFC form: {normal})'
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('plain "ascii"\n', '"plain \\"ascii\\"\\n"'),
        ("café 東京 — «ok»", '"café 東京 — «ok»"'),
        (NFD_CAFE, '"cafe\\u0301"'),
        ("नमस्ते", '"नमस्ते"'),  # NFC Devanagari: its marks sit on letters, kept readable
        ("\u0301 alone", '"\\u0301 alone"'),  # a mark on nothing (or on the quote) is escaped
        ("a\n\u0301", '"a\\n\\u0301"'),
        ("zero\u200bwidth", '"zero\\u200bwidth"'),
        ("\u202eevil", '"\\u202eevil"'),  # bidi override
        ("\ufeffbom", '"\\ufeffbom"'),
        ("no\u00a0break", '"no\\u00a0break"'),  # looks like a space
        ("del\x7f c1\x85", '"del\\u007f c1\\u0085"'),
        ("heart\u2764\ufe0f", '"heart\u2764\\ufe0f"'),  # variation selectors are invisible
        ("hangul\u3164filler", '"hangul\\u3164filler"'),
        ("emoji 😀", '"emoji 😀"'),
        ("tag\U000e0041", '"tag\\udb40\\udc41"'),
    ],
)
def test_quote_escapes_what_could_make_two_strings_look_alike(text: str, shown: str) -> None:
    assert quote(text) == shown
    assert json.loads(shown) == text  # still a JSON string literal of the same text


def test_quote_never_renders_nfc_and_nfd_the_same() -> None:
    for word in ["café", "Ångström", "naïve", "Hồ Chí Minh", "ñandú"]:
        decomposed = unicodedata.normalize("NFD", word)
        assert decomposed != word
        assert quote(decomposed) != quote(word)
        assert quote(word) == json.dumps(word, ensure_ascii=False)  # ordinary text unchanged


def test_listing_quotes_each_item_like_quote() -> None:
    assert listing(["echo", NFD_CAFE]) == '["echo", "cafe\\u0301"]'
    assert listing([]) == "[]"


# --- patterns that match every response --------------------------------------------------------


@pytest.mark.parametrize(
    "pattern",
    ["foo|", "a*", "^", "$", r"\A", r"\z", "(x)?", r"\b|\B", "(?m)^", "(?m)$", "x*$", "|", "a*?"],
)
def test_patterns_that_can_match_empty_everywhere_match_every_text(pattern: str) -> None:
    assert matches_every_text(pattern)


@pytest.mark.parametrize(
    "pattern", ["^$", r"\b", r"\B", "^foo", "(?m)^$", ".", r"^\b", r"\b$", "a+", r"\b\B"]
)
def test_patterns_that_some_text_escapes_are_not_flagged(pattern: str) -> None:
    assert not matches_every_text(pattern)


def test_re2_assertions_see_the_whole_text_when_the_match_is_confined() -> None:
    # matches_every_text relies on this: a search confined to [i, i] still sees both neighbours.
    assert compile_pattern(r"\z").search("a", 0, 0) is None
    assert compile_pattern(r"\b").search("a", 0, 0) is not None
    assert compile_pattern("^").search("ba", 1, 1) is None
    assert compile_pattern("(?m)^").search("\na", 1, 1) is not None


SAMPLE_PATTERNS = [
    "", "a", "a*", "^", "$", r"\b", r"\B", "(?m)^", "(?m)$", "^$", "a|", r"\n?", "é*", r"\s*$",
    r"^\b", r"\b$", r"(?m)^\B", r"\B|$", r"(?m)^|\b", r"[^a]?$", r"(?s).?", r"\b|(?m)$",
]  # fmt: skip


def test_matches_every_text_is_sound_against_every_short_text() -> None:
    # Every text of up to three characters from the neighbour classes plus a non-ASCII letter:
    # a pattern said to match every text matches each; any other fails on at least one.
    alphabet = ["", "\n", "a", " ", "é", "_"]
    texts = {a + b + c for a in alphabet for b in alphabet for c in alphabet}
    for pattern in SAMPLE_PATTERNS:
        regex = compile_pattern(pattern)
        missed = [t for t in sorted(texts) if regex.search(t) is None]
        assert matches_every_text(pattern) == (not missed), (pattern, missed[:3])


# --- tools_used / tools_not_used ---------------------------------------------------------------


def test_tools_used_pass_includes_failed_calls() -> None:
    results = grade(Expectations(tools_used=("echo", "web_fetch")), MIXED)
    assert results == (
        GradeResult('tools_used("echo")', True, ""),
        GradeResult('tools_used("web_fetch")', True, ""),
    )


def test_tools_used_fail() -> None:
    assert only(Expectations(tools_used=("shell_exec",)), MIXED) == GradeResult(
        'tools_used("shell_exec")',
        False,
        'not called; tools called: ["echo", "web_fetch", "echo", "echo"]',
    )


def test_tools_used_fail_on_no_calls() -> None:
    assert only(Expectations(tools_used=("echo",)), RunRecord.empty()) == GradeResult(
        'tools_used("echo")', False, "not called; tools called: []"
    )


def test_tools_used_is_case_sensitive() -> None:
    assert not only(Expectations(tools_used=("Echo",)), MIXED).passed


def test_tools_not_used_pass() -> None:
    assert only(Expectations(tools_not_used=("shell_exec",)), MIXED) == GradeResult(
        'tools_not_used("shell_exec")', True, ""
    )


def test_tools_not_used_fail_counts_every_dispatch() -> None:
    assert grade(Expectations(tools_not_used=("echo", "web_fetch")), MIXED) == (
        GradeResult('tools_not_used("echo")', False, "unexpectedly called 3 time(s)"),
        GradeResult('tools_not_used("web_fetch")', False, "unexpectedly called 1 time(s)"),
    )


# --- max / min / exact tool calls --------------------------------------------------------------

CALLED = '4 tool call(s): ["echo", "web_fetch", "echo", "echo"]'


@pytest.mark.parametrize(
    ("expects", "check", "passed"),
    [
        (Expectations(max_tool_calls=4), "max_tool_calls(4)", True),
        (Expectations(max_tool_calls=5), "max_tool_calls(5)", True),
        (Expectations(max_tool_calls=3), "max_tool_calls(3)", False),
        (Expectations(max_tool_calls=0), "max_tool_calls(0)", False),
        (Expectations(min_tool_calls=4), "min_tool_calls(4)", True),
        (Expectations(min_tool_calls=1), "min_tool_calls(1)", True),
        (Expectations(min_tool_calls=5), "min_tool_calls(5)", False),
        (Expectations(exact_tool_calls=4), "exact_tool_calls(4)", True),
        (Expectations(exact_tool_calls=3), "exact_tool_calls(3)", False),
        (Expectations(exact_tool_calls=5), "exact_tool_calls(5)", False),
        (Expectations(exact_tool_calls=0), "exact_tool_calls(0)", False),
    ],
)
def test_count_kinds_include_failed_and_unknown_calls(
    expects: Expectations, check: str, passed: bool
) -> None:
    assert only(expects, MIXED) == GradeResult(check, passed, "" if passed else CALLED)


def test_count_kinds_on_the_empty_run() -> None:
    empty = RunRecord.empty()
    assert only(Expectations(max_tool_calls=0), empty) == GradeResult("max_tool_calls(0)", True)
    assert only(Expectations(exact_tool_calls=0), empty) == GradeResult("exact_tool_calls(0)", True)
    assert only(Expectations(min_tool_calls=1), empty) == GradeResult(
        "min_tool_calls(1)", False, "0 tool call(s): []"
    )
    assert only(Expectations(exact_tool_calls=2), empty) == GradeResult(
        "exact_tool_calls(2)", False, "0 tool call(s): []"
    )


# --- all_tools_succeeded -----------------------------------------------------------------------


def test_all_tools_succeeded_true_pass() -> None:
    ok = run("", rec("echo", result="a"), rec("echo", result="b"))
    assert only(Expectations(all_tools_succeeded=True), ok) == GradeResult(
        "all_tools_succeeded(true)", True, ""
    )


def test_all_tools_succeeded_true_fail_names_failed_calls() -> None:
    assert only(Expectations(all_tools_succeeded=True), MIXED) == GradeResult(
        "all_tools_succeeded(true)",
        False,
        'actual all_tools_succeeded = false; failed: ["web_fetch", "echo"]',
    )


def test_all_tools_succeeded_false_pass() -> None:
    assert only(Expectations(all_tools_succeeded=False), MIXED) == GradeResult(
        "all_tools_succeeded(false)", True, ""
    )


def test_all_tools_succeeded_false_fail() -> None:
    ok = run("", rec("echo", result="a"))
    assert only(Expectations(all_tools_succeeded=False), ok) == GradeResult(
        "all_tools_succeeded(false)", False, "actual all_tools_succeeded = true; failed: []"
    )


def test_all_tools_succeeded_is_vacuously_true_without_calls() -> None:
    empty = RunRecord.empty()
    assert empty.all_tools_succeeded is True
    assert only(Expectations(all_tools_succeeded=True), empty).passed
    assert not only(Expectations(all_tools_succeeded=False), empty).passed


# --- tool_arguments_contain / tool_results_contain ---------------------------------------------


def test_tool_arguments_contain_any_call_pass() -> None:
    result = only(Expectations(tool_arguments_contain=(PayloadNeedle("echo", "second"),)), MIXED)
    assert result == GradeResult('tool_arguments_contain("echo", "second")', True, "")


def test_tool_arguments_contain_any_call_fail_shows_every_payload() -> None:
    result = only(Expectations(tool_arguments_contain=(PayloadNeedle("echo", "third"),)), MIXED)
    assert result.check == 'tool_arguments_contain("echo", "third")'
    assert result.passed is False
    # the observed argument texts of every echo call, JSON-quoted, in dispatch order
    for payload in ['"{\\"message\\":\\"first\\"}"', '"{\\"message\\":\\"second\\"}"', '"{bad"']:
        assert payload in result.detail
    assert result.detail.index("first") < result.detail.index("second")
    assert "web_fetch" not in result.detail


def test_tool_arguments_contain_with_index_pass() -> None:
    # call_index counts calls to that tool only: echo[1] is the third dispatch overall.
    result = only(Expectations(tool_arguments_contain=(PayloadNeedle("echo", "second", 1),)), MIXED)
    assert result == GradeResult('tool_arguments_contain("echo"[1], "second")', True, "")


def test_tool_arguments_contain_with_index_fail_shows_that_payload() -> None:
    result = only(Expectations(tool_arguments_contain=(PayloadNeedle("echo", "second", 0),)), MIXED)
    assert result.check == 'tool_arguments_contain("echo"[0], "second")'
    assert result.passed is False
    assert '"{\\"message\\":\\"first\\"}"' in result.detail
    assert "second" not in result.detail


def test_tool_arguments_contain_never_called() -> None:
    result = only(Expectations(tool_arguments_contain=(PayloadNeedle("shell_exec", "ls"),)), MIXED)
    assert result == GradeResult(
        'tool_arguments_contain("shell_exec", "ls")',
        False,
        '"shell_exec" was never called; tools called: ["echo", "web_fetch", "echo", "echo"]',
    )


def test_tool_arguments_contain_never_called_with_index() -> None:
    result = only(
        Expectations(tool_arguments_contain=(PayloadNeedle("echo", "x", 0),)), RunRecord.empty()
    )
    assert result == GradeResult(
        'tool_arguments_contain("echo"[0], "x")',
        False,
        '"echo" was never called; tools called: []',
    )


def test_tool_arguments_contain_index_out_of_range() -> None:
    result = only(
        Expectations(tool_arguments_contain=(PayloadNeedle("web_fetch", "url", 1),)), MIXED
    )
    assert result.check == 'tool_arguments_contain("web_fetch"[1], "url")'
    assert result.passed is False
    assert result.detail.startswith('no call 1 to "web_fetch"; only 1 call(s) observed: [')
    assert "example.com" in result.detail


def test_tool_arguments_contain_index_out_of_range_many_calls() -> None:
    result = only(Expectations(tool_arguments_contain=(PayloadNeedle("echo", "x", 3),)), MIXED)
    assert result.passed is False
    assert result.detail.startswith('no call 3 to "echo"; only 3 call(s) observed: [')


def test_tool_results_contain_any_call_pass_includes_failed_calls() -> None:
    result = only(
        Expectations(tool_results_contain=(PayloadNeedle("web_fetch", "Unknown tool"),)), MIXED
    )
    assert result == GradeResult('tool_results_contain("web_fetch", "Unknown tool")', True, "")


def test_tool_results_contain_any_call_fail() -> None:
    result = only(Expectations(tool_results_contain=(PayloadNeedle("echo", "third"),)), MIXED)
    assert result.check == 'tool_results_contain("echo", "third")'
    assert result.passed is False
    for payload in ['"first"', '"second"', '"Invalid arguments for echo: Expecting value"']:
        assert payload in result.detail


def test_tool_results_contain_with_index() -> None:
    results = grade(
        Expectations(
            tool_results_contain=(
                PayloadNeedle("echo", "second", 1),
                PayloadNeedle("echo", "Invalid arguments", 2),
                PayloadNeedle("echo", "second", 2),
            )
        ),
        MIXED,
    )
    assert [(r.check, r.passed) for r in results] == [
        ('tool_results_contain("echo"[1], "second")', True),
        ('tool_results_contain("echo"[2], "Invalid arguments")', True),
        ('tool_results_contain("echo"[2], "second")', False),
    ]
    assert '"Invalid arguments for echo: Expecting value"' in results[2].detail


def test_tool_results_contain_never_called() -> None:
    result = only(Expectations(tool_results_contain=(PayloadNeedle("Echo", "x"),)), MIXED)
    assert result == GradeResult(
        'tool_results_contain("Echo", "x")',
        False,
        '"Echo" was never called; tools called: ["echo", "web_fetch", "echo", "echo"]',
    )


def test_tool_results_contain_index_out_of_range() -> None:
    result = only(Expectations(tool_results_contain=(PayloadNeedle("echo", "x", 7),)), MIXED)
    assert result == GradeResult(
        'tool_results_contain("echo"[7], "x")',
        False,
        'no call 7 to "echo"; only 3 call(s) observed: '
        '["first", "second", "Invalid arguments for echo: Expecting value"]',
    )


def test_payload_labels_quote_as_json() -> None:
    result = only(
        Expectations(tool_arguments_contain=(PayloadNeedle('we"ird', 'q"uote\\', 0),)), MIXED
    )
    assert result.check == 'tool_arguments_contain("we\\"ird"[0], "q\\"uote\\\\")'


def test_payload_needle_matches_arguments_not_results() -> None:
    # The arguments of the failed echo are "{bad"; its result mentions "Invalid".
    args = only(Expectations(tool_arguments_contain=(PayloadNeedle("echo", "Invalid", 2),)), MIXED)
    results = only(Expectations(tool_results_contain=(PayloadNeedle("echo", "{bad", 2),)), MIXED)
    assert not args.passed
    assert not results.passed


# --- order and empty lists ---------------------------------------------------------------------

ALL_KINDS = Expectations(
    tool_results_contain=(PayloadNeedle("echo", "first"), PayloadNeedle("echo", "zzz", 0)),
    tool_arguments_contain=(PayloadNeedle("echo", "first", 0),),
    all_tools_succeeded=True,
    exact_tool_calls=4,
    min_tool_calls=1,
    max_tool_calls=9,
    tools_not_used=("shell_exec", "echo"),
    tools_used=("web_fetch",),
    response_matches=("answer",),
    response_not_contains=("nope",),
    response_contains=("42", "The"),
)


def test_grades_follow_the_spec_table_order() -> None:
    checks = [r.check for r in grade(ALL_KINDS, MIXED)]
    assert checks == [
        'response_contains("42")',
        'response_contains("The")',
        'response_not_contains("nope")',
        'response_matches("answer")',
        'tools_used("web_fetch")',
        'tools_not_used("shell_exec")',
        'tools_not_used("echo")',
        "max_tool_calls(9)",
        "min_tool_calls(1)",
        "exact_tool_calls(4)",
        "all_tools_succeeded(true)",
        'tool_arguments_contain("echo"[0], "first")',
        'tool_results_contain("echo", "first")',
        'tool_results_contain("echo"[0], "zzz")',
    ]


def test_kind_registry_is_the_spec_table() -> None:
    assert [k.name for k in KINDS] == [
        "response_contains",
        "response_not_contains",
        "response_matches",
        "tools_used",
        "tools_not_used",
        "max_tool_calls",
        "min_tool_calls",
        "exact_tool_calls",
        "all_tools_succeeded",
        "tool_arguments_contain",
        "tool_results_contain",
        "tools_offered",
        "tools_not_offered",
        "system_prompt_contains",
        "tool_calls_match",
        "response_json",
    ]


NOT_IN_THE_GATED_SUITE = {"system_prompt_contains"}
"""The gated suite runs on the reference agent, which sends no system prompt; the docs' example
with a Python factory agent uses this kind, and a test runs it."""


def test_a_kind_is_defined_once_and_everything_else_agrees_with_it() -> None:
    """Adding a kind in one place only fails here, naming the place that lags behind."""
    names = [kind.name for kind in KINDS]
    assert len(set(names)) == len(names), "a kind is registered twice"
    assert names == [f.name for f in dataclasses.fields(Expectations)], (
        "evalrunner.model.Expectations needs one field per kind of "
        "evalrunner.expectations.kinds.KINDS, in the same order (the grading order)"
    )
    on_disk = sorted(p.name for p in (ROOT / "schemas" / "expects").glob("*.schema.json"))
    assert on_disk == sorted(Path(kind.schema).name for kind in KINDS), (
        "schemas/expects/ needs exactly one <kind>.schema.json per registered kind"
    )
    tree = schema_tree()
    in_case = tree.documents["case.schema.json"]["$defs"]["expects"]["properties"]
    assert in_case == {kind.name: {"$ref": kind.schema} for kind in KINDS}, (
        "case.schema.json's $defs.expects.properties needs one $ref per kind, to its file"
    )
    for kind in KINDS:
        schema = tree.documents[kind.schema]
        assert schema["title"] == kind.name and schema["description"], kind.schema
        assert kind.evidence is None or callable(kind.evidence) or kind.evidence in NO_EVIDENCE, (
            kind.name
        )
        assert all(callable(rule) for rule in kind.rules)
        levels = [c.expects for c in GATED] + [
            t.expects for c in GATED for t in c.turns if t.expects is not None
        ]
        values = [getattr(e, kind.name) for e in levels]
        values = [value for value in values if value is not None]
        if kind.name in NOT_IN_THE_GATED_SUITE:
            continue
        assert values, f"no case of evals/regression declares {kind.name}: add one"
        assert all(kind.parse(kind.dump(value)) == value for value in values), (
            f"{kind.name}: parse does not read back what dump writes"
        )
    section = README.split("\n## Expectation kinds\n", 1)[1].split("\n## ", 1)[0]
    table = "".join(line + "\n" for line in section.splitlines() if line.startswith("|"))
    assert table == kinds_table(), (
        "README.md's kinds table is evalrunner.expectations.kinds.kinds_table(); paste it:\n"
        + kinds_table()
    )
    page = (ROOT / "docs" / "reference" / "expectations.md").read_text(encoding="utf-8")
    assert page == reference_generator().expectations_page(), (
        "docs/reference/expectations.md is stale: run python docs/gen_reference.py"
    )
    assert all(f"\n## `{name}`\n" in page for name in names)


def reference_generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "kind",
    [
        "response_contains",
        "response_not_contains",
        "response_matches",
        "tools_used",
        "tools_not_used",
        "tool_arguments_contain",
        "tool_results_contain",
    ],
)
def test_empty_list_yields_no_grade(kind: str) -> None:
    expects = dataclasses.replace(Expectations(), **{kind: ()})  # type: ignore[arg-type]
    assert grade(expects, MIXED) == ()
    assert grade(expects, RunRecord.empty()) == ()


def test_nothing_declared_yields_no_grade() -> None:
    assert grade(Expectations(), MIXED) == ()


def test_grading_is_pure_and_repeatable() -> None:
    assert grade(ALL_KINDS, MIXED) == grade(ALL_KINDS, MIXED)


def test_passing_grades_have_empty_detail_and_failing_ones_do_not() -> None:
    for result in grade(ALL_KINDS, MIXED):
        assert (result.detail == "") == result.passed


# --- the gated suite: falsifiable, and green on its real replay --------------------------------


def _gated_cases() -> list[Case]:
    admission = admit_suite(load_suite(REGRESSION))
    assert admission.ok, [str(e) for e in admission.errors]
    return list(admission.cases)


GATED = _gated_cases()


def test_gated_suite_uses_all_three_formats() -> None:
    assert {c.source.suffix for c in GATED} >= {".json", ".yaml", ".toml"}
    assert len(GATED) == len(list(REGRESSION.glob("*.*")))


@pytest.mark.parametrize("case", GATED, ids=[c.source.name for c in GATED])
def test_gated_fixture_fails_on_the_empty_run(case: Case) -> None:
    results = grade(case.expects, RunRecord.empty())
    assert results
    assert any(not r.passed for r in results)


@pytest.mark.parametrize("case", GATED, ids=[c.source.name for c in GATED])
def test_gated_fixture_passes_on_its_real_replay(case: Case) -> None:
    record = run_case(case)
    assert record.error is None
    results = grade(case.expects, record)
    assert results
    failing = [r for r in results if not r.passed]
    assert failing == []


def test_every_kind_is_used_by_the_gated_suite() -> None:
    used = {
        kind.name
        for case in GATED
        for expects in (case.expects, *(turn.expects for turn in case.turns))
        if expects is not None
        for kind in KINDS
        if getattr(expects, kind.name) not in (None, ())
    }
    # The reference agent sends no system prompt, so no gated case can hold it to one; the
    # kind is run on agents that do in tests/test_request_kinds.py.
    assert used == {k.name for k in KINDS} - {"system_prompt_contains"}
