"""Boundary mutation: the gated fixtures must notice when what crossed the tool boundary is not
what the agent actually received or returned.

Each test takes the real run record of a fixture from ``evals/regression``, corrupts it the way
a buggy agent or dispatcher would (silent repair or re-serialization of argument text, a
rewritten result, a dropped dispatch, a reordered batch) with :func:`dataclasses.replace`, and
asserts that the specific check guarding that property now fails.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from evalrunner.expectations import grade
from evalrunner.fixture.admit import admit_suite
from evalrunner.fixture.load import load_suite
from evalrunner.model import Case, RunRecord, ToolCallRecord
from evalrunner.replay import run_case

REGRESSION = Path(__file__).resolve().parent.parent / "evals" / "regression"


def _load() -> dict[str, Case]:
    admission = admit_suite(load_suite(REGRESSION))
    assert admission.ok, [str(e) for e in admission.errors]
    return {case.source.name: case for case in admission.cases}


CASES = _load()


def real_run(file_name: str) -> tuple[Case, RunRecord]:
    case = CASES[file_name]
    record = run_case(case)
    assert record.error is None
    assert failing(case, record) == {}, "the unmutated run must pass"
    return case, record


def failing(case: Case, record: RunRecord) -> dict[str, str]:
    """Failing check label → detail."""
    return {r.check: r.detail for r in grade(case.expects, record) if not r.passed}


def with_calls(record: RunRecord, calls: list[ToolCallRecord]) -> RunRecord:
    return dataclasses.replace(record, tool_calls=tuple(calls))


def mutate_call(
    record: RunRecord, index: int, change: Callable[[ToolCallRecord], ToolCallRecord]
) -> RunRecord:
    calls = list(record.tool_calls)
    calls[index] = change(calls[index])
    return with_calls(record, calls)


# --- argument text -----------------------------------------------------------------------------


def test_corrupted_argument_text_fails_the_arguments_check() -> None:
    case, record = real_run("echo_token_roundtrip.yaml")
    mutated = mutate_call(
        record,
        0,
        lambda c: dataclasses.replace(c, arguments=c.arguments.replace("token_7f3a", "token_7f3b")),
    )
    assert list(failing(case, mutated)) == ['tool_arguments_contain("echo", "token_7f3a")']
    assert "token_7f3b" in failing(case, mutated)['tool_arguments_contain("echo", "token_7f3a")']


def test_escaped_non_ascii_arguments_fail_the_arguments_check() -> None:
    # A dispatcher that re-serializes with \u escapes changes the text the tool received.
    case, record = real_run("unicode_argument_roundtrip.yaml")

    def escape(call: ToolCallRecord) -> ToolCallRecord:
        reserialized = json.dumps(json.loads(call.arguments), ensure_ascii=True)
        return dataclasses.replace(call, arguments=reserialized)

    mutated = mutate_call(record, 0, escape)
    assert list(failing(case, mutated)) == [
        'tool_arguments_contain("echo", "Grüße aus Zürich — 東京 ✓ 🚀")'
    ]


def test_reserialized_string_arguments_fail_the_arguments_check() -> None:
    # String arguments must reach the agent verbatim, odd spacing included.
    case, record = real_run("string_arguments_passed_verbatim.yaml")

    def compact(call: ToolCallRecord) -> ToolCallRecord:
        text = json.dumps(json.loads(call.arguments), separators=(",", ":"))
        return dataclasses.replace(call, arguments=text)

    mutated = mutate_call(record, 0, compact)
    assert list(failing(case, mutated)) == [
        'tool_arguments_contain("echo", "{ \\"message\\" : \\"spaced_9c\\" }")'
    ]


def test_unsorted_object_arguments_fail_the_arguments_check() -> None:
    case, record = real_run("object_arguments_compact_sorted.json")

    def unsorted(call: ToolCallRecord) -> ToolCallRecord:
        data = json.loads(call.arguments)
        return dataclasses.replace(call, arguments=json.dumps(dict(reversed(data.items()))))

    mutated = mutate_call(record, 0, unsorted)
    assert list(failing(case, mutated)) == [
        'tool_arguments_contain("echo", '
        '"{\\"channel\\":\\"ops\\",\\"dry_run\\":false,\\"message\\":\\"deploy_ok_31\\",'
        '\\"priority\\":2}")'
    ]


def test_silently_repaired_malformed_arguments_fail() -> None:
    # A dispatcher that "fixes" truncated JSON and runs the tool anyway.
    case, record = real_run("malformed_arguments_rejected.toml")
    repaired = mutate_call(
        record,
        0,
        lambda c: dataclasses.replace(
            c, arguments='{"message": "unterminated"}', result="unterminated", success=True
        ),
    )
    assert set(failing(case, repaired)) == {
        "all_tools_succeeded(false)",
        'tool_results_contain("echo"[0], "Invalid arguments for echo")',
    }
    # A repair that dispatches with an empty object also loses the scripted text.
    emptied = mutate_call(record, 0, lambda c: dataclasses.replace(c, arguments="{}"))
    assert list(failing(case, emptied)) == [
        'tool_arguments_contain("echo"[0], "{\\"message\\": \\"unterminated")'
    ]


def test_misnamed_argument_picked_up_fails() -> None:
    # A tool that guesses the message from the wrong key.
    case, record = real_run("missing_message_argument.yaml")
    mutated = mutate_call(record, 0, lambda c: dataclasses.replace(c, result="hello_user_1"))
    assert list(failing(case, mutated)) == ['tool_results_contain("echo"[0], "(empty)")']


# --- result text -------------------------------------------------------------------------------


def test_corrupted_result_text_fails_the_results_check() -> None:
    case, record = real_run("echo_token_roundtrip.yaml")
    mutated = mutate_call(
        record, 0, lambda c: dataclasses.replace(c, result=c.result.replace("7f3a", "7f3"))
    )
    assert list(failing(case, mutated)) == ['tool_results_contain("echo"[0], "token_7f3a")']
    assert '"token_7f3"' in failing(case, mutated)['tool_results_contain("echo"[0], "token_7f3a")']


def test_mis_decoded_result_fails_the_results_check() -> None:
    case, record = real_run("unicode_argument_roundtrip.yaml")
    mojibake = record.tool_calls[0].result.encode("utf-8").decode("latin-1")
    mutated = mutate_call(record, 0, lambda c: dataclasses.replace(c, result=mojibake))
    assert list(failing(case, mutated)) == [
        'tool_results_contain("echo"[0], "Grüße aus Zürich — 東京 ✓ 🚀")'
    ]


def test_blank_result_instead_of_no_output_fails() -> None:
    case, record = real_run("empty_message_reports_no_output.yaml")
    mutated = mutate_call(record, 0, lambda c: dataclasses.replace(c, result=""))
    assert list(failing(case, mutated)) == ['tool_results_contain("echo"[0], "(no output)")']


def test_failure_text_paired_with_the_wrong_call_fails() -> None:
    # The echo after an unknown tool is shown the unknown tool's failure text.
    case, record = real_run("failure_does_not_abort_batch.json")
    wrong = record.tool_calls[0].result
    mutated = mutate_call(record, 1, lambda c: dataclasses.replace(c, result=wrong))
    assert list(failing(case, mutated)) == ['tool_results_contain("echo"[0], "after_failure_88")']


# --- dropped dispatches ------------------------------------------------------------------------


def test_dropped_dispatch_fails_exact_tool_calls() -> None:
    case, record = real_run("several_tool_calls_one_response.json")
    calls = list(record.tool_calls)
    del calls[1]
    result = failing(case, with_calls(record, calls))
    assert result["exact_tool_calls(3)"] == '2 tool call(s): ["echo", "echo"]'


def test_dropped_first_turn_dispatch_fails_exact_tool_calls() -> None:
    case, record = real_run("multi_turn_tool_loop.toml")
    result = failing(case, with_calls(record, list(record.tool_calls[1:])))
    assert result["exact_tool_calls(2)"] == '1 tool call(s): ["echo"]'


def test_dropped_unknown_tool_dispatch_fails() -> None:
    # An agent that silently skips unknown tools.
    case, record = real_run("unknown_tool_reported_as_failed.json")
    result = failing(case, with_calls(record, []))
    assert result["exact_tool_calls(1)"] == "0 tool call(s): []"
    assert 'tools_used("shell_exec")' in result
    assert "all_tools_succeeded(false)" in result


def test_invented_dispatch_fails_the_refusal_case() -> None:
    case, record = real_run("forbidden_tool_not_used.json")
    invented = ToolCallRecord("shell_exec", '{"command":"rm -rf tmp"}', "ok", True, "x1")
    result = failing(case, with_calls(record, [invented]))
    assert result == {
        'tools_not_used("shell_exec")': "unexpectedly called 1 time(s)",
        "max_tool_calls(0)": '1 tool call(s): ["shell_exec"]',
    }


# --- reordered dispatches ----------------------------------------------------------------------


def test_swapped_calls_fail_call_index_checks() -> None:
    case, record = real_run("several_tool_calls_one_response.json")
    first, second, third = record.tool_calls
    result = failing(case, with_calls(record, [second, first, third]))
    assert list(result) == [
        'tool_results_contain("echo"[0], "svc_alpha")',
        'tool_results_contain("echo"[1], "svc_beta")',
        'tool_calls_match(["echo", "echo", "echo"], order: in_order, extras: forbid)',
    ]
    assert "svc_beta" in result['tool_results_contain("echo"[0], "svc_alpha")']


def test_swapped_turns_fail_call_index_checks() -> None:
    case, record = real_run("multi_turn_tool_loop.toml")
    first, second = record.tool_calls
    assert list(failing(case, with_calls(record, [second, first]))) == [
        'tool_arguments_contain("echo"[0], "ticket_a41")',
        'tool_arguments_contain("echo"[1], "ticket_b52")',
        'tool_results_contain("echo"[0], "ticket_a41")',
        'tool_results_contain("echo"[1], "ticket_b52")',
    ]


def test_results_swapped_between_calls_fail() -> None:
    # Calls in the right order, results paired with the wrong call.
    case, record = real_run("chained_tool_calls_one_turn.toml")
    first, second = record.tool_calls
    mutated = with_calls(
        record,
        [
            dataclasses.replace(first, result=second.result),
            dataclasses.replace(second, result=first.result),
        ],
    )
    assert list(failing(case, mutated)) == [
        'tool_results_contain("echo"[0], "build_label=rc_204")',
        'tool_results_contain("echo"[1], "release note drafted for rc_204")',
    ]


# --- every gated fixture guards its boundary claims --------------------------------------------


def _declaring(kind: str) -> list[str]:
    return sorted(name for name, case in CASES.items() if getattr(case.expects, kind))


@pytest.mark.parametrize("file_name", _declaring("tool_arguments_contain"))
def test_any_argument_rewrite_is_caught(file_name: str) -> None:
    case, record = real_run(file_name)
    mutated = with_calls(
        record, [dataclasses.replace(c, arguments="{}") for c in record.tool_calls]
    )
    result = failing(case, mutated)
    assert any(check.startswith("tool_arguments_contain(") for check in result)


@pytest.mark.parametrize("file_name", _declaring("tool_results_contain"))
def test_any_result_rewrite_is_caught(file_name: str) -> None:
    case, record = real_run(file_name)
    mutated = with_calls(
        record, [dataclasses.replace(c, result="<lost>") for c in record.tool_calls]
    )
    result = failing(case, mutated)
    assert any(check.startswith("tool_results_contain(") for check in result)


def _drop_params() -> list[tuple[str, int]]:
    params: list[tuple[str, int]] = []
    for name in _declaring("exact_tool_calls"):
        case = CASES[name]
        count = sum(len(getattr(r, "tool_calls", ())) for t in case.turns for r in t.responses)
        params.extend((name, i) for i in range(count))
    return params


@pytest.mark.parametrize(("file_name", "index"), _drop_params())
def test_any_dropped_dispatch_is_caught(file_name: str, index: int) -> None:
    case, record = real_run(file_name)
    calls = list(record.tool_calls)
    del calls[index]
    result = failing(case, with_calls(record, calls))
    assert f"exact_tool_calls({case.expects.exact_tool_calls})" in result


def _reorder_params() -> list[str]:
    names = []
    for name, case in CASES.items():
        needles = (case.expects.tool_arguments_contain or ()) + (
            case.expects.tool_results_contain or ()
        )
        indexed = {n.tool for n in needles if n.call_index is not None}
        record = run_case(case)
        if any(record.tools_called.count(tool) >= 2 for tool in indexed):
            names.append(name)
    return sorted(names)


REORDERED = _reorder_params()


def test_reorder_coverage() -> None:
    assert len(REORDERED) >= 4


@pytest.mark.parametrize("file_name", REORDERED)
def test_any_reordering_is_caught_by_call_index(file_name: str) -> None:
    case, record = real_run(file_name)
    result = failing(case, with_calls(record, list(reversed(record.tool_calls))))
    assert result
    assert all("[" in check.split(",")[0] for check in result), result


# --- a forbidden tool the agent never offered ---------------------------------------------------

SENDS_EMAIL = """\
name: sends-email
turns:
  - user_input: Email the report.
    steps:
      - response:
          type: tool_calls
          tool_calls: [{id: call_1, name: send_email, arguments: {to: a@example.com}}]
      - response: {type: text, content: Sent.}
