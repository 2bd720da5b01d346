"""Comments and docstrings say why, without performance figures: a figure rots as the code
and the machines change, and the bench scripts print today's (``docs/performance.md``)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A duration, a ratio or an instruction count; ``code`` in double backticks is left out (a
# docstring may show what a function prints, ``7 ms``).
FIGURE = re.compile(
    r"\b\d[\d.,]*\s?(?:ms|µs|us|ns)\b|\b\d[\d.,]*\s?[x\u00d7]\s?(?:slower|faster)"
    r"|\b\d[\d.,]*[MK]?\s+instructions|millisecond|microsecond|nanosecond",
    re.IGNORECASE,
)
CODE = re.compile(r"``.*?``", re.DOTALL)


def prose(source: str) -> list[tuple[int, str]]:
    """The comments and docstrings of a module, each with its line."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found.append((node.lineno, node.value.value))
    return found


def test_no_comment_or_docstring_quotes_a_performance_figure() -> None:
    quoted = [
        f"{path.relative_to(ROOT)}:{line}: {match.group()!r}"
        for path in sorted((ROOT / "evalrunner").rglob("*.py"))
        for line, text in prose(path.read_text("utf-8"))
        for match in FIGURE.finditer(CODE.sub("", text))
    ]
    pyproject = (ROOT / "pyproject.toml").read_text("utf-8").splitlines()
    quoted += [
        f"pyproject.toml:{number}: {match.group()!r}"
        for number, text in enumerate(pyproject, 1)
        if "#" in text
        for match in FIGURE.finditer(text[text.index("#") :])
    ]
    assert quoted == []


def test_the_screen_finds_the_figures_it_is_for() -> None:
    for text in ["costs 50 ms", "11M instructions", "~25x slower", "a millisecond or two"]:
        assert FIGURE.search(text), text
    assert not FIGURE.search(CODE.sub("", "``7`` → ``7 ms``"))
