"""Selecting what runs (issue 10 §1, §6): ``run [PATH ...]``, recursive discovery, ``-k``,
``--shard``, ``list`` and ``--continue-on-admission-errors``, through the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.schemas import report_validator

runner = CliRunner()


def fixture(name: str, *, cls: str | None = None, passing: bool = True, turns: int = 1) -> str:
    """A YAML fixture that passes (or fails on its reply)."""
    reply = "hi there" if passing else "bye"
    lines = [f"name: {name}"]
    if cls is not None:
        lines.append(f"class: {cls}")
    lines.append("turns:")
    for _ in range(turns):
        lines += [
            "  - user_input: say hi",
            "    steps:",
            f"      - response: {{type: text, content: {reply}}}",
        ]
    lines += ["expects:", "  response_contains: [hi]"]
    return "\n".join(lines) + "\n"


BROKEN = "name: broken\nturns: []\nexpects: {}\n"


def make(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


SUITE = {
    "top.yaml": fixture("top-level", cls="positive"),
    "smoke/echo.yaml": fixture("echo-smoke", cls="positive"),
    "smoke/slow_echo.yaml": fixture("echo-slow", cls="negative", passing=False),
    "deep/er/nested.yaml": fixture("nested-case", turns=2),
    "a-b.yaml": fixture("dash-file"),
    ".hidden/skipped.yaml": fixture("hidden-case"),
    ".dotfile.yaml": fixture("dot-case"),
    "notes.txt": "not a fixture",
}
ORDER = ["dash-file", "nested-case", "echo-smoke", "echo-slow", "top-level"]
"""Suite order: a-b.yaml, deep/er/nested.yaml, smoke/echo.yaml, smoke/slow_echo.yaml,
top.yaml: by fixture path, one component at a time."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make(tmp_path / "evals", SUITE)
    (tmp_path / "evalrunner.toml").write_text('[eval]\nsuite_dir = "evals"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={"EVALRUNNER_SUITE_DIR": None})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def run_json(*args: str) -> tuple[int, dict[str, object], str]:
    code, out, err = invoke("run", "--format", "json", *args)
    assert out, err
    data = json.loads(out)
    assert not list(report_validator().iter_errors(data))
    return code, data, err


def names(data: dict[str, object]) -> list[str]:
    cases = data["cases"]
    assert isinstance(cases, list)
    return [case["name"] for case in cases]


# --- paths and discovery -----------------------------------------------------------------------


def test_the_configured_suite_is_searched_recursively_skipping_dot_entries(
    project: Path,
) -> None:
    code, data, _ = run_json()
    assert code == 1  # echo-slow fails
    assert names(data) == ORDER
    cases = data["cases"]
    assert isinstance(cases, list)
    assert [c["source"] for c in cases] == [
        "a-b.yaml",
        "deep/er/nested.yaml",
        "smoke/echo.yaml",
        "smoke/slow_echo.yaml",
        "top.yaml",
    ]
    assert data["suite"] == "evals"
    assert "keyword" not in data and "shard" not in data and "admission_errors" not in data


def test_the_suite_order_is_by_file_not_by_case_name() -> None:
    # smoke/echo.yaml < smoke/slow_echo.yaml by path, though "echo-slow" < "echo-smoke"
    assert ORDER.index("echo-smoke") < ORDER.index("echo-slow")


def test_paths_select_files_and_directories(project: Path) -> None:
    _, data, _ = run_json("evals/smoke")
    assert names(data) == ["echo-smoke", "echo-slow"]
    assert data["suite"] == "evals/smoke"
    code, data, _ = run_json("evals/top.yaml", "evals/deep")
    assert code == 0
    assert names(data) == ["nested-case", "top-level"]  # suite order, not argument order
    assert data["suite"] == "evals/top.yaml evals/deep"


def test_a_file_given_twice_or_inside_a_given_directory_runs_once(project: Path) -> None:
    _, data, _ = run_json("evals/smoke", "evals/smoke/echo.yaml", "evals/smoke/echo.yaml")
    assert names(data) == ["echo-smoke", "echo-slow"]


def test_an_explicit_dot_directory_or_dotfile_is_honoured(project: Path) -> None:
    _, data, _ = run_json("evals/.hidden", "evals/.dotfile.yaml")
    assert names(data) == ["dot-case", "hidden-case"]


def test_suite_option_still_works_and_cannot_be_mixed_with_paths(project: Path) -> None:
    _, data, _ = run_json("--suite", "evals/smoke")
    assert names(data) == ["echo-smoke", "echo-slow"]
    code, out, err = invoke("run", "evals/top.yaml", "--suite", "evals")
    assert (code, out) == (2, "")
    assert err == "--suite: give fixture PATHs or --suite DIR, not both\n"
    code, _, err = invoke("run", "--suite", "evals/top.yaml")
    assert code == 2
    assert err == "evals/top.yaml: is a file, not a suite directory\n"


def test_missing_and_empty_paths_are_refused(project: Path) -> None:
    (project / "empty" / "sub").mkdir(parents=True)
    code, out, err = invoke("run", "nope")
    assert (code, out, err) == (2, "", "nope: suite directory not found\n")
    code, _, err = invoke("run", "empty")
    assert code == 2
    assert err.startswith("empty: no fixtures found (files ending in .json, .yaml, .yml, .toml")
    code, _, err = invoke("run", "evals/missing.yaml")
    assert code == 2
    assert err.startswith("evals/missing.yaml: cannot read file: No such file or directory")


def test_links_to_directories_are_followed_but_not_into_a_loop(project: Path) -> None:
    (project / "evals" / "smoke" / "loop").symlink_to("..")  # to an ancestor: not followed
    (project / "evals" / "smoke" / "self").symlink_to(".")
    make(project / "shared", {"common.yaml": fixture("shared-case")})
    (project / "evals" / "smoke" / "shared").symlink_to(project / "shared")
    (project / "evals" / "smoke" / "shared-again").symlink_to(project / "shared")
    _, data, _ = run_json("evals/smoke")
    assert names(data) == ["echo-smoke", "shared-case", "echo-slow"]
    cases = data["cases"]
    assert isinstance(cases, list)
    assert cases[1]["source"] == "shared/common.yaml"  # the first of the two links, once


def test_an_unreadable_subdirectory_refuses_the_run(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = project / "evals" / "locked"
    locked.mkdir()
    real_scandir = os.scandir

    def scandir(path: str | Path) -> object:
        # As chmod 0 would, even for root, who may list any directory.
        if Path(path) == Path("evals/locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr("evalrunner.fixture.load.os.scandir", scandir)
    code, out, err = invoke("run")
    assert (code, out) == (2, "")
    assert err == "evals/locked: cannot read suite directory: Permission denied\n"


def test_validate_searches_recursively_too(project: Path) -> None:
    code, out, _ = invoke("validate")
    assert (code, out) == (0, "5 fixture(s) admitted\n")
    make(project / "evals", {"smoke/deeper/broken.yaml": BROKEN})
    code, _, err = invoke("validate", "evals/smoke")
    assert code == 2
    assert err.splitlines()[0].startswith("evals/smoke/deeper/broken.yaml:")


# --- -k ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("echo", ["echo-smoke", "echo-slow"]),
        ("ECHO and not slow", ["echo-smoke"]),
        ("smoke", ["echo-smoke", "echo-slow"]),  # the subdirectory's name
        ("slow_echo.yaml", ["echo-slow"]),  # the file name
        ("negative", ["echo-slow"]),  # the class
        ("positive or nested", ["nested-case", "echo-smoke", "top-level"]),
        ("not (echo or top)", ["dash-file", "nested-case"]),
        ("er/", ["nested-case"]),
        ("a-b", ["dash-file"]),
        ("", ORDER),
    ],
)
def test_k_selects_exactly_the_expected_cases(
    project: Path, expression: str, expected: list[str]
) -> None:
    _, data, _ = run_json("-k", expression)
    assert names(data) == expected
    # A blank -k is no -k: the report says none, so shards run either way merge.
    assert data.get("keyword") == (expression if expression.strip() else None)
    assert data["total"] == len(expected)


def test_k_combines_with_paths(project: Path) -> None:
    _, data, _ = run_json("evals/smoke", "evals/top.yaml", "-k", "not slow")
    assert names(data) == ["echo-smoke", "top-level"]


def test_k_that_matches_nothing_is_refused(project: Path) -> None:
    code, out, err = invoke("run", "-k", "zebra")
    assert (code, out) == (2, "")
    assert err == (
        "-k 'zebra': no case matches, of 5 admitted; names, fixture paths and classes are "
        "matched as case-insensitive substrings\n"
    )


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("echo and", '-k \'echo and\': column 9: expected a name, "not" or "(", got the end'),
        ("(echo", '-k \'(echo\': column 6: expected ")" to close the "(" at column 1'),
        ("echo\r", "-k 'echo\\r': column 5: unexpected character U+000D"),
        ("\x1b[2J", "-k '\\x1b[2J': column 1: unexpected character U+001B"),
        ("(" * 100_000, "-k: the expression is 100000 characters long"),
        ("(" * 1000, "-k '((((((((("),
        ("x" * 100_000, "-k: the expression is 100000 characters long; at most 4096"),
        ("not " * 1000 + "x", "nested more than 64 levels deep"),
        ("\u202eecho", "column 1: unexpected character U+202E"),
    ],
)
def test_malformed_k_is_exit_2_before_anything_runs(
    project: Path, expression: str, message: str
) -> None:
    code, out, err = invoke("run", "-k", expression)
    assert (code, out) == (2, "")
    assert message in err
    assert len(err.splitlines()) == 1 and len(err) < 400
    assert not any(ch in err for ch in "\x1b\r\u202e")


