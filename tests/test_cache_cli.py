"""The admission cache through the command line: a second run of an unchanged suite admits
nothing afresh, yet says exactly what a run without the cache says; --no-cache and
``cache clear`` do what they say; a broken cache never breaks a run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import evalrunner.fixture.admit
from evalrunner.cli import app

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "evals" / "regression"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(REGRESSION, tmp_path / "evals")
    (tmp_path / "evalrunner.toml").write_text('[eval]\nsuite_dir = "evals"\n', "utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def admitted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The fixtures admitted afresh (not taken from the cache), by file name."""
    seen: list[str] = []
    original = evalrunner.fixture.admit.admit

    def counting(document: Any) -> Any:
        seen.append(document.path.name)
        return original(document)

    monkeypatch.setattr(evalrunner.fixture.admit, "admit", counting)
    return seen


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"NO_COLOR": "1"})
    return result.exit_code, result.stdout, result.stderr


def timeless(text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)
    data.pop("duration_ms")
    for case in data["cases"]:
        case.pop("duration_ms")
    return data


def test_a_second_run_admits_nothing_afresh_and_reports_the_same(
    project: Path, admitted: list[str]
) -> None:
    first = invoke("run", "--format", "json")
    assert first[0] == 0 and len(admitted) == 18
    assert (project / ".evalrunner_cache" / "CACHEDIR.TAG").is_file()
    admitted.clear()
    second = invoke("run", "--format", "json")
    assert second[0] == 0 and admitted == []
    assert timeless(second[1]) == timeless(first[1])


def test_an_edited_fixture_is_admitted_again(project: Path, admitted: list[str]) -> None:
    invoke("run")
    fixture = project / "evals" / "echo_token_roundtrip.yaml"
    text = fixture.read_text("utf-8")
    fixture.write_text(text.replace("name: echo-token-roundtrip", "name: renamed"), "utf-8")
    admitted.clear()
    code, out, _ = invoke("run", "--format", "json")
    assert admitted == ["echo_token_roundtrip.yaml"]
    assert code == 0
    assert "renamed" in [case["name"] for case in json.loads(out)["cases"]]


def test_refusals_come_back_from_the_cache_word_for_word(project: Path) -> None:
    (project / "evals" / "broken.yaml").write_text("name: x\nturns: 3\n", "utf-8")
    (project / "evals" / "bad.json").write_text("{", "utf-8")
    fresh = invoke("run", "--no-cache")
    first = invoke("run")
    second = invoke("run")
    assert fresh[0] == first[0] == second[0] == 2
    assert fresh[2] == first[2] == second[2]
    assert "broken.yaml:2:8:" in second[2]


def test_a_name_taken_by_a_new_file_is_refused_at_its_place_with_the_cache(
    project: Path,
) -> None:
    invoke("run")  # every case cached
    text = (project / "evals" / "echo_token_roundtrip.yaml").read_text("utf-8")
    (project / "evals" / "aaa_first.yaml").write_text(text, "utf-8")  # sorts first
    cached = invoke("run")
    fresh = invoke("run", "--no-cache")
    assert cached == fresh
    assert cached[0] == 2
    assert (
        'evals/echo_token_roundtrip.yaml:1:7: case name "echo-token-roundtrip" is already'
        in (cached[2])
    )


def test_no_cache_reads_and_writes_nothing(project: Path, admitted: list[str]) -> None:
    assert invoke("run", "--no-cache")[0] == 0
    assert not (project / ".evalrunner_cache").exists()
    invoke("run")
    admitted.clear()
    assert invoke("list", "--no-cache")[0] == 0
    assert len(admitted) == 18


