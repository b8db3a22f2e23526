"""What the chaos soak writes onto the events streams behind the pipeline's back.

* duplicates: genuine entries read back from a stream and XADDed again;
* conflicts: a key the hub already holds, with other data (valid canonical
  bytes, a correct hash, the runtime's own id), signed with the runtime's key:
  a buggy twin, or a forger who stole the key;
* forgeries: the same offer without the key (unsigned, or signed with a key
  the hub never enrolled): every hub worker must refuse them as
  ``unauthenticated`` without telling any runtime;
* garbage: entries of a runtime that every hub worker must dead-letter with a
  known reason: bad content signed with its key (``rejected``, the runtime
  told), and copies that are not what its key signed (a field dropped, a hash
  or a flat field changed, a junk field added, bytes over the limit), refused
  as ``unauthenticated`` with a security alert and no outcome.

Every injected entry id is remembered so duplicates are only ever made of
genuine entries, and so the end checks can match each injection to its
dead letter or alert. On a Redis Cluster each injection (the duplicates
aside) is written to its slot's master together with ``WAIT 1``: a replica
holds it before the next fault, which may kill that master, so no injection
the checks look for is ever lost with one.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import redis
from redis.exceptions import RedisClusterException

from hubstore import open_store
from hubstore.store import HubStore
from hubsync.core import keys
from hubsync.core.canonical import content_hash
from hubsync.core.connections import RedisTarget, connect, is_cluster
from hubsync.core.entries import (
    Outcome,
    OutcomeRecord,
    decode_fields,
    entry_kind,
    event_entry_fields,
    outcomes_entry_fields,
)
from hubsync.core.redis_values import as_text
from hubsync.core.signing import (
    SIGNATURE_FIELD,
    RuntimeKey,
    sign_event_entry,
)
from hubsync.core.wire import SyncEvent
from tests.helpers.trust import outcomes_signed_by_a_stranger

T = TypeVar("T")

GARBAGE_KINDS: dict[str, str] = {
    "bad_json": "bad_json",
    "missing_field": "unauthenticated",  # signed, then event_type dropped
    "hash_mismatch": "unauthenticated",  # signed over a hash its bytes do not have
    "corrupted_copy": "unauthenticated",
    "oversized": "unauthenticated",  # bytes over the limit are not hashed to tell
    "not_canonical": "not_canonical",
    "retyped_copy": "unauthenticated",  # a genuine entry, event_type changed, not re-signed
    "junk_copy": "unauthenticated",  # a genuine entry with a 2 MiB field added
}
"""Garbage kind -> the dead-letter reason the hub must give it."""

Key = tuple[str, str, int]


class RuntimeLike(Protocol):
    """What the injector needs to know of a runtime."""

    runtime_id: str
    project_id: str
    hub_project: str
    key: RuntimeKey


@dataclass(frozen=True, slots=True)
class _Offer:
    """Other data under a key the hub holds: the event, its entry's fields (unsigned), the
    hash of the bytes the hub holds and of the offered ones."""

    event: SyncEvent
    genuine_hash: str
    digest: str
    fields: dict[str, Any]

    @property
    def hub_project(self) -> str:
        return self.event.hub_project

    @property
    def key(self) -> Key:
        return (self.event.project_id, self.event.run_id, self.event.sequence)


@dataclass(frozen=True)
class InjectedConflict:
    """Other bytes offered under a key the hub already held, signed with the runtime's key."""

    hub_project: str
    key: Key
    genuine_hash: str
    forged_hash: str
    entry_id: str


@dataclass(frozen=True)
class InjectedForgery:
    """Other bytes offered under a key the hub already held, without the runtime's key."""

    hub_project: str
    key: Key
    forged_hash: str
    entry_id: str
    how: str
    """``unsigned`` or ``wrong_key`` (signed with a key the hub never enrolled)."""


@dataclass(frozen=True)
class InjectedForgedAck:
    """An outcomes entry a forger put on a runtime's ack stream, not signed by its hub.

    ``deleted`` keys had their genuine entries XDELed first and are claimed
    ``accepted``: applied, they would be lost. ``parked`` keys are claimed
    ``conflict`` or ``rejected``: applied, their rows would never be resent.
    """

    hub_project: str
    runtime_id: str
    deleted: tuple[Key, ...]
    parked: tuple[Key, ...]
    how: str
    """``unsigned`` or ``wrong_key``."""


FORGERY_REASON = "unauthenticated"
"""The dead-letter and alert reason every forgery must get."""


@dataclass(frozen=True)
class InjectedGarbage:
    """An entry the hub must dead-letter with ``expected_reason``."""

    hub_project: str
    kind: str
    expected_reason: str
    entry_id: str
    key: Key | None
    alert: tuple[str, str, int, str] | None = None
    """The security alert it must raise (claimed key and the hash of the bytes it carried),
    when it is refused ``unauthenticated``."""


