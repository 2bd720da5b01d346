"""Per-turn ``expects``: a turn's checks grade that turn alone (its final reply, its
dispatches, its model requests), are admitted by the same rules as the case's with positions
inside the turn, and are pointed at by the reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalrunner import SuiteReport, run_suite
from evalrunner.expectations import grade_case
from evalrunner.fixture.admit import admit
from evalrunner.fixture.cache import CACHE_DIR_NAME, AdmissionCache
from evalrunner.fixture.load import load_document
from evalrunner.model import (
    AdmissionError,
    Case,
    Expectations,
    Message,
    ModelRequest,
    RunRecord,
    ToolCallRecord,
    TurnEnd,
)
from evalrunner.replay import run_case
from evalrunner.report.github import github_annotations
from evalrunner.report.outcome import position_key

THREE_TURNS = """\
name: three-turns
turns:
  - user_input: Echo alpha.
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c1, name: echo, arguments: {message: alpha}}]
      - response: {type: text, content: Echoed alpha.}
  - user_input: Just say hi.
    steps:
      - response: {type: text, content: Hi!}
    expects:
      response_contains: [Hi]
      response_not_contains: [alpha]
      exact_tool_calls: 0
      tools_not_used: [echo]
  - user_input: Echo beta twice.
    steps:
      - response:
          type: tool_calls
          tool_calls:
            - {id: c2, name: echo, arguments: {message: beta}}
            - {id: c3, name: echo, arguments: {message: beta2}}
      - response: {type: text, content: Echoed beta and beta2.}
    expects:
      exact_tool_calls: 2
      tool_arguments_contain: [{tool: echo, needle: beta2, call_index: 1}]
      tool_results_contain: [{tool: echo, needle: beta, call_index: 0}]
expects:
  exact_tool_calls: 3
