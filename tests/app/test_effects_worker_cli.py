"""``hubsync effects-worker``: runs an RQ worker with hubsync's logs, and checks RQ's registry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hubstore.redis_functions import load_library
from hubsync.core.keys import EFFECTS_QUEUE
from hubsync.processes import Child, run_hubsync
from tests.helpers.operator_support import CliRun, run_cli
from tests.helpers.support import wait_until


def check(capsys: pytest.CaptureFixture[str], *args: str) -> CliRun:
    """``hubsync effects-worker --check ARGS`` in-process."""
    return run_cli(capsys, "effects-worker", "--check", *args)


@pytest.fixture
def rq_worker(redis_url: str, tmp_path: Path) -> Iterator[Child]:
    """``rq worker hubsync-effects`` exactly as docker-compose runs it."""
    argv = ["rq", "worker", EFFECTS_QUEUE, "--url", redis_url, "--name", "effects-t"]
    worker = Child("rq-worker", argv, tmp_path / "rq.log").start()
    yield worker
    worker.kill()  # rq may sleep through SIGTERM; its registration is the redis_url fixture's


def test_check_passes_for_a_registered_rq_worker_and_fails_for_an_absent_one(
    capsys: pytest.CaptureFixture[str], redis_url: str, rq_worker: Child
) -> None:
    absent = check(capsys, "--redis-url", redis_url, "--name", "nobody")
    assert absent.code == 1
    assert "nobody: not registered" in absent.out

    def registered() -> bool:
        return check(capsys, "--redis-url", redis_url, "--name", "effects-t").code == 0

    wait_until(registered, timeout=30, interval=0.05, what="rq worker effects-t registered")
    assert check(capsys, "--redis-url", redis_url).code == 0


def test_check_without_redis_exits_3_and_a_bad_name_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    unreachable = check(capsys, "--redis-url", "redis://127.0.0.1:1/0")
    assert unreachable.code == 3
    assert "cannot reach Redis" in unreachable.err
    bad = check(capsys, "--name", "{bad}")
    assert bad.code == 2
    assert "Traceback" not in bad.err and len(bad.err.strip().splitlines()) == 1


def test_a_burst_worker_logs_json_lines_and_exits_0(redis_url: str) -> None:
    # a real process: the worker's logging is configured for the whole process
    argv = ["effects-worker", "--redis-url", redis_url, "--burst", "--log-format", "json"]
    done = run_hubsync(argv, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines
    assert all(json.loads(line)["logger"].startswith("rq") for line in lines)


def test_a_worker_on_a_redis_without_hubsyncs_functions_stops_at_once_with_one_line(
    redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.function_flush()
    done = run_hubsync(["effects-worker", "--redis-url", redis_url, "--burst"], timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "hubsync hub migrate" in line and "--redis-url" in line
    assert not redis_client.keys("rq:worker*")  # it never registered
    load_library(redis_client)
