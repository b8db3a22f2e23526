"""How far the hub is behind on each events stream: per runtime, per hub project.

Read every reclaim interval (XINFO GROUPS and the XPENDING summary per
stream, and one XRANGE for a stream whose oldest unstored entry was never
delivered) and exported as gauges per hub project and runtime: the lag of group ``hub``, the
age of its oldest pending entry, the entries of the stream not yet stored at
the hub (never delivered, or delivered and not acknowledged) and the age of
the oldest of them. Ages are measured on Redis's clock (``TIME``
against the millisecond part of the entry id), so a consumer host with a
skewed clock still reports the truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hubsync.core import keys, metrics
from hubsync.core.connections import RedisClient
from hubsync.core.redis_values import as_text, entry_id_ms, redis_now_ms


@dataclass(frozen=True)
class StreamLag:
    """Group ``hub``'s position on one runtime's events stream of a hub project."""

    hub_project: str
    runtime_id: str
    """The stream's runtime; empty for the shared stream of before per-runtime streams."""
    lag: int | None
    """Entries not yet delivered to the group; None when Redis cannot tell (Redis < 7)."""
    pending: int
    oldest_pending_age_seconds: float
    """0 when nothing is pending."""
    oldest_unstored_age_seconds: float = 0.0
    """Age of the oldest entry not yet stored (pending, or never delivered); 0 when none."""

    @property
    def unstored(self) -> int:
        """Entries not yet stored at the hub: never delivered (when Redis can tell) or pending."""
        return (self.lag or 0) + self.pending


def read_lag(client: RedisClient, streams: Sequence[str]) -> list[StreamLag]:
    """Lag, pending count and oldest ages of group ``hub`` on each of ``streams``."""
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
        unstored_age = age
        if not pending and lag:
            unstored_age = _first_undelivered_age(client, stream, group, now_ms)
        found.append(
            StreamLag(
                hub_project=keys.hub_project_of(stream),
                runtime_id=keys.runtime_of(stream) or "",
                lag=None if lag is None else int(lag),
                pending=pending,
                oldest_pending_age_seconds=age,
                oldest_unstored_age_seconds=unstored_age,
            )
        )
    return found


def _first_undelivered_age(
    client: RedisClient, stream: str, group: dict[Any, Any], now_ms: int
) -> float:
    """Age of the first entry after group ``hub``'s last-delivered id (0 if there is none)."""
    after = as_text(group.get("last-delivered-id") or "0-0")
    reply: Any = client.xrange(stream, f"({after}", "+", count=1)
    if not reply:
        return 0.0
    return max(0, now_ms - entry_id_ms(reply[0][0])) / 1000


def export_lag(client: RedisClient, streams: Sequence[str]) -> list[StreamLag]:
    """Read the lag of ``streams`` and set the gauges, one series per hub project and runtime:
    the lag of group ``hub``, the oldest pending age, the unstored entries and their oldest
    age (a project's figures are the sum or the maximum over its runtimes' series)."""
    readings = read_lag(client, streams)
    for reading in readings:
        labels = (reading.hub_project, reading.runtime_id)
        if reading.lag is not None:
            metrics.CONSUMER_LAG.labels(*labels).set(reading.lag)
        metrics.OLDEST_PENDING_AGE.labels(*labels).set(reading.oldest_pending_age_seconds)
        metrics.RUNTIME_UNSTORED.labels(*labels).set(reading.unstored)
        metrics.RUNTIME_OLDEST_UNSTORED_AGE.labels(*labels).set(reading.oldest_unstored_age_seconds)
    return readings
