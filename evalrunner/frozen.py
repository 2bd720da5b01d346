"""``@frozen``: the package's immutable values, built at the cost of a mutable one.

Every value handed between the stages is a frozen dataclass. The constructor dataclasses
writes for one calls ``object.__setattr__`` once per field, to step around the class's own
refusing ``__setattr__``, and that made construction two to three times dearer than a
mutable class's: a replayed case builds about thirty values, and their constructors were an
eighth of its instructions (bench/instructions.py).

:func:`frozen` is ``@dataclass(frozen=True)`` (the same fields, ``__eq__``, ``__hash__``,
``__repr__``, refusals to assign or delete, pickling and ``replace``) with one change: the
constructor fills the instance's ``__dict__`` in a single call, once the class has been
built :data:`COMPILE_AFTER` times (compiling it costs about forty constructions' savings).
Where that would not be the same as what dataclasses does, the class keeps dataclasses'
constructor:

- a ``__post_init__`` or an ``InitVar`` (work the constructor does besides storing fields);
- a field with ``init=False``, or keyword-only fields;
- a constructor written in the class (dataclasses keeps it);
- a field that is a data descriptor on the class (its ``__set__`` must run), and an
  instance of a plain subclass (which may hold one);
- no instance ``__dict__`` (``__slots__``);
- a field named ``self`` or ``__frozen_...``: the generated constructor's own names (every
  name it uses, ``type`` included, is bound under a reserved ``__frozen_`` name, since a
  field may be called anything else).

It also makes a class faster to create. Python 3.11's dataclasses compiles each method it
writes on its own, six for a frozen class, and those compilations were a quarter of the
package's import time (a fifth of a small run). ``__repr__``, ``__eq__`` and ``__hash__``
need no compiling: here they are closures over the class's field names, reading the fields
with one :func:`operator.attrgetter`, each returning what dataclasses' returns (the same
text, the same tuples compared and hashed, ``...`` for a value inside its own repr). A class
that writes any of the three itself gets all three from dataclasses.
"""

from __future__ import annotations

import abc
import dataclasses
from _thread import get_ident
from collections.abc import Callable
from operator import attrgetter
from types import FunctionType
from typing import Any, TypeVar, dataclass_transform

__all__ = ["frozen"]

_T = TypeVar("_T")


class _Factory:
    """The default of a parameter whose field has a ``default_factory``: call it."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()

COMPILE_AFTER = 64
"""Constructions of a class by the dataclass's constructor before its one-step one is
compiled."""


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(cls: type[_T]) -> type[_T]:
    """``@dataclass(frozen=True)``, with a constructor that stores the fields in one step and
    ``__repr__``, ``__eq__`` and ``__hash__`` that need no compiling (see the module docstring)."""
    written = "__init__" in vars(cls)  # dataclasses keeps a constructor the class writes
    if any(name in vars(cls) for name in _COMPARING):
        built = dataclasses.dataclass(frozen=True)(cls)
    else:
        built = dataclasses.dataclass(frozen=True, repr=False, eq=False)(cls)
        _show_and_compare(built)
    if not written and _one_step_fits(built):
        built.__init__ = _after_warm_up(built)  # type: ignore[method-assign]
    return built


_COMPARING = ("__repr__", "__eq__", "__hash__")


def _show_and_compare(cls: type[Any]) -> None:
    """Give ``cls`` the ``__repr__``, ``__eq__`` and ``__hash__`` that ``dataclass(frozen=True)``
    writes, as closures, and record them in its parameters as dataclasses would."""
    fields = dataclasses.fields(cls)
    shown = _values([f.name for f in fields if f.repr])
    labels = [f"{f.name}=" for f in fields if f.repr]
    compared = _values([f.name for f in fields if f.compare])
    hashed = _values([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
    showing: set[tuple[int, int]] = set()

    def __repr__(self: object) -> str:
        key = id(self), get_ident()
        if key in showing:  # a value inside its own repr, as dataclasses' recursion guard says
            return "..."
        showing.add(key)
        try:
            inner = ", ".join([a + repr(b) for a, b in zip(labels, shown(self), strict=True)])
            return f"{self.__class__.__qualname__}({inner})"
        finally:
            showing.discard(key)

    def __eq__(self: object, other: object) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: object) -> int:
        return hash(hashed(self))

    for method in (__repr__, __eq__, __hash__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        method.__module__ = cls.__module__
        method.__annotations__ = {}  # as dataclasses' own: their hints name nothing of ours
        setattr(cls, method.__name__, method)
    params = cls.__dataclass_params__
    params.repr = params.eq = True
    # dataclasses did this before the three were set: an abstract one in a base is now met.
    abc.update_abstractmethods(cls)


def _values(names: list[str]) -> Callable[[object], tuple[Any, ...]]:
    """The tuple of these attributes of a value (``attrgetter`` of one name is no tuple)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda value: (one(value),)
    return lambda value: ()


