"""JSON values as the structured kinds compare them (``tool_calls_match``, ``response_json``):
parsing, equality as JSON values, subset match, JSON Pointers, and JSON Schemas written inside
a fixture (checked at admission, applied when grading)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

__all__ = [
    "NOT_JSON",
    "UNRESOLVED",
    "json_equal",
    "parse",
    "pointer_problem",
    "resolve",
    "schema_errors",
    "schema_problems",
    "subset_differences",
]

NOT_JSON = object()
"""What :func:`parse` returns for text that is not one JSON value."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@lru_cache(maxsize=4096)
def _parsed(text: str) -> tuple[Any, str]:
    try:
        return json.loads(text, parse_constant=_no_constant), ""
    except ValueError as exc:  # json.JSONDecodeError is one
        return NOT_JSON, str(exc)


def parse(text: str) -> tuple[Any, str]:
    """``text`` as one JSON value (NaN and Infinity refused), and ``""``; or
    (:data:`NOT_JSON`, the parser's reason). Callers never mutate the value: it is shared."""
    return _parsed(text)


def json_equal(a: object, b: object) -> bool:
    """Equal as JSON values: numbers by value (``1`` equals ``1.0``), a boolean never equals
    a number, objects by keys and values, arrays element by element."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(v, b[k]) for k, v in a.items())
    return type(a) is type(b) and a == b


def subset_differences(expected: dict[str, Any], actual: object, at: str = "") -> list[str]:
    """The keys (as JSON Pointers) where ``actual`` does not hold ``expected``: each key of
    ``expected`` present and equal as a JSON value, objects compared recursively, arrays whole.
    Empty when ``actual`` holds it."""
    if not isinstance(actual, dict):
        return [at or "/"]
    out: list[str] = []
    for key, want in expected.items():
        here = f"{at}/{key.replace('~', '~0').replace('/', '~1')}"
        if key not in actual:
            out.append(here)
        elif isinstance(want, dict) and isinstance(actual[key], dict):
            out.extend(subset_differences(want, actual[key], here))
        elif not json_equal(want, actual[key]):
            out.append(here)
    return out


UNRESOLVED = object()
"""What :func:`resolve` returns for a pointer that names nothing in the document."""


def resolve(document: object, pointer: str) -> object:
    """The value at a JSON Pointer (RFC 6901) in ``document``, or :data:`UNRESOLVED`."""
    if pointer == "":
        return document
    node = document
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif (
            isinstance(node, list)
            and token.isdigit()
            and token.isascii()
            and (token == "0" or not token.startswith("0"))
            and int(token) < len(node)
        ):
            node = node[int(token)]
        else:
            return UNRESOLVED
    return node


def pointer_problem(pointer: str) -> str | None:
    """Why ``pointer`` is not a JSON Pointer, or None."""
    if pointer and not pointer.startswith("/"):
        return 'a JSON Pointer is "" (the whole reply) or starts with "/", e.g. "/answer"'
    rest = pointer.replace("~0", "").replace("~1", "")
    if "~" in rest:
        return 'in a JSON Pointer "~" is written "~0" and "/" inside a key "~1"'
    return None


# --- JSON Schemas inside fixtures -------------------------------------------------------------

# Draft 2020-12's keywords, and where each keeps subschemas; ``definitions`` is the older
# name of ``$defs``, which ``$ref`` pointers still commonly use.
_ONE = frozenset(
    {"additionalProperties", "propertyNames", "items", "contains", "if", "then", "else"}
    | {"not", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
)
_MAP = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"})
_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_KEYWORDS = (
    _ONE
    | _MAP
    | _LIST
    | {"$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary"}
    | {"$comment", "type", "const", "enum", "multipleOf", "maximum", "exclusiveMaximum"}
    | {"minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems"}
    | {"minItems", "uniqueItems", "maxContains", "minContains", "maxProperties"}
    | {"minProperties", "required", "dependentRequired", "title", "description", "default"}
    | {"deprecated", "readOnly", "writeOnly", "examples", "format", "contentEncoding"}
    | {"contentMediaType"}
)


_TYPES = "array, boolean, integer, null, number, object and string"


def _subschemas(schema: dict[str, Any]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    for key, value in schema.items():
        if key in _ONE:
            yield (key,), value
        elif key in _MAP and isinstance(value, dict):
            for name, sub in value.items():
                yield (key, name), sub
        elif key in _LIST and isinstance(value, list):
            for index, sub in enumerate(value):
                yield (key, index), sub


def schema_problems(schema: object) -> list[tuple[tuple[str | int, ...], str]]:
    """What is wrong with a JSON Schema written in a fixture, each with its path inside the
    schema: not valid against the Draft 2020-12 metaschema, an unknown keyword (a typo such
    as ``requried`` would silently check nothing), or a ``$ref`` that is not a pointer into
    the schema itself (a fixture's schema never reaches the network)."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for error in _metaschema_errors(schema):
        at = tuple(error.absolute_path)
        message = error.message
        if at[-1:] == ("type",):  # the metaschema's anyOf says only "not valid under any"
            message = f"{json.dumps(error.instance)} is not a type; the types are {_TYPES}"
        problems.append((at, f"not a valid JSON Schema: {message}"))
    if problems:
        return problems

    def walk(node: object, at: tuple[str | int, ...]) -> None:
        if not isinstance(node, dict):
            return
        for key in node:
            if key not in _KEYWORDS:
                close = difflib.get_close_matches(key, sorted(_KEYWORDS), n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}?" if close else "see json-schema.org"
                problems.append(
                    (
                        at + (key,),
                        f"unknown JSON Schema keyword {key!r}, which checks nothing; {hint}",
                    )
                )
        for ref_key in ("$ref", "$dynamicRef"):
            ref = node.get(ref_key)
            if isinstance(ref, str) and not _local_ref_resolves(schema, ref):
                problems.append(
                    (
                        at + (ref_key,),
                        f"{ref_key} {json.dumps(ref)} does not point into this schema; "
                        'write a pointer such as "#/$defs/city" to a definition beside it',
                    )
                )
        for where, sub in _subschemas(node):
            walk(sub, at + where)

    walk(schema, ())
    return problems


def _metaschema_errors(schema: object) -> list[Any]:
    """jsonschema's errors of ``schema`` against the Draft 2020-12 metaschema. jsonschema-rs
    vouches for a valid one first, so a valid suite never imports jsonschema."""
    if _meta_valid(schema):
        return []
    from jsonschema import Draft202012Validator

    return list(Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(schema))


def _local_ref_resolves(root: object, ref: str) -> bool:
    from urllib.parse import unquote

    if not ref.startswith("#"):
        return False
    pointer = unquote(ref[1:])
    return pointer_problem(pointer) is None and resolve(root, pointer) is not UNRESOLVED


@lru_cache(maxsize=256)
def _validator(schema_text: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator
    from referencing import Registry

    # An empty registry: a reference is resolved inside the schema or not at all.
    return Draft202012Validator(json.loads(schema_text), registry=Registry())


@lru_cache(maxsize=256)
def _fast(schema_text: str) -> Any:
    """jsonschema-rs's validator of the schema, offline, with Python's ``pattern`` (as the
    case schema's); None when it is not installed or cannot build it."""
    try:
        import jsonschema_rs

        from evalrunner.schema_check import PythonPattern

        return jsonschema_rs.Draft202012Validator(
            json.loads(schema_text), keywords={"pattern": PythonPattern}, offline=True
        )
    except (ImportError, ValueError):
        return None


def schema_errors(schema_text: str, instance: object) -> list[str]:
    """Why ``instance`` breaks the schema (JSON text, admitted), best reason first; empty when
    it satisfies it. jsonschema-rs vouches for a valid instance; jsonschema has the verdict
    and the words otherwise."""
    fast = _fast(schema_text)
    if fast is not None and fast.is_valid(instance):
        return []
    from jsonschema.exceptions import best_match

    errors = list(_validator(schema_text).iter_errors(instance))
    if not errors:
        return []
    best = best_match(errors)
    assert best is not None
    where = "".join(f"/{p}" for p in best.absolute_path)
    return [f"{best.message}" + (f" at {json.dumps(where)}" if where else "")]


def _meta_valid(schema: object) -> bool:
    """Whether jsonschema-rs vouches for ``schema`` against the metaschema; False when it
    cannot say (not installed, or a value it does not take), and jsonschema decides."""
    try:
        import jsonschema_rs
    except ImportError:
        return False
    try:
        return isinstance(schema, dict | bool) and bool(jsonschema_rs.meta.is_valid(schema))
    except (ValueError, jsonschema_rs.ValidationError):
        return False
