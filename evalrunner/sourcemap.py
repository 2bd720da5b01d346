"""Where things are in a fixture's text: JSON paths → 1-based line and column.

Parsing for data keeps no positions (:mod:`evalrunner.load`); they are only needed when there
is something to place (a refusal, or a failed check a report points at), so each format's
locator is built lazily, on the first question, from the same text:

* JSON: a small scanner over the text with exact JSON semantics (stdlib string and number
  scanning), recording where each key and value starts.
* YAML: ruamel.yaml's round-trip loader, whose nodes carry their line/column.
* TOML: a scanner over the (already known valid) text that follows table headers, arrays of
  tables, dotted keys, inline tables and arrays. ``tomllib`` keeps no positions.
"""

from __future__ import annotations

import bisect
import json
import json.decoder
import json.scanner
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from evalrunner.model import Format, JSONPath
from evalrunner.text import compiled

Position = tuple[int, int]
"""(line, column), both 1-based."""


class _Spot:
    """Where a value is. A plain class, not a dataclass: spots are built and read, never
    compared, hashed or shown, and a dataclass's methods would be compiled at every start."""

    __slots__ = ("key", "value")

    def __init__(self, key: int | None, value: int) -> None:
        self.key = key  # offset of the key naming this value (None for array items and root)
        self.value = value  # offset where the value starts


class LineIndex:
    """Turns character offsets into 1-based (line, column); CRLF counts as one line break."""

    # Up to this many positions are counted straight off the text; past it, an index of line
    # starts pays for itself. Most documents are asked for a handful, or none.
    _COUNTED = 16

    def __init__(self, text: str) -> None:
        self._text = text
        self._starts: list[int] | None = None
        self._counted = 0

    def position(self, offset: int) -> Position:
        """1-based (line, column) of a character offset."""
        if self._starts is None:
            if self._counted < self._COUNTED:
                self._counted += 1
                line_start = self._text.rfind("\n", 0, offset) + 1
                return self._text.count("\n", 0, offset) + 1, offset - line_start + 1
            self._starts = self._line_starts()
        line = bisect.bisect_right(self._starts, offset) - 1
        return line + 1, offset - self._starts[line] + 1

    def _line_starts(self) -> list[int]:
        starts = [0]
        find = self._text.find
        at = find("\n")
        while at >= 0:  # one step per line, not per character
            starts.append(at + 1)
            at = find("\n", at + 1)
        return starts


