"""Defects a breaker found in the start-up round (8acf581, 7119854), each kept as a test now
that it is fixed: TreeResolver, the schema tree's own ref check, the lazy report formats, and
what a run with a config file imports."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from referencing import Registry
from referencing.jsonschema import DRAFT202012
from test_startup import imported

import evalrunner.schemas as schemas
from evalrunner.load import load_document
from evalrunner.schemas import (
    BASE_URI,
    CASE_ID,
    SchemaTree,
    SchemaTreeError,
    TreeResolver,
    UnresolvedRef,
    UnsupportedSchema,
    compile_check,
    schema_tree,
    strict_validator,
)

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "evals" / "regression"
_DOC = BASE_URI + "doc.schema.json"


def _verdicts(
    documents: dict[str, dict[str, Any]], schema: dict[str, Any], instance: object
) -> tuple[bool | None, bool]:
    """(compiled check's verdict or None if it declines, jsonschema's verdict)."""
    registry = (
        Registry()
        .with_resources([(uri, DRAFT202012.create_resource(doc)) for uri, doc in documents.items()])
        .crawl()
    )
    reference = strict_validator()(schema, registry=registry).is_valid(instance)
    try:
        compiled: bool | None = compile_check(schema, TreeResolver(documents, _DOC))(instance)
    except UnsupportedSchema:
        compiled = None
    return compiled, reference


# --- TreeResolver lands somewhere other than referencing, and the compiled check says "valid" --


def test_a_pointer_through_an_embedded_id_resolves_refs_against_that_resource() -> None:
    # "#/$defs/sub/$defs/x" walks into the resource "sub.schema.json" (an embedded $id); the
    # "#/$defs/y" inside x is that resource's y (a string), not the document's (an integer).
    # TreeResolver keeps the document as the base, so the compiled check follows the wrong y
    # and calls 3 valid; jsonschema refuses it. Only an $id on the node the compiler enters is
    # refused (test_an_id_inside_a_document_makes_it_refuse_to_compile), not one on the way.
    documents = {
        _DOC: {
            "$id": _DOC,
            "$defs": {
                "y": {"type": "integer"},
                "sub": {
                    "$id": "sub.schema.json",
                    "$defs": {"y": {"type": "string"}, "x": {"$ref": "#/$defs/y"}},
                },
            },
        }
    }
    compiled, reference = _verdicts(documents, {"$ref": _DOC + "#/$defs/sub/$defs/x"}, 3)
    assert reference is False
    assert compiled in (None, False), "the compiled check admits what jsonschema refuses"


def test_an_embedded_resource_in_the_case_schema_cannot_make_the_fast_path_admit_a_bad_case() -> (
    None
):
    # The same through the shipped tree's own machinery: the case schema gains an embedded
    # resource whose "name" demands a non-empty string, and properties.name points into it.
    # schema_tree()'s ref check passes (it, too, resolves from the document), the compiled
    # check vouches for name "", jsonschema refuses it.
    documents = copy.deepcopy(schema_tree().documents)
    case = documents["case.schema.json"]
    case["$defs"]["text"] = {"type": "string"}
    case["$defs"]["named"] = {
        "$id": "named.schema.json",
        "$defs": {"text": {"type": "string", "minLength": 1}, "name": {"$ref": "#/$defs/text"}},
    }
    case["properties"]["name"] = {"$ref": "#/$defs/named/$defs/name"}
    tree = replace(schema_tree(), documents=documents)
    data = load_document(REGRESSION / "forbidden_tool_not_used.json").data
    assert isinstance(data, dict)
    data = {**data, "name": ""}
    assert tree.validator(CASE_ID).is_valid(data) is False
    check = tree.check(CASE_ID)
    assert check is None or check(data) is False, "the compiled check admits a refused case"


def test_a_literal_tab_in_a_fragment_ref_lands_where_referencing_lands() -> None:
    # referencing reads a "#..." ref's fragment as written; urljoin (TreeResolver) drops tab,
    # CR and LF from any URL first, so "#/$defs/a\tb" becomes "#/$defs/ab": another schema.
    documents = {
        _DOC: {
            "$id": _DOC,
            "properties": {"v": {"$ref": "#/$defs/a\tb"}},
            "$defs": {"a\tb": {"type": "string"}, "ab": {"type": "integer"}},
        }
    }
    compiled, reference = _verdicts(documents, {"$ref": _DOC}, {"v": 3})
    assert reference is False
    assert compiled in (None, False), "the compiled check admits what jsonschema refuses"


# --- the schema tree's own $ref check now uses TreeResolver, and refuses valid trees ----------


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
    # A plain Draft 2020-12 $anchor. TreeResolver does not index anchors, which is fine for
    # the compiled check (it declines, jsonschema decides); but schema_tree() now checks every
    # $ref with TreeResolver too, so the whole tree is refused and every command fails. Before
    # this round (referencing) the tree loaded and jsonschema validated with it.
    def edit(data: dict[str, Any]) -> dict[str, Any]:
        data["$defs"]["turn"]["$anchor"] = "turn"
        return json.loads(json.dumps(data).replace('"#/$defs/turn"', '"#turn"'))

    tree = _tree_from(tmp_path, monkeypatch, edit)
    assert tree.validator(CASE_ID).is_valid({}) is False


def test_a_tree_whose_ref_names_an_embedded_resource_still_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Likewise a $ref to an embedded resource by its URI: valid, and resolved by referencing.
    def edit(data: dict[str, Any]) -> dict[str, Any]:
        data["$defs"]["named"] = {"$id": "named.schema.json", "type": "string", "minLength": 1}
        data["properties"]["name"] = {"$ref": "named.schema.json"}
        return data

    tree = _tree_from(tmp_path, monkeypatch, edit)
    assert tree.validator(CASE_ID).is_valid({"name": "", "turns": [], "expects": {}}) is False


def test_a_broken_pointer_in_the_tree_is_a_schema_tree_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # schema_tree()'s contract: "any failure is a SchemaTreeError". A pointer token that
    # str.isdigit() accepts but int() does not ("²") escapes TreeResolver as a bare ValueError
    # (before this round: SchemaTreeError, "does not resolve").
    def edit(data: dict[str, Any]) -> dict[str, Any]:
        data["$defs"]["pair"] = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
        data["properties"]["name"] = {"$ref": "#/$defs/pair/anyOf/\u00b2"}
        return data

    with pytest.raises(SchemaTreeError):
        _tree_from(tmp_path, monkeypatch, edit)


def test_tree_resolver_says_unresolved_for_a_pointer_token_that_is_no_index() -> None:
    # The same at the resolver: it promises UnresolvedRef ("what it cannot resolve it says
    # so"), which compile_check turns into UnsupportedSchema; a ValueError crashes
    # SchemaTree.check, and so case_check() and every admission.
    documents = {_DOC: {"$id": _DOC, "allOf": [{"type": "string"}]}}
    with pytest.raises(UnresolvedRef):
        TreeResolver(documents, _DOC).lookup("#/allOf/\u00b2")
    assert SchemaTree({"doc.schema.json": documents[_DOC]}).check(_DOC + "#/allOf/\u00b2") is None


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
    # README ("Start-up"): jsonschema only to word a refusal, "compiled checks vouch for a
    # valid fixture, config and reply line". The config schema did not compile
    # (exclusiveMinimum), so any run in a project with an evalrunner.toml, however plain,
    # imported both: most real projects' run, which the bundled-suite timings never saw.
    assert schemas.config_check() is not None
    shutil.copytree(REGRESSION, tmp_path / "evals" / "regression")
    (tmp_path / "evalrunner.toml").write_text(
        '[eval]\nsuite_dir = "evals/regression"\n', encoding="utf-8"
    )
    modules = imported(["run", "-q"], tmp_path)
    assert "ruamel" in modules  # the config was taken and the (cold) suite's YAML parsed
    assert modules & {"jsonschema", "referencing"} == set()
