"""Stage 1, load: find a suite's fixture files and parse each into JSON-compatible data.

Parsing is strict and identical in spirit across formats (SPEC §3, §4 rule 1): duplicate keys,
non-string keys, dates and times, non-finite numbers, YAML tags, anchors and aliases, YAML 1.1
and over-deep or oversized input are all refused here, with positions. Nothing in a fixture is
ever constructed, executed, fetched or followed.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer, ComposerError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError

from evalrunner.model import AdmissionError, Format, JSONPath, JSONValue
from evalrunner.sourcemap import LineIndex, SourceMap, json_duplicate_keys

FIXTURE_SUFFIXES: dict[str, Format] = {
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
}
"""File endings that make a file in a suite directory a fixture, and their formats."""

DEFAULT_MAX_BYTES = 1024 * 1024
"""Files larger than this are refused before parsing (SPEC §4 rule 1)."""

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays a fixture may have; real fixtures need about 10."""


@dataclass(frozen=True)
class RawDocument:
    """One parsed fixture: its data, and a source map to report positions in its text."""

    path: Path
    format: Format
    data: JSONValue
    source_map: SourceMap = field(compare=False, repr=False)

    @property
    def display_path(self) -> str:
        """The path as reports show it."""
        return str(self.path)

    def error(self, message: str, path: JSONPath = (), *, key: bool = False) -> AdmissionError:
        """An :class:`AdmissionError` about this document at ``path``, positioned if possible."""
        # A TOML key that cannot be found falls back to saying where in the data it is, rather
        # than pointing at the top of the file.
        spot = self.source_map.locate(path, key=key, root_fallback=self.format != "toml")
        line, col = spot if spot is not None else (None, None)
        return AdmissionError(self.display_path, message, line, col, path)


@dataclass(frozen=True)
class LoadedSuite:
    """The outcome of loading: documents that parsed, and errors for those that did not."""

    root: Path
    documents: tuple[RawDocument, ...]
    errors: tuple[AdmissionError, ...]


class SuiteNotFound(Exception):
    """The suite directory does not exist, is not a directory, or holds no fixtures."""


def discover(suite_dir: Path) -> list[Path]:
    """The fixture files of a suite: directly inside it, sorted by name, dotfiles skipped.

    Raises :class:`SuiteNotFound` when there is no such directory or no fixture in it, and
    ``OSError`` when the directory cannot be listed: a suite never silently shrinks.
    """
    if suite_dir.exists() and not suite_dir.is_dir():
        raise SuiteNotFound(f"{suite_dir}: is a file, not a suite directory")
    if not suite_dir.is_dir():
        raise SuiteNotFound(f"{suite_dir}: suite directory not found")
    found = sorted(
        (entry for entry in suite_dir.iterdir() if _is_fixture_name(entry.name)),
        key=lambda p: p.name,
    )
    if not found:
        suffixes = ", ".join(FIXTURE_SUFFIXES)
        raise SuiteNotFound(f"{suite_dir}: no fixtures found (files ending in {suffixes})")
    return found


def _is_fixture_name(name: str) -> bool:
    return not name.startswith(".") and Path(name).suffix.lower() in FIXTURE_SUFFIXES


