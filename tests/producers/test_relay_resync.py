"""A relay acting on the hub's resync requests: only verified ones, each part once; rows
beyond the hub's cursors resent, pruned ones derived again with their original bytes,
parked ones left parked."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from hubsync.core import keys
from hubsync.core.canonical import content_hash
from hubsync.core.clock import utc_now_iso
from hubsync.core.entries import Outcome
from hubsync.core.resync import ResyncPoint, ResyncRequest, ResyncScope, RunCursor
from hubsync.core.signing import SIGNATURE_FIELD, RuntimeKey
from producers.derivation import StoreIdentity
from producers.relay import Relay
from producers.store.event_store import RunEventStore
from tests.helpers.hub_double import ack_everything, stream_events
from tests.helpers.relay_support import relay_settings, relay_with_events
from tests.helpers.trust import enrollment_of


def request_for(store: RunEventStore, runtime: str, **changes: str) -> ResyncRequest:
    """A request to ``runtime`` to resend run-0 beyond sequence 1 and all of run-1, with its
    hub's id (``changes`` change any of its fields)."""
    enrollment = enrollment_of(runtime)
    assert enrollment is not None
    point = ResyncPoint(cursors=(RunCursor(store.project_id, "run-0", 1),))
    values = {
        "hub_id": enrollment.hub_id,
        "hub_project": "alpha",
        "runtime_id": runtime,
        "request_id": "rq-1",
        "issued_at": utc_now_iso(),
    } | changes
    return ResyncRequest(**values, scope=ResyncScope(), point=point)  # type: ignore[arg-type]


def publish(client: redis.Redis, runtime_id: str, fields: dict[str, str]) -> None:
    client.xadd(keys.acks_stream("alpha", runtime_id), fields)  # type: ignore[arg-type]


def key_of(runtime_id: str) -> RuntimeKey:
    enrollment = enrollment_of(runtime_id)
    assert enrollment is not None
    return RuntimeKey(enrollment.key)


@dataclass
class Synced:
    """A store and a new relay of it after ``synced``'s history."""

    store: RunEventStore
    relay: Relay

    @property
    def runtime_id(self) -> str:
        return self.relay.runtime_id

    def request(self, key: RuntimeKey | None = None, **changes: str) -> dict[str, str]:
        """``request_for`` this runtime's store, signed with ``key`` (by default its own)."""
        request = request_for(self.store, self.runtime_id, **changes)
        return request.signed_fields(key or key_of(self.runtime_id))


