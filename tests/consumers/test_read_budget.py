"""A worker's first read takes one entry per stream; reads grow as batches fit, shrink after a
reply over --read-bytes, and grow back."""

from __future__ import annotations

from pathlib import Path

import redis

from consumers.stream.read_budget import ReadBudget, reply_bytes
from consumers.stream.worker import HubConsumer
from hubstore import open_store
from hubsync.core import keys
from hubsync.core.settings import ConsumerSettings
from tests.helpers.relay_player import HUB_PROJECT, RUNTIME, send, send_fields, sync_event
from tests.helpers.trust import enroll

MIB = 1024 * 1024


def test_reply_bytes_counts_names_and_values_and_skips_deleted_entries() -> None:
    entries = [("1-0", {b"ab": b"cde"}), ("2-0", None), ("3-0", {b"x": b"y" * 10, b"k": b""})]
    assert reply_bytes(entries) == (5 + 12, 12)


def test_the_count_starts_at_one_and_grows_only_on_entries_that_fit() -> None:
    budget = ReadBudget(read_count=500, read_bytes=4 * MIB)
    assert budget.count == 1
    for _ in range(20):
        budget.observe(total=0, largest=0)  # empty replies teach nothing
    assert budget.count == 1
    budget.observe(total=1024, largest=1024)
    assert budget.count == 2
    budget.observe(total=2 * MIB, largest=MIB)
    assert budget.count == 4  # four such entries fit in 4 MiB, not more
    budget.observe(total=4 * MIB, largest=MIB)
    assert budget.count == 4


def test_the_count_shrinks_to_what_fits_then_doubles_back() -> None:
    budget = ReadBudget(read_count=500, read_bytes=4 * MIB)
    budget.count = 500  # as after small batches
    budget.observe(total=3 * MIB, largest=1024)
    assert budget.count == 500
    budget.observe(total=12 * MIB, largest=2 * MIB)
    assert budget.count == 2 and budget.over_budget == 1
    budget.observe(total=40 * MIB, largest=40 * MIB)  # one entry over the budget: one per read
    assert budget.count == 1
    for expected in (2, 4, 8, 16, 32, 64, 128, 256, 500, 500):
        budget.observe(total=1024, largest=512)
        assert budget.count == expected


def test_a_worker_reads_fewer_entries_after_a_reply_over_its_byte_budget(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    settings = ConsumerSettings(
        hub_db=tmp_path / "hub.db", redis_url=redis_url, read_bytes=4 * MIB, block_ms=0
    )
    with open_store("memory://", create_schema=True) as store:
        enroll(store, RUNTIME, [HUB_PROJECT])
        worker = HubConsumer(redis_client, store, settings, name="w1")
        worker.read_budget.count = 500  # as after small batches
        send(redis_client, sync_event(1))
        worker.refresh_streams(force=True)
        big = {"kind": "event", "runtime_id": RUNTIME, "event": "x" * (2 * MIB - 1024)}
        for _ in range(6):
            send_fields(redis_client, HUB_PROJECT, big)
        assert worker.poll(block_ms=None) == 7  # the whole backlog: the count was 500
        assert worker.read_budget.count == 2

        for _ in range(6):
            send_fields(redis_client, HUB_PROJECT, big)
        assert worker.poll(block_ms=None) == 2  # two of 2 MiB fit in 4 MiB
        assert worker.poll(block_ms=None) == 2
        assert worker.poll(block_ms=None) == 2
        assert worker.poll(block_ms=None) == 0
        assert store.count_events() == 1
        assert worker.stats.dead == 12
        dead = redis_client.xlen(keys.dead_stream(HUB_PROJECT))
        assert dead == 12


def test_a_fresh_workers_first_read_takes_one_entry_per_stream(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    settings = ConsumerSettings(
        hub_db=tmp_path / "hub.db", redis_url=redis_url, read_bytes=MIB, block_ms=0
    )
    with open_store("memory://", create_schema=True) as store:
        enroll(store, RUNTIME, [HUB_PROJECT])
        huge = {"kind": "event", "runtime_id": RUNTIME, "event": "x" * (4 * MIB)}
        for _ in range(4):  # a backlog of entries four times the budget each
            send_fields(redis_client, HUB_PROJECT, huge)
        worker = HubConsumer(redis_client, store, settings, name="w1")
        worker.refresh_streams(force=True)

        assert worker.poll(block_ms=None) == 1  # one entry: as little as a read can hold
        assert worker.read_budget.count == 1 and worker.read_budget.over_budget == 1
        assert worker.poll(block_ms=None) == 1
        assert worker.run_once().dead == 4  # since start: two by poll, two by run_once
        assert redis_client.xlen(keys.dead_stream(HUB_PROJECT)) == 4
