"""``evalrunner merge``: the JSON reports of a run's shards, read back and merged into the
report of the whole run.

A merge is refused, with every reason found, when a report cannot be read or is not a valid
report, when it is not a shard's report or was interrupted, when the shards are incompatible
(another suite, mode, agent, ``-k``, history setting, repeat count, shard count, number of
selected cases or set of refused files), when they were dealt from different versions of the
suite (their fingerprints name a case that was added, removed or changed between the shards'
runs), when a shard is given twice or is missing, or when two shards hold the same case. The
merged report lists the cases in suite order (:func:`evalrunner.selection.select.suite_order`), the
order an unsharded run reports them in; its ``duration_ms`` is the sum of the shards'.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalrunner.fixture.load import NotARegularFile, read_regular_file
from evalrunner.fixture.schemas import report_validator
from evalrunner.model import (
    AdmissionError,
    CaseFingerprint,
    CaseReport,
    GradeResult,
    JSONPath,
    Shard,
    SuiteFingerprint,
    SuiteReport,
    render_json_path,
)
from evalrunner.report.outcome import position_key
from evalrunner.report.stats import case_stats
from evalrunner.selection.select import case_identity, suite_order, take_shard
from evalrunner.text import json_reason, printable, printable_path

MAX_REPORT_BYTES = 256 * 1024 * 1024
"""Largest report file read: far above a report of the largest suite a run admits."""


class MergeRefused(Exception):
    """The reports cannot be merged; ``problems`` says why, one line each."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = tuple(problems)


@dataclass(frozen=True, slots=True)
class ShardReport:
    """A shard's report as read from ``path`` (shown as ``shown``)."""

    shown: str
    report: SuiteReport


