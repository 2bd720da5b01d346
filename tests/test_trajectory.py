"""``tool_calls_match`` and ``response_json`` (issue 26): their graders, the evidence they
need, and the admission rules that refuse what no correct run can pass."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrunner.expectations import NO_EVIDENCE, grade
from evalrunner.expectations.kinds import parse_response_json, parse_tool_calls_match
from evalrunner.expectations.trajectory import match as trajectory_match
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_document
from evalrunner.model import (
    Case,
    Expectations,
    ExpectedCall,
    ResponseJson,
    RunRecord,
    ToolCallRecord,
    ToolCallsMatch,
    argument_json,
    json_equal,
)


def call(name: str, result: str = "ok", success: bool = True, **arguments: Any) -> ToolCallRecord:
    return ToolCallRecord(name, argument_json(arguments), result, success)


def match_check(raw: dict[str, Any], *calls: ToolCallRecord, **run: Any) -> tuple[bool, str]:
    expects = Expectations(tool_calls_match=parse_tool_calls_match(raw))
    [result] = grade(expects, RunRecord(tool_calls=calls, **run))
    return result.passed, result.detail


def json_checks(raw: dict[str, Any], reply: str) -> list[tuple[str, bool, str]]:
    expects = Expectations(response_json=parse_response_json(raw))
    return [(r.check, r.passed, r.detail) for r in grade(expects, RunRecord(final_response=reply))]


# --- tool_calls_match: the grader -------------------------------------------------------------

PARIS, ROME = (
    call("get_weather", city="Paris", unit="C"),
    call("get_weather", city="Rome", unit="C"),
)


def test_subset_arguments_match_in_order_and_any() -> None:
    calls = [{"tool": "get_weather", "arguments": {"city": c}} for c in ("Paris", "Rome")]
    assert match_check({"calls": calls}, PARIS, ROME) == (True, "")
    assert match_check({"order": "any", "calls": calls[::-1]}, PARIS, ROME) == (True, "")
    passed, detail = match_check({"calls": calls[::-1]}, PARIS, ROME)
    assert not passed
    assert 'calls[0] ("get_weather") has no match: dispatches[1] "get_weather"' in detail
    assert "fits it, but not in the listed order (order: in_order)" in detail
    # One numbering (0-based, as calls[j]), and the dispatch that fits is not also called a
    # dispatch that matches nothing.
    assert "#" not in detail and "matches no expected call" not in detail


def test_a_failure_names_the_nearest_dispatch_and_the_keys_that_differ() -> None:
    raw = {"calls": [{"tool": "get_weather", "arguments": {"city": "Roma", "unit": "C"}}]}
    passed, detail = match_check({**raw, "extras": "allow"}, PARIS, ROME)
    assert not passed
    assert detail.startswith('calls[0] ("get_weather") has no match; nearest: dispatches[0] ')
    assert 'arguments differ at "/city" (expected "Roma", got "Paris")' in detail
    passed, detail = match_check(
        {"calls": [{"tool": "send_email"}], "extras": "allow"}, PARIS, ROME
    )
    assert 'no dispatch of "send_email"; dispatched: ["get_weather", "get_weather"]' in detail


def test_the_nearest_dispatch_is_the_one_with_fewest_differing_keys() -> None:
    # Both keys of dispatch #1 differ, in one message; only "/unit" of dispatch #2 does.
    raw = {"calls": [{"tool": "get_weather", "arguments": {"city": "Rome", "unit": "F"}}]}
    passed, detail = match_check({**raw, "extras": "allow"}, PARIS, ROME)
    assert not passed
    nearest = detail.split("nearest: ")[1]
    assert '\\"Rome\\"' in nearest.split("arguments differ")[0]
    assert '"/unit"' in nearest and '"/city"' not in nearest


def test_arguments_that_differ_only_in_unicode_normalization_say_so() -> None:
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    raw = {"calls": [{"tool": "echo", "arguments": {"message": composed}}]}
    passed, detail = match_check(raw, call("echo", message=decomposed))
    assert not passed
    assert (
        '"/message" (expected "caf\u00e9", got "cafe\u0301"; they differ only in Unicode '
        'normalization: expected "caf\\u00e9", got "cafe\\u0301", and arguments are '
        "compared exactly)"
    ) in detail
    passed, detail = match_check(raw, call("echo", message="cafe"))
    assert "Unicode" not in detail


def test_extras_forbid_names_each_unmatched_dispatch() -> None:
    raw = {"calls": [{"tool": "get_weather", "arguments": {"city": "Paris"}}]}
    passed, detail = match_check(raw, PARIS, ROME)
    assert not passed
    assert (
        'dispatches[1] "get_weather"' in detail
        and "matches no expected call (extras: forbid)" in detail
    )
    assert match_check({**raw, "extras": "allow"}, PARIS, ROME) == (True, "")


def test_subset_is_recursive_for_objects_and_whole_for_arrays() -> None:
    nested = call("book", trip={"from": "EUR", "seats": 10, "tags": ["a", "b"]})
    ok = {"calls": [{"tool": "book", "arguments": {"trip": {"seats": 10}}}]}
    assert match_check(ok, nested)[0]
    # "seats":1 is not "seats":10, as a substring needle would have it.
    assert not match_check(
        {"calls": [{"tool": "book", "arguments": {"trip": {"seats": 1}}}]}, nested
    )[0]
    part = {"calls": [{"tool": "book", "arguments": {"trip": {"tags": ["a"]}}}]}
    passed, detail = match_check(part, nested)
    assert not passed and '"/trip/tags" (expected ["a"], got ["a","b"])' in detail
    # Numbers compare as JSON values; a boolean is not a number; "" is a value.
    assert match_check({"calls": [{"tool": "t", "arguments": {"n": 1.0}}]}, call("t", n=1))[0]
    assert not match_check({"calls": [{"tool": "t", "arguments": {"n": True}}]}, call("t", n=1))[0]
    assert match_check({"calls": [{"tool": "t", "arguments": {"s": ""}}]}, call("t", s=""))[0]


def test_arguments_that_are_not_json_match_no_argument_matcher() -> None:
    broken = ToolCallRecord("t", '{"a": ', "ok", True)
    passed, detail = match_check({"calls": [{"tool": "t", "arguments": {}}]}, broken)
    assert not passed and "arguments are not JSON" in detail
    assert match_check({"calls": [{"tool": "t"}]}, broken) == (True, "")


def test_schema_result_and_success_matchers() -> None:
    schema = {"type": "object", "properties": {"city": {"const": "Paris"}}, "required": ["city"]}
    failing = call("get_weather", "unknown city", False, city="Paris")
    raw = {"calls": [{"tool": "get_weather", "arguments_schema": schema}]}
    assert match_check(raw, failing)[0]
    _, detail = match_check(raw, ROME)
    assert "arguments break arguments_schema: 'Paris' was expected" in detail
    raw = {"calls": [{"tool": "get_weather", "result_contains": "unknown", "succeeded": False}]}
    assert match_check(raw, failing)[0]
    _, detail = match_check(raw, PARIS)
    assert 'result lacks "unknown"; succeeded is true' in detail
    # result_contains compares in NFC, like every text check.
    accented = call("t", "cafe\u0301")
    assert match_check({"calls": [{"tool": "t", "result_contains": "café"}]}, accented)[0]


def test_overlapping_matchers_find_the_assignment_greedy_misses() -> None:
    # The loose entry first: taking the first dispatch that fits it would leave the strict
    # entry only a dispatch it does not fit.
    raw = {
        "order": "any",
        "calls": [{"tool": "get_weather"}, {"tool": "get_weather", "arguments": {"city": "Paris"}}],
    }
    assert match_check(raw, PARIS, ROME) == (True, "")
    in_order = {
        "extras": "allow",
        "calls": [{"tool": "get_weather"}, {"tool": "get_weather", "arguments": {"city": "Paris"}}],
    }
    assert match_check(in_order, PARIS, ROME, PARIS) == (True, "")


def test_no_evidence_of_arguments_or_success_fails_the_check_that_reads_them() -> None:
    raw = {"calls": [{"tool": "get_weather", "arguments": {"city": "Paris"}}]}
    assert match_check(raw, PARIS, unobserved=("arguments",)) == (False, NO_EVIDENCE["arguments"])
    raw = {"calls": [{"tool": "get_weather", "succeeded": True}]}
    assert match_check(raw, PARIS, unobserved=("success",)) == (False, NO_EVIDENCE["success"])
    # A check that reads neither is graded on what every path observes: names and results.
    raw = {"calls": [{"tool": "get_weather", "result_contains": "ok"}]}
    assert match_check(raw, PARIS, unobserved=("arguments", "success")) == (True, "")


# Hypothesis: the grader's verdict is the brute-force one, for matchers that overlap.
ARGS = st.fixed_dictionaries({"x": st.integers(0, 2)})
DISPATCH = st.tuples(st.sampled_from(["a", "b"]), ARGS)
EXPECTED = st.tuples(
    st.sampled_from(["a", "b"]),
    st.one_of(st.none(), st.just({}), ARGS),  # no matcher, an empty subset, or one value
)


def _brute(
    expected: list[tuple[str, Any]], dispatched: list[tuple[str, Any]], order: str, extras: str
) -> bool:
    n, k = len(dispatched), len(expected)
    if extras == "forbid" and n != k:
        return False
    for chosen in itertools.permutations(range(n), k):
        if order == "in_order" and list(chosen) != sorted(chosen):
            continue
        if all(
            dispatched[i][0] == tool
            and (want is None or all(dispatched[i][1].get(key) == v for key, v in want.items()))
            for (tool, want), i in zip(expected, chosen, strict=True)
        ):
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(
    expected=st.lists(EXPECTED, min_size=1, max_size=4),
    dispatched=st.lists(DISPATCH, max_size=5),
    order=st.sampled_from(["in_order", "any"]),
    extras=st.sampled_from(["forbid", "allow"]),
)
def test_the_verdict_is_that_of_an_exhaustive_search(
    expected: list[tuple[str, Any]], dispatched: list[tuple[str, Any]], order: str, extras: str
) -> None:
    raw = {
        "order": order,
        "extras": extras,
        "calls": [
            {"tool": tool} if want is None else {"tool": tool, "arguments": want}
            for tool, want in expected
        ],
    }
    passed, detail = match_check(raw, *(call(tool, **args) for tool, args in dispatched))
    assert passed == _brute(expected, dispatched, order, extras), detail


@settings(max_examples=200, deadline=None)
@given(dispatched=st.lists(DISPATCH, min_size=1, max_size=6), data=st.data())
def test_expected_calls_drawn_from_the_dispatches_always_match(
    dispatched: list[tuple[str, Any]], data: st.DataObject
) -> None:
    # Each expected call is written for one dispatch, some loosely (tool only), so they
    # overlap; an assignment exists by construction, in order when the picks are sorted.
    picks = data.draw(st.lists(st.integers(0, len(dispatched) - 1), min_size=1, unique=True))
    loose = data.draw(st.lists(st.booleans(), min_size=len(picks), max_size=len(picks)))
    calls = [
        {"tool": dispatched[i][0]}
        if vague
        else {"tool": dispatched[i][0], "arguments": dispatched[i][1]}
        for i, vague in zip(picks, loose, strict=True)
    ]
    records = [call(tool, **args) for tool, args in dispatched]
    assert match_check({"order": "any", "extras": "allow", "calls": calls}, *records)[0]
    in_order = [calls[j] for j in sorted(range(len(picks)), key=lambda j: picks[j])]
    assert match_check({"extras": "allow", "calls": in_order}, *records)[0]


def test_a_long_chain_of_overlapping_expected_calls_is_matched_without_recursion() -> None:
    # Expected call j fits dispatches j and j + 1, and the last one fits only dispatch 0:
    # the first-fit assignment must be shifted along the whole chain to make room, which a
    # recursive augmenting-path search did one stack frame per link.
    n = 1100
    fits = [[i in (j, j + 1) for i in range(n + 1)] for j in range(n)]
    fits.append([i == 0 for i in range(n + 1)])
    any_order = ToolCallsMatch(calls=(), order="any")
    pairs = trajectory_match(any_order, fits)
    assert len(pairs) == n + 1 and all(fits[j][i] for j, i in pairs.items())
    assert len(set(pairs.values())) == n + 1


@settings(max_examples=300, deadline=None)
@given(
    fits=st.integers(1, 6).flatmap(
        lambda n: st.lists(st.lists(st.booleans(), min_size=n, max_size=n), max_size=6)
    )
)
def test_order_any_finds_a_largest_assignment(fits: list[list[bool]]) -> None:
    n = len(fits[0]) if fits else 0
    pairs = trajectory_match(ToolCallsMatch(calls=(), order="any"), fits)
    assert all(fits[j][i] for j, i in pairs.items()) and len(set(pairs.values())) == len(pairs)
    # Exhaustive: the most rows matched from row j on, with the columns in ``used`` taken.
    best: dict[tuple[int, int], int] = {}
    for j in range(len(fits), -1, -1):
        for used in range(1 << n):
            if j == len(fits):
                best[j, used] = 0
                continue
            options = [best[j + 1, used]]
            options += [
                1 + best[j + 1, used | 1 << i] for i in range(n) if fits[j][i] and not used & 1 << i
            ]
            best[j, used] = max(options)
    largest = best[0, 0]
    assert len(pairs) == largest


# --- response_json: the grader ----------------------------------------------------------------

REPLY = '{"answer": "Paris 12C, Rome 18C", "cities": 2, "notes": "", "list": [1, {"a/b": null}]}'


def test_schema_and_pointers_pass_on_a_matching_reply() -> None:
    raw = {
        "schema": {"type": "object", "required": ["answer", "cities"]},
        "equals": {"/cities": 2.0, "/notes": "", "/list/1/a~1b": None, "": json.loads(REPLY)},
    }
    assert all(passed for _, passed, _ in json_checks(raw, REPLY))
    assert [check for check, _, _ in json_checks(raw, REPLY)][:2] == [
        "response_json(schema)",
        'response_json("/cities" = 2.0)',
    ]


def test_each_failure_says_what_was_there() -> None:
    raw = {"schema": {"required": ["missing"]}, "equals": {"/cities": 3, "/nope": 1, "/list/5": 1}}
    results = json_checks(raw, REPLY)
    assert results[0][1:] == (
        False,
        "the reply breaks the schema: 'missing' is a required property",
    )
    assert results[1][1:] == (False, 'actual "/cities" = 2')
    assert results[2][1] is False and results[2][2].startswith('pointer "/nope" names nothing')
    assert results[3][1] is False and 'pointer "/list/5" names nothing' in results[3][2]


def test_a_reply_that_is_not_json_fails_every_check_of_the_kind() -> None:
    for reply in ("", "```json\n{}\n```", '{"a": NaN}', "{} trailing"):
        results = json_checks({"equals": {"": {}}}, reply)
        assert [passed for _, passed, _ in results] == [False], reply
        assert results[0][2].startswith("the reply is not JSON (")
    assert json_checks({}, "[1]") == [("response_json", True, "")]
    assert json_checks({}, "nope")[0][1] is False


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=8,
    )
)
def test_any_json_reply_equals_itself_at_the_root(value: Any) -> None:
    reply = json.dumps(value)
    assert json_checks({"equals": {"": value}}, reply)[0][1]
    assert json_equal(json.loads(reply), value)


# --- admission --------------------------------------------------------------------------------

WEATHER = """\
name: weather
turns:
  - user_input: Weather in Paris and Rome?
    steps:
      - response:
          type: tool_calls
          tool_calls:
            - {id: w1, name: get_weather, arguments: {city: Paris, unit: C}}
            - {id: w2, name: get_weather, arguments: {city: Rome, unit: C}}
      - response: {type: text, content: '{"answer": "Paris 12C, Rome 18C", "cities": 2}'}
