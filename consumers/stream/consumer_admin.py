"""The members of consumer group ``hub``, as an operator lists and removes them.

A consumer is a member of the group on every events stream from its first read
until ``XGROUP DELCONSUMER``; a worker that died keeps its pending entries, and
its name, until reclaimed and removed. ``list_consumers`` gathers each name over
every stream (pending entries summed, the shortest idle time) with the age of
its health key; ``remove_consumer`` hands a consumer's pending entries to a live
one, then deletes it from each stream's group, never dropping an entry: the
delete runs in one script with the check that it owns nothing
(``stream_remove_idle_consumer.lua``), and entries it read meanwhile are
handed over again first.

Which streams group ``hub`` reads is ``group_streams``: the one place the
consumer admin names them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from consumers.errors import ConsumerError
from consumers.views.projects import known_hub_projects
from consumers.views.queue_status import events_streams
from hubstore.redis_functions import functions_for
from hubsync.core import keys
from hubsync.core.clock import parse_timestamp
from hubsync.core.connections import RedisClient
from hubsync.core.errors import ConfigError
from hubsync.core.redis_values import as_text, printable, redis_now_ms

HAND_OVER_BATCH = 1000
"""Pending entries looked up and claimed per XPENDING/XCLAIM round."""

MAX_HAND_OVER_ROUNDS = 100
"""Rounds of hand-over and delete per stream before giving up on a consumer that keeps
reading (it is running: stop it first)."""


class ConsumerAdminError(ConsumerError, ConfigError):
    """An operator's request about a consumer cannot be done as asked (exit 2 in the CLI)."""


@dataclass(frozen=True, slots=True)
class GroupConsumer:
    """One consumer of group ``hub``, over every events stream."""

    name: str
    pending: int
    idle_seconds: float
    """Since it last read or claimed, on the stream it did so most recently."""
    streams: int
    """Events streams whose group it is a member of."""
    healthy: bool
    """Whether its health key is live (the worker is running)."""
    health_age_seconds: float | None
    """Since its health key was last written (Redis's clock); None without a readable one."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Removal:
    """What ``remove_consumer`` did: whose entries went where, and from how many streams."""

    name: str
    to: str | None
    moved: int
    streams: int


def group_streams(client: RedisClient) -> list[str]:
    """The events streams group ``hub`` reads: every runtime's of every hub project (and the
    shared one of before per-runtime streams) that exists."""
    return [s for p in known_hub_projects(client) for s in events_streams(client, p)]


def list_consumers(client: RedisClient) -> list[GroupConsumer]:
    """Every consumer of group ``hub``, by name, with its health key's age."""
    members: dict[str, list[tuple[int, float]]] = {}
    for stream in group_streams(client):
        for info in _members(client, stream):
            entry = (int(info["pending"]), int(info["idle"]) / 1000)
            members.setdefault(as_text(info["name"]), []).append(entry)
    names = sorted(members)
    now_ms = redis_now_ms(client)
    health = _health_records(client, names)
    return [
        GroupConsumer(
            name=name,
            pending=sum(p for p, _ in members[name]),
            idle_seconds=min(i for _, i in members[name]),
            streams=len(members[name]),
            healthy=health[name] is not None,
            health_age_seconds=_age(health[name], now_ms),
        )
        for name in names
    ]


