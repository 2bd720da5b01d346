"""JSON Schemas written inside a fixture (a tool double's ``parameters``): checked at admission,
and applied to a call's arguments when it runs.

This is the one checker of every schema a fixture holds: a tool double's ``parameters``, and
the ``arguments_schema`` and ``schema`` of the structured expectations
(:mod:`evalrunner.expectations._json` words its results for them).

A schema is held to the JSON Schema 2020-12 metaschema (with its ``regex`` format asserted),
and beyond it: every keyword must be one JSON Schema defines (the metaschema lets any other
key through, so a typo such as ``requried`` would silently check nothing), ``$ref`` and
``$dynamicRef`` must point inside the schema itself (``#`` or ``#/...``; nothing is ever
fetched), and ``$id`` and a ``$schema`` other than 2020-12 are refused (a fixture's schema is
one self-contained 2020-12 document). jsonschema is imported only when a schema is checked or
an instance breaks one.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from evalrunner.model import JSONPath, argument_json, render_json_path

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

DRAFT202012 = "https://json-schema.org/draft/2020-12/schema"

_SUBSCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
"""Keywords whose value maps names to subschemas."""

_SUBSCHEMA = frozenset(
    {
        "additionalProperties",
        "unevaluatedProperties",
        "items",
        "unevaluatedItems",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
"""Keywords whose value is one subschema."""

_SUBSCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
"""Keywords whose value is a list of subschemas."""

KEYWORDS = frozenset(
    {
        # core
        "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary",
        "$comment", "$defs", "definitions",
        # validation
        "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
        "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
        "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
        "required", "dependentRequired",
        # metadata, format, content
        "title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
        "format", "contentEncoding", "contentMediaType",
    }
    | _SUBSCHEMA_MAPS
    | _SUBSCHEMA
    | _SUBSCHEMA_LISTS
)  # fmt: skip
"""Every keyword of JSON Schema 2020-12 (and ``definitions``, its older spelling of
``$defs``)."""


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """What is wrong at ``path`` (relative to the schema's root); ``key``: the problem is the
    key at the end of ``path`` itself, not its value."""

    path: JSONPath
    message: str
    key: bool = False


def schema_problems(schema: object) -> list[SchemaProblem]:
    """Everything wrong with ``schema`` as a fixture's JSON Schema (see the module doc)."""
    problems = []
    if not _fast_meta_valid(schema):
        problems = [_meta_problem(error) for error in _metaschema().iter_errors(schema)]
    problems.extend(_keyword_problems(schema))
    return problems


def argument_problem(schema: Mapping[str, Any], arguments: object) -> str | None:
    """Why ``arguments`` break ``schema`` (one sentence, naming where), or ``None``."""
    found = instance_error(argument_json(schema), arguments)
    if found is None:
        return None
    message, where = found
    return f"{message} (at {render_json_path(where)})" if where else message


def instance_error(schema_text: str, instance: object) -> tuple[str, JSONPath] | None:
    """jsonschema's best reason ``instance`` breaks the admitted schema (JSON text), and where;
    ``None`` when it satisfies it. jsonschema-rs, when installed, vouches for a valid instance
    alone, so a passing call never imports jsonschema."""
    fast = _fast(schema_text)
    if fast is not None and fast.is_valid(instance):
        return None
    from jsonschema.exceptions import best_match

    error = best_match(_validator(schema_text).iter_errors(instance))
    return None if error is None else (error.message, tuple(error.absolute_path))


@cache
def _metaschema() -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def _fast_meta_valid(schema: object) -> bool:
    """Whether jsonschema-rs vouches for ``schema`` against the same metaschema, with the
    ``regex`` format decided by Python's ``re`` as jsonschema decides it, so a valid suite
    never imports jsonschema. Its other formats are asserted too, which only sends more
    schemas to jsonschema; ``False`` when it cannot say, and jsonschema decides."""
    fast = _fast_metaschema()
    return fast is not None and bool(fast.is_valid(schema))


@cache
def _fast_metaschema() -> Any:
    try:
        import jsonschema_rs
    except ImportError:
        return None
    return jsonschema_rs.Draft202012Validator(
        {"$ref": DRAFT202012}, validate_formats=True, formats={"regex": _is_regex}, offline=True
    )


def _is_regex(text: str) -> bool:
    try:
        re.compile(text)
    except re.error:
        return False
    return True


@lru_cache(maxsize=256)
def _validator(schema_text: str) -> Draft202012Validator:
    """A validator per schema (keyed by its text: a fixture's schema is plain JSON). Its
    registry is empty and retrieves nothing: admission allows only references inside it."""
    from jsonschema import Draft202012Validator
    from referencing import Registry

    return Draft202012Validator(json.loads(schema_text), registry=Registry())


@lru_cache(maxsize=256)
def _fast(schema_text: str) -> Any:
    """jsonschema-rs's validator of the schema, offline, with Python's ``pattern``
    (:class:`PythonPattern`); ``None`` when it is not installed or cannot build it."""
    try:
        import jsonschema_rs
    except ImportError:
        return None
    try:
        return jsonschema_rs.Draft202012Validator(
            json.loads(schema_text), keywords={"pattern": PythonPattern}, offline=True
        )
    except ValueError:
        return None


def _meta_problem(error: Any) -> SchemaProblem:
    path: JSONPath = tuple(error.absolute_path)
    keyword = path[-1] if path else None
    if keyword == "type" and error.validator in ("anyOf", "enum", "type"):
        kinds = "array, boolean, integer, null, number, object, string"
        return SchemaProblem(
            path,
            f"a JSON Schema type is one of {kinds} (or a list of them), "
            f"got {_short(error.instance)}",
        )
    if error.validator == "type" and not path:
        return SchemaProblem(path, "a JSON Schema is an object (or true/false)")
    if error.validator == "format" and error.validator_value == "regex":
        return SchemaProblem(
            path, f"pattern {_short(error.instance)} is not a valid regular expression"
        )
    return SchemaProblem(path, f"not valid JSON Schema: {error.message}")


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _keyword_problems(root: object) -> Iterator[SchemaProblem]:
    """Unknown keywords, and references that leave the schema, walking every subschema."""
    stack: list[tuple[object, JSONPath]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, dict):
            continue  # true/false, or not a schema at all (the metaschema says so)
        for key, value in node.items():
            here = (*path, key)
            if key not in KEYWORDS:
                yield SchemaProblem(here, _unknown(key), key=True)
                continue
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                problem = _reference_problem(root, key, value)
                if problem is not None:
                    yield SchemaProblem(here, problem)
            elif key == "$id":
                yield SchemaProblem(
                    here,
                    "$id is not allowed in a fixture's schema: it is one self-contained "
                    "document; leave $id out and refer inside it with $ref: \"#/...\"",
                    key=True,
                )
            elif key == "$schema" and value != DRAFT202012:
                yield SchemaProblem(
                    here,
                    "a fixture's schema is JSON Schema 2020-12: $schema is "
                    f"{json.dumps(DRAFT202012)} or left out, got {_short(value)}",
                )
            elif key in _SUBSCHEMA:
                stack.append((value, here))
            elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
                stack.extend((item, (*here, i)) for i, item in enumerate(value))
            elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
                stack.extend((item, (*here, name)) for name, item in value.items())


def _unknown(key: str) -> str:
    message = f"unknown JSON Schema keyword {json.dumps(key, ensure_ascii=False)}"
    close = difflib.get_close_matches(key, sorted(KEYWORDS), n=1, cutoff=0.6)
    hint = f"did you mean {json.dumps(close[0])}?" if close else "use a JSON Schema 2020-12 keyword"
    return f"{message}, which would check nothing; {hint}"


def _reference_problem(root: object, keyword: str, reference: str) -> str | None:
    """Why ``reference`` (the value of ``keyword``) does not resolve inside ``root``, or
    ``None``. The pointer is read as jsonschema's ``referencing`` reads it: percent-decoded as
    a whole, then split, so ``%2F`` separates tokens there too."""
    from urllib.parse import unquote

    if reference == "#":
        return None
    if not reference.startswith("#/"):
        return (
            f"{keyword} {_short(reference)} points outside this schema; a fixture's schema "
            'refers only inside itself ("#" or a JSON Pointer such as "#/$defs/city"), nothing '
            "is fetched"
        )
    node = root
    for token in unquote(reference[2:]).split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isascii() and token.isdigit() and (
            int(token) < len(node)
        ):
            node = node[int(token)]
        else:
            return f"{keyword} {_short(reference)} does not resolve inside this schema"
    return None


class PythonPattern:
    """``pattern`` decided as jsonschema decides it, with Python's ``re.search``, for
    jsonschema-rs. Its own engine's ``\\s`` and ``\\w`` are Unicode's classes, Python's are
    ``str.isspace`` and ``str.isalnum``: U+001C to U+001F are blank to Python only, so a
    ``"\\S"`` pattern would let through a string jsonschema refuses."""

    def __init__(self, parent_schema: dict[str, Any], value: str, schema_path: list[Any]) -> None:
        self.search = re.compile(value).search

    def validate(self, instance: object) -> None:
        """Raise unless ``instance`` (a string) matches; other types are not this keyword's."""
        if isinstance(instance, str) and self.search(instance) is None:
            raise ValueError(f"{instance!r} does not match")
