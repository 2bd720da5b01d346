"""Cases no correct agent can pass that admission let through (issue 26, "Admission refuses
what cannot pass"): checks of the case and of a turn that contradict each other, tool doubles
that make a scripted run fail for certain, and unsatisfiable checks hidden by other errors.
Each is refused at its position, with every other problem of the case, by ``evalrunner
validate`` (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_document
from evalrunner.model import AdmissionError, Case

runner = CliRunner()


def outcome(tmp_path: Path, text: str, name: str = "a.yaml") -> Case | list[AdmissionError]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    document = load_document(path)
    assert not isinstance(document, list), document
    return admit(document)


def admitted(tmp_path: Path, text: str) -> None:
    case = outcome(tmp_path, text)
    assert isinstance(case, Case), [str(e) for e in case]


def refused(tmp_path: Path, text: str) -> list[tuple[int, int, str]]:
    errors = outcome(tmp_path, text)
    assert isinstance(errors, list), "expected the case to be refused"
    return [(e.line or 0, e.col or 0, e.message) for e in errors]


# --- contradictions across levels ---------------------------------------------------------------

# Two scripted turns, the first calling echo; FIRST and SECOND are the turns' checks (line 9
# and line 14), CASE the case's (line 16).
SCRIPTED = """\
name: levels
turns:
  - user_input: Echo a.
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: c1, name: echo, arguments: {message: a}}]
      - response: {type: text, content: Echoed a.}
    expects: {FIRST}
  - user_input: Say hi.
    steps:
      - response: {type: text, content: hi}
    expects:
      response_contains: [SECOND]
expects:
  CASE
"""


def scripted(first: str = "response_contains: [a]", case: str = "", second: str = "hi") -> str:
    case = case or "response_contains: [hi]"
    return SCRIPTED.replace("FIRST", first).replace("CASE", case).replace("SECOND", second)


@pytest.mark.parametrize(
    ("first", "case", "spot", "message"),
    [
        (
            "tools_not_offered: [echo]",
            "tools_offered: [echo]",
            (9, 35),
            'turns[0].expects.tools_not_offered[0] "echo" is also in '
            "expects.tools_offered[0]; the case's check reads every model request, and turn 1 "
            "makes at least one, so no run can pass both",
        ),
        (
            "tools_offered: [echo]",
            "tools_not_offered: [echo]",
            (9, 31),
            'turns[0].expects.tools_offered[0] "echo" is also in expects.tools_not_offered[0];',
        ),
        (
            "tools_used: [echo]",
            "tools_not_used: [echo]",
            (9, 28),
            'turns[0].expects.tools_used[0] needs a call to "echo", which '
            "expects.tools_not_used[0] forbids in the whole case, turn 1 included; no run can "
            "pass both",
        ),
        (
            "tool_calls_match: {calls: [{tool: echo}]}",
            "tools_not_used: [web, echo]",
            (9, 49),
            'turns[0].expects.tool_calls_match.calls[0] needs a call to "echo", which '
            "expects.tools_not_used[1] forbids",
        ),
        (
            "all_tools_succeeded: false",
            "all_tools_succeeded: true",
            (9, 36),
            "turns[0].expects.all_tools_succeeded is false, so turn 1 needs a failed call, but "
            "expects.all_tools_succeeded: true forbids one in the whole case",
        ),
    ],
)
def test_a_turn_check_the_case_check_contradicts_is_refused_at_the_turn(
    tmp_path: Path, first: str, case: str, spot: tuple[int, int], message: str
) -> None:
    found = refused(tmp_path, scripted(first, case))
    assert [(line, col) for line, col, _ in found] == [spot], found
    assert found[0][2].startswith(message), found[0][2]


def test_offered_checks_of_two_different_turns_do_not_contradict(tmp_path: Path) -> None:
    # Each turn's check reads that turn's requests alone: an agent may offer echo in one turn
    # and not in the other.
    text = scripted("tools_offered: [echo]").replace(
        "      response_contains: [hi]\n", "      tools_not_offered: [echo]\n"
    )
    admitted(tmp_path, text)


def test_a_reply_check_the_last_turn_contradicts_is_refused_at_the_turn(tmp_path: Path) -> None:
    # The case's reply is its last turn's: "hi" cannot be required in one and forbidden in the
    # other, whichever level forbids it.
    found = refused(tmp_path, scripted(case="response_not_contains: [hi]", second="oh hi"))
    assert found == [
        (
            14,
            27,
            'turns[1].expects.response_contains[0] "oh hi" contains '
            "expects.response_not_contains[0] \"hi\"; the case's check reads the last turn's "
            'reply; a reply that contains "oh hi" always contains "hi", so no reply can pass '
            "both; remove or change one of them",
        )
    ]
    text = scripted(case="response_contains: [oh hi]").replace(
        "      response_contains: [hi]\n", "      response_not_contains: [hi]\n"
    )
    found = refused(tmp_path, text)
    assert [(line, col) for line, col, _ in found] == [(14, 31)], found
    assert found[0][2].startswith('turns[1].expects.response_not_contains[0] "hi" occurs inside ')


def test_a_reply_check_of_an_earlier_turn_does_not_contradict_the_case(tmp_path: Path) -> None:
    admitted(tmp_path, scripted("response_not_contains: [hi]", "response_contains: [hi]"))


# A live case (no steps): two turns, each with its own checks; the case's on line 10.
LIVE = """\
name: live
turns:
  - user_input: Echo a.
    expects: {FIRST}
  - user_input: Echo b.
    expects: {SECOND}
  - user_input: Thanks.
    expects: {THIRD}
