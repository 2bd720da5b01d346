"""The exported bundle, checked by the engines editors run, not by our own validator.

* YAML: yaml-language-server 1.15.0's language service (VS Code YAML, and any LSP client),
  each file finding the schema through the modeline ``evalrunner schema export`` prints.
* TOML: Taplo (``taplo check``, the engine of Even Better TOML), through the printed
  ``#:schema`` line and, separately, through the printed ``.taplo.toml`` rule.
* JSON: VS Code's own engine (vscode-json-languageservice), through the printed ``$schema``
  key, and jsonschema-rs, an implementation independent of the runtime's.

Every fixture in ``evals/regression`` must validate, and so must a case using every new kind
(tool doubles, a turn's checks, call sequences, JSON replies, the request kinds); each broken
fixture (unknown key, wrong type, empty string entry, nested typo, a broken double or turn
check, ...) must be rejected by every engine and by admission. The YAML and JSON services must
also offer the new kinds and their keys as completions where they go.
The Node tools come from ``tests/editors``, installed from its lockfile by ``npm ci`` the first
time these tests need them. These tests skip only when Node.js itself is missing.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import tomli_w
from ruamel.yaml import YAML

from evalrunner.fixture.admit import admit
from evalrunner.fixture.load import load_document
from evalrunner.toolbox.export import CASE_BUNDLE, export_files, wiring, write_export

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "evals" / "regression"
EDITORS = Path(__file__).resolve().parent / "editors"
NODE = shutil.which("node")

INSTALL = "npm ci --prefix tests/editors"
_NO_NODE = pytest.mark.skipif(
    NODE is None, reason="Node.js is not installed: the editor engines (npm packages) need it"
)


def needs_node(test: Callable[..., None]) -> Callable[..., None]:
    """The ``editors`` tier, skipped without Node.js."""
    return pytest.mark.editors(_NO_NODE(test))


BASE: dict[str, Any] = {
    "name": "broken",
    "turns": [
        {
            "user_input": "echo it",
            "steps": [
                {
                    "response": {
                        "type": "tool_calls",
                        "tool_calls": [{"id": "c1", "name": "echo", "arguments": {"message": "x"}}],
                    }
                },
                {"response": {"type": "text", "content": "done x"}},
            ],
        }
    ],
    "expects": {
        "tools_used": ["echo"],
        "tool_arguments_contain": [{"tool": "echo", "needle": "x"}],
        "tool_calls_match": {"calls": [{"tool": "echo", "arguments": {"message": "x"}}]},
    },
}

# The structured kinds, valid, in every format (and a directory down, through the path the
# wiring prints for a subdirectory): tool doubles, a turn's own checks, the request kinds.
NEW_KINDS: dict[str, Any] = {
    "name": "new-kinds",
    "tools": [
        {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
            "results": [
                {"when": {"city": "Paris"}, "returns": "Paris: 12C"},
                {"when": {"city": "Rome"}, "returns": {"city": "Rome", "temp_c": 18}},
                {"error": "unknown city"},
            ],
        }
    ],
    "turns": [
        {
            "user_input": "echo it",
            "steps": [
                {
                    "response": {
                        "type": "tool_calls",
                        "tool_calls": [{"id": "c1", "name": "echo", "arguments": {"message": "x"}}],
                    }
                },
                {"response": {"type": "text", "content": '{"echoed": "x", "note": ""}'}},
            ],
            "expects": {
                "tool_calls_match": {
                    "order": "any",
                    "extras": "forbid",
                    "calls": [
                        {
                            "tool": "echo",
                            "arguments": {"message": "x"},
                            "arguments_schema": {"type": "object", "required": ["message"]},
                            "result_contains": "x",
                            "succeeded": True,
                        }
                    ],
                },
                "response_json": {
                    "schema": {"type": "object", "required": ["echoed"]},
                    "equals": {"/echoed": "x", "/note": ""},
                },
            },
        },
        {
            "user_input": "Weather in Paris?",
            "steps": [
                {
                    "response": {
                        "type": "tool_calls",
                        "tool_calls": [
                            {"id": "w1", "name": "get_weather", "arguments": {"city": "Paris"}}
                        ],
                    }
                },
                {"response": {"type": "text", "content": '{"cities": 1}'}},
            ],
            "expects": {
                "tool_calls_match": {
                    "calls": [{"tool": "get_weather", "arguments": {"city": "Paris"}}]
                },
                "response_json": {"equals": {"/cities": 1}},
                "tools_offered": ["get_weather"],
            },
        },
    ],
    "expects": {
        "tools_offered": ["echo", "get_weather"],
        "tools_not_offered": ["delete_account"],
        "system_prompt_contains": ["weather"],
    },
}


def _set(path: tuple[str | int, ...], value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(case: dict[str, Any]) -> None:
        node: Any = case
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return mutate


def _rename(path: tuple[str | int, ...], old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def mutate(case: dict[str, Any]) -> None:
        node: Any = case
        for part in path:
            node = node[part]
        node[new] = node.pop(old)

    return mutate


BROKEN: dict[str, Callable[[dict[str, Any]], None]] = {
    "unknown_key": _set(("expect",), {"tools_used": ["echo"]}),
    "wrong_type": _set(("expects", "exact_tool_calls"), "1"),
    "empty_string_entry": _set(("expects", "tools_used"), ["echo", ""]),
    "nested_typo": _rename(("expects", "tool_arguments_contain", 0), "needle", "needel"),
    "typo_in_response": _rename(("turns", 0, "steps", 1, "response"), "content", "contents"),
    "unknown_response_type": _set(("turns", 0, "steps", 1, "response", "type"), "txt"),
    "turn_without_steps": _set(("turns", 0, "steps"), []),
    "negative_call_index": _set(("expects", "tool_arguments_contain", 0, "call_index"), -1),
    "both_names": _set(("model_name",), "broken"),
    "match_typo": _rename(("expects", "tool_calls_match", "calls", 0), "arguments", "argument"),
    "match_order": _set(("expects", "tool_calls_match", "order"), "sorted"),
    "match_blank_result": _set(("expects", "tool_calls_match", "calls", 0, "result_contains"), ""),
    "json_typo": _set(("expects", "response_json"), {"equal": {"/a": 1}}),
    "turn_match_typo": _set(
        ("turns", 0, "expects"),
        {"tool_calls_match": {"calls": [{"tool": "echo", "argument": {"message": "x"}}]}},
    ),
    "turn_unknown_kind": _set(("turns", 0, "expects"), {"tool_calls_matches": {"calls": []}}),
    "turn_expects_list": _set(("turns", 0, "expects"), [{"tools_used": ["echo"]}]),
    "offered_empty_name": _set(("expects", "tools_offered"), ["echo", ""]),
    "not_offered_a_string": _set(("expects", "tools_not_offered"), "delete_account"),
    "prompt_a_string": _set(("expects", "system_prompt_contains"), "weather"),
    "prompt_blank": _set(("expects", "system_prompt_contains"), ["  "]),
    "double_both": _set(
        ("tools",), [{"name": "echo", "results": [{"returns": "x", "error": "y"}]}]
    ),
    "double_when_a_string": _set(
        ("tools",), [{"name": "echo", "results": [{"when": "x", "returns": "x"}]}]
    ),
    "double_bad_name": _set(("tools",), [{"name": "echo it", "results": [{"returns": "x"}]}]),
    "double_no_results": _set(("tools",), [{"name": "echo", "results": []}]),
}


def broken_data(kind: str) -> dict[str, Any]:
    case = copy.deepcopy(BASE)
    BROKEN[kind](case)
    return case


def dump(data: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if fmt == "toml":
        return tomli_w.dumps(data)
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    from io import StringIO

    out = StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def printed_lines(text: str) -> dict[str, str]:
    """The lines ``schema export`` tells a user to paste, by format."""
    lines = [line.strip() for line in text.splitlines()]
    return {
        "yaml": next(x for x in lines if x.startswith("# yaml-language-server: $schema=")),
        "toml": next(x for x in lines if x.startswith("#:schema ")),
        "json": next(x for x in lines if x.startswith('"$schema": ')),
    }


def with_schema_line(text: str, fmt: str, line: str) -> str:
    """``text`` with the printed line pasted where the README says to put it."""
    if fmt == "json":
        return text.replace("{", "{\n  " + line, 1)
    return line + "\n" + text


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An exported schema dir and a fixture dir holding the suite and the broken cases, each
    with the schema line ``schema export`` printed for that directory pasted in."""
    root = tmp_path_factory.mktemp("editors")
    schemas, fixtures = root / "schemas", root / "evals" / "regression"
    fixtures.mkdir(parents=True)
    write_export(schemas, export_files())
    printed = wiring(schemas, fixtures, root)
    lines = printed_lines(printed)
    valid: dict[str, list[Path]] = {"yaml": [], "toml": [], "json": []}
    broken: dict[str, dict[str, Path]] = {"yaml": {}, "toml": {}, "json": {}}
    for source in sorted(SUITE.iterdir()):
        fmt = {".yml": "yaml"}.get(source.suffix, source.suffix[1:])
        target = fixtures / source.name
        target.write_text(with_schema_line(source.read_text("utf-8"), fmt, lines[fmt]), "utf-8")
        valid[fmt].append(target)
    for kind in BROKEN:
        for fmt in broken:
            target = fixtures / f"broken_{kind}.{fmt}"
            target.write_text(with_schema_line(dump(broken_data(kind), fmt), fmt, lines[fmt]))
            broken[fmt][kind] = target
    sub = printed.split("the path gains a ../ per level:\n", 1)[1].splitlines()[0].strip()
    nested = fixtures / "nested"
    nested.mkdir()
    for fmt, line in {"yaml": f"# yaml-language-server: $schema={sub}", "toml": f"#:schema {sub}",
                      "json": f'"$schema": "{sub}",'}.items():  # fmt: skip
        target = nested / f"new_kinds.{fmt}"
        target.write_text(with_schema_line(dump(NEW_KINDS, fmt), fmt, line), "utf-8")
        valid[fmt].append(target)
    return {"root": root, "schemas": schemas, "printed": printed, "valid": valid, "broken": broken}


