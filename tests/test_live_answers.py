"""Live answers that are not whole (issue 27, second trial): an answer cut short by its
output limit, a content filter or a refusal is a run error, not an answer to grade; usage
given in part stops a budgeted run as usage not given at all does; and the tokens of an
answer that never reached the agent are in the report as they are in the budget. Each server
is a loopback :class:`~support.model_server.ModelServer`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support.live_project import CALL, TEXT, WIRE_AGENT, cli, live_model_on, project
from support.model_server import WIRES as SERVER_WIRES
from support.model_server import ModelServer, Reply, cut_stream

from evalrunner.live.provider import BudgetSpent
from evalrunner.model import Message, ModelRequest, RunError, TextResponse

REQUEST = ModelRequest(messages=(Message("user", "say hi"),))
WHOLE = TextResponse("hel", 10, 3)

# What each wire says when an answer is cut short, as (text in a whole answer, its stand-in).
CUTS: dict[str, list[tuple[str, str, str]]] = {
    "openai": [
        ('"finish_reason":"stop"', '"finish_reason":"length"', 'finish_reason "length"'),
        (
            '"finish_reason":"stop"',
            '"finish_reason":"content_filter"',
            'finish_reason "content_filter"',
        ),
    ],
    "anthropic": [
        ('"stop_reason":"end_turn"', '"stop_reason":"max_tokens"', 'stop_reason "max_tokens"'),
        ('"stop_reason":"end_turn"', '"stop_reason":"refusal"', 'stop_reason "refusal"'),
    ],
    "openai-responses": [
        (
            '"status":"completed","error":null,"incomplete_details":null',
            '"status":"incomplete","error":null,'
            '"incomplete_details":{"reason":"max_output_tokens"}',
            'status "incomplete", reason "max_output_tokens"',
        ),
    ],
}
CASES = [(wire, *cut) for wire, cuts in CUTS.items() for cut in cuts]


def _answer(wire: str, stream: bool, whole: str, cut: str) -> Reply:
    """WHOLE as ``wire`` sends it, with ``whole`` replaced by ``cut``."""
    api = SERVER_WIRES[wire]
    if stream:
        text = "".join(api.stream_events(WHOLE, response_id="r1", model="m", usage=True))
        text = text.replace("response.completed", "response.incomplete")
        kind = "text/event-stream"
    else:
        text = json.dumps(
            api.response_body(WHOLE, response_id="r1", model="m"), separators=(",", ":")
        )
        kind = "application/json"
    assert whole in text
    return Reply(headers={"Content-Type": kind}, raw=text.replace(whole, cut).encode())


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("wire", "whole", "cut", "named"), CASES)
def test_each_wire_reads_why_an_answer_was_cut_short(
    wire: str, whole: str, cut: str, named: str, stream: bool
) -> None:
    # Before: each was read as a whole answer (the Responses API's as malformed).
    with ModelServer(wire, [_answer(wire, stream, whole, cut)]) as server:
        response = live_model_on(server, stream=stream).complete(REQUEST)
    assert response == WHOLE  # its text and its tokens, which were spent
    assert response.cut_short is not None and response.cut_short.startswith(named)


def test_a_whole_answer_is_not_cut_short() -> None:
    for wire in SERVER_WIRES:
        with ModelServer(wire, [Reply(WHOLE)]) as server:
            assert live_model_on(server).complete(REQUEST).cut_short is None


def test_a_case_whose_answer_was_cut_short_errors_and_counts_its_tokens(tmp_path: Path) -> None:
    reply = _answer("anthropic", False, *CUTS["anthropic"][0][:2])
    with ModelServer("anthropic", [reply]) as server:
        cwd = project(tmp_path, "anthropic", server.base_url)
        done = cli(cwd, "run", "--mode", "live", "--json", "out.json")
    assert done.returncode == 1, done.stdout + done.stderr
    case = json.loads((cwd / "out.json").read_text(encoding="utf-8"))["cases"][0]
    assert case["error"] == (
        "turn 1, model request 1: live model: the model's answer is incomplete (stop_reason "
        '"max_tokens": the output limit (max_tokens) was reached); an answer cut short is not '
        "graded as a whole one"
    )
    assert (case["input_tokens"], case["output_tokens"]) == (10, 3)


def test_the_tokens_of_an_answer_refused_before_the_agent_are_reported(tmp_path: Path) -> None:
    # The agent forbids tool calls; the model calls one all the same. Before: the budget
    # counted the answer's 25 tokens, the report 0.
    with ModelServer("openai", [Reply(CALL)]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        done = cli(
            cwd,
            "run",
            "--mode",
            "live",
            "--json",
            "out.json",
            "--agent-command",
            f"{sys.executable} {WIRE_AGENT} ok",
            WIRE_AGENT_PARAMS=json.dumps({"tool_choice": "none"}),
        )
    assert done.returncode == 1, done.stdout + done.stderr
    case = json.loads((cwd / "out.json").read_text(encoding="utf-8"))["cases"][0]
    assert "tool_choice" in case["error"]
    assert (case["input_tokens"], case["output_tokens"]) == (CALL.input_tokens, CALL.output_tokens)
    assert f"{CALL.input_tokens} input + {CALL.output_tokens} output tokens" in done.stdout


PARTS = {
    "openai": (
        '{"id":"r","object":"chat.completion","choices":[{"index":0,"message":{"role":'
        '"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":null,'
        '"completion_tokens":7}}',
        "usage.prompt_tokens",
    ),
    "anthropic": (
        '{"type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],'
        '"stop_reason":"end_turn","usage":{"output_tokens":7}}',
        "usage.input_tokens",
    ),
    "openai-responses": (
        '{"object":"response","status":"completed","output":[{"type":"message","content":'
        '[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":7,"output_tokens":null}}',
        "usage.output_tokens",
    ),
}


@pytest.mark.parametrize("wire", list(PARTS))
def test_usage_given_in_part_stops_a_budgeted_run(wire: str) -> None:
    # Before: the missing count was read as 0, and the budget went on, undercounting.
    body, missing = PARTS[wire]
    reply = Reply(headers={"Content-Type": "application/json"}, raw=body.encode())
    with ModelServer(wire, [reply, Reply(WHOLE)]) as server:
        live = live_model_on(server, max_total_tokens=1000)
        with pytest.raises(BudgetSpent) as caught:
            live.complete(REQUEST)
        with pytest.raises(BudgetSpent):
            live.complete(REQUEST)
        assert len(server.seen) == 1
    assert str(caught.value) == (
        f"live model: the model's answer gives no {missing} (null or left out) beside its "
        "other token count, so max_total_tokens cannot be fully enforced: no further model "
        "request is sent; use a server that reports usage in full, or remove max_total_tokens "
        "from [eval.live]"
    )
    assert live.budget.spent == 7 and live.budget.blind


def test_usage_given_in_part_across_a_stream_is_named() -> None:
    # Anthropic gives input tokens in message_start and output tokens in message_delta: one
    # of them null is usage given in part.
    api = SERVER_WIRES["anthropic"]
    text = "".join(api.stream_events(WHOLE, response_id="r1", model="m", usage=True))
    text = text.replace('"input_tokens":10', '"input_tokens":null')
    reply = Reply(headers={"Content-Type": "text/event-stream"}, raw=text.encode())
    with ModelServer("anthropic", [reply]) as server:
        live = live_model_on(server, stream=True, max_total_tokens=1000)
        with pytest.raises(BudgetSpent) as caught:
            live.complete(REQUEST)
    assert "gives no usage.input_tokens" in str(caught.value)


def test_usage_given_in_part_without_a_budget_is_accepted() -> None:
    body, missing = PARTS["openai"]
    reply = Reply(headers={"Content-Type": "application/json"}, raw=body.encode())
    with ModelServer("openai", [reply]) as server:
        response = live_model_on(server).complete(REQUEST)
    assert (response.input_tokens, response.output_tokens) == (0, 7)
    assert response.usage_missing == missing


def test_a_budgeted_case_stopped_by_part_usage_reports_its_tokens(tmp_path: Path) -> None:
    body, _ = PARTS["openai"]
    reply = Reply(headers={"Content-Type": "application/json"}, raw=body.encode())
    with ModelServer("openai", [reply]) as server:
        cwd = project(tmp_path, "openai", server.base_url)
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8") + "max_total_tokens = 1000\n", "utf-8")
        done = cli(cwd, "run", "--mode", "live", "--json", "out.json")
    assert done.returncode == 3, done.stdout + done.stderr
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    assert "cannot be fully enforced" in report["budget_spent"]
    assert report["cases"][0]["output_tokens"] == 7


# --- bodies that are not what they say ---------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_body_that_is_not_of_its_content_encoding_says_so(stream: bool) -> None:
    # Before: "the request failed (DecodingError)".
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    if stream:
        headers["Content-Type"] = "text/event-stream"
    reply = Reply(headers=headers, raw=b"this is not gzip data at all")
    with ModelServer("openai", [reply]) as server:
        with pytest.raises(RunError) as caught:
            live_model_on(server, stream=stream).complete(REQUEST)
        assert len(server.seen) == 1  # not retried: the same server would send the same
    assert str(caught.value) == (
        "live model: the answer's body could not be decoded: it says Content-Encoding: gzip, "
        "but its bytes are not data of that encoding (a proxy or server that compresses "
        "wrongly)"
    )


@pytest.mark.parametrize(
    ("headers", "named"),
    [
        ({"Content-Type": "text/html; charset=utf-8"}, "text/html"),
        ({}, "no Content-Type"),
    ],
)
def test_an_answer_to_a_stream_request_that_holds_no_event_is_named(
    headers: dict[str, str], named: str
) -> None:
    # Before: "the stream ended before its closing data: [DONE] (cut off or malformed)".
    reply = Reply(headers=headers, raw=b"<html><body>502 Bad Gateway</body></html>\n")
    with ModelServer("openai", [reply]) as server, pytest.raises(RunError) as caught:
        live_model_on(server, stream=True).complete(REQUEST)
    assert str(caught.value) == (
        "live model: the answer is malformed: the answer is not an event stream (stream = "
        f"true in [eval.live]): the server answered {named}, without one server-sent event "
        "(no data: line); it begins '<html><body>502 Bad Gateway</body></html>\\n'"
    )


def test_a_stream_cut_short_is_still_named_as_one() -> None:
    reply = Reply(headers={"Content-Type": "text/event-stream"}, raw=cut_stream("openai", WHOLE, 2))
    with ModelServer("openai", [reply]) as server, pytest.raises(RunError) as caught:
        live_model_on(server, stream=True).complete(REQUEST)
    assert "the stream ended before its closing data: [DONE]" in str(caught.value)


# --- an output limit the budget cannot check -----------------------------------------------------


@pytest.mark.parametrize(
    ("api", "name", "value"),
    [
        ("openai", "max_tokens", "100"),
        ("openai", "max_completion_tokens", 99.5),
        ("anthropic", "max_tokens", True),
        ("openai-responses", "max_output_tokens", 0),
        ("openai", "max_tokens", [1]),
    ],
)
def test_an_output_limit_that_is_no_whole_number_is_refused_under_a_budget(
    api: str, name: str, value: object
) -> None:
    # Before: only numbers were compared with the budget; these went to the model.
    with ModelServer("openai", [Reply(WHOLE)]) as server:
        live = live_model_on(server, max_total_tokens=5000)
        request = ModelRequest(REQUEST.messages, api=api, parameters={name: value})  # type: ignore[dict-item]
        with pytest.raises(RunError) as caught:
            live.complete(request)
        assert server.seen == []
    assert str(caught.value) == (
        f"live model: the agent's request gives {name} = {json.dumps(value)}, which is not a "
        "whole number of tokens (at least 1), so the token budget (max_total_tokens = 5000) "
        "cannot be checked against it: nothing was sent; send a whole number in the agent, or "
        'pin it in [eval.live] (pin = ["max_tokens"]) to send [eval.live]\'s max_tokens instead'
    )


def test_a_whole_float_output_limit_within_the_budget_passes() -> None:
    with ModelServer("openai", [Reply(WHOLE)]) as server:
        live = live_model_on(server, max_total_tokens=5000)
        request = ModelRequest(REQUEST.messages, api="openai", parameters={"max_tokens": 100.0})
        assert live.complete(request) == WHOLE
    assert server.seen[0].body["max_tokens"] == 100.0


# --- an answer every request would get alike stops the run --------------------------------------

SECOND_CASE = """\
name: live_echo_again
turns:
  - user_input: say hi again through echo
