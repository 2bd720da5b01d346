"""The schema registry: the committed ``schemas/`` tree, loaded once, and its validators.

The JSON files are the single source of truth for fixture, config and report shape. The wheel
carries them as ``evalrunner/schemas``; a source checkout reads the repository's ``schemas/``.

jsonschema (with referencing) is the reference: every verdict it would give is the verdict,
and it words every error. Validation never touches the network: its registry holds every
schema, every ``$ref`` resolved when it is built, and has no retriever. When jsonschema-rs is
installed, it answers the common question, "is this valid?", on the same schema bundled into
one document (:func:`bundle`); only an instance it calls invalid (or cannot read) goes to
jsonschema. evalrunner's own rules beyond JSON Schema are separate, named checks
(:func:`float_integer_errors`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urldefrag, urljoin

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError
    from jsonschema_rs import Validator
    from referencing import Registry

# jsonschema, referencing and jsonschema-rs are imported only when a validator is first built:
# a start (``--version``, ``--help``) and every command that validates nothing pay for none of
# them, and a run whose instances are all valid never imports jsonschema.

BASE_URI = "https://evalrunner.dev/schemas/v1/"
"""Every ``$id`` is this prefix plus the schema's path under ``schemas/``."""

CASE_ID = BASE_URI + "case.schema.json"
CONFIG_ID = BASE_URI + "config.schema.json"
REPORT_ID = BASE_URI + "report.schema.json"
AGENT_REPLY_ID = BASE_URI + "agent-command/reply.schema.json"
KIND_DIR = "expects"
DRAFT202012 = "https://json-schema.org/draft/2020-12/schema"


class SchemaTreeError(Exception):
    """The shipped schema tree is broken (a packaging bug, never a user error)."""


def schema_root() -> Traversable:
    """The directory holding the schema tree, installed or in a source checkout."""
    beside = Path(__file__).resolve().parent
    if (beside / "schemas").is_dir():  # an installed wheel carries the tree in the package
        return beside / "schemas"
    if beside.is_dir():  # a source checkout: the repository's tree
        return beside.parent / "schemas"
    # Only a zipped install needs importlib.resources (and the zipfile it imports).
    from importlib.resources import files

    return files("evalrunner") / "schemas"