expects:
"""


def refusals(tmp_path: Path, expects: str, head: str = WEATHER) -> list[str]:
    path = tmp_path / "case.yaml"
    path.write_text(head + expects, "utf-8")
    document = load_document(path)
    assert not isinstance(document, list), document
    outcome = admit(document)
    if isinstance(outcome, Case):
        return []
    return [str(e).split("case.yaml:", 1)[1] for e in outcome]


def test_the_issue_example_admits(tmp_path: Path) -> None:
    expects = """\
  response_json:
    schema: {type: object, required: [answer, cities]}
    equals: {"/cities": 2}
  tool_calls_match:
    order: any
    calls:
      - tool: get_weather
        arguments: {city: Rome}
      - tool: get_weather
        arguments_schema: {type: object, properties: {city: {const: Paris}}, required: [city]}
        result_contains: "Paris"
        succeeded: true
"""
    assert refusals(tmp_path, expects) == []


def test_a_typo_in_a_fixture_schema_is_refused_where_it_is(tmp_path: Path) -> None:
    expects = """\
  tool_calls_match:
    calls:
      - tool: get_weather
        arguments_schema: {type: object, requried: [city]}
      - tool: get_weather
  response_json:
    schema:
      type: object
      properties: {cities: {type: integr}}
"""
    found = refusals(tmp_path, expects)
    assert found == [
        "15:42: expects.tool_calls_match.calls[0].arguments_schema.requried: unknown JSON "
        'Schema keyword "requried", which would check nothing; did you mean "required"?',
        "20:35: expects.response_json.schema.properties.cities.type: a JSON Schema type is one "
        "of array, boolean, integer, null, number, object, string (or a list of them), got "
        '"integr"',
    ]


@pytest.mark.parametrize(
    ("schema", "wanted"),
    [
        # Checked like a tool double's parameters (one checker): a pattern Python cannot
        # compile would otherwise end grading in an exception, a $dynamicRef that leaves the
        # schema in an unresolvable reference.
        (
            '{pattern: "("}',
            '13:23: expects.response_json.schema.pattern: pattern "(" is not a valid regular '
            "expression",
        ),
        (
            '{$dynamicRef: "https://example.com/s.json"}',
            '13:27: expects.response_json.schema.$dynamicRef: $dynamicRef "https://example.com/'
            's.json" points outside this schema',
        ),
    ],
)
def test_a_reply_schema_that_would_break_grading_is_refused(
    tmp_path: Path, schema: str, wanted: str
) -> None:
    found = refusals(tmp_path, f"  response_json:\n    schema: {schema}\n")
    assert len(found) == 1 and found[0].startswith(wanted), found


def test_a_remote_ref_and_a_bad_pointer_are_refused(tmp_path: Path) -> None:
    expects = """\
  response_json:
    schema: {$ref: "https://example.com/s.json"}
    equals: {cities: 2, "/a~2": 1}