def test_k_and_shard_errors_are_reported_together(project: Path) -> None:
    code, _, err = invoke("run", "-k", "a and", "--shard", "0/2")
    assert code == 2
    assert [line.split(":")[0] for line in err.splitlines()] == ["-k 'a and'", "--shard 0/2"]


# --- --shard -----------------------------------------------------------------------------------


def test_shards_split_the_selected_cases_and_record_the_slice(project: Path) -> None:
    seen: list[str] = []
    for index in (1, 2, 3):
        code, data, _ = run_json("--shard", f"{index}/3")
        assert len(data["shard"].pop("suite_fingerprint")["cases"]) == 5  # all shards' cases
        assert data["shard"] == {"index": index, "count": 3, "selected": 5}
        assert code == (1 if "echo-slow" in names(data) else 0)
        assert names(data) == [n for n in ORDER if n in names(data)]  # suite order within
        assert data["total"] == len(names(data)) in (1, 2)
        seen += names(data)
    assert sorted(seen) == sorted(ORDER)


def test_shards_apply_after_k(project: Path) -> None:
    both = [names(run_json("-k", "echo", "--shard", f"{i}/2")[1]) for i in (1, 2)]
    assert sorted(both[0] + both[1]) == ["echo-slow", "echo-smoke"]
    assert [len(piece) for piece in both] == [1, 1]


