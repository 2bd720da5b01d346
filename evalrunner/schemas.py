"""The schema registry: the committed ``schemas/`` tree, loaded once, every ``$ref`` resolved.

The JSON files are the single source of truth for fixture, config and report shape. The wheel
carries them as ``evalrunner/schemas``; a source checkout reads the repository's ``schemas/``.
Validation never touches the network: the registry holds every schema and has no retriever.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.validators import extend
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

BASE_URI = "https://evalrunner.dev/schemas/v1/"
"""Every ``$id`` is this prefix plus the schema's path under ``schemas/``."""

CASE_ID = BASE_URI + "case.schema.json"
CONFIG_ID = BASE_URI + "config.schema.json"
REPORT_ID = BASE_URI + "report.schema.json"
AGENT_REPLY_ID = BASE_URI + "agent-command/reply.schema.json"
KIND_DIR = "expects"


def _is_integer(checker: object, instance: object) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


# extend() makes a subclass in all but name; it is untyped, so say what it returns.
StrictValidator = cast(
    type[Draft202012Validator],
    extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
    ),
)
"""Draft 2020-12, except that ``"integer"`` means an integer as parsed, not any number with a
zero fraction. JSON Schema calls ``1.0`` an integer; every loader here keeps ``1.0`` a float,
and a float where a count or an index is meant would be shown as ``1.0`` in reports, or crash
the indexing. So ``call_index: 0.0`` and ``exact_tool_calls: 1.0`` are refused, in every
format, with a position."""


class SchemaTreeError(Exception):
    """The shipped schema tree is broken (a packaging bug, never a user error)."""


def schema_root() -> Traversable:
    """The directory holding the schema tree, installed or in a source checkout."""
    packaged = files("evalrunner") / "schemas"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "schemas"


def _walk(node: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            yield from _walk(child, rel + "/")
        elif child.name.endswith(".schema.json"):
            yield rel, child


@dataclass(frozen=True)
class SchemaTree:
    """Every schema by its path under ``schemas/``, and the registry built from them."""

    documents: dict[str, dict[str, Any]]
    registry: Registry[Any]

    def kinds(self) -> dict[str, str]:
        """Expectation kind → ``$id``, from the files in ``schemas/expects/``."""
        out: dict[str, str] = {}
        for rel, schema in self.documents.items():
            if rel.startswith(KIND_DIR + "/"):
                kind = rel[len(KIND_DIR) + 1 : -len(".schema.json")]
                out[kind] = str(schema["$id"])
        return dict(sorted(out.items()))

    def validator(self, schema_id: str) -> Draft202012Validator:
        """A validator for the schema with this ``$id``, resolving refs through the registry,
        with strict integers (:data:`StrictValidator`)."""
        return StrictValidator({"$ref": schema_id}, registry=self.registry)


def _refs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


@cache
def schema_tree() -> SchemaTree:
    """Load, check and index the schema tree (once per process).

    Checks that each file is a valid Draft 2020-12 schema, that its ``$id`` mirrors its path,
    that no ``$id`` repeats, and that every ``$ref`` resolves; any failure is a
    :class:`SchemaTreeError`.
    """
    documents: dict[str, dict[str, Any]] = {}
    resources: list[tuple[str, Resource[Any]]] = []
    for rel, node in _walk(schema_root()):
        schema = json.loads(node.read_text(encoding="utf-8"))
        expected = BASE_URI + rel
        if schema.get("$id") != expected:
            raise SchemaTreeError(f"schemas/{rel}: $id must be {expected!r}")
        Draft202012Validator.check_schema(schema)
        documents[rel] = schema
        # jsonschema picks the validator class of a $ref's target by its "$schema", which
        # would swap StrictValidator back for the stock one; every file here is Draft 2020-12
        # (check_schema above), so the registry holds them without that key.
        contents = {key: value for key, value in schema.items() if key != "$schema"}
        resources.append((expected, DRAFT202012.create_resource(contents)))
    if not documents:
        raise SchemaTreeError("no schemas found: the package is missing its schemas/ tree")
    registry: Registry[Any] = Registry().with_resources(resources).crawl()
    for rel, schema in documents.items():
        resolver = registry.resolver(base_uri=BASE_URI + rel)
        for ref in _refs(schema):
            try:
                resolver.lookup(ref)
            except Exception as exc:
                raise SchemaTreeError(f"schemas/{rel}: $ref {ref!r} does not resolve") from exc
    return SchemaTree(documents, registry)


@cache
def case_validator() -> Draft202012Validator:
    """The validator fixtures are admitted with."""
    return schema_tree().validator(CASE_ID)


@cache
def config_validator() -> Draft202012Validator:
    """The validator of the ``[eval]`` configuration (wrapped as ``{"eval": ...}``)."""
    return schema_tree().validator(CONFIG_ID)


@cache
def report_validator() -> Draft202012Validator:
    """The validator of JSON reports."""
    return schema_tree().validator(REPORT_ID)


@cache
def agent_reply_validator() -> Draft202012Validator:
    """The validator of an agent command's reply lines."""
    return schema_tree().validator(AGENT_REPLY_ID)
