"""zeroclaw's own fixtures run unchanged and green (read from ../shared, never copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalrunner import SuiteReport, run_suite

COMPAT = Path(__file__).resolve().parent.parent.parent / "shared" / "compat" / "zeroclaw"

pytestmark = pytest.mark.skipif(
    not COMPAT.is_dir(),
    reason=f"{COMPAT} is absent: zeroclaw's fixtures live in the shared folder beside the repo",
)


def test_every_zeroclaw_fixture_passes_unchanged() -> None:
    outcome = run_suite(COMPAT)
    assert isinstance(outcome, SuiteReport), outcome.lines()
    assert len(outcome.cases) == len(list(COMPAT.glob("*.json")))
    for case in outcome.cases:
        assert case.error is None, (case.name, case.error)
        assert all(g.passed for g in case.grades), (case.name, case.grades)
        assert case.grades, case.name
    assert outcome.all_passed
