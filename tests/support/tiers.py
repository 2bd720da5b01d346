"""Parameter matrices split between the test tiers: the first combination runs by default,
the whole matrix in the ``slow`` tier (``pytest -m slow``; CI runs every tier).

For matrices whose promise does not depend on the combination (a protocol rule checked on
every wire), so that the default tier still fails when the rule breaks, and the slow tier
when it breaks on one wire only."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest


def first_by_default(combinations: Iterable[Any]) -> list[Any]:
    """``combinations`` for ``pytest.mark.parametrize``, all but the first marked slow."""
    return [
        value if number == 0 else pytest.param(*_args(value), marks=pytest.mark.slow)
        for number, value in enumerate(combinations)
    ]


def _args(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)
