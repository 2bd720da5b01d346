"""Inputs a breaker found where ``indented_json`` did not behave as ``json.dumps(data,
indent=2, ensure_ascii=False)``, which it claims to match for any input, refusals included."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from evalrunner.report.json import indented_json


def _stdlib(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def _circular_list() -> list[Any]:
    data: list[Any] = [1]
    data.append(data)
    return data


def _circular_dict() -> dict[str, Any]:
    data: dict[str, Any] = {"a": 1}
    data["self"] = data
    return data


def _circular_deep() -> dict[str, Any]:
    inner: dict[str, Any] = {"cases": []}
    data = {"report": [inner]}
    inner["cases"].append(data)
    return data


@pytest.mark.parametrize("make", [_circular_list, _circular_dict, _circular_deep])
def test_a_circular_reference_is_refused_as_json_dumps_refuses_it(make: Any) -> None:
    # json.dumps (check_circular=True): ValueError("Circular reference detected").
    # (indented_json once recursed until RecursionError instead.)
    with pytest.raises(ValueError, match=r"^Circular reference detected$"):
        _stdlib(make())
    with pytest.raises(ValueError, match=r"^Circular reference detected$"):
        indented_json(make())


@pytest.mark.parametrize("data", [{"a": object()}, [1, {2, 3}], {"b": b"bytes"}])
def test_a_refusal_is_not_chained_to_the_internal_fallback_signal(data: Any) -> None:
    # json.dumps's TypeError has no __context__; indented_json's carries its private
    # _Unusual (raised inside the except block), so a printed traceback gains a
    # "During handling of the above exception, another exception occurred" section
    # with a traceback as deep as the data.
    with pytest.raises(TypeError) as theirs:
        _stdlib(data)
    with pytest.raises(TypeError) as mine:
        indented_json(data)
    assert theirs.value.__context__ is None
    assert mine.value.__context__ is None


class _OddFloat(float):
    """A float whose ordering is overridden (equality is float's own)."""

    def __gt__(self, other: object) -> bool:
        return False

    def __lt__(self, other: object) -> bool:
        return True


def test_an_infinite_float_subclass_is_signed_as_json_dumps_signs_it() -> None:
    # json.dumps decides the sign by `o == inf` / `o == -inf`; indented_json by `value > 0`.
    data = [_OddFloat(math.inf), _OddFloat(-math.inf)]
    assert _stdlib(data) == "[\n  Infinity,\n  -Infinity\n]"
    assert indented_json(data) == _stdlib(data)
