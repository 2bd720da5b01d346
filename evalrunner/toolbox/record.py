"""Turning live runs into replay fixtures: what ``evalrunner record`` does, case by case.

For each live case (turns without steps) the agent runs against the live model, as in
``--mode live``. A run that errors or fails a check is not recorded: its fixture would fail its
replay too. Otherwise the run becomes a fixture:

* the case's own document, its user inputs and expectations as they are, with each turn's
  ``steps`` the model's responses in the order the agent received them (text, or tool calls
  with their usage);
* tool-call ids renumbered ``call_1``, ``call_2``, ... in the order the calls came (a live
  API's ids are random, and some reuse ids between responses), unless ``keep_ids``;
* arguments written as a JSON object only when the model's text is exactly what a fixture's
  object gives the agent (compact JSON, keys sorted); any other argument text verbatim, as a
  string, so that the agent and every check read in replay the very text the model sent;
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
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from evalrunner import __version__
from evalrunner.execution import RunSettings, graded_report
from evalrunner.expectations import grade_case
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import (
    FIXTURE_SUFFIXES,
    INT_MAX,
    INT_MIN,
    MAX_DEPTH,
    RawDocument,
    load_document,
    parse_document,
)
from evalrunner.model import (
    AdmissionError,
    Case,
    Format,
    GradeResult,
    JSONValue,
    ModelResponse,
    RunRecord,
    TextResponse,
    argument_json,
)
from evalrunner.redact import Redactor
from evalrunner.text import dotted, printable
from evalrunner.toolbox.convert import SUFFIXES, ConversionError, convert, rebase, schema_reference

if TYPE_CHECKING:
    from evalrunner.live.provider import LiveModel


@dataclass(frozen=True, slots=True)
class Provenance:
    """The ``recorded`` block of a recorded fixture."""

    wire: str
    model: str
    date: str
    evalrunner_version: str = __version__
    parameters: tuple[Mapping[str, JSONValue], ...] = ()
    """The request parameters each model request of the run sent, in order (none: the
    block leaves ``parameters`` out)."""

    def as_data(self) -> dict[str, JSONValue]:
        """The block as fixture data, in the schema's key order."""
        data: dict[str, JSONValue] = {
            "wire": self.wire,
            "model": self.model,
            "date": self.date,
            "evalrunner_version": self.evalrunner_version,
        }
        if self.parameters:
            data["parameters"] = [dict(sent) for sent in self.parameters]
        return data


@dataclass(frozen=True, slots=True)
class Recorded:
    """A live run written as a fixture that admits and replays green: ``text`` is what goes
    to ``target``. ``notes`` are what a reviewer should look at (checks redaction changed)."""

    name: str
    source: str
    target: Path
    text: str
    responses: int
    tool_calls: int
    input_tokens: int = 0
    output_tokens: int = 0
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NotRecorded:
    """A live case that gave no fixture, and why (with what to do about it)."""

    name: str
    source: str
    reason: str
    budget: bool = False
    """It was not run because the token budget was spent."""
    input_tokens: int = 0
    output_tokens: int = 0
    unwritable: bool = False
    """Its fixture was made but could not be written (a failed write: exit 2)."""


Outcome = Recorded | NotRecorded


@dataclass(frozen=True, slots=True)
class RecordSettings:
    """How recordings are written: the provenance, the redaction and the ids."""

    provenance: Provenance
    redactor: Redactor = field(default_factory=Redactor)
    keep_ids: bool = False


