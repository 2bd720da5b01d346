"""The admission cache's store: entries round-trip to equal cases and errors; a corrupt,
foreign or unwritable cache is ignored, never an error; other builds' entries are dropped."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from evalrunner.expectations import KINDS
from evalrunner.fixture import cache as cache_module
from evalrunner.fixture.admit import admit
from evalrunner.fixture.cache import CACHE_DIR_NAME, AdmissionCache, clear
from evalrunner.fixture.load import find_fixtures, load_document
from evalrunner.model import AdmissionError, Case

ROOT = Path(__file__).resolve().parent.parent
SUITES = [
    ROOT / "evals",
    ROOT / "examples",
    ROOT / "tests" / "data",
    ROOT.parent / "shared" / "compat",
]


def outcomes() -> list[tuple[str, bytes, Case | list[AdmissionError]]]:
    found = []
    for fixture in find_fixtures([suite for suite in SUITES if suite.is_dir()]):
        document = load_document(fixture.path)
        outcome = document if isinstance(document, list) else admit(document)
        found.append((str(fixture.path), fixture.path.read_bytes(), outcome))
    return found


def same(a: Case | list[AdmissionError], b: Case | list[AdmissionError] | None) -> bool:
    if isinstance(a, Case) and isinstance(b, Case):
        return a == b and a.source == b.source and dict(a.positions) == dict(b.positions)
    return a == b


def test_every_outcome_round_trips(tmp_path: Path) -> None:
    known = outcomes()
    # The repository alone holds more than 20 of each; ../shared/compat adds more if present.
    assert sum(isinstance(o, Case) for _, _, o in known) > 20
    assert sum(isinstance(o, list) for _, _, o in known) > 20
    writer = AdmissionCache(tmp_path / CACHE_DIR_NAME)
    for shown, raw, outcome in known:
        writer.store(writer.key(shown, raw), outcome)
    writer.save()
    reader = AdmissionCache(tmp_path / CACHE_DIR_NAME)
    for shown, raw, outcome in known:
        assert same(outcome, reader.lookup(reader.key(shown, raw))), shown


def test_the_key_depends_on_the_bytes_and_the_path_shown() -> None:
    store = AdmissionCache(None)
    keys = {store.key("a.yaml", b"x"), store.key("b.yaml", b"x"), store.key("a.yaml", b"y")}
    assert len(keys) == 3


def test_the_directory_is_tagged_and_ignored_by_git(tmp_path: Path) -> None:
    store = AdmissionCache(tmp_path / "c")
    store.store(store.key("a", b""), [AdmissionError("a", "bad")])
    store.save()
    assert (
        (tmp_path / "c" / "CACHEDIR.TAG")
        .read_text()
        .startswith("Signature: 8a477f597d28d172789f06886806bc55")
    )
    assert (tmp_path / "c" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_without_a_directory_nothing_is_kept_or_written(tmp_path: Path) -> None:
    store = AdmissionCache(None)
    key = store.key("a", b"")
    store.store(key, [AdmissionError("a", "bad")])
    store.save()
    assert store.lookup(key) is None


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"not a database at all",
        b"SQLite format 3\x00" + b"\xff" * 4000,
    ],
)
def test_a_corrupt_cache_is_ignored_and_the_run_goes_on(tmp_path: Path, damage: bytes) -> None:
    directory = tmp_path / CACHE_DIR_NAME
    store = AdmissionCache(directory)
    key = store.key("a", b"x")
    store.store(key, [AdmissionError("a", "bad")])
    store.save()
    (directory / "admission.sqlite3").write_bytes(damage)
    again = AdmissionCache(directory)
    assert again.lookup(key) is None
    again.store(key, [AdmissionError("a", "bad")])
    again.save()  # no exception


def test_a_tampered_entry_is_a_miss_not_a_crash(tmp_path: Path) -> None:
    directory = tmp_path / CACHE_DIR_NAME
    store = AdmissionCache(directory)
    key = store.key("a", b"x")
    store.store(key, [AdmissionError("a", "bad")])
    store.save()
    with sqlite3.connect(directory / "admission.sqlite3") as connection:
        deep = "[" * 100_000 + "]" * 100_000  # past the decoder's recursion limit
        for value in ['{"case": {"name": 1}}', "[1, 2]", '{"errors": [[1]]}', "nonsense", deep]:
            connection.execute("UPDATE entries SET value = ?", (value,))
            connection.commit()
            assert AdmissionCache(directory).lookup(key) is None, value


def test_a_foreign_directory_is_left_alone(tmp_path: Path) -> None:
    directory = tmp_path / CACHE_DIR_NAME
    directory.mkdir()
    (directory / "mine.txt").write_text("someone else's", "utf-8")
    store = AdmissionCache(directory)
    store.store(store.key("a", b""), [AdmissionError("a", "bad")])
    store.save()
    assert sorted(p.name for p in directory.iterdir()) == ["mine.txt"]
    with pytest.raises(ValueError, match="not made by evalrunner"):
        clear(directory)
    assert (directory / "mine.txt").exists()


def test_another_builds_entries_are_misses_and_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / CACHE_DIR_NAME
    old = AdmissionCache(directory)
    old.store(old.key("a", b"x"), [AdmissionError("a", "old build")])
    old.save()
    monkeypatch.setattr(cache_module, "_fingerprint", lambda: b"another build")
    new = AdmissionCache(directory)
    assert new.lookup(new.key("a", b"x")) is None
    new.store(new.key("b", b"y"), [AdmissionError("b", "new build")])
    new.save()
    with sqlite3.connect(directory / "admission.sqlite3") as connection:
        assert connection.execute("SELECT COUNT(*) FROM entries").fetchone() == (1,)


def test_an_unwritable_cache_is_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x", "utf-8")
    store = AdmissionCache(tmp_path / "a-file" / CACHE_DIR_NAME)  # its parent is a file
    key = store.key("a", b"")
    store.store(key, [AdmissionError("a", "bad")])
    store.save()
    assert store.lookup(key) is None


def test_clear_removes_the_cache_and_says_whether_there_was_one(tmp_path: Path) -> None:
    directory = tmp_path / CACHE_DIR_NAME
    assert clear(directory) is False
    store = AdmissionCache(directory)
    store.store(store.key("a", b""), [AdmissionError("a", "bad")])
    store.save()
    assert clear(directory) is True
    assert not directory.exists()


def _write_many(directory: str, offset: int) -> None:
    store = AdmissionCache(Path(directory))
    for i in range(offset, offset + 200):
        store.store(store.key(f"f{i}", b"x"), [AdmissionError(f"f{i}", "bad")])
    store.save()


def test_concurrent_runs_do_not_corrupt_the_cache(tmp_path: Path) -> None:
    directory = tmp_path / CACHE_DIR_NAME
    _write_many(str(directory), 0)  # made first, so that the writers race on entries only
    context = multiprocessing.get_context("spawn")
    writers = [
        context.Process(target=_write_many, args=(str(directory), n * 200)) for n in range(4)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0
    store = AdmissionCache(directory)
    kept = [store.lookup(store.key(f"f{i}", b"x")) for i in range(800)]
    # A writer that found the database locked skipped writing: fewer entries, never wrong ones.
    assert all(
        entry is None or entry == [AdmissionError(f"f{i}", "bad")] for i, entry in enumerate(kept)
    )
    assert kept[0] is not None


def test_another_programs_cache_tag_does_not_make_a_directory_ours(tmp_path: Path) -> None:
    directory = tmp_path / CACHE_DIR_NAME
    directory.mkdir()
    (directory / "CACHEDIR.TAG").write_text(
        "Signature: 8a477f597d28d172789f06886806bc55 (made by borg)\n", "utf-8"
    )
    (directory / "borg-data").write_text("precious", "utf-8")
    with pytest.raises(ValueError, match="not made by evalrunner"):
        clear(directory)
    store = AdmissionCache(directory)
    store.store(store.key("a", b""), [AdmissionError("a", "bad")])
    store.save()
    assert sorted(p.name for p in directory.iterdir()) == ["CACHEDIR.TAG", "borg-data"]


def test_every_kind_round_trips_through_its_own_codec() -> None:
    # Entries are written and checked by each kind's dump and parse: the cases round-tripped
    # above use every kind, so a kind whose parse does not read back its dump fails there.
    declared = {
        kind.name
        for _, _, outcome in outcomes()
        if isinstance(outcome, Case)
        for expects in (outcome.expects, *(t.expects for t in outcome.turns if t.expects))
        for kind in KINDS
        if getattr(expects, kind.name) is not None
    }
    # system_prompt_contains needs an agent that sends a system prompt, which the suites here
    # do not run; its codec (parse_texts, dump_plain) is the one the text kinds share.
    assert declared | {"system_prompt_contains"} == {kind.name for kind in KINDS}


@pytest.mark.parametrize(
    "kind, value",
    [
        ("response_contains", "not a list"),
        ("tools_used", [1]),
        ("max_tool_calls", -1),
        ("exact_tool_calls", True),
        ("all_tools_succeeded", 1),
        ("tool_arguments_contain", [["echo", "x", None]]),
        ("tool_results_contain", [{"tool": "echo", "needle": "x", "call_index": -1}]),
        ("tool_results_contain", [{"tool": "echo", "needle": "x", "extra": 1}]),
        ("no_such_kind", [1]),
    ],
)
def test_an_entry_with_a_value_of_another_shape_is_a_miss(
    tmp_path: Path, kind: str, value: object
) -> None:
    directory = tmp_path / CACHE_DIR_NAME
    fixture = tmp_path / "a.json"
    fixture.write_text(
        json.dumps(
            {
                "name": "a",
                "turns": [
                    {"user_input": "hi", "steps": [{"response": {"type": "text", "content": "x"}}]}
                ],
                "expects": {"response_contains": ["x"]},
            }
        ),
        encoding="utf-8",
    )
    document = load_document(fixture)
    assert not isinstance(document, list)
    case = admit(document)
    assert isinstance(case, Case)
    store = AdmissionCache(directory)
    key = store.key(str(fixture), fixture.read_bytes())
    store.store(key, case)
    store.save()
    assert AdmissionCache(directory).lookup(key) == case
    with sqlite3.connect(directory / "admission.sqlite3") as connection:
        (text,) = connection.execute("SELECT value FROM entries").fetchone()
        entry = json.loads(text)
        entry["case"]["expects"][kind] = value
        connection.execute("UPDATE entries SET value = ?", (json.dumps(entry),))
        connection.commit()
    assert AdmissionCache(directory).lookup(key) is None


def test_an_edit_to_any_module_admission_runs_changes_the_build(tmp_path: Path) -> None:
    """Admission runs modules outside fixture/ (schema_check, expectations/): editing one in
    a development checkout must start from an empty cache, as editing fixture/ does."""
    import shutil
    import subprocess
    import sys

    import evalrunner

    copy = tmp_path / "checkout"
    shutil.copytree(
        Path(evalrunner.__file__).resolve().parent,
        copy / "evalrunner",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copytree(Path(evalrunner.__file__).resolve().parent.parent / "schemas", copy / "schemas")
    probe = "from evalrunner.fixture.cache import _fingerprint; print(_fingerprint().hex())"

    def build() -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=copy,
            env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    before = build()
    assert build() == before
    for module in ("schema_check.py", "expectations/_json.py"):
        edited = copy / "evalrunner" / module
        edited.write_text(edited.read_text("utf-8") + "\n# edited\n", "utf-8")
        after = build()
        assert after != before, module
        before = after
