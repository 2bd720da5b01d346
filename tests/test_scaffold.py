"""``evalrunner new``: a scaffold that is refused until its expectation is filled in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalrunner.cli import app
from evalrunner.fixture.load import load_document
from evalrunner.toolbox.scaffold import ScaffoldError, file_name, scaffold

runner = CliRunner()

FILLED = {
    "yaml": ("response_contains: []", 'response_contains: ["model replies"]'),
    "toml": ("response_contains = []", 'response_contains = ["model replies"]'),
    "json": ('"response_contains": []', '"response_contains": ["model replies"]'),
}


@pytest.mark.parametrize("fmt", ["yaml", "toml", "json"])
def test_scaffold_is_refused_until_filled_in_then_admits_and_passes(
    tmp_path: Path, fmt: str
) -> None:
    suite = tmp_path / "suite"
    created = runner.invoke(app, ["new", "Echo round-trip", "--format", fmt, "--dir", str(suite)])
    assert created.exit_code == 0, created.output
    path = suite / f"echo_round_trip.{fmt}"
    assert path.is_file()

    refused = runner.invoke(app, ["validate", str(path)])
    assert refused.exit_code == 2
    problems = [line for line in refused.stderr.splitlines() if line.startswith(str(path))]
    assert len(problems) == 1, refused.stderr
    assert "expects declares only empty lists, which check nothing" in problems[0]

    empty, filled = FILLED[fmt]
    path.write_text(path.read_text("utf-8").replace(empty, filled), "utf-8")
    assert runner.invoke(app, ["validate", str(path)]).exit_code == 0
    ran = runner.invoke(app, ["run", "--suite", str(suite)])
    assert ran.exit_code == 0, ran.output


def test_scaffold_carries_the_schema_line_for_its_format(tmp_path: Path) -> None:
    reference = "../schemas/case.bundle.schema.json"
    yaml = scaffold("x", "yaml", reference)
    assert yaml.startswith(f"# yaml-language-server: $schema={reference}\n")
    assert scaffold("x", "toml", reference).startswith(f"#:schema {reference}\n")
    assert f'"$schema": "{reference}"' in scaffold("x", "json", reference)


def test_schema_option_is_made_relative_to_the_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(
        app,
        ["new", "n", "--dir", "evals/regression", "--schema", "editor/case.bundle.schema.json"],
    )
    assert result.exit_code == 0, result.output
    first = (tmp_path / "evals/regression/n.yaml").read_text("utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../editor/case.bundle.schema.json"


def test_new_refuses_to_overwrite_and_odd_names(tmp_path: Path) -> None:
    args = ["new", "same", "--dir", str(tmp_path)]
    assert runner.invoke(app, args).exit_code == 0
    again = runner.invoke(app, args)
    assert again.exit_code == 2
    assert "already exists" in again.stderr
    for name in ["   ", "---", "bad\x07name"]:
        odd = runner.invoke(app, ["new", name, "--dir", str(tmp_path)])
        assert odd.exit_code == 2, name
        assert "Traceback" not in odd.output


def test_names_with_quotes_and_unicode_survive_every_format(tmp_path: Path) -> None:
    name = 'Café "quoted" \\ ☕'
    assert file_name(name, "toml") == "caf_quoted.toml"
    for fmt in ("yaml", "toml", "json"):
        result = runner.invoke(app, ["new", name, "--format", fmt, "--dir", str(tmp_path)])
        assert result.exit_code == 0, result.output
        document = load_document(tmp_path / f"caf_quoted.{fmt}")
        assert not isinstance(document, list)
        assert isinstance(document.data, dict) and document.data["name"] == name
    with pytest.raises(ScaffoldError):
        file_name("☕", "yaml")


# --- names `new` refuses: the same rule as admission (issue 9, classes 3 and 6) ----------------


@pytest.mark.parametrize(
    ("name", "shown", "character"),
    [
        ("a\rb", "a\\rb", "U+000D (\\r)"),
        ("\x1b[31mred", "\\x1b[31mred", "U+001B (\\x1b)"),
        ("next\x85line", "next\\x85line", "U+0085 (\\x85)"),
        ("del\x7f", "del\\x7f", "U+007F (\\x7f)"),
        ("evil\u202etxt", "evil\\u202etxt", "U+202E (\\u202e)"),
        ("iso\u2068late", "iso\\u2068late", "U+2068 (\\u2068)"),
    ],
)
def test_new_refuses_control_characters_and_bidi_overrides(
    tmp_path: Path, name: str, shown: str, character: str
) -> None:
    result = runner.invoke(app, ["new", name, "--dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr == (
        f'NAME: case name "{shown}" holds {character}, a control character or bidi override, which '
        "could change how reports print; use plain text\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_new_refuses_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    # Python hands a command-line argument that is not UTF-8 over with surrogate escapes; the
    # scaffold could not be written as UTF-8 and crashed.
    result = subprocess.run(
        [sys.executable, "-m", "evalrunner", "new", b"caf\xe9", "--dir", str(tmp_path)],
        capture_output=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == (
        b'NAME: case name "caf\\xe9" holds bytes that are not UTF-8 (\\xe9); '
        b"names must be UTF-8 text\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_new_under_a_configured_suite_dir_with_a_nul_byte_is_a_config_error(
    tmp_path: Path,
) -> None:
    config = tmp_path / "evalrunner.toml"
    config.write_text('[eval]\nsuite_dir = "cases\\u0000"\n', encoding="utf-8")
    result = runner.invoke(app, ["new", "fine name", "--config", str(config)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"{config}:2:13: eval.suite_dir holds a NUL character (\\x00), which no path or command "
        "can contain; remove it\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evalrunner.toml"]


def test_new_says_what_it_created_and_that_the_schema_is_not_exported_yet(
    tmp_path: Path,
) -> None:
    import os

    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        result = runner.invoke(app, ["new", "Fresh case"], env={})
        again = runner.invoke(app, ["new", "Second case"], env={})
    finally:
        os.chdir(before)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "note: created the directory evals/regression (the default suite; no evalrunner.toml "
        "was found)",
        "note: the schema line points at evals/schemas/case.bundle.schema.json, which does not "
        "exist yet; `evalrunner schema export evals/schemas` writes it (editors use it to "
        "complete and check the fixture)",
    ]
    assert "created the directory" not in again.stderr  # said once, when it happened


@pytest.mark.parametrize("fmt", ["yaml", "toml"])
def test_the_scaffold_shows_a_tool_call_step_and_is_refused_at_its_empty_list(
    tmp_path: Path, fmt: str
) -> None:
    text = scaffold("Tool case", fmt, "../schemas/case.bundle.schema.json")  # type: ignore[arg-type]
    assert "tool_calls" in text and "call_1" in text  # an example, commented out
    path = tmp_path / f"tool_case.{fmt}"
    path.write_text(text, encoding="utf-8")
    from evalrunner.fixture.admit import admit

    document = load_document(path)
    assert not isinstance(document, list)
    refused = admit(document)
    assert isinstance(refused, list) and len(refused) == 1
    empty_line = next(
        n for n, line in enumerate(text.splitlines(), 1) if "response_contains" in line
    )
    assert refused[0].line == empty_line


def test_new_in_a_suite_subdirectory_points_at_the_suites_schema_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `new` and `schema export` agree: the schema lives in schemas/ beside the suite, so a
    # fixture a directory down gains one ../, and the note names the directory to export to.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evalrunner.toml").write_text('[eval]\nsuite_dir = "evals"\n', "utf-8")
    result = runner.invoke(app, ["new", "n", "--dir", "evals/billing"], env={})
    assert result.exit_code == 0, result.output
    first = (tmp_path / "evals/billing/n.yaml").read_text("utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../schemas/case.bundle.schema.json"
    assert "`evalrunner schema export schemas` writes it" in result.stderr
    top = runner.invoke(app, ["new", "m", "--format", "toml"], env={})
    assert top.exit_code == 0, top.output
    first = (tmp_path / "evals/m.toml").read_text("utf-8").splitlines()[0]
    assert first == "#:schema ../schemas/case.bundle.schema.json"
    # The wiring `schema export schemas` prints for the suite agrees with both lines.
    export = runner.invoke(app, ["schema", "export", "schemas"], env={})
    assert export.exit_code == 0, export.output
    assert "#:schema ../schemas/case.bundle.schema.json" in export.stdout
    assert "    ../../schemas/case.bundle.schema.json" in export.stdout
    assert runner.invoke(app, ["validate"], env={}).exit_code == 2  # scaffolds to fill in


def test_new_outside_the_suite_keeps_schemas_beside_its_directory(tmp_path: Path) -> None:
    result = runner.invoke(app, ["new", "n", "--dir", str(tmp_path / "elsewhere")], env={})
    assert result.exit_code == 0, result.output
    first = (tmp_path / "elsewhere/n.yaml").read_text("utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schemas/case.bundle.schema.json"
