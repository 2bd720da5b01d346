"""Publishing the schemas for editors: ``evalrunner schema export DIR`` (SPEC §8).

Two pure steps and one I/O edge, over :func:`evalrunner.fixture.schemas.bundle` (each schema folded
into one self-contained Draft 7 document, which editors read, and jsonschema-rs too):

* :func:`export_files` renders the whole export (the tree with paths mirroring ``$id``s, plus
  the bundles) as text, deterministically: sorted keys, 2-space indent, trailing newline.
* :func:`wiring` is the text that tells a user what to paste where.
* :func:`write_export` writes the files, each one atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from evalrunner.fixture.schemas import CASE_ID, CONFIG_ID, SchemaTree, bundle, schema_tree
from evalrunner.fixture.schemas import DRAFT7 as DRAFT7
from evalrunner.fixture.schemas import DRAFT7_KEYWORDS as DRAFT7_KEYWORDS
from evalrunner.fixture.schemas import BundleError as BundleError
from evalrunner.report import write_atomic

CASE_BUNDLE = "case.bundle.schema.json"
"""File name of the single-file case schema editors are pointed at."""

CONFIG_BUNDLE = "config.bundle.schema.json"
"""File name of the single-file config schema (for ``evalrunner.toml`` in Taplo)."""

BUNDLES = {CASE_BUNDLE: CASE_ID, CONFIG_BUNDLE: CONFIG_ID}


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
    written for a fixture directly in ``fixtures_dir``, and for one a directory down (a suite
    may keep its fixtures in subdirectories); editor settings resolve relative to the
    workspace folder (the project root), so they are written for ``workspace``, with globs
    that reach every subdirectory of the suite.
    """
    bundle_file = export_dir / CASE_BUNDLE
    from_fixture = _relative(bundle_file, fixtures_dir)
    from_sub = _relative(bundle_file, fixtures_dir / "SUBDIR")
    from_root = _dotted(_relative(bundle_file, workspace))
    suite = _relative(fixtures_dir, workspace)
    suite = "" if suite == "." else suite.rstrip("/") + "/"
    vscode = {
        "json.schemas": [{"fileMatch": [f"/{suite}**/*.json"], "url": from_root}],
        "yaml.schemas": {from_root: [f"/{suite}**/*.yaml", f"/{suite}**/*.yml"]},
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
            f"In a fixture in a subdirectory, {fixtures_dir / 'SUBDIR'}, the path gains a ../ "
            "per level:",
            f"    {from_sub}",
            "",
            f"Or once for the project (paths relative to {root}):",
            "",
            "  .vscode/settings.json:",
            *("    " + line for line in settings.splitlines()),
            "",
            "  .taplo.toml (Taplo CLI, Even Better TOML):",
            "    [[rule]]",
            f'    include = ["{suite}**/*.toml"]',
            "    [rule.schema]",
            f'    path = "{from_root}"',
            "",
        ]
    )
