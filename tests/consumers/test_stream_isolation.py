"""One key Redis refuses stops nothing else: it is set aside, alerted, and the rest is read.

And the shared events stream of before per-runtime streams drains: what was
waiting there, pending entries included, is stored and acknowledged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from consumers.stream.worker import HubConsumer
from hubstore import open_store
from hubstore.store import HubStore
from hubsync.core import keys
from hubsync.core.entries import decode_fields
from hubsync.core.settings import ConsumerSettings
from tests.helpers.relay_player import HUB_PROJECT, RUNTIME, entry_fields, send, sync_event
from tests.helpers.support import wait_until
from tests.helpers.trust import enroll

OTHER = "rt-2"
GROUP = keys.CONSUMER_GROUP
LAST_ID = "18446744073709551615-18446744073709551615"


@pytest.fixture
def store() -> Iterator[HubStore]:
    with open_store("memory://", create_schema=True) as store:
        enroll(store, RUNTIME, [HUB_PROJECT])
        enroll(store, OTHER, [HUB_PROJECT])
        yield store


NewWorker = Callable[..., HubConsumer]
"""A new worker ``w1`` on the test's Redis and hub store (``reclaim_idle`` in seconds)."""


@pytest.fixture
def new_worker(
    redis_client: redis.Redis, redis_url: str, store: HubStore, tmp_path: Path
) -> NewWorker:
    def make(reclaim_idle: float = 60.0) -> HubConsumer:
        settings = ConsumerSettings(
            hub_db=tmp_path / "hub.db", redis_url=redis_url, block_ms=0, reclaim_idle=reclaim_idle
        )
        return HubConsumer(redis_client, store, settings, name="w1")

    return make


def other_event(sequence: int) -> object:
    return sync_event(sequence, project_id="proj-2", runtime_id=OTHER)


def alerts(client: redis.Redis) -> list[dict[str, bytes]]:
    return [decode_fields(raw) for _, raw in client.xrange(keys.alerts_stream(HUB_PROJECT))]


def test_a_stream_key_of_another_type_is_set_aside_and_alerted_and_the_others_are_read(
    redis_client: redis.Redis, new_worker: NewWorker
) -> None:
    bad = keys.events_stream(HUB_PROJECT, RUNTIME)
    redis_client.set(bad, "not a stream")
    send(redis_client, sync_event(1, project_id="proj-2", runtime_id=OTHER))
    worker = new_worker()
    assert worker.refresh_streams(force=True) == [keys.events_stream(HUB_PROJECT, OTHER)]
    assert worker.run_once().accepted == 1
    assert bad in worker.followed.set_aside
    [alert] = alerts(redis_client)
    assert (alert["reason"], alert["runtime_id"]) == (b"stream_unreadable", RUNTIME.encode())

    again = new_worker()  # a restart: no crash loop
    assert again.run_once().read == 0
    assert len(alerts(redis_client)) == 2  # once per worker, not once per refresh
    again.refresh_streams()
    assert len(alerts(redis_client)) == 2

    redis_client.delete(bad)  # repaired: followed again on the next refresh
    assert bad in again.refresh_streams()
    assert bad not in again.followed.set_aside


def test_a_stream_replaced_under_a_running_worker_does_not_stop_its_read_of_the_others(
    redis_client: redis.Redis, store: HubStore, new_worker: NewWorker
) -> None:
    worker = new_worker()
    worker.refresh_streams(force=True)
    bad = keys.events_stream(HUB_PROJECT, RUNTIME)
    redis_client.delete(bad)
    redis_client.set(bad, "not a stream")
    send(redis_client, sync_event(1, project_id="proj-2", runtime_id=OTHER))
    assert worker.poll(block_ms=None) == 0  # the read of both failed on one: set aside
    assert worker.streams == [keys.events_stream(HUB_PROJECT, OTHER)]
    assert worker.poll(block_ms=None) == 1
    worker.reclaim()
    worker.maintain()  # nothing per stream raises either
    assert store.count_events() == 1


