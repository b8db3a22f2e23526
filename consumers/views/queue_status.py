"""The hub side's state as Redis sees it: per hub project its runtimes' streams, group, consumers,
presence, and how far the hub is behind on each runtime's stream.

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

import redis

from consumers.stream.lag import read_lag
from consumers.stream.streams import stream_id
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
    """Its outbox backlog as that beat reported it (``age_seconds`` ago)."""
    source: str
    """``hub_db`` (``runtime_presence``) or ``stream`` (the newest beats on the events stream)."""
    unstored: int | None = None
    """The hub's lag on its events stream now: entries not yet stored at the hub
    (``RuntimeStream.unstored``); None when it has no stream with group ``hub``."""
    oldest_unstored_age_seconds: float | None = None
    """Age of the oldest of them (Redis clock); None when there is none."""


@dataclass(frozen=True, slots=True)
class HubDbCounts:
    """What the hub database holds for one hub project."""

    events: int
    alerts: int


@dataclass(frozen=True, slots=True)
class RuntimeStream:
    """One runtime's events stream of a hub project, and how far the hub is behind on it."""

    runtime_id: str
    """Empty for the shared stream of before per-runtime streams."""
    stream: str
    length: int
    lag: int | None
    pending: int
    unstored: int
    """Entries not yet stored at the hub: never delivered to group ``hub`` (when Redis can
    tell), or delivered and not acknowledged."""
    oldest_unstored_age_seconds: float | None
    """Age of the oldest of them (Redis clock); None when there is none."""


@dataclass
class HubProjectStatus:
    """Everything status shows about one hub project: its streams summed, and each one."""

    hub_project: str
    stream: str
    """The pattern of its events streams (``hubsync:{P}:events:{*}``)."""
    length: int
    entries_added: int
    last_id: str | None
    group: GroupInfo | None
    """Group ``hub`` over all its streams: lag and pending summed, the oldest pending, each
    consumer's pending summed (and its least idle time)."""
    dead_letters: int
    alerts: int
    runtimes: list[RuntimeInfo] = field(default_factory=list)
    streams: list[RuntimeStream] = field(default_factory=list)
    """Each runtime's events stream, by runtime id."""
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
    """The state of ``hub_project``: its streams, group ``hub``, dead letters, alerts, runtimes."""
    pipe = client.pipeline(transaction=False)
    pipe.xlen(keys.dead_stream(hub_project))
    pipe.xlen(keys.alerts_stream(hub_project))
    dead, alerts = pipe.execute()
    status = HubProjectStatus(
        hub_project=hub_project,
        stream=keys.events_stream_pattern(hub_project),
        length=0,
        entries_added=0,
        last_id=None,
        group=None,
        dead_letters=int(dead),
        alerts=int(alerts),
    )
    groups = []
    streams = events_streams(client, hub_project)
    for stream in streams:
        try:
            info = client.xinfo_stream(stream)
            group = _group(client, stream, now_ms)
        except redis.ResponseError:
            continue  # not a stream (the consumers set it aside and say so)
        status.length += int(info["length"])
        status.entries_added += int(info.get("entries-added") or 0)
        last = as_text(info["last-generated-id"])
        status.last_id = max(status.last_id or last, last, key=stream_id)
        if group is not None:
            groups.append(group)
            status.streams.append(_runtime_stream(client, stream, int(info["length"]), group))
    status.group = _merged(groups)
    status.streams.sort(key=lambda r: r.runtime_id)
    if store is not None:
        status.runtimes = _presence_from_store(store, hub_project, stale_after)
        status.hub_db = HubDbCounts(
            events=store.count_events(hub_project=hub_project),
            alerts=len(store.alerts(hub_project, limit=MAX_HUB_DB_ALERTS)),
        )
    else:
        status.runtimes = _presence_from_streams(client, streams, now_ms, stale_after)
    status.runtimes = _with_hub_lag(status.runtimes, status.streams)
    return status


