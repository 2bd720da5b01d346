"""Found by a breaker, fixed since: where ``@frozen`` differed from ``@dataclass(frozen=True)``
once its one-step constructor was compiled, and where the rtoml fast path of TOML fixtures
gave other data than tomllib (the reference) for the same text."""

from __future__ import annotations

import contextlib
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

import evalrunner.frozen
from evalrunner import load
from evalrunner.frozen import frozen

needs_rtoml = pytest.mark.skipif(load._rtoml_loads() is None, reason="rtoml is not installed")


def _warm(cls: type, *args: Any) -> None:
    """Construct ``cls`` past COMPILE_AFTER, ignoring failures (they count too)."""
    for _ in range(evalrunner.frozen.COMPILE_AFTER + 1):
        with contextlib.suppress(Exception):
            cls(*args)


# --- @frozen ----------------------------------------------------------------------------------


def test_a_user_defined_init_is_kept_after_warm_up() -> None:
    # dataclasses never replaces an __init__ written in the class body; @frozen must not either.
    @frozen
    class Port:
        number: int

        def __init__(self, number: int | str) -> None:
            object.__setattr__(self, "number", int(number))

    _warm(Port, "80")
    port = Port("443")
    assert port.number == 443 and isinstance(port.number, int)


def test_a_user_defined_init_still_validates_after_warm_up() -> None:
    @frozen
    class Positive:
        value: int

        def __init__(self, value: int) -> None:
            if value < 0:
                raise ValueError("negative")
            object.__setattr__(self, "value", value)

    _warm(Positive, 1)
    with pytest.raises(ValueError, match="negative"):
        Positive(-1)


def test_a_plain_subclass_property_over_a_field_is_refused_as_by_dataclasses() -> None:
    # The dataclass constructor stores with object.__setattr__, so the subclass's property
    # (no setter) refuses it; the one-step constructor, inherited, must not store past it.
    @frozen
    class Base:
        x: int

    class Derived(Base):
        @property
        def x(self) -> int:  # type: ignore[override]
            return -1

    _warm(Base, 1)
    with pytest.raises(AttributeError):
        Derived(1)


def test_a_field_that_is_a_delete_only_data_descriptor_is_refused_as_by_dataclasses() -> None:
    # A descriptor with __get__ and __delete__ is a data descriptor: object.__setattr__ on it
    # raises AttributeError('__set__'). @frozen's check only looks for __set__.
    class Deletable:
        def __get__(self, instance: object, owner: type | None = None) -> int:
            return 0

        def __delete__(self, instance: object) -> None:
            pass

    @frozen
    class Holder:
        x: int = Deletable()  # type: ignore[assignment]

    _warm(Holder, 5)
    with pytest.raises(AttributeError):
        Holder(5)


# --- TOML: the rtoml fast path against tomllib ------------------------------------------------


@needs_rtoml
@pytest.mark.parametrize(
    "text",
    [
        'a = """x\r\ny"""\r\n',
        "a = '''x\r\ny'''\r\n",
        'a = """\n\r\nx"""\n',
    ],
)
def test_crlf_inside_a_multiline_string_reads_as_tomllib(text: str) -> None:
    # tomllib reads "\r\n" as "\n" everywhere (also inside multi-line strings); rtoml keeps
    # "\r\n" in the string, and the fast path hands that on.
    assert load._plain_toml(text, text.encode()) == tomllib.loads(text)


@needs_rtoml
def test_a_crlf_fixture_admits_the_same_text_as_tomllib_reads() -> None:
    # A fixture saved with Windows line endings: its multi-line user input must be what
    # tomllib reads ("line one\nline two"), not depend on whether rtoml took the fast path.
    text = (
        'name = "crlf"\r\n'
        "[[turns]]\r\n"
        'user_input = """line one\r\nline two"""\r\n'
        "[[turns.steps]]\r\n"
        'response = { type = "text", content = "ok" }\r\n'
        "[expects]\r\n"
        'response_contains = ["ok"]\r\n'
    )
    document = load.parse_document(text.encode(), "toml", Path("crlf.toml"))
    assert isinstance(document, load.RawDocument)
    assert document.data == tomllib.loads(text)
    assert document.data["turns"][0]["user_input"] == "line one\nline two"  # type: ignore[index,call-overload]


@needs_rtoml
@pytest.mark.parametrize(
    "text",
    [
        "[a.b]\n[c]\n[a]\nx = 1\n",
        "[[a.b]]\n[c]\n[[a.b]]\n[a]\nq = 1\n",
    ],
)
def test_a_super_table_declared_later_keeps_tomllibs_key_order(text: str) -> None:
    # rtoml places "a" after "c" (where its header [a] is), tomllib where [a.b] first made
    # it; the dicts compare equal but the order shows (convert --to json writes it).
    fast = load._plain_toml(text, text.encode())
    assert json.dumps(fast) == json.dumps(tomllib.loads(text))


@needs_rtoml
def test_a_fixture_keeps_its_argument_key_order_as_tomllib_reads_it() -> None:
    text = (
        'name = "order"\n'
        "[[turns]]\n"
        'user_input = "hi"\n'
        "[[turns.steps]]\n"
        "[turns.steps.response]\n"
        'type = "tool_calls"\n'
        "[[turns.steps.response.tool_calls]]\n"
        'id = "c1"\n'
        'name = "echo"\n'
        "[turns.steps.response.tool_calls.arguments.outer.inner]\n"
        "x = 1\n"
        "[turns.steps.response.tool_calls.arguments.later]\n"
        "y = 2\n"
        "[turns.steps.response.tool_calls.arguments.outer]\n"
        "z = 3\n"
    )
    document = load.parse_document(text.encode(), "toml", Path("order.toml"))
    assert isinstance(document, load.RawDocument)
    assert json.dumps(document.data) == json.dumps(tomllib.loads(text))