expects:
  response_contains: [Sent]
  tools_not_used: [FORBIDDEN]
"""


class SendEmail:
    name = "send_email"
    description = "Send an email."
    parameters: dict[str, object] = {"type": "object"}  # noqa: RUF012

    def call(self, arguments: dict[str, object]) -> str:
        return "sent"


def graded_email_case(tmp_path: Path, forbidden: str) -> dict[str, str]:
    from evalrunner.wire.serve import load_case

    fixture = tmp_path / "case.yaml"
    fixture.write_text(SENDS_EMAIL.replace("FORBIDDEN", forbidden), encoding="utf-8")
    case = load_case(fixture)
    assert isinstance(case, Case), case
    record = run_case(case, tools={"send_email": SendEmail()})
    assert record.error is None, record.error
    return {r.check: r.detail for r in grade(case.expects, record) if r.passed is False} | {
        f"passed {r.check}": r.detail for r in grade(case.expects, record) if r.passed
    }


def test_a_forbidden_tool_misspelt_next_to_an_offered_one_fails_with_a_suggestion(
    tmp_path: Path,
) -> None:
    results = graded_email_case(tmp_path, "send_emial")
    detail = results['tools_not_used("send_emial")']
    assert "did you mean `send_email`?" in detail, detail
    assert "this check cannot fail" in detail


def test_a_forbidden_tool_the_agent_does_not_have_passes_with_a_note(tmp_path: Path) -> None:
    results = graded_email_case(tmp_path, "shell_exec")
    detail = results['passed tools_not_used("shell_exec")']
    assert detail.startswith('note: no model request offered "shell_exec"'), detail
    assert "the agent does not have this tool" in detail


def test_a_forbidden_tool_that_was_called_still_fails_plainly(tmp_path: Path) -> None:
    results = graded_email_case(tmp_path, "send_email")
    assert results['tools_not_used("send_email")'] == "unexpectedly called 1 time(s)"
