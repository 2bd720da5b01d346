"""The catalogue in docs/how-to/mutants.md lists every mutant ``mutate`` runs, once, with the
paths it runs on: the registry (:data:`evalrunner.mutation.mutants.MUTANTS`) is the source,
and a mutant added there without its row (as ``wraps-reply`` once was) fails here."""

from __future__ import annotations

import re
from pathlib import Path

from evalrunner.mutation.mutants import MUTANTS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "mutants.md"


def catalogue() -> dict[str, str]:
    rows = re.findall(r"^\| `([a-z-]+)` \|.*\| ([^|]+) \|$", PAGE.read_text("utf-8"), re.M)
    names = [name for name, _ in rows]
    assert len(names) == len(set(names)), names
    return {name: paths.strip() for name, paths in rows}


def test_the_catalogue_lists_every_mutant_with_its_paths() -> None:
    listed = catalogue()
    assert sorted(listed) == sorted(mutant.name for mutant in MUTANTS)
    for mutant in MUTANTS:
        assert listed[mutant.name] == ("command agents" if mutant.command_only else "all")
