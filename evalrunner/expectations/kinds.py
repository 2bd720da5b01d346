"""The expectation kinds: one :class:`Kind` per key of a fixture's ``expects``, in
:data:`KINDS`, in grading order (SPEC §6).

Everything evalrunner does with a kind reads it from here: admission parses a value with
``parse`` and checks it with ``rules``, grading calls ``grader``, a run that could not observe
``evidence`` fails the check, and the README's kinds table is :func:`kinds_table`. The rest is
held equal to this table by ``tests/test_grade.py``: the fields of
:class:`~evalrunner.model.Expectations` (same names, same order), the schema files
``schemas/expects/<name>.schema.json`` and the case schema's ``expects`` properties, and the
generated ``docs/reference/expectations.md``. CONTRIBUTING.md says how to add a kind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from evalrunner.expectations import (
    counts,
    payloads,
    requests,
    response,
    response_json,
    rules,
    tools,
    trajectory,
)
from evalrunner.expectations._format import quote
from evalrunner.model import (
    Expectations,
    ExpectedCall,
    GradeResult,
    JSONPath,
    JSONValue,
    PayloadNeedle,
    ResponseJson,
    RunRecord,
    ToolCallsMatch,
    argument_json,
)
from evalrunner.text import dotted

__all__ = [
    "BY_NAME",
    "KINDS",
    "Kind",
    "dump_needles",
    "dump_plain",
    "kinds_table",
    "parse_count",
    "parse_flag",
    "parse_needles",
    "parse_texts",
]


_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What every model API accepts as a tool name: the rule a tool double's name is held to
(the case schema's ``tools[].name``)."""


def _offerable(kind: str) -> rules.Rule:
    """A name in ``kind`` that no model request can offer: such a check could never pass
    (``tools_offered``) or never fail (``tools_not_offered``)."""

    def rule(expects: Expectations, base: JSONPath) -> Iterator[rules.Refusal]:
        for i, name in enumerate(getattr(expects, kind) or ()):
            if not _TOOL_NAME.fullmatch(name):
                yield rules.Refusal(
                    f"{dotted(base)}.{kind}[{i}] {quote(name)} is not a tool name every model "
                    "API accepts, so no model request can offer it; use 1 to 64 letters, "
                    "digits, '_' or '-'",
                    base + (kind, i),
                    ungradable=True,
                )

    return rule