def remove_consumer(
    client: RedisClient, name: str, *, to: str | None = None, force: bool = False
) -> Removal:
    """Hand ``name``'s pending entries to ``to`` (default: the healthy consumer that read most
    recently), then delete ``name`` from the group on every stream.

    ``ConsumerAdminError`` when ``name`` is in no stream's group, when its
    health key is fresh (it is running) and not ``force``, when ``to`` is
    ``name``, or when it owns pending entries and no healthy consumer is there
    to take them and no ``to`` was given.
    """
    consumers = {c.name: c for c in list_consumers(client)}
    gone = consumers.get(name)
    if gone is None:
        raise ConsumerAdminError(
            f"no consumer {printable(name)!r} in group {keys.CONSUMER_GROUP} on any events "
            "stream; `hubsync consumers list` shows them"
        )
    if gone.healthy and not force:
        raise ConsumerAdminError(
            f"consumer {name!r} has a fresh health key ({keys.consumer_health(name)}): it is "
            "running; stop it first (a stopped consumer keeps its entries), or give --force"
        )
    target = to if to is not None else _freshest_healthy(consumers, name, gone.pending)
    if target == name:
        raise ConsumerAdminError(f"--to: {name!r} is the consumer being removed; name another")
    functions = functions_for(client)
    moved = streams = 0
    for stream in group_streams(client):
        if not any(as_text(i["name"]) == name for i in _members(client, stream)):
            continue
        for _ in range(MAX_HAND_OVER_ROUNDS):
            moved += _hand_over(client, stream, name, target)
            if functions.stream_remove_idle_consumer(
                keys=[stream], args=[keys.CONSUMER_GROUP, name]
            ):
                streams += 1
                break
        else:
            raise ConsumerAdminError(
                f"consumer {name!r} keeps reading {stream}: it is running; stop it, then "
                "remove it again"
            )
    return Removal(name=name, to=target, moved=moved, streams=streams)


def _freshest_healthy(consumers: dict[str, GroupConsumer], name: str, pending: int) -> str | None:
    healthy = [c for c in consumers.values() if c.healthy and c.name != name]
    if healthy:
        return min(healthy, key=lambda c: (c.idle_seconds, c.name)).name
    if pending:
        raise ConsumerAdminError(
            f"consumer {name!r} owns {pending} pending entries and no healthy consumer is "
            "there to take them: start one, or name one with --to"
        )
    return None


def _hand_over(client: RedisClient, stream: str, name: str, target: str | None) -> int:
    """Claim every pending entry of ``name`` on ``stream`` for ``target``; how many."""
    moved = 0
    while target is not None:
        pending = client.xpending_range(
            stream, keys.CONSUMER_GROUP, min="-", max="+", count=HAND_OVER_BATCH,
            consumername=name,
        )  # fmt: skip
        if not pending:
            break
        ids = [as_text(p["message_id"]) for p in pending]
        # JUSTID: handed over, not delivered, so the delivery count stays as it was
        client.xclaim(stream, keys.CONSUMER_GROUP, target, 0, ids, justid=True)  # type: ignore[arg-type]
        moved += len(ids)
    return moved


def _members(client: RedisClient, stream: str) -> list[dict[Any, Any]]:
    groups = {as_text(g["name"]) for g in client.xinfo_groups(stream)}
    if keys.CONSUMER_GROUP not in groups:
        return []
    return list(client.xinfo_consumers(stream, keys.CONSUMER_GROUP))


def _health_records(client: RedisClient, names: list[str]) -> dict[str, dict[str, Any] | None]:
    # A member of a name no hubsync consumer may have (anyone who can XREADGROUP chooses
    # it) never wrote a health key: it is listed as not running, and stops nothing.
    records: dict[str, dict[str, Any] | None] = dict.fromkeys(names)
    health_keys: dict[str, str] = {}
    for name in names:
        try:
            health_keys[name] = keys.consumer_health(name)
        except ConfigError:
            continue
    if not health_keys:
        return records
    pipe = client.pipeline(transaction=False)
    for key in health_keys.values():
        pipe.get(key)
    for name, raw in zip(health_keys, pipe.execute(), strict=True):
        try:
            record = None if raw is None else json.loads(raw)
        except ValueError:
            record = {}  # live, but unreadable: still a running worker's key
        records[name] = record if isinstance(record, dict) or record is None else {}
    return records


def _age(record: dict[str, Any] | None, now_ms: int) -> float | None:
    at = None if record is None else record.get("at")
    try:
        written_ms = parse_timestamp(str(at)).timestamp() * 1000 if at is not None else None
    except ValueError:
        written_ms = None
    return None if written_ms is None else max(0.0, (now_ms - written_ms) / 1000)