"""
    found = refusals(tmp_path, expects)
    assert found[0].startswith(
        '13:20: expects.response_json.schema.$ref: $ref "https://example.com/s.json" points '
        "outside this schema"
    )
    assert found[1].startswith('14:14: "cities" is not a JSON Pointer: a JSON Pointer is ""')
    assert found[2].startswith('14:25: "/a~2" is not a JSON Pointer: in a JSON Pointer "~"')


def test_checks_no_correct_run_can_pass_are_refused_at_the_check(tmp_path: Path) -> None:
    found = refusals(tmp_path, "  tools_used: [get_weather, get_wether]\n  min_tool_calls: 3\n")
    assert found == [
        '12:29: expects.tools_used[1] names "get_wether", but the script calls ["get_weather", '
        '"get_weather"] (did you mean "get_weather"?); this check always fails; script a call '
        "to it or remove it",
        "13:19: expects.min_tool_calls (3) is above the 2 tool call(s) the script hands out "
        '(the script calls ["get_weather", "get_weather"]); no correct run makes more, so this '
        "check always fails; lower it to 2 or script more calls",
    ]
    for kind in ("exact_tool_calls", "max_tool_calls"):
        [found_one] = refusals(tmp_path, f"  {kind}: 1\n  response_contains: [Paris]\n")
        assert found_one == (
            f"12:{len(kind) + 5}: expects.{kind} (1) is below the 2 tool call(s) the script "
            'hands out (the script calls ["get_weather", "get_weather"]); a correct agent '
            "dispatches every one, so this check always fails; raise it to 2 or script fewer calls"
        )
    # Every dispatch answers a scripted call, so an exact count above the script's is refused too.
    [above] = refusals(tmp_path, "  exact_tool_calls: 3\n  response_contains: [Paris]\n")
    assert above == (
        "12:21: expects.exact_tool_calls (3) is above the 2 tool call(s) the script hands out "
        '(the script calls ["get_weather", "get_weather"]); no correct run makes more, so this '
        "check always fails; lower it to 2 or script more calls"
    )
    # Counts the script gives are admitted.
    assert refusals(tmp_path, "  exact_tool_calls: 2\n  min_tool_calls: 2\n") == []


def test_an_unmatchable_tool_calls_match_is_refused_at_the_entry(tmp_path: Path) -> None:
    expects = """\
  tool_calls_match:
    calls:
      - tool: send_email
      - {tool: get_weather, arguments: {city: Oslo}}
      - {tool: get_weather, arguments_schema: {required: [country]}}
      - tool: get_weather