def parse_texts(value: object) -> tuple[str, ...]:
    """A list of strings (names, texts, patterns) as a tuple."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError("not a list of strings")
    return tuple(value)


def parse_count(value: object) -> int:
    """An integer ≥ 0 (a boolean is no integer here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("not an integer ≥ 0")
    return value


def parse_flag(value: object) -> bool:
    """A boolean."""
    if not isinstance(value, bool):
        raise ValueError("not a boolean")
    return value


def parse_needles(value: object) -> tuple[PayloadNeedle, ...]:
    """A list of ``{tool, needle, call_index?}`` objects as :class:`PayloadNeedle` values."""
    if not isinstance(value, list):
        raise ValueError("not a list")
    needles = []
    for entry in value:
        if not isinstance(entry, dict) or not set(entry) <= {"tool", "needle", "call_index"}:
            raise ValueError("not a {tool, needle, call_index?} object")
        tool, needle, index = entry.get("tool"), entry.get("needle"), entry.get("call_index")
        if not isinstance(tool, str) or not isinstance(needle, str):
            raise ValueError("tool and needle are strings")
        needles.append(PayloadNeedle(tool, needle, None if index is None else parse_count(index)))
    return tuple(needles)


def dump_plain(value: tuple[str, ...] | int | bool) -> JSONValue:
    """A tuple of strings, an integer or a boolean, as JSON."""
    return list(value) if isinstance(value, tuple) else value


def dump_needles(value: tuple[PayloadNeedle, ...]) -> JSONValue:
    """:class:`PayloadNeedle` values as the objects a fixture writes."""
    out: list[JSONValue] = []
    for n in value:
        entry: dict[str, JSONValue] = {"tool": n.tool, "needle": n.needle}
        if n.call_index is not None:
            entry["call_index"] = n.call_index
        out.append(entry)
    return out


def _json_text(value: object) -> str | None:
    return None if value is None else argument_json(value)


_CALL_KEYS = {"tool", "arguments", "arguments_schema", "result_contains", "succeeded"}


def parse_tool_calls_match(value: object) -> ToolCallsMatch:
    """``{order?, extras?, calls: [...]}`` as :class:`ToolCallsMatch` (JSON values as JSON
    text, so the value stays hashable)."""
    if not isinstance(value, dict) or not isinstance(value.get("calls"), list):
        raise ValueError("not a {order?, extras?, calls} object")
    if not set(value) <= {"order", "extras", "calls"}:
        raise ValueError("unknown key")
    order, extras = value.get("order", "in_order"), value.get("extras", "forbid")
    if order not in ("in_order", "any") or extras not in ("forbid", "allow"):
        raise ValueError("order is in_order or any; extras is forbid or allow")
    calls = []
    for call in value["calls"]:
        if not isinstance(call, dict) or not set(call) <= _CALL_KEYS:
            raise ValueError("not an expected call")
        tool, needle = call.get("tool"), call.get("result_contains")
        succeeded = call.get("succeeded")
        if not isinstance(tool, str) or not isinstance(needle, (str, type(None))):
            raise ValueError("tool and result_contains are strings")
        if not isinstance(succeeded, (bool, type(None))):
            raise ValueError("succeeded is a boolean")
        arguments = call.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise ValueError("arguments is an object")
        calls.append(
            ExpectedCall(
                tool,
                _json_text(arguments),
                _json_text(call.get("arguments_schema")),
                needle,
                succeeded,
            )
        )
    return ToolCallsMatch(tuple(calls), order, extras)


def dump_tool_calls_match(value: ToolCallsMatch) -> JSONValue:
    """:class:`ToolCallsMatch` as the object a fixture writes."""
    calls: list[JSONValue] = []
    for call in value.calls:
        entry: dict[str, JSONValue] = {"tool": call.tool}
        if call.arguments is not None:
            entry["arguments"] = json.loads(call.arguments)
        if call.arguments_schema is not None:
            entry["arguments_schema"] = json.loads(call.arguments_schema)
        if call.result_contains is not None:
            entry["result_contains"] = call.result_contains
        if call.succeeded is not None:
            entry["succeeded"] = call.succeeded
        calls.append(entry)
    return {"order": value.order, "extras": value.extras, "calls": calls}


def parse_response_json(value: object) -> ResponseJson:
    """``{schema?, equals?}`` as :class:`ResponseJson` (JSON values as JSON text)."""
    if not isinstance(value, dict) or not set(value) <= {"schema", "equals"}:
        raise ValueError("not a {schema?, equals?} object")
    equals = value.get("equals", {})
    if not isinstance(equals, dict):
        raise ValueError("equals maps JSON Pointers to values")
    pairs = tuple((pointer, argument_json(v)) for pointer, v in equals.items())
    return ResponseJson(_json_text(value.get("schema")), pairs)


def dump_response_json(value: ResponseJson) -> JSONValue:
    """:class:`ResponseJson` as the object a fixture writes."""
    out: dict[str, JSONValue] = {}
    if value.schema is not None:
        out["schema"] = json.loads(value.schema)
    if value.equals:
        out["equals"] = {pointer: json.loads(text) for pointer, text in value.equals}
    return out


@dataclass(frozen=True, slots=True)
class Kind:
    """One expectation kind.

    - ``name``: its key in ``expects``, the field of :class:`~evalrunner.model.Expectations`
      that holds its value, and the stem of its schema file (:attr:`schema`).
    - ``value`` and ``doc``: the README table's "value" and "passes when" cells.
    - ``parse``: the JSON value → the typed, frozen (hashable) value ``Expectations`` holds
      (a tuple for a list, a frozen dataclass for an object); the grader receives it.
      Admission hands it schema-valid values; the admission cache hands it what ``dump``
      wrote, perhaps damaged, so it raises :class:`ValueError` on a value of another shape.
      Hashable, because admission remembers each value's verdict on the empty run: free JSON
      inside a value (an object to compare a reply with) is best held as its canonical text,
      :func:`evalrunner.model.argument_json`.
    - ``dump``: the typed value → JSON that ``parse`` reads back as the same value (the
      admission cache's entries).
    - ``grader``: that value and the run → one :class:`GradeResult` per check. It may read any
      part of the :class:`RunRecord`: the reply, the dispatches, the requests sent.
    - ``rules``: admission rules beyond the schema (:mod:`evalrunner.expectations.rules`), run when
      this kind is declared; each refusal names its place in the case.
    - ``evidence``: the dispatch field the grader reads that some agent paths cannot observe
      (a key of :data:`evalrunner.expectations.NO_EVIDENCE`), or ``None`` when every path observes
      what it reads; or a function of the declared value giving those fields, for a kind
      whose value says which it reads.
    """

    def needs(self, value: Any) -> tuple[str, ...]:
        """The unobservable dispatch fields a check of this value reads."""
        if self.evidence is None:
            return ()
        return (self.evidence,) if isinstance(self.evidence, str) else self.evidence(value)

    name: str
    value: str
    doc: str
    parse: Callable[[Any], Any]
    dump: Callable[[Any], JSONValue]
    grader: Callable[[Any, RunRecord], list[GradeResult]]
    rules: tuple[rules.Rule, ...] = ()
    evidence: str | Callable[[Any], tuple[str, ...]] | None = None

    @property
    def schema(self) -> str:
        """Its schema file, relative to ``schemas/``."""
        return f"expects/{self.name}.schema.json"


KINDS: tuple[Kind, ...] = (
    Kind(
        "response_contains",
        "list of strings",
        "the final response contains each string",
        parse_texts,
        dump_plain,
        response.response_contains,
    ),
    Kind(
        "response_not_contains",
        "list of strings",
        "the final response contains none of them",
        parse_texts,
        dump_plain,
        response.response_not_contains,
        rules=(rules.required_text_forbidden,),
    ),
    Kind(
        "response_matches",
        "list of RE2 patterns",
        "each pattern matches somewhere in the final response (linear time; no backreferences "
        "or lookaround)",
        parse_texts,
        dump_plain,
        response.response_matches,
        rules=(rules.patterns_compile_and_can_fail,),
    ),
    Kind(
        "tools_used",
        "list of tool names",
        "each tool was dispatched at least once",
        parse_texts,
        dump_plain,
        tools.tools_used,
    ),
    Kind(
        "tools_not_used",
        "list of tool names",
        "none of them was dispatched",
        parse_texts,
        dump_plain,
        tools.tools_not_used,
        rules=(rules.required_tool_forbidden,),
    ),
    Kind(
        "max_tool_calls",
        "integer ≥ 0",
        "dispatches ≤ n",
        parse_count,
        dump_plain,
        counts.max_tool_calls,
        rules=(rules.cap_below_need("max_tool_calls"),),
    ),
    Kind(
        "min_tool_calls",
        "integer ≥ 1",
        "dispatches ≥ n",
        parse_count,
        dump_plain,
        counts.min_tool_calls,
        rules=(rules.min_above_max,),
    ),
    Kind(
        "exact_tool_calls",
        "integer ≥ 0",
        "dispatches = n",
        parse_count,
        dump_plain,
        counts.exact_tool_calls,
        rules=(rules.exact_against_bounds, rules.cap_below_need("exact_tool_calls")),
    ),
    Kind(
        "all_tools_succeeded",
        "boolean",
        "every dispatch succeeded (true when there were none) equals the value",
        parse_flag,
        dump_plain,
        tools.all_tools_succeeded,
        evidence="success",
    ),
    Kind(
        "tool_arguments_contain",
        "list of `{tool, needle, call_index?}`",
        "a call to the tool (or its `call_index`-th call, 0-based) received argument text "
        "containing the needle",
        parse_needles,
        dump_needles,
        payloads.tool_arguments_contain,
        evidence="arguments",
    ),
    Kind(
        "tool_results_contain",
        "list of `{tool, needle, call_index?}`",
        "a call to the tool (or its `call_index`-th call) returned result text containing the "
        "needle",
        parse_needles,
        dump_needles,
        payloads.tool_results_contain,
    ),
    Kind(
        "tools_offered",
        "list of tool names",
        "every model request offers each tool (lists it, with a `tool_choice` that lets the "
        "model call it); fails when no request was sent",
        parse_texts,
        dump_plain,
        requests.tools_offered,
        rules=(_offerable("tools_offered"),),
    ),
    Kind(
        "tools_not_offered",
        "list of tool names",
        "no model request offers any of them",
        parse_texts,
        dump_plain,
        requests.tools_not_offered,
        rules=(rules.offered_and_not_offered, _offerable("tools_not_offered")),
    ),
    Kind(
        "system_prompt_contains",
        "list of strings",
        "every model request's system prompt (system/developer messages, `instructions`, "
        "Anthropic `system`) contains each string; fails when no request was sent",
        parse_texts,
        dump_plain,
        requests.system_prompt_contains,
    ),
    Kind(
        "tool_calls_match",
        "`{order?, extras?, calls: [{tool, arguments?, arguments_schema?, result_contains?, "
        "succeeded?}]}`",
        "each expected call is matched by a distinct dispatch satisfying all its matchers "
        "(`arguments`: a subset, compared as JSON values); `order: in_order` (default) or "
        "`any`; `extras: forbid` (default: every dispatch matched) or `allow`",
        parse_tool_calls_match,
        dump_tool_calls_match,
        trajectory.tool_calls_match,
        evidence=trajectory.evidence,
    ),
    Kind(
        "response_json",
        "`{schema?, equals?: {pointer: value}}`",
        "the whole final response parses as JSON, satisfies the JSON Schema, and each JSON "
        "Pointer resolves to a value equal (as JSON) to the one given",
        parse_response_json,
        dump_response_json,
        response_json.response_json,
    ),
)
"""Every expectation kind, in grading order: the field order of ``Expectations``."""

BY_NAME: dict[str, Kind] = {kind.name: kind for kind in KINDS}
""":data:`KINDS` by name."""


def kinds_table() -> str:
    """The README's table of kinds, in grading order (a test holds the README to it)."""
    rows = ["| kind | value | passes when |", "|------|-------|-------------|"]
    rows += [f"| `{kind.name}` | {kind.value} | {kind.doc} |" for kind in KINDS]
    return "\n".join(rows) + "\n"
