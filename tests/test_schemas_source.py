"""The validators built from the schema source (``evalrunner.fixture.schemas``): jsonschema-rs on
the
bundle decides as jsonschema does where their engines differ (``pattern``, values JSON has no
type for), evalrunner's own rule that a float is never an integer is a check of its own, and
without jsonschema-rs every verdict and message is the same."""

from __future__ import annotations

import datetime
import re
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import evalrunner.fixture.schemas as schemas
from evalrunner.fixture.schemas import (
    BASE_URI,
    CASE_ID,
    SchemaTree,
    SchemaValidator,
    case_validator,
    float_integer_errors,
    has_float_integers,
    schema_tree,
)

_DOC = BASE_URI + "doc.schema.json"


def _validator(schema: dict[str, Any]) -> SchemaValidator:
    return SchemaValidator(SchemaTree({"doc.schema.json": {"$id": _DOC, **schema}}), _DOC)


def _case(user_input: object = "hi", **response: object) -> dict[str, Any]:
    return {
        "name": "c",
        "turns": [
            {
                "user_input": user_input,
                "steps": [{"response": {"type": "text", "content": "ok", **response}}],
            }
        ],
        "expects": {"tools_used": ["x"]},
    }


# --- pattern: Python's re, as jsonschema ------------------------------------------------------


def test_not_blank_is_pythons_on_every_character() -> None:
    # jsonschema-rs's own engine counts U+001C..U+001F as text and U+FEFF as blank; Python's
    # re (jsonschema's) the other way round. The verdict is jsonschema's for each one.
    validator = _validator({"type": "string", "pattern": "\\S"})
    assert validator.fast is not None
    for code in range(0x10000):  # Python's whitespace is all in the first plane
        if 0xD800 <= code <= 0xDFFF:
            continue  # a lone surrogate: jsonschema-rs may not read it (see below)
        char = chr(code)
        assert validator.fast.is_valid(char) is (re.search("\\S", char) is not None), hex(code)


@given(text=st.text(alphabet=st.sampled_from(" \t\x1c\x1f\x85\ufeff\u3000a"), max_size=4))
def test_a_blank_user_input_is_refused_as_jsonschema_refuses_it(text: str) -> None:
    validator = case_validator()
    reference = Draft202012Validator({"$ref": CASE_ID}, registry=schema_tree().registry).is_valid(
        _case(text)
    )
    assert validator.is_valid(_case(text)) is reference


# --- what jsonschema-rs cannot read, jsonschema judges ----------------------------------------


@pytest.mark.parametrize(
    "value",
    [datetime.date(2024, 1, 2), {1: "x"}, {"\ud800": "x"}],
    ids=["a TOML date", "a key that is no string", "a key with a lone surrogate"],
)
def test_a_value_json_has_no_type_for_is_judged_by_jsonschema(value: object) -> None:
    # jsonschema-rs reads an instance lazily: what it cannot read (ValueError) or reads as
    # invalid goes to jsonschema, whose verdict and errors are the ones given.
    validator = case_validator()
    assert validator.fast is not None
    wrong = _case(value)
    assert not validator.is_valid(wrong)
    errors = list(validator.iter_errors(wrong))
    assert [e.message for e in errors] == [
        e.message for e in validator.reference.iter_errors(wrong)
    ]
    assert [list(e.absolute_path) for e in errors] == [["turns", 0, "user_input"]]
    free = _case()
    free["turns"][0]["steps"][0]["response"] = {
        "type": "tool_calls",
        "tool_calls": [{"id": "1", "name": "t", "arguments": {"v": value}}],
    }
    assert validator.is_valid(free) is validator.reference.is_valid(free)


def test_a_lone_surrogate_in_a_value_gets_jsonschemas_verdict() -> None:
    validator = case_validator()
    assert validator.is_valid(_case("\ud800")) is validator.reference.is_valid(_case("\ud800"))


def test_a_nan_jsonschema_rs_calls_invalid_is_judged_by_jsonschema() -> None:
    validator = _validator({"type": "number"})
    assert validator.fast is not None and not validator.fast.is_valid(float("nan"))
    assert validator.is_valid(float("nan"))
    assert list(validator.iter_errors(float("nan"))) == []


# --- evalrunner's own rule: a float is never an integer ---------------------------------------


def test_a_float_integer_is_refused_where_an_integer_is_wanted() -> None:
    validator = case_validator()
    case = _case(input_tokens=1.0)
    assert Draft202012Validator({"type": "integer"}).is_valid(1.0)  # JSON Schema's view
    assert not validator.is_valid(case)
    (error,) = validator.iter_errors(case)
    assert error.message == "1.0 is not of type 'integer'"
    assert (error.validator, error.validator_value, error.instance) == ("type", "integer", 1.0)
    assert list(error.absolute_path) == ["turns", 0, "steps", 0, "response", "input_tokens"]


def test_a_float_integer_beside_other_errors_is_one_of_them() -> None:
    validator = case_validator()
    case = _case(input_tokens=-1.0, output_tokens="x")
    found = sorted((list(e.absolute_path)[-1], e.validator) for e in validator.iter_errors(case))
    assert found == [
        ("input_tokens", "minimum"),
        ("input_tokens", "type"),
        ("output_tokens", "type"),
    ]


def test_a_float_integer_where_any_number_will_do_is_valid() -> None:
    validator = _validator(
        {
            "type": "object",
            "properties": {
                "n": {"type": "number"},
                "either": {"type": ["integer", "number"]},
                "free": {},
                "count": {"type": ["integer", "null"]},
            },
        }
    )
    assert validator.is_valid({"n": 2.0, "either": 3.0, "free": [1.0], "count": None})
    (error,) = validator.iter_errors({"count": 4.0})
    assert error.message == "4.0 is not of type 'integer', 'null'"
    assert error.validator_value == ["integer", "null"]


def test_the_float_integers_are_found_anywhere_and_only_they() -> None:
    assert not has_float_integers({"a": [1, 2.5, True, "1.0", float("nan"), float("inf")]})
    assert has_float_integers({"a": [{"b": [0.0]}]})
    assert has_float_integers(-0.0)


def test_float_integer_errors_need_no_schema_error_to_be_found() -> None:
    reference = _validator({"type": "array", "items": {"type": "integer"}}).reference
    assert reference.is_valid([1, 2.0])
    errors = float_integer_errors(reference, [1, 2.0, 3.0])
    assert [(list(e.absolute_path), e.instance) for e in errors] == [([1], 2.0), ([2], 3.0)]


# --- without jsonschema-rs ---------------------------------------------------------------------


def test_without_jsonschema_rs_the_verdicts_and_errors_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cases = [
        _case(),
        _case(" "),
        _case("\x1c"),
        _case(input_tokens=1.0),
        _case(input_tokens=-1, output_tokens="x"),
        {"turns": []},
    ]
    with_rs = case_validator()
    assert with_rs.fast is not None
    monkeypatch.setitem(sys.modules, "jsonschema_rs", None)  # as if it were not installed
    without = SchemaValidator(schema_tree(), CASE_ID)
    assert without.fast is None
    for case in cases:
        assert with_rs.is_valid(case) is without.is_valid(case), case
        assert [e.message for e in with_rs.iter_errors(case)] == [
            e.message for e in without.iter_errors(case)
        ]


def test_a_valid_case_does_not_import_jsonschema() -> None:
    import subprocess

    probe = (
        "import sys\n"
        "from evalrunner.fixture.schemas import case_validator\n"
        f"assert case_validator().is_valid({_case()!r})\n"
        "print(sorted(m for m in ('jsonschema', 'referencing') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
    assert schemas.case_validator.__doc__