expects:
  CASE
"""


def live(case: str, first: str, second: str, third: str = "response_contains: [ok]") -> str:
    return (
        LIVE.replace("FIRST", first)
        .replace("SECOND", second)
        .replace("THIRD", third)
        .replace("CASE", case)
    )


@pytest.mark.parametrize(
    ("case", "first", "second", "third", "spot", "message"),
    [
        (
            "exact_tool_calls: 1",
            "exact_tool_calls: 1",
            "exact_tool_calls: 1",
            "exact_tool_calls: 0",
            (10, 21),
            "expects.exact_tool_calls (1) is below the 2 tool call(s) the turns' checks need "
            "together (1 for turns[0].expects; 1 for turns[1].expects); the case's count is "
            "the sum of its turns', so no run can pass them all; raise it to 2",
        ),
        (
            "max_tool_calls: 1",
            "min_tool_calls: 1",
            "tools_used: [echo]",
            "response_contains: [ok]",
            (10, 19),
            "expects.max_tool_calls (1) is below the 2 tool call(s) the turns' checks need",
        ),
        (
            "min_tool_calls: 4",
            "max_tool_calls: 1",
            "exact_tool_calls: 2",
            "max_tool_calls: 0",
            (10, 19),
            "expects.min_tool_calls (4) is above the 3 tool call(s) the turns' checks allow "
            "together (1 for turns[0].expects; 2 for turns[1].expects; 0 for turns[2].expects)",
        ),
        (
            "exact_tool_calls: 3",
            "max_tool_calls: 1",
            "max_tool_calls: 1",
            "exact_tool_calls: 0",
            (10, 21),
            "expects.exact_tool_calls (3) is above the 2 tool call(s) the turns' checks allow",
        ),
    ],
)
def test_a_live_case_count_its_turns_counts_cannot_sum_to_is_refused(
    tmp_path: Path,
    case: str,
    first: str,
    second: str,
    third: str,
    spot: tuple[int, int],
    message: str,
) -> None:
    found = refused(tmp_path, live(case, first, second, third))
    assert [(line, col) for line, col, _ in found] == [spot], found
    assert found[0][2].startswith(message), found[0][2]


@pytest.mark.parametrize(
    ("case", "first", "second", "third"),
    [
        # The sum can be met: 1 + 1 + 0.
        ("exact_tool_calls: 2", "exact_tool_calls: 1", "min_tool_calls: 1", "max_tool_calls: 0"),
        # Turn 3 has no cap, so it may make the calls the case asks for.
        ("min_tool_calls: 4", "max_tool_calls: 1", "max_tool_calls: 1", "response_contains: [x]"),
        ("max_tool_calls: 2", "min_tool_calls: 1", "tools_used: [echo]", "response_contains: [x]"),
    ],
)
def test_a_live_case_count_its_turns_can_sum_to_is_admitted(
    tmp_path: Path, case: str, first: str, second: str, third: str
) -> None:
    admitted(tmp_path, live(case, first, second, third))


def test_a_live_turn_that_must_call_a_tool_asks_the_model_so_offered_checks_contradict(
    tmp_path: Path,
) -> None:
    # A call comes from a model answer: a live turn whose checks need one asks the model, so
    # the case's tools_offered and that turn's tools_not_offered cannot both pass.
    text = live("tools_offered: [echo]", "{exact_tool_calls: 1, tools_not_offered: [echo]}", "{}")
    text = text.replace("expects: {{", "expects: {").replace("}}", "}")
    found = refused(tmp_path, text)
    assert any(m.startswith("turns[0].expects.tools_not_offered[0] ") for *_, m in found)
    # A live turn that need not call anything might answer without asking: no contradiction.
    quiet = live("tools_offered: [echo]", "{tools_not_offered: [echo]}", "{}")
    admitted(tmp_path, quiet.replace("expects: {{", "expects: {").replace("}}", "}"))


def test_a_scripted_count_contradiction_is_reported_once_against_the_script(
    tmp_path: Path,
) -> None:
    # In a scripted case each level is held to the script, which already says what is wrong.
    found = refused(tmp_path, scripted("exact_tool_calls: 1", "exact_tool_calls: 2"))
    assert [(line, col) for line, col, _ in found] == [(16, 21)], found
    assert found[0][2].startswith(
        "expects.exact_tool_calls (2) is above the 1 tool call(s) the script"
    )


# --- tool doubles that fail the run for certain -------------------------------------------------

# get_weather answers Paris only; the script calls it for CITY. CHECK is the turn's expects
# (line 14), the case's expects is on line 16.
DOUBLES = """\
name: doubles
tools:
  - name: get_weather
    results:
      - {when: {city: Paris}, returns: "Paris: 12C"}
      - RULE
