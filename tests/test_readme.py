"""The README's code runs and does what it says: the complete Python agent passes the bundled
suite and is held to conformance like any agent; the tutorial's tool and library snippet run
through it; the report page names every field of the report schema."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

from evalrunner import SuiteReport, run_suite

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
TUTORIAL = (ROOT / "docs" / "tutorials" / "python-agent.md").read_text(encoding="utf-8")


def python_blocks(text: str = README) -> list[str]:
    return [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]


def readme_agent() -> types.ModuleType:
    (block,) = [b for b in python_blocks() if "def make_agent(" in b]
    module = types.ModuleType("readme_agent")
    exec(compile(block, "README.md (Python agent)", "exec"), module.__dict__)
    return module


def test_the_readme_python_agent_passes_the_bundled_suite() -> None:
    outcome = run_suite(ROOT / "evals" / "regression", agent_factory=readme_agent().make_agent)
    assert isinstance(outcome, SuiteReport)
    failed = [(c.name, c.error, [g for g in c.grades if not g.passed]) for c in outcome.cases]
    assert outcome.all_passed, [f for f in failed if f[1] or f[2]]
    assert len(outcome.cases) == 18


def test_the_readme_python_agent_is_held_to_conformance() -> None:
    # The same agent without the line that keeps the model's calls in its history: caught.
    module = readme_agent()

    class Forgetful(module.MyAgent):  # type: ignore[name-defined,misc]
        def respond(self, user_input: str) -> str:
            reply: str = super().respond(user_input)
            self.history[:] = [m for m in self.history if not m.tool_calls]
            return reply

    outcome = run_suite(ROOT / "evals" / "regression", agent_factory=Forgetful)
    assert isinstance(outcome, SuiteReport)
    errors = {c.name: c.error for c in outcome.cases if c.error}
    assert errors["multi-turn-tool-loop"] == (
        "turn 2, model request 1: history message 2 should be the assistant's tool calls "
        '"call_t1" (echo), but is a result for tool call "call_t1"'
    )


def test_the_readme_agent_is_the_tutorials_agent() -> None:
    (tutorial,) = [b for b in python_blocks(TUTORIAL) if "def make_agent(" in b]
    (readme,) = [b for b in python_blocks() if "def make_agent(" in b]
    assert tutorial.removeprefix("# my_agent.py\n") == readme


def test_the_tutorial_tool_runs_through_the_readme_agent() -> None:
    (block,) = [b for b in python_blocks(TUTORIAL) if "class Upper" in b]
    tools = types.ModuleType("readme_tools")
    exec(compile(block, "README.md (tool)", "exec"), tools.__dict__)
    from evalrunner.fixture.admit import admit
    from evalrunner.fixture.load import parse_document
    from evalrunner.model import Case
    from evalrunner.session import evaluate_case

    fixture = """
name: upper-once
turns:
  - user_input: shout hello
    steps:
      - response: {type: tool_calls, tool_calls: [{id: c1, name: upper, arguments: {text: hello}}]}
      - response: {type: text, content: HELLO}
  - user_input: shout a number
    steps:
      - response: {type: tool_calls, tool_calls: [{id: c2, name: upper, arguments: {text: 7}}]}
      - response: {type: text, content: could not}
expects:
  tool_results_contain: [{tool: upper, needle: HELLO, call_index: 0}]
  all_tools_succeeded: false
"""
    document = parse_document(fixture.encode(), "yaml", Path("upper.yaml"))
    assert not isinstance(document, list)
    case = admit(document)
    assert isinstance(case, Case), case
    report = evaluate_case(
        case, agent_factory=readme_agent().make_agent, tools=lambda: {"upper": tools.Upper()}
    )
    assert report.passed, report


def test_the_json_report_fields_table_names_every_field_of_the_schema() -> None:
    # The table is the docs' account of the report; a field the schema gains must be
    # explained there too (a report field added without docs once went unnoticed).
    import json
    import re

    readme = (ROOT / "docs" / "reference" / "reports.md").read_text(encoding="utf-8")
    start = readme.index("## JSON report")
    table = readme[start : readme.index("\n\n", readme.index("| field |", start))]
    named = set(re.findall(r"`(?:cases\[\])?\.?([a-z_]+)`", table))
    named |= {"cases"} if "`cases[]." in table else set()
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text(encoding="utf-8"))
    case = schema["$defs"]["case"]["properties"]
    missing = (set(schema["properties"]) | set(case)) - named
    assert not missing, missing


# The pages a reader reaches from the repository's front page, outside the site (whose links
# mkdocs --strict checks): each relative link must reach a file, and each anchor a heading.
LINKED_PAGES = ["README.md", "CONTRIBUTING.md"] + sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*/README.md")
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """A page without its fenced blocks (a link in code is not a link)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def slugs(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings, as GitHub makes them and as the site's
    Markdown does (a repeated heading gains ``-1``, ``-2``...)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", prose(path.read_text("utf-8")), re.M):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
        github = re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")
        site = re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", plain).strip())
        for slug in {github, site}:
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if not count else f"{slug}-{count}")
    return found


@pytest.mark.parametrize("page", LINKED_PAGES)
def test_every_relative_link_and_anchor_of_a_front_page_resolves(page: str) -> None:
    source = ROOT / page
    targets = LINK.findall(prose(source.read_text(encoding="utf-8")))
    relative = [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]
    broken = []
    for target in relative:
        file_part, _, anchor = target.partition("#")
        path = (source.parent / file_part).resolve() if file_part else source
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (path.is_dir() or anchor not in slugs(path)):
            broken.append(f"{target}: no heading has the anchor #{anchor}")
    assert not broken, (page, broken)