expects:
  response_contains: [hello]
"""
FIRST_CASE = SECOND_CASE.replace("live_echo_again", "live_echo_first").replace(" again", "")


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (Reply(status=401, raw=b'{"error": {"message": "invalid key"}}'), "(HTTP 401)"),
        (Reply(status=308, headers={"Location": "https://elsewhere.test/v1"}), "HTTP 308"),
    ],
)
def test_a_refused_key_or_a_redirect_stops_the_run_with_one_error(
    tmp_path: Path, reply: Reply, said: str
) -> None:
    # Before: every case sent its request, met the same answer and errored alone (exit 1).
    with ModelServer("openai", [reply, reply, reply]) as server:
        cwd = project(tmp_path, "openai", server.base_url, a=FIRST_CASE, b=SECOND_CASE)
        done = cli(cwd, "run", "--mode", "live", "--json", "out.json")
        assert len(server.seen) == 1
    assert done.returncode == 2, done.stdout + done.stderr
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    first, second = report["cases"]
    assert said in first["error"] and report["live_stopped"] in first["error"]
    assert second["skipped"] == (
        "not run: an earlier case met an answer every request would get alike, which stopped "
        "the run (see run stopped, and live_stopped in the JSON report)"
    )
    assert f"run stopped: {report['live_stopped']}" in done.stdout
    assert report["all_passed"] is False


def test_a_forbidden_request_fails_its_case_only(tmp_path: Path) -> None:
    forbidden = Reply(status=403, raw=b'{"error": {"message": "model not allowed"}}')
    with ModelServer("openai", [forbidden, Reply(TEXT)]) as server:
        cwd = project(tmp_path, "openai", server.base_url, a=FIRST_CASE, b=SECOND_CASE)
        done = cli(cwd, "run", "--mode", "live", "--json", "out.json")
        assert len(server.seen) == 2
    assert done.returncode == 1, done.stdout + done.stderr
    first, second = json.loads((cwd / "out.json").read_text(encoding="utf-8"))["cases"]
    assert "(HTTP 403) for this request" in first["error"] and "only this case" in first["error"]
    assert second["error"] is None and second["skipped"] is None


def test_record_stops_at_a_refused_key(tmp_path: Path) -> None:
    refused = Reply(status=401, raw=b'{"error": {"message": "invalid key"}}')
    with ModelServer("openai", [refused, refused]) as server:
        cwd = project(tmp_path, "openai", server.base_url, a=FIRST_CASE, b=SECOND_CASE)
        done = cli(cwd, "record", "evals", "--out", "recorded")
        assert len(server.seen) == 1
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not run: an earlier case met an answer every request would get alike" in done.stdout
    assert "record stopped: live model: the API refused the key in LIVE_TEST_KEY (HTTP 401)" in (
        done.stderr
    )
    # Before: "(0 input + 0 output tokens)", a count of answers that never came.
    assert "0 input + 0 output tokens" not in done.stdout
    assert "recorded 0 of 2 live case(s) into recorded (no answer from the live model)" in (
        done.stdout
    )


def test_a_refused_key_met_by_a_case_running_beside_another_is_reported_as_met(
    tmp_path: Path,
) -> None:
    refused = Reply(status=401, raw=b'{"error": {"message": "invalid key"}}')
    # Both requests are held until both arrived: the two cases run at once, and whichever
    # arrived first gets the refusal. When that is the second case, the run used to stop
    # after the first (which passed) and report the second as not run, hiding the cause.
    with ModelServer("openai", [refused, Reply(TEXT)], gate=2) as server:
        cwd = project(tmp_path, "openai", server.base_url, a=FIRST_CASE, b=SECOND_CASE)
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8") + "max_concurrency = 2\n", "utf-8")
        done = cli(cwd, "run", "--mode", "live", "--json", "out.json")
        assert len(server.seen) == 2
    assert done.returncode == 2, done.stdout + done.stderr
    cases = json.loads((cwd / "out.json").read_text(encoding="utf-8"))["cases"]
    met = [case for case in cases if case["error"] and "(HTTP 401)" in case["error"]]
    assert len(met) == 1 and met[0]["skipped"] is None


WAITING_AGENT = """\
import threading

