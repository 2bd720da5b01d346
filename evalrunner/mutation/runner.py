"""``evalrunner mutate``: run a suite against every mutant agent, on every agent path.

For each path the unmutated reference agent runs first (the baseline): a case it does not pass
on that path cannot tell a mutant from a working agent there, so it kills nothing. Then each
mutant runs the suite; every baseline-passing case that fails or errors against it kills it.
Every case is graded as ``evalrunner run`` grades it (:func:`evalrunner.execution.execute`),
with the project's tools, limits and ``trimmed_history``. Pure rendering is kept apart
(:func:`render_mutation`); the exit code is 1 when a mutant survives on some path, and 2 when
the baseline cannot run: it passes no case on a path, or the agent or a project tool ended the
process (``os._exit``), which no mutant's verdict could then be told from.

Something that ends, or tries to end, evalrunner's process outside every case (an ``os._exit``
from a daemon thread a project tool left, :func:`evalrunner.session.late_exits_taken`) is
decided as ``run`` decides it, by whose run it came during:

- during the baseline's: the baseline cannot run (exit 2), as when one of its cases ended
  the process;
- during a mutant's: that mutant was not judged. Its kills cannot be trusted (a process that
  ended outside a case says nothing of the mutant, and its cases' verdicts may be the
  thread's), nor can a survival, so it is neither killed nor a survivor. Like a baseline
  that cannot run, this asks to fix the project's tools, not the suite, so it is exit 2,
  not the survivor's 1. Command mutants run their tools in their own processes, so in
  evalrunner's a call while they run at once (``-j``) comes from a thread an earlier
  in-process run left; it is given to the mutant whose outcome was taken when it was seen;
- after the last mutant (:attr:`MutationReport.late_exits`): no mutant is blamed, and the
  run is exit 2 all the same.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import threading
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from evalrunner.agents.command import CommandAgentFactory, command_agent_factory
from evalrunner.agents.reference import DEFAULT_MAX_TOOL_ITERATIONS, AgentFactory, reference_agent
from evalrunner.execution import RunSettings, ended_its_process, execute
from evalrunner.model import Case, CaseReport
from evalrunner.mutation.mutants import IN_PROCESS, MUTANTS, REFERENCE, Mutant
from evalrunner.plugins import tool_source
from evalrunner.process_exit import late_exit_problem
from evalrunner.replay import process_exit_refused
from evalrunner.session import late_exits_taken


@dataclass(frozen=True, slots=True)
class MutantOutcome:
    """One mutant on one path: the cases that killed it (empty: it survived)."""

    mutant: str
    path: str
    killed_by: tuple[str, ...]
    hint: str = ""
    late_exits: tuple[str, ...] = ()
    """What ended, or tried to end, evalrunner's process outside every case while this
    mutant ran: the mutant was then not judged (see the module's docstring)."""

    @property
    def judged(self) -> bool:
        """Nothing ended the process outside a case while it ran."""
        return not self.late_exits

    @property
    def survived(self) -> bool:
        """No case killed it, and it was judged."""
        return self.judged and not self.killed_by


@dataclass(frozen=True, slots=True)
class MutationReport:
    """Every mutant on every path, with the baseline's failures per path."""

    cases: tuple[str, ...]
    paths: tuple[str, ...]
    outcomes: tuple[MutantOutcome, ...]
    baseline_failures: tuple[tuple[str, str, str], ...] = ()
    """(path, case, why) for each case the unmutated reference agent does not pass."""
    first_kill: bool = False
    live_cases: tuple[str, ...] = ()
    """Live cases of the suite, left out: mutants break scripted runs, and they have none."""
    baseline_broken: tuple[str, ...] = ()
    """Why the baseline cannot run, one line each: a path on which it passes no case, a case
    whose agent or tool ended the process, a process ended outside its cases while it ran.
    Nothing is then concluded (exit 2)."""
    late_exits: tuple[str, ...] = ()
    """What ended, or tried to end, evalrunner's process outside every case after the last
    mutant's outcome was taken (exit 2)."""

    @property
    def survivors(self) -> tuple[MutantOutcome, ...]:
        """The mutants some path let through."""
        return tuple(o for o in self.outcomes if o.survived)

    @property
    def unjudged(self) -> tuple[MutantOutcome, ...]:
        """The mutants whose run something ended outside its cases."""
        return tuple(o for o in self.outcomes if not o.judged)

    @property
    def exit_code(self) -> int:
        """0 when every mutant was killed on every path, 1 when one survived, 2 when the
        baseline cannot run (:attr:`baseline_broken`), a mutant was not judged, or the
        process was ended outside every case after the last one (see the module's
        docstring)."""
        if self.baseline_broken or self.unjudged or self.late_exits:
            return 2
        return 1 if self.survivors else 0


@dataclass(frozen=True, slots=True)
class ProjectTools:
    """The tools a project configures (``[eval] tools``, ``builtin_tools``), which the
    mutants, like the reference agent they break, are given on every path."""

    references: tuple[str, ...] = ()
    base_dir: Path = Path()
    builtin: bool = True


def path_factory(
    mutant: Mutant | None, path: str, *, stream: bool = False, tools: ProjectTools | None = None
) -> AgentFactory:
    """The agent factory for ``mutant`` (``None``: the unmutated reference) on ``path``."""
    if path == IN_PROCESS:
        return reference_agent if mutant is None else mutant.factory
    argv = [sys.executable, "-m", "evalrunner.mutation.mutants", "--wire", path]
    if stream:
        argv.append("--stream")
    if tools is not None:
        argv += ["--tools-from", str(tools.base_dir.resolve())]
        argv += [f"--tool={reference}" for reference in tools.references]
        if not tools.builtin:
            argv.append("--no-builtin-tools")
    argv.append((mutant or REFERENCE).name)
    return command_agent_factory(shlex.join(argv), cwd=Path.cwd())


def _why(report: CaseReport) -> str:
    """Why the reference agent did not pass a case, in a few words."""
    if report.error is not None:
        return report.error if len(report.error) <= 160 else report.error[:157] + "..."
    failed = [g.check for g in report.grades if not g.passed]
    return "failed " + ", ".join(failed[:3]) + (" ..." if len(failed) > 3 else "")


def run_mutants(
    cases: Sequence[Case],
    *,
    paths: Sequence[str],
    stream: bool = False,
    first_kill: bool = False,
    case_timeout: float = 60.0,
    tools: ProjectTools | None = None,
    trimmed_history: bool = False,
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS,
    on_outcome: Callable[[MutantOutcome], None] | None = None,
    jobs: int = 1,
) -> MutationReport:
    """Run ``cases`` against the baseline and every mutant on each path.

    With ``first_kill`` a mutant stops at the first case that kills it (faster; the per-case
    list then shows only those kills). ``tools`` are the project's tools (default: echo);
    ``trimmed_history`` and ``max_tool_iterations`` the project's settings, as its runs use
    them. When the baseline cannot run on a path, no mutant runs (the report says why).
    ``jobs`` above 1 runs that many command mutants at once; the report is the same.
    """
    outcomes: list[MutantOutcome] = []
    failing: list[tuple[str, str, str]] = []
    broken: list[str] = []
    live_cases = tuple(case.name for case in cases if case.live)
    cases = [case for case in cases if not case.live]
    project = RunSettings(
        tools=None
        if tools is None
        else tool_source(tools.references, tools.base_dir, include_builtin=tools.builtin),
        max_tool_iterations=max_tool_iterations,
        case_timeout=case_timeout,
        trimmed_history=trimmed_history,
        # The project's tools are its own code, built here for every case on every path:
        # one that ends the process (ctypes' _exit, exec, a signal) is its case's run error.
        supervised=tools is not None and bool(tools.references),
    )

    def verdicts(on: Sequence[Case], factory: AgentFactory) -> Generator[CaseReport, None, None]:
        # One run of the cases, as `run` executes a suite: a command mutant that takes up
        # protocol 2 serves them all from one process, and what it does after a case ended
        # still counts against that case (the executor holds its verdict until then).
        # Not from the threads that run command mutants side by side (--jobs): a fork there
        # would copy one thread of a busy process. The baseline, which runs first and alone
        # on every path, is what finds a tool that ends its process.
        here = threading.current_thread() is threading.main_thread()
        settings = replace(project, agent_factory=factory, supervised=project.supervised and here)
        try:
            with contextlib.closing(execute(on, settings)) as reports:
                yield from reports
        finally:
            # Left early (--first-kill): the process kept for a next case ends now, not
            # whenever the factory is collected.
            if isinstance(factory, CommandAgentFactory):
                factory.close()

    usable_on: dict[str, list[Case]] = {}
    stop = threading.Event()

    def judge(path: str, mutant: Mutant) -> MutantOutcome:
        factory = path_factory(mutant, path, stream=stream, tools=tools)
        killers: list[str] = []
        usable = usable_on[path]
        with contextlib.closing(verdicts(usable, factory)) as reports:
            for case, report in zip(usable, reports, strict=False):
                if not report.passed:
                    killers.append(case.name)
                    if first_kill:
                        break
                if stop.is_set():  # the run was interrupted: nothing of this is reported
                    break
        return MutantOutcome(mutant.name, path, tuple(killers), mutant.hint)

    with process_exit_refused():
        for path in paths:
            baseline = path_factory(None, path, stream=stream, tools=tools)
            usable = usable_on[path] = []
            with contextlib.closing(verdicts(cases, baseline)) as reports:
                ran = list(reports)
            late = late_exits_taken()
            if late:
                broken.append(
                    f"while the reference agent ran the suite on the {path} path, "
                    f"{late_exit_problem(list(late))}; fix the project's tools, then mutate"
                )
            for case, report in zip(cases, ran, strict=True):
                if report.passed:
                    usable.append(case)
                else:
                    failing.append((path, case.name, _why(report)))
                    if ended_its_process(report):
                        broken.append(
                            f"the reference agent's run of {case.name!r} on the {path} path "
                            f"ended its process: {_why(report)}; fix the project's tools, then "
                            "mutate"
                        )
            if cases and not usable:
                broken.append(
                    f"the reference agent passes no case on the {path} path, so no mutant can "
                    "be told from it; fix the suite or the project's tools (see the notes), "
                    "then mutate"
                )
            if broken:
                break
        tasks = [
            (path, mutant)
            for path in ([] if broken else paths)
            for mutant in MUTANTS
            if not (mutant.command_only and path == IN_PROCESS)
        ]
        # Command mutants run their tools in their own processes, so up to `jobs` of them run
        # at once on threads; in-process mutants run here, one at a time, since a project's
        # tools are not made to be called from several threads.
        pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="evalrunner mutant")
        running = {
            index: pool.submit(judge, *task)
            for index, task in enumerate(tasks)
            if jobs > 1 and task[0] != IN_PROCESS
        }
        try:
            for index, task in enumerate(tasks):
                outcome = running[index].result() if index in running else judge(*task)
                late = late_exits_taken()
                if late:
                    outcome = replace(outcome, late_exits=late)
                outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
        except BaseException:
            stop.set()  # each mutant under way stops after its current case
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return MutationReport(
        cases=tuple(case.name for case in cases),
        paths=tuple(paths),
        outcomes=tuple(outcomes),
        baseline_failures=tuple(failing),
        first_kill=first_kill,
        live_cases=live_cases,
        baseline_broken=tuple(broken),
    )