def test_cache_clear_removes_it_and_refuses_a_foreign_directory(project: Path) -> None:
    invoke("run")
    assert invoke("cache", "clear") == (0, "removed .evalrunner_cache\n", "")
    assert invoke("cache", "clear") == (
        0,
        "no cache at .evalrunner_cache; nothing to remove\n",
        "",
    )
    (project / ".evalrunner_cache").mkdir()
    (project / ".evalrunner_cache" / "notes.txt").write_text("mine", "utf-8")
    code, _, err = invoke("cache", "clear")
    assert code == 2
    assert err.startswith(".evalrunner_cache: not removed: it holds no evalrunner cache tag")
    assert (project / ".evalrunner_cache" / "notes.txt").exists()
    assert invoke("run")[0] == 0  # a foreign directory is ignored, not an error


@pytest.mark.parametrize("damage", [b"", b"garbage" * 100, b"SQLite format 3\x00" + b"\0" * 200])
def test_a_damaged_cache_never_breaks_a_run(project: Path, damage: bytes) -> None:
    invoke("run")
    (project / ".evalrunner_cache" / "admission.sqlite3").write_bytes(damage)
    code, out, err = invoke("run")
    assert code == 0 and err == "" and out.splitlines()[-1].startswith("18/18 cases passed")


def test_the_cache_lives_beside_the_config_file(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")
    assert invoke("run", "--config", "../evalrunner.toml")[0] == 0
    assert (project / ".evalrunner_cache").is_dir()
    assert not (project / "sub" / ".evalrunner_cache").exists()


def _tamper(project: Path, change: Any) -> None:
    import sqlite3

    with sqlite3.connect(project / ".evalrunner_cache" / "admission.sqlite3") as connection:
        rows = connection.execute("SELECT key, value FROM entries").fetchall()
        for key, value in rows:
            entry = json.loads(value)
            if "case" in entry:
                change(entry["case"])
                connection.execute(
                    "UPDATE entries SET value = ? WHERE key = ?", (json.dumps(entry), key)
                )


@pytest.mark.parametrize(
    "change",
    [
        lambda case: case.update(expects={}),
        lambda case: case["expects"].update(response_contains="hello"),
        lambda case: case["expects"].update(exact_tool_calls="x"),
        lambda case: case["expects"].update(max_tool_calls=True),
        lambda case: case["expects"].update(made_up_kind=[1]),
        lambda case: case.update(turns=[]),
        lambda case: case.update(name=5),
        lambda case: case.update(source="other.yaml"),
        lambda case: case.update(name_key="title"),
        lambda case: case.update({"class": "neutral"}),
        lambda case: case["turns"][0][1].append(["calls", [], 0, 0]),
    ],
    ids=[
        "no checks",
        "text for a list",
        "text for a count",
        "bool for a count",
        "unknown kind",
        "no turns",
        "number for a name",
        "another file",
        "unknown name key",
        "unknown class",
        "empty tool call",
    ],
)
def test_an_edited_entry_is_admitted_afresh_never_run_as_it_says(
    project: Path, change: Any
) -> None:
    fresh = invoke("run", "--no-cache", "--format", "json")
    invoke("run")
    _tamper(project, change)
    cached = invoke("run", "--format", "json")
    assert cached[0] == fresh[0] == 0
    assert timeless(cached[1]) == timeless(fresh[1])
    assert "Traceback" not in cached[2]


@pytest.mark.parametrize(
    "value",
    ["[" * 100_000 + "]" * 100_000, '{"case": ' + "[" * 100_000 + "]" * 100_000 + "}"],
    ids=["the entry", "its case"],
)
def test_an_entry_nested_past_the_recursion_limit_is_a_miss(project: Path, value: str) -> None:
    # json.loads recurses once per level: such an entry raised RecursionError from the cache.
    import sqlite3

    fresh = invoke("run", "--no-cache", "--format", "json")
    invoke("run")
    with sqlite3.connect(project / ".evalrunner_cache" / "admission.sqlite3") as connection:
        connection.execute("UPDATE entries SET value = ?", (value,))
    cached = invoke("run", "--format", "json")
    assert "Traceback" not in cached[2] and "RecursionError" not in cached[2]
    assert cached[0] == fresh[0] == 0
    assert timeless(cached[1]) == timeless(fresh[1])
