"""Runs the command line in a fresh interpreter as the console script does, and says what it
imported: the start-up tests' one probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = """\
import json, sys
from evalrunner.__main__ import main
sys.argv = ["evalrunner", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exc:
    sys.stderr.write("\\nEXIT " + json.dumps(exc.code) + "\\n")
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


def modules_of(args: list[str], cwd: Path) -> tuple[set[str], object]:
    """Every module (full dotted names) ``evalrunner ARGS`` imported, and its exit code
    (``None`` when it returned without one)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    head, modules = done.stderr.rsplit("\nMODULES ", 1)
    code = json.loads(head.rsplit("\nEXIT ", 1)[1]) if "\nEXIT " in head else None
    return set(json.loads(modules)), code