@dataclass
class SourceMap:
    """Finds positions in one document's text, building its index on first use."""

    text: str
    format: Format
    _spots: dict[JSONPath, _Spot] | None = field(default=None, repr=False)
    _lines: LineIndex | None = field(default=None, repr=False)
    _yaml_root: Any = field(default=None, repr=False)
    _yaml_failed: bool = field(default=False, repr=False)

    def locate(
        self, path: JSONPath, *, key: bool = False, root_fallback: bool = True
    ) -> Position | None:
        """Position of the value at ``path`` (or of its key, with ``key=True``).

        When ``path`` does not exist (a missing required key), the nearest existing ancestor is
        used. Returns ``None`` when the text yields no positions at all, or, with
        ``root_fallback=False``, when the nearest ancestor found is the document root although
        ``path`` is not (JSON and TOML only; YAML positions always come from the parser).
        """
        if self.format == "yaml":
            return self._locate_yaml(path, key=key)
        spots = self._index()
        for cut in range(len(path), -1, -1):
            spot = spots.get(path[:cut])
            if spot is None:
                continue
            if cut == 0 and path and not root_fallback:
                return None
            use_key = key if cut == len(path) else False
            offset = spot.key if (use_key and spot.key is not None) else spot.value
            return self._line_index().position(offset)
        return None

    def locate_mapping_key(self, path: JSONPath, mapping_key: object) -> Position | None:
        """Position of a key that is not a string (YAML only: ``2:``, ``true:``, ``null:``) in
        the mapping at ``path``; ``None`` when it cannot be found."""
        if self.format != "yaml":
            return None
        node = self._yaml_node(path)
        try:
            if mapping_key not in node:
                return None
            line, col = node.lc.key(mapping_key)
        except (TypeError, AttributeError, KeyError):  # not a mapping, or no marks kept
            return None
        return line + 1, col + 1

    def key_positions(self, paths: Iterable[JSONPath]) -> dict[JSONPath, Position]:
        """Positions of the keys naming each of ``paths`` (in objects), for the paths whose
        key is found: JSON and TOML from the index of the text, YAML from the round-trip
        parser's nodes."""
        wanted = list(paths)
        if self.format != "yaml":
            spots = self._index()
            return {
                path: self._line_index().position(spot.key)
                for path in wanted
                if (spot := spots.get(path)) is not None and spot.key is not None
            }
        found = {}
        for path in wanted:
            node = self._yaml_node(path[:-1])
            try:
                line, col = node.lc.key(path[-1])
            except (TypeError, AttributeError, KeyError):  # not there, or no marks kept
                continue
            found[path] = (line + 1, col + 1)
        return found

    def _yaml_node(self, path: JSONPath) -> Any:
        self._load_yaml()
        node = self._yaml_root
        for part in path:
            try:
                node = node[part]
            except (KeyError, IndexError, TypeError):
                return None
        return node

    def _load_yaml(self) -> None:
        if self._yaml_root is None and not self._yaml_failed:
            from ruamel.yaml import YAML

            try:
                self._yaml_root = YAML(typ="rt", pure=True).load(self.text)
            except Exception:
                self._yaml_failed = True

    def _line_index(self) -> LineIndex:
        if self._lines is None:
            self._lines = LineIndex(self.text)
        return self._lines

    def _index(self) -> dict[JSONPath, _Spot]:
        if self._spots is None:
            try:
                if self.format == "json":
                    self._spots = _JSONScanner(self.text).scan()
                else:
                    self._spots = _TOMLScanner(self.text).scan()
            except (ValueError, IndexError, RecursionError):
                self._spots = {}
        return self._spots

    def _locate_yaml(self, path: JSONPath, *, key: bool) -> Position | None:
        self._load_yaml()
        node = self._yaml_root
        if node is None or not hasattr(node, "lc"):
            return (1, 1)
        best: tuple[int, int] = (node.lc.line, node.lc.col)
        for depth, part in enumerate(path):
            last = depth == len(path) - 1
            lc = getattr(node, "lc", None)
            if lc is None:
                break
            try:
                if isinstance(part, int):
                    best = lc.item(part)
                    node = node[part]
                else:
                    if part not in node:
                        break
                    best = lc.key(part) if (key and last) else lc.value(part)
                    node = node[part]
            except (KeyError, IndexError, TypeError, AttributeError):
                break
        if best[0] is None or best[1] is None:  # e.g. a tagged scalar root carries no marks
            return (1, 1)
        return best[0] + 1, best[1] + 1


# --- JSON --------------------------------------------------------------------------------------

_WS = " \t\n\r"

# The stdlib's own JSON string scanner (exact escapes); typeshed does not declare it.
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.__dict__["scanstring"]


