"""``-k`` expressions: which cases a run takes by name, fixture path or class.

``-k`` uses pytest's expression grammar, parsed here by a small recursive-descent parser::

    expression := [expr] END
    expr       := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | "(" expr ")" | IDENT
    IDENT      := one or more of: word characters, : + - . [ ] \\ /

An identifier matches a case when it is a case-insensitive substring of the case's name, of
its fixture path (relative to the directory it was found in, so a subdirectory's name
matches too) or of its class (``positive``, ``negative``). ``and``, ``or`` and ``not`` are
keywords only in lower case, as in pytest. Spaces and tabs separate tokens; any other
character is an error naming its column.

Its own module, imported only when a run is given ``-k``: its parse tree is five frozen
dataclasses, which every start would otherwise pay to build.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evalrunner.selection import SelectionError
from evalrunner.text import printable

MAX_KEYWORD_LENGTH = 4096
"""Longest ``-k`` expression accepted: far beyond any hand-written one, and it bounds the work
of parsing and matching."""

MAX_KEYWORD_NESTING = 64
"""Deepest nesting of parentheses and ``not`` in a ``-k`` expression: the parser recurses once
per level, and no real expression needs more than a handful."""


class _Syntax(Exception):
    """A ``-k`` syntax error at a 1-based column; :func:`parse_keyword` adds the expression."""

    def __init__(self, column: int, message: str) -> None:
        super().__init__(message)
        self.column = column
        self.message = message


_IDENT = re.compile(r"(?:\w|:|\+|-|\.|\[|\]|\\|/)+")
_KEYWORDS = frozenset({"and", "or", "not"})


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "ident", "and", "or", "not", "(", ")", "end"
    text: str
    column: int  # 1-based


def _describe(token: _Token) -> str:
    if token.kind == "end":
        return "the end of the expression"
    if token.kind == "ident":
        return f"the name {printable(token.text[:40])!r}"
    return repr(token.text)


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in " \t":
            i += 1
        elif char in "()":
            tokens.append(_Token(char, char, i + 1))
            i += 1
        else:
            match = _IDENT.match(text, i)
            if match is None:
                raise _Syntax(
                    i + 1,
                    f"unexpected character {_shown_char(char)}; names are made of letters, "
                    "digits and _ : + - . [ ] \\ /, combined with and, or, not and parentheses",
                )
            word = match.group()
            tokens.append(_Token(word if word in _KEYWORDS else "ident", word, i + 1))
            i = match.end()
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


def _shown_char(char: str) -> str:
    code = ord(char)
    if char.isprintable() and not 0xD800 <= code <= 0xDFFF:
        return f"{char!r} (U+{code:04X})"
    return f"U+{code:04X}"


@dataclass(frozen=True, slots=True)
class _Name:
    needle: str  # casefolded


@dataclass(frozen=True, slots=True)
class _Not:
    operand: _Node


@dataclass(frozen=True, slots=True)
class _All:
    operands: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Any:
    operands: tuple[_Node, ...]


_Node = _Name | _Not | _All | _Any


class _Parser:
    """Recursive descent over the token list; each method parses one grammar rule."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.position = 0
        self.depth = 0

    @property
    def current(self) -> _Token:
        return self.tokens[self.position]

    def advance(self) -> _Token:
        token = self.current
        if token.kind != "end":
            self.position += 1
        return token

    def expect_failure(self, expected: str) -> _Syntax:
        token = self.current
        return _Syntax(token.column, f"expected {expected}, got {_describe(token)}")

    def expression(self) -> _Node:
        node = self.or_expr()
        if self.current.kind != "end":
            raise self.expect_failure('"and", "or" or the end of the expression')
        return node

    def or_expr(self) -> _Node:
        operands = [self.and_expr()]
        while self.current.kind == "or":
            self.advance()
            operands.append(self.and_expr())
        return operands[0] if len(operands) == 1 else _Any(tuple(operands))

    def and_expr(self) -> _Node:
        operands = [self.not_expr()]
        while self.current.kind == "and":
            self.advance()
            operands.append(self.not_expr())
        return operands[0] if len(operands) == 1 else _All(tuple(operands))

    def not_expr(self) -> _Node:
        token = self.current
        if token.kind in ("not", "("):
            self.depth += 1
            if self.depth > MAX_KEYWORD_NESTING:
                raise _Syntax(
                    token.column,
                    f"nested more than {MAX_KEYWORD_NESTING} levels deep (parentheses and "
                    "not); write a flatter expression",
                )
            self.advance()
            if token.kind == "not":
                node: _Node = _Not(self.not_expr())
            else:
                node = self.or_expr()
                if self.current.kind != ")":
                    raise self.expect_failure(
                        f'")" to close the "(" at column {token.column}, or "and"/"or"'
                    )
                self.advance()
            self.depth -= 1
            return node
        if token.kind == "ident":
            self.advance()
            return _Name(token.text.casefold())
        raise self.expect_failure('a name, "not" or "("')


def _evaluate(node: _Node, words: Sequence[str]) -> bool:
    # Recursion depth is bounded by MAX_KEYWORD_NESTING: and/or chains are flat lists.
    if isinstance(node, _Name):
        return any(node.needle in word for word in words)
    if isinstance(node, _Not):
        return not _evaluate(node.operand, words)
    if isinstance(node, _All):
        return all(_evaluate(operand, words) for operand in node.operands)
    return any(_evaluate(operand, words) for operand in node.operands)


@dataclass(frozen=True, slots=True)
class Keyword:
    """A parsed ``-k`` expression; ``text`` is what was given."""

    text: str
    _root: _Node | None  # None: an empty expression, which selects every case

    @property
    def shown(self) -> str:
        """The expression as messages quote it: escaped, and cut short if long."""
        return _shown_expression(self.text)

    def matches(self, name: str, source: str, case_class: str | None) -> bool:
        """Whether a case with this name, fixture path and class is selected."""
        if self._root is None:
            return True
        words = [name.casefold(), source.casefold()]
        if case_class is not None:
            words.append(case_class.casefold())
        return _evaluate(self._root, words)


def parse_keyword(text: str) -> Keyword:
    """Parse a ``-k`` expression, or raise :class:`SelectionError` naming the column.

    An empty (or blank) expression selects every case, as pytest's ``-k ""`` does.
    """
    if len(text) > MAX_KEYWORD_LENGTH:
        raise SelectionError(
            f"-k: the expression is {len(text)} characters long; at most "
            f"{MAX_KEYWORD_LENGTH} are accepted"
        )
    try:
        tokens = _tokenize(text)
        if tokens[0].kind == "end":
            return Keyword(text, None)
        return Keyword(text, _Parser(tokens).expression())
    except _Syntax as exc:
        shown = _shown_expression(text)
        raise SelectionError(f"-k '{shown}': column {exc.column}: {exc.message}") from None


def _shown_expression(text: str) -> str:
    return printable(text if len(text) <= 60 else text[:57] + "...")
