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
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import astuple, fields
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalrunner import __version__
from evalrunner.load import KeyPositions
from evalrunner.model import (
    AdmissionError,
    Case,
    Expectations,
    ExpectedCall,
    ModelResponse,
    PayloadNeedle,
    ResponseJson,
    TextResponse,
    ToolCall,
    ToolCallsMatch,
    ToolCallsResponse,
    Turn,
)

if TYPE_CHECKING:
    import sqlite3
    from hashlib import sha256
else:
    # CPython's own SHA-256, where it has one, as the standard library's random module takes
    # its SHA-512: hashlib would load OpenSSL's libcrypto (some 11M instructions, 2% of a
    # small run's start) for the one digest every run computes. The same digest either way.
    try:
        from _sha2 import sha256  # Python 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256  # Python 3.11
        except ImportError:
            from hashlib import sha256

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
        digest = sha256(_fingerprint())
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
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
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
        import sqlite3

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
        import sqlite3  # here, not at the top: a run with --no-cache never needs it

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
        if directory.exists() and not _ours(directory):
            return None  # not a directory evalrunner made: foreign, left alone
        if create and not directory.exists():
            directory.mkdir(parents=True)
            (directory / _MARKER).write_text(_MARKER_TEXT, encoding="utf-8")
            # Like pytest's and ruff's caches: never committed by accident.
            (directory / ".gitignore").write_text("# made by evalrunner\n*\n", encoding="utf-8")
        uri = database.resolve().as_uri() + ("?mode=rwc" if create else "?mode=ro")
        import sqlite3

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
    if not _ours(directory):
        raise ValueError("it holds no evalrunner cache tag, so it was not made by evalrunner")
    shutil.rmtree(directory)
    return True


def _ours(directory: Path) -> bool:
    """Whether ``directory`` holds the cache tag evalrunner writes, word for word: any
    program may write a CACHEDIR.TAG, and a directory with someone else's is not ours to
    read, write or remove."""
    try:
        tag = (directory / _MARKER).read_bytes()
    except OSError:
        return False
    return tag == _MARKER_TEXT.encode("utf-8")


@cache
def _fingerprint() -> bytes:
    """This evalrunner build: its version, and each module's and schema's size and time."""
    digest = sha256(f"evalrunner {__version__} cache {_FORMAT}\0".encode())
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
                # Positions are found in the file when a report asks (KeyPositions): only
                # which key holds the name is kept, never the positions themselves.
                "name_key": (
                    outcome.positions.name_key
                    if isinstance(outcome.positions, KeyPositions)
                    else "name"
                ),
            }
        }
    return {"errors": [[e.path, e.message, e.line, e.col, list(e.json_path)] for e in outcome]}


def _response(response: ModelResponse) -> list[Any]:
    if isinstance(response, TextResponse):
        return ["text", response.content, response.input_tokens, response.output_tokens]
    calls = [[c.id, c.name, c.arguments] for c in response.tool_calls]
    return ["calls", calls, response.input_tokens, response.output_tokens]


def _expectations(expects: Expectations) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in fields(expects):
        name, value = field.name, getattr(expects, field.name)
        if value is None:
            continue
        if isinstance(value, tuple) and value and isinstance(value[0], PayloadNeedle):
            value = [[n.tool, n.needle, n.call_index] for n in value]
        elif isinstance(value, ToolCallsMatch):
            value = [value.order, value.extras, [list(astuple(c)) for c in value.calls]]
        elif isinstance(value, ResponseJson):
            value = [value.schema, [list(pair) for pair in value.equals]]
        out[name] = value
    return out


class _Damaged(ValueError):
    """An entry that does not hold what evalrunner writes: a miss, admitted afresh."""


def _kind(value: object, expected: type | tuple[type, ...]) -> Any:
    """``value`` if it is of the ``expected`` type (a bool is no int here), else a miss."""
    if isinstance(value, bool) and expected is int:
        raise _Damaged(value)
    if not isinstance(value, expected):
        raise _Damaged(value)
    return value


def _texts(value: object) -> tuple[str, ...]:
    return tuple(_kind(item, str) for item in _kind(value, list))


def _count(value: object) -> int:
    number: int = _kind(value, int)
    if number < 0:
        raise _Damaged(number)
    return number


