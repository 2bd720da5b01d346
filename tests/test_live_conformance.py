"""Conformance in live mode: the monitor wraps a model with no script and no turn brackets,
and still holds every request to what that model actually answered (user input sent, results
fed back, calls repeated faithfully, earlier turns kept in order); and a live case is admitted
(a case mixing scripted and unscripted turns is not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalrunner.boundary.conformance import ConversationMonitor, TurnScripted
from evalrunner.boundary.provider import ModelProvider
from evalrunner.execution import SKIP_LIVE_CASE
from evalrunner.fixture.admit import admit_documents
from evalrunner.fixture.load import load_document
from evalrunner.model import (
    Message,
    ModelRequest,
    ModelResponse,
    RunError,
    TextResponse,
    ToolCall,
    ToolCallsResponse,
    ToolSpec,
)
from evalrunner.replay import run_case
from evalrunner.session import evaluate_case

TOOLS = (ToolSpec("echo", "", {"type": "object"}),)
CALL = ToolCall("live_1", "echo", '{"message": "hi"}')


class FakeLive(ModelProvider):
    """Answers in order, like a live model: no script, no turns; counts what it was asked."""

    def __init__(self, *answers: ModelResponse) -> None:
        self.answers = list(answers)
        self.asked = 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.asked += 1
        return self.answers.pop(0)


def test_a_live_model_is_not_turn_scripted() -> None:
    assert not isinstance(FakeLive(), TurnScripted)


def test_a_provider_that_says_nothing_more_inherits_the_protocols_defaults() -> None:
    # The runner reads these of every provider: one that defines only complete() is never
    # retrying and withholds no variable from an agent process.
    assert FakeLive().retrying is None
    assert watch(FakeLive()).withheld_variables == ()


def watch(model: FakeLive, *inputs: str) -> ConversationMonitor:
    return ConversationMonitor(model, list(inputs))


USER = Message("user", "go")
ECHOED = Message("assistant", "", tool_calls=(CALL,))
RESULT = Message("tool", "hi", tool_call_id="live_1")
CALL_WITHOUT_ARGUMENTS = ToolCall("live_1", "echo", "{}")


def test_a_faithful_conversation_passes_and_records_responses_by_turn() -> None:
    model = FakeLive(ToolCallsResponse((CALL,), 3, 1), TextResponse("said hi", 4, 2))
    monitor = watch(model, "go", "again")
    monitor.begin_turn(0)
    monitor.complete(ModelRequest((USER,), TOOLS))
    monitor.complete(ModelRequest((USER, ECHOED, RESULT), TOOLS))
    monitor.end_turn(None)
    evidence = monitor.evidence()
    assert monitor.error is None
    assert [turn for turn, _ in evidence.responses] == [0, 0]
    assert (evidence.input_tokens, evidence.output_tokens) == (7, 3)


@pytest.mark.parametrize(
    ("second", "problem"),
    [
        ((USER, ECHOED), 'the result of tool call(s) "live_1" (echo) was not fed back'),
        (
            (USER, Message("assistant", "", tool_calls=(CALL_WITHOUT_ARGUMENTS,)), RESULT),
            'repeats tool call "live_1" (echo) with arguments "{}"',
        ),
        (
            (USER, ECHOED, RESULT, RESULT),
            'two results for tool call "live_1" (echo)',
        ),
        ((Message("user", "other"), ECHOED, RESULT), 'should be the user message "go"'),
    ],
)
def test_a_request_unfaithful_to_the_live_answer_is_refused_before_it_is_sent(
    second: tuple[Message, ...], problem: str
) -> None:
    model = FakeLive(ToolCallsResponse((CALL,)), TextResponse("unused"))
    monitor = watch(model, "go")
    monitor.begin_turn(0)
    monitor.complete(ModelRequest((USER,), TOOLS))
    with pytest.raises(RunError) as caught:
        monitor.complete(ModelRequest(second, TOOLS))
    assert problem in str(caught.value)
    assert model.asked == 1  # the live model was not paid for a refused request
    assert monitor.error == str(caught.value)  # sticky


def test_the_first_request_must_carry_the_user_input() -> None:
    model = FakeLive(TextResponse("x"))
    monitor = watch(model, "go")
    monitor.begin_turn(0)
    with pytest.raises(RunError, match='the turn\'s user_input "go" verbatim'):
        monitor.complete(ModelRequest((Message("user", "went"),)))
    assert model.asked == 0


def test_earlier_turns_must_be_kept_in_order() -> None:
    model = FakeLive(TextResponse("one done"), TextResponse("two done"))
    monitor = watch(model, "one", "two")
    monitor.begin_turn(0)
    monitor.complete(ModelRequest((Message("user", "one"),)))
    monitor.end_turn(None)
    monitor.begin_turn(1)
    with pytest.raises(RunError, match="earlier messages were dropped"):
        monitor.complete(ModelRequest((Message("user", "two"),)))
    assert model.asked == 1


def test_a_request_after_the_final_reply_is_refused_without_asking_the_model() -> None:
    model = FakeLive(TextResponse("done"), TextResponse("never"))
    monitor = watch(model, "go")
    monitor.begin_turn(0)
    monitor.complete(ModelRequest((USER,)))
    again = ModelRequest((USER, Message("assistant", "done"), Message("user", "go")))
    with pytest.raises(RunError, match="already gave this turn's final reply"):
        monitor.complete(again)
    assert model.asked == 1


def test_the_reference_agent_runs_a_live_case_against_a_live_provider() -> None:
    case = _admit("live.yaml", LIVE)
    model = FakeLive(
        ToolCallsResponse((ToolCall("c9", "echo", '{"message":"hey"}'),)), TextResponse("hey!")
    )
    record = run_case(case, provider=model)
    assert record.error is None
    assert record.final_response == "hey!"
    assert [call.result for call in record.tool_calls] == ["hey"]
    report = evaluate_case(case, provider=FakeLive(TextResponse("no tools")))
    assert not report.passed and report.error is None  # graded, and tools_used fails


def test_a_live_case_run_without_a_provider_is_reported_as_skipped() -> None:
    from evalrunner.execution import RunSettings, execute

    (report,) = list(execute([_admit("live.yaml", LIVE)], RunSettings()))
    assert report.skipped == SKIP_LIVE_CASE and not report.passed


LIVE = """\
name: live
turns:
  - user_input: echo hey