def test_more_shards_than_cases_gives_empty_passing_shards(project: Path) -> None:
    empties = 0
    for index in range(1, 8):
        code, data, _ = run_json("--shard", f"{index}/7")
        assert len(data["shard"].pop("suite_fingerprint")["cases"]) == 5  # all shards' cases
        assert data["shard"] == {"index": index, "count": 7, "selected": 5}
        empties += data["total"] == 0
        if data["total"] == 0:
            assert code == 0
    assert empties == 2


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2", "--shard: expected I/N, shard I of N, such as 1/3; got '2'"),
        ("0/3", "--shard 0/3: the shard number I must be from 1 to N (3)"),
        ("4/3", "--shard 4/3: the shard number I must be from 1 to N (3)"),
        ("1/0", "--shard 1/0: the shard count N must be from 1 to 10000, got 0"),
        ("1/20000", "--shard 1/20000: the shard count N must be from 1 to 10000, got 20000"),
        ("1/" + "9" * 400, "--shard: expected I/N"),
        ("1/3\r", None),  # stripped: a CRLF script's \r is whitespace
        ("1/3\x1b", "--shard: expected I/N, shard I of N, such as 1/3; got '1/3\\x1b'"),
        ("one/three", "--shard: expected I/N"),
    ],
)
def test_bad_shard_is_exit_2_with_what_would_be_right(
    project: Path, value: str, message: str | None
) -> None:
    code, out, err = invoke("run", "--shard", value)
    if message is None:
        assert code in (0, 1)
        return
    assert (code, out) == (2, "")
    assert err.startswith(message)
    assert "\x1b" not in err and len(err.splitlines()) == 1


