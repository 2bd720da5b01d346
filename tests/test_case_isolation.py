"""What a case costs and what it cannot see: its workspace is made only when the agent asks
for it and removed after; cases share a reused case thread, yet no context variable, event
loop or workspace reaches the next case; a timed-out case's thread is never reused."""

from __future__ import annotations

import asyncio
import contextvars
import tempfile
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evalrunner.agents.reference import AgentContext, ReferenceAgent
from evalrunner.model import Case, Expectations, TextResponse, Turn
from evalrunner.replay import LazyWorkspace, _CaseThread, run_case
from evalrunner.session import evaluate_case

CASE = Case(
    name="hello",
    turns=(Turn("hi", (TextResponse("hello"),)),),
    expects=Expectations(response_contains=("hello",)),
)
TIMEOUT = 30.0  # a safety net: none of these cases waits for it


def user_agent(context: AgentContext) -> ReferenceAgent:
    """The reference agent behind a factory of the user's: code evalrunner did not write, so
    a case with a timeout runs it on the case thread."""
    return ReferenceAgent(context)


def test_only_evalrunners_own_code_runs_inline_under_a_timeout() -> None:
    seen: list[threading.Thread] = []

    class Noting(ReferenceAgent):
        def respond(self, user_input: str) -> str:
            seen.append(threading.current_thread())
            return super().respond(user_input)

    assert run_case(CASE, agent_factory=Noting, timeout=TIMEOUT).error is None
    assert seen[-1] is not threading.current_thread()  # a user's agent: the case thread
    import evalrunner.replay as replay

    def spy(run: Any, timeout: float) -> None:
        raise AssertionError("the reference agent and the built-in tools need no case thread")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replay, "_drive_in_time", spy)
        assert run_case(CASE, timeout=TIMEOUT).error is None
        # ... but tools of the user's are their code: the case thread again.
        with pytest.raises(AssertionError, match="need no case thread"):
            run_case(CASE, tools={}, timeout=TIMEOUT)


@pytest.fixture
def case_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Workspaces are made under ``tmp_path``, so that they can be counted."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def made(root: Path) -> list[Path]:
    return sorted(root.glob("evalrunner-case-*"))


def test_an_agent_that_never_asks_gets_no_directory(case_dirs: Path) -> None:
    seen: list[Path] = []
    original = tempfile.mkdtemp

    def counting(*args: Any, **kwargs: Any) -> str:
        path = original(*args, **kwargs)
        seen.append(Path(path))
        return path

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "mkdtemp", counting)
        report = evaluate_case(CASE, case_timeout=TIMEOUT)
    assert report.passed
    assert seen == []


class UsesWorkspace(ReferenceAgent):
    paths: ClassVar[list[Path]] = []

    def __init__(self, context: AgentContext) -> None:
        super().__init__(context)
        workspace = context.workspace
        assert workspace.is_dir() and not any(workspace.iterdir())  # fresh and empty
        (workspace / "notes.txt").write_text("left by this case", encoding="utf-8")
        UsesWorkspace.paths.append(workspace)


def test_an_agent_that_asks_gets_a_fresh_directory_removed_after(case_dirs: Path) -> None:
    UsesWorkspace.paths = []
    for _ in range(3):
        assert evaluate_case(CASE, agent_factory=UsesWorkspace, case_timeout=TIMEOUT).passed
    first, second, third = UsesWorkspace.paths
    assert len({first, second, third}) == 3
    assert made(case_dirs) == []


def test_the_workspace_is_one_directory_per_case_however_often_asked() -> None:
    lazy = LazyWorkspace()
    assert not lazy.made
    try:
        assert lazy() == lazy() and lazy().is_dir() and lazy.made
    finally:
        path = lazy()
        lazy.remove()
    assert not path.exists()


def test_asking_after_the_case_ended_is_a_run_error() -> None:
    from evalrunner.model import RunError

    lazy = LazyWorkspace()
    lazy.remove()
    with pytest.raises(RunError, match="after the case ended"):
        lazy()


LEAK: contextvars.ContextVar[str] = contextvars.ContextVar("leak", default="clean")


class SetsContext(ReferenceAgent):
    seen: ClassVar[list[str]] = []

    def respond(self, user_input: str) -> str:
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:  # none set on this thread: what a thread of its own would see
            loop = None
        SetsContext.seen.append(f"{LEAK.get()}, loop {'set' if loop else 'none'}")
        LEAK.set("left by an earlier case")
        asyncio.set_event_loop(asyncio.new_event_loop())
        return super().respond(user_input)


def test_context_variables_and_event_loops_do_not_reach_the_next_case() -> None:
    SetsContext.seen = []
    threads: list[threading.Thread] = []

    class Recording(SetsContext):
        def respond(self, user_input: str) -> str:
            threads.append(threading.current_thread())
            return super().respond(user_input)

    for _ in range(3):
        assert run_case(CASE, agent_factory=Recording, timeout=TIMEOUT).error is None
    assert SetsContext.seen == ["clean, loop none"] * 3
    assert threads[0] is threads[1] is threads[2]  # one thread served them all


class Hangs(ReferenceAgent):
    release = threading.Event()

    def respond(self, user_input: str) -> str:
        Hangs.release.wait(60)
        return "late"


def test_a_timed_out_cases_thread_is_never_given_another_case() -> None:
    Hangs.release = threading.Event()
    try:
        hung = run_case(CASE, agent_factory=Hangs, timeout=0.2)
        assert hung.error == "timed out after 0.2s"
        stuck = [t for t in threading.enumerate() if t.name == "evalrunner case" and t.is_alive()]
        idle = {thread._thread for thread in _CaseThread._idle}
        abandoned = [t for t in stuck if t not in idle]
        assert len(abandoned) == 1
        assert run_case(CASE, timeout=TIMEOUT).error is None  # on another thread
        assert abandoned[0] not in {thread._thread for thread in _CaseThread._idle}
    finally:
        Hangs.release.set()
    abandoned[0].join(10)
    assert not abandoned[0].is_alive()  # it left once its agent returned


def test_cases_from_several_threads_at_once_each_get_their_own_case_thread() -> None:
    results: list[str | None] = []

    def one() -> None:
        results.append(run_case(CASE, timeout=TIMEOUT).error)

    callers = [threading.Thread(target=one) for _ in range(8)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(30)
    assert results == [None] * 8
    assert len(_CaseThread._idle) <= 8  # at most one idle thread per caller


def _run_in_child(queue: Any) -> None:
    queue.put(run_case(CASE, agent_factory=user_agent, timeout=TIMEOUT).error)


def test_a_forked_process_does_not_wait_on_its_parents_case_threads() -> None:
    import multiprocessing

    # the parent now has an idle thread
    assert run_case(CASE, agent_factory=user_agent, timeout=TIMEOUT).error is None
    assert _CaseThread._idle
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_run_in_child, args=(results,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert results.get(timeout=5) is None
