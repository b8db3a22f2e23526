"""How far group ``hub`` is behind on each events stream: lag and the oldest pending entry's age.

Read every reclaim interval (two cheap commands per stream, XINFO GROUPS and the
XPENDING summary) and exported as gauges. Ages are measured on Redis's clock
(``TIME`` against the millisecond part of the entry id), so a consumer host
with a skewed clock still reports the truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hubsync.core import keys, metrics
from hubsync.core.connections import RedisClient
from hubsync.core.redis_values import as_text, entry_id_ms, redis_now_ms


@dataclass(frozen=True)
class StreamLag:
    """Group ``hub``'s position on one hub project's events stream."""

    hub_project: str
    lag: int | None
    """Entries not yet delivered to the group; None when Redis cannot tell (Redis < 7)."""
    pending: int
    oldest_pending_age_seconds: float
    """0 when nothing is pending."""


def read_lag(client: RedisClient, streams: Sequence[str]) -> list[StreamLag]:
    """Lag, pending count and oldest pending age of group ``hub`` on each of ``streams``."""
    if not streams:
        return []
    pipe = client.pipeline(transaction=False)
    for stream in streams:
        pipe.xinfo_groups(stream)
        pipe.xpending(stream, keys.CONSUMER_GROUP)
    replies = pipe.execute(raise_on_error=False)
    now_ms = redis_now_ms(client)  # on its own: a cluster pipeline refuses TIME (no key)
    found: list[StreamLag] = []
    for index, stream in enumerate(streams):
        groups, summary = replies[2 * index], replies[1 + 2 * index]
        if isinstance(groups, Exception) or isinstance(summary, Exception):
            continue  # the stream or group vanished since the last refresh
        group = next((g for g in groups if as_text(g.get("name")) == keys.CONSUMER_GROUP), None)
        if group is None:
            continue
        lag = group.get("lag")
        pending = int(summary.get("pending") or 0)
        oldest = summary.get("min")
        age = max(0, now_ms - entry_id_ms(oldest)) / 1000 if pending and oldest else 0.0
        found.append(
            StreamLag(
                hub_project=keys.hub_project_of(stream),
                lag=None if lag is None else int(lag),
                pending=pending,
                oldest_pending_age_seconds=age,
            )
        )
    return found


def export_lag(client: RedisClient, streams: Sequence[str]) -> list[StreamLag]:
    """Read the lag of ``streams`` and set the consumer-lag and oldest-pending gauges."""
    readings = read_lag(client, streams)
    for reading in readings:
        if reading.lag is not None:
            metrics.CONSUMER_LAG.labels(reading.hub_project).set(reading.lag)
        metrics.OLDEST_PENDING_AGE.labels(reading.hub_project).set(
            reading.oldest_pending_age_seconds
        )
    return readings
