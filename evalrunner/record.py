"""Turning live runs into replay fixtures: what ``evalrunner record`` does, case by case.

For each live case (turns without steps) the agent runs against the live model, as in
``--mode live``. A run that errors or fails a check is not recorded: its fixture would fail its
replay too. Otherwise the run becomes a fixture:

* the case's own document, its user inputs and expectations as they are, with each turn's
  ``steps`` the model's responses in the order the agent received them (text, or tool calls
  with their usage);
* tool-call ids renumbered ``call_1``, ``call_2``, ... in the order the calls came (a live
  API's ids are random, and some reuse ids between responses), unless ``keep_ids``;
* arguments that are a JSON object written as one (readable; the agent then receives them as
  compact JSON with sorted keys), any other argument text verbatim;
* a closed ``recorded`` block: wire, model, date, evalrunner version (no key, no headers);
* every string redacted by the configured patterns (:mod:`evalrunner.redact`), the keys of
  argument objects too.

Before it is handed back, the fixture's text is parsed and admitted as any fixture would be,
and replayed with the same agent and tools: a recording is only written if it admits and
replays green. Otherwise the outcome says why, and what to change. Writing files is the
caller's (the command line's) part.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from evalrunner import __version__
from evalrunner.convert import SUFFIXES, ConversionError, convert, rebase, schema_reference
from evalrunner.grade import grade
from evalrunner.load import FIXTURE_SUFFIXES, RawDocument, load_document, parse_document
from evalrunner.model import (
    AdmissionError,
    Case,
    Format,
    JSONValue,
    ModelResponse,
    RunRecord,
    TextResponse,
)
from evalrunner.pipeline import RunSettings, evaluate_case
from evalrunner.redact import Redactor
from evalrunner.replay import run_case
from evalrunner.text import dotted, printable

if TYPE_CHECKING:
    from evalrunner.wire.live import LiveModel


@dataclass(frozen=True)
class Provenance:
    """The ``recorded`` block of a recorded fixture."""

    wire: str
    model: str
    date: str
    evalrunner_version: str = __version__

    def as_data(self) -> dict[str, JSONValue]:
        """The block as fixture data, in the schema's key order."""
        return {
            "wire": self.wire,
            "model": self.model,
            "date": self.date,
            "evalrunner_version": self.evalrunner_version,
        }


@dataclass(frozen=True)
class Recorded:
    """A live run written as a fixture that admits and replays green: ``text`` is what goes
    to ``target``."""

    name: str
    source: str
    target: Path
    text: str
    responses: int
    tool_calls: int


@dataclass(frozen=True)
class NotRecorded:
    """A live case that gave no fixture, and why (with what to do about it)."""

    name: str
    source: str
    reason: str
    budget: bool = False
    """It was not run because the token budget was spent."""


Outcome = Recorded | NotRecorded


@dataclass(frozen=True)
class RecordSettings:
    """How recordings are written: the provenance, the redaction and the ids."""

    provenance: Provenance
    redactor: Redactor = field(default_factory=Redactor)
    keep_ids: bool = False


def target_path(source: str, out_dir: Path, fmt: Format | None, source_format: Format) -> Path:
    """Where the recording of the fixture shown as ``source`` (relative to its suite) goes:
    the same relative path under ``out_dir``, ending as ``fmt`` (default: its own format)."""
    chosen = fmt or source_format
    relative = Path(source)
    name = relative.name
    stem = name[: -len(relative.suffix)] if relative.suffix else name
    return out_dir / relative.parent / (stem + SUFFIXES[chosen])


