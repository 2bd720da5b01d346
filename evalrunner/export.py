"""Publishing the schemas for editors: ``evalrunner schema export DIR`` (SPEC §8).

Three pure steps and one I/O edge:

* :func:`bundle` folds a schema and everything it ``$ref``s into one self-contained document:
  each referenced file becomes an entry of the root's ``$defs``, every ``$ref`` becomes a
  ``#/$defs/...`` pointer, nested ``$id``/``$schema`` are dropped, and the dialect is declared
  as Draft 7. Editors' engines (yaml-language-server, Taplo) speak Draft 7 and some resolve
  relative refs against ``$id`` URLs they cannot reach; a pointer-only file behaves the same
  in all of them. A keyword outside the Draft 7 vocabulary is a :class:`BundleError` (a bug in
  ``schemas/``, caught by a test), never a silently ignored constraint.
* :func:`export_files` renders the whole export (the tree with paths mirroring ``$id``s, plus
  the bundles) as text, deterministically: sorted keys, 2-space indent, trailing newline.
* :func:`wiring` is the text that tells a user what to paste where.
* :func:`write_export` writes the files, each one atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urldefrag, urljoin

from evalrunner.report import write_atomic
from evalrunner.schemas import CASE_ID, CONFIG_ID, SchemaTree, schema_tree

DRAFT7 = "http://json-schema.org/draft-07/schema#"

CASE_BUNDLE = "case.bundle.schema.json"
"""File name of the single-file case schema editors are pointed at."""

CONFIG_BUNDLE = "config.bundle.schema.json"
"""File name of the single-file config schema (for ``evalrunner.toml`` in Taplo)."""

BUNDLES = {CASE_BUNDLE: CASE_ID, CONFIG_BUNDLE: CONFIG_ID}

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


def _subschemas(schema: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(keyword, subschema) for every subschema directly inside ``schema``."""
    for keyword, value in schema.items():
        if keyword in _MAP and isinstance(value, dict):
            for sub in value.values():
                yield keyword, sub
        elif keyword in _LIST and isinstance(value, list):
            for sub in value:
                yield keyword, sub
        elif keyword in _ONE and isinstance(value, dict | bool):
            yield keyword, value


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


def render(schema: Mapping[str, Any]) -> str:
    """A schema as exported: sorted keys, 2-space indent, non-ASCII kept, trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def export_files(tree: SchemaTree | None = None) -> dict[str, str]:
    """Every exported file by its path under the export directory, rendered.

    The tree keeps the layout of ``schemas/`` (so each path mirrors its ``$id``); the bundles
    sit beside it.
    """
    tree = tree or schema_tree()
    files = {rel: render(document) for rel, document in tree.documents.items()}
    for name, schema_id in BUNDLES.items():
        files[name] = render(bundle(schema_id, tree))
    return dict(sorted(files.items()))


def write_export(directory: Path, files: Mapping[str, str]) -> list[Path]:
    """Write ``files`` under ``directory`` (created as needed), each atomically; the paths."""
    written: list[Path] = []
    for rel, text in files.items():
        path = directory.joinpath(*PurePosixPath(rel).parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
        written.append(path)
    return written


def _relative(target: Path, start: Path) -> str:
    """``target`` as a forward-slash path relative to ``start`` (both taken from the cwd)."""
    rel = os.path.relpath(os.path.abspath(target), os.path.abspath(start))
    return PurePosixPath(Path(rel)).as_posix()


def _dotted(rel: str) -> str:
    return rel if rel.startswith(".") else "./" + rel


def wiring(export_dir: Path, fixtures_dir: Path, workspace: Path) -> str:
    """What to paste where so that editors use the exported bundle.

    Modelines and the ``$schema`` key resolve relative to the fixture file, so they are
    written for a fixture directly in ``fixtures_dir``; editor settings resolve relative to
    the workspace folder (the project root), so they are written for ``workspace``.
    """
    bundle_file = export_dir / CASE_BUNDLE
    from_fixture = _relative(bundle_file, fixtures_dir)
    from_root = _dotted(_relative(bundle_file, workspace))
    suite = _relative(fixtures_dir, workspace)
    suite = "" if suite == "." else suite.rstrip("/") + "/"
    vscode = {
        "json.schemas": [{"fileMatch": [f"/{suite}*.json"], "url": from_root}],
        "yaml.schemas": {from_root: [f"/{suite}*.yaml", f"/{suite}*.yml"]},
    }
    settings = json.dumps(vscode, indent=2)
    root = "the working directory" if str(workspace) == "." else str(workspace)
    return "\n".join(
        [
            f"Schemas written to {export_dir}; editors use {bundle_file}.",
            "",
            f"In a fixture in {fixtures_dir} (paths relative to the fixture file):",
            "",
            "  YAML, first line (yaml-language-server, VS Code YAML):",
            f"    # yaml-language-server: $schema={from_fixture}",
            "",
            "  TOML, first line (Taplo, Even Better TOML):",
            f"    #:schema {from_fixture}",
            "",
            "  JSON, a top-level key (VS Code):",
            f'    "$schema": "{from_fixture}",',
            "",
            f"Or once for the project (paths relative to {root}):",
            "",
            "  .vscode/settings.json:",
            *("    " + line for line in settings.splitlines()),
            "",
            "  .taplo.toml (Taplo CLI, Even Better TOML):",
            "    [[rule]]",
            f'    include = ["{suite}*.toml"]',
            "    [rule.schema]",
            f'    path = "{from_root}"',
            "",
        ]
    )
