"""Grader of call sequences: ``tool_calls_match``.

Each expected call must be matched by a distinct dispatch that satisfies all its matchers.
The matching finds an assignment whenever one exists: a maximum bipartite matching for
``order: any``, a longest order-preserving matching (an LCS over the predicate) for
``order: in_order``; taking the first dispatch that fits each expected call would fail a
trajectory that matches when matchers overlap.
"""

from __future__ import annotations

import json
from functools import lru_cache

from evalrunner.expectations._format import listing, nfc, normalization_note, quote
from evalrunner.expectations._json import (
    NOT_JSON,
    UNRESOLVED,
    parse,
    resolve,
    schema_errors,
    subset_differences,
)
from evalrunner.model import (
    ExpectedCall,
    GradeResult,
    RunRecord,
    ToolCallRecord,
    ToolCallsMatch,
    argument_json,
)

__all__ = ["differences", "evidence", "match", "tool_calls_match"]


def evidence(expected: ToolCallsMatch) -> tuple[str, ...]:
    """The dispatch fields this check reads that some agent paths cannot observe."""
    needs = []
    if any(c.arguments is not None or c.arguments_schema is not None for c in expected.calls):
        needs.append("arguments")
    if any(c.succeeded is not None for c in expected.calls):
        needs.append("success")
    return tuple(needs)


def differences(
    expected: ExpectedCall, arguments: str, result: str | None = None, success: bool | None = None
) -> list[str]:
    """Why a dispatch of ``expected.tool`` with these fields does not match (empty: it does).
    ``result`` or ``success`` None: not known yet (admission judges a script), not compared."""
    return _compared(expected, arguments, result, success)[0]


def _compared(
    expected: ExpectedCall, arguments: str, result: str | None, success: bool | None
) -> tuple[list[str], int]:
    """:func:`differences`, and how far the dispatch is from fitting: one per differing
    argument key, per broken schema rule, per other matcher it fails (0: it fits). Counting
    the messages alone would rate two differing keys, reported in one message, as one."""
    out: list[str] = []
    keys: list[str] = []
    if expected.arguments is not None or expected.arguments_schema is not None:
        value, reason = parse(arguments)
        if value is NOT_JSON:
            out.append(f"arguments are not JSON ({reason})")
        else:
            if expected.arguments is not None:
                want = parse(expected.arguments)[0]  # cached: admission compares every pair
                keys = subset_differences(want, value)
                if keys == ["/"]:
                    out.append("arguments are not a JSON object")
                elif keys:
                    shown = _wrong(expected.arguments, value, keys)
                    out.append("arguments differ at " + ", ".join(shown))
            if expected.arguments_schema is not None:
                for reason in schema_errors(expected.arguments_schema, value):
                    out.append(f"arguments break arguments_schema: {reason}")
    if (
        result is not None
        and expected.result_contains is not None
        and nfc(expected.result_contains) not in nfc(result)
    ):
        out.append(f"result lacks {quote(expected.result_contains)}")
    if success is not None and expected.succeeded is not None and success != expected.succeeded:
        out.append(f"succeeded is {json.dumps(success)}")
    return out, len(out) + max(len(keys) - 1, 0)


def _wrong(want: str, value: object, pointers: list[str]) -> list[str]:
    """Each differing key as ``"/city" (expected "Rome", got "Paris")``; ``want`` is the
    expected arguments' JSON text."""
    out = []
    for pointer in pointers:
        expected, head = _wanted(want, pointer)
        actual = resolve(value, pointer)
        got = "missing" if actual is UNRESOLVED else f"got {argument_json(actual)}"
        note = "" if actual is UNRESOLVED else normalization_note(expected, actual, "arguments")
        out.append(f"{head}, {got}{note})")
    return out


@lru_cache(maxsize=4096)
def _wanted(want: str, pointer: str) -> tuple[object, str]:
    """The expected value at ``pointer``, and its message up to what was got: admission
    compares each expected call with every scripted call, so each is asked for again and
    again."""
    expected = resolve(parse(want)[0], pointer)
    return expected, f"{quote(pointer)} (expected {argument_json(expected)}"


def _fits(expected: ExpectedCall, call: ToolCallRecord) -> bool:
    return call.name == expected.tool and not differences(
        expected, call.arguments, call.result, call.success
    )


def match(expected: ToolCallsMatch, fits: list[list[bool]]) -> dict[int, int]:
    """A largest assignment of expected calls (rows of ``fits``) to dispatches (columns):
    expected index → dispatch index, order-preserving under ``in_order``."""
    n = len(fits[0]) if fits else 0
    if expected.order == "in_order":
        k = len(fits)
        # best[j][i]: most pairs matching expected[j:] into dispatches[i:], in order.
        best = [[0] * (n + 1) for _ in range(k + 1)]
        for j in range(k - 1, -1, -1):
            for i in range(n - 1, -1, -1):
                take = best[j + 1][i + 1] + 1 if fits[j][i] else 0
                best[j][i] = max(take, best[j + 1][i], best[j][i + 1])
        pairs: dict[int, int] = {}
        j = i = 0
        while j < k and i < n:
            if fits[j][i] and best[j][i] == best[j + 1][i + 1] + 1:
                pairs[j] = i
                j, i = j + 1, i + 1
            elif best[j][i] == best[j + 1][i]:
                j += 1
            else:
                i += 1
        return pairs
    return _maximum_matching(fits, n)


