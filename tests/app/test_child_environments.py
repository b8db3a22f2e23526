"""Every child process a test starts has the scrubbed environment of ``child_environment``.

A child that inherited this machine's ``HUBSYNC_*`` or ``REDIS_URL`` could be
configured behind the test's back (another Redis, another hub). Tests start
children through ``hubsync.processes`` (``run_hubsync``, ``Child``,
``PipelineProcesses``), which scrub, or through ``subprocess`` with
``env=child_environment(...)``; a ``multiprocessing`` child, which inherits
this process's environment as it is, is started after ``scrub_environment``.
``tests/consumers/test_effect_jobs.py`` shows a child really does not see a
parent's ``HUBSYNC_*``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.support import REPO_ROOT

TESTS = REPO_ROOT / "tests"
SPAWNING = frozenset({"run", "Popen", "call", "check_call", "check_output"})
"""The ``subprocess`` functions that start a process."""


def sources() -> list[Path]:
    return sorted(path for path in TESTS.rglob("*.py") if path != Path(__file__))


def is_child_environment(node: ast.expr | None) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "child_environment"
    )


def subprocess_calls(tree: ast.AST) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "subprocess"
            and node.func.attr in SPAWNING
        ):
            yield node


def scrubbed_names(tree: ast.AST) -> set[str]:
    """Names the module assigns a ``child_environment(...)`` to."""
    return {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and is_child_environment(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def test_each_subprocess_a_test_starts_gets_the_scrubbed_environment() -> None:
    unscrubbed = []
    for path in sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = scrubbed_names(tree)
        for call in subprocess_calls(tree):
            env = next((k.value for k in call.keywords if k.arg == "env"), None)
            if not (is_child_environment(env) or (isinstance(env, ast.Name) and env.id in names)):
                unscrubbed.append(f"{path.relative_to(REPO_ROOT)}:{call.lineno}")
    assert unscrubbed == [], "subprocess calls without env=child_environment(...)"


def test_a_multiprocessing_child_starts_after_the_environment_is_scrubbed() -> None:
    unscrubbed = [
        str(path.relative_to(REPO_ROOT))
        for path in sources()
        if any(
            f"multiprocessing.{start}(" in path.read_text() for start in ("get_context", "Process")
        )
        and "scrub_environment(" not in path.read_text()
    ]
    assert unscrubbed == [], "multiprocessing children started with this environment as it is"
