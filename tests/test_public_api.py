"""The public surface is one table: ``evalrunner._EXPORTS`` (name -> module). ``__all__`` and
the names imported for type checkers must say the same, or a name is public in one place only."""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

import evalrunner

INIT = Path(evalrunner.__file__)


def _type_checking_imports() -> dict[str, str]:
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imported in node.body:
                assert isinstance(imported, ast.ImportFrom) and imported.module
                for alias in imported.names:
                    names[alias.asname or alias.name] = imported.module
    return names


def test_all_names_exactly_the_table() -> None:
    assert sorted(set(evalrunner.__all__) - {"__version__"}) == sorted(evalrunner._EXPORTS)
    assert len(evalrunner.__all__) == len(set(evalrunner.__all__))


def test_type_checkers_see_each_name_where_it_is_served_from() -> None:
    assert _type_checking_imports() == evalrunner._EXPORTS


def test_each_name_is_defined_or_reexported_by_its_module() -> None:
    for name, module in evalrunner._EXPORTS.items():
        assert hasattr(importlib.import_module(module), name), (name, module)


def test_the_issue_s_public_surface_is_there() -> None:
    # The model, the boundary protocols, the run core, configuration and the report renderers.
    wanted = {
        "Case",
        "Expectations",
        "RunRecord",
        "SuiteReport",
        "Agent",
        "Tool",
        "ModelProvider",
        "Observer",
        "run_suite",
        "load_config",
        "render_table",
        "render_json",
        "render_junit",
        "render_github",
    }
    assert wanted <= set(evalrunner.__all__)


def test_no_two_classes_of_the_package_share_a_name() -> None:
    # A name read in a traceback, a log or a review should say which class it is.
    package = INIT.parent
    defined: defaultdict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                defined[node.name].append(f"{path.relative_to(package)}:{node.lineno}")
    assert {name: where for name, where in defined.items() if len(where) > 1} == {}
