"""A new fixture to fill in: ``evalrunner new NAME [--format yaml|toml|json]``.

The scaffold has the editor's schema line for its format in place, one turn with one scripted
text reply, and one expectation: ``response_contains: []``. That empty list is the part the
author must fill in. It is schema-valid, so the editor offers completion and hover on it
without a red squiggle, but admission refuses it (SPEC §4 rule 3: an empty list checks
nothing), with a message pointing at ``expects`` that says to add a check. So an unedited
scaffold can never be committed as a test that gates nothing; once one string the reply must
contain is added (or any other check), the case admits cleanly.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from evalrunner.model import Format
from evalrunner.text import name_problem, printable, printable_path
from evalrunner.toolbox.convert import SUFFIXES, rebase

DEFAULT_SCHEMA = Path("../schemas/case.bundle.schema.json")
"""Where a scaffold's schema line points, relative to the fixture's directory, by default:
the bundle of ``evalrunner schema export`` run on a ``schemas/`` directory beside the suite."""


class ScaffoldError(Exception):
    """The name cannot make a fixture (blank, or characters no file or format can hold)."""


def file_name(name: str, fmt: Format) -> str:
    """The fixture's file name: the case name lower-cased, runs of anything but letters and
    digits turned into ``_`` (``Echo round-trip`` → ``echo_round_trip.yaml``)."""
    stem = re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")
    if not stem:
        raise ScaffoldError(
            f'case name "{printable(name)}" has no letters or digits to name a file with'
        )
    return stem + SUFFIXES[fmt]


def check_name(name: str) -> None:
    """Refuse names that are blank, or that admission would refuse for their characters
    (:func:`evalrunner.text.name_problem`): control characters, bidi overrides, and bytes
    that are not UTF-8 (a command-line argument can hold them; no fixture can)."""
    if not name.strip():
        raise ScaffoldError("the case name must not be blank")
    problem = name_problem(name)
    if problem is not None:
        # printable_path: a command-line argument that is not UTF-8 shows as its bytes, \xff
        raise ScaffoldError(f'case name "{printable_path(name)}" {problem}')


def scaffold(name: str, fmt: Format, schema_reference: str) -> str:
    """The text of a new fixture named ``name`` in format ``fmt``.

    ``schema_reference`` is the schema path as seen from the fixture's directory.
    """
    check_name(name)
    # A JSON string is also a valid YAML double-quoted scalar and TOML basic string once
    # control characters are excluded, which check_name does.
    quoted = json.dumps(name, ensure_ascii=False)
    if fmt == "yaml":
        return _YAML.format(schema=schema_reference, name=quoted)
    if fmt == "toml":
        return _TOML.format(schema=schema_reference, name=quoted)
    return _JSON.format(schema=json.dumps(schema_reference), name=quoted)


def default_schema_dir(fixture_dir: Path, suite_dir: Path | None = None) -> Path:
    """Where the exported schemas live for a fixture in ``fixture_dir``: ``schemas/`` beside
    the suite (``suite_dir``) when the fixture is in it or in one of its subdirectories, else
    beside ``fixture_dir``. ``evalrunner new`` points there, and says to export there."""
    anchor = fixture_dir
    if suite_dir is not None:
        inside = os.path.relpath(os.path.abspath(fixture_dir), os.path.abspath(suite_dir))
        if inside != ".." and not inside.startswith(".." + os.sep) and not os.path.isabs(inside):
            anchor = suite_dir
    return Path(os.path.normpath(anchor / ".." / DEFAULT_SCHEMA.parent.name))


def schema_reference_for(
    fixture_dir: Path, schema: Path | None, suite_dir: Path | None = None
) -> str:
    """The schema path a scaffold in ``fixture_dir`` should carry: ``schema`` (a path from
    the working directory) made relative to it, or the bundle in :func:`default_schema_dir`
    (:data:`DEFAULT_SCHEMA` for a fixture at the top of the suite, a ``../`` more per
    subdirectory level)."""
    if schema is None:
        bundle = os.path.abspath(default_schema_dir(fixture_dir, suite_dir) / DEFAULT_SCHEMA.name)
        return Path(os.path.relpath(bundle, os.path.abspath(fixture_dir))).as_posix()
    return rebase(str(schema), Path("here"), fixture_dir / "new")


_YAML = """\
# yaml-language-server: $schema={schema}
name: {name}
description: What this case guards against, in a sentence or two.
class: positive
turns:
  - user_input: What the user says.
    steps:
      # A tool call the model makes comes first, then the reply after its result:
      # - response:
      #     type: tool_calls
      #     tool_calls:
      #       - {{id: call_1, name: echo, arguments: {{message: token_1}}}}
      - response:
          type: text
          content: What the model replies.
expects:
  # Fill in at least one string the final reply must contain, or declare another check.
  # Until then admission refuses this case: an empty list checks nothing.
  response_contains: []
"""

_TOML = """\
#:schema {schema}
name = {name}
description = "What this case guards against, in a sentence or two."
class = "positive"

[[turns]]
user_input = "What the user says."

# A tool call the model makes comes first, then the reply after its result:
# [[turns.steps]]
# response = {{ type = "tool_calls", tool_calls = [
#   {{ id = "call_1", name = "echo", arguments = {{ message = "token_1" }} }}] }}

[[turns.steps]]
response = {{ type = "text", content = "What the model replies." }}

[expects]
# Fill in at least one string the final reply must contain, or declare another check.
# Until then admission refuses this case: an empty list checks nothing.
response_contains = []
"""

_JSON = """\
{{
  "$schema": {schema},
  "name": {name},
  "description": "What this case guards against. Fill in expects before it can run.",
  "class": "positive",
  "turns": [
    {{
      "user_input": "What the user says.",
      "steps": [
        {{"response": {{"type": "text", "content": "What the model replies."}}}}
      ]
    }}
  ],
  "expects": {{
    "response_contains": []
  }}
}}
"""
