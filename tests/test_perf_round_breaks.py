"""Defects a breaker found in the performance round (8504d49..ebf9d9e), kept as tests: the
compiled schema checks that are now generated Python source must decline (UnsupportedSchema,
so that jsonschema decides) a schema past CPython's compiler limits rather than raise, and the
document keys that messages now name through printable() must keep a message on one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalrunner.config import ConfigError, load_config
from evalrunner.schemas import (
    BASE_URI,
    SchemaTree,
    TreeResolver,
    UnsupportedSchema,
    compile_check,
    strict_validator,
)

_DOC = BASE_URI + "doc.schema.json"


def _nested_arrays(depth: int) -> tuple[dict[str, Any], object, object]:
    schema: dict[str, Any] = {"type": "string"}
    good: object = "x"
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
        good = [good]
    bad: object = 1
    for _ in range(depth):
        bad = [bad]
    return schema, good, bad


def _nested_objects(depth: int) -> tuple[dict[str, Any], object, object]:
    schema: dict[str, Any] = {"type": "string"}
    good: object = "x"
    bad: object = 1
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
        good, bad = {"a": good}, {"a": bad}
    return schema, good, bad


def _many_alternatives(count: int) -> tuple[dict[str, Any], object, object]:
    schema = {"oneOf": [{"const": f"v{i}"} for i in range(count)]}
    return schema, "v7", "w"


# 8504d49's closures compiled every one of these (and decided them as jsonschema does). The
# generated source hits CPython's compiler limits instead: 20 statically nested blocks (one
# `for` per array level, inside the check's `try`), 100 levels of indentation, and the
# recursion limit of the compiler on a oneOf written as one `_f1(v) + _f2(v) + ...` chain.
# compile_check then raises SyntaxError/IndentationError/RecursionError, not UnsupportedSchema,
# so SchemaTree.check (which only catches UnsupportedSchema) does not fall back to jsonschema:
# admission, config loading or reply checking would die with a traceback.
_LIMITS = {
    "arrays-20-deep": lambda: _nested_arrays(20),
    "objects-120-deep": lambda: _nested_objects(120),
    "oneOf-3000-alternatives": lambda: _many_alternatives(3000),
}


@pytest.mark.parametrize("shape", sorted(_LIMITS))
def test_a_schema_past_the_compilers_limits_is_decided_or_declined(shape: str) -> None:
    schema, good, bad = _LIMITS[shape]()
    reference = strict_validator()(schema)
    assert reference.is_valid(good) and not reference.is_valid(bad)
    try:
        check = compile_check(schema, TreeResolver({}, BASE_URI))
    except UnsupportedSchema:
        return  # declined: jsonschema decides, which is right
    assert check(good) is True
    assert check(bad) is False


def test_the_schema_tree_falls_back_to_jsonschema_for_a_schema_it_cannot_compile() -> None:
    schema, good, bad = _nested_arrays(20)
    tree = SchemaTree({"doc.schema.json": {"$id": _DOC, **schema}})
    check = tree.check(_DOC)  # raises SyntaxError on HEAD
    if check is not None:
        assert check(good) is True
        assert check(bad) is False


@pytest.mark.parametrize("separator", ["\\u2028", "\\u2029"])
def test_a_config_key_holding_a_line_separator_is_named_on_one_line(
    tmp_path: Path, separator: str
) -> None:
    (tmp_path / "evalrunner.toml").write_text(
        f'[eval]\n"a{separator}b" = "x\\u0000y"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError) as refused:
        load_config(cwd=tmp_path, env={})
    problems = refused.value.problems
    assert any("holds a NUL character" in problem for problem in problems), problems
    for problem in problems:
        assert len(problem.splitlines()) == 1, repr(problem)