_TEXT_KINDS = (
    "response_contains",
    "response_not_contains",
    "response_matches",
    "tools_used",
    "tools_not_used",
)
_COUNT_KINDS = ("max_tool_calls", "min_tool_calls", "exact_tool_calls")
_NEEDLE_KINDS = ("tool_arguments_contain", "tool_results_contain")


def _decode(data: object) -> Outcome:
    """An entry as evalrunner wrote it, every value's type checked (an entry edited by hand
    or by another program is a miss, never a case that runs as something it is not)."""
    entry: dict[str, Any] = _kind(data, dict)
    if set(entry) == {"errors"}:
        errors = []
        for item in _kind(entry["errors"], list):
            path, message, line, col, json_path = _kind(item, list)
            errors.append(
                AdmissionError(
                    _kind(path, str),
                    _kind(message, str),
                    None if line is None else _count(line),
                    None if col is None else _count(col),
                    tuple(_kind(part, (str, int)) for part in _kind(json_path, list)),
                )
            )
        if not errors:
            raise _Damaged("a refusal names its problems")
        return errors
    if set(entry) != {"case"}:
        raise _Damaged(sorted(entry))
    case: dict[str, Any] = _kind(entry["case"], dict)
    turns = tuple(
        Turn(_kind(user_input, str), tuple(_decode_response(r) for r in _kind(responses, list)))
        for user_input, responses in _kind(case["turns"], list)
    )
    if not turns or not all(turn.responses for turn in turns):
        raise _Damaged("a case has turns, and each turn responses")
    expects: dict[str, Any] = {}
    for name, value in _kind(case["expects"], dict).items():
        if name in _TEXT_KINDS:
            expects[name] = _texts(value)
        elif name in _COUNT_KINDS:
            expects[name] = _count(value)
        elif name == "all_tools_succeeded":
            expects[name] = _kind(value, bool)
        elif name in _NEEDLE_KINDS:
            expects[name] = tuple(
                PayloadNeedle(
                    _kind(tool, str), _kind(needle, str), None if index is None else _count(index)
                )
                for tool, needle, index in (_kind(n, list) for n in _kind(value, list))
            )
        elif name == "tool_calls_match":
            expects[name] = _decode_match(value)
        elif name == "response_json":
            schema, equals = _kind(value, list)
            expects[name] = ResponseJson(
                _optional(schema, str),
                tuple(
                    (_kind(p, str), _kind(v, str))
                    for p, v in (_kind(pair, list) for pair in _kind(equals, list))
                ),
            )
        else:
            raise _Damaged(name)
    if not expects:
        raise _Damaged("an admitted case has a check")
    case_class = case["class"]
    if case_class not in (None, "positive", "negative"):
        raise _Damaged(case_class)
    description = case["description"]
    name_key = case["name_key"]
    if name_key not in ("name", "model_name"):
        raise _Damaged(name_key)
    source = Path(_kind(case["source"], str))
    return Case(
        name=_kind(case["name"], str),
        turns=turns,
        expects=Expectations(**expects),
        description=None if description is None else _kind(description, str),
        case_class=case_class,
        source=source,
        positions=KeyPositions(source, name_key, expects),
    )


def _optional(value: object, expected: type) -> Any:
    return None if value is None else _kind(value, expected)


def _decode_match(value: object) -> ToolCallsMatch:
    order, extras, calls = _kind(value, list)
    if order not in ("in_order", "any") or extras not in ("forbid", "allow"):
        raise _Damaged(order)
    decoded = tuple(
        ExpectedCall(
            _kind(tool, str),
            _optional(arguments, str),
            _optional(schema, str),
            _optional(needle, str),
            _optional(succeeded, bool),
        )
        for tool, arguments, schema, needle, succeeded in (
            _kind(c, list) for c in _kind(calls, list)
        )
    )
    if not decoded:
        raise _Damaged("tool_calls_match expects a call")
    return ToolCallsMatch(decoded, order, extras)


def _decode_response(data: object) -> ModelResponse:
    kind, body, input_tokens, output_tokens = _kind(data, list)
    if kind == "text":
        return TextResponse(_kind(body, str), _count(input_tokens), _count(output_tokens))
    if kind != "calls":
        raise _Damaged(kind)
    calls = tuple(
        ToolCall(_kind(i, str), _kind(name, str), _kind(arguments, str))
        for i, name, arguments in (_kind(call, list) for call in _kind(body, list))
    )
    if not calls:
        raise _Damaged("a tool-call response has calls")
    return ToolCallsResponse(calls, _count(input_tokens), _count(output_tokens))
