"""The sender's read-ahead (the next batch read and signed while the previous one is on the
wire) and its split pipeline, against a real private redis-server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from hubstore.memory import MemoryHubStore
from hubstore.store import HubStore
from hubsync.core.connections import RedisClient, RedisTarget, connect
from hubsync.core.signing import RuntimeKey, verify_event_entry
from producers.registry import RuntimeRegistry
from producers.relay import Relay, split_pipeline
from producers.relay.sender import OutboxSender
from producers.relay.split_pipeline import WrittenCommands
from producers.store.event_store import RunEventStore
from producers.store.outbox import OutboxRow
from tests.helpers.clock import FakeClock
from tests.helpers.hub_double import stream_events
from tests.helpers.relay_support import append_many, make_runtime, relay_settings
from tests.helpers.support import wait_until
from tests.helpers.trust import join

BATCH = 10


def only_sender(relay: Relay) -> OutboxSender:
    relay.refresh_projects()
    (sender,) = relay._senders.values()
    return sender


@dataclass
class Draining:
    """A relay over one project ("alpha") with a backlog, its sender and a client."""

    registry: RuntimeRegistry
    store: RunEventStore
    relay: Relay
    sender: OutboxSender
    client: RedisClient
    clock: FakeClock
    """The relay's monotonic clock: a refused project's backoff runs out only when moved."""

    def send(self) -> int:
        """One batch sent: how many rows."""
        return self.sender.send_unsent(self.client)

    def send_the_rest(self) -> None:
        """Batches sent until none is left."""
        while self.send():
            pass


@contextmanager
def draining(
    tmp_path: Path, redis_url: str, rows: int, hub: HubStore | None = None
) -> Iterator[Draining]:
    registry, (store,) = make_runtime(tmp_path / "state", ["alpha"], hub)
    append_many(store, runs=1, per_run=rows)
    relay = Relay(relay_settings(tmp_path / "state", redis_url, batch_count=BATCH), registry)
    relay.monotonic = clock = FakeClock()
    client = connect(RedisTarget(redis_url))
    try:
        yield Draining(registry, store, relay, only_sender(relay), client, clock)
    finally:
        client.close()
        relay.close()


def sequences_on_stream(client: redis.Redis, hub_project: str) -> list[int]:
    return [int(fields["sequence"]) for fields in stream_events(client, hub_project)]


def test_a_full_batch_reads_the_next_one_ahead_and_the_next_send_uses_it(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    with draining(tmp_path, redis_url, 3 * BATCH) as d:
        reads: list[int] = []
        unsent = d.sender.store.unsent

        def counted(after_seq: int, limit: int) -> list[OutboxRow]:
            reads.append(after_seq)
            return unsent(after_seq, limit)

        monkeypatch.setattr(d.sender.store, "unsent", counted)
        assert d.send() == BATCH
        assert len(reads) == 2  # this batch, and the next one read while this one was out
        assert d.send() == BATCH
        assert len(reads) == 3  # the batch read ahead went out; only the one after it was read
        d.send_the_rest()
    assert sequences_on_stream(redis_client, "alpha") == list(range(1, 3 * BATCH + 1))


def test_a_batch_read_ahead_under_an_old_key_goes_out_signed_with_the_new_one(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    hub = MemoryHubStore()
    with draining(tmp_path, redis_url, 3 * BATCH, hub) as d:
        assert d.send() == BATCH  # and the next BATCH rows read ahead
        new_key = RuntimeKey(join(d.registry, ["alpha"], hub).key)
        d.relay.credentials.refresh()
        d.send_the_rest()
    entries = stream_events(redis_client, "alpha")
    assert [int(fields["sequence"]) for fields in entries] == list(range(1, 3 * BATCH + 1))
    assert all(verify_event_entry([new_key], fields) for fields in entries[BATCH:])
    assert not any(verify_event_entry([new_key], fields) for fields in entries[:BATCH])


def test_a_batch_read_ahead_is_not_sent_once_the_runtime_may_not_write_there(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    hub = MemoryHubStore()
    with draining(tmp_path, redis_url, 3 * BATCH, hub) as d:
        assert d.send() == BATCH
        join(d.registry, ["beta"], hub)  # enrolled elsewhere now: alpha's rows must wait
        d.relay.credentials.refresh()
        assert d.send() == 0
        assert sequences_on_stream(redis_client, "alpha") == list(range(1, BATCH + 1))
        join(d.registry, ["alpha"], hub)
        d.relay.credentials.refresh()
        d.send_the_rest()
    assert sequences_on_stream(redis_client, "alpha") == list(range(1, 3 * BATCH + 1))


def test_rows_committed_after_a_short_read_ahead_go_out_with_the_next_batch(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    # A read-ahead that reached the end of the outbox may predate a commit the sender was
    # told about (data_version); using it would leave that row behind until the next commit.
    with draining(tmp_path, redis_url, BATCH + 5) as d:
        assert d.send() == BATCH  # the 5 rows behind it were read ahead
        d.store.append_event("run-0", "step.completed", {"step": "late", "ok": True})
        assert d.send() == 6
        assert d.sender.caught_up
    assert sequences_on_stream(redis_client, "alpha") == list(range(1, BATCH + 7))


def test_an_error_reply_sends_the_batch_again_and_loses_nothing(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    with draining(tmp_path, redis_url, 3 * BATCH) as d:
        assert d.send() == BATCH  # and the next BATCH rows read ahead
        events = stream_events(redis_client, "alpha")
        stream = d.sender.stream
        redis_client.rename(stream, "parked")
        redis_client.set(stream, "not a stream")  # every XADD answers WRONGTYPE
        assert d.send() == 0  # the project's failure, not the relay's: no exception
        assert d.sender.refusals.refusing
        assert d.client.ping()  # every reply was read: the connection is still in step
        d.relay.marker.flush()
        assert d.store.outbox_counts()["attempted"] == BATCH
        redis_client.delete(stream)
        redis_client.rename("parked", stream)
        assert d.send() == 0  # backing off: not tried before its time
        d.clock.advance(120)
        d.send_the_rest()
    assert len(events) == BATCH
    assert sequences_on_stream(redis_client, "alpha") == list(range(1, 3 * BATCH + 1))
    assert d.store.outbox_counts()["attempted"] == 3 * BATCH


def test_a_connection_lost_before_the_replies_sends_the_batch_again_through_a_pipeline(
    redis_url: str, redis_client: redis.Redis
) -> None:
    client = connect(RedisTarget(redis_url))
    try:
        # The first command blocks, so the connection is killed before the second one ran.
        written = WrittenCommands(client, [("BLPOP", "gate", "0"), ("RPUSH", "list", "a")])

        def blocked_client() -> str | None:
            for entry in redis_client.client_list(_type="normal"):
                if entry["cmd"] == "blpop":
                    return str(entry["id"])
            return None

        client_id = wait_until(blocked_client, timeout=10)
        redis_client.client_kill_filter(_id=client_id)
        redis_client.rpush("gate", "open")  # the resent BLPOP returns at once
        written.read_replies()
    finally:
        client.close()
    assert redis_client.lrange("list", 0, -1) == [b"a"]
    assert redis_client.llen("gate") == 0


@pytest.mark.parametrize("with_hiredis", [True, False])
def test_a_written_batch_is_packed_as_redis_py_packs_it_and_lands_whole(
    redis_url: str, redis_client: redis.Redis, with_hiredis: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # text, bytes, non-ASCII text, an empty value and one past redis-py's 6,000-byte buffer
    # cutoff: hiredis's packing must give redis-py's bytes exactly, and so must the fallback
    big = bytes(range(256)) * 40
    commands: list[split_pipeline.Command] = [
        ("XADD", "packed", "*", "text", "héllo", "raw", b"\x00\xff", "empty", ""),
        ("XADD", "packed", "*", "big", big),
        ("SADD", "packed-set", "a"),
    ]
    if not with_hiredis:
        monkeypatch.setattr(split_pipeline, "_pack_command", None)
    connection = redis.Connection()  # type: ignore[no-untyped-call]
    assert b"".join(split_pipeline._packed(connection, commands)) == b"".join(
        connection.pack_commands(commands)  # type: ignore[no-untyped-call]
    )
    client = connect(RedisTarget(redis_url), cluster=False)
    WrittenCommands(client, commands).read_replies()
    entries: Any = redis_client.xrange("packed")
    assert [fields for _, fields in entries] == [
        {b"text": "héllo".encode(), b"raw": b"\x00\xff", b"empty": b""},
        {b"big": big},
    ]
    assert redis_client.smembers("packed-set") == {b"a"}


@pytest.fixture
def cluster(cluster_url: str) -> Iterator[RedisCluster]:
    """A client of the tests' Redis Cluster, as the relay connects to it."""
    client = connect(RedisTarget(cluster_url))
    assert isinstance(client, RedisCluster)
    try:
        yield client
    finally:
        client.close()


