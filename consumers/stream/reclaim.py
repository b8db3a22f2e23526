"""Recovery of entries stuck in a consumer's pending list, and removal of dead consumers.

An entry is pending from its delivery until its XACK. A worker killed between
the two leaves it pending for ever unless someone takes it over: every worker
periodically claims entries idle longer than ``reclaim_idle`` from any consumer
(XAUTOCLAIM) and processes them again (dedupe turns the repeat into
``duplicate``). An entry delivered ``max_deliveries`` times already is not
tried again: it is claimed (XCLAIM, so only one worker gets it) and returned
as poison, to be dead-lettered and acked, so one bad entry never stalls a stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hubstore.redis_functions import RedisFunctions
from hubsync.core import keys
from hubsync.core.connections import RedisClient
from hubsync.core.redis_values import RawEntry, as_text, stream_entries

StreamId = int | bytes | str | memoryview


@dataclass
class Reclaimed:
    """What one reclaim pass over a stream found."""

    retry: list[RawEntry] = field(default_factory=list)
    poison: list[tuple[str, dict[bytes, bytes] | None, int]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def reclaim_stream(
    client: RedisClient,
    stream: str,
    consumer: str,
    min_idle_ms: int,
    max_deliveries: int,
    count: int,
    owner: str | None = None,
) -> Reclaimed:
    """Claim entries of ``stream`` idle at least ``min_idle_ms`` for ``consumer``.

    With ``owner`` only that consumer's pending entries are looked at (a
    restarted worker recovering its own list, ``min_idle_ms`` 0); otherwise any
    consumer's. Entries already delivered ``max_deliveries`` times come back as
    ``poison``, the rest as ``retry``.
    """
    found = Reclaimed()
    pending = client.xpending_range(
        stream,
        keys.CONSUMER_GROUP,
        min="-",
        max="+",
        count=count,
        consumername=owner,
        idle=min_idle_ms or None,
    )
    over = {
        as_text(p["message_id"]): int(p["times_delivered"])
        for p in pending
        if int(p["times_delivered"]) >= max_deliveries
    }
    if over:
        # XCLAIM with the same min-idle: if another worker claimed an entry
        # first, its idle time was reset and this claim skips it.
        ids: list[StreamId] = list(over)
        claimed = client.xclaim(stream, keys.CONSUMER_GROUP, consumer, min_idle_ms, ids)
        for entry_id, fields in stream_entries(claimed):
            found.poison.append((entry_id, fields, over[entry_id]))
    if owner is not None:
        others: list[StreamId] = [
            as_text(p["message_id"]) for p in pending if as_text(p["message_id"]) not in over
        ]
        if others:
            found.retry = stream_entries(
                client.xclaim(stream, keys.CONSUMER_GROUP, consumer, min_idle_ms, others)
            )
        return found
    reply = client.xautoclaim(
        stream, keys.CONSUMER_GROUP, consumer, min_idle_ms, start_id="0-0", count=count
    )
    found.retry = stream_entries(reply[1])
    if len(reply) > 2:
        # Entries trimmed or deleted while pending: XAUTOCLAIM already removed
        # them from the pending list; there is nothing left to process.
        found.deleted = [as_text(entry_id) for entry_id in reply[2]]
    return found


def remove_idle_consumers(
    client: RedisClient, functions: RedisFunctions, stream: str, me: str, idle_ms: int
) -> list[str]:
    """Remove consumers idle at least ``idle_ms`` that own no pending entry; their names."""
    removed: list[str] = []
    for info in client.xinfo_consumers(stream, keys.CONSUMER_GROUP):
        name = as_text(info["name"])
        if name == me or int(info["pending"]) > 0 or int(info["idle"]) < idle_ms:
            continue
        if (
            functions.stream_remove_idle_consumer(keys=[stream], args=[keys.CONSUMER_GROUP, name])
            == 1
        ):
            removed.append(name)
    return removed
