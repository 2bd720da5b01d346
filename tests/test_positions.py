"""Admitted cases keep where their name and each expectation kind are written (for reports
that point into the fixture): the same positions the slow, exact locator gives, found
without a second YAML parse for block-style text."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalrunner.admit import admit
from evalrunner.load import load_document
from evalrunner.model import Case, JSONPath

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = sorted((ROOT / "evals" / "regression").iterdir())


def admitted(path: Path) -> Case:
    document = load_document(path)
    assert not isinstance(document, list), document
    case = admit(document)
    assert isinstance(case, Case), case
    return case


def exact(path: Path, key: str) -> tuple[int, int] | None:
    """What the source map's general locator says about ``key`` (``name``, ``expects.kind``)."""
    document = load_document(path)
    assert not isinstance(document, list)
    data = document.data
    assert isinstance(data, dict)
    json_path: JSONPath = (
        ("name" if "name" in data else "model_name",) if key == "name" else tuple(key.split("."))
    )
    return document.source_map.locate(json_path, key=True)


@pytest.mark.parametrize("fixture", REGRESSION, ids=lambda p: p.name)
def test_positions_of_the_regression_suite_match_the_exact_locator(fixture: Path) -> None:
    case = admitted(fixture)
    document = load_document(fixture)
    assert not isinstance(document, list) and isinstance(document.data, dict)
    expects = document.data["expects"]
    assert isinstance(expects, dict)
    assert set(case.positions) == {"name"} | {f"expects.{kind}" for kind in expects}
    for key, position in case.positions.items():
        assert position == exact(fixture, key), key


BLOCK = """\
%YAML 1.2
---
# a comment at the top
name: "quoted-name"
description: |
  expects:
  not a key: this is text in a block scalar
turns:
  - user_input: hi
    steps:
      - response: {type: text, content: hello}
'expects' :   # the key quoted, a comment after it
    # a comment inside
    response_contains:
    - hello

    "max_tool_calls": 0
"""

ODD = {
    "flow mapping": (
        "name: f\nturns: [{user_input: hi, steps: [{response: {type: text, content: hi}}]}]\n"
        "expects: {response_contains: [hi], max_tool_calls: 0}\n"
    ),
    "flow continued at the key's indentation": (
        "name: f\nturns: [{user_input: hi, steps: [{response: {type: text, content: hi}}]}]\n"
        "expects:\n  response_contains: [hi,\n  hi]\n  max_tool_calls: 0\n"
    ),
    "a key that needs an escape": (
        "name: f\nturns: [{user_input: hi, steps: [{response: {type: text, content: hi}}]}]\n"
        'expects:\n  "response_\\u0063ontains": [hi]\n'
    ),
    "windows line endings": (
        "name: f\r\nturns: [{user_input: hi, steps: [{response: {type: text, content: hi}}]}]"
        "\r\nexpects:\r\n  response_contains: [hi]\r\n"
    ),
    "a root mapping that is indented": (
        "  name: f\n  turns: [{user_input: hi, steps: [{response: {type: text, content: hi}}]}]\n"
        "  expects:\n    response_contains: [hi]\n"
    ),
}


def test_block_yaml_is_read_without_a_second_parse(tmp_path: Path) -> None:
    fixture = tmp_path / "block.yaml"
    fixture.write_text(BLOCK, encoding="utf-8")
    document = load_document(fixture)
    assert not isinstance(document, list)
    case = admit(document)
    assert isinstance(case, Case)
    assert dict(case.positions) == {
        "name": (4, 1),
        "expects.response_contains": (14, 5),
        "expects.max_tool_calls": (17, 5),
    }
    assert document.source_map._yaml_root is None  # the round-trip parser never ran
    for key, position in case.positions.items():
        assert position == exact(fixture, key), key


@pytest.mark.parametrize("text", list(ODD.values()), ids=list(ODD))
def test_odd_yaml_falls_back_to_the_parser_and_agrees_with_it(tmp_path: Path, text: str) -> None:
    fixture = tmp_path / "odd.yaml"
    fixture.write_text(text, encoding="utf-8")
    case = admitted(fixture)
    assert "name" in case.positions and "expects.response_contains" in case.positions
    for key, position in case.positions.items():
        assert position == exact(fixture, key), key


def test_positions_do_not_take_part_in_equality(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(ODD["flow mapping"], encoding="utf-8")
    (tmp_path / "b.yaml").write_text("\n\n" + ODD["flow mapping"], encoding="utf-8")
    a, b = admitted(tmp_path / "a.yaml"), admitted(tmp_path / "b.yaml")
    assert a.positions != b.positions
    assert a == b and hash(a) == hash(b)
