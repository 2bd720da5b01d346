"""How messages name a place in a document (:func:`evalrunner.text.dotted`): a key that is
not a plain name is quoted, so a JSON Pointer key reads as one key of the path."""

from __future__ import annotations

import pytest

from evalrunner.text import dotted


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        (("turns", 0, "steps"), "turns[0].steps"),
        ((), ""),
        (("tool", "evalrunner", "agents", "my-agent"), "tool.evalrunner.agents.my-agent"),
        (("schema", "$defs", "café"), "schema.$defs.café"),
        (("expects", "response_json", "equals", "/gust"), 'expects.response_json.equals["/gust"]'),
        (("equals", "/a~1b/0"), 'equals["/a~1b/0"]'),
        (("equals", ""), 'equals[""]'),
        (("agents", "a.b"), 'agents["a.b"]'),
        (("agents", "a b"), 'agents["a b"]'),
        (("agents", 'say "hi"'), 'agents["say \\"hi\\""]'),
        # A key of digits is not an index: quoted, it cannot read as one.
        (("properties", "0"), 'properties["0"]'),
        (("/x", "y"), '["/x"].y'),
    ],
)
def test_plain_keys_follow_a_dot_and_others_are_quoted(
    path: tuple[str | int, ...], shown: str
) -> None:
    assert dotted(path) == shown


@pytest.mark.parametrize("key", ["\n", "a\rb", "\x1b[2J", "\u202e", "\u2028", "\ud800"])
def test_a_quoted_key_stays_one_printable_line(key: str) -> None:
    shown = dotted(("eval", key))
    assert shown.startswith('eval["') and shown.endswith('"]')
    assert shown.isprintable() and len(shown.splitlines()) == 1
    shown.encode("utf-8")  # a lone surrogate is escaped, so the text can be written
