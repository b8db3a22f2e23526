"""``hubsync effects-worker``: runs an RQ worker with hubsync's logs, and checks RQ's registry."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hubsync.keys import EFFECTS_QUEUE
from hubsync.processes import Child, run_hubsync
from tests.helpers.support import wait_until


def hubsync(*args: str) -> subprocess.CompletedProcess[str]:
    return run_hubsync(args, timeout=60)


@pytest.fixture
def rq_worker(redis_url: str, tmp_path: Path) -> Iterator[Child]:
    """``rq worker hubsync-effects`` exactly as docker-compose runs it."""
    argv = ["rq", "worker", EFFECTS_QUEUE, "--url", redis_url, "--name", "effects-t"]
    worker = Child("rq-worker", argv, tmp_path / "rq.log").start()
    yield worker
    worker.kill()  # rq may sleep through SIGTERM; its registration is the redis_url fixture's


def test_check_passes_for_a_registered_rq_worker_and_fails_for_an_absent_one(
    redis_url: str, rq_worker: Child
) -> None:
    absent = hubsync("effects-worker", "--redis-url", redis_url, "--check", "--name", "nobody")
    assert absent.returncode == 1
    assert "nobody: not registered" in absent.stdout

    def registered() -> bool:
        return (
            hubsync(
                "effects-worker", "--redis-url", redis_url, "--check", "--name", "effects-t"
            ).returncode
            == 0
        )

    wait_until(registered, timeout=30, interval=0.2, what="rq worker effects-t registered")
    assert hubsync("effects-worker", "--redis-url", redis_url, "--check").returncode == 0


def test_check_without_redis_exits_3_and_a_bad_name_is_a_usage_error() -> None:
    unreachable = hubsync("effects-worker", "--redis-url", "redis://127.0.0.1:1/0", "--check")
    assert unreachable.returncode == 3
    assert "cannot reach Redis" in unreachable.stderr
    bad = hubsync("effects-worker", "--check", "--name", "{bad}")
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_burst_worker_logs_json_lines_and_exits_0(redis_url: str) -> None:
    done = hubsync("effects-worker", "--redis-url", redis_url, "--burst", "--log-format", "json")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines
    assert all(json.loads(line)["logger"].startswith("rq") for line in lines)
