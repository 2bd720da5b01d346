"""``evalrunner schema export``: the tree, the Draft 7 bundle, determinism and the wiring."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.load import load_document
from evalrunner.fixture.schemas import (
    BASE_URI,
    CASE_ID,
    CONFIG_ID,
    SchemaTree,
    case_validator,
    schema_tree,
)
from evalrunner.toolbox.export import (
    CASE_BUNDLE,
    CONFIG_BUNDLE,
    DRAFT7,
    DRAFT7_KEYWORDS,
    BundleError,
    bundle,
    export_files,
    wiring,
)

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def walk(node: object, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every dict in ``node`` with its JSON-pointer-ish path."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, value in node.items():
            found += walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += walk(value, f"{path}/{index}")
    return found


def test_export_twice_gives_identical_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for target in (first, second):
        result = runner.invoke(app, ["schema", "export", str(target), "--fixtures", "evals"])
        assert result.exit_code == 0, result.output
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for rel in files:
        assert (first / rel).read_bytes() == (second / rel).read_bytes(), rel
    assert {CASE_BUNDLE, CONFIG_BUNDLE, "case.schema.json", "report.schema.json"} <= {
        str(p) for p in files
    }


def test_exported_files_are_sorted_indented_and_end_in_a_newline() -> None:
    for rel, text in export_files().items():
        data = json.loads(text)
        assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", rel


def test_the_committed_schemas_are_byte_identical_to_their_export() -> None:
    # JSON equality would let key order and spacing drift, and `schema export schemas` in a
    # checkout would then rewrite files that nothing changed.
    exported = export_files()
    committed = sorted((ROOT / "schemas").rglob("*.schema.json"))
    assert committed
    for path in committed:
        rel = path.relative_to(ROOT / "schemas").as_posix()
        assert rel in exported, f"schemas/{rel} is not exported"
        assert path.read_bytes() == exported[rel].encode("utf-8"), (
            f"schemas/{rel} differs from its export: run evalrunner schema export on a "
            "scratch directory and copy the file back"
        )


def test_tree_paths_mirror_ids() -> None:
    for rel, text in export_files().items():
        if ".bundle." in rel:
            continue
        assert json.loads(text)["$id"] == BASE_URI + rel


@pytest.mark.parametrize("schema_id", [CASE_ID, CONFIG_ID])
def test_bundle_is_self_contained_draft7(schema_id: str) -> None:
    bundled = bundle(schema_id)
    assert bundled["$schema"] == DRAFT7
    Draft7Validator.check_schema(bundled)
    for path, node in walk(bundled):
        assert "$id" not in node, path
        if "$ref" in node:
            assert node["$ref"].startswith("#/$defs/"), path
            assert set(node) == {"$ref"}, f"{path}: a Draft 7 $ref must stand alone"
    # every ref resolves inside the file
    registry: Registry[Any] = Registry().with_resource(
        "urn:bundle", DRAFT202012.create_resource(bundled)
    )
    resolver = registry.resolver(base_uri="urn:bundle")
    for _, node in walk(bundled):
        if isinstance(node.get("$ref"), str):
            resolver.lookup(node["$ref"])


def test_bundle_agrees_with_the_runtime_schema() -> None:
    """Same verdict as the runtime's 2020-12 validator on the suite and the broken fixtures."""
    validator = Draft7Validator(bundle(CASE_ID))
    fixtures = sorted((ROOT / "evals" / "regression").iterdir())
    fixtures += sorted((ROOT / "tests" / "data" / "broken").glob("r2_*"))
    checked = 0
    for path in fixtures:
        document = load_document(path)
        if isinstance(document, list):
            continue
        runtime = case_validator().is_valid(document.data)
        assert validator.is_valid(document.data) == runtime, path.name
        checked += 1
    assert checked >= 20