# --- list --------------------------------------------------------------------------------------


def test_list_shows_every_case_without_running(project: Path) -> None:
    code, out, err = invoke("list")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "NAME         FILE                        CLASS     TURNS  EXPECTS",
        "dash-file    evals/a-b.yaml              -         1      response_contains",
        "nested-case  evals/deep/er/nested.yaml   -         2      response_contains",
        "echo-smoke   evals/smoke/echo.yaml       positive  1      response_contains",
        "echo-slow    evals/smoke/slow_echo.yaml  negative  1      response_contains",
        "top-level    evals/top.yaml              positive  1      response_contains",
        "5 case(s)",
    ]


def test_list_json_with_k_and_shard(project: Path) -> None:
    code, out, _ = invoke("list", "-k", "echo or nested", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["keyword"] == "echo or nested" and data["shard"] is None
    assert data["cases"][0] == {
        "name": "nested-case",
        "file": "evals/deep/er/nested.yaml",
        "source": "deep/er/nested.yaml",
        "class": None,
        "turns": 2,
        "expects": ["response_contains"],
    }
    assert [c["name"] for c in data["cases"]] == ["nested-case", "echo-smoke", "echo-slow"]
    listed = []
    for index in (1, 2):
        code, out, _ = invoke("list", "--shard", f"{index}/2", "--format", "json")
        data = json.loads(out)
        assert data["shard"] == {"index": index, "count": 2, "selected": 5}
        listed += [c["name"] for c in data["cases"]]
        # what list says a shard holds is what run runs
        assert names(run_json("--shard", f"{index}/2")[1]) == [c["name"] for c in data["cases"]]
    assert sorted(listed) == sorted(ORDER)


def test_list_table_names_the_shard(project: Path) -> None:
    _, out, _ = invoke("list", "--shard", "1/2")
    assert out.splitlines()[-1] == "3 case(s) in shard 1/2, of 5 selected"


def test_list_refuses_like_validate(project: Path) -> None:
    make(project / "evals", {"deep/broken.yaml": BROKEN})
    code, out, err = invoke("list")
    assert (code, out) == (2, "")
    assert err.splitlines()[0].startswith("evals/deep/broken.yaml:")
    assert err.splitlines()[-1].endswith("; nothing was run")
    code, _, err = invoke("list", "evals/smoke", "-k", "nothing-like-this")
    assert code == 2 and "no case matches, of 2 admitted" in err
    code, _, err = invoke("list", "--format", "xml")
    assert code == 2 and "xml" in err


def test_list_escapes_what_a_terminal_would_act_on(project: Path) -> None:
    weird = project / "odd" / os.fsdecode(b"caf\xe9\x1b.yaml")
    weird.parent.mkdir()
    weird.write_text(fixture("odd-case"), encoding="utf-8")
    code, out, _ = invoke("list", "odd")
    assert code == 0
    assert "odd/caf\\xe9\\x1b.yaml" in out and "\x1b" not in out
    code, out, _ = invoke("list", "odd", "--format", "json")
    assert json.loads(out)["cases"][0]["source"] == "caf\\xe9\x1b.yaml"
    assert "\x1b" not in out  # JSON-escaped


# --- --continue-on-admission-errors ------------------------------------------------------------


def test_a_shard_under_continue_says_what_it_ran(project: Path) -> None:
    """A shard's job log counts the cases that shard ran, not those of every shard."""
    make(project / "evals", {"zz.json": "{"})
    code, _, err = invoke("run", "--continue-on-admission-errors", "--shard", "1/2", "-q")
    assert code == 2
    _, data, _ = run_json("--continue-on-admission-errors", "--shard", "1/2")
    ran, selected = len(data["cases"]), data["shard"]["selected"]
    assert 0 < ran < selected
    assert err.splitlines()[-1].endswith(
        f"which were skipped; shard 1/2 ran {ran} of the {selected} admitted case(s)"
    )


def test_without_the_flag_one_refused_file_blocks_every_case(project: Path) -> None:
    make(project / "evals", {"deep/broken.yaml": BROKEN})
    code, out, err = invoke("run")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].endswith("nothing was run")


