"""Rewriting a fixture in another format: ``evalrunner convert FILE --to yaml|toml|json``.

A conversion is only handed back when the converted text, parsed and admitted like any
fixture, gives a :class:`Case` equal to the original's: a conversion that would change what
a case tests is a :class:`ConversionError`, never a file. Per target:

* YAML: a YAML source is re-emitted from ruamel.yaml's round-trip tree, so its comments and
  quoting stay. Other sources are written in block style; strings that a YAML 1.1 reader would
  take for something else (``no``, ``on``, ``1e3``, ``null``, ``1:20``, dates, ``""``) are
  quoted, so that even tools still on YAML 1.1 read them as text; multi-line text becomes a
  literal block when that keeps it exact, else a quoted string with escapes.
* TOML: written by tomli-w. TOML has no ``null``, so a tool call's ``arguments`` object that
  holds one is written as its argument text instead (the compact JSON the agent receives
  either way: the admitted case is the same); a null anywhere else (a tool double's
  ``when``, ``returns`` or ``parameters``) is refused, at its position, as an admission
  error. Multi-line text uses ``\"\"\"`` blocks unless a
  string holds a carriage return, which those blocks would not keep. Comments are lost.
* JSON: 2-space indent, non-ASCII kept.

The editor's schema association moves with the case: a YAML modeline, a Taplo ``#:schema``
line or a ``$schema`` key becomes the target format's own form, its relative path rebased
from the source file's directory to the output's.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, cast

import tomli_w
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString

from evalrunner.fixture.admit import admit, argument_text
from evalrunner.fixture.load import RawDocument, parse_document
from evalrunner.model import AdmissionError, Case, Format, JSONPath, JSONValue
from evalrunner.text import dotted

SUFFIXES: dict[Format, str] = {"json": ".json", "yaml": ".yaml", "toml": ".toml"}
"""The file ending a converted fixture gets, by format."""

_YAML_MODELINE = re.compile(r"^\s*#\s*yaml-language-server:\s*\$schema=(\S+)", re.MULTILINE)
_TOML_DIRECTIVE = re.compile(r"^#:schema\s+(\S+)")


class ConversionError(Exception):
    """The converted text would not admit to the same case (a bug in the converter)."""


@dataclass(frozen=True, slots=True)
class Conversion:
    """A fixture rewritten in ``format``: its text, and the case both versions admit to."""

    text: str
    format: Format
    case: Case


def schema_reference(document: RawDocument) -> str | None:
    """Where the fixture tells editors its schema is: a YAML modeline, a Taplo ``#:schema``
    directive in the leading comments of a TOML file, or a top-level ``$schema`` key."""
    text = document.source_map.text
    if document.format == "yaml":
        match = _YAML_MODELINE.search(text)
        if match:
            return match.group(1)
    elif document.format == "toml":
        for line in text.splitlines():
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                break
            directive = _TOML_DIRECTIVE.match(stripped)
            if directive:
                return directive.group(1)
    data = document.data
    if isinstance(data, dict) and isinstance(data.get("$schema"), str):
        return cast(str, data["$schema"])
    return None


def rebase(reference: str, source: Path, target: Path | None) -> str:
    """A relative schema path written for ``source``, rewritten to work from ``target``.

    URLs, absolute paths, and references when there is no target file, are kept as they are.
    """
    if target is None or "://" in reference or reference.startswith("file:"):
        return reference
    if os.path.isabs(reference):
        return reference
    schema = os.path.abspath(os.path.join(source.parent, reference))
    rel = os.path.relpath(schema, os.path.abspath(target.parent))
    return PurePosixPath(Path(rel)).as_posix()


def convert(
    document: RawDocument, target: Format, *, target_path: Path | None = None
) -> Conversion | list[AdmissionError]:
    """``document`` rewritten as ``target``; its admission errors if it does not admit.

    ``target_path`` is where the result will be written (relative schema paths are rebased to
    it); ``None`` means alongside the source. Raises :class:`ConversionError` if the result
    would admit to a different case.
    """
    original = admit(document)
    if not isinstance(original, Case):
        return original
    reference = schema_reference(document)
    if reference is not None:
        reference = rebase(reference, document.path, target_path)
    if target == "yaml":
        text = _to_yaml(document, reference, target_path)
    elif target == "toml":
        nulls = _toml_nulls(document)
        if nulls:
            return nulls
        text = _to_toml(document.data, reference)
    else:
        text = _to_json(document.data, reference)
    check_path = target_path or document.path.with_suffix(SUFFIXES[target])
    reparsed = parse_document(text.encode("utf-8"), target, check_path)
    again = reparsed if isinstance(reparsed, list) else admit(reparsed)
    if not isinstance(again, Case):
        problems = "; ".join(str(e) for e in again)
        raise ConversionError(f"{document.path}: the {target} text does not admit: {problems}")
    if again != original:
        raise ConversionError(f"{document.path}: the {target} text admits to a different case")
    return Conversion(text, target, again)


def _without_schema_key(data: JSONValue) -> dict[str, Any]:
    assert isinstance(data, dict)  # admitted: the root is an object
    return {key: value for key, value in data.items() if key != "$schema"}


# --- JSON --------------------------------------------------------------------------------------


def _to_json(data: JSONValue, reference: str | None) -> str:
    body = _without_schema_key(data)
    if reference is not None:
        body = {"$schema": reference, **body}
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


# --- TOML --------------------------------------------------------------------------------------


def _walk(node: object) -> Iterator[object]:
    """``node`` and everything in it: keys, values and items, at every depth."""
    yield node
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def _toml_nulls(document: RawDocument) -> list[AdmissionError]:
    """A refusal at each null TOML cannot write: any but those inside a tool call's
    ``arguments`` (written as its argument text instead)."""
    body = _toml_ready(_without_schema_key(document.data))
    errors = []
    stack: list[tuple[object, JSONPath]] = [(body, ())]
    while stack:
        node, path = stack.pop()
        if node is None:
            errors.append(
                document.error(
                    f"{dotted(path)} is null, and TOML has no null; keep this fixture in JSON "
                    "or YAML, or give a value other than null",
                    path,
                )
            )
        elif isinstance(node, dict):
            stack.extend((value, (*path, key)) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, (*path, i)) for i, value in enumerate(node))
    return sorted(errors, key=AdmissionError.sort_key)


def _toml_ready(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each tool call's ``arguments`` object holding a null replaced by its
    argument text (schema-valid data has nulls nowhere else)."""
    turns = []
    for turn in data["turns"]:
        steps = []
        for step in turn["steps"]:
            response = dict(step["response"])
            if "tool_calls" in response:
                response["tool_calls"] = [
                    {**call, "arguments": argument_text(call["arguments"])}
                    if any(value is None for value in _walk(call["arguments"]))
                    else call
                    for call in response["tool_calls"]
                ]
            steps.append({**step, "response": response})
        turns.append({**turn, "steps": steps})
    return {**data, "turns": turns}


