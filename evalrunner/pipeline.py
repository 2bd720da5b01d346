"""The whole pipeline for one suite: load → admit → replay → grade → report values.

:func:`run_suite` is what ``evalrunner run`` calls; it returns a :class:`SuiteReport`, or a
:class:`RunRefused` when nothing could run. Rendering and exit codes live in
:mod:`evalrunner.report`.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from evalrunner.admit import admit_documents
from evalrunner.agent import DEFAULT_MAX_TOOL_ITERATIONS, AgentFactory, reference_agent
from evalrunner.grade import grade
from evalrunner.load import (
    DEFAULT_MAX_BYTES,
    SuiteNotFound,
    discover,
    iter_documents,
    relative_to_cwd,
)
from evalrunner.model import Case, CaseReport, RunInterrupted, RunRefused, SuiteReport
from evalrunner.replay import case_workspace, run_case
from evalrunner.tools import ToolSource

LIVE_NOT_BUILT = "live mode is not implemented yet (replay only)"


def evaluate_case(
    case: Case,
    *,
    agent_factory: AgentFactory = reference_agent,
    tools: ToolSource | None = None,
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS,
    case_timeout: float | None = None,
) -> CaseReport:
    """Replay and grade one case in its own workspace, removed once it is graded.

    A case whose run errored (or timed out) is not graded: its report carries the error and
    no grades.
    """
    with case_workspace() as workspace:
        record = run_case(
            case,
            agent_factory=agent_factory,
            tools=tools,
            max_tool_iterations=max_tool_iterations,
            workspace=workspace,
            timeout=case_timeout,
        )
        grades = grade(case.expects, record) if record.error is None else ()
    return CaseReport(
        name=case.name,
        source=case.source.name,
        case_class=case.case_class,
        grades=grades,
        error=record.error,
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        llm_calls=record.llm_calls,
        duration_ms=record.duration_ms,
    )


def run_suite(
    suite_dir: Path,
    *,
    mode: str = "replay",
    agent_factory: AgentFactory = reference_agent,
    tools: ToolSource | None = None,
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS,
    case_timeout: float | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> SuiteReport | RunRefused:
    """Load, admit, replay and grade every case of ``suite_dir``.

    Admission is all-or-nothing: if any fixture is refused, no case runs and every problem is
    returned at once. A :class:`RunInterrupted` (or ``KeyboardInterrupt``) stops the run
    between or during cases; the report then holds the cases that finished and the signal.
    """
    if mode == "live":
        return RunRefused((LIVE_NOT_BUILT,))
    suite_dir = relative_to_cwd(suite_dir)
    started = time.perf_counter()
    reports: list[CaseReport] = []
    interrupted: int | None = None
    try:
        try:
            fixtures = discover(suite_dir)
            admission = admit_documents(iter_documents(fixtures, max_bytes=max_bytes))
        except SuiteNotFound as exc:
            return RunRefused((str(exc),))
        except OSError as exc:
            reason = exc.strerror or exc
            return RunRefused((f"{suite_dir}: cannot read suite directory: {reason}",))
        if not admission.ok:
            return RunRefused(admission_errors=admission.errors)
        for case in admission.cases:
            reports.append(
                evaluate_case(
                    case,
                    agent_factory=agent_factory,
                    tools=tools,
                    max_tool_iterations=max_tool_iterations,
                    case_timeout=case_timeout,
                )
            )
    except RunInterrupted as stop:
        interrupted = stop.signum
    except KeyboardInterrupt:
        interrupted = int(signal.SIGINT)
    return SuiteReport(
        suite=str(suite_dir),
        mode=mode,
        cases=tuple(reports),
        duration_ms=int((time.perf_counter() - started) * 1000),
        interrupted=interrupted,
    )
