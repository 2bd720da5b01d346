"""Stage 1, load, for YAML: the strict loaders, imported only when a YAML fixture is parsed.

:mod:`evalrunner.load` hands YAML text here; the rules are its own (SPEC §4 rule 1). Kept
apart so that a run without YAML fixtures to parse (JSON and TOML suites, a warm admission
cache, ``--help``) never imports ruamel.yaml.

The data is built from libyaml's parser events (ruamel.yaml.clib), checking every rule of
fixtures on the way; libyaml's acceptance stands. Whatever the builder refuses (a duplicate key,
a tag, an anchor, a date, ... and libyaml's syntax errors) is read again by ruamel.yaml's
pure-Python loader with a strict composer and constructor, which words the refusal and places
it. That loader reads YAML 1.2, where libyaml reads 1.1: of libyaml's syntax errors it keeps
those 1.2 agrees with. Without libyaml's C parser (PyPy, a platform without a wheel) it reads
every document, with the same rules.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer, ComposerError
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from ruamel.yaml.nodes import ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.resolver import implicit_resolvers

from evalrunner.limits import (
    INT_MAX,
    INT_MIN,
    MAX_DEPTH,
    MAX_INT_DIGITS,
    NO_KEY,
    NotPlain,
    Parsed,
    Refused,
    no_digits,
    out_of_range,
    significant_digits,
    too_large,
)
from evalrunner.model import AdmissionError, JSONValue
from evalrunner.sourcemap import LineIndex
from evalrunner.text import printable


class _YAMLRefused(MarkedYAMLError):
    """Something YAML allows and fixtures do not; its ``problem`` is the whole message."""


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _shown_tag(tag: str) -> str:
    return re.sub(r"^tag:yaml\.org,2002:", "!!", tag)


class _StrictComposer(Composer):
    """Refuses what a fixture never needs and an attacker might: aliases, anchors, tags, merge
    keys, YAML 1.1.

    Every tag is refused, the core ones too: ``!!int "abc"`` or ``!!bool "maybe"`` would make
    the constructor fail on text it was told to convert, ``!!str 12`` or ``--- !!map`` change
    what plain text means, and the README promises a fixture is plain data.
    """

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
        tag = getattr(event, "tag", None)
        if tag is not None:
            raise _YAMLRefused(
                None,
                None,
                f"YAML tag {_shown_tag(tag)} is not allowed; fixtures hold plain data only "
                "(remove the tag; quote a value to make it a string)",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        for key_node, _ in node.value:
            if isinstance(key_node, ScalarNode) and key_node.tag == _MERGE_TAG:
                # YAML 1.1's merge key is honoured by the loader even in YAML 1.2: it would
                # copy keys in from another mapping and let a duplicate key pass unnoticed.
                raise _YAMLRefused(
                    None,
                    None,
                    "the YAML merge key '<<' is not allowed in fixtures; write the keys out "
                    "in full (quote it, '<<', if it is meant as a key)",
                    key_node.start_mark,
                )
            if not isinstance(key_node, ScalarNode):
                kind = "sequence" if isinstance(key_node, SequenceNode) else "mapping"
                raise ComposerError(
                    None,
                    None,
                    f"a {kind} is used as a mapping key; keys must be strings",
                    key_node.start_mark,
                )
        return node


class _StrictConstructor(SafeConstructor):
    """Builds numbers without ever converting thousands of digits, and refuses the integers
    and floats no 64-bit value holds, at their position."""

    def construct_yaml_int(self, node: Any) -> Any:
        literal = str(node.value)
        if significant_digits(literal) > MAX_INT_DIGITS:
            raise _YAMLRefused(None, None, out_of_range(literal), node.start_mark)
        try:
            value = super().construct_yaml_int(node)
        except (ValueError, IndexError):
            # ruamel.yaml's pattern for integers takes underscores for digits: "+_", "0x_"
            raise _YAMLRefused(None, None, no_digits(literal), node.start_mark) from None
        if not INT_MIN <= value <= INT_MAX:
            raise _YAMLRefused(None, None, out_of_range(literal), node.start_mark)
        return value

    def construct_yaml_float(self, node: Any) -> Any:
        literal = str(node.value)
        try:
            value = super().construct_yaml_float(node)
        except (ValueError, IndexError):
            raise _YAMLRefused(None, None, no_digits(literal), node.start_mark) from None
        special = literal.lstrip("+-").lower() in (".inf", ".nan")
        if not math.isfinite(value) and not special:
            raise _YAMLRefused(None, None, too_large(literal), node.start_mark)
        return value


# Registered on the subclass: add_constructor on SafeConstructor itself would change every
# YAML loader in the process.
_StrictConstructor.add_constructor("tag:yaml.org,2002:int", _StrictConstructor.construct_yaml_int)
_StrictConstructor.add_constructor(
    "tag:yaml.org,2002:float", _StrictConstructor.construct_yaml_float
)


def _yaml_loader() -> YAML:
    loader = YAML(typ="safe", pure=True)
    loader.Composer = _StrictComposer
    loader.Constructor = _StrictConstructor
    loader.max_depth = MAX_DEPTH + 1
    return loader


_YAML_DIRECTIVE = re.compile(r"%YAML[ \t]+(\S*)")


def _yaml_directive(text: str) -> re.Match[str] | None:
    """The ``%YAML`` directive among the directives that open the text, if there is one."""
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("%YAML"):
            return _YAML_DIRECTIVE.match(text, offset)
        if stripped and not stripped.startswith(("%", "#")):
            return None  # directives come first: past them, "%YAML" is content
        offset += len(line)
    return None


def parse_yaml(text: str, shown: str) -> Parsed:
    """The data of a YAML fixture, built from libyaml's events with every rule checked; or,
    for whatever that build leaves to it, the strict loader's data, whose values JSON cannot
    hold (dates, lone surrogates, ...) are still to be looked for. Raises :class:`Refused`
    with the strict loader's words and positions."""
    if _CParser is not None:
        try:
            return Parsed(_from_events(text), checked=True)
        except NotPlain:
            pass  # a rule of fixtures, or a shape the builder leaves to the strict loader
        except YAMLError:
            # libyaml reads YAML 1.1, whose plain scalars may not hold ': ' inside flow
            # collections ({url: http://x}); fixtures are YAML 1.2, which the strict loader
            # reads, so it judges libyaml's refusals (and words them when it agrees).
            pass
    return Parsed(_strict_load(text, shown))