def _to_toml(data: JSONValue, reference: str | None) -> str:
    body = _toml_ready(_without_schema_key(data))
    multiline = not any(isinstance(s, str) and "\r" in s for s in _walk(body))
    # tomli-w writes each step's response as its own [turns.steps.response] table: the turns
    # are written here instead, a step per line as an inline table, the way people write them.
    head = {k: v for k, v in body.items() if k not in ("turns", "expects")}
    text = tomli_w.dumps(head, multiline_strings=multiline)
    for turn in body["turns"]:
        rest = {k: v for k, v in turn.items() if k not in ("steps", "expects")}
        text += "\n[[turns]]\n" + tomli_w.dumps(rest, multiline_strings=multiline)
        text += "steps = [\n"
        text += "".join(f"  {_inline(step)},\n" for step in turn["steps"])
        text += "]\n"
        if "expects" in turn:  # a table of its own, after the steps: [turns.expects]
            expects = {"turns": {"expects": turn["expects"]}}
            text += "\n" + tomli_w.dumps(expects, multiline_strings=multiline)
    if "expects" in body:
        text += "\n" + tomli_w.dumps({"expects": body["expects"]}, multiline_strings=multiline)
    if reference is not None:
        text = f"#:schema {reference}\n{text}"
    return text


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _inline(value: Any) -> str:
    """``value`` as a one-line TOML value (inline tables and arrays), for a step."""
    if isinstance(value, dict):
        pairs = [f"{_toml_key(k)} = {_inline(v)}" for k, v in value.items()]
        return "{ " + ", ".join(pairs) + " }" if pairs else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    raise ConversionError(f"a {type(value).__name__} has no TOML form")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _toml_string(text: str) -> str:
    # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


