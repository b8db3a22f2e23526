"""Retention: the relay prunes acked outbox rows, and old fully acked runs when asked."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hubsync.core.settings import RelaySettings
from producers.derivation import StoreIdentity
from producers.registry import RuntimeRegistry
from producers.relay.pruner import Pruner
from producers.store.event_store import RunEventStore
from producers.store.outbox_status import local_status
from tests.helpers.clock import FakeClock
from tests.helpers.hub_double import ack_everything, stream_events
from tests.helpers.relay_support import (
    append_many,
    make_runtime,
    relay_with_events,
)

DAY = 86_400.0
IDENTITY = StoreIdentity("proj-1", "acme", "rt-host-0001")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunEventStore]:
    with RunEventStore(tmp_path / "store.sqlite", IDENTITY, environ={}) as opened:
        yield opened


def states(store: RunEventStore, run_id: str) -> dict[int, str]:
    return {row.sequence: row.state for row in store.outbox_for_run(run_id)}


def prune_all(store: RunEventStore, cutoff: float, limit: int = 500) -> tuple[int, int]:
    """Walk the whole outbox as the pruner does; (rows deleted, chunks)."""
    after, deleted, chunks = 0, 0, 0
    while True:
        step = store.prune_acked_outbox(after, cutoff, limit, cutoff)
        chunks += 1
        assert step.deleted <= limit
        deleted += step.deleted
        if step.done:
            return deleted, chunks
        after = step.last


def test_only_acked_rows_older_than_the_retention_are_pruned(store: RunEventStore) -> None:
    for _ in range(6):
        store.append_event("run-a", "step.completed", {"ok": True})
    seqs = {row.sequence: row.seq for row in store.outbox_for_run("run-a")}
    acked_at = time.time()
    store.mark_acked([seqs[1], seqs[2]], acked_at)
    store.mark_attempted([seqs[3]], acked_at, 30, 600)
    store.mark_outcome([seqs[4]], "conflict", "sequence_reused", acked_at)
    store.mark_rejected([seqs[5]], "too_large", acked_at)

    assert prune_all(store, cutoff=acked_at)[0] == 0, "rows acked at the cutoff stay"
    deleted, _ = prune_all(store, cutoff=acked_at + 1)

    assert deleted == 2
    assert states(store, "run-a") == {3: "attempted", 4: "conflict", 5: "rejected", 6: "unsent"}
    assert store.prune_totals().outbox_rows == 2


def test_a_pruned_row_takes_its_bytes_with_it_and_the_others_keep_theirs(
    store: RunEventStore,
) -> None:
    for n in range(4):
        store.append_event("run-a", "step.completed", {"n": n})
    before = {row.seq: row.sync_event for row in store.outbox_for_run("run-a")}
    first, second = sorted(before)[:2]
    acked_at = time.time()
    store.mark_acked([first, second], acked_at)

    assert prune_all(store, cutoff=acked_at + 1)[0] == 2

    conn = sqlite3.connect(f"file:{store.path}?mode=ro", uri=True)
    payloads = dict(conn.execute("SELECT seq, sync_event FROM outbox_payloads").fetchall())
    conn.close()
    assert payloads == {seq: data for seq, data in before.items() if seq not in (first, second)}
    assert [row.sync_event for row in store.unsent(0, 10)] == [before[s] for s in sorted(payloads)]


def test_the_walk_goes_in_bounded_chunks_and_stops_at_rows_newer_than_the_cutoff(
    store: RunEventStore,
) -> None:
    for i in range(95):
        store.append_event("run-a", "step.completed", {"i": i})
    rows = store.outbox_for_run("run-a")
    store.mark_acked([r.seq for r in rows], time.time())
    cutoff = time.time() + 1
    deleted, chunks = prune_all(store, cutoff, limit=10)
    assert deleted == 95 and chunks == 10

    for i in range(30):
        store.append_event("run-a", "step.completed", {"i": i})
    # everything left was created after this cutoff: the first chunk says so
    step = store.prune_acked_outbox(0, cutoff - 1, 10, cutoff)
    assert step.done and step.deleted == 0


def test_a_pruned_store_keeps_numbering_rows_and_runs_where_they_were(
    store: RunEventStore,
) -> None:
    first = [store.append_event("run-a", "step.completed", {"i": i}) for i in range(5)]
    store.mark_acked([a.outbox_seq for a in first], time.time())
    prune_all(store, cutoff=time.time() + 1)
    assert store.outbox_for_run("run-a") == []

    later = store.append_event("run-a", "step.completed", {"i": 5})
    assert later.sequence == 6, "the run's sequence continues from its local events"
    assert later.outbox_seq > first[-1].outbox_seq, "outbox numbers are never reused"


def test_event_retention_deletes_only_old_fully_acked_runs_and_keeps_their_last_event(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    registry, (store,) = make_runtime(state_dir, ["acme"])
    for run in ("done", "waiting", "parked"):
        for i in range(4):
            store.append_event(run, "step.completed", {"i": i})
    rows = {run: store.outbox_for_run(run) for run in ("done", "waiting", "parked")}
    now = time.time()
    store.mark_acked([r.seq for r in rows["done"]], now)
    store.mark_acked([r.seq for r in rows["waiting"][:3]], now)  # its last row is pending
    store.mark_acked([r.seq for r in rows["parked"][:3]], now)
    store.mark_outcome([rows["parked"][3].seq], "conflict", "sequence_reused", now)

    clock = FakeClock(now + 3 * DAY)
    settings = RelaySettings(state_dir=state_dir, event_retention=2 * DAY, outbox_retention=DAY)
    recent = Pruner(settings.model_copy(update={"event_retention": 4 * DAY}), registry, clock)
    assert recent.prune_once().outbox_rows == 10, "acked rows go after the outbox retention"
    assert [len(store.events(r)) for r in ("done", "waiting", "parked")] == [4, 4, 4]
    recent.close()

    pruner = Pruner(settings, registry, clock, chunk_rows=2, wait=lambda _: None)
    stats = pruner.prune_once()
    pruner.close()

    assert [e.sequence for e in store.events("done")] == [4]
    assert len(store.events("waiting")) == 4 and len(store.events("parked")) == 4
    assert stats.run_events == 3 and store.prune_totals().run_events == 3
    assert store.append_event("done", "step.completed", {"i": 9}).sequence == 5


def test_without_event_retention_the_runtime_history_is_kept(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    registry, (store,) = make_runtime(state_dir, ["acme"])
    appended = [store.append_event("run-a", "step.completed", {"i": i}) for i in range(3)]
    store.mark_acked([a.outbox_seq for a in appended], time.time())
    pruner = Pruner(RelaySettings(state_dir=state_dir), registry, FakeClock(time.time() + 30 * DAY))
    stats = pruner.prune_once()
    pruner.close()
    assert stats.outbox_rows == 3 and stats.run_events == 0
    assert len(store.events("run-a")) == 3


def test_retention_settings_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUBSYNC_OUTBOX_RETENTION", "3600")
    monkeypatch.setenv("HUBSYNC_EVENT_RETENTION", "604800")
    settings = RelaySettings(state_dir=tmp_path)
    assert (settings.outbox_retention, settings.event_retention) == (3600.0, 604800.0)
    assert RelaySettings(state_dir=tmp_path, _env_file=None).prune_interval == 60.0  # type: ignore[call-arg]
    monkeypatch.delenv("HUBSYNC_EVENT_RETENTION")
    assert RelaySettings(state_dir=tmp_path).event_retention is None


def test_one_unreadable_store_does_not_stop_pruning_the_others(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    registry, (broken, healthy) = make_runtime(state_dir, ["one", "two"])
    appended = [healthy.append_event("run-a", "step.completed", {"i": i}) for i in range(3)]
    healthy.mark_acked([a.outbox_seq for a in appended], time.time())
    broken.append_event("run-a", "step.completed", {"i": 0})
    broken_path = broken.path
    broken.close()
    broken_path.write_bytes(b"not a database" * 100)

    pruner = Pruner(RelaySettings(state_dir=state_dir), registry, FakeClock(time.time() + 2 * DAY))
    assert pruner.prune_once().outbox_rows == 3
    pruner.close()


def test_a_relay_prunes_acked_rows_and_the_pruned_store_keeps_syncing(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    clock = FakeClock()
    _, store, relay = relay_with_events(state_dir, redis_url, 2, 25, clock)
    relay.run_once()
    ack_everything(redis_client, "alpha")
    relay.run_once()
    assert store.outbox_counts()["acked"] == 50

    clock.advance(DAY + 1)
    summary = relay.run_once()
    assert summary.as_dict()["pruned_outbox_rows"] == 50
    assert store.outbox_counts()["total"] == 0

    append_many(store, runs=2, per_run=3)
    relay.run_once()
    on_stream = [
        (f["run_id"].decode(), int(f["sequence"])) for f in stream_events(redis_client, "alpha")
    ]
    assert on_stream[50:] == [(f"run-{r}", s) for s in (26, 27, 28) for r in (0, 1)]
    ack_everything(redis_client, "alpha")
    # acked on the real clock, behind the relay's: pruned in the same pass
    assert relay.run_once().as_dict()["pruned_outbox_rows"] == 56
    relay.close()
    assert store.outbox_counts()["pending"] == 0

    local = local_status(state_dir).as_dict()["projects"][0]
    assert local["pruned_outbox_rows"] == 56 and local["pruned_at"] is not None
    json.dumps(local)


def test_status_shows_zero_pruned_for_a_store_never_pruned(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    RuntimeRegistry(state_dir).close()
    _, (store,) = make_runtime(state_dir, ["alpha"])
    store.append_event("run-a", "step.completed", {})
    local = local_status(state_dir).projects[0]
    assert (local.pruned_outbox_rows, local.pruned_run_events, local.pruned_at) == (0, 0, None)