def _strict_load(text: str, shown: str) -> JSONValue:
    """The data ruamel.yaml's pure-Python loader builds under the rules of fixtures, or
    :class:`Refused` with its words and positions."""
    directive = _yaml_directive(text)
    if directive is not None and directive.group(1) != "1.2":
        # ruamel.yaml asserts on versions it does not know (1.3, 1.0): refuse them first.
        line, col = LineIndex(text).position(directive.start())
        message = (
            f"%YAML {printable(directive.group(1))} directive: fixtures are YAML 1.2 "
            "(remove the directive)"
        )
        raise Refused([AdmissionError(shown, message, line, col)])
    try:
        data: JSONValue = _yaml_loader().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = _yaml_message(exc)
        if mark is None:
            raise Refused([AdmissionError(shown, message)]) from None
        raise Refused([AdmissionError(shown, message, mark.line + 1, mark.column + 1)]) from None
    except ReaderError as exc:
        line, col = LineIndex(text).position(max(exc.position, 0))
        character = f"U+{exc.character:04X}" if isinstance(exc.character, int) else "a character"
        message = (
            f"{character} is not allowed in YAML text; write control characters as escapes "
            'inside a double-quoted string (e.g. "\\u0000")'
        )
        raise Refused([AdmissionError(shown, message, line, col)]) from None
    except (YAMLError, RecursionError, AssertionError) as exc:
        # AssertionError: ruamel.yaml checks some input with asserts; any left is bad input.
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Refused([AdmissionError(shown, f"invalid YAML: {first_line}", 1, 1)]) from None
    return data


