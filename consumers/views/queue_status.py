"""The hub side's state as Redis sees it: per hub project stream, group, consumers, presence.

Everything is read, nothing is changed. Ages are measured on Redis's clock
(``TIME`` against the millisecond part of entry ids, which Redis stamped when
the entry arrived), so a skewed operator or runtime clock cannot make a stuck
entry look fresh. The hub database, when given, adds its event and alert
counts and its own view of runtime presence (``HubStore.presence``).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, replace
from datetime import timedelta
from typing import Any

from hubstore.store import DEFAULT_STALE_AFTER, HubStore
from hubsync.core import keys
from hubsync.core.clock import parse_timestamp, utc_now
from hubsync.core.connections import RedisClient
from hubsync.core.entries import KIND_PRESENCE, decode_fields, entry_kind, parse_presence_entry
from hubsync.core.errors import WireError
from hubsync.core.redis_values import as_text, entry_id_ms

PRESENCE_SCAN = 500
"""Newest events-stream entries searched for presence beats when there is no hub database."""

MAX_HUB_DB_ALERTS = 100_000
"""Most ``sync_alerts`` rows counted per project (alerts are rare; this only bounds the work)."""


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    """One consumer of group ``hub``: what it holds and how long since it last read."""

    name: str
    pending: int
    idle_seconds: float
    alive: bool | None = None
    """Whether its health key is live (``mark_liveness``); False: dead, though still in the
    group (a consumer is a member from its first read until XGROUP DELCONSUMER)."""


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """Group ``hub`` on one events stream."""

    name: str
    lag: int | None
    """Entries not yet delivered to the group (None when Redis cannot tell)."""
    entries_read: int | None
    pending: int
    oldest_pending_id: str | None
    oldest_pending_age_seconds: float | None
    last_delivered_id: str
    consumers: list[ConsumerInfo]


@dataclass(frozen=True, slots=True)
class RuntimeInfo:
    """A runtime that beat presence for a hub project."""

    runtime_id: str
    host: str
    heartbeat: str
    age_seconds: float
    stale: bool
    backlog: int
    source: str
    """``hub_db`` (``runtime_presence``) or ``stream`` (the newest beats on the events stream)."""


@dataclass(frozen=True, slots=True)
class HubDbCounts:
    """What the hub database holds for one hub project."""

    events: int
    alerts: int


@dataclass
class HubProjectStatus:
    """Everything status shows about one hub project."""

    hub_project: str
    stream: str
    length: int
    entries_added: int
    last_id: str | None
    group: GroupInfo | None
    dead_letters: int
    alerts: int
    runtimes: list[RuntimeInfo] = field(default_factory=list)
    hub_db: HubDbCounts | None = None
    live_consumers: list[str] = field(default_factory=list)
    """Hub consumers with a live health key: every one reads every hub project, from before
    its first read (when it joins the group) on."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class HealthKey:
    """A live health key of a relay or a hub consumer, and its own record."""

    kind: str
    name: str
    ttl_seconds: float | None
    record: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def project_status(
    client: RedisClient,
    hub_project: str,
    now_ms: int,
    store: HubStore | None = None,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
) -> HubProjectStatus:
    """The state of ``hub_project``: its stream, group ``hub``, dead letters, alerts, runtimes."""
    stream = keys.events_stream(hub_project)
    pipe = client.pipeline(transaction=False)
    pipe.exists(stream)
    pipe.xlen(keys.dead_stream(hub_project))
    pipe.xlen(keys.alerts_stream(hub_project))
    exists, dead, alerts = pipe.execute()
    status = HubProjectStatus(
        hub_project=hub_project,
        stream=stream,
        length=0,
        entries_added=0,
        last_id=None,
        group=None,
        dead_letters=int(dead),
        alerts=int(alerts),
    )
    if exists:
        info = client.xinfo_stream(stream)
        status.length = int(info["length"])
        status.entries_added = int(info.get("entries-added") or 0)
        status.last_id = as_text(info["last-generated-id"])
        status.group = _group(client, stream, now_ms)
    if store is not None:
        status.runtimes = _presence_from_store(store, hub_project, stale_after)
        status.hub_db = HubDbCounts(
            events=store.count_events(hub_project=hub_project),
            alerts=len(store.alerts(hub_project, limit=MAX_HUB_DB_ALERTS)),
        )
    elif exists:
        status.runtimes = _presence_from_stream(client, stream, now_ms, stale_after)
    return status


def mark_liveness(status: HubProjectStatus, health: Collection[HealthKey]) -> None:
    """Record the consumers with a live health key in ``status``, and mark each member of its
    group alive or dead by them.

    ``health`` must be read after the group: a consumer writes its health key
    before its first read, so one seen in the group but not in a later
    health scan has stopped (or lost Redis) meanwhile.
    """
    live = sorted({h.name for h in health if h.kind == "consumer"})
    status.live_consumers = live
    if status.group is not None:
        status.group.consumers[:] = [
            replace(c, alive=c.name in live) for c in status.group.consumers
        ]


