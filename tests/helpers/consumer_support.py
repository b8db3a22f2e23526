"""What tests of ``hubsync consume`` share: its command line, and what it left in Redis and the hub."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import keys
from hubsync.core.closing import ClosesOnExit
from hubsync.processes import Child, PipelineProcesses, run_hubsync
from tests.helpers.relay_player import HUB_PROJECT, RUNTIME
from tests.helpers.trust import enroll

EVENTS = keys.events_stream(HUB_PROJECT, RUNTIME)
"""The events stream of the test runtime for the test hub project."""


def consume_argv(redis_url: str, hub_db: Path, *extra: str) -> list[str]:
    """``hubsync consume`` on ``redis_url`` into ``hub_db``, with ``extra``."""
    return ["consume", "--hub-db", str(hub_db), "--redis-url", redis_url, *extra]


def run_consume(redis_url: str, hub_db: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``hubsync consume ... EXTRA`` as a real process."""
    return run_hubsync(consume_argv(redis_url, hub_db, *extra))


def consume_once(redis_url: str, hub_db: Path, *extra: str) -> dict[str, Any]:
    """``hubsync consume ... --once --json EXTRA`` as a real process that succeeds: its summary."""
    run = run_consume(redis_url, hub_db, "--once", "--json", *extra)
    assert run.returncode == 0, run.stderr
    return dict(json.loads(run.stdout))


def enroll_on(
    hub_db: Path, hub_projects: Sequence[str] = (HUB_PROJECT,), runtime_id: str = RUNTIME
) -> None:
    """Enroll ``runtime_id`` for ``hub_projects`` on the hub database at ``hub_db`` (created
    if need be, as ``hubsync hub init`` and ``hubsync enroll`` would), so that the relay
    player signs its entries with the key the hub knows."""
    with SqliteHubStore(hub_db) as store:
        enroll(store, runtime_id, hub_projects)


def count_rows(hub_db: Path) -> int:
    """Events stored in the hub database at ``hub_db``."""
    with SqliteHubStore(hub_db) as store:
        return store.count_events()


def hub_rows(hub_db: Path) -> int:
    """Events stored in the hub database at ``hub_db``; 0 before a consumer made it."""
    if not hub_db.exists():
        return 0
    with sqlite3.connect(hub_db) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM sync_events").fetchone()[0])
        except sqlite3.OperationalError:  # the consumer has not made the schema yet
            return 0


def namespace_owner(client: redis.Redis) -> str | None:
    """The id of the hub that holds this Redis namespace, or None."""
    value = client.get(keys.HUB_IDENTITY)
    return None if value is None else value.decode()


def hub_id_of(hub_db: Path) -> str:
    """The id of the hub whose SQLite database is at ``hub_db``."""
    with SqliteHubStore(hub_db) as store:
        hub_id = store.hub_id()
    assert hub_id is not None
    return hub_id


def pending_of(client: redis.Redis, consumer: str | None = None) -> int:
    """Pending entries of group hub (of one consumer); 0 before the group exists."""
    if not client.exists(EVENTS) or not client.xinfo_groups(EVENTS):
        return 0
    if consumer is None:
        return int(client.xpending(EVENTS, keys.CONSUMER_GROUP)["pending"])
    return len(client.xpending_range(EVENTS, keys.CONSUMER_GROUP, "-", "+", 10_000, consumer))


class Workers(ClosesOnExit):
    """Background ``hubsync consume`` processes on one Redis, killed at the end of the test."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.pipelines: dict[str, PipelineProcesses] = {}

    def start(self, redis_url: str, hub_db: Path, name: str, *extra: str) -> Child:
        if redis_url not in self.pipelines:
            logs = self.directory / f"logs-{len(self.pipelines)}"
            self.pipelines[redis_url] = PipelineProcesses(redis_url, logs)
        return self.pipelines[redis_url].consumer(name, hub_db, "--block-ms", "100", *extra)

    def close(self) -> None:
        """Kill every process started."""
        for pipeline in self.pipelines.values():
            pipeline.kill_all()
