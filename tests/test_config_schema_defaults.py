"""The config schema's ``default`` of each key is the value evalrunner uses when the key is
absent: an editor showing the schema must not promise a default the code does not have."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from evalrunner.config import DEFAULT_SUITE_DIR, Config, LiveConfig, RecordConfig

ROOT = Path(__file__).resolve().parent.parent
TABLES: dict[str, type[Any]] = {"eval": Config, "live": LiveConfig, "record": RecordConfig}


def code_default(table: type[Any], key: str) -> Any:
    if table is Config and key == "suite_dir":
        return DEFAULT_SUITE_DIR  # resolved against the base directory at load time
    [found] = [f for f in dataclasses.fields(table) if f.name == key]
    if found.default is not dataclasses.MISSING:
        value = found.default
    else:
        assert callable(found.default_factory), key
        value = found.default_factory()
    return list(value) if isinstance(value, tuple) else value


def test_every_schema_default_is_the_code_default() -> None:
    schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text(encoding="utf-8"))
    checked = 0
    for name, table in TABLES.items():
        for key, spec in schema["$defs"][name]["properties"].items():
            if "default" not in spec:
                continue
            default = code_default(table, key)
            assert spec["default"] == default and type(spec["default"]) in (
                type(default),
                int,
            ), (f"[{name}] {key}", spec["default"], default)
            checked += 1
    assert checked >= 10, checked