def record_case(
    case: Case,
    source: str,
    target: Path,
    *,
    settings: RunSettings,
    live: LiveModel,
    recording: RecordSettings,
) -> Outcome:
    """Run ``case`` live and make its fixture, or say why there is none (module docstring)."""
    recording = replace(recording, redactor=recording.redactor.striking(live.without_key))
    shown = recording.redactor.text(case.name)
    if live.budget.exhausted:
        return NotRecorded(
            shown, source, "not run: the token budget (max_total_tokens) is spent", budget=True
        )
    provider = live.provider()
    record = run_case(
        case,
        agent_factory=settings.agent_factory,
        tools=settings.tools,
        max_tool_iterations=settings.max_tool_iterations,
        timeout=settings.case_timeout,
        trimmed_history=settings.trimmed_history,
        provider=provider,
    )

    def refused(reason: str, *, budget: bool = False) -> NotRecorded:
        return NotRecorded(shown, source, recording.redactor.text(reason), budget=budget)

    if record.error is not None:
        return refused(
            f"the live run errored: {record.error}; nothing to record until it runs cleanly",
            budget=provider.stopped_by_budget,
        )
    failed = [g for g in grade(case.expects, record) if not g.passed]
    if failed:
        worded = "; ".join(f"{g.check}: {g.detail}" if g.detail else g.check for g in failed)
        return refused(
            f"the live run failed {worded}; its fixture would fail its replay too: fix the "
            "agent or the expectations, then record again"
        )
    empty = _turn_without_responses(case, record)
    if empty is not None:
        return refused(
            f"turn {empty + 1} made no model request, and a replay fixture scripts at least "
            "one response for every turn; give that turn an input the agent sends to the model"
        )
    document = load_document(case.source)
    if isinstance(document, list):  # admitted a moment ago: changed or removed since
        return refused(f"{document[0]}; the fixture changed during the run, record again")
    data = recorded_data(document, record, target, recording)
    checked = _checked(data, target)
    if isinstance(checked, str):
        return refused(checked)
    text, admitted = checked
    again = evaluate_case(
        admitted,
        agent_factory=settings.agent_factory,
        tools=settings.tools,
        max_tool_iterations=settings.max_tool_iterations,
        case_timeout=settings.case_timeout,
        trimmed_history=settings.trimmed_history,
    )
    if not again.passed:
        if again.error is not None:
            what = f"errored: {again.error}"
        else:
            what = "failed " + "; ".join(
                f"{g.check}: {g.detail}" if g.detail else g.check
                for g in again.grades
                if not g.passed
            )
        cause = (
            "redaction changed text the agent or a check reads (narrow the redact patterns)"
            if recording.redactor
            else "the agent does not do the same given the same model responses"
        )
        return refused(
            f"its recording does not replay green: the replay {what}; likely {cause}; "
            "nothing was written"
        )
    calls = sum(len(getattr(r, "tool_calls", ())) for _, r in record.responses)
    return Recorded(shown, source, target, text, len(record.responses), calls)


def recorded_data(
    document: RawDocument, record: RunRecord, target: Path, recording: RecordSettings
) -> dict[str, Any]:
    """The fixture of ``record``: ``document``'s data with each turn's steps filled in from
    the responses, the ``recorded`` block added, ids renumbered and every string redacted."""
    source = cast(dict[str, Any], document.data)  # admitted: an object with a turns list
    responses: dict[int, list[ModelResponse]] = {}
    for turn, response in record.responses:
        responses.setdefault(turn, []).append(response)
    numbered = itertools.count(1)
    redactor = recording.redactor
    turns = []
    for index, turn in enumerate(source["turns"]):
        steps = [
            {"response": _response_data(r, numbered, recording.keep_ids, redactor)}
            for r in responses.get(index, [])
        ]
        turns.append({**{k: redactor.value(v) for k, v in turn.items()}, "steps": steps})
    data: dict[str, Any] = {}
    reference = schema_reference(document)
    if reference is not None:
        data["$schema"] = rebase(reference, document.path, target)
    for key, value in source.items():
        if key not in ("$schema", "recorded"):
            data[key] = turns if key == "turns" else redactor.value(value)
    data["recorded"] = redactor.value(recording.provenance.as_data())
    return data