def test_every_broken_fixture_is_also_refused_by_admission(workspace: dict[str, Any]) -> None:
    for fmt, files in workspace["broken"].items():
        for kind, path in files.items():
            document = load_document(path)
            assert not isinstance(document, list), (fmt, kind)
            assert isinstance(admit(document), list), f"{kind} ({fmt}) was admitted"


def test_the_suite_has_fixtures_in_every_format(workspace: dict[str, Any]) -> None:
    assert all(workspace["valid"][fmt] for fmt in ("yaml", "toml", "json"))
    for path in workspace["valid"]["yaml"] + workspace["valid"]["toml"]:
        if path.parent.name == "nested":
            document = load_document(path)
            assert not isinstance(document, list)
            assert not isinstance(admit(document), list), path


# --- JSON: jsonschema-rs, an independent implementation ----------------------------------------


def test_jsonschema_rs_accepts_the_suite_and_rejects_the_broken(workspace: dict[str, Any]) -> None:
    bundle = json.loads((workspace["schemas"] / CASE_BUNDLE).read_text("utf-8"))
    validator = jsonschema_rs.Draft7Validator(bundle)
    for source in sorted(SUITE.iterdir()):
        document = load_document(source)
        assert not isinstance(document, list)
        errors = [e.message for e in validator.iter_errors(document.data)]
        assert errors == [], (source.name, errors)
    for kind in BROKEN:
        assert not validator.is_valid(broken_data(kind)), kind


