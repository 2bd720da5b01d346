"""The compiled schema check is generated Python source (``evalrunner.schemas._Writer``): the
pieces of source it is made of, held to what they stand for, and its two ways of writing a
``$ref`` (in place, or as a call when in place grows too large) held to each other and to
jsonschema."""

from __future__ import annotations

import math
import re
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from referencing import Registry
from test_admit_fast import _any_schema, _instances

import evalrunner.schemas as schemas
from evalrunner.schemas import (
    _NOT_BLANK,
    _TYPE_TESTS,
    BASE_URI,
    TYPE_CHECKS,
    TreeResolver,
    _source,
    check_source,
    compile_check,
    strict_validator,
)

SETTINGS = settings(
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_DOC = BASE_URI + "doc.schema.json"

_SAMPLES: list[object] = [
    None, True, False, 0, 1, -3, 2**70, 0.0, 1.0, 1.5, math.nan, math.inf, "", "x",
    [], [1], {}, {"a": 1}, (), b"x", 1j, object(),
]  # fmt: skip


def test_the_type_tests_in_source_are_the_type_checks() -> None:
    assert set(_TYPE_TESTS) == set(TYPE_CHECKS)
    for name, source in _TYPE_TESTS.items():
        test = eval(f"lambda v: {source.format('v')}", {"_is_number": schemas._is_number})
        for value in _SAMPLES:
            assert bool(test(value)) is TYPE_CHECKS[name](value), (name, value)


def test_not_blank_written_with_isspace_is_the_pattern_on_every_character() -> None:
    # The source tests "\\S" as "not v or v.isspace()"; re.search decides the same for every
    # one-character string, so for every string (both look at each character alone).
    search = re.compile(_NOT_BLANK).search
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        assert (search(char) is not None) is (not char.isspace()), hex(code)
    assert search("") is None


@SETTINGS
@given(text=st.text(alphabet=st.sampled_from(" \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000ax")))
def test_not_blank_on_strings_of_spaces_and_letters(text: str) -> None:
    check = compile_check({"type": "string", "pattern": "\\S"}, TreeResolver({}, BASE_URI))
    assert check(text) is (re.search("\\S", text) is not None)


@SETTINGS
@given(schema=_any_schema, instances=st.lists(_instances, min_size=1, max_size=5))
def test_refs_as_calls_give_the_verdicts_of_refs_in_place(
    schema: Any, instances: list[Any]
) -> None:
    # The same schema behind a $ref, two ways: written in place (the common path) and as a
    # call (the path taken when in place grows too large); both must be jsonschema's verdict.
    documents = {_DOC: {"$id": _DOC, "$defs": {"s": schema}, "$ref": "#/$defs/s"}}
    resolver = TreeResolver(documents, _DOC)
    checks: list[Any] = []
    for inline in (True, False):
        source, namespace = _source({"$ref": _DOC}, resolver, inline=inline)
        exec(compile(source, "<test>", "exec"), namespace)
        checks.append(namespace["check"])
    reference = strict_validator()(schema, registry=Registry())
    for instance in instances:
        expected = reference.is_valid(instance)
        assert [check(instance) for check in checks] == [expected, expected], (schema, instance)


def test_a_schema_that_refers_back_into_itself_is_checked_to_any_depth() -> None:
    tree = {"type": "object", "properties": {"child": {"$ref": "#"}, "n": {"type": "integer"}}}
    documents = {_DOC: {"$id": _DOC, **tree}}
    check = compile_check({"$ref": _DOC}, TreeResolver(documents, _DOC))
    deep: dict[str, Any] = {"n": 1}
    for _ in range(30):
        deep = {"child": deep, "n": 2}
    assert check(deep) is True
    deep["child"]["child"]["n"] = "x"
    assert check(deep) is False


def test_refs_that_would_double_the_source_at_each_level_become_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # d0 refers to d1 twice, d1 to d2 twice, ...: in place, 2**24 copies of d24.
    depth = 24
    defs: dict[str, Any] = {f"d{depth}": {"type": "string", "minLength": 1}}
    for level in range(depth - 1, -1, -1):
        ref = {"$ref": f"#/$defs/d{level + 1}"}
        defs[f"d{level}"] = {"type": "object", "properties": {"a": ref, "b": ref}}
    documents = {_DOC: {"$id": _DOC, "$defs": defs}}
    resolver = TreeResolver(documents, _DOC)
    source, _ = check_source({"$ref": "#/$defs/d0"}, resolver)
    assert len(source) < 100_000
    check = compile_check({"$ref": "#/$defs/d0"}, resolver)
    leaf: Any = "x"
    for _ in range(depth):
        leaf = {"a": leaf, "b": leaf}
    assert check(leaf) is True
    assert check({"a": {"b": 3}}) is False


def test_no_schema_text_reaches_the_source_but_as_a_literal() -> None:
    # A property name or value that is Python code stays a string literal.
    hostile = "'); import os; os.system('x'); ('"
    schema = {
        "type": "object",
        "required": [hostile],
        "properties": {hostile: {"const": hostile}},
    }
    source, _ = check_source(schema, TreeResolver({}, BASE_URI))
    assert "import os" not in source.replace(repr(hostile), "")
    check = compile_check(schema, TreeResolver({}, BASE_URI))
    assert check({hostile: hostile}) is True
    assert check({}) is False