# --- YAML through the C parser ------------------------------------------------------------------

# libyaml's parser, as ruamel.yaml.clib builds it; None where it is not installed (PyPy, a
# platform without a wheel), and then the strict loader reads every document.
try:
    from _ruamel_yaml import CParser as _CParser  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - depends on the installation
    _CParser = None

_YAML_INT = "tag:yaml.org,2002:int"


def _yaml_plain_resolvers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    """ruamel.yaml's YAML 1.2 rules for what a plain scalar is, by its first character: the
    table its ``VersionedResolver`` builds for 1.2, the version every fixture is read in."""
    table: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for versions, tag, regexp, first in implicit_resolvers:
        if (1, 2) in versions:
            # ruamel.yaml compiles these lazily behind a proxy; compiled directly, the same
            # patterns match without its attribute lookups.
            pattern = re.compile(regexp.pattern, regexp.flags)
            for char in first:
                table.setdefault(char, []).append((tag, pattern))
    return table


_PLAIN_RESOLVERS = _yaml_plain_resolvers()
_PLAIN_DECIMAL = re.compile(r"[0-9]{1,18}")
_plain_constructor: _StrictConstructor | None = None


def _resolved_scalar(tag: str, value: str) -> JSONValue:
    """The value of a plain scalar that YAML 1.2 resolves to ``tag`` (not a string), exactly as
    the pure-Python loader builds it; :class:`NotPlain` for everything fixtures refuse or
    JSON cannot hold (dates, merge keys, non-finite and out-of-range numbers)."""
    if tag == _YAML_INT and _PLAIN_DECIMAL.fullmatch(value):
        return int(value)  # at most 18 digits: within 64 bits, and no base prefix or sign
    if tag == "tag:yaml.org,2002:null":
        return None
    if tag == "tag:yaml.org,2002:bool":
        return value.lower() == "true"
    if tag not in (_YAML_INT, "tag:yaml.org,2002:float"):
        raise NotPlain(tag)  # a timestamp, the merge key '<<', the value key '='
    global _plain_constructor
    if _plain_constructor is None:
        _plain_constructor = _yaml_loader().constructor
    node = ScalarNode(tag, value, None, None)
    try:
        # The pure path's own constructor: the same bases, underscores and range checks.
        number: int | float = (
            _plain_constructor.construct_yaml_int(node)
            if tag == _YAML_INT
            else _plain_constructor.construct_yaml_float(node)
        )
    except (YAMLError, ValueError, IndexError) as exc:  # refused: the strict loader words it
        raise NotPlain(tag) from exc
    if isinstance(number, float) and not math.isfinite(number):
        raise NotPlain(tag)
    return number


