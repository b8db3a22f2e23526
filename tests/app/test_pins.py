"""The pinned test run installs exactly the pins of constraints.txt, and nothing unpinned.

``scripts/test.sh`` sets ``HUBSYNC_TEST_PINS`` to the constraints file when it installs
with the pins; ``scripts/test.sh --latest`` does not, and this check then stands aside.
"""

from __future__ import annotations

import os
import re
from importlib.metadata import distributions
from pathlib import Path

import pytest

from tests.helpers.support import REPO_ROOT

UNPINNED = frozenset({"hubsync", "pip", "setuptools", "wheel"})
"""Installed but never pinned: the project itself and the installer's own tools."""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line (names in their canonical form)."""
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and not name.startswith("#"):
            found[_canonical(name)] = version
    return found


def test_the_constraints_file_pins_every_dependency_exactly() -> None:
    pinned = pins(REPO_ROOT / "constraints.txt")
    for needed in ("click", "redis", "rq", "pydantic", "pytest", "mypy", "ruff", "psycopg"):
        assert needed in pinned, needed
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version) for version in pinned.values())


def test_the_pinned_run_installed_exactly_the_pins() -> None:
    constraints = os.environ.get("HUBSYNC_TEST_PINS")
    if not constraints:
        pytest.skip("not the pinned run of scripts/test.sh (HUBSYNC_TEST_PINS is unset)")
    pinned = pins(Path(constraints))
    installed = {_canonical(d.metadata["Name"]): d.version for d in distributions()}
    wrong = {
        name: (version, pinned.get(name))
        for name, version in installed.items()
        if name not in UNPINNED and pinned.get(name) != version
    }
    assert wrong == {}, "installed (version, pin) that differ from constraints.txt"
