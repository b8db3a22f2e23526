"""What a fault run writes onto a live pipeline's streams behind its back.

* duplicates: genuine entries read back from a runtime's stream and XADDed again;
* conflicts: a key the hub already holds, with other data (valid canonical bytes, a
  correct hash, the runtime's own id), signed with the runtime's key: a buggy twin, or a
  forger who stole the key;
* forgeries: the same offer without the key (unsigned, or signed with a key the hub never
  enrolled): every hub worker must refuse them as ``unauthenticated`` without telling any
  runtime;
* forged acks: an outcomes entry on a runtime's ack stream its hub did not sign, claiming
  ``accepted`` for entries deleted from the stream first and ``conflict`` or ``rejected``
  for others: the relay must ignore it;
* garbage: entries of a runtime, signed with its key after they were spoiled
  (``garbage.GARBAGE``), that every hub worker must dead-letter with a known reason;
* cross-runtime injection: a new run in another runtime's project, signed with a
  runtime's own key: the hub must refuse it ``not_owner`` and tell the owner nothing;
* stream exhaustion: a runtime's own stream trimmed to one entry and given an entry at
  the largest id, as its own Redis user could (``stream_exhaustion``; the caller repairs it
  later with ``repair_stream``, as an operator would): no other runtime may notice;
* lease-hash replay: what a lease's hash holds, read as any Redis reader could, presented
  as its holder's proof to renew, release and write a fenced value: every attempt refused.

Every injected entry is remembered (``self.record``) so duplicates are only ever made of
genuine entries, and so the checks can match each injection to its dead letter or alert.
Writes go through ``ResilientRedis``: they survive a Redis restart, and on a cluster a
replica holds each injection the checks look for before the next fault.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

from hubstore.errors import InvalidLeaseArgumentError
from hubstore.leases import LeaseClient
from hubstore.store import HubStore
from hubsync.core import keys
from hubsync.core.canonical import content_hash
from hubsync.core.connections import RedisClient
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
    HUB_ID_FIELD,
    SIGNATURE_FIELD,
    RuntimeKey,
    sign_event_entry,
    sign_outcomes_entry,
)
from hubsync.core.wire import SyncEvent
from hubsync.faults.garbage import GARBAGE
from hubsync.faults.records import (
    InjectedCrossRuntime,
    InjectedExhaustion,
    InjectedForgedAck,
    InjectedGarbage,
    InjectedLeaseReplay,
    InjectedOffer,
    Injections,
    Key,
    RuntimeUnderTest,
)
from hubsync.faults.writer import Command, ResilientRedis

Fields = dict[str, Any]
RECENT = 400
"""How many of a stream's newest entries duplicates, forged acks and copies are picked from."""
FORGERY_KINDS = ("unsigned", "wrong_key")
LARGEST_STREAM_ID = "18446744073709551615-18446744073709551615"
"""A stream entry at this id leaves no id for any later XADD."""


