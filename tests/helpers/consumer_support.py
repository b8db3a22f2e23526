"""What tests of ``hubsync consume`` share: its command line, and what it left in Redis and the hub."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import redis

from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import keys
from hubsync.processes import run_hubsync
from tests.helpers.relay_player import HUB_PROJECT, RUNTIME
from tests.helpers.trust import enroll

EVENTS = keys.events_stream(HUB_PROJECT)
"""The events stream of the test hub project."""


def consume_argv(redis_url: str, hub_db: Path, *extra: str) -> list[str]:
    """``hubsync consume`` on ``redis_url`` into ``hub_db``, with ``extra``."""
    return ["consume", "--hub-db", str(hub_db), "--redis-url", redis_url, *extra]


def run_consume(redis_url: str, hub_db: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``hubsync consume ... EXTRA`` as a real process."""
    return run_hubsync(consume_argv(redis_url, hub_db, *extra))


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


def pending_of(client: redis.Redis, consumer: str | None = None) -> int:
    """Pending entries of group hub (of one consumer); 0 before the group exists."""
    if not client.exists(EVENTS) or not client.xinfo_groups(EVENTS):
        return 0
    if consumer is None:
        return int(client.xpending(EVENTS, keys.CONSUMER_GROUP)["pending"])
    return len(client.xpending_range(EVENTS, keys.CONSUMER_GROUP, "-", "+", 10_000, consumer))
