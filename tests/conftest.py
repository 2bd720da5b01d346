"""Shared test set-up: hypothesis profiles, and the environment every test starts from.

Test tiers (markers, registered in pyproject.toml with ``--strict-markers``):

- default (``pytest``): everything not marked below; a couple of minutes on two cores.
- ``slow``: the expensive end-to-end matrices (``mutate`` over every agent path, the SDK
  agents over the whole suite). The default tier keeps one fast case of each path.
- ``fuzz``: property tests that throw many generated inputs at a boundary.
- ``editors``: the editors' own language servers against the exported schemas (Node.js).

``pytest -m ""`` runs every tier. Hypothesis depth comes from a profile, never from a test:
``dev`` (the default), ``ci`` and ``exhaustive``, chosen with ``--hypothesis-profile NAME``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis keeps caches (not only its example database) under ./.hypothesis unless told
# otherwise; tests write nothing into the checkout.
os.environ.setdefault(
    "HYPOTHESIS_STORAGE_DIRECTORY", str(Path(tempfile.gettempdir()) / "evalrunner-tests-hypothesis")
)

# Most tests start Python processes (evalrunner, agents). Told not to write bytecode (as
# container images often are, to keep the source tree clean), each of them compiles every
# module it imports from source again. Their bytecode goes to a cache under the temporary
# directory instead: still nothing in the checkout, and a module compiled once. The xdist
# workers, started after this runs, and every process a test starts inherit it.
if os.environ.get("PYTHONDONTWRITEBYTECODE"):
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ.setdefault(
        "PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "evalrunner-tests-pycache")
    )

_COMMON = {
    "deadline": None,  # a loaded CI machine must not turn a slow example into a failure
    "database": None,  # nothing is written into the checkout
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("dev", max_examples=25, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("ci", max_examples=400, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("exhaustive", max_examples=4000, **_COMMON)  # type: ignore[arg-type]
settings.load_profile("dev")


@pytest.fixture(autouse=True)
def _not_under_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """``evalrunner run`` prints GitHub annotations when GITHUB_ACTIONS=true: tests that read
    its table must read the same wherever they run (tests of that switch set it themselves)."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _in_a_directory_of_its_own(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Every test starts in an empty temporary directory of its own, so a run that writes
    beside its project (the admission cache) writes there, never into the checkout; a test
    that needs the repository names it (``ROOT``). One that still leaves a cache in the
    checkout fails."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    projects = [_ROOT, *(p for p in _ROOT.glob("examples/*") if p.is_dir())]
    caches = [project / ".evalrunner_cache" for project in projects]
    existed = {cache for cache in caches if cache.exists()}
    yield
    left = [cache for cache in caches if cache not in existed and cache.exists()]
    for cache in left:
        shutil.rmtree(cache, ignore_errors=True)
    if left:
        pytest.fail(f"the test left {left[0]} in the checkout: give it --no-cache or a copy")
