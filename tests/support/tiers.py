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


def each_once_by_default(rows: Iterable[Any], columns: Iterable[Any]) -> list[Any]:
    """Every combination of ``rows`` and ``columns`` for ``pytest.mark.parametrize`` (a row's
    values, then a column's), all marked slow but the few it takes for every row and every
    column to run by default: for a promise checked on every path of two independent axes
    (each misbehaviour on each front end), so that a path broken on either axis still fails
    by default."""
    row_list, column_list = list(rows), list(columns)
    combined = []
    for i, row in enumerate(row_list):
        for j, column in enumerate(column_list):
            values = (*_args(row), *_args(column))
            by_default = i == j % len(row_list) or j == i % len(column_list)
            marks = () if by_default else (pytest.mark.slow,)
            combined.append(pytest.param(*values, marks=marks))
    return combined


def slow(*values: Any) -> Any:
    """One combination for ``pytest.mark.parametrize``, in the slow tier only: for a matrix
    of inputs to one check whose default-tier entries already reach each of its paths."""
    return pytest.param(*values, marks=pytest.mark.slow)


def _args(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)