def health_keys(client: RedisClient) -> list[HealthKey]:
    """Every live relay and consumer health key, sorted by kind then name."""
    found: list[tuple[str, str, str]] = []
    for kind, pattern in (
        ("relay", keys.RELAY_HEALTH_PATTERN),
        ("consumer", keys.CONSUMER_HEALTH_PATTERN),
    ):
        prefix = pattern.rstrip("*")
        for key in client.scan_iter(match=pattern, count=500):
            name = as_text(key)
            found.append((kind, name[len(prefix) :], name))
    found.sort()
    if not found:
        return []
    pipe = client.pipeline(transaction=False)
    for _, _, key in found:
        pipe.get(key)
        pipe.pttl(key)
    replies = pipe.execute()
    out: list[HealthKey] = []
    for index, (kind, name, _) in enumerate(found):
        raw, pttl = replies[2 * index], replies[2 * index + 1]
        if raw is None:
            continue  # expired between SCAN and GET
        out.append(
            HealthKey(
                kind=kind,
                name=name,
                ttl_seconds=pttl / 1000 if isinstance(pttl, int) and pttl >= 0 else None,
                record=_record(raw),
            )
        )
    return out


def _group(client: RedisClient, stream: str, now_ms: int) -> GroupInfo | None:
    groups = {as_text(g["name"]): g for g in client.xinfo_groups(stream)}
    group = groups.get(keys.CONSUMER_GROUP)
    if group is None:
        return None
    summary = client.xpending(stream, keys.CONSUMER_GROUP)
    oldest = as_text(summary["min"]) if summary.get("pending") and summary.get("min") else None
    consumers = [
        ConsumerInfo(
            name=as_text(c["name"]),
            pending=int(c["pending"]),
            idle_seconds=int(c["idle"]) / 1000,
        )
        for c in client.xinfo_consumers(stream, keys.CONSUMER_GROUP)
    ]
    lag = group.get("lag")
    entries_read = group.get("entries-read")
    return GroupInfo(
        name=keys.CONSUMER_GROUP,
        lag=None if lag is None else int(lag),
        entries_read=None if entries_read is None else int(entries_read),
        pending=int(summary.get("pending") or 0),
        oldest_pending_id=oldest,
        oldest_pending_age_seconds=(
            None if oldest is None else max(0, now_ms - entry_id_ms(oldest)) / 1000
        ),
        last_delivered_id=as_text(group["last-delivered-id"]),
        consumers=sorted(consumers, key=lambda c: c.name),
    )


def _presence_from_store(
    store: HubStore, hub_project: str, stale_after: timedelta
) -> list[RuntimeInfo]:
    now = utc_now()
    out = []
    for record in store.presence(hub_project, stale_after=stale_after, now=now):
        age = (now - parse_timestamp(record.heartbeat)).total_seconds()
        out.append(
            RuntimeInfo(
                runtime_id=record.runtime_id,
                host=record.host,
                heartbeat=record.heartbeat,
                age_seconds=max(0.0, age),
                stale=record.stale,
                backlog=record.beat.backlog,
                source="hub_db",
            )
        )
    return sorted(out, key=lambda r: r.runtime_id)


def _presence_from_stream(
    client: RedisClient, stream: str, now_ms: int, stale_after: timedelta
) -> list[RuntimeInfo]:
    # Beats are acked and trimmed like events, so only the newest few may still be there;
    # the hub database (--hub-db) is the complete view.
    latest: dict[str, RuntimeInfo] = {}
    reply: Any = client.xrevrange(stream, "+", "-", count=PRESENCE_SCAN)
    for raw_id, raw in reply:
        fields = decode_fields(raw or {})
        if entry_kind(fields) != KIND_PRESENCE:
            continue
        try:
            beat = parse_presence_entry(fields)
        except WireError:
            continue
        if beat.runtime_id in latest:
            continue  # newest first: the first beat seen is the runtime's latest
        age = max(0, now_ms - entry_id_ms(raw_id)) / 1000
        latest[beat.runtime_id] = RuntimeInfo(
            runtime_id=beat.runtime_id,
            host=beat.host,
            heartbeat=beat.heartbeat,
            age_seconds=age,
            stale=age > stale_after.total_seconds(),
            backlog=beat.backlog,
            source="stream",
        )
    return sorted(latest.values(), key=lambda r: r.runtime_id)


def _record(raw: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"unreadable": True}
    return value if isinstance(value, dict) else {"value": value}