def _one_step_fits(cls: type[Any]) -> bool:
    """Whether the one-step constructor does what the dataclass's own does (see the module
    docstring)."""
    code = cls.__init__.__code__
    names = tuple(f.name for f in dataclasses.fields(cls))
    return not (
        code.co_varnames[1 : code.co_argcount] != names  # init=False fields, or InitVars
        or code.co_kwonlyargcount
        or hasattr(cls, "__post_init__")
        or cls.__dictoffset__ == 0
        or any(name == "self" or name.startswith("__frozen_") for name in names)
        or any(_data_descriptor(cls, name) for name in names)
    )


def _after_warm_up(cls: type[Any]) -> Callable[..., None]:
    """The dataclass's constructor, counting its calls: at the :data:`COMPILE_AFTER`-th it
    compiles the one-step constructor and puts it in its place.

    Compiling one costs about forty constructions' worth of savings, so a class built a few
    times in a run (most of them, in a small suite) is never compiled at all.
    """
    dataclass_init = cls.__init__
    calls = 0

    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == COMPILE_AFTER:
            cls.__init__ = _one_step_init(cls, dataclass_init)
        dataclass_init(self, *args, **kwargs)

    __init__.__qualname__ = dataclass_init.__qualname__
    __init__.__wrapped__ = dataclass_init  # type: ignore[attr-defined]  # for inspect.signature
    # typing.get_type_hints reads these in the class's module, following __wrapped__: they
    # must be the dataclass constructor's, not this wrapper's (which name nothing there).
    __init__.__annotations__ = dict(dataclass_init.__annotations__)
    return __init__


def _one_step_init(cls: type[Any], dataclass_init: FunctionType) -> FunctionType:
    """The constructor that stores the fields of ``cls`` with one ``__dict__.update``."""
    namespace: dict[str, object] = {
        "__frozen_factory__": _FACTORY,
        "__frozen_class__": cls,
        "__frozen_dataclass_init__": dataclass_init,
        "__frozen_type__": type,  # a field may be called "type", hiding the builtin
    }
    signature: list[str] = []
    body: list[str] = []
    fields = dataclasses.fields(cls)
    for number, f in enumerate(fields):
        if f.default is not dataclasses.MISSING:
            namespace[f"__frozen_default_{number}__"] = f.default
            signature.append(f"{f.name}=__frozen_default_{number}__")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"__frozen_make_{number}__"] = f.default_factory
            signature.append(f"{f.name}=__frozen_factory__")
            body.append(
                f"    if {f.name} is __frozen_factory__:\n"
                f"        {f.name} = __frozen_make_{number}__()"
            )
        else:
            signature.append(f.name)
    # A subclass that is not a dataclass itself inherits this constructor, and may hold a
    # descriptor or a slot where a field was: it gets the dataclass's constructor, which
    # goes through them.
    passed = ", ".join(f.name for f in fields)
    body.append(
        "    if __frozen_type__(self) is not __frozen_class__:\n"
        f"        return __frozen_dataclass_init__(self, {passed})"
    )
    stored = ", ".join(f"{f.name}={f.name}" for f in fields)
    body.append(f"    self.__dict__.update({stored})" if fields else "    pass")
    source = f"def __init__(self, {', '.join(signature)}):\n" + "\n".join(body) + "\n"
    exec(compile(source, f"<frozen {cls.__qualname__}>", "exec"), namespace)
    init = namespace["__init__"]
    assert isinstance(init, FunctionType)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(dataclass_init.__annotations__)
    return init


def _data_descriptor(cls: type[Any], name: str) -> bool:
    """Whether ``name`` is a data descriptor on ``cls`` (looked up as Python does, on the
    type of what the class holds, without calling its ``__get__``)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            kind = type(vars(klass)[name])
            return hasattr(kind, "__set__") or hasattr(kind, "__delete__")
    return False