def render_mutation(report: MutationReport) -> str:
    """The mutant table (a row per mutant, a column per path: kills, or SURVIVED with a
    hint), then, per case, the mutants it kills."""
    lines: list[str] = []
    for case in report.live_cases:
        lines.append(
            f"note: {case!r} is a live case (no scripted steps), left out: mutants break "
            "scripted runs"
        )
    for path, case, why in report.baseline_failures:
        lines.append(
            f"note: the reference agent does not pass {case!r} on the {path} path, so it "
            f"kills nothing there: {why}"
        )
    if report.baseline_broken:
        lines += [f"error: {line}" for line in report.baseline_broken]
        lines.append("mutate: the baseline cannot run; no mutant was judged")
        return "\n".join(lines) + "\n"
    names = [m.name for m in MUTANTS]
    width = max(len(n) for n in names) + 2
    # A column fits its path's name (openai-responses is longer than a cell's text).
    columns = {path: max(14, len(path) + 2) for path in report.paths}
    header = "".join(path.ljust(columns[path]) for path in report.paths)
    lines.append(("mutant".ljust(width) + header).rstrip())
    by_key = {(o.mutant, o.path): o for o in report.outcomes}
    for name in names:
        cells = []
        for path in report.paths:
            outcome = by_key.get((name, path))
            if outcome is None:
                cell = "n/a"
            elif not outcome.judged:
                cell = "NOT JUDGED"
            elif outcome.survived:
                cell = "SURVIVED"
            else:
                cell = f"killed ({len(outcome.killed_by)})"
            cells.append(cell.ljust(columns[path]))
        lines.append(name.ljust(width) + "".join(cells).rstrip())
    for outcome in report.survivors:
        lines.append(
            f"survivor: {outcome.mutant} on {outcome.path}; a case that would kill it: "
            f"{outcome.hint}"
        )
    lines.append("")
    if report.first_kill:
        lines.append("cases and the mutants they killed first (--first-kill: a partial list):")
    else:
        lines.append("cases and the mutants they kill on some path (kills: mutant-path pairs):")
    for case in report.cases:
        killed = [o for o in report.outcomes if o.judged and case in o.killed_by]
        names = sorted({o.mutant for o in killed})
        shown = ", ".join(names) if names else "(none)"
        lines.append(f"  {case} ({len(killed)} kills): {shown}")
    total = len(report.outcomes)
    kills = total - len(report.survivors) - len(report.unjudged)
    lines.append("")
    lines.append(f"{kills}/{total} mutant runs killed")
    for outcome in report.unjudged:
        lines.append(
            f"error: {outcome.mutant} on {outcome.path} was not judged: while it ran, "
            f"{late_exit_problem(list(outcome.late_exits))}"
        )
    if report.late_exits:
        after = late_exit_problem(list(report.late_exits))
        lines.append(f"error: after the last mutant, {after}")
    if report.unjudged or report.late_exits:
        lines.append(
            "mutate: not every mutant could be judged; fix the project's tools, then mutate"
        )
    return "\n".join(lines) + "\n"
