"""``write_new``: a file created whole or not at all, never over anything (what ``evalrunner
record`` writes without ``--overwrite``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalrunner.report import UnsafeOutput, write_new


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_it_creates_the_file_whole(tmp_path: Path) -> None:
    write_new(tmp_path / "a.yaml", "name: x\n")
    assert (tmp_path / "a.yaml").read_text("utf-8") == "name: x\n"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("kind", ["file", "dangling link", "link to a file", "directory"])
def test_it_never_writes_over_anything(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "a.yaml"
    if kind == "file":
        target.write_text("precious\n", "utf-8")
    elif kind == "dangling link":
        os.symlink(tmp_path / "nowhere.yaml", target)
    elif kind == "link to a file":
        (tmp_path / "real.yaml").write_text("precious\n", "utf-8")
        os.symlink(tmp_path / "real.yaml", target)
    else:
        target.mkdir()
    with pytest.raises(FileExistsError):
        write_new(target, "new\n")
    assert leftovers(tmp_path) == []
    assert not (tmp_path / "nowhere.yaml").exists()
    if kind in ("file", "link to a file"):
        assert target.read_text("utf-8") == "precious\n"


def test_a_name_with_a_control_character_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafeOutput):
        write_new(tmp_path / "a\r.yaml", "x")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_new(tmp_path / "no" / "a.yaml", "x")
    assert list(tmp_path.iterdir()) == []