def read_report(path: Path) -> ShardReport:
    """Read and check one JSON report; :class:`MergeRefused` says what is wrong with it."""
    shown = printable_path(path)
    try:
        raw = read_regular_file(path, MAX_REPORT_BYTES + 1)
    except NotARegularFile as exc:
        raise MergeRefused([f"{shown}: {exc}; give a report file"]) from None
    except FileNotFoundError as exc:
        if any(mark in str(path) for mark in "*?["):
            # The shell left a pattern that matched nothing as it was: no shard wrote one.
            raise MergeRefused(
                [
                    f"{shown}: no file matches this pattern; no shard wrote its report (a "
                    "shard refused at admission writes none without "
                    "--continue-on-admission-errors: see the shards' logs)"
                ]
            ) from None
        raise MergeRefused([f"{shown}: cannot read: {exc.strerror or exc}"]) from None
    except OSError as exc:
        raise MergeRefused([f"{shown}: cannot read: {exc.strerror or exc}"]) from None
    if len(raw) > MAX_REPORT_BYTES:
        raise MergeRefused(
            [f"{shown}: over {MAX_REPORT_BYTES} bytes; that is not a report evalrunner wrote"]
        )
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise MergeRefused(
            [
                f"{shown}: not UTF-8 text (byte {exc.start}); give a JSON report (evalrunner "
                "run --json FILE)"
            ]
        ) from None
    except json.JSONDecodeError as exc:
        raise MergeRefused(
            [
                f"{shown}:{exc.lineno}:{exc.colno}: not JSON ({json_reason(exc)}); give a "
                "JSON report (evalrunner run --json FILE)"
            ]
        ) from None
    except (ValueError, RecursionError):  # NaN, a 5000-digit number, nesting beyond recursion
        raise MergeRefused(
            [f"{shown}: not a JSON report evalrunner wrote (a value it never writes)"]
        ) from None
    errors = sorted(report_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = render_json_path(tuple(first.absolute_path))
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise MergeRefused(
            [
                f"{shown}: at {where}: {printable(_short(first.message))}{more}; not a valid "
                "evalrunner report"
            ]
        )
    report = _suite_report(data)
    _check_counts(shown, data, report)
    return ShardReport(shown, report)


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."


def _suite_report(data: dict[str, Any]) -> SuiteReport:
    shard = data.get("shard")
    return SuiteReport(
        suite=data["suite"],
        mode=data["mode"],
        agent=data["agent"],
        cases=tuple(_case_report(case) for case in data["cases"]),
        duration_ms=data["duration_ms"],
        # The signal number is not in the report; only whether there was one matters here.
        interrupted=0 if data["interrupted"] else None,
        trimmed_history=data["trimmed_history"],
        # Absent from the reports of runs that held results to the tools' own.
        framed_results=data.get("framed_results", False),
        keyword=data.get("keyword"),
        budget_spent=data.get("budget_spent"),
        live_stopped=data.get("live_stopped"),
        # Absent from the reports of runs without any, and of earlier versions.
        late_exits=tuple(data.get("late_exits", ())),
        shard=None if shard is None else Shard(shard["index"], shard["count"]),
        selected=None if shard is None else shard["selected"],
        admission_errors=tuple(
            AdmissionError(
                e["path"], e["message"], e["line"], e["col"], _json_path(e.get("json_path"))
            )
            for e in data.get("admission_errors", [])
        ),
        repeat=data["repeat"]["k"] if "repeat" in data else 1,
        fingerprint=None if shard is None else _fingerprint(shard.get("suite_fingerprint")),
    )


def _fingerprint(raw: dict[str, Any] | None) -> SuiteFingerprint | None:
    if raw is None:
        return None
    return SuiteFingerprint(
        paths=tuple(raw["paths"]),
        keyword=raw["keyword"],
        cases=tuple(CaseFingerprint(c["name"], c["source"], c["sha256"]) for c in raw["cases"]),
    )


def _json_path(raw: list[str | int] | None) -> JSONPath:
    return tuple(raw or ())


def _case_report(data: dict[str, Any], case: dict[str, Any] | None = None) -> CaseReport:
    """A case's report; or, given its ``case``, one of its runs (which carries no name)."""
    positions = _positions(data) if case is None else {}
    case = data if case is None else case
    return CaseReport(
        name=case["name"],
        source=case["source"],
        case_class=case["class"],
        grades=tuple(GradeResult(g["check"], g["passed"], g["detail"]) for g in data["grades"]),
        error=data["error"],
        input_tokens=data["input_tokens"],
        output_tokens=data["output_tokens"],
        llm_calls=data["llm_calls"],
        duration_ms=data["duration_ms"],
        path=case["path"],
        skipped=data.get("skipped"),
        runs=tuple(_case_report(run, case) for run in data.get("runs", [])),
        tracebacks=tuple(data.get("tracebacks", ())),
        positions=positions,
    )


def _positions(case: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Where a failed case's name and failed checks are in its fixture, as the report says
    (:attr:`CaseReport.positions`; a report of an earlier version says nowhere)."""
    found = {}
    if "line" in case:
        found["name"] = (case["line"], case["col"])
    for grade in case["grades"]:
        if "line" in grade:
            found[position_key(grade["check"])] = (grade["line"], grade["col"])
    return found


def _check_counts(shown: str, data: dict[str, Any], report: SuiteReport) -> None:
    """A report's totals must agree with its cases: a report edited by hand, or cut short,
    is not merged into a verdict."""
    problems = []
    for index, (case, raw) in enumerate(zip(report.cases, data["cases"], strict=True)):
        if case.passed != raw["passed"]:
            problems.append(
                f"{shown}: at $.cases[{index}].passed: {raw['passed']} does not follow from "
                "its error and grades"
            )
        problems.extend(_check_runs(f"{shown}: at $.cases[{index}]", case, raw, report.repeat))
    counted = {
        "passed": report.passed,
        "failed": report.failed,
        "skipped": report.skipped,
        "total": len(report.cases),
        "all_passed": report.all_passed,
    }
    for key, value in counted.items():
        if data.get(key, 0) != value:
            problems.append(f"{shown}: at $.{key}: {data[key]}, but the cases give {value}")
    if problems:
        raise MergeRefused([*problems, f"{shown}: the report does not add up; rerun the shard"])


def _check_runs(where: str, case: CaseReport, raw: dict[str, Any], repeat: int) -> list[str]:
    """A repeated case must hold K runs whose numbers give its verdict and statistics."""
    if repeat == 1:
        if "runs" in raw or "repeat" in raw:
            return [f"{where}: holds runs, but the report is not of a repeated run"]
        return []
    if "runs" not in raw or "repeat" not in raw:
        return [f"{where}: holds no runs, but the report is of a run with --repeat {repeat}"]
    problems = []
    if len(case.runs) != repeat:
        problems.append(f"{where}.runs: {len(case.runs)} run(s), but each case ran {repeat} times")
    passes = sum(1 for run in case.runs if run.passed)
    stats = case_stats(case)  # runs that never ran are counted apart, as the report writes
    counted = (raw["repeat"]["passes"], raw["repeat"]["runs"], raw["repeat"].get("not_run", 0))
    if counted != (stats.passes, stats.runs, stats.not_run):
        problems.append(f"{where}.repeat: its counts do not follow from its runs")
    if case.passed != (passes == len(case.runs)):
        problems.append(f"{where}.passed: does not follow from its runs")
    for number, (run, run_raw) in enumerate(zip(case.runs, raw["runs"], strict=True)):
        if run.passed != run_raw["passed"]:
            problems.append(
                f"{where}.runs[{number}].passed: {run_raw['passed']} does not follow from its "
                "error and grades"
            )
    return problems


_SAME = (
    ("suite", "suite"),
    ("mode", "mode"),
    ("agent", "agent"),
    ("keyword", "-k expression"),
    ("trimmed_history", "trimmed_history setting"),
    ("framed_results", "framed_results setting"),
    ("repeat", "repeat count (--repeat)"),
)


def merge_reports(shards: Sequence[ShardReport]) -> SuiteReport:
    """The report of the whole run, from every shard's report; :class:`MergeRefused` when
    they are not the complete, non-overlapping shards of one run."""
    if not shards:
        raise MergeRefused(["REPORT: give the JSON report of every shard"])
    problems: list[str] = []
    for shard in shards:
        if shard.report.shard is None:
            problems.append(
                f"{shard.shown}: the report of an unsharded run, not of a shard; merge the "
                "reports of runs with --shard I/N"
            )
        if shard.report.interrupted is not None:
            problems.append(f"{shard.shown}: the shard's run was interrupted; rerun that shard")
    if problems:
        raise MergeRefused(problems)
    first = shards[0]
    for shard in shards[1:]:
        problems.extend(_incompatibility(first, shard))
    if problems:
        raise MergeRefused(problems)
    for shard in shards:
        if shard.report.fingerprint is None:
            problems.append(
                f"{shard.shown}: its shard carries no suite_fingerprint, so the suite it was "
                "dealt from cannot be checked; rerun the shard with this version of evalrunner"
            )
    if problems:
        raise MergeRefused(problems)
    problems.extend(_duplicate_or_missing(shards))
    if len({shard.report.shard for shard in shards}) == len(shards):
        problems.extend(_overlaps(shards))  # a shard given twice overlaps itself: said above
    if problems:
        raise MergeRefused(problems)
    template = first.report
    cases = sorted(
        (case for shard in shards for case in shard.report.cases),
        key=lambda case: suite_order(case.source, case.name),
    )
    if template.selected is not None and len(cases) != template.selected:
        raise MergeRefused(
            [
                f"the shards hold {len(cases)} case(s), but their run selected "
                f"{template.selected}; rerun the shards"
            ]
        )
    misplaced = _misplaced(shards, cases)
    if misplaced:
        raise MergeRefused(misplaced)
    return SuiteReport(
        suite=template.suite,
        mode=template.mode,
        agent=template.agent,
        cases=tuple(cases),
        duration_ms=sum(shard.report.duration_ms for shard in shards),
        trimmed_history=template.trimmed_history,
        framed_results=template.framed_results,
        keyword=template.keyword,
        admission_errors=template.admission_errors,
        # A shard stopped by its token budget leaves the merged run incomplete too.
        budget_spent=next((s.report.budget_spent for s in shards if s.report.budget_spent), None),
        live_stopped=next((s.report.live_stopped for s in shards if s.report.live_stopped), None),
        # A shard's process ended outside its cases: the whole run did, as run whole it would.
        late_exits=tuple(late for s in shards for late in s.report.late_exits),
        repeat=template.repeat,
    )


def _incompatibility(first: ShardReport, other: ShardReport) -> list[str]:
    a, b = first.report, other.report
    problems = []
    for attribute, label in _SAME:
        mine, theirs = getattr(b, attribute), getattr(a, attribute)
        if mine != theirs:
            problems.append(
                f"{other.shown}: its {label} is {_value(mine)}, but {first.shown}'s is "
                f"{_value(theirs)}; merge the shards of one run"
            )
    assert a.shard is not None and b.shard is not None
    if a.shard.count != b.shard.count:
        problems.append(
            f"{other.shown}: shard {b.shard} is one of {b.shard.count}, but {first.shown}'s "
            f"shard {a.shard} is one of {a.shard.count}; merge the shards of one run"
        )
    elif (
        not problems
        and None not in (a.fingerprint, b.fingerprint)
        and a.fingerprint != b.fingerprint
    ):
        # Said after the run's settings: another -k or suite changes the fingerprint too.
        problems.extend(_other_version(first, other))
    elif a.selected != b.selected and not problems:
        # With another -k or suite, another number of selected cases follows: said above.
        problems.append(
            f"{other.shown}: its run selected {b.selected} case(s), but {first.shown}'s "
            f"{a.selected}; the shards ran different suites"
        )
    if a.admission_errors != b.admission_errors:
        problems.append(
            f"{other.shown}: its refused files differ from {first.shown}'s; the shards ran "
            "different versions of the suite"
        )
    return problems


def _other_version(first: ShardReport, other: ShardReport) -> list[str]:
    """The cases whose fixtures differ between the suites two shards were dealt from: a
    shard of another version of the suite would merge a verdict no single run gave."""
    mine, theirs = other.report.fingerprint, first.report.fingerprint
    if mine is None or theirs is None or mine == theirs:
        return []
    ours = {(c.source, c.name): c.sha256 for c in theirs.cases}
    its = {(c.source, c.name): c.sha256 for c in mine.cases}
    problems = []
    for key in sorted(ours.keys() | its.keys(), key=lambda k: suite_order(*k)):
        source, name = key
        if ours.get(key) == its.get(key):
            continue
        if key not in its:
            how = f"is not in its suite, but is in {first.shown}'s"
        elif key not in ours:
            how = f"is in its suite, but not in {first.shown}'s"
        else:
            how = f"has other content than in {first.shown}'s suite (its fixture changed)"
        problems.append(
            f"{other.shown}: case {printable(name)!r} ({printable_path(source)}) {how}; the "
            "shards were dealt from different versions of the suite: rerun every shard on one"
        )
    if not problems:  # the same cases; the paths or -k differ
        problems.append(
            f"{other.shown}: its suite fingerprint (paths, -k) differs from {first.shown}'s; "
            "merge the shards of one run"
        )
    if len(problems) > _MAX_LISTED:
        rest = len(problems) - _MAX_LISTED
        return [*problems[:_MAX_LISTED], f"... and {rest} more case(s) that differ"]
    return problems


def _value(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(printable(str(value))[:200])


def _duplicate_or_missing(shards: Sequence[ShardReport]) -> list[str]:
    problems = []
    seen: dict[int, str] = {}
    for shard in shards:
        slice_ = shard.report.shard
        assert slice_ is not None
        if slice_.index in seen:
            problems.append(
                f"{shard.shown}: shard {slice_} is also {seen[slice_.index]}; give each shard once"
            )
        else:
            seen[slice_.index] = shard.shown
    count = shards[0].report.shard.count if shards[0].report.shard else 0
    for index, shown in seen.items():
        if not 1 <= index <= count:
            problems.append(f"{shown}: shard {index}/{count} does not exist; rerun the shard")
    missing = [index for index in range(1, count + 1) if index not in seen]
    if missing:
        shown = ", ".join(f"{index}/{count}" for index in missing[:20])
        more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
        problems.append(
            f"shard(s) {shown}{more} missing: give the report of every shard, 1/{count} to "
            f"{count}/{count}"
        )
    return problems


def _overlaps(shards: Sequence[ShardReport]) -> list[str]:
    problems = []
    holder: dict[str, ShardReport] = {}
    for shard in shards:
        repeated = _repeated(shard.report)
        for case in shard.report.cases:
            first = holder.setdefault(case.name, shard)
            if first is not shard or case.name in repeated:
                where = "twice in this report" if first is shard else f"also in {first.shown}"
                problems.append(
                    f"{shard.shown}: case {printable(case.name)!r} is {where}; shards must not "
                    "overlap"
                )
    unique = list(dict.fromkeys(problems))
    if len(unique) > _MAX_LISTED:
        rest = len(unique) - _MAX_LISTED
        return [*unique[:_MAX_LISTED], f"... and {rest} more case(s) in more than one shard"]
    return unique


_MAX_LISTED = 20


def _misplaced(shards: Sequence[ShardReport], cases: Sequence[CaseReport]) -> list[str]:
    """Cases a shard holds that the deal gives to another shard.

    The deal depends only on the selected cases' identities, so dealing the union again
    must give each shard exactly its own cases; anything else is a report that was edited,
    or shards of runs that selected different cases."""
    count = shards[0].report.shard.count if shards[0].report.shard else 1
    owner: dict[str, int] = {}
    for index in range(1, count + 1):
        for case in take_shard(cases, Shard(index, count), _identity):
            owner[_key(case)] = index
    problems = []
    for shard in shards:
        assert shard.report.shard is not None
        mine = shard.report.shard.index
        for case in shard.report.cases:
            if owner.get(_key(case), mine) != mine:
                problems.append(
                    f"{shard.shown}: case {printable(case.name)!r} is in shard {mine}/{count}, "
                    f"but dealing the merged cases puts it in {owner[_key(case)]}/{count}; a "
                    "report was edited, or the shards come from different runs"
                )
    if len(problems) > _MAX_LISTED:
        rest = len(problems) - _MAX_LISTED
        return [*problems[:_MAX_LISTED], f"... and {rest} more case(s) in the wrong shard"]
    return problems


def _identity(case: CaseReport) -> bytes:
    return case_identity(case.source, case.name)


def _key(case: CaseReport) -> str:
    return f"{case.source}\0{case.name}"


def _repeated(report: SuiteReport) -> frozenset[str]:
    counts = Counter(case.name for case in report.cases)
    return frozenset(name for name, count in counts.items() if count > 1)
