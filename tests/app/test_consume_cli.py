"""``hubsync consume`` as real processes: kill -9 and reclaim, signals, exit codes; its --check
and usage errors in-process."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hubsync.core import keys
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.processes import Child, hubsync_command
from tests.helpers.consumer_support import (
    EVENTS,
    Workers,
    consume_argv,
    count_rows,
    enroll_on,
    pending_of,
    run_consume,
)
from tests.helpers.operator_support import run_cli
from tests.helpers.relay_player import send, sync_event
from tests.helpers.support import wait_until


@pytest.fixture
def hub_db(tmp_path: Path) -> Path:
    """The hub database, with the relay player's runtime enrolled on it."""
    path = tmp_path / "hub.db"
    enroll_on(path)
    return path


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    with Workers(tmp_path) as pool:
        yield pool


def test_a_killed_consumers_pending_entries_are_reclaimed_by_another(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, workers: Workers, hub_db: Path
) -> None:
    for s in range(1, 51):
        send(redis_client, sync_event(s))
    # Hold the hub database's write lock so the victim reads its batch and then
    # waits inside ingest, with everything in its pending list, when it is killed.
    blocker = sqlite3.connect(hub_db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    victim = workers.start(redis_url, hub_db, "victim")
    # a fresh worker's first read takes one entry per stream (its read budget)
    wait_until(lambda: pending_of(redis_client, "victim") >= 1, timeout=20, what="victim read")
    victim.kill()
    held = pending_of(redis_client, "victim")
    blocker.execute("ROLLBACK")
    blocker.close()
    assert count_rows(hub_db) == 0

    wait_until(
        lambda: len(redis_client.xpending_range(EVENTS, "hub", "-", "+", 100, idle=500)) == held,
        what="victim's entries idle past reclaim_idle",
    )
    result = run_consume(
        redis_url, hub_db, "--name", "rescuer", "--once", "--reclaim-idle", "0.5", "--json"
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["reclaimed"] == held and summary["accepted"] == 50
    assert count_rows(hub_db) == 50
    assert pending_of(redis_client) == 0


def test_check_is_healthy_only_while_the_named_consumer_runs(
    capsys: pytest.CaptureFixture[str],
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    workers: Workers,
) -> None:
    check = consume_argv(redis_url, tmp_path / "hub.db", "--name", "hub-1", "--check")
    assert run_cli(capsys, *check).code == 1
    proc = workers.start(redis_url, tmp_path / "hub.db", "hub-1")
    wait_until(lambda: redis_client.exists(keys.consumer_health("hub-1")), what="health key")
    assert run_cli(capsys, *check).code == 0
    proc.signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert run_cli(capsys, *check).code == 1


def test_once_ingests_what_is_there_and_exits_zero(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, hub_db: Path
) -> None:
    for s in range(1, 11):
        send(redis_client, sync_event(s))
    result = run_consume(redis_url, hub_db, "--once")
    assert result.returncode == 0, result.stderr
    assert "10 accepted" in result.stdout
    assert count_rows(hub_db) == 10


def test_a_second_signal_exits_at_once(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, workers: Workers, hub_db: Path
) -> None:
    send(redis_client, sync_event(1))
    blocker = sqlite3.connect(hub_db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the batch cannot finish while this is held
    try:
        proc = workers.start(redis_url, hub_db, "stuck")
        wait_until(lambda: pending_of(redis_client, "stuck") == 1, what="batch read")
        proc.signal(signal.SIGTERM)
        wait_until(lambda: "finishing the current batch" in proc.log_text(), what="warm stop")
        proc.signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert pending_of(redis_client, "stuck") == 1  # left for a reclaim, never lost


@pytest.mark.parametrize(
    "args",
    [
        ["--batch-count", "many"],
        ["--max-deliveries", "0"],
        ["--block-ms", "-5"],
        ["--log-format", "xml"],
        ["--no-such-option"],
        ["--check"],  # --check needs --name
    ],
)
def test_malformed_arguments_exit_2(
    capsys: pytest.CaptureFixture[str], redis_url: str, tmp_path: Path, args: list[str]
) -> None:
    result = run_cli(capsys, *consume_argv(redis_url, tmp_path / "hub.db", *args))
    assert result.code == 2, result.err
    assert "Traceback" not in result.err


def test_unreachable_redis_at_start_exits_3_with_one_line(tmp_path: Path) -> None:
    result = run_consume("redis://127.0.0.1:1/0", tmp_path / "hub.db", "--once")
    assert result.returncode == 3
    assert result.stderr.strip().count("\n") == 0
    assert "cannot reach Redis" in result.stderr


def test_a_worker_started_while_redis_is_down_waits_for_it_then_ingests(
    private_redis: RedisServerProcess, tmp_path: Path, workers: Workers, hub_db: Path
) -> None:
    private_redis.stop()  # its port now has nothing listening
    proc = workers.start(private_redis.url, hub_db, "early")
    unreachable = f"Redis unreachable at {private_redis.url}"
    wait_until(lambda: unreachable in proc.log_text(), what="the outage logged")
    assert proc.alive, "a daemon waits for Redis rather than exiting 3"
    private_redis.start()
    client = redis.Redis.from_url(private_redis.url)
    send(client, sync_event(1))
    wait_until(lambda: count_rows(hub_db) == 1, timeout=30, what="the event ingested")
    log = proc.log_text()
    assert log.count("Redis unreachable") == 1, "one line per change of state, not per retry"
    assert f"Redis reachable at {private_redis.url}" in log
    assert proc.stop(timeout=20) == 0
    client.close()


def test_a_worker_rides_out_a_redis_restart(
    private_redis: RedisServerProcess, tmp_path: Path, workers: Workers, hub_db: Path
) -> None:
    client = redis.Redis.from_url(private_redis.url)
    send(client, sync_event(1))
    proc = workers.start(private_redis.url, hub_db, "steady")
    wait_until(lambda: count_rows(hub_db) == 1, what="first event")
    private_redis.kill()
    wait_until(lambda: "Redis unreachable" in proc.log_text(), what="outage noticed")
    private_redis.start()
    send(client, sync_event(2))
    wait_until(lambda: count_rows(hub_db) == 2, timeout=30, what="event after restart")
    # the step logs its recovery after it returns, a moment after the row commits
    wait_until(lambda: "Redis reachable again" in proc.log_text(), what="recovery logged")
    assert proc.log_text().count("Redis unreachable") == 1  # once per change, not per retry
    proc.signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    client.close()


def test_a_second_consumer_of_a_running_name_is_refused_until_the_first_stops(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, workers: Workers, hub_db: Path
) -> None:
    health = keys.consumer_health("hub-1")
    first = workers.start(redis_url, hub_db, "hub-1")
    wait_until(lambda: redis_client.exists(health), what="the first consumer's health key")

    argv = hubsync_command(*consume_argv(redis_url, hub_db, "--name", "hub-1"))
    second = Child("second hub-1", argv, tmp_path / "second.log").start()
    try:  # a daemon: it must exit at once, not run beside the first
        assert second.wait(timeout=30) == 2, second.log_text()
    finally:
        second.stop()
    once = run_consume(redis_url, hub_db, "--name", "hub-1", "--once")
    assert once.returncode == 2, once.stderr
    for err in (second.log_text(), once.stderr):
        assert "Traceback" not in err
        [line] = err.splitlines()
        assert line.startswith("error: consumer name 'hub-1' is in use")
        assert f"pid {first.pid} on host {socket.gethostname()}" in line
    assert first.alive
    assert json.loads(redis_client.get(health))["pid"] == first.pid, "the holder's key stays"

    first.signal(signal.SIGTERM)  # a clean stop deletes the key: the name is free at once
    assert first.wait(timeout=20) == 0
    again = run_consume(redis_url, hub_db, "--name", "hub-1", "--once", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["consumer"] == "hub-1"


def test_a_consumer_killed_on_this_host_gives_its_name_to_its_restart(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, workers: Workers, hub_db: Path
) -> None:
    health = keys.consumer_health("hub-1")
    first = workers.start(redis_url, hub_db, "hub-1", "--health-ttl", "600")
    wait_until(lambda: redis_client.exists(health), what="the first consumer's health key")
    dead_pid = first.pid
    first.kill()  # kill -9: its key stays fresh for ten minutes
    assert json.loads(redis_client.get(health))["pid"] == dead_pid

    restarted = first.start()  # the same name, argv and host, as a supervisor restarts it
    wait_until(
        lambda: json.loads(redis_client.get(health) or "{}").get("pid") == restarted.pid,
        what="the restarted consumer's health key",
    )
    assert restarted.alive
