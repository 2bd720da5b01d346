"""Admitted cases know where their name and each expectation kind are written (for reports
that point into the fixture): the positions the exact locator gives, found in the fixture
file when first asked. A case holds no fixture text, before or after."""

from __future__ import annotations

import pickle
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evalrunner.fixture.admit import admit, admit_documents
from evalrunner.fixture.load import KeyPositions, RawDocument, load_document
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
    turn = re.fullmatch(r"turns\[(\d+)\]\.expects\.(\w+)", key)
    json_path: JSONPath = (
        ("name" if "name" in data else "model_name",)
        if key == "name"
        else ("turns", int(turn[1]), "expects", turn[2])
        if turn
        else tuple(key.split("."))
    )
    return document.source_map.locate(json_path, key=True)


@pytest.mark.parametrize("fixture", REGRESSION, ids=lambda p: p.name)
def test_positions_of_the_regression_suite_match_the_exact_locator(fixture: Path) -> None:
    case = admitted(fixture)
    document = load_document(fixture)
    assert not isinstance(document, list) and isinstance(document.data, dict)
    expects = document.data["expects"]
    assert isinstance(expects, dict)
    turns = document.data["turns"]
    assert isinstance(turns, list)
    in_turns = {
        f"turns[{i}].expects.{kind}"
        for i, turn in enumerate(turns)
        if isinstance(turn, dict) and isinstance(turn.get("expects"), dict)
        for kind in turn["expects"]
    }
    assert set(case.positions) == {"name"} | {f"expects.{kind}" for kind in expects} | in_turns
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


def test_block_yaml_positions_leave_the_document_alone(tmp_path: Path) -> None:
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
    assert document.source_map._yaml_root is None  # positions come from the file, not it
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


# --- found when read, from the file -----------------------------------------------------------


class _Untouchable:
    """A source map that fails the test if admission asks it anything."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the source map was used on the success path ({name})")


def test_admitting_a_valid_case_never_touches_its_source_map() -> None:
    for path in REGRESSION:
        document = load_document(path)
        if not isinstance(document, RawDocument):
            continue
        if not isinstance(admit(document), Case):
            continue
        untouched = replace(document, source_map=_Untouchable())  # type: ignore[arg-type]
        assert isinstance(admit(untouched), Case)
        assert isinstance(admit_documents([untouched]).cases[0], Case)


def test_positions_hold_no_text_and_survive_pickling_before_and_after_they_are_found(
    tmp_path: Path,
) -> None:
    path = ROOT / "evals" / "regression" / "failure_does_not_abort_batch.json"
    fixture = tmp_path / path.name
    fixture.write_bytes(path.read_bytes() + b" " * 50_000)  # trailing blanks: still the case
    case = admitted(fixture)
    assert isinstance(case.positions, KeyPositions)
    pickled = pickle.dumps(case)
    assert len(pickled) < 10_000  # no copy of the file's 50 KB
    before = pickle.loads(pickled)
    expected = dict(case.positions)
    after = pickle.loads(pickle.dumps(case))
    assert dict(before.positions) == expected == dict(after.positions)
    assert type(after.positions) is dict
    assert expected["name"][0] >= 1


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".toml"])
def test_positions_are_read_from_the_file_when_first_asked(tmp_path: Path, suffix: str) -> None:
    source = next(p for p in REGRESSION if p.suffix == suffix)
    fixture = tmp_path / source.name
    fixture.write_bytes(source.read_bytes())
    case = admitted(fixture)
    assert isinstance(case.positions, KeyPositions)
    keys = ["name", *(f"expects.{kind}" for kind in case.positions.kinds)]
    before = {key: exact(fixture, key) for key in keys}
    fixture.write_bytes(b"\n\n" + source.read_bytes())  # edited before a report asks
    assert {key: (line + 2, col) for key, (line, col) in before.items()} == dict(case.positions)


def test_a_fixture_gone_before_a_report_asks_has_no_positions(tmp_path: Path) -> None:
    source = next(p for p in REGRESSION if p.suffix == ".yaml")
    fixture = tmp_path / source.name
    fixture.write_bytes(source.read_bytes())
    case = admitted(fixture)
    fixture.unlink()
    assert dict(case.positions) == {}
    assert case.positions.get("name") is None