expects:
  tools_used: [echo]
  response_contains: ["hey"]
"""


def _admit(name: str, text: str, tmp: Path | None = None) -> object:
    import tempfile

    directory = Path(tempfile.mkdtemp()) if tmp is None else tmp
    path = directory / name
    path.write_text(text, encoding="utf-8")
    admission = admit_documents([load_document(path)])
    assert not admission.errors, admission.errors
    (case,) = admission.cases
    assert case.live
    return case


def test_a_case_mixing_scripted_and_live_turns_is_refused_at_the_turn(tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(
        "name: mixed\nturns:\n  - user_input: one\n    steps:\n"
        "      - response: {type: text, content: hi}\n  - user_input: two\n"
        "expects:\n  response_contains: [hi]\n",
        encoding="utf-8",
    )
    admission = admit_documents([load_document(path)])
    assert [str(e) for e in admission.errors] == [
        f"{path}:6:5: turns[1] has no steps, but other turns of this case script theirs; give "
        "every turn steps (a replayed case) or none (a live case, answered by the real model "
        "in --mode live)"
    ]


def test_a_live_case_must_still_be_falsifiable(tmp_path: Path) -> None:
    path = tmp_path / "vacuous.yaml"
    path.write_text(
        "name: vacuous\nturns:\n  - user_input: anything\nexpects:\n  max_tool_calls: 5\n",
        encoding="utf-8",
    )
    admission = admit_documents([load_document(path)])
    assert admission.errors and "passes on a run that did nothing" in str(admission.errors[0])


class OwnProvider:
    """A user's provider written with complete() alone, subclassing nothing (as a provider
    needed no more before the protocol declared what the runner reads)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def complete(self, request: ModelRequest) -> ModelResponse:
        import time

        time.sleep(self.delay)
        return TextResponse("hello there")


def _text_case(tmp_path: Path) -> object:
    fixture = tmp_path / "hello.yaml"
    fixture.write_text(
        "name: hello\nturns:\n  - user_input: hi\nexpects:\n  response_contains: [hello]\n",
        encoding="utf-8",
    )
    admission = admit_documents([load_document(fixture)])
    assert not admission.errors, admission.errors
    return admission.cases[0]


def test_a_provider_with_complete_alone_times_out_as_a_run_error(tmp_path: Path) -> None:
    # The runner read .retrying of it on a timeout: AttributeError, and the agent left running.
    record = run_case(_text_case(tmp_path), provider=OwnProvider(delay=2.0), timeout=0.3)  # type: ignore[arg-type]
    assert record.error == "timed out after 0.3s"


def test_a_provider_with_complete_alone_serves_a_command_agent(tmp_path: Path) -> None:
    # The agent process's environment read .withheld_variables of it: AttributeError, blamed
    # on the agent, and the replay endpoint left listening.
    import sys

    from evalrunner.agents.command import command_agent_factory

    agent = Path(__file__).resolve().parent / "support" / "wire_agent.py"
    factory = command_agent_factory([sys.executable, str(agent), "ok"], cwd=tmp_path)
    try:
        record = run_case(
            _text_case(tmp_path), provider=OwnProvider(), agent_factory=factory, timeout=60
        )  # type: ignore[arg-type]
    finally:
        factory.close()
    assert record.error is None, record.error
    assert record.final_response == "hello there"
