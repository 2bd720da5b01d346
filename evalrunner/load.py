"""Stage 1, load: find a suite's fixture files and parse each into JSON-compatible data.

Parsing is strict and identical in spirit across formats (SPEC §3, §4 rule 1): duplicate keys,
non-string keys, dates and times, non-finite numbers, integers outside 64 bits, YAML tags, merge
keys, anchors and aliases, YAML 1.1 and over-deep or oversized input are all refused here, with
positions. Nothing in a fixture is ever constructed, executed, fetched or followed, and nothing
but a regular file is ever opened: a FIFO or a device named like a fixture is refused, never
read (reading one could block forever).

Each format has one parser: ``json`` with hooks for duplicate keys and numbers, ``tomllib``,
and for YAML data built from libyaml's parser events (ruamel.yaml.clib), whose refusals the
strict pure-Python loader words (:mod:`evalrunner.load_yaml`). What a parser lets through
that fixtures do not hold (dates, non-finite numbers, lone surrogates, ...) is found by one
walk over the data. Positions are looked for only when there is a refusal to place.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalrunner.limits import INT_MAX as INT_MAX  # the limits, as load has always named them
from evalrunner.limits import INT_MIN as INT_MIN
from evalrunner.limits import MAX_DEPTH as MAX_DEPTH
from evalrunner.limits import (
    MAX_INT_DIGITS,
    NO_KEY,
    Parsed,
    Refused,
    out_of_range,
    significant_digits,
    too_large,
)
from evalrunner.model import AdmissionError, Format, JSONPath, JSONValue
from evalrunner.sourcemap import LineIndex, SourceMap, json_duplicate_keys, toml_long_integers
from evalrunner.text import printable_path

FIXTURE_SUFFIXES: dict[str, Format] = {
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
}
"""File endings that make a file in a suite directory a fixture, and their formats."""

DEFAULT_MAX_BYTES = 1024 * 1024
"""Files larger than this are refused before parsing (SPEC §4 rule 1)."""


@dataclass(frozen=True, slots=True)
class RawDocument:
    """One parsed fixture: its data, and a source map to report positions in its text."""

    path: Path
    format: Format
    data: JSONValue
    source_map: SourceMap = field(compare=False, repr=False)

    @property
    def display_path(self) -> str:
        """The path as reports show it (printable: see :func:`evalrunner.text.printable_path`)."""
        return printable_path(self.path)

    def error(self, message: str, path: JSONPath = (), *, key: bool = False) -> AdmissionError:
        """An :class:`AdmissionError` about this document at ``path``, positioned if possible."""
        # A TOML key that cannot be found falls back to saying where in the data it is, rather
        # than pointing at the top of the file.
        spot = self.source_map.locate(path, key=key, root_fallback=self.format != "toml")
        line, col = spot if spot is not None else (None, None)
        return AdmissionError(self.display_path, message, line, col, path)


@dataclass(frozen=True, slots=True)
class LoadedSuite:
    """The outcome of loading: documents that parsed, and errors for those that did not."""

    root: Path
    documents: tuple[RawDocument, ...]
    errors: tuple[AdmissionError, ...]


class SuiteNotFound(Exception):
    """The suite directory does not exist, is not a directory, or holds no fixtures."""


SUITE_NOT_FOUND = "suite directory not found"
"""What ``run`` and ``validate`` both say about a suite that does not exist."""

IS_A_FILE = "is a file, not a suite directory"
"""What is said about a file given where a suite directory is expected."""


@dataclass(frozen=True, slots=True)
class Fixture:
    """A fixture file found by discovery.

    ``path`` is where to read it (as given or found below a given directory); ``source`` is
    its path relative to the directory it was found in, ``/``-separated (a file given by
    itself: its name). Reports show ``source``; suite order and shards are computed from it.
    """

    path: Path
    source: str


def discover(suite_dir: Path) -> list[Path]:
    """The fixture files of a suite directory and its subdirectories, in suite order.

    Directories are searched recursively; names starting with a dot (files and directories)
    are skipped, and so are JSON Schemas (``*.schema.json``). Links to directories are
    followed, except a link to a directory that holds it (a loop), and a directory reached
    twice through links is searched once.
    Files are ordered by their path relative to ``suite_dir``, compared one component at a
    time. Raises :class:`SuiteNotFound` when there is no such directory or no fixture in it,
    and ``OSError`` when a directory cannot be listed: a suite never silently shrinks.
    """
    return [fixture.path for fixture, _ in _discover(suite_dir)]


def _discover(suite_dir: Path) -> list[tuple[Fixture, str]]:
    """The fixtures of ``suite_dir`` as :func:`discover` finds them, each with its real path
    (``os.path.realpath``) to tell files reached twice apart."""
    shown = printable_path(suite_dir)
    if suite_dir.exists() and not suite_dir.is_dir():
        raise SuiteNotFound(f"{shown}: {IS_A_FILE}")
    if not suite_dir.is_dir():
        raise SuiteNotFound(f"{shown}: {SUITE_NOT_FOUND}")
    found: list[tuple[tuple[str, ...], Path, str]] = []
    seen: set[tuple[int, int]] = set()
    # Iterative, so that no directory tree is too deep to walk.
    pending: list[tuple[Path, tuple[str, ...]]] = [(suite_dir, ())]
    while pending:
        directory, parts = pending.pop()
        info = os.stat(directory)
        if (info.st_dev, info.st_ino) in seen:  # a link back up the tree, or a second link
            continue
        seen.add((info.st_dev, info.st_ino))
        # Resolved once per directory: a file in it that is not a link is then resolved by
        # a join, where realpath would lstat every component of its path again.
        real_directory = os.path.join(os.path.realpath(directory), "")  # with its separator
        with os.scandir(directory) as entries:
            listed = sorted(entries, key=lambda entry: entry.name)
        subdirectories = []
        for entry in listed:
            if entry.name.startswith("."):
                continue
            try:
                is_directory = entry.is_dir()  # follows links
            except OSError:  # a loop of links: not a directory; a fixture name is refused
                is_directory = False  # when it is read, with the reason
            if is_directory:
                if entry.is_symlink() and _is_ancestor(entry.path, directory):
                    continue  # a loop: the directory holds the link
                subdirectories.append((directory / entry.name, parts + (entry.name,)))
            elif _is_fixture_name(entry.name):
                real = (
                    os.path.realpath(entry.path)
                    if entry.is_symlink()
                    else real_directory + entry.name
                )
                found.append((parts + (entry.name,), directory / entry.name, real))
        # Depth first in name order, so that of two links to one directory the first in
        # suite order is the one searched.
        pending.extend(reversed(subdirectories))
    if not found:
        suffixes = ", ".join(FIXTURE_SUFFIXES)
        raise SuiteNotFound(
            f"{shown}: no fixtures found (files ending in {suffixes}, in it or its subdirectories)"
        )
    found.sort(key=lambda item: item[0])
    return [(Fixture(path, "/".join(parts)), real) for parts, path, real in found]


def _is_ancestor(link: str, directory: Path) -> bool:
    """Whether ``link`` leads to ``directory`` or a directory above it."""
    target = os.path.realpath(link)
    here = os.path.realpath(directory)
    return here == target or here.startswith(target.rstrip(os.sep) + os.sep)


def find_fixtures(paths: Iterable[Path]) -> list[Fixture]:
    """The fixtures of fixture files and suite directories, in the order given, each once.

    Directories are searched as by :func:`discover`. A file reached twice (given twice, or
    given and also inside a given directory) is kept the first time. A path that does not
    exist and has no fixture ending is taken for a suite directory, so ``validate`` and
    ``run`` say the same thing about a missing suite.
    """
    fixtures: list[Fixture] = []
    seen: set[str] = set()
    for given in paths:
        if given.is_dir():
            expanded = _discover(given)
        elif not os.path.lexists(given) and given.suffix.lower() not in FIXTURE_SUFFIXES:
            raise SuiteNotFound(f"{printable_path(given)}: {SUITE_NOT_FOUND}")
        else:
            expanded = [(Fixture(given, given.name), os.path.realpath(given))]
        for fixture, real in expanded:
            if real not in seen:
                seen.add(real)
                fixtures.append(fixture)
    return fixtures


def _is_fixture_name(name: str) -> bool:
    # Path(name).suffix.lower() in FIXTURE_SUFFIXES, without building a Path for every file of
    # a suite: a name not starting with a dot whose suffix is one of them ends with it.
    if name.startswith("."):
        return False
    lowered = name.lower()
    # `schema export` output under a suite (evals/schemas) is no fixture
    return lowered.endswith(_FIXTURE_ENDINGS) and not lowered.endswith(SCHEMA_SUFFIX)


_FIXTURE_ENDINGS = tuple(FIXTURE_SUFFIXES)

SCHEMA_SUFFIX = ".schema.json"
"""JSON Schemas (``evalrunner schema export``) end so; discovery passes them over, so an
export into a directory below a suite (``evals/schemas``, where ``evalrunner new`` points)
does not become fixtures."""


def relative_to_cwd(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it, so that messages show
    paths as a user would type them; otherwise unchanged."""
    try:
        return path.relative_to(Path.cwd()) if path.is_absolute() else path
    except ValueError:
        return path


