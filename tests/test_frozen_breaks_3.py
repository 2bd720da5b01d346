"""Breaker cases: ``@frozen`` against ``@dataclass(frozen=True)`` on the same class body."""

from __future__ import annotations

import abc
import dataclasses
import typing

import pytest

from evalrunner.frozen import frozen


def _frozen_dataclass(cls: type) -> type:
    return dataclasses.dataclass(frozen=True)(cls)


@pytest.mark.parametrize("method", ["__repr__", "__eq__", "__hash__"])
@pytest.mark.parametrize("decorate", [_frozen_dataclass, frozen], ids=["dataclass", "frozen"])
def test_abstract_comparing_method_is_implemented(decorate, method):
    # dataclass writes the method before abc.update_abstractmethods; @frozen sets its
    # closures after dataclasses has already recomputed __abstractmethods__.
    base = abc.ABCMeta("Base", (abc.ABC,), {method: abc.abstractmethod(lambda self: None)})

    @decorate
    class Value(base):  # type: ignore[misc, valid-type]
        a: int

    assert Value.__abstractmethods__ == frozenset()
    assert repr(Value(1)).endswith("Value(a=1)")
    assert Value(1) == Value(1)
    assert hash(Value(1)) == hash((1,))


@pytest.mark.parametrize("decorate", [_frozen_dataclass, frozen], ids=["dataclass", "frozen"])
def test_type_hints_of_init_before_warm_up(decorate):
    # Before COMPILE_AFTER constructions @frozen's __init__ is a (*args: Any, **kwargs: Any)
    # wrapper whose string annotations are evaluated in the class's module (via __wrapped__).
    namespace: dict[str, object] = {"__name__": __name__}
    exec("class Value:\n    a: int\n", namespace)
    value = decorate(namespace["Value"])
    assert typing.get_type_hints(value.__init__) == {"a": int, "return": type(None)}
