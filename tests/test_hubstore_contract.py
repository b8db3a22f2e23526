"""The hub store contract: every ``HubStore`` implementation must pass these.

The class is parametrised by store factory; a PostgreSQL store joins by adding
its factory to ``STORE_FACTORIES``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from hubstore.sqlite_store import SqliteHubStore
from hubstore.store import HubStore
from hubsync.canonical import content_hash
from hubsync.clock import utc_now
from hubsync.entries import ConflictReason, Outcome, PresenceBeat
from hubsync.wire import parse_sync_event
from tests.helpers.relay_player import event_entry, sync_event

StoreFactory = Callable[[Path], HubStore]

STORE_FACTORIES: dict[str, StoreFactory] = {
    "sqlite": lambda directory: SqliteHubStore(directory / "hub.db"),
}


def beat(runtime_id: str = "rt-1", hub_project: str = "acme") -> PresenceBeat:
    return PresenceBeat(
        runtime_id=runtime_id,
        hub_project=hub_project,
        host="box-1",
        pid=42,
        version="0.1.0",
        backlog=3,
        heartbeat="2026-11-29T16:38:54.123456Z",
    )


class TestHubStoreContract:
    @pytest.fixture(params=sorted(STORE_FACTORIES))
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HubStore]:
        store = STORE_FACTORIES[request.param](tmp_path)
        yield store
        store.close()

    def test_a_new_event_is_accepted_and_stored_with_its_exact_bytes(self, store: HubStore) -> None:
        entry = event_entry(sync_event(1))
        [outcome] = store.ingest([entry])
        assert outcome.outcome is Outcome.ACCEPTED
        assert outcome.content_hash == entry.content_hash
        [stored] = store.events("acme")
        assert stored.record == entry.data
        assert content_hash(stored.record) == stored.content_hash == entry.content_hash
        assert parse_sync_event(stored.record) == entry.event
        assert stored.home_runtime_id == "rt-1"

    def test_the_same_bytes_again_are_a_duplicate_and_change_nothing(self, store: HubStore) -> None:
        entry = event_entry(sync_event(1))
        store.ingest([entry])
        before = store.events("acme")
        [again] = store.ingest([entry])
        assert again.outcome is Outcome.DUPLICATE
        assert store.events("acme") == before

    def test_a_repeat_inside_one_batch_is_a_duplicate_of_the_first(self, store: HubStore) -> None:
        entry = event_entry(sync_event(1))
        outcomes = store.ingest([entry, entry, entry])
        assert [o.outcome for o in outcomes] == [
            Outcome.ACCEPTED,
            Outcome.DUPLICATE,
            Outcome.DUPLICATE,
        ]
        assert store.count_events() == 1

    def test_outcomes_come_back_in_batch_order(self, store: HubStore) -> None:
        entries = [event_entry(sync_event(s)) for s in (3, 1, 2)]
        outcomes = store.ingest(entries)
        assert [o.sequence for o in outcomes] == [3, 1, 2]
        assert store.ingest([]) == []

    def test_other_bytes_under_a_used_key_are_a_conflict_that_never_overwrites(
        self, store: HubStore
    ) -> None:
        original = event_entry(sync_event(1))
        forged = event_entry(sync_event(1, data={"step": "evil"}))
        store.ingest([original])
        [outcome] = store.ingest([forged])
        assert outcome.outcome is Outcome.CONFLICT
        assert outcome.reason == ConflictReason.SEQUENCE_REUSED
        assert outcome.existing_hash == original.content_hash
        assert outcome.content_hash == forged.content_hash
        [stored] = store.events("acme")
        assert stored.record == original.data
        [alert] = store.alerts()
        assert alert.reason is ConflictReason.SEQUENCE_REUSED
        assert (alert.project_id, alert.run_id, alert.sequence) == ("proj-1", "run-1", 1)
        assert alert.existing_hash == original.content_hash
        assert alert.offered_hash == forged.content_hash
        assert alert.runtime_id == "rt-1"

    def test_conflicting_bytes_inside_one_batch_lose_to_the_first(self, store: HubStore) -> None:
        first = event_entry(sync_event(1))
        second = event_entry(sync_event(1, data={"other": 1}))
        outcomes = store.ingest([first, second])
        assert [o.outcome for o in outcomes] == [Outcome.ACCEPTED, Outcome.CONFLICT]
        assert store.events("acme")[0].record == first.data

    def test_a_project_owned_by_another_hub_project_is_a_conflict(self, store: HubStore) -> None:
        store.ingest([event_entry(sync_event(1, hub_project="acme"))])
        [outcome] = store.ingest([event_entry(sync_event(1, run_id="run-2", hub_project="other"))])
        assert outcome.outcome is Outcome.CONFLICT
        assert outcome.reason == ConflictReason.PROJECT_MISMATCH
        assert store.count_events(hub_project="other") == 0
        assert store.alerts(hub_project="other")[0].reason is ConflictReason.PROJECT_MISMATCH

    def test_a_run_from_another_home_runtime_is_a_conflict(self, store: HubStore) -> None:
        store.ingest([event_entry(sync_event(1, runtime_id="rt-1"))])
        [outcome] = store.ingest([event_entry(sync_event(2, runtime_id="rt-2"))])
        assert outcome.outcome is Outcome.CONFLICT
        assert outcome.reason == ConflictReason.HOME_RUNTIME_MISMATCH
        assert store.count_events() == 1
        assert store.alerts()[0].runtime_id == "rt-2"

    def test_a_repeated_offence_is_one_alert_counting_occurrences(self, store: HubStore) -> None:
        store.ingest([event_entry(sync_event(1))])
        forged = event_entry(sync_event(1, data={"x": 1}))
        store.ingest([forged])
        [again] = store.ingest([forged])
        assert again.outcome is Outcome.CONFLICT
        [alert] = store.alerts()
        assert alert.occurrences == 2

    def test_the_cursor_is_the_highest_sequence_with_no_gap_below(self, store: HubStore) -> None:
        assert store.sync_cursor("proj-1", "run-1") == 0
        store.ingest([event_entry(sync_event(s)) for s in (2, 3, 5, 8)])
        assert store.sync_cursor("proj-1", "run-1") == 0
        assert store.gaps("proj-1", "run-1") == [(1, 1), (4, 4), (6, 7)]
        store.ingest([event_entry(sync_event(s)) for s in (1, 4)])
        assert store.sync_cursor("proj-1", "run-1") == 5
        assert store.gaps("proj-1", "run-1") == [(6, 7)]
        store.ingest([event_entry(sync_event(s)) for s in (6, 7)])
        assert store.sync_cursor("proj-1", "run-1") == 8
        assert store.gaps("proj-1", "run-1") == []

    def test_events_are_listed_by_run_and_sequence_and_page_by_position(
        self, store: HubStore
    ) -> None:
        store.ingest(
            [event_entry(sync_event(s, run_id=r)) for r in ("run-b", "run-a") for s in (2, 1)]
        )
        listed = [(e.run_id, e.sequence) for e in store.events("acme")]
        assert listed == [("run-a", 1), ("run-a", 2), ("run-b", 1), ("run-b", 2)]
        page = store.events("acme", after=("run-a", 2), limit=1)
        assert [(e.run_id, e.sequence) for e in page] == [("run-b", 1)]
        only_b = store.events("acme", run_id="run-b")
        assert [e.sequence for e in only_b] == [1, 2]
        assert store.count_events(hub_project="acme", run_id="run-a") == 2
        assert store.count_events(project_id="nope") == 0

    def test_presence_is_upserted_per_runtime_and_flagged_stale(self, store: HubStore) -> None:
        store.record_presence([beat("rt-1"), beat("rt-2")])
        store.record_presence([beat("rt-1")])
        fresh = store.presence("acme")
        assert [(p.runtime_id, p.stale) for p in fresh] == [("rt-1", False), ("rt-2", False)]
        assert fresh[0].beat == beat("rt-1")
        later = store.presence(
            "acme", stale_after=timedelta(seconds=30), now=utc_now() + timedelta(minutes=1)
        )
        assert all(p.stale for p in later)
        assert store.presence("elsewhere") == []

    def test_purge_removes_old_alerts_and_presence_but_keeps_events(self, store: HubStore) -> None:
        store.ingest([event_entry(sync_event(1))])
        store.ingest([event_entry(sync_event(1, data={"x": 1}))])
        store.record_presence([beat()])
        kept = store.purge(timedelta(days=1))
        assert (kept.alerts, kept.presence) == (0, 0)
        result = store.purge(timedelta(days=1), now=utc_now() + timedelta(days=2))
        assert (result.alerts, result.presence) == (1, 1)
        assert store.alerts() == []
        assert store.presence() == []
        assert store.count_events() == 1