def test_a_stream_that_lost_its_group_gets_it_back(
    redis_client: redis.Redis, new_worker: NewWorker
) -> None:
    worker = new_worker()
    worker.refresh_streams(force=True)
    redis_client.delete(keys.events_stream(HUB_PROJECT, RUNTIME))
    send(redis_client, sync_event(1))  # the relay's XADD makes the stream anew, without group
    send(redis_client, sync_event(1, project_id="proj-2", runtime_id=OTHER))
    assert worker.poll(block_ms=None) == 0
    assert worker.run_once().accepted == 2
    assert not worker.followed.set_aside


def test_a_stream_deleted_under_a_running_worker_is_made_again_without_an_alert(
    redis_client: redis.Redis, new_worker: NewWorker
) -> None:
    worker = new_worker()
    worker.refresh_streams(force=True)
    redis_client.delete(keys.events_stream(HUB_PROJECT, RUNTIME))  # an operator's repair
    assert worker.poll(block_ms=None) == 0
    assert redis_client.xinfo_groups(keys.events_stream(HUB_PROJECT, RUNTIME))
    send(redis_client, sync_event(1))
    assert worker.run_once().accepted == 1
    assert alerts(redis_client) == [] and not worker.followed.set_aside


def test_a_projects_key_of_another_type_stops_nothing(
    redis_client: redis.Redis, caplog: pytest.LogCaptureFixture, new_worker: NewWorker
) -> None:
    redis_client.set(keys.PROJECTS, "not a set")
    send(redis_client, sync_event(1))
    worker = new_worker()
    with caplog.at_level(logging.ERROR, logger="consumers.stream.streams"):
        assert worker.run_once().accepted == 1
        worker.refresh_streams()
    assert len([r for r in caplog.records if keys.PROJECTS in r.getMessage()]) == 1


def test_an_exhausted_ack_stream_is_alerted_and_the_other_runtimes_are_answered(
    redis_client: redis.Redis, new_worker: NewWorker
) -> None:
    redis_client.xadd(keys.acks_stream(HUB_PROJECT, RUNTIME), {"x": "1"}, id=LAST_ID)
    send(redis_client, sync_event(1))
    send(redis_client, sync_event(1, project_id="proj-2", runtime_id=OTHER))
    worker = new_worker()
    assert worker.run_once().accepted == 2
    assert redis_client.xlen(keys.acks_stream(HUB_PROJECT, OTHER)) == 1
    for runtime in (RUNTIME, OTHER):
        stream = keys.events_stream(HUB_PROJECT, runtime)
        assert redis_client.xpending(stream, GROUP)["pending"] == 0
    assert [a["reason"] for a in alerts(redis_client)] == [b"acks_unwritable"]
    assert new_worker().run_once().read == 0


def test_the_shared_stream_of_before_drains_pending_entries_included_then_is_left(
    redis_client: redis.Redis, store: HubStore, new_worker: NewWorker
) -> None:
    shared = keys.shared_events_stream(HUB_PROJECT)
    for sequence in range(1, 5):  # what relays of the old layout left there
        redis_client.xadd(shared, entry_fields(sync_event(sequence)))  # type: ignore[arg-type]
    redis_client.xgroup_create(shared, GROUP, id="0")
    # a worker of the old version read two and was stopped before acking them
    redis_client.xreadgroup(GROUP, "old-worker", {shared: ">"}, count=2)
    send(redis_client, sync_event(5))  # the upgraded relay, on its own stream

    worker = new_worker(reclaim_idle=0.001)
    assert shared in worker.refresh_streams(force=True)
    wait_until(
        lambda: worker.run_once() and redis_client.xpending(shared, GROUP)["pending"] == 0,
        what="the old worker's pending entries reclaimed",
    )
    assert store.count_events() == 5 and worker.stats.reclaimed == 2
    assert shared not in worker.refresh_streams()  # drained: no longer read

    redis_client.xadd(shared, entry_fields(sync_event(6)))  # e.g. a dead letter replayed there
    assert shared in worker.refresh_streams()
    worker.run_once()
    assert store.count_events() == 6