def _walk(node: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            yield from _walk(child, rel + "/")
        elif child.name.endswith(".schema.json"):
            yield rel, child


@dataclass(frozen=True)
class SchemaTree:
    """Every schema by its path under ``schemas/``; the registry of jsonschema's validators is
    built from them when first asked for."""

    documents: dict[str, dict[str, Any]]

    @cached_property
    def registry(self) -> Registry[Any]:
        """The documents as a ``referencing`` registry, each of their ``$ref`` resolved once
        (:class:`SchemaTreeError` for one that does not resolve)."""
        from referencing import Registry
        from referencing.exceptions import Unresolvable
        from referencing.jsonschema import DRAFT202012 as DIALECT

        resources = [
            (BASE_URI + rel, DIALECT.create_resource(schema))
            for rel, schema in self.documents.items()
        ]
        registry: Registry[Any] = Registry().with_resources(resources).crawl()
        for rel, schema in self.documents.items():
            resolver = registry.resolver(base_uri=BASE_URI + rel)
            for ref in _refs(schema):
                try:
                    resolver.lookup(ref)
                except (Unresolvable, ValueError) as exc:
                    # (ValueError: referencing reads a pointer token such as "²", which
                    # str.isdigit() accepts, as an index, and int() refuses it.)
                    message = f"schemas/{rel}: $ref {ref!r} does not resolve"
                    raise SchemaTreeError(message) from exc
        return registry

    def kinds(self) -> dict[str, str]:
        """Expectation kind → ``$id``, from the files in ``schemas/expects/``."""
        out: dict[str, str] = {}
        for rel, schema in self.documents.items():
            if rel.startswith(KIND_DIR + "/"):
                kind = rel[len(KIND_DIR) + 1 : -len(".schema.json")]
                out[kind] = str(schema["$id"])
        return dict(sorted(out.items()))

    def reference(self, schema_id: str) -> Draft202012Validator:
        """jsonschema's validator for the schema with this ``$id``, resolving refs through the
        registry: the reference for every verdict and the words of every error."""
        from jsonschema import Draft202012Validator

        return Draft202012Validator({"$ref": schema_id}, registry=self.registry)


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
    """Load and index the schema tree (once per process).

    Checks that each file's ``$id`` mirrors its path (:class:`SchemaTreeError` if not). Its
    ``$ref`` are resolved by whichever validator is built from it first (the registry, or the
    bundle); that each file is a valid Draft 2020-12 schema is :func:`check_schemas`'s to say:
    the files ship with the package, so a test holds them to it rather than every start paying
    for it.
    """
    documents: dict[str, dict[str, Any]] = {}
    for rel, node in _walk(schema_root()):
        schema = json.loads(node.read_text(encoding="utf-8"))
        expected = BASE_URI + rel
        if schema.get("$id") != expected:
            raise SchemaTreeError(f"schemas/{rel}: $id must be {expected!r}")
        documents[rel] = schema
    if not documents:
        raise SchemaTreeError("no schemas found: the package is missing its schemas/ tree")
    return SchemaTree(documents)


def check_schemas(tree: SchemaTree) -> None:
    """Raise :class:`SchemaTreeError` unless every schema of ``tree`` is a valid Draft 2020-12
    schema (against its metaschema)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    for rel, schema in tree.documents.items():
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise SchemaTreeError(
                f"schemas/{rel}: not a Draft 2020-12 schema: {exc.message}"
            ) from exc


# --- one schema as one document ------------------------------------------------------------
#
# :func:`bundle` folds a schema and everything it ``$ref``s into one self-contained document:
# each referenced file becomes an entry of the root's ``$defs``, every ``$ref`` becomes a
# ``#/$defs/...`` pointer, nested ``$id``/``$schema`` are dropped, and the dialect is declared
# as Draft 7. Editors' engines (yaml-language-server, Taplo) speak Draft 7 and some resolve
# relative refs against ``$id`` URLs they cannot reach; a pointer-only file behaves the same in
# all of them, and jsonschema-rs reads it with no registry. A keyword outside the Draft 7
# vocabulary is a :class:`BundleError` (a bug in ``schemas/``, caught by a test), never a
# silently ignored constraint.

DRAFT7 = "http://json-schema.org/draft-07/schema#"

# Draft 7's keywords (validation, applicators, annotations, core). ``$defs`` is not one, but a
# ``#/$defs/x`` ref is a plain JSON pointer that every engine follows, and the issue asks for
# that spelling; engines ignore the unknown container itself.
DRAFT7_KEYWORDS = frozenset(
    {
        "$schema", "$ref", "$comment", "$defs", "title", "description", "default",
        "examples", "readOnly", "writeOnly", "type", "enum", "const", "multipleOf",
        "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
        "minLength", "pattern", "items", "additionalItems", "maxItems", "minItems",
        "uniqueItems", "contains", "maxProperties", "minProperties", "required",
        "properties", "patternProperties", "additionalProperties", "dependencies",
        "propertyNames", "if", "then", "else", "allOf", "anyOf", "oneOf", "not", "format",
        "contentMediaType", "contentEncoding", "definitions",
    }
)  # fmt: skip

# Where subschemas live, by keyword: one schema, a map of name → schema, or a list of schemas.
_ONE = frozenset(
    {"items", "additionalItems", "additionalProperties", "contains", "propertyNames", "if",
     "then", "else", "not"}
)  # fmt: skip
_MAP = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependencies"})
_LIST = frozenset({"allOf", "anyOf", "oneOf", "items"})


class BundleError(Exception):
    """The schema tree cannot be bundled into a Draft 7 file (a bug in ``schemas/``)."""


def _def_name(rel: str) -> str:
    """``expects/tools_used.schema.json`` → ``expects.tools_used``."""
    return rel.removesuffix(".schema.json").replace("/", ".")


def bundle(root_id: str, tree: SchemaTree | None = None) -> dict[str, Any]:
    """The schema ``root_id`` with everything it references, as one Draft 7 document.

    Raises :class:`BundleError` for a ref that leaves the tree, an anchor ref, a name clash in
    ``$defs`` or a keyword outside Draft 7.
    """
    tree = tree or schema_tree()
    by_id = {str(doc["$id"]): rel for rel, doc in tree.documents.items()}
    if root_id not in by_id:
        raise BundleError(f"{root_id}: not in the schema tree")
    root = tree.documents[by_id[root_id]]
    taken = set(root.get("$defs", {}))
    pending: list[str] = []  # referenced documents not yet embedded, in order of discovery
    names: dict[str, str] = {}  # embedded document $id → its name under $defs

    def pointer_for(base: str, ref: str, where: str) -> str:
        target, fragment = urldefrag(urljoin(base, ref))
        if fragment and not fragment.startswith("/"):
            raise BundleError(f"{where}: anchor ref {ref!r} cannot be bundled; use a pointer")
        if target == root_id:
            return "#" + fragment
        if target not in by_id:
            raise BundleError(f"{where}: $ref {ref!r} leaves the schema tree")
        if target not in names:
            name = _def_name(by_id[target])
            if name in taken:
                raise BundleError(f"{where}: $defs name {name!r} is already taken")
            taken.add(name)
            names[target] = name
            pending.append(target)
        return f"#/$defs/{names[target]}{fragment}"

    def rewrite(node: Any, base: str, where: str) -> Any:
        """Copy of ``node`` (a schema of the document ``base``) with every ref made local."""
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            raise BundleError(f"{where}: a schema must be an object or a boolean")
        out: dict[str, Any] = {}
        for keyword, value in node.items():
            if keyword not in DRAFT7_KEYWORDS:
                raise BundleError(f"{where}: keyword {keyword!r} is not in Draft 7")
            if keyword == "$ref":
                out[keyword] = pointer_for(base, value, where)
            elif keyword in _MAP and isinstance(value, dict):
                out[keyword] = {
                    # dependencies may also map to a list of property names (plain data)
                    k: rewrite(v, base, where) if isinstance(v, dict | bool) else v
                    for k, v in value.items()
                }
            elif keyword in _LIST and isinstance(value, list):
                out[keyword] = [rewrite(v, base, where) for v in value]
            elif keyword in _ONE:
                out[keyword] = rewrite(value, base, where)
            else:
                out[keyword] = value
        if "$ref" in out and len(out) > 1:
            # Before 2019-09 a $ref's siblings are ignored; allOf keeps them in force.
            ref = out.pop("$ref")
            out["allOf"] = [{"$ref": ref}, *out.get("allOf", [])]
        return out

    body = {k: v for k, v in root.items() if k not in {"$id", "$schema"}}
    bundled: dict[str, Any] = rewrite(body, root_id, f"schemas/{by_id[root_id]}")
    definitions = bundled.setdefault("$defs", {})
    while pending:
        target = pending.pop(0)
        rel = by_id[target]
        document = {k: v for k, v in tree.documents[rel].items() if k not in {"$id", "$schema"}}
        if "$defs" in document:
            # Its own pointers would need re-rooting; no embedded schema needs this yet.
            raise BundleError(f"schemas/{rel}: a referenced schema may not have its own $defs")
        definitions[names[target]] = rewrite(document, target, f"schemas/{rel}")
    bundled["$schema"] = DRAFT7
    return bundled


# --- validators ------------------------------------------------------------------------------


class _PythonPattern:
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


def _fast_validator(tree: SchemaTree, schema_id: str) -> Validator | None:
    """jsonschema-rs's validator of the bundled schema ``schema_id``, or ``None`` when it is not
    installed or the schema cannot be bundled. Built eagerly, so a ``$ref`` that points nowhere
    is a :class:`SchemaTreeError` here, once."""
    try:
        import jsonschema_rs
    except ImportError:
        return None
    try:
        bundled = bundle(schema_id, tree)
    except BundleError:
        # What editors could not read either (an anchor, an embedded resource, a ref that
        # leaves the tree): jsonschema alone decides, and its registry, built now, says if a
        # $ref dangles. The shipped tree bundles (a test of the export holds it to that).
        tree.registry  # noqa: B018 (built for what it raises)
        return None
    # The bundle is Draft 7 for editors, in words that mean the same in Draft 2020-12 (the
    # dialect of every file of the tree, and of the reference).
    bundled["$schema"] = DRAFT202012
    try:
        return jsonschema_rs.Draft202012Validator(
            bundled, keywords={"pattern": _PythonPattern}, offline=True
        )
    except jsonschema_rs.ValidationError as exc:
        raise SchemaTreeError(f"{schema_id}: {str(exc).splitlines()[0]}") from exc


class SchemaValidator:
    """Validation against one schema of the tree: jsonschema's verdicts and words, with
    jsonschema-rs (when installed) deciding alone what it finds valid, and evalrunner's own
    rule that a float is never an integer (:func:`float_integer_errors`)."""

    def __init__(self, tree: SchemaTree, schema_id: str, *, fast: bool = True) -> None:
        self.tree = tree
        self.schema_id = schema_id
        self.fast = _fast_validator(tree, schema_id) if fast else None
        """jsonschema-rs's validator, or ``None`` (then jsonschema decides every instance)."""

    @cached_property
    def reference(self) -> Draft202012Validator:
        """jsonschema's validator of the schema (built when first needed)."""
        return self.tree.reference(self.schema_id)

    def schema_valid(self, instance: object) -> bool:
        """Whether ``instance`` is valid as JSON Schema says, before evalrunner's own rules."""
        if self.fast is not None:
            try:
                if self.fast.is_valid(instance):
                    return True
            except ValueError:
                # A value JSON has no type for (a date, a key that is no string, a lone
                # surrogate): jsonschema-rs cannot read it, jsonschema judges it.
                pass
        # "Invalid" from jsonschema-rs is only a reason to ask; jsonschema answers.
        return bool(self.reference.is_valid(instance))

    def is_valid(self, instance: object) -> bool:
        """Whether ``instance`` is valid: no error in :meth:`iter_errors`."""
        if not self.schema_valid(instance):
            return False
        return not has_float_integers(instance) or not float_integer_errors(
            self.reference, instance
        )

    def iter_errors(self, instance: object) -> Iterator[ValidationError]:
        """Everything wrong with ``instance``, as jsonschema's errors (none when valid)."""
        if not self.schema_valid(instance):
            yield from self.reference.iter_errors(instance)
        if has_float_integers(instance):
            yield from float_integer_errors(self.reference, instance)


# --- evalrunner's own rule: a float is never an integer -----------------------------------------
#
# JSON Schema calls ``1.0`` an integer; every loader here keeps ``1.0`` a float, and a float
# where a count or an index is meant would be shown as ``1.0`` in reports, or crash the
# indexing. So ``call_index: 0.0`` and ``exact_tool_calls: 1.0`` are refused, in every format,
# with a position, as a type error in jsonschema's own words.

_NOT_WHOLE = 0.5
"""What a float with a zero fraction is replaced by to ask jsonschema where an integer is
wanted: a number that is no integer to JSON Schema either."""


def has_float_integers(instance: object) -> bool:
    """Whether ``instance`` holds a float with a zero fraction anywhere (an integer to JSON
    Schema, a float to evalrunner)."""
    stack = [instance]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, float) and value.is_integer():
            return True
    return False