turns:
  - user_input: Weather?
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: w1, name: get_weather, arguments: ARGS}]
      - response: {type: text, content: done}
    expects: {CHECK}
expects:
  response_contains: [done]
"""


def doubles(
    args: str = "{city: Rome}",
    rule: str = "{when: {city: Paris, unit: F}, returns: x}",
    check: str = "response_contains: [done]",
) -> str:
    return DOUBLES.replace("ARGS", args).replace("RULE", rule).replace("CHECK", check)


def test_a_scripted_call_no_rule_of_its_double_answers_is_refused_at_the_call(
    tmp_path: Path,
) -> None:
    found = refused(tmp_path, doubles())
    assert [(line, col) for line, col, _ in found] == [(12, 24)], found
    assert found[0][2] == (
        'turns[0].steps[0].response.tool_calls[0], the scripted call "w1" to "get_weather" '
        '(arguments {"city":"Rome"}), has no result from tool double "get_weather": every rule '
        "of its results has a when, and none of them holds for these arguments, so the run "
        "always stops with an error here; add a rule whose when these arguments hold, or a "
        "last rule without when"
    )


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        ("{city: Paris}", "{when: {city: Rome}, returns: x}"),
        ("{city: Rome}", "{returns: x}"),  # no when: it answers every call
        ("{city: Rome}", "{error: unknown city}"),
        # JSON values, as the run compares them: 1.0 is 1, and extra keys are allowed.
        ("{city: Rome, n: 1.0}", "{when: {n: 1}, returns: x}"),
        ("{city: Rome, at: {lat: 1, lon: 2}}", "{when: {at: {lat: 1}}, returns: x}"),
    ],
)
def test_a_scripted_call_its_double_answers_is_admitted(
    tmp_path: Path, args: str, rule: str
) -> None:
    admitted(tmp_path, doubles(args, rule))


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        # A boolean is never a number, and arrays compare whole, as the run compares them.
        ("{city: Rome, flag: 1}", "{when: {flag: true}, returns: x}"),
        ("{city: Rome, tags: [a, b]}", "{when: {tags: [a]}, returns: x}"),
        ("{city: Rome, n: '1'}", "{when: {n: 1}, returns: x}"),
    ],
)
def test_when_is_held_to_the_runs_json_comparison(tmp_path: Path, args: str, rule: str) -> None:
    found = refused(tmp_path, doubles(args, rule))
    assert [(line, col) for line, col, _ in found] == [(12, 24)], found
    assert 'has no result from tool double "get_weather"' in found[0][2]


FAILING = "{error: unknown city}"


@pytest.mark.parametrize(
    ("check", "spot", "message"),
    [
        (
            "tool_calls_match: {calls: [{tool: get_weather, succeeded: true}]}",
            (14, 73),
            "turns[0].expects.tool_calls_match.calls[0].succeeded is true, but tool double "
            '"get_weather" answers scripted call "w1" to '
            '"get_weather" at turns[0].steps[0].response.tool_calls[0] with a failure (Error: '
            "unknown city); no correct run can match it; expect succeeded: false, or give the "
            "double a returns rule these arguments hold",
        ),
        (
            "all_tools_succeeded: true",
            (14, 36),
            "turns[0].expects.all_tools_succeeded is true, but tool double "
            '"get_weather" answers scripted call '
            '"w1" to "get_weather" at turns[0].steps[0].response.tool_calls[0] with a failure '
            "(Error: unknown city); every correct run has that failed call",
        ),
    ],
)
def test_a_check_that_a_call_succeeds_is_refused_when_its_double_fails_it(
    tmp_path: Path, check: str, spot: tuple[int, int], message: str
) -> None:
    found = refused(tmp_path, doubles(rule=FAILING, check=check))
    assert [(line, col) for line, col, _ in found] == [spot], found
    assert found[0][2].startswith(message), found[0][2]


def test_the_cases_all_tools_succeeded_is_refused_for_a_call_in_any_turn(
    tmp_path: Path,
) -> None:
    text = doubles(rule=FAILING).replace(
        "  response_contains: [done]\n", "  all_tools_succeeded: true\n"
    )
    [(line, col, message)] = refused(tmp_path, text)
    assert (line, col) == (16, 24)
    assert message.startswith('expects.all_tools_succeeded is true, but tool double "get_weather"')


def test_arguments_the_doubles_parameters_refuse_fail_the_call_for_certain(
    tmp_path: Path,
) -> None:
    text = doubles(rule="{returns: x}", check="all_tools_succeeded: true").replace(
        "    results:\n", "    parameters: {type: object, required: [day]}\n    results:\n"
    )
    [(line, col, message)] = refused(tmp_path, text)
    assert (line, col) == (15, 36)
    assert "with a failure (Error: Invalid arguments for get_weather:" in message


@pytest.mark.parametrize(
    "check",
    [
        "tool_calls_match: {calls: [{tool: get_weather, succeeded: false}]}",
        "all_tools_succeeded: false",
        "tool_calls_match: {calls: [{tool: get_weather}]}",
    ],
)
def test_a_check_a_failing_double_can_pass_is_admitted(tmp_path: Path, check: str) -> None:
    admitted(tmp_path, doubles(rule=FAILING, check=check))


def test_the_assignment_counts_a_call_its_double_fails(tmp_path: Path) -> None:
    # Rome fails and comes first: in order, with no extras, the entry that needs success can
    # only be matched by it.
    text = doubles(rule=FAILING, check="CHECK").replace(
        "arguments: {city: Rome}}]",
        "arguments: {city: Rome}}, {id: w2, name: get_weather, arguments: {city: Paris}}]",
    )
    wanted = (
        "tool_calls_match: {calls: [{tool: get_weather, succeeded: true}, {tool: get_weather}]}"
    )
    [(line, col, message)] = refused(tmp_path, doubles_check(text, wanted))
    assert (line, col) == (14, 15)
    assert message.startswith(
        "turns[0].expects.tool_calls_match cannot match: no assignment of the scripted calls "
        "in the scripted order"
    )
    admitted(tmp_path, doubles_check(text, wanted.replace("{calls:", "{order: any, calls:")))


def doubles_check(text: str, check: str) -> str:
    return text.replace("{CHECK}", "{" + check + "}")


# --- every problem at once ----------------------------------------------------------------------


def test_an_unscripted_check_is_reported_beside_a_blank_needle(tmp_path: Path) -> None:
    text = (
        "name: both\nturns:\n  - user_input: hi\n    steps:\n"
        "      - response: {type: text, content: ok}\n"
        "expects:\n  response_contains: ['  ']\n  tools_used: [web]\n"
    )
    found = refused(tmp_path, text)
    assert [(line, col) for line, col, _ in found] == [(7, 23), (8, 16)], found
    assert found[0][2].startswith("expects.response_contains[0] must not be blank")
    assert found[1][2].startswith('expects.tools_used[0] names "web", but the script calls no tool')


def test_an_unscripted_turn_check_is_reported_beside_another_turns_error(
    tmp_path: Path,
) -> None:
    text = scripted("tools_used: [web]").replace("user_input: Say hi.", "user_input: ''")
    found = refused(tmp_path, text)
    assert [(line, col) for line, col, _ in found] == [(9, 28), (10, 17)], found
    assert found[0][2].startswith(
        'turns[0].expects.tools_used[0] names "web", but turn 1\'s script calls ["echo"]'
    )


def test_a_double_that_answers_no_call_is_reported_beside_other_errors(
    tmp_path: Path,
) -> None:
    text = doubles(check="response_contains: ['  ']")
    found = refused(tmp_path, text)
    assert [(line, col) for line, col, _ in found] == [(12, 24), (14, 35)], found


def test_validate_reports_every_problem_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        doubles(check="tools_used: [web]").replace(
            "  response_contains: [done]\n", "  tools_offered: [get_weather]\n"
        ),
        encoding="utf-8",
    )
    result = runner.invoke(app, ["validate", str(tmp_path / "a.yaml")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith(str(tmp_path))]
    assert [line.split(": ", 1)[0].rsplit(":", 2)[1:] for line in lines] == [
        ["12", "24"],
        ["14", "28"],
    ], result.output


@pytest.mark.parametrize("turns", ["turns: 5\n", "turns: []\n", "", "turns: [5]\n"])
def test_the_rules_across_levels_need_no_well_formed_turns(tmp_path: Path, turns: str) -> None:
    # The case's checks are judged alone: the turns' own errors say what is wrong with them.
    found = refused(tmp_path, "name: c\n" + turns + "expects:\n  tools_not_used: [x]\n")
    assert found and all("Traceback" not in message for _, _, message in found)


# --- one pass, each mistake once -----------------------------------------------------------------

BESIDE = ["exact_tool_calls: 4", "tools_used: [web]"]


@pytest.mark.parametrize("level", ["turn", "case"])
@pytest.mark.parametrize(
    ("malformed", "why"),
    [
        ("response_json: {schema: {type: objekt}}", 'got "objekt"'),
        ("response_matches: ['(?<=a)']", "is not valid RE2"),
        ("max_tool_calls: many", "must be an integer"),
    ],
)
def test_a_malformed_check_does_not_hide_the_unsatisfiable_checks_beside_it(
    tmp_path: Path, level: str, malformed: str, why: str
) -> None:
    # The turn calls echo once; beside the malformed check, two that no correct run can pass.
    checks = [malformed, *BESIDE]
    if level == "turn":
        text = scripted(first=", ".join(checks))
    else:
        text = scripted(case="\n  ".join(checks))
    messages = [message for *_, message in refused(tmp_path, text)]
    assert any(why in m for m in messages), messages
    assert any("exact_tool_calls (4) is above the 1 tool call(s)" in m for m in messages), messages
    assert any('tools_used[0] names "web", but' in m for m in messages), messages


@pytest.mark.parametrize(
    ("first", "case", "second", "spot"),
    [
        # Checks contradicting each other are refused once, among themselves; the one they
        # contradict is not judged again against the script (one call) or the other levels.
        ("response_contains: [a]", "exact_tool_calls: 3\n  max_tool_calls: 0", "hi", (16, 21)),
        ("response_contains: [a]", "min_tool_calls: 3\n  max_tool_calls: 0", "hi", (16, 19)),
        ("response_contains: [a]", "tools_used: [web]\n  tools_not_used: [web]", "hi", (17, 20)),
        ("response_contains: [a]", "tools_used: [echo, web]\n  max_tool_calls: 1", "hi", (17, 19)),
        ("tools_used: [echo], tools_not_used: [echo]", "tools_not_used: [echo]", "hi", (9, 52)),
        (
            "response_contains: [a]",
            "response_not_contains: [hi]",
            "hi]\n      response_not_contains: [hi",
            (15, 31),
        ),
    ],
)
def test_a_contradiction_is_refused_once(
    tmp_path: Path, first: str, case: str, second: str, spot: tuple[int, int]
) -> None:
    found = refused(tmp_path, scripted(first, case, second))
    assert [(line, col) for line, col, _ in found] == [spot], found
