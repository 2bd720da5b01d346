"""Found by a breaker, fixed since: where the rtoml fast path of TOML fixtures gave other data
than tomllib (the reference) for the same text."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from evalrunner import load

needs_rtoml = pytest.mark.skipif(load._rtoml_loads() is None, reason="rtoml is not installed")


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