"""
    found = refusals(tmp_path, expects)
    assert [f.split(": ", 1)[0] for f in found] == ["14:15", "15:40", "16:47", "17:9"]
    assert 'expects a call to "send_email", but the script calls' in found[0]
    assert (
        'arguments rejects every scripted call to "get_weather" (arguments differ at "/city"'
        in found[1]
    )
    assert "arguments_schema rejects every scripted call" in found[2]
    assert 'expects 3 or more calls to "get_weather", but the script makes 2' in found[3]


def test_forbid_with_fewer_expected_calls_than_the_script_makes(tmp_path: Path) -> None:
    found = refusals(tmp_path, "  tool_calls_match:\n    calls: [{tool: get_weather}]\n")
    assert found == [
        "12:3: expects.tool_calls_match has extras: forbid, so every dispatch must be matched, "
        "but 1 call(s) are expected and the script makes 2 (the script calls "
        '["get_weather", "get_weather"]); expect each scripted call, or set extras: allow'
    ]
    allowed = "  tool_calls_match:\n    extras: allow\n    calls: [{tool: get_weather}]\n"
    assert refusals(tmp_path, allowed) == []


def test_an_order_the_script_cannot_give_is_refused(tmp_path: Path) -> None:
    expects = """\
  tool_calls_match:
    calls:
      - {tool: get_weather, arguments: {city: Rome}}
      - {tool: get_weather, arguments: {city: Paris}}