def load_suite(suite_dir: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> LoadedSuite:
    """Discover and parse every fixture of ``suite_dir`` (see :func:`discover` for errors)."""
    # A missing or empty suite is refused before anything is parsed; the suite is searched
    # once, and each file kept once, as find_fixtures would.
    seen: set[str] = set()
    fixtures = []
    for fixture, real in _discover(suite_dir):
        if real not in seen:
            seen.add(real)
            fixtures.append(fixture)
    return _collect((load_document(f.path, max_bytes=max_bytes) for f in fixtures), suite_dir)


def iter_documents(
    paths: Iterable[Path], *, max_bytes: int = DEFAULT_MAX_BYTES
) -> Iterator[RawDocument | list[AdmissionError]]:
    """Parse fixture files and suite directories one file at a time, lazily.

    Directories are expanded as in :func:`find_fixtures` before any file is parsed. Consumers
    that keep only what they need (admission keeps the :class:`Case`) run in memory bounded by
    the largest fixture, not by the size of the suite.
    """
    for fixture in find_fixtures(paths):
        yield load_document(fixture.path, max_bytes=max_bytes)


def load_paths(
    paths: list[Path], *, max_bytes: int = DEFAULT_MAX_BYTES, root: Path | None = None
) -> LoadedSuite:
    """Parse fixture files and suite directories (expanded as in :func:`find_fixtures`)."""
    return _collect(iter_documents(paths, max_bytes=max_bytes), root or Path("."))


def _collect(outcomes: Iterable[RawDocument | list[AdmissionError]], root: Path) -> LoadedSuite:
    documents: list[RawDocument] = []
    errors: list[AdmissionError] = []
    for outcome in outcomes:
        if isinstance(outcome, RawDocument):
            documents.append(outcome)
        else:
            errors.extend(outcome)
    return LoadedSuite(root, tuple(documents), tuple(errors))


def load_document(
    path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> RawDocument | list[AdmissionError]:
    """Read and parse one fixture file."""
    read = read_fixture(path, max_bytes=max_bytes)
    if isinstance(read, list):
        return read
    raw, fmt = read
    return parse_document(raw, fmt, path, max_bytes=max_bytes)


def read_fixture(
    path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> tuple[bytes, Format] | list[AdmissionError]:
    """The bytes of one fixture file (up to one past ``max_bytes``) and its format, or why
    they cannot be read."""
    fmt = FIXTURE_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        accepted = ", ".join(FIXTURE_SUFFIXES)
        message = f"not a fixture file: expected one of {accepted}"
        return [AdmissionError(printable_path(path), message)]
    try:
        # One byte past the cap is enough to know it is over: a huge file is never read.
        return read_regular_file(path, max_bytes + 1), fmt
    except NotARegularFile as exc:
        message = f"{exc}; a fixture must be a regular file"
        return [AdmissionError(printable_path(path), message)]
    except OSError as exc:
        message = f"cannot read file: {exc.strerror or exc}"
        return [AdmissionError(printable_path(path), message)]


class NotARegularFile(OSError):
    """The path names a FIFO, a socket, a device or a directory: nothing a fixture or config
    file can be. The message names what it is."""


_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words: ``a FIFO (named pipe)``, ``a regular file``, ..."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")


def read_regular_file(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file at ``path`` (symlinks followed).

    Anything else raises :class:`NotARegularFile` without being read: reading a FIFO blocks
    until some process writes to it, and a device may never end. It is checked before the
    open, so a special file is not even opened, and again on the open descriptor, which is
    opened non-blocking so that a FIFO swapped in between the two cannot block either.
    """
    name = os.fspath(path)  # once, not once per call below
    mode = os.stat(name).st_mode
    if not stat.S_ISREG(mode):
        raise NotARegularFile(f"is {file_kind(mode)}, not a regular file")
    fd = os.open(name, _READ_FLAGS)
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise NotARegularFile(f"is {file_kind(opened.st_mode)}, not a regular file")
        chunks: list[bytes] = []
        remaining = limit
        # The first read asks for one byte more than the file holds, which for a file left as
        # it is reads it whole and no more: os.read allocates what it is asked for, and a
        # megabyte per fixture costs more than reading it. Later reads (a file that grew) go
        # on until the end or the limit, as ever.
        size = min(remaining, opened.st_size + 1)
        while remaining > 0:
            chunk = os.read(fd, size)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
            size = min(remaining, 1 << 16)
        return b"".join(chunks)
    finally:
        os.close(fd)


_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
"""Read-only, never blocking on a FIFO swapped in, never becoming the controlling terminal."""


def parse_document(
    raw: bytes,
    fmt: Format,
    path: Path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    within: JSONPath = (),
    noun: str = "fixture",
) -> RawDocument | list[AdmissionError]:
    """Parse the bytes of one fixture of format ``fmt``; ``path`` is used in messages.

    ``within`` limits the checks for values JSON cannot hold (dates, non-finite numbers, ...)
    to one part of the document: a ``pyproject.toml`` is read for its ``[tool.evalrunner]``
    table, and a date elsewhere in it is none of our business. ``noun`` names what the file
    is in messages about its encoding.
    """
    if len(raw) > max_bytes:
        return [
            AdmissionError(
                printable_path(path),
                f"file is over the {max_bytes}-byte cap for fixtures; split it into smaller cases",
                1,
                1,
            )
        ]
    for bom, encoding in _OTHER_BOMS:
        if raw.startswith(bom):
            return [
                AdmissionError(
                    printable_path(path),
                    f"file is {encoding} (it starts with a {encoding} byte-order mark); "
                    f"{noun}s must be UTF-8: save it as UTF-8",
                    1,
                    1,
                )
            ]
    marked = raw.startswith(codecs.BOM_UTF8)
    try:
        # Without a byte-order mark the two codecs agree, errors included, and plain "utf-8"
        # is decoded in C where "utf-8-sig" goes through a Python-level codec.
        text = raw.decode("utf-8-sig" if marked else "utf-8")
    except UnicodeDecodeError as exc:
        # "utf-8-sig" counts from after the mark; the message counts bytes of the file.
        offset = exc.start + (len(codecs.BOM_UTF8) if marked else 0)
        line, col = _byte_position(raw, offset)
        return [
            AdmissionError(
                printable_path(path),
                f"not valid UTF-8 at byte {offset}: {noun}s must be UTF-8 text",
                line,
                col,
            )
        ]
    source_map = SourceMap(text, fmt)
    too_deep = _over_deep_offset(text, fmt)
    if too_deep is not None:
        line, col = LineIndex(text).position(too_deep)
        return [
            AdmissionError(
                printable_path(path),
                f"nesting deeper than {MAX_DEPTH} levels; flatten the data",
                line,
                col,
            )
        ]
    try:
        parsed = _PARSERS[fmt](text, printable_path(path))
    except Refused as refused:
        return refused.errors
    document = RawDocument(path, fmt, parsed.data, source_map)
    if parsed.checked:  # nothing in it for the walk to find
        return document
    problems = [
        _foreign_error(document, foreign) for foreign in _foreign_values(parsed.data, within=within)
    ]
    return sorted(problems, key=AdmissionError.sort_key) or document


class KeyPositions(Mapping[str, tuple[int, int]]):
    """Where an admitted case's name and each of its expectation kinds are written in its
    fixture: ``{"name": (line, col), "expects.<kind>": ..., "turns[i].expects.<kind>": ...}``,
    so that reports can point at the check that failed.

    Holds no text: the fixture file is read again and indexed on first use, which only the
    reports of failed cases make. A file that can no longer be read gives no positions; one
    edited since it was admitted gives those of its new text. Pickled before first use (to a
    ``--jobs`` worker), it is the path and the keys; after, the positions found.
    """

    __slots__ = ("_found", "kinds", "name_key", "source", "turn_kinds")

    def __init__(
        self,
        source: Path,
        name_key: str,
        kinds: Iterable[str],
        turn_kinds: tuple[tuple[int, tuple[str, ...]], ...] = (),
    ) -> None:
        self.source = source
        self.name_key = name_key
        """The key the case's name is written under: ``name`` (or ``model_name``)."""
        self.kinds = tuple(kinds)
        self.turn_kinds = turn_kinds
        """The kinds of each turn's ``expects`` (turn index, kinds), found as
        ``"turns[i].expects.<kind>"``."""
        self._found: dict[str, tuple[int, int]] | None = None

    def _positions(self) -> dict[str, tuple[int, int]]:
        if self._found is None:
            paths: dict[JSONPath, str] = {(self.name_key,): "name"}
            paths.update({("expects", kind): f"expects.{kind}" for kind in self.kinds})
            for index, kinds in self.turn_kinds:
                paths.update(
                    {("turns", index, "expects", k): f"turns[{index}].expects.{k}" for k in kinds}
                )
            source_map = _fixture_source_map(self.source)
            found = {} if source_map is None else source_map.key_positions(paths)
            self._found = {paths[path]: position for path, position in found.items()}
        return self._found

    def __getitem__(self, key: str) -> tuple[int, int]:
        return self._positions()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._positions())

    def __len__(self) -> int:
        return len(self._positions())

    def __repr__(self) -> str:
        return repr(self._positions())

    def __reduce__(self) -> tuple[Any, ...]:
        if self._found is not None:
            return dict, (self._found,)
        return KeyPositions, (self.source, self.name_key, self.kinds, self.turn_kinds)


def _fixture_source_map(path: Path) -> SourceMap | None:
    """A source map of the fixture file at ``path`` as it is now; ``None`` when it cannot be
    read as a fixture's text."""
    fmt = FIXTURE_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        return None
    try:
        raw = read_regular_file(path, _ANY_SIZE)
        return SourceMap(raw.decode("utf-8-sig"), fmt)
    except (OSError, UnicodeDecodeError):
        return None


_ANY_SIZE = 1 << 40
"""A limit no fixture file reaches: a file is read to its end (it was admitted under the cap)."""


# Longest first: the UTF-32 LE mark starts with the UTF-16 LE one.
_OTHER_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def _byte_position(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column) of byte ``offset`` in undecodable ``raw``, columns in characters."""
    start = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    before = raw[start:offset]
    line_start = before.rfind(b"\n") + 1
    column = len(before[line_start:].decode("utf-8", errors="replace")) + 1
    return before.count(b"\n") + 1, column


def _foreign_error(document: RawDocument, foreign: _Foreign) -> AdmissionError:
    if foreign.key is NO_KEY:
        return document.error(foreign.message, foreign.path)
    if isinstance(foreign.key, str):
        return document.error(foreign.message, foreign.path + (foreign.key,), key=True)
    spot = document.source_map.locate_mapping_key(foreign.path, foreign.key)
    if spot is None:
        return document.error(foreign.message, foreign.path)
    return AdmissionError(document.display_path, foreign.message, *spot, foreign.path)


# --- numbers -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _BadNumber:
    """Stands in for a number literal no 64-bit value can hold; refused with its position."""

    message: str


def _parse_int(literal: str) -> int | _BadNumber:
    """JSON's integer hook: the value, or a marker for one no 64-bit integer holds."""
    if len(literal) < 19:  # the common case: certainly within 64 bits
        return int(literal)
    if significant_digits(literal) > MAX_INT_DIGITS:
        return _BadNumber(out_of_range(literal))
    value = int(literal)
    return value if INT_MIN <= value <= INT_MAX else _BadNumber(out_of_range(literal))


_SPECIAL_FLOATS = {"inf", "nan"}


def _parse_float(literal: str) -> float | _BadNumber:
    """JSON's and TOML's float hook: an overflowing literal such as ``1e400`` is a marker,
    not infinity. (TOML's own ``inf`` and ``nan`` are refused as non-finite later.)"""
    value = float(literal)
    if math.isfinite(value) or literal.lstrip("+-") in _SPECIAL_FLOATS:
        return value
    return _BadNumber(too_large(literal))


# --- JSON --------------------------------------------------------------------------------------


class _DuplicateKey(ValueError):
    """A JSON object repeats a key; positions are found afterwards by the source map."""


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # a key repeated: the dict is shorter than the pairs
        raise _DuplicateKey
    return obj


class _Unholdable(Exception):
    """A number or constant no fixture holds (NaN, ``1e400``, beyond 64 bits)."""


def _holdable_int(literal: str) -> int:
    value = _parse_int(literal)
    if isinstance(value, _BadNumber):
        raise _Unholdable
    return value


def _holdable_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _Unholdable
    return value


def _unholdable_constant(literal: str) -> None:
    raise _Unholdable  # NaN, Infinity, -Infinity


# Built once: json.loads builds a decoder per call when given hooks. The first stops at a
# number no fixture holds; the second keeps each (NaN as a float, the others as _BadNumber
# markers) for _foreign_values to refuse at its position, like every other format's.
_JSON = json.JSONDecoder(
    object_pairs_hook=_reject_duplicates,
    parse_int=_holdable_int,
    parse_float=_holdable_float,
    parse_constant=_unholdable_constant,
)
_JSON_MARKED = json.JSONDecoder(
    object_pairs_hook=_reject_duplicates, parse_int=_parse_int, parse_float=_parse_float
)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _parse_json(text: str, shown: str) -> Parsed:
    """JSON's data; checked unless a value in it may be one JSON cannot hold."""
    try:
        try:
            data: JSONValue = _JSON.decode(text)
        except _Unholdable:  # read again to place every such value
            return Parsed(_JSON_MARKED.decode(text))
    except _DuplicateKey:
        raise Refused(
            [
                AdmissionError(
                    shown,
                    f"duplicate key {json.dumps(path[-1], ensure_ascii=False)}; "
                    "each key may appear once per object",
                    line,
                    col,
                    path,
                )
                for path, (line, col) in json_duplicate_keys(text)
            ]
        ) from None
    except json.JSONDecodeError as exc:
        raise Refused(
            [AdmissionError(shown, _json_message(exc, text), exc.lineno, exc.colno)]
        ) from None
    # Every number is finite and within 64 bits, and nesting was bounded before parsing: only
    # a \u escape into the surrogate range can leave a string that is not text.
    return Parsed(data, checked="\\u" not in text or not _SURROGATE_ESCAPE.search(text))


def _json_message(exc: json.JSONDecodeError, text: str) -> str:
    """What is wrong with JSON text, and what would be right, for the common slips."""
    if not text.strip():
        return (
            'the file is empty; a fixture is one JSON object: {"name": ..., "turns": [...], '
            '"expects": {...}}'
        )
    before = text[: exc.pos].rstrip()
    if before.endswith(",") and text[exc.pos : exc.pos + 1] in ("}", "]"):
        closing = text[exc.pos]
        return f"invalid JSON: a comma before '{closing}' is not allowed in JSON; remove it"
    if exc.msg.startswith("Expecting property name") and text[exc.pos : exc.pos + 1] == "'":
        return 'invalid JSON: keys and strings take double quotes ("name"), not single ones'
    if exc.msg == "Extra data":
        return "invalid JSON: more text after the fixture's object; a file holds one JSON object"
    return f"invalid JSON: {exc.msg}"


# --- YAML (in evalrunner.load_yaml, imported on first use) ------------------------------------


def _parse_yaml(text: str, shown: str) -> Parsed:
    from evalrunner.load_yaml import parse_yaml

    return parse_yaml(text, shown)


# --- TOML --------------------------------------------------------------------------------------

_TOML_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_TOML_AT_END = "(at end of document)"


def _parse_toml(text: str, shown: str) -> Parsed:
    """TOML's data, not yet checked for dates, non-finite numbers and depth."""
    import tomllib  # here: a run whose fixtures all come from the cache parses no TOML

    try:
        data: JSONValue = tomllib.loads(text, parse_float=_parse_float)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        line = col = None
        match = _TOML_AT.search(message)
        if match:
            line, col = int(match.group(1)), int(match.group(2))
            message = message[: match.start()]
        elif message.endswith(_TOML_AT_END):
            line, col = LineIndex(text).position(len(text))
            message = message[: -len(_TOML_AT_END)].rstrip() + " at the end of the file"
        message += _toml_hint(message, text, line)
        raise Refused([AdmissionError(shown, f"invalid TOML: {message}", line, col)]) from None
    except RecursionError:
        raise Refused([AdmissionError(shown, f"nesting deeper than {MAX_DEPTH} levels")]) from None
    except ValueError:
        # tomllib converts integers with int(), which refuses more than 4,300 digits; the
        # text is valid TOML up to there, so the scanner finds every such literal.
        raise Refused(_long_toml_integers(text, shown)) from None
    return Parsed(data)


def _toml_hint(message: str, text: str, line: int | None) -> str:
    """What would be right, after tomllib's words for what is wrong (which say only that)."""
    if message.startswith("Unclosed inline table"):
        return _INLINE_TABLE_HINT
    if message.startswith("Invalid initial character for a key part") and line is not None:
        shown = text.split("\n")[line - 1] if line <= text.count("\n") + 1 else ""
        shown = _outside_strings(shown)
        if shown.count("{") > shown.count("}"):
            return _INLINE_TABLE_HINT
        if _trailing_comma(shown):
            return "; an inline table takes no comma before its closing '}' (TOML 1.0)"
    elif message.startswith("Cannot overwrite a value"):
        return (
            "; each key may be set once per table, and a key set to a value cannot also "
            "hold keys of its own"
        )
    elif message.startswith("Cannot declare"):
        return (
            "; a table is declared once, by one [table] header or by dotted keys such as "
            "a.b = 1 (a list of tables is [[name]])"
        )
    elif message.startswith("Invalid value"):
        return (
            '; a value is a "string", a number, true or false, a date, an array [ ... ] or '
            "an inline table { ... }"
        )
    elif message.startswith("Illegal character '\\n'") or message.startswith(
        ('Expected "\'"', "Unterminated string")
    ):
        return (
            '; a "string" or \'string\' must close on its line ("""...""" or '
            "'''...''' hold several lines, and must close too)"
        )
    return ""


_INLINE_TABLE_HINT = (
    "; an inline table { ... } must close on the line it opens (TOML 1.0): put its keys on "
    "one line, or give it a [table] header"
)


def _long_toml_integers(text: str, shown: str) -> list[AdmissionError]:
    found = toml_long_integers(text, MAX_INT_DIGITS)
    if not found:
        return [AdmissionError(shown, "invalid TOML: a number cannot be read", 1, 1)]
    return [
        AdmissionError(shown, out_of_range(literal), line, col, path)
        for path, (line, col), literal in found
    ]


_PARSERS = {"json": _parse_json, "yaml": _parse_yaml, "toml": _parse_toml}


_TOML_LINE_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?$)|\'[^\']*+(?:\'|$)|#.*')
"""The one-line strings and the comment of a line of TOML: braces in them are text. A
string left open runs to the end of the line, so that every quote the scan meets starts a
match and the scan is one pass (tried again from each later quote, an unclosed string full
of escaped quotes took time quadratic in its length)."""


