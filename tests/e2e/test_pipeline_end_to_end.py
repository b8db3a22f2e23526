"""The whole pipeline as real processes: runtimes, relays, two hub consumers, one killed -9."""

from __future__ import annotations

from pathlib import Path

import redis

from consumers.views.queue_status import events_streams
from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import keys
from hubsync.processes import PipelineProcesses
from producers.store.event_store import NewEvent
from tests.helpers.consumer_support import hub_rows
from tests.helpers.relay_support import make_runtime, open_hub_db

HUB_PROJECT = "acme"
RUNTIMES = 3
EVENTS = 20_000
RECLAIM_IDLE = 2.0


def group_pending(client: redis.Redis, consumer: str | None = None) -> int:
    """Entries pending in group ``hub`` over every runtime's stream (of ``consumer``)."""
    total = 0
    for stream in events_streams(client, HUB_PROJECT):
        if not client.xinfo_groups(stream):
            continue
        if consumer is None:
            total += int(client.xpending(stream, keys.CONSUMER_GROUP)["pending"])
        else:
            pending = client.xpending_range(
                stream, keys.CONSUMER_GROUP, "-", "+", 100_000, consumer
            )
            total += len(pending)
    return total


def test_twenty_thousand_events_from_three_runtimes_survive_a_killed_consumer(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    runtimes = []
    hub_db = tmp_path / "hub.db"
    hub = open_hub_db(hub_db)
    for index in range(RUNTIMES):
        state_dir = tmp_path / f"runtime-{index}" / "state"
        # enrolled on the hub before its relay runs ('hub init', 'enroll', 'runtime join')
        registry, (store,) = make_runtime(state_dir, [HUB_PROJECT], hub)
        share = EVENTS // RUNTIMES + (1 if index < EVENTS % RUNTIMES else 0)
        events = [
            NewEvent(f"run-{n % 7}", "step.completed", {"step": f"s{n}", "ok": True})
            for n in range(share)
        ]
        for start in range(0, share, 2_000):
            store.append_events(events[start : start + 2_000])
        runtimes.append((state_dir, registry, store))
    hub.close()
    assert sum(store.outbox_counts()["total"] for _, _, store in runtimes) == EVENTS

    with PipelineProcesses(redis_url, tmp_path / "logs") as pipeline:
        consumer_args = ("--batch-count", "50", "--block-ms", "100",
                         "--reclaim-idle", str(RECLAIM_IDLE), "--reclaim-interval", "0.5")  # fmt: skip
        doomed = pipeline.consumer("doomed", hub_db, *consumer_args)
        pipeline.consumer("survivor", hub_db, *consumer_args)
        for index, (state_dir, _, _) in enumerate(runtimes):
            pipeline.relay(f"relay-{index}", state_dir)

        # kill the first consumer while it holds delivered but unacknowledged entries
        pipeline.wait_until(
            lambda: hub_rows(hub_db) > 1_000 and group_pending(redis_client, "doomed") > 0,
            timeout=60,
            interval=0.002,
            what="the doomed consumer mid-batch",
        )
        doomed.kill()
        assert hub_rows(hub_db) < EVENTS, "killed mid-run, not after"

        pipeline.wait_until(
            lambda: hub_rows(hub_db) == EVENTS, timeout=120, what="every event in the hub"
        )
        pipeline.wait_until(
            lambda: all(store.outbox_counts()["pending"] == 0 for _, _, store in runtimes),
            timeout=60,
            what="every outbox row acknowledged",
        )
        pipeline.wait_until(
            lambda: group_pending(redis_client) == 0,
            timeout=RECLAIM_IDLE * 5 + 5,
            what="the pending list empty within the reclaim time",
        )  # the survivor and every relay are still running: wait_until checks each poll
        codes = pipeline.stop_all()
    assert all(code == 0 for name, code in codes.items() if name != "doomed"), codes

    for _, _registry, store in runtimes:
        counts = store.outbox_counts()
        assert counts["acked"] == counts["total"] and counts["conflict"] == counts["rejected"] == 0
    with SqliteHubStore(hub_db) as hub:
        assert hub.count_events() == EVENTS
        for _, _registry, store in runtimes:
            for run_id in store.run_ids():
                last = store.last_sequence(run_id)
                assert hub.sync_cursor(store.project_id, run_id) == last
                assert hub.gaps(store.project_id, run_id) == []
        assert hub.alerts() == []