class FaultInjector:
    """Writes duplicates, conflicts, forgeries, forged acks and garbage; remembers each.

    ``hub`` is read for events it holds (the keys conflicts and forgeries reuse);
    ``hub_id`` is the id forged acks claim to come from.
    """

    KINDS = (
        "duplicates",
        "conflict",
        "forgery",
        "forged_ack",
        "garbage",
        "cross_runtime",
        "lease_replay",
    )
    """The fault kinds ``inject`` knows, each a method of this class."""

    def __init__(
        self,
        client: RedisClient,
        hub: HubStore,
        hub_id: str,
        runtimes: list[RuntimeUnderTest],
        rng: random.Random,
    ) -> None:
        self.redis = ResilientRedis(client)
        self.hub = hub
        self.hub_id = hub_id
        self.runtimes = runtimes
        self.rng = rng
        self.record = Injections()
        self._made_up_runs = 0

    def inject(self, kind: str) -> str | None:
        """One fault of ``kind`` (one of ``KINDS``) with random parameters; what was done,
        in a few words, or None when there was nothing to do it with yet."""
        if kind == "duplicates":
            count = self.duplicates(self.rng.randint(5, 60))
            return f"{count} entries re-added" if count else None
        if kind == "garbage":
            kinds = list(GARBAGE)
            if self.record.garbage:
                kinds = self.rng.sample(kinds, self.rng.randint(1, 3))
            return ", ".join(self.garbage(name).kind for name in kinds)  # every kind first
        done = getattr(self, kind)()
        return None if done is None else str(done)

    # ----- reading and writing entries -----

    def _runtime_of(self, project_id: str) -> RuntimeUnderTest:
        return next(r for r in self.runtimes if r.project_id == project_id)

    def _xadd(self, runtime: RuntimeUnderTest, fields: Fields) -> str:
        stream = runtime.events_stream
        (entry_id,) = self.redis.write(stream, lambda pipe: pipe.xadd(stream, fields))
        text = as_text(entry_id)
        self.record.entry_ids.add(text)
        return text

    @staticmethod
    def _signed(key: RuntimeKey, fields: Fields) -> Fields:
        """``fields`` signed with ``key`` (a runtime's, as its relay would sign them)."""
        fields[SIGNATURE_FIELD] = sign_event_entry(key, fields)
        return fields

    def _genuine(self, runtime: RuntimeUnderTest, count: int) -> list[tuple[str, Fields]]:
        """Up to ``count`` of the newest genuine event entries of ``runtime``'s stream."""
        stream = runtime.events_stream
        recent: Any = self.redis.run(lambda: self.redis.client.xrevrange(stream, count=count))
        genuine = []
        for raw_id, raw in recent:
            entry_id, fields = as_text(raw_id), decode_fields(raw)
            if (
                entry_id not in self.record.entry_ids
                and entry_kind(fields) == "event"
                and fields.get("runtime_id") == runtime.runtime_id.encode()
            ):
                genuine.append((entry_id, dict(fields)))
        return genuine

    # ----- duplicates -----

    def duplicates(self, count: int) -> int:
        """Re-XADD up to ``count`` genuine event entries of a random runtime that has some;
        how many."""
        # a runtime whose stream holds entries (one just deleted as repaired holds none)
        for runtime in self.rng.sample(self.runtimes, len(self.runtimes)):
            genuine = self._genuine(runtime, RECENT)
            if genuine:
                break
        stream = runtime.events_stream
        picked = self.rng.sample(genuine, min(count, len(genuine)))
        for _, fields in picked:
            # Re-added copies are genuine too (same bytes): later duplicates may copy them.
            self.redis.run(lambda f=fields: self.redis.client.xadd(stream, f))  # type: ignore[misc]
        self.record.duplicated += len(picked)
        return len(picked)

    # ----- conflicts and forgeries -----

    def _stored_event(self) -> tuple[SyncEvent, str] | None:
        """A random event the hub holds, with its hash; None while it holds none."""
        hub_project = self.rng.choice(sorted({r.hub_project for r in self.runtimes}))
        runs = self.hub.runs(hub_project, limit=500, gaps_per_run=0)
        if not runs:
            return None
        run = self.rng.choice(runs)
        events = self.hub.events(
            hub_project, run_id=run.run_id, project_id=run.project_id, limit=1000
        )
        if not events:
            return None
        stored = self.rng.choice(events)
        return SyncEvent.model_validate(json.loads(stored.record)), stored.content_hash

    def _forged_offer(self) -> tuple[SyncEvent, str, str, Fields] | None:
        """Other bytes under a key the hub holds: the event, the genuine hash, the forged
        hash and the entry's fields (unsigned); None while the hub holds nothing."""
        stored = self._stored_event()
        if stored is None:
            return None
        genuine, genuine_hash = stored
        # other bytes within the allowlist (the hub refuses data outside it before it looks
        # for a conflict): another moment, to the microsecond
        moment = genuine.occurred_at.replace(year=2000, microsecond=self.rng.randrange(10**6))
        event = genuine.model_copy(update={"occurred_at": moment})
        encoded, digest = event.encoded()
        return event, genuine_hash, digest, dict(event_entry_fields(event, encoded, digest))

    def conflict(self) -> InjectedOffer | None:
        """Offer other bytes under a key the hub holds, signed with its runtime's key; None
        while the hub holds nothing."""
        offer = self._forged_offer()
        if offer is None:
            return None
        event, genuine_hash, digest, fields = offer
        runtime = self._runtime_of(event.project_id)
        entry_id = self._xadd(runtime, self._signed(runtime.key, fields))
        key = _event_key(event)
        forged = InjectedOffer(
            event.hub_project, key, genuine_hash, digest, entry_id, "runtime_key"
        )
        self.record.conflicts.append(forged)
        return forged

    def forgery(self, how: str | None = None) -> InjectedOffer | None:
        """Offer other bytes under a key the hub holds without the runtime's key: ``how`` is
        ``unsigned`` or ``wrong_key`` (a key of the forger's own), random when not given;
        None while the hub holds nothing."""
        offer = self._forged_offer()
        if offer is None:
            return None
        event, genuine_hash, digest, fields = offer
        how = how or self.rng.choice(FORGERY_KINDS)
        if how == "wrong_key":
            self._signed(RuntimeKey.generate(), fields)
        entry_id = self._xadd(self._runtime_of(event.project_id), fields)
        key = _event_key(event)
        forged = InjectedOffer(event.hub_project, key, genuine_hash, digest, entry_id, how)
        self.record.forgeries.append(forged)
        return forged

    def cross_runtime(self) -> InjectedCrossRuntime | None:
        """A new run in another runtime's project, signed with an attacker runtime's own key
        and claiming it; None with fewer than two runtimes or while the hub holds nothing."""
        if len(self.runtimes) < 2:
            return None
        stored = self._stored_event()
        if stored is None:
            return None
        template, _ = stored
        victim = self._runtime_of(template.project_id)
        attacker = self.rng.choice([r for r in self.runtimes if r is not victim])
        self._made_up_runs += 1
        event = template.model_copy(
            update={
                "hub_project": attacker.hub_project,
                "home_runtime_id": attacker.runtime_id,
                "run_id": f"nightly-squat-{self._made_up_runs}",
                "sequence": 1,
            }
        )
        encoded, digest = event.encoded()
        fields = self._signed(attacker.key, dict(event_entry_fields(event, encoded, digest)))
        entry_id = self._xadd(attacker, fields)
        crossed = InjectedCrossRuntime(
            attacker.hub_project,
            attacker.runtime_id,
            victim.runtime_id,
            _event_key(event),
            digest,
            entry_id,
        )
        self.record.cross_runtime.append(crossed)
        return crossed

    # ----- a runtime's own stream used up -----

    def stream_exhaustion(self) -> InjectedExhaustion | None:
        """Trim a runtime's own stream to one entry and add one at the largest id, both copies
        of its genuine entries (so the hub judges them as duplicates, not as forgeries); None
        while its stream holds none. Its relay's XADDs are refused until ``repair_stream``."""
        runtime = self.rng.choice(self.runtimes)
        genuine = self._genuine(runtime, RECENT)
        if not genuine:
            return None
        stream = runtime.events_stream
        copy: Any = genuine[0][1]
        self.redis.run(lambda: self.redis.client.xadd(stream, copy, maxlen=1, approximate=False))
        self.redis.run(lambda: self.redis.client.xadd(stream, copy, id=LARGEST_STREAM_ID))
        exhausted = InjectedExhaustion(runtime.hub_project, runtime.runtime_id, stream)
        return exhausted

    def repair_stream(self, exhausted: InjectedExhaustion) -> None:
        """What an operator does for a stream whose ids are used up: delete it. The consumers
        make it again with its group; the relay resends every row not acknowledged."""
        self.redis.run(lambda: self.redis.client.delete(exhausted.stream))

    # ----- lease proofs read from Redis -----

    def lease_replay(self) -> InjectedLeaseReplay:
        """A holder takes a lease and writes a fenced value; a reader of the lease's hash
        presents what it read as the proof, to renew, release and overwrite the value."""
        leases = LeaseClient(self.redis.client)
        self._made_up_runs += 1
        resource = f"effect:fault-replay-{self._made_up_runs}"
        granted = self.redis.run(lambda: leases.acquire_or_raise(resource, "holder", 60_000))
        lease = granted.lease
        self.redis.run(lambda: leases.fenced_write(lease, "value", b"genuine"))
        stored: Any = self.redis.run(lambda: self.redis.client.hgetall(keys.lease(resource)))
        read = [as_text(v) for v in stored.values()]
        attempts = refused = 0
        for guess in read:
            stolen = replace(lease, proof=guess)
            for attempt in (
                lambda s=stolen: leases.renew(s),
                lambda s=stolen: leases.release(s),
                lambda s=stolen: leases.fenced_write(s, "value", b"stolen"),
            ):
                attempts += 1
                try:
                    refused += not self.redis.run(attempt).ok
                except InvalidLeaseArgumentError:
                    refused += 1  # not even shaped like a proof: refused before Redis
        kept = self.redis.run(lambda: leases.read_fenced(resource, "value"))
        self.redis.run(lambda: leases.release(lease))
        replay = InjectedLeaseReplay(
            resource, attempts, refused, kept is not None and kept[0] == b"genuine"
        )
        self.record.lease_replays.append(replay)
        return replay

    # ----- forged acks -----

    def forged_ack(self) -> InjectedForgedAck | None:
        """Acknowledge a runtime's recent entries without its hub's key, after deleting some
        of them from the stream; None while its stream holds too few of its entries."""
        runtime = self.rng.choice(self.runtimes)
        mine = self._genuine(runtime, RECENT)
        if len(mine) < 2:
            return None
        picked = self.rng.sample(mine, min(len(mine), 20))
        deleted, parked = picked[: len(picked) // 2], picked[len(picked) // 2 :]
        records = [_claimed(fields, Outcome.ACCEPTED) for _, fields in deleted] + [
            _claimed(fields, self.rng.choice([Outcome.CONFLICT, Outcome.REJECTED]))
            for _, fields in parked
        ]
        entry: Fields = dict(outcomes_entry_fields(runtime.hub_project, records))
        how = self.rng.choice(FORGERY_KINDS)
        if how == "wrong_key":
            outcomes_signed_by_a_stranger(runtime.runtime_id, self.hub_id, entry)
        stream = runtime.events_stream
        acks = keys.acks_stream(runtime.hub_project, runtime.runtime_id)
        commands: list[Command] = []
        if deleted:
            commands.append(lambda pipe: pipe.xdel(stream, *[i for i, _ in deleted]))
        commands.append(lambda pipe: pipe.xadd(acks, entry))
        self.redis.write(acks, *commands)  # one slot: the stream and the ack stream share {P}
        forged = InjectedForgedAck(
            runtime.hub_project,
            runtime.runtime_id,
            tuple(_entry_key(fields) for _, fields in deleted),
            tuple(_entry_key(fields) for _, fields in parked),
            how,
        )
        self.record.forged_acks.append(forged)
        return forged

    # ----- garbage -----

    def garbage(self, kind: str) -> InjectedGarbage:
        """XADD one garbage entry of ``kind`` (see ``garbage.GARBAGE``): spoiled content
        signed with its runtime's key, or an entry that is not what the key signed."""
        made = GARBAGE.get(kind)
        if made is None:
            raise ValueError(f"unknown garbage kind {kind!r}")
        runtime = self.rng.choice(self.runtimes)
        fields = self._made_up_entry(runtime)
        key: Key | None = None
        if made.copies_genuine:
            copied = self._genuine(runtime, RECENT)
            if copied:
                fields = copied[0][1]
                key = _entry_key(fields)
            fields.pop(SIGNATURE_FIELD, None)
        if made.keyless:
            made.spoil(self._signed(runtime.key, fields))
        else:
            made.spoil(fields)
            self._signed(runtime.key, fields)
        entry_id = self._xadd(runtime, fields)
        alert = _refusal_alert(fields) if made.refused else None
        injected = InjectedGarbage(runtime.hub_project, kind, made.reason, entry_id, key, alert)
        self.record.garbage.append(injected)
        return injected

    def _made_up_entry(self, runtime: RuntimeUnderTest) -> Fields:
        """The fields of a new event of ``runtime`` no run of it ever held."""
        self._made_up_runs += 1
        event = SyncEvent.model_validate(
            {
                "project_id": runtime.project_id,
                "hub_project": runtime.hub_project,
                "home_runtime_id": runtime.runtime_id,
                "run_id": f"garbage-{self._made_up_runs}",
                "sequence": 1,
                "event_type": "step.completed",
                "occurred_at": "2026-11-29T16:38:54.123456Z",
                "data": {"garbage": True},
            }
        )
        data, digest = event.encoded()
        return dict(event_entry_fields(event, data, digest))


def outcomes_signed_by_a_stranger(
    runtime_id: str, hub_id: str | None, fields: dict[str, Any]
) -> dict[str, Any]:
    """An outcomes entry for ``runtime_id`` under hub id ``hub_id``, signed with a key of the
    forger's own (not the hub's): what an attacker who can write to Redis could offer."""
    fields[HUB_ID_FIELD] = hub_id
    fields[SIGNATURE_FIELD] = sign_outcomes_entry(
        RuntimeKey.generate(), fields, runtime_id=runtime_id
    )
    return fields


def _event_key(event: SyncEvent) -> Key:
    return (event.project_id, event.run_id, event.sequence)


def _refusal_alert(fields: Fields) -> tuple[str, str, int, str]:
    """The security alert a refused entry raises: the key it claims (fields as text or
    bytes) and the hash of the bytes it carried."""
    text = {n: v.decode() if isinstance(v, bytes) else str(v) for n, v in fields.items()}
    key = (text["project_id"], text["run_id"], int(text["sequence"]))
    return (*key, content_hash(fields["event"]))


def _entry_key(fields: Fields) -> Key:
    return (fields["project_id"].decode(), fields["run_id"].decode(), int(fields["sequence"]))


def _claimed(fields: Fields, outcome: Outcome) -> OutcomeRecord:
    """A forged verdict on a genuine entry, naming its genuine hash (as the hub would)."""
    return OutcomeRecord(*_entry_key(fields), outcome, fields["content_hash"].decode())
