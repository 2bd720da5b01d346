"""Shared test set-up."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _not_under_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """``evalrunner run`` prints GitHub annotations when GITHUB_ACTIONS=true: tests that read
    its table must read the same wherever they run (tests of that switch set it themselves)."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