_Place = tuple[Any, ...]
"""Where a value sits in an instance: keys and indexes from the top."""


def _float_integers(value: object, path: _Place, found: dict[_Place, float]) -> object:
    """A copy of ``value`` with each float that has a zero fraction replaced by
    :data:`_NOT_WHOLE`; each one replaced is recorded in ``found`` by its path."""
    if isinstance(value, dict):
        return {key: _float_integers(item, (*path, key), found) for key, item in value.items()}
    if isinstance(value, list):
        return [_float_integers(item, (*path, i), found) for i, item in enumerate(value)]
    if isinstance(value, float) and value.is_integer():
        found[path] = value
        return _NOT_WHOLE
    return value


def float_integer_errors(
    reference: Draft202012Validator, instance: object
) -> list[ValidationError]:
    """A type error for each float with a zero fraction where the schema wants an integer (and
    not any number), worded as jsonschema words a type error.

    Where an integer is wanted is jsonschema's to say: it is asked about a copy of ``instance``
    with each such float made a number with a fraction, and its type errors at those places
    that name ``integer`` but not ``number`` are the places."""
    from jsonschema.exceptions import ValidationError

    found: dict[_Place, float] = {}
    probe = _float_integers(instance, (), found)
    errors: list[ValidationError] = []
    for error in reference.iter_errors(probe):
        path = tuple(error.absolute_path)
        if error.validator != "type" or path not in found:
            continue
        wanted = error.validator_value
        types = wanted if isinstance(wanted, list) else [wanted]
        if "integer" not in types or "number" in types:
            continue
        value = found[path]
        errors.append(
            ValidationError(
                f"{value!r} is not of type {', '.join(repr(t) for t in types)}",
                validator="type",
                validator_value=wanted,
                instance=value,
                schema=error.schema,
                path=error.absolute_path,
                schema_path=error.absolute_schema_path,
            )
        )
    return errors


@cache
def case_validator() -> SchemaValidator:
    """The validator fixtures are admitted with."""
    return SchemaValidator(schema_tree(), CASE_ID)


@cache
def config_validator() -> SchemaValidator:
    """The validator of the ``[eval]`` configuration (wrapped as ``{"eval": ...}``)."""
    return SchemaValidator(schema_tree(), CONFIG_ID)


@cache
def report_validator() -> SchemaValidator:
    """The validator of JSON reports (read once per file: jsonschema alone)."""
    return SchemaValidator(schema_tree(), REPORT_ID, fast=False)


@cache
def agent_reply_validator() -> SchemaValidator:
    """The validator of an agent command's reply lines."""
    return SchemaValidator(schema_tree(), AGENT_REPLY_ID)