"""
    [found] = refusals(tmp_path, expects)
    assert found.startswith(
        "12:3: expects.tool_calls_match cannot match: no assignment of the scripted calls in "
        "the scripted order"
    )
    assert refusals(tmp_path, expects.replace("    calls:", "    order: any\n    calls:")) == []


def test_a_turn_that_ends_in_a_tool_call_is_refused_at_its_last_step(tmp_path: Path) -> None:
    head = "".join(line for line in WEATHER.splitlines(True) if "type: text" not in line)
    [found] = refusals(tmp_path, "  exact_tool_calls: 2\n", head)
    assert found.startswith(
        "5:9: turns[0].steps[0], the last step of turn 1, is a tool_calls step, so the turn can "
        "never end in a reply"
    )


def test_live_cases_are_checked_only_for_contradictions(tmp_path: Path) -> None:
    live = "name: live\nturns:\n  - user_input: hi\nexpects:\n"
    assert refusals(tmp_path, "  tools_used: [anything]\n  exact_tool_calls: 1\n", live) == []
    expects = (
        "  tools_not_used: [x]\n  max_tool_calls: 1\n"
        "  tool_calls_match:\n    calls: [{tool: x}, {tool: y}]\n"
    )
    found = refusals(tmp_path, expects, live)
    assert [f.split(": ", 1)[0] for f in found] == ["6:19", "8:20"]
    assert "below the 2 tool call(s) the other checks need" in found[0]
    assert (
        'tool_calls_match.calls[0] needs a call to "x", which expects.tools_not_used[0] forbids'
        in found[1]
    )


def test_blank_result_needles_are_refused(tmp_path: Path) -> None:
    expects = "  tool_calls_match:\n    calls: [{tool: get_weather, result_contains: ' '}]\n"
    found = refusals(tmp_path, expects)
    assert any(
        "must not be blank (it is only whitespace); give the text to look for in the result" in f
        for f in found
    )


# --- the three messages -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "name: a\nturns:\n  - user_input: hi\n    steps:\n      - response:\n"
            "expects:\n  response_contains: [hi]\n",
            "6:1: turns[0].steps[0].response must be an object, got null; write its value after "
            "'response'",
        ),
        (
            "name: a\nturns:\n  - user_input: hi\n    steps:\n      - response: {type: text, "
            "content: hi}\nexpects:\n  response_contains: [hi]\n   tools_used: [echo]\n",
            "8:4: bad indentation: this line does not fit the mapping begun at line 7, whose keys "
            "start in column 3; indent it with spaces to the column of the key or '- ' item it "
            "belongs with",
        ),
        (
            "name: a\nturns:\n  - user_input: hi\n    steps:\n      - response: {type: text, "
            "content: hi}\nexpects:\n\tresponse_contains: [hi]\n",
            "7:1: a tab in the indentation: YAML indents with spaces only; replace the tab with "
            "spaces (2 per level, lined up with the keys around it)",
        ),
        (
            "name: a\nturns:\n  - user_input: hi\n    steps:\n      - type: text\n"
            "        content: hi\nexpects:\n  response_contains: [hi]\n",
            "5:9: turns[0].steps[0] has no 'response' key: 'type', 'content' belong inside it; "
            "indent them under a 'response:' key; a step is written - response: {type: text, "
            "content: ...} or - response: {type: tool_calls, tool_calls: [...]}",
        ),
        (
            "name: a\nturns:\n  - user_input: hi\n    steps:\n      - respons: {type: text, "
            "content: hi}\nexpects:\n  response_contains: [hi]\n",
            "5:9: turns[0].steps[0] has no 'response' key (did you mean 'response' for "
            "'respons'?); a step is written - response: {type: text, content: ...} or - "
            "response: {type: tool_calls, tool_calls: [...]}",
        ),
    ],
)
def test_weak_messages_now_say_what_is_right(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "case.yaml"
    path.write_text(text, "utf-8")
    document = load_document(path)
    errors = document if isinstance(document, list) else admit(document)
    assert isinstance(errors, list)
    assert [str(e).split("case.yaml:", 1)[1] for e in errors] == [message]


def test_a_null_in_json_is_not_doubled_either(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    path.write_text(
        '{"name": "a", "turns": [{"user_input": "hi", "steps": [{"response": {"type": "text", '
        '"content": "hi"}}]}], "expects": {"response_json": null, "exact_tool_calls": true}}',
        "utf-8",
    )
    document = load_document(path)
    assert not isinstance(document, list)
    errors = admit(document)
    assert isinstance(errors, list)
    text = " | ".join(e.message for e in errors)
    assert "expects.response_json must be an object, got null; write its value after" in text
    assert "expects.exact_tool_calls must be an integer, got boolean true" in text
    assert "null null" not in text


# --- the cache keeps the new kinds -------------------------------------------------------------


def test_the_cache_codec_round_trips_the_new_kinds() -> None:
    from evalrunner.fixture.cache import _decode, _encode
    from evalrunner.model import TextResponse, Turn

    expects = Expectations(
        tool_calls_match=ToolCallsMatch(
            (ExpectedCall("t", '{"a":1}', '{"type":"object"}', "x", False), ExpectedCall("u")),
            "any",
            "allow",
        ),
        response_json=ResponseJson('{"type":"object"}', (("/a", '""'),)),
    )
    case = Case("c", (Turn("hi", (TextResponse("{}"),)),), expects)
    decoded = _decode(json.loads(json.dumps(_encode(case))))
    assert decoded == case


# --- the docs example runs, and kills mutants ---------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "sequences-and-json.md"


def test_the_docs_example_passes_and_kills_the_mutants_it_should(tmp_path: Path) -> None:
    from evalrunner import run_suite
    from evalrunner.fixture.admit import admit_documents
    from evalrunner.fixture.load import discover, iter_documents
    from evalrunner.mutation.mutants import IN_PROCESS
    from evalrunner.mutation.runner import run_mutants

    text = DOCS.read_text("utf-8")
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert block.startswith("# evals/examples/two_cities_json.yaml\n")
    (tmp_path / "weather.yaml").write_text(block, "utf-8")
    report = run_suite(tmp_path)
    assert report.all_passed, report
    cases = admit_documents(iter_documents(discover(tmp_path))).cases
    outcome = run_mutants(cases, paths=(IN_PROCESS,), first_kill=True)
    killed = {o.mutant for o in outcome.outcomes if o.killed_by}
    # An extra dispatch (extras: forbid), a JSON reply wrapped in a fence, a wrong argument.
    assert {"dispatches-unscripted", "wraps-reply", "corrupts-arguments"} <= killed
    # Swapped calls pass under order: any, and fail the same expectations under in_order.
    assert "swaps-call-order" not in killed
    (tmp_path / "weather.yaml").write_text(block.replace("order: any", "order: in_order"), "utf-8")
    cases = admit_documents(iter_documents(discover(tmp_path))).cases
    assert cases == (), "in_order against the reversed entries is refused at admission"
    swapped = block.replace("order: any", "order: in_order").replace(
        '      - tool: echo\n        arguments: {message: "Rome: 18C"}\n', ""
    )
    swapped += '      - tool: echo\n        arguments: {message: "Rome: 18C"}\n'
    (tmp_path / "weather.yaml").write_text(swapped, "utf-8")
    cases = admit_documents(iter_documents(discover(tmp_path))).cases
    outcome = run_mutants(cases, paths=(IN_PROCESS,), first_kill=True)
    assert "swaps-call-order" in {o.mutant for o in outcome.outcomes if o.killed_by}


def test_convert_round_trips_the_structured_kinds_and_refuses_a_null_for_toml(
    tmp_path: Path,
) -> None:
    from evalrunner.fixture.load import parse_document
    from evalrunner.toolbox.convert import convert

    block = DOCS.read_text("utf-8").split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "w.yaml").write_text(block, "utf-8")
    source = load_document(tmp_path / "w.yaml")
    assert not isinstance(source, list)
    original = admit(source)
    assert isinstance(original, Case)
    for fmt in ("toml", "json"):
        done = convert(source, fmt)
        assert not isinstance(done, list)
        back = parse_document(done.text.encode(), fmt, tmp_path / f"w.{fmt}")
        assert not isinstance(back, list)
        assert admit(back) == original
    (tmp_path / "n.yaml").write_text(block.replace('"/note": ""', '"/note": null'), "utf-8")
    with_null = load_document(tmp_path / "n.yaml")
    assert not isinstance(with_null, list)
    refused = convert(with_null, "toml")
    assert isinstance(refused, list)
    assert [str(e) for e in refused] == [
        f"{tmp_path / 'n.yaml'}:{refused[0].line}:{refused[0].col}: "
        'expects.response_json.equals["/note"] is null, and TOML has no null; keep this fixture '
        "in JSON or YAML, or give a value other than null"
    ], refused


def test_a_reply_value_that_differs_only_in_unicode_normalization_says_so() -> None:
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    [(_, passed, detail)] = json_checks({"equals": {"/u": composed}}, json.dumps({"u": decomposed}))
    assert not passed
    assert (
        'they differ only in Unicode normalization: expected "caf\\u00e9", got '
        '"cafe\\u0301", and values are compared exactly'
    ) in detail, detail
    [(_, passed, detail)] = json_checks({"equals": {"/u": composed}}, '{"u": "cafe"}')
    assert "Unicode" not in detail


def test_a_schema_failure_names_a_key_with_a_slash_as_an_escaped_pointer() -> None:
    schema = {"properties": {"a/b": {"type": "integer"}}}
    [(_, passed, detail)] = json_checks({"schema": schema}, '{"a/b": "x"}')
    assert not passed
    assert 'at "/a~1b"' in detail, detail