def _from_events(text: str) -> JSONValue:
    """The data of a YAML fixture, built straight from libyaml's events.

    Raises libyaml's :class:`YAMLError` for text that is not YAML, and :class:`NotPlain` for
    anything the rules of fixtures refuse or this builder leaves to the strict loader, with
    no attempt to explain: anchors, aliases, tags, directives, several documents, non-string
    or repeated keys, nesting that reaches :data:`MAX_DEPTH`, values JSON cannot hold, a
    scalar document. The strict loader then reads the text again and words the refusal.
    """
    get_event = _CParser(text).get_event
    get_event()  # stream start
    event = get_event()
    if type(event) is StreamEndEvent:
        return None  # no document: the pure-Python loader's answer too
    if type(event) is not DocumentStartEvent or event.version or event.tags:
        raise NotPlain("directives")
    root: JSONValue = None
    # Open collections, innermost last; for a mapping, the key whose value comes next
    # (NO_KEY while a key is due).
    open_items: list[Any] = []
    keys: list[Any] = []
    while True:
        event = get_event()
        kind = type(event)
        if kind is ScalarEvent:
            if event.anchor is not None or event.ctag is not None:
                raise NotPlain("anchor or tag")
            value: Any = event.value
            if event.implicit[0]:  # plain: resolved as the pure-Python loader resolves it
                resolvers = _PLAIN_RESOLVERS.get(event.value[:1])
                if resolvers is not None:
                    for tag, regexp in resolvers:
                        if regexp.match(event.value):
                            value = _resolved_scalar(tag, event.value)
                            break
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            if event.anchor is not None or event.ctag is not None:
                raise NotPlain("anchor or tag")
            if len(open_items) >= MAX_DEPTH:
                raise NotPlain("too deep")
            value = {} if kind is MappingStartEvent else []
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            open_items.pop()
            keys.pop()
            if open_items:
                continue
            break
        else:
            raise NotPlain(kind.__name__)  # an alias; or the end of a scalar document
        if not open_items:
            if kind is ScalarEvent:
                # The scanners differ on a bare block scalar at the top level; and a fixture
                # is a mapping anyway, so this is never worth a fast path.
                raise NotPlain("a scalar document")
            root = value
        else:
            parent = open_items[-1]
            if type(parent) is list:
                parent.append(value)
            else:
                key = keys[-1]
                if key is NO_KEY:
                    if type(value) is not str or value in parent:
                        raise NotPlain("key")  # not a string, or repeated
                    keys[-1] = value
                    continue
                parent[key] = value
                keys[-1] = NO_KEY
        if kind is not ScalarEvent:
            open_items.append(value)
            keys.append(NO_KEY)
    if type(get_event()) is not DocumentEndEvent or type(get_event()) is not StreamEndEvent:
        raise NotPlain("another document")
    return root


def _yaml_message(exc: MarkedYAMLError) -> str:
    problem = (exc.problem or "").strip()
    name = type(exc).__name__
    if isinstance(exc, _YAMLRefused):
        return problem
    if name == "DuplicateKeyError":
        match = re.search(r'duplicate key "(.*?)"', problem)
        key = match.group(1) if match else "?"
        return f"duplicate key {key!r}; each key may appear once per mapping"
    if name == "ConstructorError" and "could not determine a constructor" in problem:
        tag = re.search(r"tag '?([^'\s]+)'?", problem)
        shown_tag = _shown_tag(tag.group(1) if tag else "?")
        return f"YAML tag {shown_tag} is not allowed; fixtures hold plain data only"
    if problem.startswith("%YAML") or problem.startswith("YAML "):
        return problem
    if name == "ComposerError" and "single document" in (exc.context or ""):
        return "a fixture is one YAML document; found another ('---' starts a new document)"
    if name == "MaxDepthExceededError":
        return f"nesting deeper than {MAX_DEPTH} levels; flatten the data"
    context = (exc.context or "").strip()
    if "'\\t'" in problem or "\t" in problem:
        return (
            "a tab in the indentation: YAML indents with spaces only; replace the tab with "
            "spaces (2 per level, lined up with the keys around it)"
        )
    if problem.startswith("expected <block end>") and exc.context_mark is not None:
        what = "mapping" if "mapping" in context else "list"
        level = exc.context_mark.column + 1
        return (
            f"bad indentation: this line does not fit the {what} begun at line "
            f"{exc.context_mark.line + 1}, whose "
            + ("keys start" if what == "mapping" else "items ('- ') start")
            + f" in column {level}; indent it with spaces to the column of the key or '- ' "
            "item it belongs with"
        )
    if problem == "mapping values are not allowed here":
        return (
            "unexpected ': ' here: a value holding ': ' must be quoted, and a key must line up "
            "with the keys of its mapping; quote the value or fix this line's indentation"
        )
    detail = f"{context}: {problem}" if context and problem else (problem or context)
    return f"invalid YAML: {detail.splitlines()[0] if detail else name}"