def _outside_strings(line: str) -> str:
    """One line of TOML without its one-line strings and its comment: its structure."""
    if "'" in line or "\\" in line or "#" in line or line.count('"') % 2:
        return _TOML_LINE_STRINGS.sub("", line)
    # Only basic strings, none with an escape: every quote opens or closes one.
    return "".join(line.split('"')[::2]) if '"' in line else line


def _trailing_comma(structure: str) -> bool:
    """Whether a line's structure closes an inline table right after a comma."""
    return ",}" in structure.replace(" ", "").replace("\t", "")


# --- shared checks -----------------------------------------------------------------------------


def _over_deep_offset(text: str, fmt: Format) -> int | None:
    """Offset where bracket nesting first exceeds :data:`MAX_DEPTH`, before any parser recurses.

    Counts ``[``/``{`` outside strings; YAML block nesting is capped by the composer instead.
    In TOML it also counts the dots of one dotted key (``a.b.c = 1``, ``[a.b.c]``), which nest
    as deeply as brackets and which ``tomllib`` handles in quadratic time: a one-megabyte key
    would otherwise hang the loader. Strings are skipped roughly (no escapes of the quote in
    TOML literal strings exist, and a JSON or YAML ``\\"`` is honoured), which is enough to
    bound the parsers' recursion and work.
    """
    dotted = fmt == "toml"
    if text.count("[") + text.count("{") + (text.count(".") if dotted else 0) <= MAX_DEPTH:
        return None
    if _certainly_shallow(text, fmt):
        return None
    depth = 0
    dots = 0
    quote = ""
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'" and (fmt != "json" or ch == '"'):
            quote = ch
        elif ch == "#" and fmt != "json":
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return i
        elif ch in "]}":
            depth -= 1
        elif dotted and ch == ".":
            dots += 1
            if dots > MAX_DEPTH:
                return i
        elif dotted and ch in "\n=,":
            dots = 0
        i += 1
    return None