# --- Node engines ------------------------------------------------------------------------------


def node_tools() -> Path:
    """``tests/editors/node_modules``, installed from the lockfile by ``.ci/run`` (tests never
    install anything into the checkout): skipped, saying how, where it is missing."""
    modules = EDITORS / "node_modules"
    if not ((modules / "yaml-language-server").is_dir() and (modules / "@taplo" / "cli").is_dir()):
        pytest.skip(f"the editor engines are not installed: run `{INSTALL}` (.ci/run does)")
    return modules


def run_node(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    return subprocess.run(
        [NODE, *map(str, args)],
        cwd=cwd or EDITORS,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )


def language_service(mode: str, files: list[Path]) -> dict[str, list[dict[str, Any]]]:
    node_tools()
    done = run_node(EDITORS / "validate.js", mode, *files)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    return {Path(r["file"]).name: r["diagnostics"] for r in results}


@needs_node
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_language_services_accept_the_suite_and_reject_the_broken(
    workspace: dict[str, Any], fmt: str
) -> None:
    valid: list[Path] = workspace["valid"][fmt]
    broken: dict[str, Path] = workspace["broken"][fmt]
    found = language_service(fmt, valid + list(broken.values()))
    for path in valid:
        assert found[path.name] == [], (path.name, found[path.name])
    for kind, path in broken.items():
        assert found[path.name], f"{kind}: {fmt} language service found nothing wrong"
    # The diagnostics come from the schema (not, say, a failure to load it).
    assert any("not allowed" in d["message"] for d in found[broken["unknown_key"].name])
    assert any("needel" in d["message"] for d in found[broken["nested_typo"].name])


@needs_node
def test_yaml_language_service_reports_a_missing_schema(workspace: dict[str, Any]) -> None:
    """Empty diagnostics above mean "valid", not "no schema found": a wrong path is reported."""
    path = workspace["root"] / "evals" / "wrong_path.yaml"
    path.write_text(
        "# yaml-language-server: $schema=nowhere/case.bundle.schema.json\n" + dump(BASE, "yaml"),
        "utf-8",
    )
    found = language_service("yaml", [path])
    assert found[path.name], "a modeline pointing nowhere went unnoticed"


def taplo(files: list[Path], *extra: str, cwd: Path | None = None) -> tuple[int, set[str]]:
    """Run ``taplo check``; its exit code and the names of the files it found invalid."""
    modules = node_tools()
    done = run_node(modules / "@taplo" / "cli" / "dist" / "cli.js", "check", "--colors", "never",
                    *extra, *files, cwd=cwd)  # fmt: skip
    invalid = set(re.findall(r'invalid file .*?path="([^"]+)"', done.stderr))
    return done.returncode, {Path(p).name for p in invalid}


@needs_node
def test_taplo_with_the_schema_line_accepts_the_suite(workspace: dict[str, Any]) -> None:
    code, invalid = taplo(workspace["valid"]["toml"], "--no-auto-config")
    assert (code, invalid) == (0, set())


@needs_node
def test_taplo_with_the_schema_line_rejects_the_broken(workspace: dict[str, Any]) -> None:
    broken: dict[str, Path] = workspace["broken"]["toml"]
    code, invalid = taplo(list(broken.values()), "--no-auto-config")
    assert code != 0
    assert invalid == {p.name for p in broken.values()}


@needs_node
def test_taplo_with_the_printed_taplo_toml_rule(workspace: dict[str, Any]) -> None:
    """The ``.taplo.toml`` fragment as printed, in a project without ``#:schema`` lines."""
    root: Path = workspace["root"] / "project"
    suite = root / "evals" / "regression"
    suite.mkdir(parents=True)
    write_export(root / "schemas", export_files())
    printed = wiring(Path("schemas"), Path("evals/regression"), Path("."))
    block = printed.split(".taplo.toml (Taplo CLI, Even Better TOML):\n", 1)[1]
    rule = "\n".join(line.strip() for line in block.splitlines() if line.strip())
    (root / ".taplo.toml").write_text(rule + "\n", "utf-8")
    for source in SUITE.glob("*.toml"):
        shutil.copy(source, suite / source.name)
    (suite / "broken.toml").write_text(dump(broken_data("nested_typo"), "toml"), "utf-8")
    # The rule's glob reaches a subdirectory of the suite too.
    (suite / "deeper").mkdir()
    (suite / "deeper" / "broken_deeper.toml").write_text(
        dump(broken_data("match_typo"), "toml"), "utf-8"
    )
    (suite / "deeper" / "new_kinds.toml").write_text(dump(NEW_KINDS, "toml"), "utf-8")
    code, invalid = taplo(sorted(suite.rglob("*.toml")), cwd=root)
    assert code != 0
    assert invalid == {"broken.toml", "broken_deeper.toml"}


# --- completion: what an editor offers to type -----------------------------------------------

NEW_KIND_NAMES = {
    "tool_calls_match",
    "response_json",
    "tools_offered",
    "tools_not_offered",
    "system_prompt_contains",
}
MATCHERS = {"arguments", "arguments_schema", "result_contains", "succeeded"}

# Each @name marks where the cursor is; the mark itself is blanked out.
COMPLETE = {
    "yaml": """\
name: complete
tools:
  - name: get_weather
    @double
    results:
      - returns: x
        @rule
turns:
  - user_input: hi
    steps:
      - response: {type: text, content: hi}
    expects:
      @turn
expects:
  response_contains: [hi]
  tool_calls_match:
    calls:
      - tool: echo
        @call
""",
    "json": """\
{
  "name": "complete",
  "tools": [{"name": "get_weather", @double "results": [{"returns": "x", @rule}]}],
  "turns": [
    {
      "user_input": "hi",
      "steps": [{"response": {"type": "text", "content": "hi"}}],
      "expects": {
        @turn
      }
    }
  ],
  "expects": {"tool_calls_match": {"calls": [{"tool": "echo", @call}]}}
}
""",
}

OFFERED = {
    "double": {"description", "parameters"},
    "rule": {"when"},
    "turn": NEW_KIND_NAMES,
    "call": MATCHERS,
}


def cursors(text: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """``text`` without its marks, and where each was (1-based line and column)."""
    found = {}
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        for mark in re.findall(r"@(\w+)", line):
            found[mark] = (number + 1, line.index("@" + mark) + 1)
            line = line.replace("@" + mark, " " * (len(mark) + 1))
        lines[number] = line
    return "".join(lines), found


@needs_node
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_the_language_services_complete_the_new_kinds(workspace: dict[str, Any], fmt: str) -> None:
    """Doubles, a turn's checks, the request kinds and the call matchers are offered where they
    go (Taplo's command line checks TOML but does not complete, so TOML is checked above)."""
    node_tools()
    line = printed_lines(workspace["printed"])[fmt]
    text, spots = cursors(COMPLETE[fmt])
    path = workspace["root"] / "evals" / "regression" / f"complete.{fmt}"
    path.write_text(with_schema_line(text, fmt, line), "utf-8")
    shift = 1  # the schema line pasted above the first line (YAML) or after the "{" (JSON)
    for spot, (row, col) in spots.items():
        done = run_node(EDITORS / "validate.js", f"complete-{fmt}", path, row + shift, col)
        assert done.returncode == 0, done.stderr
        labels = {label.strip('"') for label in json.loads(done.stdout)["labels"]}
        assert OFFERED[spot] <= labels, (fmt, spot, sorted(labels))