"""


def write(tmp_path: Path, text: str, name: str = "a.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def outcome(tmp_path: Path, text: str, name: str = "a.yaml") -> Case | list[AdmissionError]:
    document = load_document(write(tmp_path, text, name))
    assert not isinstance(document, list), document
    return admit(document)


def admitted(tmp_path: Path, text: str, name: str = "a.yaml") -> Case:
    case = outcome(tmp_path, text, name)
    assert isinstance(case, Case), [str(e) for e in case]
    return case


def refused(tmp_path: Path, text: str, name: str = "a.yaml") -> list[tuple[int, int, str]]:
    errors = outcome(tmp_path, text, name)
    assert isinstance(errors, list), "expected the case to be refused"
    return [(e.line or 0, e.col or 0, e.message) for e in errors]


# --- grading ------------------------------------------------------------------------------------


def test_each_turn_is_graded_on_its_own_reply_dispatches_and_requests(tmp_path: Path) -> None:
    case = admitted(tmp_path, THREE_TURNS)
    record = run_case(case)
    assert record.error is None
    results = grade_case(case, record)
    assert [(r.check, r.passed) for r in results] == [
        ("exact_tool_calls(3)", True),
        ('turns[1].response_contains("Hi")', True),
        ('turns[1].response_not_contains("alpha")', True),
        ('turns[1].tools_not_used("echo")', True),
        ("turns[1].exact_tool_calls(0)", True),
        ("turns[2].exact_tool_calls(2)", True),
        ('turns[2].tool_arguments_contain("echo"[1], "beta2")', True),
        ('turns[2].tool_results_contain("echo"[0], "beta")', True),
    ]


def test_a_turn_check_fails_where_the_case_check_would_pass(tmp_path: Path) -> None:
    # The case's final reply is "Echoed beta and beta2."; turn 0's reply does not say beta.
    text = THREE_TURNS.replace(
        "      - response: {type: text, content: Echoed alpha.}\n",
        "      - response: {type: text, content: Echoed alpha.}\n"
        "    expects:\n      response_contains: [beta]\n"
        "      tool_arguments_contain: [{tool: echo, needle: beta}]\n",
    )
    case = admitted(tmp_path, text)
    failed = [r for r in grade_case(case, run_case(case)) if not r.passed]
    assert [(r.check, r.detail) for r in failed] == [
        ('turns[0].response_contains("beta")', 'not found in response: "Echoed alpha."'),
        (
            'turns[0].tool_arguments_contain("echo", "beta")',
            r'arguments of "echo": ["{\"message\":\"alpha\"}"]',
        ),
    ]


def test_the_turn_view_slices_the_record() -> None:
    calls = tuple(ToolCallRecord("echo", "{}", f"r{i}", True) for i in range(3))
    requests = tuple(ModelRequest((Message("user", f"u{i}"),)) for i in range(4))
    record = RunRecord(
        final_response="last",
        tool_calls=calls,
        requests=requests,
        turn_ends=(TurnEnd("first", 2, 1), TurnEnd("last", 4, 3)),
    )
    second = record.turn(1)
    assert second.final_response == "last"
    assert second.tool_calls == calls[1:]
    assert second.requests == requests[2:]
    assert record.turn(0).tool_calls == calls[:1]
    assert record.turn(0).final_response == "first"
    # A turn that never ended reads as a run that did nothing.
    assert record.turn(5) == RunRecord.empty()


def test_a_case_without_per_turn_checks_keeps_no_turn_ends(tmp_path: Path) -> None:
    plain = admitted(
        tmp_path,
        "name: p\nturns:\n  - user_input: hi\n    steps:\n"
        "      - response: {type: text, content: ok}\nexpects:\n  response_contains: [ok]\n",
        "p.yaml",
    )
    assert run_case(plain).turn_ends == ()


# --- admission ----------------------------------------------------------------------------------

TURN = "  - user_input: hi\n    steps:\n      - response: {type: text, content: ok}\n"


def test_only_per_turn_checks_are_enough(tmp_path: Path) -> None:
    case = admitted(
        tmp_path, "name: c\nturns:\n" + TURN + "    expects:\n      response_contains: [ok]\n"
    )
    assert case.expects == Expectations()
    assert case.turns[0].expects == Expectations(response_contains=("ok",))


def test_a_case_with_no_checks_at_either_level_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path, "name: c\nturns:\n" + TURN) == [
        (
            1,
            1,
            "the case declares no checks; add expects (for the whole run) or expects in a "
            "turn, with at least one check, e.g. response_contains or exact_tool_calls",
        )
    ]


def test_an_empty_turn_expects_alone_is_refused_at_it(tmp_path: Path) -> None:
    assert refused(tmp_path, "name: c\nturns:\n" + TURN + "    expects: {}\n") == [
        (
            6,
            5,
            "turns[0].expects declares no checks; add at least one check, e.g. "
            "response_contains or exact_tool_calls",
        )
    ]


def test_an_empty_turn_expects_beside_case_checks_is_admitted(tmp_path: Path) -> None:
    text = "name: c\nturns:\n" + TURN + "    expects: {}\nexpects:\n  response_contains: [ok]\n"
    assert admitted(tmp_path, text).turns[0].expects == Expectations()


def test_falsifiability_is_judged_over_both_levels(tmp_path: Path) -> None:
    # Each level alone passes on a run that did nothing: refused, at the case's expects.
    text = (
        "name: c\nturns:\n" + TURN + "    expects:\n      tools_not_used: [rm]\n"
        "expects:\n  max_tool_calls: 3\n"
    )
    [(line, col, message)] = refused(tmp_path, text)
    assert (line, col) == (8, 1)
    assert message.startswith("every check passes on a run that did nothing")
    # A turn check that can fail makes the case falsifiable.
    text = (
        "name: c\nturns:\n" + TURN + "    expects:\n      response_contains: [ok]\n"
        "expects:\n  max_tool_calls: 3\n"
    )
    admitted(tmp_path, text)


def test_an_unfalsifiable_turn_only_case_is_refused_at_the_turn(tmp_path: Path) -> None:
    text = "name: c\nturns:\n" + TURN + "    expects:\n      tools_not_used: [rm]\n"
    [(line, col, message)] = refused(tmp_path, text)
    assert (line, col) == (6, 5)
    assert message.startswith("every check passes on a run that did nothing")


@pytest.mark.parametrize(
    ("expects", "spot", "message"),
    [
        (
            "      min_tool_calls: 3\n      max_tool_calls: 1\n",
            (7, 23),
            # Both checks named by their path in the turn, as every other rule names them.
            "turns[0].expects.min_tool_calls (3) is greater than turns[0].expects.max_tool_calls "
            "(1); no run can satisfy both",
        ),
        (
            "      response_matches: ['a*']\n",
            (7, 26),
            'turns[0].expects.response_matches[0] "a*" matches every reply',
        ),
        (
            "      tools_used: [echo]\n      tools_not_used: [echo]\n",
            (8, 24),
            'turns[0].expects.tools_not_used[0] "echo" is also in turns[0].expects.tools_used[0]',
        ),
        (
            "      tools_used: [echo]\n      exact_tool_calls: 0\n",
            (8, 25),
            "turns[0].expects.exact_tool_calls (0) is below the 1 tool call(s) the other checks "
            'need (1 to "echo" '
            "for turns[0].expects.tools_used[0])",
        ),
        (
            "      response_contans: [x]\n",
            (7, 7),
            "unknown key 'response_contans' in turns[0].expects (did you mean "
            "'response_contains'?)",
        ),
    ],
)
def test_turn_rules_are_refused_at_their_position_in_the_turn(
    tmp_path: Path, expects: str, spot: tuple[int, int], message: str
) -> None:
    text = "name: c\nturns:\n" + TURN + "    expects:\n" + expects
    text += "expects:\n  response_contains: [ok]\n"
    errors = refused(tmp_path, text)
    assert [(line, col) for line, col, _ in errors] == [spot]
    assert errors[0][2].startswith(message)


THREE_TURNS_DATA = {
    "name": "three-turns",
    "turns": [
        {
            "user_input": "Echo alpha.",
            "steps": [
                {
                    "response": {
                        "type": "tool_calls",
                        "tool_calls": [
                            {"id": "c1", "name": "echo", "arguments": {"message": "alpha"}}
                        ],
                    }
                },
                {"response": {"type": "text", "content": "Echoed alpha."}},
            ],
        },
        {
            "user_input": "Just say hi.",
            "steps": [{"response": {"type": "text", "content": "Hi!"}}],
            "expects": {
                "response_contains": ["Hi"],
                "response_not_contains": ["alpha"],
                "exact_tool_calls": 0,
                "tools_not_used": ["echo"],
            },
        },
        {
            "user_input": "Echo beta twice.",
            "steps": [
                {
                    "response": {
                        "type": "tool_calls",
                        "tool_calls": [
                            {"id": "c2", "name": "echo", "arguments": {"message": "beta"}},
                            {"id": "c3", "name": "echo", "arguments": {"message": "beta2"}},
                        ],
                    }
                },
                {"response": {"type": "text", "content": "Echoed beta and beta2."}},
            ],
            "expects": {
                "exact_tool_calls": 2,
                "tool_arguments_contain": [{"tool": "echo", "needle": "beta2", "call_index": 1}],
                "tool_results_contain": [{"tool": "echo", "needle": "beta", "call_index": 0}],
            },
        },
    ],
    "expects": {"exact_tool_calls": 3},
}


def test_the_same_case_admits_alike_in_every_format(tmp_path: Path) -> None:
    import tomli_w

    yaml_case = admitted(tmp_path, THREE_TURNS)
    json_case = admitted(tmp_path, json.dumps(THREE_TURNS_DATA), "a.json")
    toml_case = admitted(tmp_path, tomli_w.dumps(THREE_TURNS_DATA), "a.toml")
    assert yaml_case == json_case == toml_case
    assert toml_case.positions["turns[1].expects.tools_not_used"][0] > 1


# --- reports and the cache ------------------------------------------------------------------------


def test_position_keys_name_the_turn() -> None:
    assert position_key('tools_used("echo")') == "expects.tools_used"
    assert position_key('turns[2].tools_used("echo")') == "turns[2].expects.tools_used"


def test_reports_point_at_the_turns_expects(tmp_path: Path) -> None:
    suite = tmp_path / "evals"
    suite.mkdir()
    text = THREE_TURNS.replace(
        "      response_contains: [Hi]\n", "      response_contains: [Bye]\n"
    )
    write(suite, text)
    report = run_suite(suite)
    assert isinstance(report, SuiteReport)
    [case] = report.cases
    assert case.positions["turns[1].expects.response_contains"] == (13, 7)
    [line] = github_annotations(report)
    assert line.startswith("::error file=")
    assert ",line=13,col=7," in line
    assert 'turns[1].response_contains("Bye")' in line


def test_the_cache_round_trips_turn_checks(tmp_path: Path) -> None:
    case = admitted(tmp_path, THREE_TURNS)
    writer = AdmissionCache(tmp_path / CACHE_DIR_NAME)
    key = writer.key("a.yaml", b"x")
    writer.store(key, case)
    writer.save()
    back = AdmissionCache(tmp_path / CACHE_DIR_NAME).lookup(key)
    assert back == case
    assert isinstance(back, Case)
    assert back.positions["turns[2].expects.exact_tool_calls"] == (26, 7)


@pytest.mark.parametrize("target", ["toml", "json", "yaml"])
def test_convert_round_trips_turn_checks(tmp_path: Path, target: str) -> None:
    from evalrunner.toolbox.convert import Conversion, convert

    document = load_document(write(tmp_path, THREE_TURNS))
    assert not isinstance(document, list)
    converted = convert(document, target)  # type: ignore[arg-type]
    assert isinstance(converted, Conversion)
    assert converted.case == admitted(tmp_path, THREE_TURNS)
    third = converted.case.turns[2].expects
    assert third is not None and third.exact_tool_calls == 2


def test_json_and_junit_reports_name_the_turn_of_a_failed_check(tmp_path: Path) -> None:
    from evalrunner.report.json import render_json
    from evalrunner.report.junit import render_junit

    suite = tmp_path / "evals"
    suite.mkdir()
    write(
        suite,
        THREE_TURNS.replace(
            "exact_tool_calls: 2\n", "exact_tool_calls: 2\n      response_contains: [gamma]\n"
        ),
    )
    report = run_suite(suite)
    assert isinstance(report, SuiteReport)
    checks = json.loads(render_json(report))["cases"][0]["grades"]
    assert {"check": 'turns[2].response_contains("gamma")', "passed": False} in [
        {"check": c["check"], "passed": c["passed"]} for c in checks
    ]
    assert 'turns[2].response_contains("gamma"): not found in response' in render_junit(report)


# --- what no correct run of a turn can pass ------------------------------------------------------

TWO_TURNS = """\
name: c
turns:
  - user_input: Echo twice.
    steps:
      - response:
          type: tool_calls
          tool_calls:
            - {id: c1, name: echo, arguments: {message: a}}
            - {id: c2, name: echo, arguments: {message: b}}
      - response: {type: text, content: done}
    expects:
      FIRST
  - user_input: Say hi.
    steps:
      - response: {type: text, content: hi}
    expects:
      SECOND
