"""The import rule of the layout: each floor imports only itself and the floors below it.

``hubsync.core`` (the kernel) imports nothing outside itself; ``hubstore`` builds on the
kernel; ``producers`` on the kernel and ``hubstore`` (the fence of its effects ledger);
``consumers`` on all three. The application (``hubsync.cli``, ``hubsync.demo``, the fault
injector and invariant checker ``hubsync.faults`` and the rest of ``hubsync``) may import
anything but the tests, and nothing below it imports it. Every import counts, a function's
deferred one too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers.support import REPO_ROOT

TOP = ("hubsync", "producers", "consumers", "hubstore")
ALLOWED = {
    "hubsync/core": ("hubsync.core",),
    "hubstore": ("hubsync.core", "hubstore"),
    "producers": ("hubsync.core", "hubstore", "producers"),
    "consumers": ("hubsync.core", "hubstore", "producers", "consumers"),
}


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name a file imports, wherever the import stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: a relative import"
            found.add(node.module)
            # "from hubsync import x" may name a module of the package
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _inside(module: str, floors: tuple[str, ...]) -> bool:
    return any(module == floor or module.startswith(floor + ".") for floor in floors)


@pytest.mark.parametrize("floor", sorted(ALLOWED))
def test_a_floor_imports_only_itself_and_the_floors_below(floor: str) -> None:
    wrong = sorted(
        f"{path.relative_to(REPO_ROOT)} -> {module}"
        for path in (REPO_ROOT / floor).rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[0] in TOP and not _inside(module, ALLOWED[floor])
    )
    assert wrong == []


@pytest.mark.parametrize("package", TOP)
def test_no_package_imports_the_tests(package: str) -> None:
    # the demo and the chaos soak share hubsync.faults: it must stand without tests/
    wrong = sorted(
        f"{path.relative_to(REPO_ROOT)} -> {module}"
        for path in (REPO_ROOT / package).rglob("*.py")
        for module in imported_modules(path)
        if module.split(".")[0] == "tests"
    )
    assert wrong == []


def test_the_rule_sees_a_deferred_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from hubsync.cli.main import main\n", encoding="utf-8")
    assert "hubsync.cli.main" in imported_modules(sample)
    assert not _inside("hubsync.cli.main", ALLOWED["hubsync/core"])
