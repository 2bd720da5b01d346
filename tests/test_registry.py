"""One source of truth: kinds ↔ schema files ↔ graders ↔ README, and a schema tree whose every
``$ref`` resolves offline."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from evalrunner.expectations import KINDS
from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import parse_document
from evalrunner.fixture.schemas import (
    AGENT_REPLY_ID,
    BASE_URI,
    CASE_ID,
    CONFIG_ID,
    SchemaValidator,
    schema_tree,
)
from evalrunner.model import Case, Expectations

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def readme_kinds() -> list[str]:
    section = README.split("## Expectation kinds", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M)


def test_every_kind_has_a_schema_a_grader_and_a_doc_entry_and_nothing_else_exists() -> None:
    graders = [kind.name for kind in KINDS]
    schema_files = sorted(
        p.name.removesuffix(".schema.json") for p in (ROOT / "schemas" / "expects").iterdir()
    )
    case_schema = schema_tree().documents["case.schema.json"]
    in_case_schema = list(case_schema["$defs"]["expects"]["properties"])
    assert len(graders) == 16
    assert sorted(graders) == schema_files
    assert sorted(graders) == sorted(in_case_schema)
    assert graders == readme_kinds(), "README table must list the kinds in grading order"
    assert graders == [f.name for f in fields(Expectations)]
    assert sorted(schema_tree().kinds()) == sorted(graders)
    assert all(callable(kind.grader) for kind in KINDS)


def test_every_ref_resolves_offline_and_ids_mirror_paths() -> None:
    tree = schema_tree()  # raises if an $id does not mirror its path
    on_disk = sorted(
        str(p.relative_to(ROOT / "schemas")) for p in (ROOT / "schemas").rglob("*.schema.json")
    )
    assert sorted(tree.documents) == on_disk
    for rel, schema in tree.documents.items():
        assert schema["$id"] == BASE_URI + rel
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        resolver = tree.registry.resolver(base_uri=schema["$id"])
        for ref in _refs(schema):
            assert resolver.lookup(ref).contents is not None, (rel, ref)
    for schema_id in (CASE_ID, CONFIG_ID, AGENT_REPLY_ID):
        # The same schemas as one document each, with every $ref inside it (jsonschema-rs's).
        assert SchemaValidator(tree, schema_id).fast is not None, schema_id


def test_a_dangling_ref_is_caught(tmp_path: Path, monkeypatch: Any) -> None:
    import shutil

    import evalrunner.fixture.schemas as schemas

    copy = tmp_path / "schemas"
    shutil.copytree(ROOT / "schemas", copy)
    target = copy / "expects" / "tool_results_contain.schema.json"
    data = json.loads(target.read_text(encoding="utf-8"))
    data["items"]["$ref"] = "../missing.schema.json"
    target.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(schemas, "schema_root", lambda: copy)
    schemas.schema_tree.cache_clear()
    try:
        tree = schemas.schema_tree()
        with pytest.raises(schemas.SchemaTreeError, match=r"missing\.schema\.json"):
            _ = tree.registry  # jsonschema's: every $ref resolved when it is built
        with pytest.raises(schemas.SchemaTreeError, match=r"missing\.schema\.json"):
            schemas.SchemaValidator(tree, CASE_ID)  # the bundle declines it; the registry says
    finally:
        schemas.schema_tree.cache_clear()


def test_every_schema_is_a_valid_draft_2020_12_schema() -> None:
    from evalrunner.fixture.schemas import check_schemas

    check_schemas(schema_tree())


def test_a_schema_that_breaks_its_metaschema_is_caught(tmp_path: Path, monkeypatch: Any) -> None:
    import shutil

    import evalrunner.fixture.schemas as schemas

    copy = tmp_path / "schemas"
    shutil.copytree(ROOT / "schemas", copy)
    target = copy / "expects" / "max_tool_calls.schema.json"
    data = json.loads(target.read_text(encoding="utf-8"))
    data["minimum"] = "one"  # a number in Draft 2020-12
    target.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(schemas, "schema_root", lambda: copy)
    schemas.schema_tree.cache_clear()
    try:
        try:
            schemas.check_schemas(schemas.schema_tree())
        except schemas.SchemaTreeError as exc:
            assert "max_tool_calls.schema.json" in str(exc) and "Draft 2020-12" in str(exc)
        else:
            raise AssertionError("a schema breaking its metaschema was not caught")
    finally:
        schemas.schema_tree.cache_clear()


def test_every_object_schema_is_closed() -> None:
    for rel, schema in schema_tree().documents.items():
        for where, node in _objects(schema):
            if node.get("type") == "object" and "properties" in node:
                # A tagged union is closed by its branches: each `then` target is checked too.
                dispatches = all("then" in branch for branch in node.get("allOf", [{}]))
                assert node.get("additionalProperties") is False or dispatches, (rel, where)


def test_the_readme_fixture_example_admits(tmp_path: Path) -> None:
    cases = []
    page = (ROOT / "docs" / "reference" / "fixtures.md").read_text(encoding="utf-8")
    for fmt in ("yaml", "json", "toml"):
        block = page.split(f"```{fmt}\n", 1)[1].split("```", 1)[0]
        document = parse_document(block.encode(), fmt, tmp_path / f"example.{fmt}")
        assert not isinstance(document, list), document
        case = admit(document)
        assert isinstance(case, Case), case
        cases.append(case)
    assert cases[0] == cases[1] == cases[2]  # one case, three formats


def test_case_schema_is_the_validator_entry_point() -> None:
    assert CASE_ID in {s["$id"] for s in schema_tree().documents.values()}


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for item in node for r in _refs(item)]
    return []


def _objects(node: object, where: str = "#") -> list[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        found = [(where, node)]
        for key, value in node.items():
            found += _objects(value, f"{where}/{key}")
        return found
    if isinstance(node, list):
        return [o for i, item in enumerate(node) for o in _objects(item, f"{where}/{i}")]
    return []


def promises_of_the_guarantees_page(text: str) -> list[str]:
    """The promises the user-facing page lists, one bullet each."""
    body = text.split("# Guarantees", 1)[1]
    return [row[2:].rstrip(".") for row in body.splitlines() if row.startswith("- ")]


def table_of_contributing(text: str) -> dict[str, list[tuple[str, str]]]:
    """Promise -> the (file, test) pairs CONTRIBUTING.md's table says hold it (test "" when a
    row names a whole file)."""
    section = text.split("## Which test proves each promise", 1)[1].split("\n## ", 1)[0]
    table: dict[str, list[tuple[str, str]]] = {}
    for row in section.splitlines():
        if not row.startswith("| ") or row.startswith("| promise") or "---" in row:
            continue
        promise, _, held_by = row[2:].rstrip(" |").rpartition(" | ")
        named: list[tuple[str, str]] = []
        current = ""
        for ref in re.findall(r"`([^`]+)`", held_by):
            if ref.startswith("tests/"):
                current, _, test = ref.partition("::")
            elif ref.startswith("::") and current:
                test = ref[2:]
            else:
                continue
            named.append((current, test))
        table[promise.rstrip(".")] = named
    return table


@functools.cache
def functions_defined_in(path: Path) -> frozenset[str]:
    """The names of the functions a test module defines (parsed once)."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))