def target_path(source: str, out_dir: Path, fmt: Format | None, source_format: Format) -> Path:
    """Where the recording of the fixture shown as ``source`` (relative to its suite) goes:
    the same relative path under ``out_dir``, ending as ``fmt`` (default: its own format)."""
    return out_dir / Path(source).with_suffix(SUFFIXES[fmt or source_format])


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
    recording = replace(recording, redactor=recording.redactor.striking(live.without_secrets))
    shown = recording.redactor.text(case.name)
    if live.budget.exhausted:
        reason = (
            "not run: the token budget (max_total_tokens) cannot be enforced: an earlier "
            "answer carried no token usage"
            if live.budget.blind
            else "not run: the token budget (max_total_tokens) is spent"
        )
        return NotRecorded(shown, source, reason, budget=True)
    if live.halted is not None:  # every request would meet it alike: none is sent
        reason = "not run: an earlier case met an answer every request would get alike"
        return NotRecorded(shown, source, reason)
    provider = live.provider()
    try:
        record = settings.replay(case, provider)
    finally:
        provider.close()
    tokens = (record.input_tokens, record.output_tokens)
    # What the model was sent, so that a replay's reader knows which request it answered.
    sent = tuple(exchange.sent for exchange in provider.exchanges)
    recording = replace(recording, provenance=replace(recording.provenance, parameters=sent))

    def refused(reason: str, *, budget: bool = False) -> NotRecorded:
        text = recording.redactor.text(reason)
        return NotRecorded(shown, source, text, budget, *tokens)

    if record.error is not None:
        return refused(
            f"the live run errored: {record.error}; nothing to record until it runs cleanly",
            budget=provider.stopped_by_budget,
        )
    failed = [g for g in grade_case(case, record) if not g.passed]
    if failed:
        return refused(
            f"the live run failed {_worded(failed)}; its fixture would fail its replay too: "
            "fix the agent or the expectations, then record again"
        )
    document = load_document(case.source)
    if isinstance(document, list) or admit(document) != case:
        # What the run ran is the case admitted before it: a fixture built from the file's
        # new text would record one case under the outcome of another.
        return refused("its fixture changed during the run; record it again")
    try:
        data = recorded_data(document, record, target, recording)
    except _Unwritable as exc:
        return refused(f"{exc}; nothing was written")
    checked = _checked(data, target)
    if isinstance(checked, str):
        return refused(checked)
    text, admitted = checked
    again = graded_report(admitted, settings.replay(admitted))
    plain = recorded_data(document, record, target, replace(recording, redactor=Redactor()))
    if not again.passed:
        what = (
            f"errored: {again.error}"
            if again.error is not None
            else ("failed " + _worded([g for g in again.grades if not g.passed]))
        )
        cause = (
            "redaction (or striking the API key) changed text the agent or a check reads: "
            "narrow the redact patterns, or the agent is not deterministic"
            if plain != data
            else "the agent does not do the same given the same model responses (it is not "
            "deterministic, or reads something besides them)"
        )
        return refused(
            f"its recording does not replay green: the replay {what}; likely {cause}; "
            "nothing was written"
        )
    notes: tuple[str, ...] = ()
    changed = _changed_paths(plain.get("expects"), data.get("expects"), ("expects",))
    if changed:
        notes = (
            f"redaction changed its checks ({', '.join(changed)}): review that they still "
            "test what they should",
        )
    calls = sum(len(getattr(r, "tool_calls", ())) for _, r in record.responses)
    return Recorded(shown, source, target, text, len(record.responses), calls, *tokens, notes)


def _worded(grades: Sequence[GradeResult]) -> str:
    return "; ".join(f"{g.check}: {g.detail}" if g.detail else g.check for g in grades)


def _changed_paths(before: object, after: object, at: tuple[str | int, ...]) -> list[str]:
    """Where ``after`` differs from ``before`` (dotted paths), for the checks' note."""
    if isinstance(before, dict) and isinstance(after, dict) and list(before) == list(after):
        return [p for key in before for p in _changed_paths(before[key], after[key], (*at, key))]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            p
            for i, (b, a) in enumerate(zip(before, after, strict=True))
            for p in _changed_paths(b, a, (*at, i))
        ]
    return [] if before == after else [dotted(at)]


class _Unwritable(Exception):
    """What the model said cannot be written into a fixture as it is (the message says why)."""


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
                    "arguments": _redacted_arguments(call.arguments, redactor),
                }
                for call in response.tool_calls
            ],
        }
    if response.input_tokens:
        out["input_tokens"] = response.input_tokens
    if response.output_tokens:
        out["output_tokens"] = response.output_tokens
    return out


def _redacted_arguments(text: str, redactor: Redactor) -> JSONValue:
    """The arguments as written: an object, redacted keys and all; or the exact text,
    redacted, unless what it says in JSON escapes (``\\u0073k-...``) would still show what
    redaction strikes, which no edit of the exact text can hide."""
    arguments = _arguments(text)
    if not isinstance(arguments, str):
        return redactor.value(arguments, keys=True)
    struck = redactor.text(arguments)
    try:
        decoded = json.loads(struck, object_pairs_hook=lambda pairs: pairs)
    except (ValueError, RecursionError):
        return struck  # not JSON: nothing is written in escapes
    if _holds_struck(decoded, redactor):
        raise _Unwritable(
            "a tool call's argument text holds, written in JSON escapes, text that is struck "
            "from recordings (the API key or a redact pattern's match), and the model's exact "
            "text cannot be kept without it"
        )
    return struck


