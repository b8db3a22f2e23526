"""``hubsync effects-worker``: runs an RQ worker with hubsync's logs, and checks RQ's registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hubsync.keys import EFFECTS_QUEUE
from tests.helpers.support import wait_until

ROOT = Path(__file__).resolve().parents[1]


def hubsync(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSYNC_")}
    return subprocess.run(
        [sys.executable, "-m", "hubsync.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )


@pytest.fixture
def rq_worker(redis_url: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``rq worker hubsync-effects`` exactly as docker-compose runs it."""
    with (tmp_path / "rq.log").open("wb") as sink:
        proc = subprocess.Popen(
            ["rq", "worker", EFFECTS_QUEUE, "--url", redis_url, "--name", "effects-t"],
            stdout=sink,
            stderr=sink,
            cwd=ROOT,
        )
    yield proc
    proc.kill()  # rq may sleep through SIGTERM; its registration is the redis_url fixture's
    proc.wait()


def test_check_passes_for_a_registered_rq_worker_and_fails_for_an_absent_one(
    redis_url: str, rq_worker: subprocess.Popen[bytes]
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
