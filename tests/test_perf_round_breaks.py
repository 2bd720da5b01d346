"""Defects a breaker found in the performance round (8504d49..ebf9d9e), kept as tests: the
document keys that messages now name through printable() must keep a message on one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalrunner.config import ConfigError, load_config


@pytest.mark.parametrize("separator", ["\\u2028", "\\u2029"])
def test_a_config_key_holding_a_line_separator_is_named_on_one_line(
    tmp_path: Path, separator: str
) -> None:
    (tmp_path / "evalrunner.toml").write_text(
        f'[eval]\n"a{separator}b" = "x\\u0000y"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError) as refused:
        load_config(cwd=tmp_path, env={})
    problems = refused.value.problems
    assert any("holds a NUL character" in problem for problem in problems), problems
    for problem in problems:
        assert len(problem.splitlines()) == 1, repr(problem)
