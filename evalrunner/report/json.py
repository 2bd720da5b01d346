"""The JSON report (``--format json``, ``--json FILE``): every value of a run, validated by
``schemas/report.schema.json``.

The text is kept exact but encodable: what a terminal would act on is written as ``\\uXXXX``
escapes, and a lone surrogate (which UTF-8 cannot hold) as the text ``\\ud800``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evalrunner.model import CaseReport, SuiteReport
from evalrunner.report.outcome import position_key
from evalrunner.report.stats import RepeatStats, case_stats, suite_stats
from evalrunner.selection.select import report_fields
from evalrunner.text import encodable, encodable_path

REPORT_SCHEMA = "evalrunner/report/v1"


def report_data(report: SuiteReport) -> dict[str, Any]:
    """The JSON report as plain data, keys in the documented order."""
    return {
        "schema": REPORT_SCHEMA,
        "suite": encodable_path(report.suite),
        "mode": report.mode,
        "agent": None if report.agent is None else encodable(report.agent),
        "passed": report.passed,
        "failed": report.failed,
        "skipped": report.skipped,
        "total": len(report.cases),
        "all_passed": report.all_passed,
        "interrupted": report.interrupted is not None,
        "budget_spent": report.budget_spent,
        # Only when set, as framed_results below.
        **({"live_stopped": report.live_stopped} if report.live_stopped else {}),
        # Only when something happened: reports of runs without keep their shape.
        **({"late_exits": list(report.late_exits)} if report.late_exits else {}),
        "trimmed_history": report.trimmed_history,
        # Only when set: reports of runs that hold every result to the tool's own keep
        # their shape.
        **({"framed_results": True} if report.framed_results else {}),
        **report_fields(report),  # keyword, shard, admission_errors: only when used
        **_suite_repeat(report),  # only with --repeat above 1
        "duration_ms": report.duration_ms,
        "cases": [_case_data(case, report.repeat) for case in report.cases],
    }


def _suite_repeat(report: SuiteReport) -> dict[str, Any]:
    if report.repeat <= 1:
        return {}
    stats = suite_stats(report)
    return {
        "repeat": {
            "k": report.repeat,
            "runs": stats.runs.runs,
            "passes": stats.runs.passes,
            "not_run": stats.runs.not_run,
            **_rates(stats.runs),
            "pass_hat_k": _rate(stats.pass_hat_k),
            "pass_at_k": _rate(stats.pass_at_k),
            "cases_pass_hat_k": stats.pass_all,
            "cases_pass_at_k": stats.pass_any,
            "flaky": len(stats.flaky),
        }
    }


def _rates(stats: RepeatStats) -> dict[str, Any]:
    """The pass rate and its interval over the runs that ran; null when none ran (runs that
    never ran are not failures)."""
    if not stats.ran:
        return {"pass_rate": None, "wilson_95": None}
    return {
        "pass_rate": _rate(stats.pass_rate),
        "wilson_95": [_rate(bound) for bound in stats.interval],
    }


def _rate(value: float) -> float:
    # Six decimals: the same text on every platform, and far finer than any interval.
    return round(value, 6)


def _case_data(case: CaseReport, repeat: int = 1) -> dict[str, Any]:
    # A case that failed or errored says where in its fixture: the renderers point there, and
    # merge, which reads reports alone, places it as the unsharded run does.
    data = _run_data(case, placed=not case.passed and case.skipped is None)
    if repeat > 1:
        stats = case_stats(case)
        data["repeat"] = {
            "runs": stats.runs,
            "passes": stats.passes,
            "not_run": stats.not_run,
            **_rates(stats),
            "pass_hat_k": stats.pass_all,
            "pass_at_k": stats.pass_any,
            "flaky": stats.flaky,
        }
        data["runs"] = [_verdict_data(run) for run in case.runs or (case,)]
    return data


def _verdict_data(run: CaseReport) -> dict[str, Any]:
    """One run of a repeated case: its verdict and what it cost."""
    data = _run_data(run)
    for key in ("name", "source", "path", "class"):
        del data[key]  # a run has no place of its own: its case's line and col say it
    return data


def _run_data(case: CaseReport, *, placed: bool = False) -> dict[str, Any]:
    def at(key: str) -> dict[str, int]:
        spot = case.positions.get(key) if placed else None
        return {} if spot is None else {"line": spot[0], "col": spot[1]}

    return {
        "name": encodable(case.name),
        "source": encodable_path(case.source),
        "path": encodable_path(case.path or case.source),
        "class": case.case_class,
        "passed": case.passed,
        "error": None if case.error is None else encodable(case.error),
        "skipped": case.skipped,
        "grades": [
            {
                "check": encodable(g.check),
                "passed": g.passed,
                "detail": encodable(g.detail),
                **({} if g.passed else at(position_key(g.check))),
            }
            for g in case.grades
        ],
        "input_tokens": case.input_tokens,
        "output_tokens": case.output_tokens,
        "llm_calls": case.llm_calls,
        "duration_ms": case.duration_ms,
        # Only when there is one: a merge of shards shows them as the unsharded run does.
        **({"tracebacks": [encodable(t) for t in case.tracebacks]} if case.tracebacks else {}),
        # Last, as every key that is there only at times: the specified ones lead.
        **at("name"),
    }


# Characters the JSON encoder leaves raw with ensure_ascii=False that a terminal acts on (DEL,
# C1 controls, bidi overrides and isolates) or that end a line in JavaScript (U+2028/9).
_JSON_RAW_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def render_json(report: SuiteReport) -> str:
    """The JSON report (validates against ``schemas/report.schema.json``), newline-terminated.

    Printed to a terminal it is as safe as the table: the characters a terminal would act on
    are written as ``\\uXXXX`` escapes, which decode to the same strings.
    """
    text = json.dumps(report_data(report), indent=2, ensure_ascii=False)
    # Such characters can only occur inside JSON strings, where an escape means the same.
    return _JSON_RAW_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"
