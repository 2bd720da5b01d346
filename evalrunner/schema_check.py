"""JSON Schemas written inside a fixture (``response_json.schema``, a ``tool_calls_match`` call's
``arguments_schema``, a tool double's ``parameters``): checked at admission, and applied to a
reply or a call's arguments when it runs.

A schema is held to the JSON Schema 2020-12 metaschema, and beyond it: every keyword must be one
JSON Schema defines (the metaschema lets any other key through, so a typo such as ``requried``
would silently check nothing); ``$ref`` must point at a subschema of the schema itself (``#``, a
JSON Pointer ``#/...`` or an ``$anchor`` ``#name``; nothing is ever fetched), and no chain of
references may lead back to where it started without descending into the value (evaluating it
would never end); ``$id`` and a ``$schema`` other than 2020-12 are refused (a fixture's schema is
one self-contained 2020-12 document). ``pattern`` and ``patternProperties`` are RE2 regular
expressions, searched in time linear in the text (Python's engine can take exponential time on
a pattern such as ``^(a+)+$``), so one RE2 cannot compile is refused; ``format`` is asserted for
the formats in :data:`ASSERTED_FORMATS` and refused otherwise, since it would check nothing.
A schema of ``false`` accepts nothing and is refused. jsonschema is imported only when a schema
is checked or applied.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from evalrunner.model import JSONPath, argument_json, render_json_path
from evalrunner.text import pointer, short

if TYPE_CHECKING:
    import re2
    from jsonschema import Draft202012Validator, FormatChecker
    from jsonschema.exceptions import ValidationError

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

_IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas"})
"""Keywords that apply their subschemas to the value itself, not to a part of it: a chain of
these and references that comes back to where it started never ends."""

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

ASSERTED_FORMATS = ("date", "email", "idn-email", "ipv4", "ipv6", "uuid")
"""The ``format`` values a fixture's schema may use; each is asserted with jsonschema's own
checker, which needs nothing beyond the standard library (``email`` and ``idn-email`` hold a
string to containing an ``@``, no more). Any other format would check nothing here (its checker
needs a package evalrunner does not depend on, or there is none), so it is refused."""


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """What is wrong at ``path`` (relative to the schema's root); ``key``: the problem is the
    key at the end of ``path`` itself, not its value."""

    path: JSONPath
    message: str
    key: bool = False


def schema_problems(schema: object, *, tool_parameters: bool = False) -> list[SchemaProblem]:
    """Everything wrong with ``schema`` as a fixture's JSON Schema (see the module doc).

    A tool double's ``parameters`` (``tool_parameters``) describe the tool to the model, as
    the agent's real tool definitions do, so a ``format`` outside :data:`ASSERTED_FORMATS`
    (``date-time``, ``uri``) is an annotation there, as it is to the model APIs: kept, not
    asserted. In a check (``arguments_schema``, ``response_json.schema``) it is refused, since
    the author wrote it to check something."""
    if schema is False or (isinstance(schema, dict) and _accepts_all(schema.get("not"))):
        what = "false" if schema is False else short(schema)
        return [
            SchemaProblem(
                (),
                f"the schema {what} accepts no value, so nothing can ever satisfy it; write the "
                "schema the value must satisfy (true accepts any value)",
            )
        ]
    problems = [_meta_problem(error) for error in _metaschema_errors(schema)]
    problems.extend(_Walk(schema, annotated_formats=tool_parameters).problems())
    # The metaschema reaches a subschema through each vocabulary: one error, many times.
    return list(dict.fromkeys(problems))


def _accepts_all(schema: object) -> bool:
    """Whether ``schema`` is ``true`` or ``{}`` (written as such: not a number equal to 1)."""
    return schema is True or (isinstance(schema, dict) and not schema)


def located(at: JSONPath, problem: SchemaProblem) -> str:
    """``problem`` as admission words it for a schema written at ``at`` in a fixture: the path
    to the part at fault, then what is wrong (``tools[0].parameters.requried: unknown ...``)."""
    from evalrunner.text import dotted

    return f"{dotted(at + problem.path)}: {problem.message}"


def best_error(schema_text: str, instance: object) -> tuple[str, JSONPath] | None:
    """The most telling reason ``instance`` breaks the schema (JSON text of an admitted
    schema), with where in ``instance``; ``None`` when it satisfies it. Never raises: a value
    nested too deeply to check is a reason too."""
    fast = _fast(schema_text)
    if fast is not None and fast.is_valid(instance):
        return None
    from jsonschema.exceptions import best_match

    try:
        error = best_match(_validator(schema_text).iter_errors(instance))
    except RecursionError:
        return "the value nests too deeply to be checked against the schema", ()
    if error is None:
        return None
    return error.message, tuple(error.absolute_path)


def argument_problem(schema: Mapping[str, Any], arguments: object) -> str | None:
    """Why ``arguments`` break ``schema`` (one sentence, naming where), or ``None``."""
    found = best_error(argument_json(schema), arguments)
    if found is None:
        return None
    message, where = found
    at = f" (at {render_json_path(where)})" if where else ""
    return f"{message}{at}"


# --- admission ---------------------------------------------------------------------------------


def _metaschema_errors(schema: object) -> list[Any]:
    """jsonschema's errors of ``schema`` against the 2020-12 metaschema (its formats not
    asserted: patterns are RE2's, checked by :class:`_Walk`). jsonschema-rs vouches for a
    valid one first, so a valid suite need not import jsonschema."""
    if _meta_valid(schema):
        return []
    return list(_metaschema().iter_errors(schema))


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


@cache
def _metaschema() -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(Draft202012Validator.META_SCHEMA)


def _meta_problem(error: Any) -> SchemaProblem:
    path: JSONPath = tuple(error.absolute_path)
    keyword = path[-1] if path else None
    if keyword == "type" and error.validator in ("anyOf", "enum", "type"):
        kinds = "array, boolean, integer, null, number, object, string"
        return SchemaProblem(
            path,
            f"a JSON Schema type is one of {kinds} (or a list of them), "
            f"got {short(error.instance)}",
        )
    if error.validator == "type" and not path:
        return SchemaProblem(path, "a JSON Schema is an object (or true/false)")
    return SchemaProblem(path, f"not valid JSON Schema: {_double_quoted(error.message)}")


def _double_quoted(message: str) -> str:
    """jsonschema's message with the values it quotes (Python reprs in single quotes) in
    double quotes, as every other admission message quotes them."""
    # A quote inside a word is an apostrophe, and a repr holding a double quote is left as is.
    return re.sub(r"(?<!\w)'((?:[^'\\\"]|\\.)*)'(?!\w)", lambda m: json.dumps(m.group(1)), message)


class _Walk:
    """One pass over every subschema of ``root`` (never into values that are data, such as
    ``const`` or ``default``), collecting what the checks beyond the metaschema need."""

    def __init__(self, root: object, *, annotated_formats: bool = False) -> None:
        self.root = root
        self.annotated_formats = annotated_formats
        self.found: list[SchemaProblem] = []
        self.nodes: dict[JSONPath, object] = {}
        """Every subschema, by its path: what a reference may point at."""
        self.anchors: dict[str, JSONPath] = {}
        self.references: list[tuple[JSONPath, str, str]] = []
        """(the subschema, ``$ref`` or ``$dynamicRef``, the reference)."""
        self.written: dict[JSONPath, str] = {}
        """Each reference, by the path of its keyword."""
        self.pattern_properties: list[JSONPath] = []
        self.unevaluated: list[JSONPath] = []
        stack: list[tuple[object, JSONPath]] = [(root, ())]
        while stack:
            node, path = stack.pop()
            self.nodes[path] = node
            if isinstance(node, dict):  # else true/false, or no schema (the metaschema says)
                for key, value in node.items():
                    stack.extend(self._keyword(path, key, value))

    def _keyword(self, path: JSONPath, key: str, value: object) -> list[tuple[object, JSONPath]]:
        """Check one keyword of the subschema at ``path``; its subschemas, to walk."""
        here = (*path, key)
        if key not in KEYWORDS:
            self.found.append(SchemaProblem(here, _unknown(key), key=True))
            return []
        if key in ("$ref", "$dynamicRef") and isinstance(value, str):
            self.references.append((path, key, value))
            self.written[here] = value
        elif key in ("$anchor", "$dynamicAnchor") and isinstance(value, str):
            if value in self.anchors:
                self.found.append(
                    SchemaProblem(
                        here,
                        f"anchor {short(value)} is already defined at "
                        f"{_pointer(self.anchors[value])}; give each anchor its own name",
                    )
                )
            self.anchors.setdefault(value, path)
        elif key == "$id":
            self.found.append(
                SchemaProblem(
                    here,
                    "$id is not allowed in a fixture's schema: it is one self-contained "
                    'document; leave $id out and refer inside it with $ref: "#/..."',
                    key=True,
                )
            )
        elif key == "$schema" and value != DRAFT202012:
            self.found.append(
                SchemaProblem(
                    here,
                    "a fixture's schema is JSON Schema 2020-12: $schema is "
                    f"{json.dumps(DRAFT202012)} or left out, got {short(value)}",
                )
            )
        elif key == "pattern" and isinstance(value, str):
            self._regex(here, value, key=False)
        elif (
            key == "format"
            and isinstance(value, str)
            and value not in ASSERTED_FORMATS
            and not self.annotated_formats
        ):
            self.found.append(SchemaProblem(here, _unasserted(value)))
        elif key == "patternProperties" and isinstance(value, dict):
            self.pattern_properties.append(here)
            for name in value:
                self._regex((*here, name), name, key=True)
        elif key == "unevaluatedProperties":
            self.unevaluated.append(here)
        if key in _SUBSCHEMA:
            return [(value, here)]
        if key in _SUBSCHEMA_LISTS and isinstance(value, list):
            return [(item, (*here, i)) for i, item in enumerate(value)]
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            return [(item, (*here, name)) for name, item in value.items()]
        return []

    def _regex(self, here: JSONPath, pattern: str, *, key: bool) -> None:
        reason = regex_problem(pattern)
        if reason is not None:
            self.found.append(SchemaProblem(here, reason, key=key))

    def problems(self) -> list[SchemaProblem]:
        """What the walk found, then references that do not resolve, then (when every
        reference resolves) chains of references that would never end."""
        found = list(self.found)
        targets: dict[JSONPath, list[tuple[JSONPath, JSONPath]]] = {}
        for path, key, reference in self.references:
            target = self._target(reference)
            if isinstance(target, str):
                found.append(SchemaProblem((*path, key), target.replace("$ref", key, 1)))
            else:
                targets.setdefault(path, []).append((target, (*path, key)))
        if self.unevaluated and self.pattern_properties:
            found.extend(
                SchemaProblem(
                    at,
                    "patternProperties cannot be used in a schema that also has "
                    f"unevaluatedProperties (at {_pointer(self.unevaluated[0][:-1])}): "
                    "jsonschema would match those property names with Python's regular "
                    "expressions, not RE2; write additionalProperties instead",
                    key=True,
                )
                for at in self.pattern_properties
            )
        if not found:
            found.extend(self._endless(targets))
        return found

    def _target(self, reference: str) -> JSONPath | str:
        """The path of the subschema ``reference`` points at, or why it points at none."""
        shown = short(reference)
        if reference == "#":
            return ()
        if reference.startswith("#/"):
            path: list[str | int] = []
            node = self.root
            # As referencing resolves it: the fragment is percent-decoded first, then split,
            # so "%2F" separates tokens like "/" does.
            for token in unquote(reference[2:]).split("/"):
                token = token.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and token in node:
                    node = node[token]
                    path.append(token)
                elif (
                    isinstance(node, list)
                    and token.isascii()
                    and token.isdigit()
                    and (int(token) < len(node))
                ):
                    node = node[int(token)]
                    path.append(int(token))
                else:
                    return f"$ref {shown} does not resolve inside this schema"
            if tuple(path) not in self.nodes:
                return (
                    f"$ref {shown} points at a part of this schema that is not a schema; "
                    'point at a subschema, such as "#/$defs/city"'
                )
            return tuple(path)
        if reference.startswith("#"):
            name = unquote(reference[1:])
            if name in self.anchors:
                return self.anchors[name]
            return (
                f"$ref {shown} names no $anchor of this schema; add $anchor: "
                f"{json.dumps(name, ensure_ascii=False)} to the subschema it means, or "
                'write a JSON Pointer such as "#/$defs/city"'
            )
        return (
            f"$ref {shown} points outside this schema; a fixture's schema refers "
            'only inside itself ("#", a JSON Pointer such as "#/$defs/city", or "#" and an '
            "$anchor), nothing is fetched"
        )

    def _endless(
        self, targets: Mapping[JSONPath, list[tuple[JSONPath, JSONPath]]]
    ) -> list[SchemaProblem]:
        """A problem at a reference of each chain of references (and keywords that apply to
        the value itself) that leads back to its start: checking any value would never end."""
        edges: dict[JSONPath, list[tuple[JSONPath, JSONPath | None]]] = {}
        for path, node in self.nodes.items():
            out: list[tuple[JSONPath, JSONPath | None]] = [
                (target, at) for target, at in targets.get(path, ())
            ]
            if isinstance(node, dict):
                for key in _IN_PLACE & node.keys():
                    value = node[key]
                    if isinstance(value, list):
                        out.extend(((*path, key, i), None) for i in range(len(value)))
                    elif isinstance(value, dict) and key == "dependentSchemas":
                        out.extend(((*path, key, name), None) for name in value)
                    else:
                        out.append(((*path, key), None))
            edges[path] = out
        problems: list[SchemaProblem] = []
        state: dict[JSONPath, bool] = {}  # False while on the stack, True when done
        for start in self.nodes:
            if start in state:
                continue
            state[start] = False
            # (subschema, its edges still to follow, the reference that led to it)
            stack: list[
                tuple[JSONPath, Iterator[tuple[JSONPath, JSONPath | None]], JSONPath | None]
            ] = [(start, iter(edges[start]), None)]
            while stack:
                node_path, pending, _ = stack[-1]
                for target, via in pending:
                    if target not in state:
                        state[target] = False
                        stack.append((target, iter(edges.get(target, ())), via))
                        break
                    if state[target] is False:  # back to a subschema on the stack: a cycle
                        first = next(i for i, frame in enumerate(stack) if frame[0] == target)
                        chain = [frame[2] for frame in stack[first + 1 :]] + [via]
                        at = next((r for r in chain if r is not None), None)
                        if at is not None:
                            loop = [frame[0] for frame in stack[first:]]
                            message = _endless_message(self.written[at], loop)
                            problems.append(SchemaProblem(at, message))
                else:
                    state[node_path] = True
                    stack.pop()
        return problems


def _endless_message(reference: str, loop: list[JSONPath]) -> str:
    steps = " -> ".join(_pointer(path) for path in [*loop, loop[0]])
    return (
        f"$ref {short(reference)} leads back to where it started without looking inside the "
        f"value ({steps}), so checking any value against it would never end; make "
        "the chain check a part of the value (under properties or items), or point the "
        "reference at a subschema that does not lead back"
    )


def _pointer(path: JSONPath) -> str:
    """``path`` as the JSON Pointer fragment a ``$ref`` would write."""
    return json.dumps("#" + pointer(path))


def _unasserted(name: str) -> str:
    return (
        f"format {short(name)} is not checked by evalrunner, so it would check nothing; "
        f"the formats checked are {', '.join(ASSERTED_FORMATS)}; for another, "
        "describe the text with pattern (an RE2 regular expression) instead"
    )


def regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a ``pattern`` (or ``patternProperties`` name) of a fixture's
    schema, or ``None``."""
    import re2

    try:
        _compiled(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        return (
            f"pattern {short(pattern)} is not a valid regular expression for RE2 ({reason}); "
            "a fixture's schema is searched with RE2, in time linear in the text, so it has "
            "no lookaround and no backreferences: rewrite the pattern without them"
        )
    return None


@cache
def _re2_options() -> re2.Options:
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would otherwise print every bad pattern to stderr
    return options


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re2._Regexp[str]:
    import re2

    return re2.compile(pattern, _re2_options())


def _unknown(key: str) -> str:
    message = f"unknown JSON Schema keyword {json.dumps(key, ensure_ascii=False)}"
    close = difflib.get_close_matches(key, sorted(KEYWORDS), n=1, cutoff=0.6)
    hint = f"did you mean {json.dumps(close[0])}?" if close else "use a JSON Schema 2020-12 keyword"
    return f"{message}, which would check nothing; {hint}"


# --- evaluation --------------------------------------------------------------------------------


def _pattern(
    validator: Any, pattern: str, instance: object, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """``pattern``, searched with RE2."""
    from jsonschema.exceptions import ValidationError

    if isinstance(instance, str) and _compiled(pattern).search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: object, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """``patternProperties``, its names searched with RE2."""
    if not isinstance(instance, dict):
        return
    for pattern, subschema in patterns.items():
        search = _compiled(pattern).search
        for name, value in instance.items():
            if search(name) is not None:
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: object, instance: object, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """``additionalProperties``, telling the properties ``patternProperties`` covers with
    RE2."""
    from jsonschema.exceptions import ValidationError

    if not isinstance(instance, dict):
        return
    known = schema.get("properties", {})
    searches = [_compiled(p).search for p in schema.get("patternProperties", {})]
    extras = [
        name
        for name in instance
        if name not in known and not any(search(name) is not None for search in searches)
    ]
    if isinstance(additional, dict):
        for name in extras:
            yield from validator.descend(instance[name], additional, path=name)
    elif additional is False and extras:
        names = ", ".join(repr(name) for name in sorted(extras))
        verb = "was" if len(extras) == 1 else "were"
        yield ValidationError(f"Additional properties are not allowed ({names} {verb} unexpected)")


@cache
def _evaluator() -> Any:
    """Draft 2020-12 with RE2 for every keyword that matches a regular expression, extended
    the documented way (``jsonschema.validators.extend`` replaces keywords by name)."""
    from jsonschema import Draft202012Validator, validators

    # ``extend`` has no annotations in jsonschema's stubs.
    return validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        validators={
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )


@cache
def _format_checker() -> FormatChecker:
    from jsonschema import FormatChecker

    return FormatChecker(ASSERTED_FORMATS)


@lru_cache(maxsize=256)
def _validator(schema_text: str) -> Draft202012Validator:
    """A validator per schema (keyed by its text: a fixture's schema is plain JSON). Its
    registry is empty and retrieves nothing: admission allows only references inside it."""
    from referencing import Registry

    validator: Draft202012Validator = _evaluator()(
        json.loads(schema_text), registry=Registry(), format_checker=_format_checker()
    )
    return validator


@lru_cache(maxsize=256)
def _fast(schema_text: str) -> Any:
    """jsonschema-rs's validator of the schema, offline, with RE2's ``pattern``, to vouch for
    a valid value without jsonschema; None when it is not installed, cannot build it, or
    would judge differently: it asserts no format, and matches ``patternProperties`` with
    its own engine."""
    if '"format"' in schema_text or '"patternProperties"' in schema_text:
        return None
    try:
        import jsonschema_rs

        return jsonschema_rs.Draft202012Validator(
            json.loads(schema_text), keywords={"pattern": Re2Pattern}, offline=True
        )
    except (ImportError, ValueError):
        return None


class Re2Pattern:
    """``pattern`` searched with RE2, for jsonschema-rs: as :func:`_pattern` decides it."""

    def __init__(self, parent_schema: dict[str, Any], value: str, schema_path: list[Any]) -> None:
        self.search = _compiled(value).search

    def validate(self, instance: object) -> None:
        """Raise unless ``instance`` (a string) matches; other types are not this keyword's."""
        if isinstance(instance, str) and self.search(instance) is None:
            raise ValueError(f"{instance!r} does not match")


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