def test_a_keyword_outside_draft7_is_refused() -> None:
    tree = schema_tree()
    documents = dict(tree.documents)
    documents["case.schema.json"] = {
        **documents["case.schema.json"],
        "unevaluatedProperties": False,
    }
    with pytest.raises(BundleError, match="unevaluatedProperties"):
        bundle(CASE_ID, SchemaTree(documents))


def test_the_draft7_vocabulary_has_no_2019_keywords() -> None:
    assert not {"unevaluatedProperties", "prefixItems", "$anchor", "dependentRequired"} & (
        DRAFT7_KEYWORDS
    )


def test_every_field_has_hover_text() -> None:
    """Each property either says what it is or refers to a schema that does."""
    for rel, schema in schema_tree().documents.items():
        assert schema.get("title") and schema.get("description"), rel
        for path, node in walk(schema):
            for key, prop in (node.get("properties") or {}).items():
                if not isinstance(prop, dict) or path.endswith("/properties") or "/if" in path:
                    continue  # a property named "properties", or a condition, not a field
                if "$ref" in prop and len(prop) == 1:
                    continue
                assert prop.get("description"), f"schemas/{rel}: {path}/properties/{key}"
        for name, definition in (schema.get("$defs") or {}).items():
            assert definition.get("description"), f"schemas/{rel}: $defs/{name}"


def test_wiring_points_at_the_exported_bundle(tmp_path: Path) -> None:
    export, fixtures = tmp_path / "out" / "schemas", tmp_path / "evals" / "regression"
    text = wiring(export, fixtures, tmp_path)
    modeline = next(line for line in text.splitlines() if "yaml-language-server: $schema=" in line)
    rel = modeline.split("$schema=", 1)[1]
    assert os.path.normpath(fixtures / rel) == os.path.normpath(export / CASE_BUNDLE)
    assert f"#:schema {rel}" in text
    assert f'"$schema": "{rel}",' in text
    settings = text.split(".vscode/settings.json:\n", 1)[1].split("\n\n", 1)[0]
    parsed = json.loads(settings)
    assert parsed["json.schemas"] == [
        {
            "fileMatch": ["/evals/regression/**/*.json"],
            "url": "./out/schemas/case.bundle.schema.json",
        }
    ]
    assert parsed["yaml.schemas"] == {
        "./out/schemas/case.bundle.schema.json": [
            "/evals/regression/**/*.yaml",
            "/evals/regression/**/*.yml",
        ]
    }
    assert 'include = ["evals/regression/**/*.toml"]' in text
    assert 'path = "./out/schemas/case.bundle.schema.json"' in text


def test_export_cli_prints_the_wiring_and_refuses_an_unwritable_dir(tmp_path: Path) -> None:
    result = runner.invoke(app, ["schema", "export", str(tmp_path / "s"), "--fixtures", "evals"])
    assert result.exit_code == 0
    assert "# yaml-language-server: $schema=" in result.stdout
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = runner.invoke(app, ["schema", "export", str(blocker / "s")])
    assert result.exit_code == 2
    assert "cannot write" in result.stderr
    assert "Traceback" not in result.output


def test_wiring_reaches_fixtures_in_subdirectories(tmp_path: Path) -> None:
    # A suite that keeps fixtures a directory down: the globs are recursive, and the printed
    # path for a fixture in a subdirectory resolves to the bundle from there.
    export, fixtures = tmp_path / "schemas", tmp_path / "evals"
    text = wiring(export, fixtures, tmp_path)
    sub = text.split("the path gains a ../ per level:\n", 1)[1].splitlines()[0].strip()
    assert os.path.normpath(fixtures / "SUBDIR" / sub) == os.path.normpath(export / CASE_BUNDLE)
    settings = json.loads(text.split(".vscode/settings.json:\n", 1)[1].split("\n\n", 1)[0])
    assert settings["json.schemas"][0]["fileMatch"] == ["/evals/**/*.json"]
    assert settings["yaml.schemas"]["./schemas/case.bundle.schema.json"] == [
        "/evals/**/*.yaml",
        "/evals/**/*.yml",
    ]
    assert 'include = ["evals/**/*.toml"]' in text