def _holds_struck(value: object, redactor: Redactor) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if redactor.text(item) != item:
                return True
        elif isinstance(item, list | tuple):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.items())
    return False


def _arguments(text: str) -> JSONValue:
    """An argument object as an object when replay would hand the agent this very text
    (:func:`~evalrunner.model.argument_json` of it is ``text``); anything else (spacing or
    key order of its own, not JSON, not an object, a key given twice, a number that would
    print otherwise or that a fixture cannot hold, nesting a fixture cannot hold) as the text
    itself: a check on the exact text then replays as it ran."""

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

    def integer(literal: str) -> int:
        value = int(literal)
        if not INT_MIN <= value <= INT_MAX:
            raise ValueError(f"{literal} is beyond what a fixture holds")
        return value

    try:
        parsed = json.loads(
            text,
            object_pairs_hook=unique,
            parse_constant=constant,
            parse_float=number,
            parse_int=integer,
        )
    except (ValueError, RecursionError):
        return text
    if not isinstance(parsed, dict) or _deeper_than(parsed, MAX_ARGUMENT_DEPTH):
        return text
    if argument_json(parsed) != text:
        return text
    return parsed


MAX_ARGUMENT_DEPTH = MAX_DEPTH - 16
"""Arguments nested deeper than this are kept as text: an object sits this far below the
fixture's root (turns, steps, response, tool_calls, ...), and a fixture nests at most
:data:`evalrunner.fixture.load.MAX_DEPTH` levels."""


def _deeper_than(value: object, limit: int) -> bool:
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
    return False


def _checked(data: dict[str, Any], target: Path) -> tuple[str, Case] | str:
    """The fixture's text in ``target``'s format and the case it admits to; or why it is
    refused, with what to change."""
    fmt = FIXTURE_SUFFIXES[target.suffix]
    as_json = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    try:
        as_json.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = as_json[max(0, exc.start - 30) : exc.start]
        return (
            f"the live run's text holds a lone surrogate ({exc.object[exc.start]!a}, after "
            f"{where!a}), which no UTF-8 file can hold; nothing was written"
        )
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
    return "; change the live case so that its run gives an admissible fixture"


MAX_EPOCH = 253402300799
"""9999-12-31T23:59:59Z, the last second an RFC 3339 date can name."""