# --- YAML --------------------------------------------------------------------------------------

_YAML_1_1 = VersionedResolver(version=(1, 1))
_YAML_1_2 = VersionedResolver(version=(1, 2))
_STR = "tag:yaml.org,2002:str"


def _yaml_writer() -> YAML:
    writer = YAML(typ="rt", pure=True)
    writer.indent(mapping=2, sequence=4, offset=2)
    writer.width = 4096  # never fold long text across lines: keep it greppable
    writer.allow_unicode = True
    return writer


def _plain_is_text(value: str) -> bool:
    """True when ``value`` written unquoted reads back as this string in YAML 1.1 and 1.2."""
    return all(
        resolver.resolve(ScalarNode, value, (True, False)) == _STR
        for resolver in (_YAML_1_1, _YAML_1_2)
    )


def _literal_keeps(value: str) -> bool:
    """True when a ``|`` block reproduces ``value`` exactly (and reads well)."""
    lines = value.split("\n")
    return (
        len(lines) > 1
        and all(ch == "\n" or (ch.isprintable() and ch != "\t") for ch in value)
        and not any(line != line.rstrip(" ") for line in lines)
        and not lines[0].startswith(" ")
        and value.strip("\n") != ""
    )


def _yaml_value(node: object) -> object:
    """Plain data as a round-trip tree with the string styles described in the module doc."""
    if isinstance(node, dict):
        mapping = CommentedMap()
        for key, value in node.items():
            mapping[_yaml_scalar(key)] = _yaml_value(value)
        return mapping
    if isinstance(node, list):
        return CommentedSeq(_yaml_value(item) for item in node)
    if isinstance(node, str):
        return _yaml_scalar(node)
    return node


def _yaml_scalar(value: str) -> str:
    if "\n" in value and _literal_keeps(value):
        return cast(str, LiteralScalarString(value))
    # Non-printable characters (NEL, U+2028, controls) are line breaks or invalid to some YAML
    # readers when written raw; double quotes escape them.
    if not value.isprintable() or not _plain_is_text(value) or value != value.strip():
        return cast(str, DoubleQuotedScalarString(value))
    return value


def _to_yaml(document: RawDocument, reference: str | None, target_path: Path | None) -> str:
    out = io.StringIO()
    if document.format != "yaml":
        tree = _yaml_value(_without_schema_key(document.data))
        _yaml_writer().dump(tree, out)
        prefix = f"# yaml-language-server: $schema={reference}\n" if reference else ""
        return prefix + out.getvalue()
    # Same format: re-emit the round-trip tree, so comments and quoting stay; only the schema
    # paths are rebased to where the output goes.
    reader = YAML(typ="rt", pure=True)
    reader.preserve_quotes = True
    tree = reader.load(document.source_map.text)
    if isinstance(tree.get("$schema"), str):
        tree["$schema"] = rebase(tree["$schema"], document.path, target_path)
    _yaml_writer().dump(tree, out)
    text = out.getvalue()
    if reference is not None:
        text = _YAML_MODELINE.sub(
            lambda m: m.group(0)[: m.start(1) - m.start(0)] + reference, text, count=1
        )
    return text
