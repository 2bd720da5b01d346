"""Defects a breaker found in the start-up round (8acf581, 7119854), each kept as a test now
that it is fixed: the schema tree's refs, the lazy report formats, and what a run with a
config file imports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_startup import imported

import evalrunner.fixture.schemas as schemas
from evalrunner.fixture.schemas import BASE_URI, CASE_ID, SchemaTreeError, SchemaValidator

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "evals" / "regression"
_DOC = BASE_URI + "doc.schema.json"


# --- a tree with refs the bundle declines still validates, with jsonschema -------------------


def _tree_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Any) -> Any:
    copy_dir = tmp_path / "schemas"
    shutil.copytree(ROOT / "schemas", copy_dir)
    target = copy_dir / "case.schema.json"
    data = json.loads(target.read_text(encoding="utf-8"))
    data = edit(data)
    target.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(schemas, "schema_root", lambda: copy_dir)
    schemas.schema_tree.cache_clear()
    try:
        return schemas.schema_tree()
    finally:
        schemas.schema_tree.cache_clear()


def test_a_tree_whose_ref_names_an_anchor_still_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A plain Draft 2020-12 $anchor: the bundle declines it (editors cannot follow it), so
    # jsonschema alone validates with the tree, and every command still works.
    def edit(data: dict[str, Any]) -> dict[str, Any]:
        data["$defs"]["turn"]["$anchor"] = "turn"
        return json.loads(json.dumps(data).replace('"#/$defs/turn"', '"#turn"'))

    tree = _tree_from(tmp_path, monkeypatch, edit)
    assert SchemaValidator(tree, CASE_ID).is_valid({}) is False


def test_a_tree_whose_ref_names_an_embedded_resource_still_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Likewise a $ref to an embedded resource by its URI: valid, and resolved by referencing.
    def edit(data: dict[str, Any]) -> dict[str, Any]:
        data["$defs"]["named"] = {"$id": "named.schema.json", "type": "string", "minLength": 1}
        data["properties"]["name"] = {"$ref": "named.schema.json"}
        return data

    tree = _tree_from(tmp_path, monkeypatch, edit)
    invalid = {"name": "", "turns": [], "expects": {}}
    assert SchemaValidator(tree, CASE_ID).is_valid(invalid) is False


def test_a_broken_pointer_in_the_tree_is_a_schema_tree_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pointer token that str.isdigit() accepts but int() does not ("²"): a ref to nowhere,
    # said once, as a SchemaTreeError, by either validator.
    def edit(data: dict[str, Any]) -> dict[str, Any]:
        data["$defs"]["pair"] = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
        data["properties"]["name"] = {"$ref": "#/$defs/pair/anyOf/\u00b2"}
        return data

    tree = _tree_from(tmp_path, monkeypatch, edit)
    with pytest.raises(SchemaTreeError):
        SchemaValidator(tree, CASE_ID)  # jsonschema-rs, on the bundle
    with pytest.raises(SchemaTreeError):
        _ = tree.registry  # referencing, for jsonschema


# --- the lazy report formats ------------------------------------------------------------------


def test_dir_of_the_report_package_lists_everything_in_its_all() -> None:
    # render_junit, render_github and github_annotations are in __all__ but, loaded on first
    # use through __getattr__, missing from dir() until something touched them (the package
    # evalrunner itself defines __dir__ for exactly this). Fresh interpreter: nothing touched.
    probe = "import evalrunner.report as r; print(sorted(set(r.__all__) - set(dir(r))))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


# --- what a run with a configuration file imports ---------------------------------------------


def test_a_valid_config_file_needs_neither_jsonschema_nor_referencing(tmp_path: Path) -> None:
    # jsonschema only to word a refusal: jsonschema-rs vouches for a valid fixture, config and
    # reply line. Any run in a project with an evalrunner.toml, however plain, once imported
    # both: most real projects' run, which the bundled-suite timings never saw.
    assert schemas.config_validator().fast is not None
    shutil.copytree(REGRESSION, tmp_path / "evals" / "regression")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "evals/regression"\n', encoding="utf-8"
    )
    modules = imported(["run", "-q"], tmp_path)
    assert "ruamel" in modules  # the config was taken and the (cold) suite's YAML parsed
    assert modules & {"jsonschema", "referencing"} == set()