def unproven_promises(guarantees: str, contributing: str, root: Path) -> list[str]:
    """What is wrong between the guarantees page and CONTRIBUTING.md's table: a promise with no
    row or no test, a row for no promise, a test named that does not exist."""
    promises = promises_of_the_guarantees_page(guarantees)
    table = table_of_contributing(contributing)
    problems = [f"no test is named for the promise: {p}" for p in promises if not table.get(p)]
    problems += [f"a row for no promise on the page: {p}" for p in table if p not in promises]
    for named in table.values():
        for file, test in named:
            path = root / file
            if not path.is_file():
                problems.append(f"CONTRIBUTING.md names {file}, which does not exist")
                continue
            if test and test not in functions_defined_in(path):
                problems.append(f"CONTRIBUTING.md names {file}::{test}, which does not exist")
    return problems


GUARANTEES = ROOT / "docs" / "explanation" / "guarantees.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"


def test_every_guarantee_names_a_test_that_exists_in_the_contributor_guide() -> None:
    guarantees = GUARANTEES.read_text(encoding="utf-8")
    contributing = CONTRIBUTING.read_text(encoding="utf-8")
    assert len(promises_of_the_guarantees_page(guarantees)) >= 12
    assert unproven_promises(guarantees, contributing, ROOT) == []


def test_the_guarantees_page_is_for_users_and_names_no_test() -> None:
    assert "tests/" not in GUARANTEES.read_text(encoding="utf-8")


def test_a_promise_without_a_test_or_with_a_missing_test_is_caught() -> None:
    guarantees = GUARANTEES.read_text(encoding="utf-8")
    contributing = CONTRIBUTING.read_text(encoding="utf-8")
    first = promises_of_the_guarantees_page(guarantees)[0]
    added = guarantees.replace("\n- ", "\n- A promise nobody tests.\n- ", 1)
    assert unproven_promises(added, contributing, ROOT) == [
        "no test is named for the promise: A promise nobody tests"
    ]
    row = next(r for r in contributing.splitlines() if r.startswith(f"| {first} |"))
    emptied = contributing.replace(row, f"| {first} | nothing yet |")
    assert unproven_promises(guarantees, emptied, ROOT) == [
        f"no test is named for the promise: {first}"
    ]
    test = re.findall(r"::(\w+)`", row)[0]
    renamed = contributing.replace(row, row.replace(f"::{test}`", "::test_that_is_gone`"))
    assert [p for p in unproven_promises(guarantees, renamed, ROOT) if "test_that_is_gone" in p]
    gone_file = contributing.replace(row, row.replace("tests/test_", "tests/test_gone_", 1))
    assert any("test_gone_" in p for p in unproven_promises(guarantees, gone_file, ROOT))
    dropped = guarantees.replace(f"- {first}", "- A promise reworded")
    assert f"a row for no promise on the page: {first}" in unproven_promises(
        dropped, contributing, ROOT
    )