# Strings and comments exactly as _over_deep_offset skips them: a double-quoted string with
# backslash escapes; in YAML and TOML also a single-quoted one and a comment to the line end.
_JSON_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_STRINGS_AND_COMMENTS = re.compile(r""""(?:[^"\\]|\\.)*"|'[^']*'|#[^\n]*""", re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")
_AS_PARENTHESES = str.maketrans("[{]}", "(())")
_MANY_DOTS = re.compile(r"\.(?:[^.\n=,]*\.){" + str(MAX_DEPTH) + "}")


def _certainly_shallow(text: str, fmt: Format) -> bool:
    """Whether :func:`_over_deep_offset` would find nothing, proven with C-speed string work
    instead of its loop over every character; ``False`` means only "not proven".

    Strings and comments are cut out as the loop skips them; what brackets remain must close
    one level per pass of removing every empty pair, within :data:`MAX_DEPTH` passes. (An
    unclosed string leaves extra text in, which can only make the proof fail.)
    """
    stripped = (_JSON_STRINGS if fmt == "json" else _STRINGS_AND_COMMENTS).sub("", text)
    if fmt == "toml" and _MANY_DOTS.search(stripped):
        return False
    brackets = _NOT_A_BRACKET.sub("", stripped).translate(_AS_PARENTHESES)
    for _ in range(MAX_DEPTH):
        if not brackets:
            return True
        shorter = brackets.replace("()", "")
        if len(shorter) == len(brackets):
            return False  # unbalanced
        brackets = shorter
    return not brackets


@dataclass(frozen=True, slots=True)
class _Foreign:
    """Something in parsed data that is not plain JSON: at ``path``, or a mapping ``key`` there."""

    path: JSONPath
    message: str
    key: object = NO_KEY


def _foreign_values(data: object, *, within: JSONPath = ()) -> list[_Foreign]:
    """Everything in parsed data that is not plain JSON, with where it is.

    Catches YAML's and TOML's richer types (dates, times, binary, sets, non-string keys),
    non-finite floats, and nesting deeper than :data:`MAX_DEPTH` that bracket counting cannot
    see (TOML dotted keys and table headers), so every format hands admission the same kind of
    value. Iterative: the data may be deeper than Python's recursion limit. Only the value at
    ``within`` is checked, when there is one.
    """
    problems: list[_Foreign] = []
    for part in within:  # keys of tables: within names a table, never an array item
        if not isinstance(data, dict) or part not in data:
            return problems
        data = data[part]
    stack: list[tuple[JSONPath, object]] = [(within, data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict | list) and len(path) >= MAX_DEPTH:
            problems.append(
                _Foreign(path, f"nesting deeper than {MAX_DEPTH} levels; flatten the data")
            )
            continue
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    message = f"mapping key {_yaml_scalar(key)} is not a string; quote it"
                    problems.append(_Foreign(path, message, key))
                    continue
                if _LONE_SURROGATE.search(key):
                    problems.append(_Foreign(path, _SURROGATE_MESSAGE, key))
                    continue
                stack.append((path + (key,), item))
        elif isinstance(value, list):
            stack.extend((path + (i,), item) for i, item in enumerate(value))
        elif isinstance(value, float):
            if not math.isfinite(value):
                shown = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
                problems.append(_Foreign(path, f"{shown} is not allowed; numbers must be finite"))
        elif isinstance(value, str):
            if _LONE_SURROGATE.search(value):
                problems.append(_Foreign(path, _SURROGATE_MESSAGE))
        elif isinstance(value, _BadNumber):
            problems.append(_Foreign(path, value.message))
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if not INT_MIN <= value <= INT_MAX:
                # Never str() it: a TOML hex literal can be a number Python cannot print.
                problems.append(_Foreign(path, _out_of_range_value(value)))
        else:
            problems.append(_Foreign(path, _foreign_message(value)))
    return problems


def _out_of_range_value(value: int) -> str:
    if value.bit_length() <= 96:
        return out_of_range(str(value))
    digits = int(value.bit_length() * math.log10(2)) + 1
    return (
        f"an integer of about {digits} digits is out of range: integers must be between "
        f"{INT_MIN} and {INT_MAX} (64 bits); quote it to make it a string"
    )


# An escape such as \ud800 decodes to a lone UTF-16 surrogate: not a Unicode character, so it
# could not be shown in a report or written as UTF-8. TOML refuses it while parsing.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_MESSAGE = (
    "string holds a lone surrogate escape (e.g. \\ud800), which is not text; "
    "escape whole characters, such as \\ud83d\\ude80 for one emoji"
)


def _yaml_scalar(key: object) -> str:
    """A non-string key as a fixture author wrote it (``true``, ``null``, ``2``)."""
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return repr(key)


def _foreign_message(value: object) -> str:
    kind = type(value).__name__
    if kind in {"date", "datetime", "time"}:
        return f"{kind} values are not allowed; quote the value to make it a string"
    if isinstance(value, bytes):
        return "binary values are not allowed; fixtures hold text"
    return f"{kind} values are not allowed; fixtures hold plain JSON-compatible data"