def recording_date(environ: Mapping[str, str]) -> str:
    """Now, in UTC to the second; or the time ``SOURCE_DATE_EPOCH`` gives, in seconds (the
    reproducible-builds convention), so that a recording can be made twice alike. A value
    that is not a whole number of seconds from 0 to year 9999 is a ``ValueError`` saying so:
    a date silently taken from the clock instead would defeat the point of setting it."""
    from datetime import UTC, datetime

    raw = environ.get("SOURCE_DATE_EPOCH", "")
    if not raw.strip():
        when = datetime.now(UTC)
    else:
        text = raw.strip()
        if not (text.isascii() and text.isdecimal() and int(text) <= MAX_EPOCH):
            raise ValueError(
                "SOURCE_DATE_EPOCH: must be a whole number of seconds since 1970-01-01 UTC "
                f"(at most {MAX_EPOCH}), got {printable(raw[:40])!r}; unset it to date "
                "recordings by the clock"
            )
        when = datetime.fromtimestamp(int(text), UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def line(outcome: Outcome) -> str:
    """One line of ``evalrunner record``'s output for ``outcome``, printable."""
    if isinstance(outcome, Recorded):
        calls = f", {outcome.tool_calls} tool call(s)" if outcome.tool_calls else ""
        notes = "".join(f"; note: {note}" for note in outcome.notes)
        return printable(
            f"recorded      {outcome.name} -> {outcome.target} "
            f"({outcome.responses} model response(s){calls}){notes}"
        )
    return printable(f"not recorded  {outcome.name} ({outcome.source}): {outcome.reason}")


@dataclass(frozen=True, slots=True)
class Targets:
    """Where each live case's recording goes, and which case names the output directory
    already holds (each with the real path of its file)."""

    paths: tuple[Path, ...]
    names: dict[str, str]
    out: Path = Path()
    """The output directory (``--out``): nothing is written outside it."""


def outside(target: Path, out: Path) -> str | None:
    """Why writing ``target`` would write outside ``out`` (a symbolic link inside ``out``,
    the file itself or a directory on its way, leads elsewhere); ``None`` when it stays
    inside. ``out`` itself may be a link: it is where the user asked the files to go."""
    from evalrunner.text import printable_path

    root = _real(out)
    real = _real(target)
    try:
        inside = os.path.commonpath([root, real]) == root
    except ValueError:  # another drive
        inside = False
    if inside:
        return None
    return (
        f"{printable_path(target)}: a symbolic link under --out {printable_path(out)} leads "
        f"outside it (to {printable_path(Path(real))}); recording writes only under --out: "
        "remove the link, or record into another directory"
    )


def plan_targets(
    cases: Sequence[tuple[Case, str]],
    sources: Sequence[Path],
    out: Path,
    fmt: Format | None,
    overwrite: bool,
) -> Targets | list[str]:
    """Where each of ``cases`` (a live case and its path relative to its suite) is recorded,
    or every reason it cannot be, found before any request is sent: two cases to one file, a
    file there already (without ``overwrite``), a fixture of the run itself (``sources``,
    through any symbolic link), a name the output directory already holds in another file,
    a path that cannot be written. Missing directories are made only when nothing is wrong."""
    from evalrunner.fixture.load import relative_to_cwd
    from evalrunner.report import prepare_output
    from evalrunner.text import printable_path

    if os.path.lexists(out) and not out.is_dir():
        return [f"--out {printable_path(out)}: is not a directory"]
    fixtures = {_real(path): path for path in sources}
    names = _names_in(out)
    problems: list[str] = []
    paths: list[Path] = []
    first: dict[str, Case] = {}
    for case, source in cases:
        target = target_path(source, out, fmt, FIXTURE_SUFFIXES[case.source.suffix.lower()])
        paths.append(target)
        real = _real(target)
        shown = printable_path(target)
        if real in first:
            earlier = first[real].source
            other = printable_path(relative_to_cwd(earlier))
            apart = (
                "record without --format (each keeps its own), or in two runs with different "
                "--out directories"
                if fmt is not None and earlier.suffix.lower() != case.source.suffix.lower()
                else "record them in two runs with different --out directories"
            )
            problems.append(
                f"{shown}: both {other} and {printable_path(relative_to_cwd(case.source))} "
                f"would be recorded here; {apart}"
            )
            continue
        first[real] = case
        if real in fixtures:
            own = real == _real(case.source)
            whose = (
                "the live case itself"
                if own
                else (f"the fixture {printable_path(relative_to_cwd(fixtures[real]))} of this run")
            )
            problems.append(
                f"{shown}: is {whose}, which recording would replace; record into a directory "
                "outside the fixtures recorded (--out)"
            )
            continue
        escape = outside(target, out)
        if escape is not None:
            problems.append(escape)
            continue
        holder = names.get(case.name)
        if holder is not None and holder != real:
            problems.append(
                f"{shown}: {printable_path(relative_to_cwd(Path(holder)))} already holds a "
                f"case named {case.name!r}, so the recording would make two cases of that name "
                f"in {printable_path(out)}; remove or rename that fixture first"
            )
        elif os.path.lexists(target) and not overwrite:
            problems.append(f"{shown}: already exists; pass --overwrite to replace it")
    if problems:
        return problems
    for target in paths:
        try:
            prepare_output(target)
        except OSError as exc:
            problems.append(f"{printable_path(target)}: cannot be written: {exc.strerror or exc}")
    return problems or Targets(tuple(paths), names, out)


def _real(path: Path) -> str:
    return os.path.normcase(os.path.realpath(path))


def _names_in(out: Path) -> dict[str, str]:
    """The case names of the fixtures already under ``out``, each with its file's real path
    (a file that does not parse names nothing: it is refused by any run of it anyway)."""
    from evalrunner.fixture.load import SuiteNotFound, discover

    if not out.is_dir():
        return {}
    try:
        files = discover(out)
    except (SuiteNotFound, OSError):
        return {}
    names: dict[str, str] = {}
    for path in files:
        document = load_document(path)
        data = document.data if not isinstance(document, list) else None
        if isinstance(data, dict):
            name = data.get("name", data.get("model_name"))
            if isinstance(name, str):
                names.setdefault(name, _real(path))
    return names
