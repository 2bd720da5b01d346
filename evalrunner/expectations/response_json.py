"""Grader of JSON replies: ``response_json``. The whole final reply must parse as one JSON
value; ``schema`` is checked with jsonschema, and each JSON Pointer of ``equals`` must resolve
to a value equal (as JSON) to the one given."""

from __future__ import annotations

import json

from evalrunner.expectations._format import normalization_note, quote
from evalrunner.expectations._json import (
    NOT_JSON,
    UNRESOLVED,
    parse,
    resolve,
    schema_errors,
)
from evalrunner.model import GradeResult, ResponseJson, RunRecord, argument_json, json_equal

__all__ = ["response_json"]


def response_json(expected: ResponseJson, run: RunRecord) -> list[GradeResult]:
    """One result for the schema (or for parsing, when nothing else is asked), one per
    pointer."""
    reply, reason = parse(run.final_response)
    labels: list[str] = []
    if expected.schema is not None or not expected.equals:
        labels.append("response_json(schema)" if expected.schema is not None else "response_json")
    labels.extend(f"response_json({quote(p)} = {v})" for p, v in expected.equals)
    if reply is NOT_JSON:
        detail = f"the reply is not JSON ({reason}): {quote(run.final_response)}"
        return [GradeResult(label, False, detail) for label in labels]
    results = []
    if expected.schema is not None:
        problems = schema_errors(expected.schema, reply)
        detail = f"the reply breaks the schema: {problems[0]}" if problems else ""
        results.append(GradeResult(labels[0], not problems, detail))
    elif not expected.equals:
        results.append(GradeResult(labels[0], True))
    first = len(labels) - len(expected.equals)
    for label, (pointer, text) in zip(labels[first:], expected.equals, strict=True):
        found = resolve(reply, pointer)
        if found is UNRESOLVED:
            detail = f"pointer {quote(pointer)} names nothing in the reply: "
            results.append(GradeResult(label, False, detail + quote(run.final_response)))
        elif json_equal(found, json.loads(text)):
            results.append(GradeResult(label, True))
        else:
            detail = f"actual {quote(pointer)} = {argument_json(found)}" + normalization_note(
                json.loads(text), found, "values"
            )
            results.append(GradeResult(label, False, detail))
    return results
