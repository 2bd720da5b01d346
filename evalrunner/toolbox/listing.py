"""``evalrunner list``: the cases a run would take, shown without running anything."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from typing import Any

from evalrunner.model import Case
from evalrunner.session import SelectedCase, Selection
from evalrunner.text import encodable, encodable_path, printable, printable_path


def expectation_kinds(case: Case) -> list[str]:
    """The expectation kinds a case declares, in grading order."""
    return [f.name for f in fields(case.expects) if getattr(case.expects, f.name) is not None]


def _row(item: SelectedCase) -> dict[str, Any]:
    case = item.case
    return {
        "name": encodable(case.name),
        "file": encodable_path(case.source),
        "source": encodable_path(item.source),
        "class": case.case_class,
        "turns": len(case.turns),
        "expects": expectation_kinds(case),
    }


def render_list_table(selection: Selection) -> str:
    """One aligned line per case (name, file, class, turns, expectation kinds), a header and
    a count."""
    header = ("NAME", "FILE", "CLASS", "TURNS", "EXPECTS")
    rows = [
        (
            printable(item.case.name),
            printable_path(item.case.source),
            item.case.case_class or "-",
            str(len(item.case.turns)),
            ", ".join(expectation_kinds(item.case)),
        )
        for item in selection.cases
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = [
        "  ".join(
            [*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]
        ).rstrip()
        for row in [header, *rows]
    ]
    lines.append(_count(selection))
    return "\n".join(lines) + "\n"


def _count(selection: Selection) -> str:
    count = f"{len(selection.cases)} case(s)"
    if selection.shard is not None:
        count += f" in shard {selection.shard}, of {selection.selected} selected"
    return count


# As in the JSON report: characters a terminal acts on are written as escapes.
_JSON_RAW_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def render_list_json(selection: Selection) -> str:
    """The listing as JSON: the suite, the selection flags and one object per case."""
    data = {
        "suite": encodable_path(selection.suite),
        "keyword": None if selection.keyword is None else encodable(selection.keyword.text),
        "shard": None
        if selection.shard is None
        else {
            "index": selection.shard.index,
            "count": selection.shard.count,
            "selected": selection.selected,
        },
        "total": len(selection.cases),
        "cases": [_row(item) for item in selection.cases],
    }
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return _JSON_RAW_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"