def _maximum_matching(fits: list[list[bool]], n: int) -> dict[int, int]:
    """Hopcroft-Karp, iterative: a recursive augmenting-path search overflows the stack on
    a long chain of overlapping expected calls, and rescanning every dispatch per step makes
    it cubic. Rows are expected calls, columns dispatches."""
    edges = [[i for i in range(n) if row[i]] for row in fits]
    mate_row = [-1] * len(fits)  # expected → dispatch
    mate_col = [-1] * n  # dispatch → expected
    for j, row in enumerate(edges):  # a greedy start leaves few paths to find
        for i in row:
            if mate_col[i] < 0:
                mate_row[j], mate_col[i] = i, j
                break
    while True:
        # Layers of rows reachable from the free rows by alternating paths.
        layer = [-1] * len(fits)
        queue = [j for j, row in enumerate(edges) if mate_row[j] < 0 and row]
        for j in queue:
            layer[j] = 0
        reachable_free = False
        for j in queue:  # the queue grows while it is walked
            for i in edges[j]:
                owner = mate_col[i]
                if owner < 0:
                    reachable_free = True
                elif layer[owner] < 0:
                    layer[owner] = layer[j] + 1
                    queue.append(owner)
        if not reachable_free:
            break
        # Disjoint augmenting paths along the layers, by an explicit stack.
        tried = [0] * len(fits)  # next edge each row tries
        for root in range(len(fits)):
            if mate_row[root] >= 0 or layer[root] != 0:
                continue
            rows, cols = [root], []
            while rows:
                j = rows[-1]
                row = edges[j]
                step = False
                while tried[j] < len(row):
                    i = row[tried[j]]
                    tried[j] += 1
                    owner = mate_col[i]
                    if owner < 0:
                        cols.append(i)
                        for r, c in zip(rows, cols, strict=True):
                            mate_row[r], mate_col[c] = c, r
                        rows = []
                        step = True
                        break
                    if layer[owner] == layer[j] + 1:
                        cols.append(i)
                        rows.append(owner)
                        step = True
                        break
                if not step:
                    layer[j] = -1  # a dead end this phase
                    rows.pop()
                    if cols:
                        cols.pop()
    return {j: i for j, i in enumerate(mate_row) if i >= 0}


def _label(expected: ToolCallsMatch) -> str:
    tools = listing(c.tool for c in expected.calls)
    return f"tool_calls_match({tools}, order: {expected.order}, extras: {expected.extras})"


def _shown(index: int, call: ToolCallRecord) -> str:
    # 0-based, as calls[j] and call_index are, so one message never mixes two numberings.
    return f"dispatches[{index}] {quote(call.name)} {quote(call.arguments)}"


def tool_calls_match(expected: ToolCallsMatch, run: RunRecord) -> list[GradeResult]:
    """Every expected call is matched by a distinct dispatch (in order under ``in_order``);
    under ``extras: forbid`` every dispatch is matched too."""
    calls = run.tool_calls
    fits = [[_fits(e, call) for call in calls] for e in expected.calls]
    pairs = match(expected, fits)
    used = set(pairs.values())
    extras = [i for i in range(len(calls)) if i not in used]
    passed = len(pairs) == len(expected.calls) and (expected.extras == "allow" or not extras)
    if passed:
        return [GradeResult(_label(expected), True)]
    problems = []
    # A dispatch already named as fitting an expected call is not named again as fitting none.
    fitting: set[int] = set()
    for j, wanted in enumerate(expected.calls):
        if j in pairs:
            continue
        problem = f"calls[{j}] ({quote(wanted.tool)}) has no match"
        out_of_order = [i for i in range(len(calls)) if fits[j][i]]
        same_tool = [i for i in range(len(calls)) if calls[i].name == wanted.tool]
        if out_of_order and expected.order == "in_order":
            fitting.add(out_of_order[0])
            problem += f": {_shown(out_of_order[0], calls[out_of_order[0]])} fits it, but not "
            problem += "in the listed order (order: in_order)"
        elif out_of_order:
            problem += f": {_shown(out_of_order[0], calls[out_of_order[0]])} fits it, but "
            problem += "every dispatch that fits it is needed by another expected call"
        elif same_tool:
            # Nearest: fewest differing keys and matchers, unmatched dispatches first.
            compared = {
                i: _compared(wanted, calls[i].arguments, calls[i].result, calls[i].success)
                for i in same_tool
            }
            near = min(same_tool, key=lambda i: (compared[i][1], i in used, i))
            call = calls[near]
            found = compared[near][0]
            taken = " (matched to another expected call)" if near in used else ""
            problem += f"; nearest: {_shown(near, call)}{taken}"
            if found:
                problem += ": " + "; ".join(found)
        else:
            problem += f": no dispatch of {quote(wanted.tool)}"
        problems.append(problem)
    if expected.extras == "forbid":
        problems.extend(
            f"{_shown(i, calls[i])} matches no expected call (extras: forbid)"
            for i in extras
            if i not in fitting
        )
    detail = "; ".join(problems) + f"; dispatched: {listing(run.tools_called)}"
    return [GradeResult(_label(expected), False, detail)]
