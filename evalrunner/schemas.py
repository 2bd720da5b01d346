"""The schema registry: the committed ``schemas/`` tree, loaded once, every ``$ref`` resolved.

The JSON files are the single source of truth for fixture, config and report shape. The wheel
carries them as ``evalrunner/schemas``; a source checkout reads the repository's ``schemas/``.
Validation never touches the network: the registry holds every schema and has no retriever.
"""

from __future__ import annotations

import json
import numbers
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast
from urllib.parse import unquote, urldefrag, urljoin

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from jsonschema import Draft202012Validator
    from referencing import Registry

# jsonschema and referencing are imported only when a validator is built, to word what is
# wrong: the compiled checks below decide the common case (a valid fixture, config or reply)
# without them, resolving their own ``$ref`` with :class:`TreeResolver`. Together they cost
# about 60 ms of a start (referencing alone, with attrs and rpds, 50 ms).

BASE_URI = "https://evalrunner.dev/schemas/v1/"
"""Every ``$id`` is this prefix plus the schema's path under ``schemas/``."""

CASE_ID = BASE_URI + "case.schema.json"
CONFIG_ID = BASE_URI + "config.schema.json"
REPORT_ID = BASE_URI + "report.schema.json"
AGENT_REPLY_ID = BASE_URI + "agent-command/reply.schema.json"
KIND_DIR = "expects"


