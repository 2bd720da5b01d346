"""JSON values as the structured kinds compare them (``tool_calls_match``, ``response_json``):
parsing, equality as JSON values, subset match, JSON Pointers, and JSON Schemas written inside
a fixture (checked at admission, applied when grading)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from evalrunner.model import json_equal
from evalrunner.text import pointer

__all__ = [
    "NOT_JSON",
    "UNRESOLVED",
    "parse",
    "pointer_problem",
    "resolve",
    "schema_errors",
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
    except RecursionError:  # the parser recurses once per level of nesting
        return NOT_JSON, "it nests arrays and objects too deeply to be read"


def parse(text: str) -> tuple[Any, str]:
    """``text`` as one JSON value (NaN and Infinity refused), and ``""``; or
    (:data:`NOT_JSON`, the parser's reason). Callers never mutate the value: it is shared."""
    return _parsed(text)


def subset_differences(expected: dict[str, Any], actual: object, at: str = "") -> list[str]:
    """The keys (as JSON Pointers) where ``actual`` does not hold ``expected``: each key of
    ``expected`` present and equal as a JSON value, objects compared recursively, arrays whole.
    Empty when ``actual`` holds it."""
    if not isinstance(actual, dict):
        return [at or "/"]
    out: list[str] = []
    for key, want in expected.items():
        here = at + pointer((key,))
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
# One implementation, in :mod:`evalrunner.schema_check`: the same rules for every schema a
# fixture holds (``response_json.schema``, ``arguments_schema``, a double's ``parameters``).


def schema_errors(schema_text: str, instance: object) -> list[str]:
    """Why ``instance`` breaks the schema (JSON text, admitted), best reason first; empty when
    it satisfies it."""
    from evalrunner.schema_check import best_error

    found = best_error(schema_text, instance)
    if found is None:
        return []
    message, path = found
    where = pointer(path)
    return [message + (f" at {json.dumps(where)}" if where else "")]