def test_a_batch_on_one_stream_of_a_cluster_goes_to_its_master_unanswered_until_read(
    cluster: RedisCluster,
) -> None:
    commands: list[split_pipeline.Command] = [
        ("XADD", "{one}:stream", "*", "n", str(n)) for n in range(20)
    ]
    written = WrittenCommands(cluster, commands)
    assert written._connection is not None  # written the single-server way, replies unread
    written.read_replies()
    entries: Any = cluster.xrange("{one}:stream")
    assert [fields[b"n"] for _, fields in entries] == [str(n).encode() for n in range(20)]


def test_a_cluster_batch_sent_to_a_master_that_no_longer_serves_its_slot_lands_once(
    cluster: RedisCluster,
) -> None:
    stream = "{moved}:stream"
    slot = cluster.keyslot(stream)  # type: ignore[no-untyped-call]
    right = cluster.get_node_from_key(stream)  # type: ignore[no-untyped-call]
    primaries = cluster.get_primaries()  # type: ignore[no-untyped-call]
    wrong = next(node for node in primaries if node.name != right.name)
    cluster.nodes_manager.slots_cache[slot] = [wrong]  # a slot table from before a reshard
    written = WrittenCommands(cluster, [("XADD", stream, "*", "n", str(n)) for n in range(5)])
    written.read_replies()  # MOVED from the wrong master: the cluster's pipeline goes on
    entries: Any = cluster.xrange(stream)
    assert [fields[b"n"] for _, fields in entries] == [str(n).encode() for n in range(5)]


def test_a_cluster_batch_naming_several_keys_goes_through_the_cluster_pipeline(
    cluster: RedisCluster,
) -> None:
    written = WrittenCommands(cluster, [("RPUSH", f"list-{n}", "a") for n in range(6)])
    assert written._connection is None  # answered when written
    written.read_replies()
    assert [cluster.lrange(f"list-{n}", 0, -1) for n in range(6)] == [[b"a"]] * 6
