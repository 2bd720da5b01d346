"""Stage 5, report: render a :class:`~evalrunner.model.SuiteReport`, decide the exit code,
write report files.

One module per format, each pure (values in, text out): :mod:`~evalrunner.report.table` (what a
person reads), :mod:`~evalrunner.report.json` (every value, for tools),
:mod:`~evalrunner.report.junit` (for CI test pages) and :mod:`~evalrunner.report.github`
(GitHub Actions annotations). :mod:`~evalrunner.report.outcome` holds what they share, exit
codes included; :mod:`~evalrunner.report.write` is the one writer.

Everything in a report that came from outside (case names, file names, replies, tool output,
run errors) is made safe on the way out, as each format requires: the table, the annotations
and the JUnit file escape control characters, bidi overrides and lone surrogates
(:func:`evalrunner.text.printable`); the JSON report keeps the text exact but escapes what a
terminal would act on.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evalrunner.report.outcome import (
    EXIT_FAILED,
    EXIT_PASSED,
    EXIT_REFUSED,
    agent_label,
    exit_code,
    signal_name,
)
from evalrunner.report.table import Verbosity, render_table

if TYPE_CHECKING:
    from evalrunner.report.github import github_annotations, render_github
    from evalrunner.report.json import REPORT_SCHEMA, render_json, report_data
    from evalrunner.report.junit import render_junit
    from evalrunner.report.write import UnsafeOutput, prepare_output, write_atomic, write_new

_ON_FIRST_USE = {
    "github_annotations": "evalrunner.report.github",
    "render_github": "evalrunner.report.github",
    "REPORT_SCHEMA": "evalrunner.report.json",
    "render_json": "evalrunner.report.json",
    "report_data": "evalrunner.report.json",
    "render_junit": "evalrunner.report.junit",
    "UnsafeOutput": "evalrunner.report.write",
    "prepare_output": "evalrunner.report.write",
    "write_atomic": "evalrunner.report.write",
    "write_new": "evalrunner.report.write",
}
"""What a plain run (the table on stdout, no report file) does not use, imported when first
asked for: JUnit's XML, the GitHub annotations, the JSON report (with the repeat statistics
it carries) and the file writer (with the tempfile module beneath it) each add imports to the
start of a run that asks for none of them."""


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'evalrunner.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "EXIT_FAILED",
    "EXIT_PASSED",
    "EXIT_REFUSED",
    "REPORT_SCHEMA",
    "UnsafeOutput",
    "Verbosity",
    "agent_label",
    "exit_code",
    "github_annotations",
    "prepare_output",
    "render_github",
    "render_json",
    "render_junit",
    "render_table",
    "report_data",
    "signal_name",
    "write_atomic",
    "write_new",
]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