@pytest.fixture
def synced(tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> Iterator[Synced]:
    """Two runs of three events sent, run-1 sequence 3 parked as a conflict, the rest acked,
    and the acked rows pruned; then a new relay of the store (closed after the test)."""
    registry, store, relay = relay_with_events(tmp_path / "state", redis_url, runs=2, per_run=3)

    def judge(project_id: str, run_id: str, sequence: int) -> tuple[Outcome, str | None]:
        parked = (run_id, sequence) == ("run-1", 3)
        return (Outcome.CONFLICT, "sequence_reused") if parked else (Outcome.ACCEPTED, None)

    relay.run_once()
    ack_everything(redis_client, "alpha", judge)
    relay.run_once()
    step = store.prune_acked_outbox(0, float("inf"), 1000, 0.0)
    assert step.deleted == 5 and store.outbox_counts()["conflict"] == 1
    for entry_id, _ in redis_client.xrange(keys.events_stream("alpha", registry.runtime_id)):
        redis_client.xdel(keys.events_stream("alpha", registry.runtime_id), entry_id)
    relay.close()
    again = Relay(relay_settings(tmp_path / "state", redis_url), registry)
    yield Synced(store, again)
    again.close()


def resent(client: redis.Redis) -> dict[tuple[str, int], bytes]:
    return {
        (f["run_id"].decode(), int(f["sequence"])): f["event"]
        for f in stream_events(client, "alpha")
    }


def test_a_request_resends_what_lies_beyond_the_cursors_in_the_bytes_first_sent(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    registry, store, first = relay_with_events(tmp_path / "state", redis_url, runs=2, per_run=3)
    first.run_once()
    originals = resent(redis_client)
    first.close()
    redis_client.delete(keys.events_stream("alpha", registry.runtime_id))
    relay = Relay(relay_settings(tmp_path / "state", redis_url), registry)
    # acked, then pruned: the outbox keeps nothing of the six events
    for run_id in ("run-0", "run-1"):
        seqs = [e.seq for e in store.outbox_for_run(run_id)]
        store.mark_acked(seqs, 1.0)
    assert store.prune_acked_outbox(0, float("inf"), 1000, 0.0).deleted == 6

    publish(redis_client, registry.runtime_id, request_for(store, registry.runtime_id)
            .signed_fields(key_of(registry.runtime_id)))  # fmt: skip
    relay.run_once()
    again = resent(redis_client)
    assert sorted(again) == [("run-0", 2), ("run-0", 3), ("run-1", 1), ("run-1", 2), ("run-1", 3)]
    assert all(again[k] == originals[k] for k in again)  # derived again: the same bytes
    assert relay.resync_stats.applied == 1 and store.outbox_counts()["attempted"] == 5
    relay.close()


def test_parked_rows_stay_parked_and_a_replayed_request_changes_nothing(
    synced: Synced, redis_client: redis.Redis
) -> None:
    store, relay, runtime_id = synced.store, synced.relay, synced.runtime_id
    fields = synced.request()
    publish(redis_client, runtime_id, fields)
    relay.run_once()
    assert sorted(resent(redis_client)) == [("run-0", 2), ("run-0", 3), ("run-1", 1), ("run-1", 2)]
    assert store.outbox_counts()["conflict"] == 1  # run-1 sequence 3: not resent
    ack_everything(redis_client, "alpha")
    relay.run_once()
    assert store.outbox_counts()["pending"] == 0
    before = (store.outbox_counts(), redis_client.xlen(keys.events_stream("alpha", runtime_id)))

    publish(redis_client, runtime_id, fields)  # the same request, replayed
    relay.run_once()
    assert relay.resync_stats.replayed == 1 and relay.resync_stats.applied == 1
    assert store.outbox_counts() == before[0]
    assert len(stream_events(redis_client, "alpha")) == 4  # nothing sent again


def test_forged_unsigned_and_misdirected_requests_are_counted_unverified_and_ignored(
    synced: Synced, redis_client: redis.Redis
) -> None:
    unsigned = synced.request()
    del unsigned[SIGNATURE_FIELD]
    tampered = synced.request()
    tampered["point"] = '{"since":"2000-01-01T00:00:00.000000Z"}'
    untrusted = [
        unsigned,
        tampered,
        synced.request(RuntimeKey.generate()),  # forged
        synced.request(runtime_id="rt-other"),
        synced.request(hub_id="hub-0000000000000000"),
        synced.request(hub_project="beta"),
    ]
    for fields in untrusted:
        publish(redis_client, synced.runtime_id, fields)
    counts = synced.store.outbox_counts()
    synced.relay.run_once()
    assert synced.relay.ack_stats.unverified == len(untrusted)
    assert synced.relay.resync_stats.applied == synced.relay.resync_stats.replayed == 0
    assert synced.store.outbox_counts() == counts and stream_events(redis_client, "alpha") == []


def test_an_acked_row_holding_a_secret_known_since_is_resent_in_new_bytes(
    tmp_path: Path,
) -> None:
    late = "late-secret-7f3a9c"
    identity = StoreIdentity("proj-1", "acme", "rt-host-0001")
    with RunEventStore(tmp_path / "store.sqlite", identity, environ={}) as store:
        appended = store.append_event("run-0", "step.completed", {"outputs": {"url": late}})
        store.mark_acked([appended.outbox_seq], 1.0)
        store.redactor.register(late)  # scrubs the local event; the sent row keeps its bytes
        [sent] = store.outbox_for_run("run-0")
        assert late.encode() in sent.sync_event

        request = ResyncRequest("hub-1", "acme", "rt-host-0001", "rq-1", utc_now_iso(),
                                ResyncScope(), ResyncPoint(cursors=()))  # fmt: skip
        assert store.apply_resync(request, 2.0)
        [again] = store.outbox_for_run("run-0")
    assert again.state == "attempted" and late.encode() not in again.sync_event
    assert again.content_hash == content_hash(again.sync_event) != sent.content_hash
