"""The runtimes' side as it is on disk, and whether a pipeline has drained.

The outboxes are read straight from their SQLite files, read-only: a check must see what
was committed, whatever process (an appender, a relay) wrote it, and its own integrity
(every outbox row has its bytes, every local event its outbox row) is checked on the way.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hubsync.core import keys
from hubsync.core.connections import RedisClient
from hubsync.core.redis_values import as_text, entry_id_order
from hubsync.faults.records import Key, RuntimeUnderTest

Row = tuple[str, bytes]
"""An outbox row's hash and bytes."""


@dataclass
class LocalEvents:
    """Every committed outbox row, its state, how many events the runtimes hold, and what
    is wrong with the files (outbox rows without bytes, events without an outbox row)."""

    rows: dict[Key, Row] = field(default_factory=dict)
    states: dict[Key, str] = field(default_factory=dict)
    """``acked``, the outcome that parked the row (``conflict``, ``rejected``) or ``pending``."""
    run_events: int = 0
    broken: list[str] = field(default_factory=list)


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)


def read_local_events(runtimes: Sequence[RuntimeUnderTest]) -> LocalEvents:
    """What every runtime committed (see ``LocalEvents``)."""
    local = LocalEvents()
    for runtime in runtimes:
        db = _read_only(runtime.store_path)
        try:
            local_keys = set(db.execute("SELECT run_id, sequence FROM run_events"))
            outbox = db.execute(
                "SELECT o.run_id, o.sequence, o.content_hash, p.sync_event, o.acked_at, o.outcome "
                "FROM outbox AS o LEFT JOIN outbox_payloads AS p ON p.seq = o.seq"
            ).fetchall()
            payloads = db.execute("SELECT count(*) FROM outbox_payloads").fetchone()[0]
        finally:
            db.close()
        # Each outbox row has its bytes and no bytes outlive their row (append and pruning
        # write both tables in one transaction).
        missing = sum(1 for row in outbox if row[3] is None)
        if missing or payloads != len(outbox):
            local.broken.append(
                f"runtime {runtime.runtime_id}: {missing} outbox rows without bytes, "
                f"{payloads} payload rows for {len(outbox)} outbox rows"
            )
        outbox_keys = {(run_id, sequence) for run_id, sequence, *_ in outbox}
        if local_keys != outbox_keys:
            local.broken.append(
                f"runtime {runtime.runtime_id}: local events and outbox rows differ "
                f"({len(local_keys ^ outbox_keys)} keys), so an append was not atomic"
            )
        local.run_events += len(local_keys)
        for run_id, sequence, digest, data, acked_at, outcome in outbox:
            key = (runtime.project_id, run_id, sequence)
            local.rows[key] = (digest, bytes(data or b""))
            local.states[key] = "acked" if acked_at is not None else (outcome or "pending")
    return local


def outbox_pending(runtimes: Sequence[RuntimeUnderTest]) -> int:
    """Rows not yet acked nor parked, over every runtime."""
    total = 0
    for runtime in runtimes:
        db = _read_only(runtime.store_path)
        try:
            total += db.execute(
                "SELECT count(*) FROM outbox WHERE acked_at IS NULL AND outcome IS NULL"
            ).fetchone()[0]
        finally:
            db.close()
    return int(total)


def streams_settled(client: RedisClient, streams: Iterable[str]) -> bool:
    """True when group ``hub`` has delivered every entry of every stream and has none pending."""
    for stream in streams:
        info = client.xinfo_stream(stream)
        last = entry_id_order(info["last-generated-id"])
        for group in client.xinfo_groups(stream):
            if as_text(group["name"]) != keys.CONSUMER_GROUP:
                continue
            if group["pending"] or entry_id_order(group["last-delivered-id"]) < last:
                return False
    return True


def drained(client: RedisClient, runtimes: Sequence[RuntimeUnderTest]) -> bool:
    """Nothing pending in any outbox, nothing undelivered or unacked on any stream."""
    streams = {r.events_stream for r in runtimes}
    return outbox_pending(runtimes) == 0 and streams_settled(client, streams)
