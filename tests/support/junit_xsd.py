"""The Jenkins JUnit XSD the JUnit reports are validated against, built once per process and
only by the tests that validate (xmlschema is slow to import and the XSD slow to build, so a
test module does neither when it is merely collected)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

XSD = Path(__file__).resolve().parent.parent / "data" / "jenkins-junit.xsd"


@functools.cache
def junit_schema() -> Any:
    """The ``xmlschema.XMLSchema`` of :data:`XSD`."""
    import xmlschema

    return xmlschema.XMLSchema(XSD)
