"""Helpers the tests share: waiting on conditions with a deadline, never bare sleeps."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NoReturn, TypeVar

import pytest

from hubsync.demo.embedded_redis import redis_server_binary
from hubsync.processes import child_environment, poll_until

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout's root, wherever a test file sits below ``tests/``."""


def start_python(*args: str) -> subprocess.Popen[str]:
    """``python ARGS`` (this interpreter) from the checkout's root, on ``child_environment()``,
    its stdout and stderr piped as text."""
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_environment(),
    )


def unavailable(reason: str) -> NoReturn:
    """Skip the test for want of something (``reason``); in CI (``CI`` set) fail it instead:
    there scripts/test.sh installs what the tests need."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: it is required in CI (scripts/test.sh installs it)")
    pytest.skip(reason)


def require_redis_server() -> None:
    """Skip the test without ``redis-server``; in CI fail it instead."""
    if redis_server_binary() is None:
        unavailable("redis-server is not installed")


def require_tool(name: str, package: str) -> str:
    """The path of the command ``name``; skip the test without it (naming Debian's
    ``package``), and in CI fail it instead."""
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} is not installed (apt-get install -y {package})")
    return path


def run_tool(name: str, package: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the system command ``name`` (``require_tool``'s rules) with ``args``, in the
    scrubbed environment; its text output captured, whatever its exit code."""
    return subprocess.run(
        [require_tool(name, package), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=child_environment(),
    )


def wait_until(
    condition: Callable[[], T], timeout: float = 10.0, interval: float = 0.01, what: str = ""
) -> T:
    """Poll ``condition`` until it returns a truthy value; fail the test at the deadline."""
    return poll_until(
        condition,
        timeout,
        interval,
        lambda: AssertionError(f"timed out after {timeout}s waiting for {what or condition}"),
    )


def scrub_environment(monkeypatch: pytest.MonkeyPatch, *prefixes: str) -> None:
    """Drop from this process's environment, for the test, what ``child_environment`` drops
    (``HUBSYNC_*``, ``REDIS_URL``) and the names starting with ``prefixes``.

    For children that inherit the environment as it is (``multiprocessing``), and for
    code that must get its settings from somewhere else than this machine's shell.
    """
    kept = child_environment()
    for name in list(os.environ):
        if name not in kept or name.startswith(prefixes):
            monkeypatch.delenv(name)


def changed(original: Mapping[K, V], changes: Mapping[K, V | None]) -> dict[K, V]:
    """A copy of ``original`` with ``changes`` made: a value set, or with None the key deleted."""
    result = dict(original)
    for name, value in changes.items():
        if value is None:
            del result[name]
        else:
            result[name] = value
    return result