expects:
  exact_tool_calls: 2
"""


def two_turns(
    first: str = "response_contains: [done]", second: str = "response_contains: [hi]"
) -> str:
    return TWO_TURNS.replace("FIRST", first).replace("SECOND", second)


def test_the_two_turn_case_is_admitted_as_written(tmp_path: Path) -> None:
    admitted(tmp_path, two_turns())


@pytest.mark.parametrize(
    ("turn", "check", "spot", "message"),
    [
        (
            2,
            "tools_used: [echo]",
            (17, 20),
            'turns[1].expects.tools_used[0] names "echo", but turn 2\'s script calls no tool; '
            "this check always fails",
        ),
        (
            2,
            "exact_tool_calls: 1",
            (17, 25),
            "turns[1].expects.exact_tool_calls (1) is above the 0 tool call(s) turn 2's script "
            "hands out (turn 2's script calls no tool); no correct run makes more",
        ),
        (
            2,
            "min_tool_calls: 1",
            (17, 23),
            "turns[1].expects.min_tool_calls (1) is above the 0 tool call(s) turn 2's script "
            "hands out",
        ),
        (
            2,
            "tool_calls_match: {extras: allow, calls: [{tool: echo}]}",
            (17, 56),
            'turns[1].expects.tool_calls_match.calls[0] expects a call to "echo", but turn 2\'s '
            "script calls no tool; no correct run can match it",
        ),
        (
            1,
            "exact_tool_calls: 3",
            (12, 25),
            "turns[0].expects.exact_tool_calls (3) is above the 2 tool call(s) turn 1's script "
            'hands out (turn 1\'s script calls ["echo", "echo"])',
        ),
        (
            1,
            "max_tool_calls: 1",
            (12, 23),
            "turns[0].expects.max_tool_calls (1) is below the 2 tool call(s) turn 1's script "
            "hands out",
        ),
        (
            1,
            "tool_calls_match: {calls: [{tool: echo}]}",
            (12, 7),
            "turns[0].expects.tool_calls_match has extras: forbid, so every dispatch must be "
            "matched, but 1 call(s) are expected and turn 1's script makes 2",
        ),
        (
            1,
            "tool_calls_match: {calls: [{tool: echo}, {tool: echo}, {tool: echo}]}",
            (12, 62),
            'turns[0].expects.tool_calls_match.calls[2] expects 3 or more calls to "echo", but '
            "turn 1's script makes 2",
        ),
        (
            1,
            "tool_calls_match: {calls: [{tool: echo, arguments: {message: z}}, {tool: echo}]}",
            (12, 58),
            "turns[0].expects.tool_calls_match.calls[0].arguments rejects every scripted call to "
            '"echo"',
        ),
        (
            1,
            "tool_calls_match: {calls: [{tool: echo, arguments: {message: b}}, "
            "{tool: echo, arguments: {message: a}}]}",
            (12, 7),
            "turns[0].expects.tool_calls_match cannot match: no assignment of the scripted calls "
            "in the scripted order matches every expected call",
        ),
    ],
)
def test_a_turn_check_no_correct_run_of_that_turn_can_pass_is_refused_at_it(
    tmp_path: Path, turn: int, check: str, spot: tuple[int, int], message: str
) -> None:
    text = two_turns(first=check) if turn == 1 else two_turns(second=check)
    errors = refused(tmp_path, text)
    assert [(line, col) for line, col, _ in errors] == [spot], errors
    assert errors[0][2].startswith(message), errors[0][2]


@pytest.mark.parametrize(
    "check",
    [
        "tools_used: [echo]",
        "min_tool_calls: 1",
        "tool_calls_match: {extras: allow, calls: [{tool: echo}]}",
    ],
)
def test_a_check_a_turn_cannot_pass_is_admitted_where_the_case_can(
    tmp_path: Path, check: str
) -> None:
    # Turn 2 calls nothing, but the case calls echo twice: the case's expects may ask for it.
    admitted(tmp_path, two_turns().replace("  exact_tool_calls: 2", "  " + check))


def test_a_turn_rule_names_the_turn_by_the_path_it_is_given(tmp_path: Path) -> None:
    # The rules word their message from the level's path: a turn's never says "expects." alone.
    [(_, _, message)] = refused(
        tmp_path, two_turns(first="tools_used: [echo]\n      tools_not_used: [echo]")
    )
    assert message.startswith(
        'turns[0].expects.tools_not_used[0] "echo" is also in turns[0].expects.tools_used[0]'
    )