class _JSONScanner:
    """Walks JSON text recording where each path's key and value start."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.spots: dict[JSONPath, _Spot] = {}
        self.duplicates: list[tuple[JSONPath, int]] = []

    def scan(self) -> dict[JSONPath, _Spot]:
        i = self._skip(0)
        self._value(i, (), None)
        return self.spots

    def _skip(self, i: int) -> int:
        text = self.text
        while i < len(text) and text[i] in _WS:
            i += 1
        return i

    def _value(self, i: int, path: JSONPath, key_at: int | None) -> int:
        text = self.text
        self.spots[path] = _Spot(key_at, i)
        ch = text[i]
        if ch == "{":
            i = self._skip(i + 1)
            seen: set[str] = set()
            if text[i] == "}":
                return i + 1
            while True:
                k_at = i
                name, i = _scanstring(text, i + 1)
                if name in seen:
                    self.duplicates.append((path + (name,), k_at))
                seen.add(name)
                i = self._skip(i)
                i = self._skip(i + 1)  # ':'
                i = self._skip(self._value(i, path + (name,), k_at))
                if text[i] == "}":
                    return i + 1
                i = self._skip(i + 1)  # ','
        if ch == "[":
            i = self._skip(i + 1)
            index = 0
            if text[i] == "]":
                return i + 1
            while True:
                i = self._skip(self._value(i, path + (index,), None))
                index += 1
                if text[i] == "]":
                    return i + 1
                i = self._skip(i + 1)
        if ch == '"':
            return _scanstring(text, i + 1)[1]
        match = json.scanner.NUMBER_RE.match(text, i)
        if match is not None and match.end() > i:
            return match.end()
        for word in ("true", "false", "null", "NaN", "Infinity", "-Infinity"):
            if text.startswith(word, i):
                return i + len(word)
        raise ValueError(f"unexpected character at {i}")


def json_duplicate_keys(text: str) -> list[tuple[JSONPath, Position]]:
    """Every repeated key in a JSON object, with the position of the repeat."""
    scanner = _JSONScanner(text)
    scanner.scan()
    lines = LineIndex(text)
    return [(path, lines.position(at)) for path, at in scanner.duplicates]


# --- TOML --------------------------------------------------------------------------------------

_TOML_INTEGER = r"[+-]?[0-9][0-9_]*(?![0-9_.eExob:-])"


def toml_long_integers(text: str, max_digits: int) -> list[tuple[JSONPath, Position, str]]:
    """Every decimal integer value in TOML ``text`` with more than ``max_digits`` significant
    digits: its path, position and literal.

    For text ``tomllib`` could not finish because such a number stopped it (Python will not
    convert more than 4,300 digits); the scanner needs only the structure, not the values.
    """
    try:
        spots = _TOMLScanner(text).scan()
    except (ValueError, IndexError, RecursionError):
        return []
    lines = LineIndex(text)
    found: list[tuple[JSONPath, Position, str]] = []
    for path, spot in spots.items():
        match = compiled(_TOML_INTEGER).match(text, spot.value)
        if match is None:
            continue
        literal = match.group()
        if len(literal.lstrip("+-").replace("_", "").lstrip("0")) > max_digits:
            found.append((path, lines.position(spot.value), literal))
    return sorted(found, key=lambda item: item[1])


# Each a match that always succeeds, stepping in C over what the scanner would walk: blanks
# and comments (a comment stops before its line break), with or without line breaks; a bare
# key; a number, boolean or date up to what ends it.
_TOML_BLANK = r"(?:[ \t]|#[^\n]*)*"
_TOML_BLANK_LINES = r"(?:[ \t\r\n]|#[^\n]*)*"
_TOML_BARE_KEY = r"[A-Za-z0-9_-]*"
_TOML_SCALAR = r"[^,\]}#\r\n]*"


class _TOMLScanner:
    """Follows valid TOML text, recording where each path's key and value start.

    Only called on text ``tomllib`` has already accepted, so it can be lenient: it needs to
    know structure (tables, arrays of tables, inline values), not to validate it.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.spots: dict[JSONPath, _Spot] = {(): _Spot(None, 0)}
        self.array_len: dict[JSONPath, int] = {}  # arrays of tables seen so far → length

    def scan(self) -> dict[JSONPath, _Spot]:
        text = self.text
        table: JSONPath = ()
        i = 0
        while i < len(text):
            i = self._skip_blank(i, newlines=True)
            if i >= len(text):
                break
            if text[i] == "[":
                table, i = self._header(i)
            else:
                i = self._key_value(i, table)
        return self.spots

    def _skip_blank(self, i: int, *, newlines: bool) -> int:
        """Past spaces, tabs and comments (a comment ends before its line break), and line
        breaks too with ``newlines``."""
        blank = compiled(_TOML_BLANK_LINES if newlines else _TOML_BLANK)
        return blank.match(self.text, i).end()  # type: ignore[union-attr]

    def _resolve(self, keys: list[str]) -> JSONPath:
        """Concrete path of a dotted header, descending into the last element of arrays."""
        path: JSONPath = ()
        for name in keys:
            path = path + (name,)
            if path in self.array_len:
                path = path + (self.array_len[path] - 1,)
        return path

    def _header(self, i: int) -> tuple[JSONPath, int]:
        text = self.text
        is_array = text.startswith("[[", i)
        i += 2 if is_array else 1
        i = self._skip_blank(i, newlines=False)
        name_at = i
        keys, i = self._keys(i)
        i = self._skip_blank(i, newlines=False)
        i += 2 if is_array else 1
        for depth in range(1, len(keys)):  # implicitly created super-tables
            self.spots.setdefault(self._resolve(keys[:depth]), _Spot(name_at, name_at))
        if is_array:
            parent = self._resolve(keys[:-1])
            array_path = parent + (keys[-1],)
            index = self.array_len.get(array_path, 0)
            self.array_len[array_path] = index + 1
            self.spots.setdefault(array_path, _Spot(name_at, name_at))
            path: JSONPath = array_path + (index,)
        else:
            path = self._resolve(keys)
        self.spots[path] = _Spot(name_at, name_at)
        return path, i

    def _keys(self, i: int) -> tuple[list[str], int]:
        """A possibly dotted key; returns its parts and the offset after it."""
        text = self.text
        keys: list[str] = []
        while True:
            i = self._skip_blank(i, newlines=False)
            if text[i] in "\"'":
                end = self._string_end(i)
                raw = text[i:end]
                # TOML's own decoder: its escapes and allowed characters differ from JSON's
                # (imported here: a run whose fixtures come from the cache parses no TOML)
                import tomllib

                keys.append(tomllib.loads(f"k = {raw}")["k"] if raw[0] == '"' else raw[1:-1])
                i = end
            else:
                start = i
                i = compiled(_TOML_BARE_KEY).match(text, i).end()  # type: ignore[union-attr]
                keys.append(text[start:i])
            i = self._skip_blank(i, newlines=False)
            if i < len(text) and text[i] == ".":
                i += 1
                continue
            return keys, i

    def _key_value(self, i: int, table: JSONPath) -> int:
        key_at = i
        keys, i = self._keys(i)
        i = self._skip_blank(i, newlines=False) + 1  # '='
        i = self._skip_blank(i, newlines=False)
        for depth in range(1, len(keys)):
            self.spots.setdefault(table + tuple(keys[:depth]), _Spot(key_at, key_at))
        return self._value(i, table + tuple(keys), key_at)

    def _value(self, i: int, path: JSONPath, key_at: int | None) -> int:
        text = self.text
        self.spots[path] = _Spot(key_at, i)
        ch = text[i]
        if ch == "{":
            i = self._skip_blank(i + 1, newlines=False)
            while text[i] != "}":
                i = self._key_value(i, path)
                i = self._skip_blank(i, newlines=False)
                if text[i] == ",":
                    i = self._skip_blank(i + 1, newlines=False)
            return i + 1
        if ch == "[":
            index = 0
            i = self._skip_blank(i + 1, newlines=True)
            while text[i] != "]":
                i = self._value(i, path + (index,), None)
                index += 1
                i = self._skip_blank(i, newlines=True)
                if text[i] == ",":
                    i = self._skip_blank(i + 1, newlines=True)
            return i + 1
        if ch in "\"'":
            return self._string_end(i)
        return compiled(_TOML_SCALAR).match(text, i).end()  # type: ignore[union-attr]

    def _string_end(self, i: int) -> int:
        text = self.text
        quote = text[i]
        if text.startswith(quote * 3, i):
            j = i + 3
            while True:
                j = text.index(quote * 3, j)
                if quote == '"' and _escaped(text, j):
                    j += 1
                    continue
                # up to two quotes may directly precede the closing delimiter
                while text.startswith(quote, j + 3):
                    j += 1
                return j + 3
        j = i + 1
        while text[j] != quote or (quote == '"' and _escaped(text, j)):
            j += 1
        return j + 1


def _escaped(text: str, j: int) -> bool:
    backslashes = 0
    k = j - 1
    while k >= 0 and text[k] == "\\":
        backslashes += 1
        k -= 1
    return backslashes % 2 == 1