from evalrunner.agents.reference import reference_agent

MET = threading.Event()  # the other case's request was answered (with a 401)


class Agent:
    def __init__(self, context):
        self.inner = reference_agent(context)

    def respond(self, user_input):
        if "again" not in user_input:
            try:
                return self.inner.respond(user_input)
            finally:
                MET.set()
        MET.wait(10)  # asks only once the refused key has stopped the run
        return self.inner.respond(user_input)


def make(context):
    return Agent(context)
"""


def test_a_request_made_after_a_refused_key_stopped_the_run_is_not_sent(tmp_path: Path) -> None:
    # Case a (first in suite order) runs beside case b and asks the model only after b's
    # request was refused with a 401: every request would meet it alike, so a's is not sent.
    # Sent, it would be answered (the server holds an answer for it), and a reported passed.
    refused = Reply(status=401, raw=b'{"error": {"message": "invalid key"}}')
    with ModelServer("openai", [refused, Reply(TEXT)]) as server:
        cwd = project(
            tmp_path,
            "openai",
            server.base_url,
            'agent = "waiting_agent:make"',
            a=SECOND_CASE,
            b=FIRST_CASE,
        )
        (cwd / "waiting_agent.py").write_text(WAITING_AGENT, encoding="utf-8")
        toml = cwd / "evalrunner.toml"
        toml.write_text(toml.read_text("utf-8") + "max_concurrency = 2\n", "utf-8")
        done = cli(cwd, "run", "--mode", "live", "--json", "out.json")
        assert len(server.seen) == 1
    assert done.returncode == 2, done.stdout + done.stderr
    report = json.loads((cwd / "out.json").read_text(encoding="utf-8"))
    waited = report["cases"][0]
    assert waited["name"] == "live_echo_again"
    assert waited["passed"] is False
    assert "live model: not sent, since an earlier answer stopped the run: " in waited["error"]
    assert "(HTTP 401)" in waited["error"]
    assert report["passed"] == 0 and report["all_passed"] is False