def _is_integer(checker: object, instance: object) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def strict_validator() -> type[Draft202012Validator]:
    """Draft 2020-12, except that ``"integer"`` means an integer as parsed, not any number with
    a zero fraction. JSON Schema calls ``1.0`` an integer; every loader here keeps ``1.0`` a
    float, and a float where a count or an index is meant would be shown as ``1.0`` in reports,
    or crash the indexing. So ``call_index: 0.0`` and ``exact_tool_calls: 1.0`` are refused, in
    every format, with a position."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    # extend() makes a subclass in all but name; it is untyped, so say what it returns.
    return cast(
        type[Draft202012Validator],
        extend(  # type: ignore[no-untyped-call]
            Draft202012Validator,
            type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
        ),
    )


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
        """The documents as a ``referencing`` registry, for jsonschema's validators."""
        from referencing import Registry
        from referencing.jsonschema import DRAFT202012

        # jsonschema picks the validator class of a $ref's target by its "$schema", which
        # would swap the strict validator back for the stock one; every file here is Draft
        # 2020-12 (check_schemas), so the registry holds them without that key.
        resources = [
            (BASE_URI + rel, DRAFT202012.create_resource(_without_dialect(schema)))
            for rel, schema in self.documents.items()
        ]
        return Registry().with_resources(resources).crawl()

    @cached_property
    def _by_uri(self) -> dict[str, dict[str, Any]]:
        return {BASE_URI + rel: _without_dialect(doc) for rel, doc in self.documents.items()}

    def resolver(self, base_uri: str = BASE_URI) -> TreeResolver:
        """A resolver of ``$ref`` among these documents, from ``base_uri``."""
        return TreeResolver(self._by_uri, base_uri)

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
        with strict integers (:func:`strict_validator`)."""
        return strict_validator()({"$ref": schema_id}, registry=self.registry)

    def check(self, schema_id: str) -> Check | None:
        """A compiled :data:`Check` for the schema with this ``$id``, or ``None`` when the
        schema uses a keyword (or a form of one) that :func:`compile_check` does not know."""
        try:
            return compile_check({"$ref": schema_id}, self.resolver())
        except UnsupportedSchema:
            return None


def _without_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "$schema"}


_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
"""The keywords whose value is a list of schemas, which a pointer may index."""


def _is_index(token: str) -> bool:
    """An array index as JSON pointer writes it: ASCII digits, no leading zero."""
    return token.isascii() and token.isdigit() and (token == "0" or not token.startswith("0"))


class UnresolvedRef(LookupError):
    """A ``$ref`` that names no document of the tree, or no place in one."""


class Resolved(NamedTuple):
    """What a ``$ref`` points at, and the resolver for the refs inside it."""

    contents: Any
    resolver: TreeResolver


class TreeResolver:
    """``$ref`` resolution among a fixed set of documents keyed by their ``$id``: the URI is
    joined to the base (RFC 3986, as referencing does) and its fragment read as a JSON
    pointer. Nothing else (anchors, ids inside a document): what it cannot resolve it says
    so, and the caller falls back to jsonschema. A test holds it to referencing on every
    ``$ref`` of the shipped tree."""

    def __init__(self, documents: dict[str, Any], base_uri: str) -> None:
        self.documents = documents
        self.base_uri = base_uri

    def lookup(self, ref: str) -> Resolved:
        """The target of ``ref``; :class:`UnresolvedRef` if it has none here."""
        if any(char <= " " for char in ref):
            # URL parsing drops tabs and newlines and strips spaces, where referencing reads a
            # fragment as written: two different targets. Not this resolver's to decide.
            raise UnresolvedRef(f"{ref!r}: a control character or space in a $ref")
        if ref.startswith("#"):
            uri, fragment = self.base_uri, ref[1:]
        else:
            uri, fragment = urldefrag(urljoin(self.base_uri, ref))
        if uri not in self.documents:
            raise UnresolvedRef(f"no schema {uri!r}")
        node = self.documents[uri]
        if fragment:
            if not fragment.startswith("/"):
                raise UnresolvedRef(f"{ref!r}: only JSON-pointer fragments are resolved")
            key = ""
            for token in unquote(fragment)[1:].split("/"):
                token = token.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and token in node:
                    node = node[token]
                elif (
                    isinstance(node, list)
                    and key in _SCHEMA_LISTS
                    and _is_index(token)
                    and int(token) < len(node)
                ):
                    # Only into a keyword's list of schemas: referencing takes any other list
                    # on the way (a $defs entry that is no schema) for a schema, and fails.
                    node = node[int(token)]
                else:
                    raise UnresolvedRef(f"{ref!r}: nothing at {token!r}")
                key = token
                if isinstance(node, dict) and "$id" in node:
                    # An id on the way moves the base for what lies below it: a resource of
                    # its own, which this does not index (nor does it guess).
                    raise UnresolvedRef(f"{ref!r}: passes through an embedded $id")
        return Resolved(node, TreeResolver(self.documents, uri))

    def in_subresource(self, schema: dict[str, Any]) -> TreeResolver:
        """The resolver inside ``schema``, whose ``$id`` moves the base URI."""
        identifier = schema.get("$id")
        if not isinstance(identifier, str):
            return self
        uri = urldefrag(urljoin(self.base_uri, identifier))[0]
        if self.documents.get(uri) is not schema and uri != self.base_uri:
            # An id inside a document makes a resource of its own, which this does not index.
            raise UnresolvedRef(f"embedded $id {identifier!r}")
        return TreeResolver(self.documents, uri)


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

    Checks that each file's ``$id`` mirrors its path and that every ``$ref`` resolves; any
    failure is a :class:`SchemaTreeError`. That each file is a valid Draft 2020-12 schema is
    :func:`check_schemas`'s to say: the files ship with the package, so a test holds them to
    it rather than every start paying for it.
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
    tree = SchemaTree(documents)
    for rel, schema in documents.items():
        resolver = tree.resolver(BASE_URI + rel)
        for ref in _refs(schema):
            try:
                resolver.lookup(ref)
            except UnresolvedRef:
                # What the compiled checks do not resolve (an anchor, an embedded resource)
                # may still be valid: referencing, which jsonschema resolves with, decides.
                try:
                    tree.registry.resolver(base_uri=BASE_URI + rel).lookup(ref)
                except Exception as exc:
                    message = f"schemas/{rel}: $ref {ref!r} does not resolve"
                    raise SchemaTreeError(message) from exc
    return tree


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


# --- a compiled yes/no check ------------------------------------------------------------------
#
# jsonschema walks a schema anew for every instance, through $ref lookups and a validator object
# per subschema, to collect errors; that is most of the cost of admitting a case. Deciding only
# *whether* an instance is valid needs none of that: the schema is turned once into the Python
# source of a function (straight-line tests, a loop per array, $ref targets written in place),
# compiled once, cached. The function must agree exactly with strict_validator(), because a
# "yes" here skips jsonschema altogether; so every keyword is implemented as jsonschema 4
# defines it, and a keyword (or form of one) not implemented here refuses to compile rather
# than being ignored. Nothing of a schema reaches the source but through repr() of a string or
# an integer; every other value (a pattern's search, a set of names, a float bound) is a
# constant in the function's namespace.

Check = Callable[[object], bool]
"""Whether an instance is valid against a schema, as :func:`strict_validator` would say."""


class UnsupportedSchema(Exception):
    """The schema uses a keyword, or a form of one, that :func:`compile_check` cannot decide."""


_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "$defs",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
"""Keywords that never make an instance invalid ($defs only holds targets for $ref)."""


def _is_number(instance: object) -> bool:
    kind = type(instance)
    if kind is int or kind is float:  # what loaders give, without the ABC's slower check
        return True
    return isinstance(instance, numbers.Number) and not isinstance(instance, bool)


def _is_strict_integer(instance: object) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


TYPE_CHECKS: dict[str, Check] = {
    "array": lambda instance: isinstance(instance, list),
    "boolean": lambda instance: isinstance(instance, bool),
    "integer": _is_strict_integer,
    "null": lambda instance: instance is None,
    "number": _is_number,
    "object": lambda instance: isinstance(instance, dict),
    "string": lambda instance: isinstance(instance, str),
}
"""Each JSON type as :func:`strict_validator`'s type checker defines it (a test holds them
together)."""

_TYPE_TESTS = {
    "array": "isinstance({0}, list)",
    "boolean": "isinstance({0}, bool)",
    "integer": "(isinstance({0}, int) and not isinstance({0}, bool))",
    "null": "{0} is None",
    "number": "_is_number({0})",
    "object": "isinstance({0}, dict)",
    "string": "isinstance({0}, str)",
}
""":data:`TYPE_CHECKS` as source, for a value named ``{0}`` (a test holds the two together)."""

_NOT_BLANK = "\\S"
"""The pattern of every non-blank string of the schemas: written as ``str.isspace``, which
tests each character with the same Unicode table (``Py_UNICODE_ISSPACE``) as ``re``'s ``\\S``
does, without a regular-expression search per string."""


def _string_list(value: object, keyword: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UnsupportedSchema(f"{keyword}: {value!r}")
    return tuple(value)


def _count(value: object, keyword: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UnsupportedSchema(f"{keyword}: {value!r}")
    return value


def _bound(value: object, keyword: str) -> float:
    if not _is_number(value) or not isinstance(value, (int, float)):
        raise UnsupportedSchema(f"{keyword}: {value!r}")
    return value


def _indented(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _guarded(test: str | None, lines: list[str]) -> list[str]:
    """``lines`` run only when ``test`` holds (always, for ``None``)."""
    if test is None or not lines:
        return lines
    return [f"if {test}:", *_indented(lines)]


class _TooLarge(Exception):
    """Writing every ``$ref`` target in place grew past :data:`_MAX_BLOCKS`."""


_MAX_BLOCKS = 20_000
"""Subschemas written in place, at most, before every ``$ref`` becomes a call instead: a
target referred to twice by a target referred to twice (and so on) would otherwise double the
source at each level."""


class _Writer:
    """Writes the source of one schema's check and everything it refers to.

    Each subschema becomes lines that ``return False`` unless the value named to it is valid,
    and fall through when it is. A subschema asked a yes/no question (``anyOf``, ``oneOf``,
    ``not``, ``if``) and a ``$ref`` that refers back into itself become functions, called by
    name; any other ``$ref`` target is written in place (``inline``), with names of its own.
    """

    def __init__(self, *, inline: bool) -> None:
        self.inline = inline
        self.definitions: list[str] = []
        self.namespace: dict[str, object] = {"_is_number": _is_number}
        self._functions: dict[tuple[int, str], str] = {}
        self._keep: list[object] = []  # the schemas whose id() keys _functions stay alive
        self._entered: set[int] = set()  # $ref targets being written in place, by id()
        self._names = 0
        self._blocks = 0

    def name(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix}{self._names}"

    def constant(self, value: object) -> str:
        name = self.name("_c")
        self.namespace[name] = value
        return name

    def literal(self, value: float) -> str:
        # repr() of an int is its digits; a float (inf, or one repr rounds) goes by name.
        return repr(value) if type(value) is int else self.constant(value)

    def function(self, schema: object, resolver: TreeResolver) -> str:
        """The name of a function ``(value) -> bool`` that checks ``schema``."""
        key = (id(schema), resolver.base_uri)
        if key not in self._functions:
            name = self.name("_f")
            self._functions[key] = name  # before the body: a ref back into it calls it
            self._keep.append(schema)
            body = self.block(schema, "v", resolver)
            self.definitions.append(
                "\n".join([f"def {name}(v):", *_indented(body), "    return True", ""])
            )
        return self._functions[key]

    def block(self, schema: object, var: str, resolver: TreeResolver) -> list[str]:
        """Lines that ``return False`` unless the value ``var`` is valid against ``schema``."""
        self._blocks += 1
        if self.inline and self._blocks > _MAX_BLOCKS:
            raise _TooLarge
        if schema is True:
            return []
        if schema is False:
            return ["return False"]
        if not isinstance(schema, dict):
            raise UnsupportedSchema(f"not a schema: {schema!r}")
        unknown = schema.keys() - _KEYWORDS - _ANNOTATIONS
        if unknown:
            raise UnsupportedSchema(f"keyword(s) {sorted(unknown)}")
        if "$id" in schema:
            # As jsonschema does on entering any subschema: an $id moves the base URI.
            try:
                resolver = resolver.in_subresource(schema)
            except UnresolvedRef as exc:
                raise UnsupportedSchema(str(exc)) from exc
        lines: list[str] = []
        names = self._type_names(schema)
        # With one type declared and tested first, that type's keywords need no test of their
        # own that the value has it.
        only = names[0] if names is not None and len(names) == 1 else None
        if names is not None:
            tests = " or ".join(_TYPE_TESTS[n].format(var) for n in names)
            lines.append(f"if not ({tests}): return False")
        lines += self._values(schema, var)
        lines += self._object(schema, var, resolver, only == "object")
        lines += self._array(schema, var, resolver, only == "array")
        lines += self._string(schema, var, only == "string")
        lines += self._number(schema, var, only in {"integer", "number"})
        lines += self._ref(schema, var, resolver)
        lines += self._logic(schema, var, resolver)
        return lines

    @staticmethod
    def _type_names(schema: dict[str, Any]) -> list[str] | None:
        if "type" not in schema:
            return None
        declared = schema["type"]
        names = declared if isinstance(declared, list) else [declared]
        if not names or any(not isinstance(n, str) or n not in TYPE_CHECKS for n in names):
            raise UnsupportedSchema(f"type: {declared!r}")
        return names

    def _values(self, schema: dict[str, Any], var: str) -> list[str]:
        # jsonschema compares a string with anything by ==, so for string-only enums and consts
        # membership is exact; other values (1 vs 1.0 vs True) would need its equal().
        allowed: set[str] | None = None
        if "enum" in schema:
            allowed = set(_string_list(schema["enum"], "enum"))
        if "const" in schema:
            const = schema["const"]
            if not isinstance(const, str):
                raise UnsupportedSchema(f"const: {const!r}")
            allowed = {const} if allowed is None else allowed & {const}
        if allowed is None:
            return []
        if len(allowed) == 1:
            (only,) = allowed
            return [f"if not (isinstance({var}, str) and {var} == {only!r}): return False"]
        members = self.constant(frozenset(allowed))
        return [f"if not (isinstance({var}, str) and {var} in {members}): return False"]

    def _string(self, schema: dict[str, Any], var: str, typed: bool) -> list[str]:
        if not {"minLength", "maxLength", "pattern"} & schema.keys():
            return []
        low = _count(schema.get("minLength", 0), "minLength")
        lines = [f"if len({var}) < {low}: return False"] if low else []
        if "maxLength" in schema:
            high = _count(schema["maxLength"], "maxLength")
            lines.append(f"if len({var}) > {high}: return False")
        if "pattern" in schema:
            pattern = schema["pattern"]
            if not isinstance(pattern, str):
                raise UnsupportedSchema(f"pattern: {pattern!r}")
            if pattern == _NOT_BLANK:
                lines.append(f"if not {var} or {var}.isspace(): return False")
            else:
                # jsonschema calls re.search(pattern, instance): the same compiled pattern.
                search = self.constant(re.compile(pattern).search)
                lines.append(f"if {search}({var}) is None: return False")
        return _guarded(None if typed else f"isinstance({var}, str)", lines)

    def _number(self, schema: dict[str, Any], var: str, typed: bool) -> list[str]:
        # Written as jsonschema tests each ("instance < minimum" is the error), so that a value
        # no comparison holds for (NaN) gets the same verdict.
        failing = {
            "minimum": "{0} < {1}",
            "maximum": "{0} > {1}",
            "exclusiveMinimum": "{0} <= {1}",
            "exclusiveMaximum": "{0} >= {1}",
        }
        lines = [
            f"if {test.format(var, self.literal(_bound(schema[name], name)))}: return False"
            for name, test in failing.items()
            if name in schema
        ]
        return _guarded(None if typed else f"_is_number({var})", lines)

    def _object(
        self, schema: dict[str, Any], var: str, resolver: TreeResolver, typed: bool
    ) -> list[str]:
        if not {"properties", "additionalProperties", "required"} & schema.keys():
            return []
        declared = schema.get("properties", {})
        if not isinstance(declared, dict):
            raise UnsupportedSchema(f"properties: {declared!r}")
        required = dict.fromkeys(_string_list(schema.get("required", []), "required"))
        lines = [f"if {key!r} not in {var}: return False" for key in required]
        extra = schema.get("additionalProperties", True)
        if extra is False:
            known = self.constant(frozenset(declared))
            lines.append(f"if not {var}.keys() <= {known}: return False")
        elif extra is not True:
            key, value = self.name("k"), self.name("x")
            other = self.block(extra, value, resolver)
            if other:
                known = self.constant(frozenset(declared))
                lines += [
                    f"for {key}, {value} in {var}.items():",
                    *_indented(_guarded(f"{key} not in {known}", other)),
                ]
        # Only the declared properties are looked at, however many keys there are (an "if"
        # that tests one property of a large object stays cheap).
        for key, sub in declared.items():
            value = self.name("x")
            body = self.block(sub, value, resolver)
            if not body:
                continue
            fetched = [f"{value} = {var}[{key!r}]", *body]
            lines += fetched if key in required else _guarded(f"{key!r} in {var}", fetched)
        return _guarded(None if typed else f"isinstance({var}, dict)", lines)

    def _array(
        self, schema: dict[str, Any], var: str, resolver: TreeResolver, typed: bool
    ) -> list[str]:
        if not {"items", "minItems", "maxItems"} & schema.keys():
            return []
        low = _count(schema.get("minItems", 0), "minItems")
        lines = [f"if len({var}) < {low}: return False"] if low else []
        if "maxItems" in schema:
            high = _count(schema["maxItems"], "maxItems")
            lines.append(f"if len({var}) > {high}: return False")
        if "items" in schema:
            item = self.name("x")
            body = self.block(schema["items"], item, resolver)
            if body:
                lines += [f"for {item} in {var}:", *_indented(body)]
        return _guarded(None if typed else f"isinstance({var}, list)", lines)

    def _ref(self, schema: dict[str, Any], var: str, resolver: TreeResolver) -> list[str]:
        if "$ref" not in schema:
            return []
        ref = schema["$ref"]
        if not isinstance(ref, str):
            raise UnsupportedSchema(f"$ref: {ref!r}")
        try:
            resolved = resolver.lookup(ref)
        except UnresolvedRef as exc:
            raise UnsupportedSchema(f"$ref {ref!r} does not resolve") from exc
        key = id(resolved.contents)
        if self.inline and key not in self._entered:
            self._entered.add(key)
            try:
                return self.block(resolved.contents, var, resolved.resolver)
            finally:
                self._entered.discard(key)
        # A schema that refers back into itself: a function, which may call itself.
        return [
            f"if not {self.function(resolved.contents, resolved.resolver)}({var}): return False"
        ]

    def _logic(self, schema: dict[str, Any], var: str, resolver: TreeResolver) -> list[str]:
        lines: list[str] = []
        for keyword in ("allOf", "anyOf", "oneOf"):
            if keyword not in schema:
                continue
            subs = schema[keyword]
            if not isinstance(subs, list) or not subs:
                raise UnsupportedSchema(f"{keyword}: {subs!r}")
            if keyword == "allOf":
                for sub in subs:
                    lines += self.block(sub, var, resolver)
                continue
            calls = [f"{self.function(sub, resolver)}({var})" for sub in subs]
            if keyword == "anyOf":
                lines.append(f"if not ({' or '.join(calls)}): return False")
            else:  # each call is a bool, so the sum counts the subschemas that hold
                lines.append(f"if {' + '.join(calls)} != 1: return False")
        if "not" in schema:
            lines.append(f"if {self.function(schema['not'], resolver)}({var}): return False")
        if "if" in schema:
            condition = self.function(schema["if"], resolver)
            then = self.block(schema["then"], var, resolver) if "then" in schema else []
            otherwise = self.block(schema["else"], var, resolver) if "else" in schema else []
            if then and otherwise:
                lines += [f"if {condition}({var}):", *_indented(then), "else:"]
                lines += _indented(otherwise)
            elif then:
                lines += _guarded(f"{condition}({var})", then)
            elif otherwise:
                lines += _guarded(f"not {condition}({var})", otherwise)
        # then/else without if are ignored by jsonschema too: nothing to add.
        return lines


_KEYWORDS = frozenset(
    {
        "$id",
        "$ref",
        "type",
        "enum",
        "const",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "properties",
        "additionalProperties",
        "required",
        "items",
        "minItems",
        "maxItems",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
    }
)
"""The keywords :class:`_Writer` decides; any other one makes a schema unsupported."""


def check_source(schema: object, resolver: TreeResolver) -> tuple[str, dict[str, object]]:
    """The Python source of :func:`compile_check`'s function for ``schema``, named ``check``,
    and the namespace it runs in (its constants)."""
    try:
        return _source(schema, resolver, inline=True)
    except _TooLarge:
        return _source(schema, resolver, inline=False)


def _source(
    schema: object, resolver: TreeResolver, *, inline: bool
) -> tuple[str, dict[str, object]]:
    writer = _Writer(inline=inline)
    body = writer.block(schema, "v", resolver)
    # The check itself never raises: an instance it cannot judge (a comparison that fails) is
    # reported invalid, so that jsonschema looks at it.
    entry = [
        "def check(v):",
        "    try:",
        *_indented(_indented(body or ["pass"])),
        "    except Exception:",
        "        return False",
        "    return True",
        "",
    ]
    return "\n".join([*writer.definitions, *entry]), writer.namespace


def compile_check(schema: object, resolver: TreeResolver) -> Check:
    """Compile ``schema`` (its ``$ref`` resolved through ``resolver``) into a :data:`Check`.

    Raises :class:`UnsupportedSchema` for anything it cannot decide exactly as jsonschema
    does. The check itself never raises: an instance it cannot judge (a comparison that
    fails) is reported invalid, so that jsonschema looks at it.
    """
    try:
        source, namespace = check_source(schema, resolver)
        code = compile(source, "<compiled schema check>", "exec")
    except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        # Past CPython's compiler limits (20 nested blocks, 100 levels of indentation, the
        # recursion of a very long expression): jsonschema decides such a schema.
        raise UnsupportedSchema(f"the check's source cannot be compiled: {exc}") from None
    exec(code, namespace)
    return cast(Check, namespace["check"])


@cache
def case_check() -> Check | None:
    """The compiled check of the case schema (``None`` if it cannot be compiled): ``True`` means
    :func:`case_validator` would find no error; ``False`` means ask it."""
    return schema_tree().check(CASE_ID)


@cache
def config_check() -> Check | None:
    """The compiled check of the configuration schema, as :func:`case_check` is of cases."""
    return schema_tree().check(CONFIG_ID)


@cache
def agent_reply_check() -> Check | None:
    """The compiled check of an agent command's reply line, as :func:`case_check` is of
    cases."""
    return schema_tree().check(AGENT_REPLY_ID)


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
