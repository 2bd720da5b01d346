"""The admission cache: what admitting a fixture gave, kept between runs in
``.evalrunner_cache/``, so that an unchanged suite is not parsed and validated again.

An entry is keyed by the SHA-256 of the fixture's bytes and the path it is shown by (messages
and positions name it), together with a fingerprint of this evalrunner: its version, and the
size and modification time of its modules and schemas. A new release, an edited schema or an
edited module (in a development checkout) therefore starts from an empty cache.

Entries are JSON, decoded into the model's own types and nothing else: a cache file that was
tampered with can at worst make a fixture look admitted as some other case, never run code.
The store is one SQLite database, safe under concurrent runs (a writer that finds it locked
skips writing; the cache is only ever an optimisation). A cache that cannot be read (corrupt,
foreign, from another format version, on a read-only disk) is ignored, never an error: the run
admits every fixture as if there were no cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, cast

from evalrunner import __version__
from evalrunner.model import (
    AdmissionError,
    Case,
    Expectations,
    ModelResponse,
    PayloadNeedle,
    TextResponse,
    ToolCall,
    ToolCallsResponse,
    Turn,
)

CACHE_DIR_NAME = ".evalrunner_cache"
"""The cache directory, beside the config file (or in the working directory without one)."""

_DATABASE = "admission.sqlite3"
_MARKER = "CACHEDIR.TAG"
_MARKER_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by evalrunner.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
_FORMAT = 1
"""The layout of the database; another layout is a foreign cache."""

Outcome = Case | list[AdmissionError]
"""What admitting one fixture gave: its case, or every problem with it."""


class AdmissionCache:
    """The entries of one cache directory: :meth:`lookup` and :meth:`store` during a run,
    :meth:`save` at its end. Without a directory (``--no-cache``) it holds nothing and saves
    nothing."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._found: dict[bytes, str] | None = None  # read on the first lookup
        self._new: dict[bytes, str] = {}

    def key(self, shown_path: str, raw: bytes) -> bytes:
        """The key of a fixture's bytes, shown in messages as ``shown_path``."""
        digest = hashlib.sha256(_fingerprint())
        digest.update(shown_path.encode("utf-8", "surrogateescape"))
        digest.update(b"\0")
        digest.update(raw)
        return digest.digest()

    def lookup(self, key: bytes) -> Outcome | None:
        """The outcome stored under ``key``, or ``None`` (also for an entry that does not
        decode: it is admitted again and overwritten)."""
        if self.directory is None:
            return None
        if self._found is None:
            self._found = self._read()
        value = self._found.get(key)
        if value is None:
            return None
        try:
            return _decode(json.loads(value))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def store(self, key: bytes, outcome: Outcome) -> None:
        """Keep ``outcome`` under ``key``, to be written by :meth:`save`."""
        if self.directory is not None:
            # ASCII: a path or text may hold lone surrogates (a file name that is not UTF-8),
            # which SQLite cannot store as text; \u escapes carry them.
            value = json.dumps(_encode(outcome), separators=(",", ":"))
            self._new[key] = value

    def save(self) -> None:
        """Write the new entries, dropping those of other evalrunner builds. Best effort: a
        cache that cannot be written (locked, read-only, foreign) is left as it is."""
        if self.directory is None or not self._new:
            return
        with contextlib.suppress(OSError, ValueError, sqlite3.Error):
            connection = self._connect(create=True)
            if connection is None:
                return
            with contextlib.closing(connection), connection:
                build = _fingerprint().hex()
                connection.execute("DELETE FROM entries WHERE build != ?", (build,))
                connection.executemany(
                    "INSERT OR REPLACE INTO entries (key, build, value) VALUES (?, ?, ?)",
                    ((key, build, value) for key, value in self._new.items()),
                )
            self._new.clear()

    def _read(self) -> dict[bytes, str]:
        found: dict[bytes, str] = {}
        with contextlib.suppress(OSError, ValueError, sqlite3.Error):
            connection = self._connect(create=False)
            if connection is None:
                return found
            with contextlib.closing(connection):
                rows = connection.execute(
                    "SELECT key, value FROM entries WHERE build = ?", (_fingerprint().hex(),)
                )
                for key, value in rows:
                    if isinstance(key, bytes) and isinstance(value, str):
                        found[key] = value
        return found

    def _connect(self, *, create: bool) -> sqlite3.Connection | None:
        directory = self.directory
        assert directory is not None
        database = directory / _DATABASE
        if not create and not database.is_file():
            return None
        if directory.exists() and not (directory / _MARKER).is_file():
            return None  # not a directory evalrunner made: foreign, left alone
        if create and not directory.exists():
            directory.mkdir(parents=True)
            (directory / _MARKER).write_text(_MARKER_TEXT, encoding="utf-8")
            # Like pytest's and ruff's caches: never committed by accident.
            (directory / ".gitignore").write_text("# made by evalrunner\n*\n", encoding="utf-8")
        uri = database.resolve().as_uri() + ("?mode=rwc" if create else "?mode=ro")
        connection = sqlite3.connect(uri, uri=True, timeout=0.5, isolation_level=None)
        try:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version == 0 and create:
                with connection:
                    connection.execute(
                        "CREATE TABLE IF NOT EXISTS entries "
                        "(key BLOB PRIMARY KEY, build TEXT NOT NULL, value TEXT NOT NULL)"
                    )
                    connection.execute(f"PRAGMA user_version = {_FORMAT}")
            elif version != _FORMAT:
                connection.close()
                return None  # another layout, or not ours
        except sqlite3.Error:
            connection.close()
            raise
        connection.isolation_level = "DEFERRED"
        return connection