def test_continue_runs_the_admitted_cases_and_still_exits_2(project: Path) -> None:
    make(project / "evals", {"deep/broken.yaml": BROKEN, "zz.json": "{"})
    code, out, err = invoke("run", "--continue-on-admission-errors", "-k", "not slow")
    assert code == 2
    assert out.splitlines()[-1].startswith("4/4 cases passed (2 files refused) in ")
    lines = err.splitlines()
    assert lines[0].startswith("evals/deep/broken.yaml:2:")  # with positions
    assert lines[-2].startswith("evals/zz.json:1:2: invalid JSON")
    assert lines[-1] == (
        f"--continue-on-admission-errors: {len(lines) - 1} problem(s) in 2 file(s), which were "
        "skipped; the 4 admitted case(s) ran"
    )
    code, data, _ = run_json("--continue-on-admission-errors", "evals/zz.json", "evals/top.yaml")
    assert code == 2
    assert data["all_passed"] is False
    assert names(data) == ["top-level"]
    errors = data["admission_errors"]
    assert isinstance(errors, list) and errors[0]["path"] == "evals/zz.json"
    assert (errors[0]["line"], errors[0]["col"]) == (1, 2)


def test_continue_with_nothing_admitted_runs_nothing(project: Path) -> None:
    make(project / "other", {"broken.yaml": BROKEN, "sub/bad.json": "[1,"})
    code, out, err = invoke("run", "--continue-on-admission-errors", "other")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].endswith("nothing was run")


def test_continue_takes_no_value(project: Path) -> None:
    code, _, err = invoke("run", "--continue-on-admission-errors=yes")
    assert code == 2
    assert "does not take a value" in err


def test_continue_puts_the_refused_files_in_junit_and_github_annotations(project: Path) -> None:
    import xmlschema

    make(project / "evals", {"deep/broken.yaml": BROKEN})
    code, out, _ = invoke(
        "run", "--continue-on-admission-errors", "--format", "github", "--junit-xml", "j.xml"
    )
    assert code == 2
    refused = [line for line in out.splitlines() if "fixture refused" in line]
    assert refused and all("file=evals/deep/broken.yaml,line=" in line for line in refused)
    schema = xmlschema.XMLSchema(Path(__file__).parent / "data" / "jenkins-junit.xsd")
    schema.validate(str(project / "j.xml"))
    xml = (project / "j.xml").read_text(encoding="utf-8")
    assert 'classname="evals/deep/broken.yaml" name="admission"' in xml
    assert 'name="echo-smoke"' in xml  # the admitted cases are there too
    assert "; the file was skipped: " in xml and "nothing was run" not in xml