REDIS_ERRORS = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.MovedError,
    RedisClusterException,
)
"""What a Redis restart or a failover makes a command fail with, for a moment."""
REPLICA_WAIT_MS = 5000


@dataclass
class Injector:
    """Writes duplicates, conflicts, forgeries and garbage; remembers every one of them."""

    redis_url: str
    hub_url: str
    runtimes: list[RuntimeLike]
    rng: random.Random
    conflicts: list[InjectedConflict] = field(default_factory=list)
    forgeries: list[InjectedForgery] = field(default_factory=list)
    forged_acks: list[InjectedForgedAck] = field(default_factory=list)
    garbage_entries: list[InjectedGarbage] = field(default_factory=list)
    duplicated: int = 0
    injected_ids: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.client = connect(
            RedisTarget(self.redis_url)
        )  # a cluster's when the URL is a cluster node's
        self._garbage_runs = 0
        self._keys = {runtime.runtime_id: runtime.key for runtime in self.runtimes}
        self._hub: HubStore | None = None

    def close(self) -> None:
        """Close the Redis connection and the hub store."""
        self.client.close()
        if self._hub is not None:
            self._hub.close()

    def _redis(self, action: Callable[[], T]) -> T:
        # The scheduler restarts redis-server (or fails a cluster's master over) between
        # injections; a stale connection or slot table fails once and the next attempt
        # reconnects (and reads the slot table again).
        for attempt in range(20):
            try:
                return action()
            except REDIS_ERRORS:
                if attempt == 19:
                    raise
                self._reconnect()
                threading_wait(0.1)
        raise AssertionError("unreachable")

    def _reconnect(self) -> None:
        client: Any = self.client
        if is_cluster(self.client):
            with contextlib.suppress(*REDIS_ERRORS):  # the next attempt tries again
                client.nodes_manager.initialize()
        else:
            client.connection_pool.disconnect()

    def _write(self, key: str, *commands: Callable[[Any], object]) -> list[Any]:
        """Run ``commands`` (each given a pipeline) on ``key``'s server in one round trip.

        On a cluster they go to the master of ``key``'s slot, followed by ``WAIT 1`` on
        the same connection: they are on a replica before this returns, so a master
        killed later cannot take them with it.
        """

        def run() -> list[Any]:
            if not is_cluster(self.client):
                pipe: Any = self.client.pipeline(transaction=False)
                for command in commands:
                    command(pipe)
                return list(pipe.execute())
            cluster: Any = self.client
            node = cluster.get_redis_connection(cluster.get_node_from_key(key))
            pipe = node.pipeline(transaction=False)
            for command in commands:
                command(pipe)
            pipe.execute_command("WAIT", 1, REPLICA_WAIT_MS)
            *replies, replicas = pipe.execute()
            assert int(replicas) >= 1, f"no replica confirmed an injection on {key}"
            return list(replies)

        return self._redis(run)

    def _xadd(self, hub_project: str, fields: dict[str, Any]) -> str:
        stream = keys.events_stream(hub_project)
        (entry_id,) = self._write(stream, lambda pipe: pipe.xadd(stream, fields))
        text = as_text(entry_id)
        self.injected_ids.add(text)
        return text

    def _signed(self, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` signed with the key of the runtime they name, as its relay would."""
        runtime_id = fields["runtime_id"]
        if isinstance(runtime_id, bytes):
            runtime_id = runtime_id.decode()
        fields[SIGNATURE_FIELD] = sign_event_entry(self._keys[runtime_id], fields)
        return fields

    # ----- duplicates -----

    def duplicates(self, count: int) -> int:
        """Re-XADD up to ``count`` genuine event entries of a random stream; how many."""
        hub_project = self.rng.choice(sorted({r.hub_project for r in self.runtimes}))
        stream = keys.events_stream(hub_project)
        recent = self._redis(lambda: self.client.xrevrange(stream, count=400))
        genuine = []
        for raw_id, raw in recent:
            entry_id = as_text(raw_id)
            fields = decode_fields(raw)
            if entry_id not in self.injected_ids and entry_kind(fields) == "event":
                genuine.append(fields)
        picked = self.rng.sample(genuine, min(count, len(genuine)))
        for fields in picked:
            # Re-added copies are genuine too (same bytes): later duplicates may copy them.
            self._redis(lambda f=fields: self.client.xadd(stream, f))  # type: ignore[misc]
        self.duplicated += len(picked)
        return len(picked)

    # ----- conflicts -----

    def _stored_event(self) -> dict[str, Any] | None:
        """The body of an event the hub holds, with its hash under ``_hash``: a random one of
        a random run of a random hub project; None while the hub holds none."""
        if self._hub is None:
            self._hub = open_store(self.hub_url, create_schema=False)
        hub_project = self.rng.choice(sorted({r.hub_project for r in self.runtimes}))
        runs = self._hub.runs(hub_project, limit=500, gaps_per_run=0)
        if not runs:
            return None
        run = self.rng.choice(runs)
        events = self._hub.events(
            hub_project, run_id=run.run_id, project_id=run.project_id, limit=1000
        )
        if not events:
            return None
        event = self.rng.choice(events)
        body: dict[str, Any] = json.loads(event.record)
        body["_hash"] = event.content_hash
        return body

    def _forged_offer(self) -> _Offer | None:
        """Other bytes under a key the hub holds; None while it holds nothing."""
        body = self._stored_event()
        if body is None:
            return None
        genuine_hash = body.pop("_hash")
        # other bytes, within the allowlist (the hub refuses data outside it before it
        # looks for a conflict): another moment, to the microsecond
        body["occurred_at"] = f"2000-01-01T00:00:00.{self.rng.randrange(1_000_000):06d}Z"
        event = SyncEvent.model_validate(body)
        data, digest = event.encoded()
        return _Offer(event, genuine_hash, digest, dict(event_entry_fields(event, data, digest)))

    def conflict(self) -> InjectedConflict | None:
        """Offer other bytes under a key the hub holds, signed with its runtime's key; None
        while the hub holds nothing."""
        offer = self._forged_offer()
        if offer is None:
            return None
        entry_id = self._xadd(offer.hub_project, self._signed(offer.fields))
        forged = InjectedConflict(
            offer.hub_project, offer.key, offer.genuine_hash, offer.digest, entry_id
        )
        self.conflicts.append(forged)
        return forged

    # ----- forgeries -----

    def forgery(self) -> InjectedForgery | None:
        """Offer other bytes under a key the hub holds without the runtime's key (unsigned,
        or signed with a key of the forger's own); None while the hub holds nothing."""
        offer = self._forged_offer()
        if offer is None:
            return None
        fields = offer.fields
        how = self.rng.choice(["unsigned", "wrong_key"])
        if how == "wrong_key":
            fields[SIGNATURE_FIELD] = sign_event_entry(RuntimeKey.generate(), fields)
        entry_id = self._xadd(offer.hub_project, fields)
        forged = InjectedForgery(offer.hub_project, offer.key, offer.digest, entry_id, how)
        self.forgeries.append(forged)
        return forged

    # ----- forged acks -----

    def forged_ack(self, hub_id: str) -> InjectedForgedAck | None:
        """Acknowledge a runtime's recent entries without its hub's key, after deleting some
        of them from the stream; None while its stream holds none of its entries."""
        runtime = self.rng.choice(self.runtimes)
        stream = keys.events_stream(runtime.hub_project)
        recent = self._redis(lambda: self.client.xrevrange(stream, count=200))
        mine: list[tuple[str, dict[str, bytes]]] = []
        for raw_id, raw in recent:
            entry_id, fields = as_text(raw_id), decode_fields(raw)
            if (
                entry_id not in self.injected_ids
                and entry_kind(fields) == "event"
                and fields.get("runtime_id") == runtime.runtime_id.encode()
            ):
                mine.append((entry_id, fields))
        if len(mine) < 2:
            return None
        picked = self.rng.sample(mine, min(len(mine), 20))
        half = len(picked) // 2
        deleted, parked = picked[:half], picked[half:]
        records = [_claimed(fields, Outcome.ACCEPTED) for _, fields in deleted] + [
            _claimed(fields, self.rng.choice([Outcome.CONFLICT, Outcome.REJECTED]))
            for _, fields in parked
        ]
        entry: dict[str, Any] = dict(outcomes_entry_fields(runtime.hub_project, records))
        how = self.rng.choice(["unsigned", "wrong_key"])
        if how == "wrong_key":  # the genuine hub's id, but not its key
            outcomes_signed_by_a_stranger(runtime.runtime_id, hub_id, entry)
        acks = keys.acks_stream(runtime.hub_project, runtime.runtime_id)
        commands: list[Callable[[Any], object]] = []
        if deleted:
            commands.append(lambda pipe: pipe.xdel(stream, *[i for i, _ in deleted]))
        commands.append(lambda pipe: pipe.xadd(acks, entry))
        self._write(acks, *commands)  # one slot: the stream and the ack stream share {P}
        forged = InjectedForgedAck(
            runtime.hub_project,
            runtime.runtime_id,
            tuple(_key(fields) for _, fields in deleted),
            tuple(_key(fields) for _, fields in parked),
            how,
        )
        self.forged_acks.append(forged)
        return forged

    # ----- garbage -----

    def _fake_event(self, runtime: RuntimeLike) -> SyncEvent:
        self._garbage_runs += 1
        return SyncEvent.model_validate(
            {
                "project_id": runtime.project_id,
                "hub_project": runtime.hub_project,
                "home_runtime_id": runtime.runtime_id,
                "run_id": f"garbage-{self._garbage_runs}",
                "sequence": 1,
                "event_type": "step.completed",
                "occurred_at": "2026-11-29T16:38:54.123456Z",
                "data": {"garbage": True},
            }
        )

    def garbage(self, kind: str) -> InjectedGarbage:
        """XADD one garbage entry of ``kind`` (see ``GARBAGE_KINDS``): spoiled content signed
        with its runtime's key, or a copy that is not what the key signed."""
        runtime = self.rng.choice(self.runtimes)
        event = self._fake_event(runtime)
        data, digest = event.encoded()
        fields: dict[str, Any] = dict(event_entry_fields(event, data, digest))
        key: Key | None = None
        hub_project = runtime.hub_project
        if kind == "bad_json":
            fields["event"] = b'{"schema": "hubsync.sync-event.v1", "run_id": '
            fields["content_hash"] = content_hash(fields["event"])
        elif kind == "missing_field":
            fields = self._signed(fields)
            del fields["event_type"]
        elif kind == "hash_mismatch":
            fields["content_hash"] = content_hash(data + b" ")
        elif kind == "oversized":
            fields["event"] = data + b" " * (300 * 1024)
            fields["content_hash"] = content_hash(fields["event"])
        elif kind == "not_canonical":
            loose = json.dumps(json.loads(data), indent=1).encode()
            fields["event"], fields["content_hash"] = loose, content_hash(loose)
        elif kind in ("corrupted_copy", "retyped_copy", "junk_copy"):
            # A genuine entry, spoiled: the hub must refuse it and tell nobody, so the
            # genuine row still ends acked.
            copied = self._genuine_copy(hub_project)
            if copied is not None:
                fields = copied
                key = _key(fields)
            if kind == "corrupted_copy":  # its runtime's key over another hash
                fields["content_hash"] = content_hash(fields["event"] + b"corrupted")
                fields = self._signed(fields)
            elif kind == "retyped_copy":  # what a keyless writer can do: not re-signed
                fields["event_type"] = b"run.cancelled"
            else:
                fields["junk"] = b"x" * 2**21
        else:
            raise ValueError(f"unknown garbage kind {kind!r}")
        if SIGNATURE_FIELD not in fields:
            fields = self._signed(fields)
        entry_id = self._xadd(hub_project, fields)
        reason = GARBAGE_KINDS[kind]
        alert = _alert_key(fields) if reason == FORGERY_REASON else None
        injected = InjectedGarbage(hub_project, kind, reason, entry_id, key, alert)
        self.garbage_entries.append(injected)
        return injected
        injected = InjectedGarbage(hub_project, kind, GARBAGE_KINDS[kind], entry_id, key)
        self.garbage_entries.append(injected)
        return injected

    def _genuine_copy(self, hub_project: str) -> dict[str, Any] | None:
        """The fields of a recent genuine event entry: its bytes are a real outbox row's."""
        recent = self._redis(
            lambda: self.client.xrevrange(keys.events_stream(hub_project), count=200)
        )
        for raw_id, raw in recent:
            entry_id = as_text(raw_id)
            fields = decode_fields(raw)
            if entry_id not in self.injected_ids and entry_kind(fields) == "event":
                return dict(fields)
        return None


def _alert_key(fields: dict[str, Any]) -> tuple[str, str, int, str]:
    """A refused entry's alert: the key it claims, and the hash of the bytes it carried."""
    text = {n: v.decode() if isinstance(v, bytes) else str(v) for n, v in fields.items()}
    event = fields["event"] if isinstance(fields["event"], bytes) else fields["event"].encode()
    return (text["project_id"], text["run_id"], int(text["sequence"]), content_hash(event))


def _key(fields: dict[str, bytes]) -> Key:
    return (fields["project_id"].decode(), fields["run_id"].decode(), int(fields["sequence"]))


def _claimed(fields: dict[str, bytes], outcome: Outcome) -> OutcomeRecord:
    """A forged verdict on a genuine entry, naming its genuine hash (as the hub would)."""
    return OutcomeRecord(*_key(fields), outcome, fields["content_hash"].decode())


def threading_wait(seconds: float) -> None:
    """Pause between reconnect attempts (an Event wait: no busy loop, no bare sleep)."""
    threading.Event().wait(seconds)
