"""``@frozen``: a frozen dataclass, the same to its users, built in one step.

Every shape the one-step constructor takes is held against what ``@dataclass(frozen=True)``
makes of the same class; every shape it declines keeps dataclasses' constructor and works.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import keyword
import pickle
import pkgutil
import re
from dataclasses import FrozenInstanceError, InitVar, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

import evalrunner
import evalrunner.frozen
from evalrunner.frozen import frozen
from evalrunner.model import Message, ModelRequest, ToolCall, ToolCallRecord

PACKAGE = Path(evalrunner.__file__).parent


def _one_step(cls: type) -> bool:
    """Whether ``cls`` is built in one step: compiled, or to be compiled at its first use."""
    where = cls.__init__.__code__.co_filename  # type: ignore[misc]
    return where.startswith("<frozen ") or where == evalrunner.frozen.__file__


def _pair(spec: list[tuple[str, str]]) -> tuple[type, type]:
    """The same class made by ``frozen`` and by ``dataclass(frozen=True)``."""

    def namespace() -> dict[str, Any]:
        ns: dict[str, Any] = {"__annotations__": {name: "object" for name, _ in spec}}
        for name, kind in spec:
            if kind == "default":
                ns[name] = f"default of {name}"
            elif kind == "factory":
                ns[name] = field(default_factory=lambda name=name: [name])
        return ns

    return (
        frozen(type("Value", (), namespace())),
        dataclasses.dataclass(frozen=True)(type("Value", (), namespace())),
    )


names = st.lists(
    st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
        lambda s: s != "self" and not keyword.iskeyword(s)  # no class can have those fields
    ),
    unique=True,
    max_size=7,
)


@st.composite
def specs(draw: st.DrawFn) -> list[tuple[str, str]]:
    chosen = draw(names)
    required = draw(st.integers(0, len(chosen)))
    return [
        (name, "required" if i < required else draw(st.sampled_from(["default", "factory"])))
        for i, name in enumerate(chosen)
    ]


@given(specs(), st.data())
def test_frozen_behaves_as_a_frozen_dataclass(spec: list[tuple[str, str]], data: st.DataObject):
    ours, theirs = _pair(spec)
    assert _one_step(ours)
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    given_values = {
        name: data.draw(st.integers() | st.text(max_size=3), label=name)
        for name, kind in spec
        if kind == "required" or data.draw(st.booleans(), label=f"pass {name}")
    }
    b = theirs(**given_values)
    warming = [ours(**given_values) for _ in range(evalrunner.frozen.COMPILE_AFTER)]
    assert all(vars(early) == vars(b) for early in warming)  # by the dataclass's constructor
    a = ours(**given_values)  # by the one-step constructor, compiled by the last of them
    assert ours.__init__.__code__.co_filename.startswith("<frozen ")  # type: ignore[misc]
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    assert vars(a) == vars(b)
    assert repr(a) == repr(b)
    if all(kind != "factory" for _, kind in spec):  # a factory's list is unhashable
        assert hash(a) == hash(b)
    assert a == ours(**given_values)
    assert a != b  # a different class, as two dataclasses would be
    for name, _ in spec:
        with pytest.raises(FrozenInstanceError):
            setattr(a, name, 1)
        with pytest.raises(FrozenInstanceError):
            delattr(a, name)
    if spec:
        changed = replace(a, **{spec[0][0]: "changed"})
        assert getattr(changed, spec[0][0]) == "changed"
        assert vars(a) == vars(b)  # replace left the original alone


def test_each_factory_is_called_per_instance():
    ours, _ = _pair([("items", "factory")])
    for _ in range(evalrunner.frozen.COMPILE_AFTER):
        ours()
    first, second = ours(), ours()
    assert first.items == ["items"] and first.items is not second.items  # type: ignore[attr-defined]


def test_a_new_attribute_is_refused_as_on_a_frozen_dataclass():
    ours, _ = _pair([("a", "required")])
    value = ours(1)
    with pytest.raises(FrozenInstanceError):
        value.b = 2  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        ours()  # a required field missing
    with pytest.raises(TypeError):
        ours(1, 2)  # one argument too many


def test_shapes_the_one_step_constructor_would_get_wrong_keep_the_dataclass_one():
    @frozen
    class Posted:
        a: int
        b: int = 0

        def __post_init__(self) -> None:
            object.__setattr__(self, "b", self.a * 2)

    @frozen
    class WithInitVar:
        a: int
        scale: InitVar[int] = 1

        def __post_init__(self, scale: int) -> None:
            object.__setattr__(self, "a", self.a * scale)

    @frozen
    class NotInInit:
        a: int
        b: int = field(default=5, init=False)

    @frozen
    class KeywordOnly:
        a: int = field(kw_only=True)

    class Doubling:
        def __set_name__(self, owner: type, name: str) -> None:
            self.slot = "_" + name

        def __get__(self, instance: object, owner: type | None = None) -> int:
            if instance is None:
                raise AttributeError(self.slot)
            return instance.__dict__[self.slot]  # type: ignore[no-any-return]

        def __set__(self, instance: object, value: int) -> None:
            instance.__dict__[self.slot] = value * 2

    @frozen
    class Described:
        a: Doubling = Doubling()

    @frozen
    class Selfish:
        self: int  # dataclasses renames its own first parameter for this

    class Slotted:
        __slots__ = ("a",)
        a: int

    for cls in (Posted, WithInitVar, NotInInit, KeywordOnly, Described, Selfish):
        assert not _one_step(cls), cls.__name__
    assert Posted(3).b == 6
    assert WithInitVar(3, scale=4).a == 12
    assert NotInInit(1).b == 5
    assert KeywordOnly(a=1).a == 1
    assert Described(3).a == 6
    assert Selfish(7).self == 7
    slotted = frozen(Slotted)
    assert not _one_step(slotted)  # no __dict__ to fill
    assert slotted(1).a == 1


def test_a_class_with_no_fields_is_built():
    @frozen
    class Empty:
        note: ClassVar[str] = "not a field"

    assert _one_step(Empty)
    assert Empty() == Empty() and vars(Empty()) == {}


def _package_values() -> list[type]:
    found = []
    for info in pkgutil.walk_packages([str(PACKAGE)], "evalrunner."):
        if info.name.endswith("pytest_plugin"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and value.__module__ == module.__name__
                and dataclasses.is_dataclass(value)
            ):
                found.append(value)
    return found


def test_every_value_in_the_package_is_declared_with_frozen():
    sources = [p for p in PACKAGE.rglob("*.py") if p.name != "frozen.py"]
    declared = [p for p in sources if re.search(r"@dataclass\(frozen=True", p.read_text())]
    assert declared == [], "declare frozen values with @frozen (evalrunner/frozen.py)"


def test_the_package_values_keep_their_dataclass_signatures():
    values = [v for v in _package_values() if v.__dataclass_params__.frozen]  # type: ignore[attr-defined]
    assert len(values) > 40
    one_step = 0
    for value in values:
        parameters = inspect.signature(value).parameters
        init_fields = [f for f in dataclasses.fields(value) if f.init]
        assert list(parameters) == [f.name for f in init_fields], value
        for f in init_fields:
            default = parameters[f.name].default
            if f.default is not dataclasses.MISSING:
                assert default is f.default, (value, f.name)
            elif f.default_factory is not dataclasses.MISSING:
                assert repr(default) == "<factory>", (value, f.name)
            else:
                assert default is inspect.Parameter.empty, (value, f.name)
        one_step += _one_step(value)
    # Not built in one step: AgentContext (its workspace is a descriptor), and the classes of
    # cli that subclass typer's own dataclass without redeclaring it.
    from typer._coercion import RuntimeParam

    typers = [value for value in values if issubclass(value, RuntimeParam)]
    assert len(typers) == 3 and one_step >= len(values) - 1 - len(typers)


def test_what_crosses_the_agent_boundary_stays_immutable_and_pickles():
    def build() -> tuple[object, ...]:
        call = ToolCall("c1", "echo", '{"message":"hi"}')
        message = Message("assistant", "", tool_calls=(call,))
        request = ModelRequest(messages=(message,), tools=())
        return call, message, request, ToolCallRecord("echo", call.arguments, "hi", success=True)

    for _ in range(evalrunner.frozen.COMPILE_AFTER):  # past warm-up: the one-step constructors
        build()
    for cls in (ToolCall, Message, ModelRequest, ToolCallRecord):
        assert cls.__init__.__code__.co_filename.startswith("<frozen "), cls  # type: ignore[misc]
    call, message, request, record = build()
    for value in (call, message, request, record):
        assert pickle.loads(pickle.dumps(value)) == value
        first = dataclasses.fields(value)[0].name
        with pytest.raises(FrozenInstanceError):
            setattr(value, first, "edited")
    assert request.messages[0].tool_calls[0] is call  # type: ignore[attr-defined]


def test_a_plain_subclass_gets_the_fields_factories_make_not_a_marker():
    ours, _ = _pair([("a", "required"), ("items", "factory")])

    class Plain(ours):  # type: ignore[misc, valid-type]
        pass

    for _ in range(evalrunner.frozen.COMPILE_AFTER):
        ours(1)
    assert ours.__init__.__code__.co_filename.startswith("<frozen ")  # type: ignore[misc]
    built = Plain(1)
    assert built.items == ["items"] and built.a == 1  # type: ignore[attr-defined]
    assert vars(built) == vars(ours(1))


@pytest.mark.parametrize("name", ["type", "dict", "object", "len", "isinstance", "cls", "args"])
def test_fields_named_like_builtins_are_built_in_one_step(name: str) -> None:
    ours, theirs = _pair([(name, "required"), ("items", "factory")])
    for _ in range(evalrunner.frozen.COMPILE_AFTER):
        ours("x")
    assert ours.__init__.__code__.co_filename.startswith("<frozen ")  # type: ignore[misc]
    assert vars(ours("x")) == vars(theirs("x"))
    assert vars(ours(**{name: "x"})) == vars(theirs(**{name: "x"}))

    class Plain(ours):  # type: ignore[misc, valid-type]
        pass

    assert vars(Plain("x")) == vars(theirs("x"))


# --- __repr__, __eq__ and __hash__: closures, not compiled, the same as dataclasses' -------


def _flagged_pair(flags: list[tuple[bool, bool, bool | None]]) -> tuple[type, type]:
    """The same class, field ``f{i}`` declared ``field(repr=, compare=, hash=)`` by ``flags``."""

    def namespace() -> dict[str, Any]:
        ns: dict[str, Any] = {"__annotations__": {f"f{i}": "object" for i in range(len(flags))}}
        for i, (shown, compared, hashed) in enumerate(flags):
            ns[f"f{i}"] = field(repr=shown, compare=compared, hash=hashed)
        return ns

    return (
        frozen(type("Flagged", (), namespace())),
        dataclasses.dataclass(frozen=True)(type("Flagged", (), namespace())),
    )


flag_lists = st.lists(
    st.tuples(st.booleans(), st.booleans(), st.sampled_from([None, True, False])), max_size=5
)


@given(flag_lists, st.data())
def test_repr_eq_and_hash_follow_each_fields_flags_as_dataclasses_do(
    flags: list[tuple[bool, bool, bool | None]], data: st.DataObject
) -> None:
    ours, theirs = _flagged_pair(flags)
    assert ours.__repr__.__code__.co_filename == evalrunner.frozen.__file__  # a closure
    values = [data.draw(st.integers(-3, 3) | st.text(max_size=2) | st.none()) for _ in flags]
    others = [data.draw(st.sampled_from([v, "other"])) for v in values]
    a, b = ours(*values), theirs(*values)
    assert repr(a) == repr(b)
    assert hash(a) == hash(b)
    assert (a == ours(*others)) == (b == theirs(*others))
    assert (a != ours(*others)) == (b != theirs(*others))
    assert a.__eq__(b) is NotImplemented and b.__eq__(a) is NotImplemented
    mine = ours.__dataclass_params__  # type: ignore[attr-defined]
    yours = theirs.__dataclass_params__  # type: ignore[attr-defined]
    for name in ("init", "repr", "eq", "order", "unsafe_hash", "frozen"):
        assert getattr(mine, name) == getattr(yours, name), name
    for method in ("__repr__", "__eq__", "__hash__"):
        assert getattr(ours, method).__qualname__ == getattr(theirs, method).__qualname__
        mine_method, their_method = getattr(ours, method), getattr(theirs, method)
        assert str(inspect.signature(mine_method)) == str(inspect.signature(their_method))


def test_a_value_inside_its_own_repr_shows_as_dots_as_in_dataclasses() -> None:
    ours, theirs = _pair([("a", "required"), ("items", "factory")])
    mine, yours = ours(1), theirs(1)
    mine.items.append(mine)  # type: ignore[attr-defined]
    yours.items.append(yours)  # type: ignore[attr-defined]
    assert repr(mine) == repr(yours) == "Value(a=1, items=['items', ...])"


def test_subclasses_show_and_compare_as_dataclass_subclasses_do() -> None:
    @frozen
    class Base:
        a: int

    @frozen
    class Derived(Base):
        b: int = 2

    class Plain(Base):
        pass

    @dataclasses.dataclass(frozen=True)
    class TheirBase:
        a: int

    class TheirPlain(TheirBase):
        pass

    assert repr(Derived(1)).endswith(".<locals>.Derived(a=1, b=2)")
    assert hash(Derived(1, 3)) == hash((1, 3))
    assert Derived(1) != Base(1) and Plain(1) != Base(1) and Plain(1) == Plain(1)
    assert repr(Plain(1)).endswith(".Plain(a=1)")
    assert repr(TheirPlain(1)).endswith(".TheirPlain(a=1)")
    assert hash(Plain(1)) == hash(TheirPlain(1)) == hash((1,))


def test_a_class_that_writes_its_own_repr_keeps_it_and_gets_dataclasses_eq_and_hash() -> None:
    @frozen
    class Shown:
        a: int

        def __repr__(self) -> str:
            return "shown"

    assert repr(Shown(1)) == "shown"
    assert Shown.__eq__.__code__.co_filename != evalrunner.frozen.__file__  # dataclasses'
    assert Shown(1) == Shown(1) and hash(Shown(1)) == hash((1,))

    @frozen
    class Hashed:
        a: int

        def __hash__(self) -> int:
            return 7

    assert hash(Hashed(1)) == 7 and Hashed(1) == Hashed(1) and Hashed(1) != Hashed(2)


def test_a_field_that_cannot_be_read_fails_repr_eq_and_hash_as_in_dataclasses() -> None:
    ours, theirs = _pair([("a", "required")])
    for value in (ours(1), theirs(1)):
        del value.__dict__["a"]
        with pytest.raises(AttributeError):
            repr(value)
        with pytest.raises(AttributeError):
            hash(value)
        with pytest.raises(AttributeError):
            _ = value == value