def relative_to_cwd(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it, so that messages show
    paths as a user would type them; otherwise unchanged."""
    try:
        return path.relative_to(Path.cwd()) if path.is_absolute() else path
    except ValueError:
        return path


def load_suite(suite_dir: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> LoadedSuite:
    """Discover and parse every fixture of ``suite_dir`` (see :func:`discover` for errors)."""
    discover(suite_dir)  # a missing or empty suite is refused before anything is parsed
    return load_paths([suite_dir], max_bytes=max_bytes, root=suite_dir)


def iter_documents(
    paths: Iterable[Path], *, max_bytes: int = DEFAULT_MAX_BYTES
) -> Iterator[RawDocument | list[AdmissionError]]:
    """Parse fixture files and suite directories one file at a time, lazily.

    Directories are expanded as in :func:`discover` before any file is parsed. Consumers that
    keep only what they need (admission keeps the :class:`Case`) run in memory bounded by the
    largest fixture, not by the size of the suite.
    """
    files = [file for given in paths for file in (discover(given) if given.is_dir() else [given])]
    for file in files:
        yield load_document(file, max_bytes=max_bytes)


def load_paths(
    paths: list[Path], *, max_bytes: int = DEFAULT_MAX_BYTES, root: Path | None = None
) -> LoadedSuite:
    """Parse fixture files and suite directories (expanded as in :func:`discover`)."""
    documents: list[RawDocument] = []
    errors: list[AdmissionError] = []
    for outcome in iter_documents(paths, max_bytes=max_bytes):
        if isinstance(outcome, RawDocument):
            documents.append(outcome)
        else:
            errors.extend(outcome)
    return LoadedSuite(root or Path("."), tuple(documents), tuple(errors))


def load_document(
    path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> RawDocument | list[AdmissionError]:
    """Read and parse one fixture file."""
    shown = str(path)
    fmt = FIXTURE_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        accepted = ", ".join(FIXTURE_SUFFIXES)
        return [AdmissionError(shown, f"not a fixture file: expected one of {accepted}")]
    try:
        with path.open("rb") as handle:
            # One byte past the cap is enough to know it is over: a huge file is never read.
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        return [AdmissionError(shown, f"cannot read file: {exc.strerror or exc}")]
    return parse_document(raw, fmt, path, max_bytes=max_bytes)


def parse_document(
    raw: bytes, fmt: Format, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> RawDocument | list[AdmissionError]:
    """Parse the bytes of one fixture of format ``fmt``; ``path`` is used in messages."""
    shown = str(path)
    if len(raw) > max_bytes:
        return [
            AdmissionError(
                shown,
                f"file is over the {max_bytes}-byte cap for fixtures; "
                "split it into smaller cases",
                1,
                1,
            )
        ]
    for bom, encoding in _OTHER_BOMS:
        if raw.startswith(bom):
            return [
                AdmissionError(
                    shown,
                    f"file is {encoding} (it starts with a {encoding} byte-order mark); "
                    "fixtures must be UTF-8: save it as UTF-8",
                    1,
                    1,
                )
            ]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _byte_position(raw, exc.start)
        return [
            AdmissionError(
                shown,
                f"not valid UTF-8 at byte {exc.start}: fixtures must be UTF-8 text",
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
                shown, f"nesting deeper than {MAX_DEPTH} levels; flatten the data", line, col
            )
        ]
    try:
        parsed = _PARSERS[fmt](text, shown)
    except _Refused as refused:
        return refused.errors
    document = RawDocument(path, fmt, parsed, source_map)
    problems = [_foreign_error(document, foreign) for foreign in _foreign_values(parsed)]
    return sorted(problems, key=AdmissionError.sort_key) or document


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
    if foreign.key is _NO_KEY:
        return document.error(foreign.message, foreign.path)
    if isinstance(foreign.key, str):
        return document.error(foreign.message, foreign.path + (foreign.key,), key=True)
    spot = document.source_map.locate_mapping_key(foreign.path, foreign.key)
    if spot is None:
        return document.error(foreign.message, foreign.path)
    return AdmissionError(document.display_path, foreign.message, *spot, foreign.path)


# --- JSON --------------------------------------------------------------------------------------


class _Refused(Exception):
    """A parser's way out: the document is refused for these reasons."""

    def __init__(self, errors: list[AdmissionError]) -> None:
        super().__init__(errors)
        self.errors = errors


class _DuplicateKey(ValueError):
    """A JSON object repeats a key; positions are found afterwards by the source map."""


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _parse_json(text: str, shown: str) -> JSONValue:
    try:
        # NaN and Infinity parse to floats here and are refused, with their positions, by
        # _foreign_values like every other format's non-finite numbers.
        data: JSONValue = json.loads(text, object_pairs_hook=_reject_duplicates)
    except _DuplicateKey:
        raise _Refused(
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
        raise _Refused(
            [AdmissionError(shown, f"invalid JSON: {exc.msg}", exc.lineno, exc.colno)]
        ) from None
    return data


# --- YAML --------------------------------------------------------------------------------------


class _StrictComposer(Composer):
    """Refuses what a fixture never needs and an attacker might: aliases, anchors, YAML 1.1."""

    def compose_document(self) -> Any:
        event = self.parser.peek_event()
        version = getattr(event, "version", None)
        if version is not None and tuple(version) != (1, 2):
            raise ComposerError(
                None,
                None,
                f"%YAML {'.'.join(map(str, version))} directive: fixtures are YAML 1.2 "
                "(remove the directive)",
                event.start_mark,
            )
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if getattr(event, "anchor", None) is not None:
            kind = "aliases" if type(event).__name__ == "AliasEvent" else "anchors"
            raise ComposerError(
                None,
                None,
                f"YAML {kind} are not allowed in fixtures; write the value out in full",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode):
                kind = "sequence" if isinstance(key_node, SequenceNode) else "mapping"
                raise ComposerError(
                    None,
                    None,
                    f"a {kind} is used as a mapping key; keys must be strings",
                    key_node.start_mark,
                )
        return node


def _yaml_loader() -> YAML:
    loader = YAML(typ="safe", pure=True)
    loader.Composer = _StrictComposer
    loader.max_depth = MAX_DEPTH + 1
    return loader


def _parse_yaml(text: str, shown: str) -> JSONValue:
    try:
        data: JSONValue = _yaml_loader().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = _yaml_message(exc)
        if mark is None:
            raise _Refused([AdmissionError(shown, message)]) from None
        raise _Refused([AdmissionError(shown, message, mark.line + 1, mark.column + 1)]) from None
    except ReaderError as exc:
        line, col = LineIndex(text).position(max(exc.position, 0))
        character = f"U+{exc.character:04X}" if isinstance(exc.character, int) else "a character"
        message = (
            f"{character} is not allowed in YAML text; write control characters as escapes "
            'inside a double-quoted string (e.g. "\\u0000")'
        )
        raise _Refused([AdmissionError(shown, message, line, col)]) from None
    except (YAMLError, RecursionError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _Refused([AdmissionError(shown, f"invalid YAML: {first_line}", 1, 1)]) from None
    return data


def _yaml_message(exc: MarkedYAMLError) -> str:
    problem = (exc.problem or "").strip()
    name = type(exc).__name__
    if name == "DuplicateKeyError":
        match = re.search(r'duplicate key "(.*?)"', problem)
        key = match.group(1) if match else "?"
        return f"duplicate key {key!r}; each key may appear once per mapping"
    if name == "ConstructorError" and "could not determine a constructor" in problem:
        tag = re.search(r"tag '?([^'\s]+)'?", problem)
        shown_tag = tag.group(1) if tag else "?"
        shown_tag = re.sub(r"^tag:yaml\.org,2002:", "!!", shown_tag)
        return f"YAML tag {shown_tag} is not allowed; fixtures hold plain data only"
    if problem.startswith("%YAML") or problem.startswith("YAML "):
        return problem
    if name == "ComposerError" and "single document" in (exc.context or ""):
        return "a fixture is one YAML document; found another ('---' starts a new document)"
    if name == "MaxDepthExceededError":
        return f"nesting deeper than {MAX_DEPTH} levels; flatten the data"
    context = (exc.context or "").strip()
    detail = f"{context}: {problem}" if context and problem else (problem or context)
    return f"invalid YAML: {detail.splitlines()[0] if detail else name}"


# --- TOML --------------------------------------------------------------------------------------

_TOML_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_TOML_AT_END = "(at end of document)"


def _parse_toml(text: str, shown: str) -> JSONValue:
    try:
        data: JSONValue = tomllib.loads(text)
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
        raise _Refused([AdmissionError(shown, f"invalid TOML: {message}", line, col)]) from None
    except RecursionError:
        raise _Refused([AdmissionError(shown, f"nesting deeper than {MAX_DEPTH} levels")]) from None
    return data


_PARSERS = {"json": _parse_json, "yaml": _parse_yaml, "toml": _parse_toml}


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


_NO_KEY = object()


@dataclass(frozen=True)
class _Foreign:
    """Something in parsed data that is not plain JSON: at ``path``, or a mapping ``key`` there."""

    path: JSONPath
    message: str
    key: object = _NO_KEY


def _foreign_values(data: object) -> list[_Foreign]:
    """Everything in parsed data that is not plain JSON, with where it is.

    Catches YAML's and TOML's richer types (dates, times, binary, sets, non-string keys),
    non-finite floats, and nesting deeper than :data:`MAX_DEPTH` that bracket counting cannot
    see (TOML dotted keys and table headers), so every format hands admission the same kind of
    value. Iterative: the data may be deeper than Python's recursion limit.
    """
    problems: list[_Foreign] = []
    stack: list[tuple[JSONPath, object]] = [((), data)]
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
        elif value is None or isinstance(value, int | bool):
            continue
        else:
            problems.append(_Foreign(path, _foreign_message(value)))
    return problems


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