def _response_data(
    response: ModelResponse, numbered: Iterator[int], keep_ids: bool, redactor: Redactor
) -> dict[str, JSONValue]:
    out: dict[str, JSONValue]
    if isinstance(response, TextResponse):
        out = {"type": "text", "content": redactor.text(response.content)}
    else:
        out = {
            "type": "tool_calls",
            "tool_calls": [
                {
                    "id": redactor.text(call.id) if keep_ids else f"call_{next(numbered)}",
                    "name": redactor.text(call.name),
                    "arguments": redactor.value(_arguments(call.arguments), keys=True),
                }
                for call in response.tool_calls
            ],
        }
    if response.input_tokens:
        out["input_tokens"] = response.input_tokens
    if response.output_tokens:
        out["output_tokens"] = response.output_tokens
    return out


def _arguments(text: str) -> JSONValue:
    """An argument object as an object; anything else (not JSON, not an object, a key given
    twice, a number JSON cannot round-trip) as the text itself."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("a key given twice")
        return dict(pairs)

    def constant(literal: str) -> float:
        raise ValueError(f"not a JSON number: {literal}")

    def number(literal: str) -> float:
        value = float(literal)
        if json.dumps(value) != literal:  # 1.0e2 would print back as 100.0: keep the text
            raise ValueError(f"{literal} would not print back as written")
        return value

    try:
        parsed = json.loads(
            text, object_pairs_hook=unique, parse_constant=constant, parse_float=number
        )
    except (ValueError, RecursionError):
        return text
    return parsed if isinstance(parsed, dict) else text


def _turn_without_responses(case: Case, record: RunRecord) -> int | None:
    answered = {turn for turn, _ in record.responses}
    return next((t for t in range(len(case.turns)) if t not in answered), None)


def _checked(data: dict[str, Any], target: Path) -> tuple[str, Case] | str:
    """The fixture's text in ``target``'s format and the case it admits to; or why it is
    refused, with what to change."""
    fmt = FIXTURE_SUFFIXES[target.suffix]
    as_json = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    # Checked as the JSON written here, then as the target format's text: convert admits
    # both and hands back the text only when they admit to the same case.
    document = parse_document(as_json.encode("utf-8"), "json", target.with_suffix(".json"))
    if isinstance(document, list):
        return _refusal(document)
    try:
        outcome = convert(document, fmt, target_path=target)
    except ConversionError as exc:
        return f"its {fmt} text would not admit as the same case ({exc}); please report this"
    if isinstance(outcome, list):
        return _refusal(outcome)
    return outcome.text, replace(outcome.case, source=target)


def _refusal(errors: Sequence[AdmissionError]) -> str:
    """Why a recording would be refused, where in it, and what to change."""
    parts = []
    for error in errors:
        where = dotted(error.json_path)
        parts.append(f"{where}: {error.message}" if where else error.message)
    hint = _hint(errors)
    return f"its recording would be refused ({'; '.join(parts)}){hint}; nothing was written"


def _hint(errors: Sequence[AdmissionError]) -> str:
    text = " ".join(error.message for error in errors)
    if "tool-call id" in text:
        return "; record without --keep-ids to renumber the calls"
    if "blank" in text or "empty" in text:
        return "; a redact pattern may have struck out all of a text: narrow it"
    return "; change the live case so that its run gives an admissible fixture"


def recording_date(environ: Mapping[str, str]) -> str:
    """Now, in UTC to the second; or ``SOURCE_DATE_EPOCH`` when it holds a whole number of
    seconds (the reproducible-builds convention), so that a recording can be made twice
    alike."""
    from datetime import UTC, datetime

    raw = environ.get("SOURCE_DATE_EPOCH", "").strip()
    when = datetime.now(UTC)
    if raw.isascii() and raw.isdecimal() and len(raw) <= 11:
        when = datetime.fromtimestamp(int(raw), UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def line(outcome: Outcome) -> str:
    """One line of ``evalrunner record``'s output for ``outcome``, printable."""
    if isinstance(outcome, Recorded):
        calls = f", {outcome.tool_calls} tool call(s)" if outcome.tool_calls else ""
        return printable(
            f"recorded      {outcome.name} -> {outcome.target} "
            f"({outcome.responses} model response(s){calls})"
        )
    return printable(f"not recorded  {outcome.name} ({outcome.source}): {outcome.reason}")
