"""Which cases a run takes: ``-k`` expressions, ``--shard`` slices, and the suite order.

``-k`` expressions (pytest's grammar) are parsed by :mod:`evalrunner.selection.keywords`, which a
run imports only when it is given one.

A shard is a deterministic slice: the selected cases are ordered by the SHA-256 of their
identity (fixture path and name, as the report shows them) and dealt round-robin, so every
machine and Python version computes the same slices, and their sizes differ by at most one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from evalrunner.model import AdmissionError, Shard, SuiteFingerprint, SuiteReport
from evalrunner.selection import SelectionError as SelectionError
from evalrunner.text import encodable, encodable_path, printable

MAX_SHARDS = 10_000
"""Most shards a run may be cut into."""


# --- shards -----------------------------------------------------------------------------------

_SHARD = re.compile(r"([0-9]{1,6})/([0-9]{1,6})")


def parse_shard(text: str) -> Shard:
    """Parse ``--shard I/N`` (1 ≤ I ≤ N ≤ :data:`MAX_SHARDS`), or raise :class:`SelectionError`."""
    shown = printable(text[:40]) + ("..." if len(text) > 40 else "")
    match = _SHARD.fullmatch(text.strip())
    if match is None:
        raise SelectionError(f"--shard: expected I/N, shard I of N, such as 1/3; got '{shown}'")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= count <= MAX_SHARDS:
        raise SelectionError(
            f"--shard {shown}: the shard count N must be from 1 to {MAX_SHARDS}, got {count}"
        )
    if not 1 <= index <= count:
        raise SelectionError(
            f"--shard {shown}: the shard number I must be from 1 to N ({count}); shards are "
            f"numbered 1/{count} to {count}/{count}"
        )
    return Shard(index, count)


def case_identity(source: str, name: str) -> bytes:
    """What a case's shard is computed from: its fixture path, as the report shows it, and
    its name. Bytes, so the hash is the same on every machine and Python version."""
    return f"{encodable_path(source)}\0{encodable(name)}".encode()


T = TypeVar("T")


def take_shard(items: Sequence[T], shard: Shard, identity: Callable[[T], bytes]) -> list[T]:
    """The items of ``shard``, in their given order.

    Items are ordered by the SHA-256 of their identity (ties, which need equal identities,
    by their given position) and dealt round-robin to the shards: shard sizes differ by at
    most one, and the union of every shard is all of ``items``, each once.
    """
    import hashlib  # here: only a sharded run hashes (and OpenSSL's loading costs every start)

    ranked = sorted(
        range(len(items)), key=lambda i: (hashlib.sha256(identity(items[i])).digest(), i)
    )
    mine = shard.index - 1
    chosen = sorted(position for rank, position in enumerate(ranked) if rank % shard.count == mine)
    return [items[i] for i in chosen]


# --- suite order ------------------------------------------------------------------------------


def suite_order(source: str, name: str) -> tuple[tuple[str, ...], str]:
    """The sort key of suite order: the fixture path as the report shows it, compared one
    path component at a time (code point order), then the case name.

    A report holds both, so ``merge`` puts shards' cases back in exactly the order an
    unsharded run has.
    """
    return tuple(encodable_path(source).split("/")), encodable(name)


def ordered(items: Iterable[T], key: Callable[[T], tuple[str, str]]) -> list[T]:
    """``items`` in suite order; ``key`` gives each one's (fixture path, name)."""
    return sorted(items, key=lambda item: suite_order(*key(item)))


# --- the report's selection fields ------------------------------------------------------------


def report_fields(report: SuiteReport) -> dict[str, Any]:
    """The JSON report's optional selection fields, present only when used: ``keyword``
    (the ``-k`` expression), ``shard`` (``index``, ``count``, ``selected``, the cases of all
    shards together, and ``suite_fingerprint``, the suite they were dealt from) and
    ``admission_errors`` (files refused under
    ``--continue-on-admission-errors``)."""
    fields: dict[str, Any] = {}
    if report.keyword is not None:
        fields["keyword"] = encodable(report.keyword)
    if report.shard is not None:
        fields["shard"] = {
            "index": report.shard.index,
            "count": report.shard.count,
            "selected": report.selected if report.selected is not None else len(report.cases),
        }
        if report.fingerprint is not None:
            fields["shard"]["suite_fingerprint"] = _fingerprint_data(report.fingerprint)
    if report.admission_errors:
        fields["admission_errors"] = [_error_data(e) for e in report.admission_errors]
    return fields


def _fingerprint_data(found: SuiteFingerprint) -> dict[str, Any]:
    """The suite a shard was dealt from, which ``merge`` holds the other shards to."""
    return {
        "paths": [encodable_path(path) for path in found.paths],
        "keyword": None if found.keyword is None else encodable(found.keyword),
        "cases": [
            {"name": encodable(c.name), "source": encodable_path(c.source), "sha256": c.sha256}
            for c in found.cases
        ],
    }


def _error_data(error: AdmissionError) -> dict[str, Any]:
    return {
        "path": encodable_path(error.path),
        "line": error.line,
        "col": error.col,
        "message": encodable(error.message),
        "json_path": [encodable(p) if isinstance(p, str) else p for p in error.json_path],
    }