def clear(directory: Path) -> bool:
    """Remove the cache in ``directory``; whether there was one. A directory evalrunner did
    not make (no cache tag in it) is left alone: :class:`ValueError`."""
    if not directory.exists():
        return False
    if not (directory / _MARKER).is_file():
        raise ValueError("it holds no evalrunner cache tag, so it was not made by evalrunner")
    shutil.rmtree(directory)
    return True


@cache
def _fingerprint() -> bytes:
    """This evalrunner build: its version, and each module's and schema's size and time."""
    digest = hashlib.sha256(f"evalrunner {__version__} cache {_FORMAT}\0".encode())
    package = Path(__file__).resolve().parent
    from evalrunner.schemas import schema_root

    # A source checkout reads the repository's schemas/; an installed wheel carries them in
    # the package, which the first root covers.
    schemas = Path(str(schema_root()))
    for root in (package, schemas) if not schemas.is_relative_to(package) else (package,):
        for path in sorted(_files(root)):
            with contextlib.suppress(OSError):
                info = path.stat()
                digest.update(f"{path.name}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.digest()


def _files(root: Path) -> Iterator[Path]:
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [d for d in subdirectories if d != "__pycache__"]
        for name in names:
            if name.endswith((".py", ".json")):
                yield Path(directory) / name


# --- entries as JSON: the model's types only ---------------------------------------------------


def _encode(outcome: Outcome) -> dict[str, Any]:
    if isinstance(outcome, Case):
        return {
            "case": {
                "name": outcome.name,
                "turns": [
                    [turn.user_input, [_response(r) for r in turn.responses]]
                    for turn in outcome.turns
                ],
                "expects": _expectations(outcome.expects),
                "description": outcome.description,
                "class": outcome.case_class,
                "source": os.fsdecode(outcome.source),
                "positions": {k: list(v) for k, v in outcome.positions.items()},
            }
        }
    return {
        "errors": [
            [e.path, e.message, e.line, e.col, list(e.json_path)] for e in outcome
        ]
    }


def _response(response: ModelResponse) -> list[Any]:
    if isinstance(response, TextResponse):
        return ["text", response.content, response.input_tokens, response.output_tokens]
    calls = [[c.id, c.name, c.arguments] for c in response.tool_calls]
    return ["calls", calls, response.input_tokens, response.output_tokens]


def _expectations(expects: Expectations) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in vars(expects).items():
        if value is None:
            continue
        if isinstance(value, tuple) and value and isinstance(value[0], PayloadNeedle):
            value = [[n.tool, n.needle, n.call_index] for n in value]
        out[name] = value
    return out


def _decode(data: dict[str, Any]) -> Outcome:
    if "errors" in data:
        return [
            AdmissionError(path, message, line, col, tuple(json_path))
            for path, message, line, col, json_path in data["errors"]
        ]
    case = data["case"]
    turns = tuple(
        Turn(user_input, tuple(_decode_response(r) for r in responses))
        for user_input, responses in case["turns"]
    )
    expects: dict[str, Any] = {}
    for name, value in case["expects"].items():
        if name in ("tool_arguments_contain", "tool_results_contain"):
            value = tuple(PayloadNeedle(tool, needle, index) for tool, needle, index in value)
        elif isinstance(value, list):
            value = tuple(value)
        expects[name] = value
    return Case(
        name=case["name"],
        turns=turns,
        expects=Expectations(**expects),
        description=case["description"],
        case_class=case["class"],
        source=Path(case["source"]),
        positions={k: (v[0], v[1]) for k, v in case["positions"].items()},
    )


def _decode_response(data: list[Any]) -> ModelResponse:
    kind, body, input_tokens, output_tokens = data
    if kind == "text":
        return TextResponse(cast(str, body), input_tokens, output_tokens)
    if kind != "calls":
        raise ValueError(kind)
    calls = tuple(ToolCall(i, name, arguments) for i, name, arguments in body)
    return ToolCallsResponse(calls, input_tokens, output_tokens)