def _with_hub_lag(runtimes: list[RuntimeInfo], streams: list[RuntimeStream]) -> list[RuntimeInfo]:
    """Each runtime with the hub's lag on its own stream beside the backlog of its beat."""
    lag = {s.runtime_id: s for s in streams}
    return [
        replace(r, unstored=s.unstored, oldest_unstored_age_seconds=s.oldest_unstored_age_seconds)
        if (s := lag.get(r.runtime_id)) is not None
        else r
        for r in runtimes
    ]


def events_streams(client: RedisClient, hub_project: str) -> list[str]:
    """The events streams of ``hub_project`` in Redis: each runtime's, and the shared one of
    before per-runtime streams while it exists."""
    found = sorted(
        as_text(key)
        for key in client.scan_iter(match=keys.events_stream_pattern(hub_project), count=500)
    )
    shared = keys.shared_events_stream(hub_project)
    return [*found, shared] if client.exists(shared) else found


def _runtime_stream(
    client: RedisClient, stream: str, length: int, group: GroupInfo
) -> RuntimeStream:
    lag = read_lag(client, [stream])
    reading = lag[0] if lag else None
    unstored = reading.unstored if reading else group.pending
    return RuntimeStream(
        runtime_id=keys.runtime_of(stream) or "",
        stream=stream,
        length=length,
        lag=group.lag,
        pending=group.pending,
        unstored=unstored,
        oldest_unstored_age_seconds=(
            reading.oldest_unstored_age_seconds if reading and unstored else None
        ),
    )


def _merged(groups: list[GroupInfo]) -> GroupInfo | None:
    """Group ``hub`` of several streams as one: counts summed, the oldest pending entry."""
    if not groups:
        return None
    consumers: dict[str, ConsumerInfo] = {}
    for group in groups:
        for c in group.consumers:
            seen = consumers.get(c.name)
            consumers[c.name] = (
                c
                if seen is None
                else replace(
                    seen,
                    pending=seen.pending + c.pending,
                    idle_seconds=min(seen.idle_seconds, c.idle_seconds),
                )
            )
    lags = [g.lag for g in groups]
    reads = [g.entries_read for g in groups]
    oldest = [g for g in groups if g.oldest_pending_id is not None]
    first = min(oldest, key=lambda g: stream_id(g.oldest_pending_id)) if oldest else None
    return GroupInfo(
        name=keys.CONSUMER_GROUP,
        lag=None if None in lags else sum(lag or 0 for lag in lags),
        entries_read=None if None in reads else sum(r or 0 for r in reads),
        pending=sum(g.pending for g in groups),
        oldest_pending_id=first.oldest_pending_id if first else None,
        oldest_pending_age_seconds=first.oldest_pending_age_seconds if first else None,
        last_delivered_id=max((g.last_delivered_id for g in groups), key=stream_id),
        consumers=sorted(consumers.values(), key=lambda c: c.name),
    )


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


def _presence_from_streams(
    client: RedisClient, streams: list[str], now_ms: int, stale_after: timedelta
) -> list[RuntimeInfo]:
    # Beats are acked and trimmed like events, so only the newest few may still be there;
    # the hub database (--hub-db) is the complete view.
    latest: dict[str, RuntimeInfo] = {}
    for stream in streams:
        try:
            reply: Any = client.xrevrange(stream, "+", "-", count=PRESENCE_SCAN)
        except redis.ResponseError:
            continue
        _newest_beats(reply, now_ms, stale_after, latest)
    return sorted(latest.values(), key=lambda r: r.runtime_id)


def _newest_beats(
    reply: Any, now_ms: int, stale_after: timedelta, latest: dict[str, RuntimeInfo]
) -> None:
    """Add to ``latest`` the newest beat of each runtime in ``reply`` (newest entries first)."""
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


def _record(raw: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {"unreadable": True}
    return value if isinstance(value, dict) else {"value": value}
