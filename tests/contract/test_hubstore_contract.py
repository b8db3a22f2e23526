"""The hub store contract: every ``HubStore`` backend must pass these.

``HubStoreContract`` holds the tests; each backend subclasses it once
(``TestSqliteHubStore``, ``TestMemoryHubStore``, ``TestPostgresHubStore``)
saying how to open a new store and, when other processes can open it too, its
URL.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubstore import hub_url_from_path, open_store
from hubstore.errors import HubNotInitializedError, RuntimeNotEnrolledError
from hubstore.resyncs import ResyncRecord
from hubstore.sqlite.store import SqliteHubStore
from hubstore.store import (
    DEFAULT_ROTATION_GRACE,
    MAX_ROTATION_GRACE,
    EventPosition,
    HubStore,
    RunPosition,
    RunSummary,
    RuntimeState,
    SecurityAlert,
)
from hubsync.core.canonical import content_hash
from hubsync.core.clock import utc_now
from hubsync.core.entries import ConflictReason, EventEntry, Outcome, PresenceBeat, SecurityReason
from hubsync.core.errors import ConfigError
from hubsync.core.resync import ResyncReport
from hubsync.core.signing import RuntimeKey
from hubsync.core.wire import CheckedEvent, parse_sync_event
from tests.contract.ownership_contract import OwnershipContract
from tests.helpers.relay_player import event_entry, sync_event
from tests.helpers.support import start_python

if TYPE_CHECKING:
    from tests.helpers.postgres_server import PostgresDatabases


EVENTS: list[EventEntry] = [
    event_entry(sync_event(seq, run_id=run, project_id=project, runtime_id=runtime))
    for project, run, runtime in (
        ("proj-1", "run-1", "rt-1"),
        ("proj-3", "run-2", "rt-2"),
        ("proj-2", "run-1", "rt-1"),
    )
    for seq in range(1, 6)
]


def store_property(max_examples: int) -> settings:
    """Hypothesis settings of a property over the function-scoped ``store`` fixture, which
    runs once per backend subclass (differing executors, on purpose)."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
        ],
    )


# Every key the paging properties draw from: three projects sharing run ids.
PAGED: dict[tuple[str, str, int], EventEntry] = {
    (project, run, seq): event_entry(sync_event(seq, run_id=run, project_id=project))
    for project in ("p1", "p2", "p3")
    for run in ("run-1", "run-2", "run-3")
    for seq in range(1, 7)
}

deliveries = st.lists(
    st.lists(st.integers(min_value=0, max_value=len(EVENTS) - 1), min_size=1, max_size=12),
    min_size=1,
    max_size=12,
)

WRITER = textwrap.dedent(
    """
    import sys
    from hubstore import open_store
    from tests.helpers.relay_player import event_entry, sync_event

    url = sys.argv[1]
    store = open_store(url, create_schema=False)
    # every worker writes the same keys, so they race on the very same rows
    for round_ in range(40):
        batch = [
            event_entry(sync_event(round_ * 5 + s, run_id=f"run-{round_ % 4}"))
            for s in range(1, 6)
        ]
        store.ingest(batch)
        store.count_events()
    store.close()
    """
)


T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
"""An injected "now" for enrollment: rotation grace is judged against it, never the wall clock."""

BIG_RUNS = 1000
BIG_EVENTS_PER_RUN = 10


def ingest_big_hub(store: HubStore) -> None:
    """10,000 events: 1,000 runs of 10 across 4 projects, every tenth run missing sequence 2."""
    for start in range(0, BIG_RUNS, 100):
        store.ingest(
            [
                event_entry(sync_event(seq, run_id=f"run-{n:04d}", project_id=f"p{n % 4}"))
                for n in range(start, start + 100)
                for seq in range(1, BIG_EVENTS_PER_RUN + 1)
                if not (n % 10 == 0 and seq == 2)
            ]
        )


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


def hub_state(store: HubStore) -> tuple[object, ...]:
    """Everything a delivery order could influence, minus receive times."""
    events = [
        (e.project_id, e.run_id, e.sequence, e.hub_project, e.home_runtime_id, e.content_hash)
        for e in store.events("acme", limit=10_000)
    ]
    cursors = sorted({(e[0], e[1], store.sync_cursor(e[0], e[1])) for e in events})
    return tuple(events), tuple(cursors), len(store.alerts())


class HubStoreContract(OwnershipContract):
    """The contract tests; subclass once per backend (pytest collects only the subclasses)."""

    def open_new(self, directory: Path) -> HubStore:
        """A new, empty store of this backend, its schema created, kept under ``directory``."""
        raise NotImplementedError

    def shared_url(self, directory: Path) -> str | None:
        """The URL another process can open the store of ``open_new(directory)`` by, or None."""
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[HubStore]:
        store = self.open_new(tmp_path)
        yield store
        store.close()

    def test_creating_the_schema_again_changes_nothing(self, store: HubStore) -> None:
        store.ingest([event_entry(sync_event(1))])
        store.create_schema()
        assert store.count_events() == 1

    def test_a_new_event_is_accepted_and_stored_with_its_exact_bytes(self, store: HubStore) -> None:
        entry = event_entry(sync_event(1))
        [outcome] = store.ingest([entry])
        assert outcome.outcome is Outcome.ACCEPTED
        assert outcome.content_hash == entry.content_hash
        [stored] = store.events("acme")
        assert stored.record == entry.data
        assert content_hash(stored.record) == stored.content_hash == entry.content_hash
        assert CheckedEvent.of(parse_sync_event(stored.record)) == entry.event
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
        forged = event_entry(sync_event(1, data={"step_id": "evil"}))
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

    def test_a_repeated_offence_is_one_alert_counting_occurrences(self, store: HubStore) -> None:
        store.ingest([event_entry(sync_event(1))])
        forged = event_entry(sync_event(1, data={"x": 1}))
        store.ingest([forged])
        [again] = store.ingest([forged])
        assert again.outcome is Outcome.CONFLICT
        [alert] = store.alerts()
        assert alert.occurrences == 2

    def test_refused_entries_are_kept_as_alerts_a_repeat_counting_an_occurrence(
        self, store: HubStore
    ) -> None:
        unsigned = SecurityAlert(
            reason=SecurityReason.UNAUTHENTICATED,
            hub_project="acme",
            runtime_id="rt-x",
            project_id="proj-1",
            run_id="run-1",
            sequence=1,
            offered_hash="ab" * 32,
            detail="no signature",
        )
        elsewhere = replace(unsigned, reason=SecurityReason.NOT_ENROLLED, hub_project="other")
        store.record_security_alerts([unsigned, elsewhere, unsigned])
        store.record_security_alerts([])
        store.record_security_alerts([unsigned])
        [kept] = store.alerts(hub_project="acme")
        assert (kept.reason, kept.runtime_id, kept.occurrences) == (
            SecurityReason.UNAUTHENTICATED,
            "rt-x",
            3,
        )
        assert (kept.existing_hash, kept.offered_hash, kept.detail) == (
            None,
            "ab" * 32,
            "no signature",
        )
        # alerts of one call: newest first among calls, in no promised order within one
        assert sorted(a.reason.value for a in store.alerts()) == ["not_enrolled", "unauthenticated"]
        assert store.count_events() == 0
        result = store.purge(timedelta(days=1), now=utc_now() + timedelta(days=2))
        assert (result.alerts, store.alerts()) == (2, [])

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

    def test_events_are_listed_by_run_project_and_sequence_and_page_by_position(
        self, store: HubStore
    ) -> None:
        store.ingest(
            [event_entry(sync_event(s, run_id=r)) for r in ("run-b", "run-a") for s in (2, 1)]
        )
        listed = [(e.run_id, e.sequence) for e in store.events("acme")]
        assert listed == [("run-a", 1), ("run-a", 2), ("run-b", 1), ("run-b", 2)]
        page = store.events("acme", after=EventPosition("run-a", "proj-1", 2), limit=1)
        assert [(e.run_id, e.sequence) for e in page] == [("run-b", 1)]
        only_b = store.events("acme", run_id="run-b")
        assert [e.sequence for e in only_b] == [1, 2]
        assert store.count_events(hub_project="acme", run_id="run-a") == 2
        assert store.count_events(project_id="nope") == 0

    def test_paging_one_by_one_keeps_two_projects_sharing_a_run_id(self, store: HubStore) -> None:
        store.ingest(
            [
                event_entry(sync_event(1, project_id="p1")),
                event_entry(sync_event(1, project_id="p2")),
                event_entry(sync_event(2, project_id="p1")),
            ]
        )
        seen, after = [], None
        while page := store.events("acme", after=after, limit=1):
            seen.append((page[0].project_id, page[0].sequence))
            after = page[0].position
        assert seen == [("p1", 1), ("p1", 2), ("p2", 1)]

    def test_events_of_one_project_only(self, store: HubStore) -> None:
        store.ingest(
            [event_entry(sync_event(s, project_id=p)) for p in ("p1", "p2") for s in (1, 2)]
        )
        listed = store.events("acme", project_id="p2")
        assert [(e.project_id, e.sequence) for e in listed] == [("p2", 1), ("p2", 2)]
        assert store.events("acme", project_id="p2", after=listed[0].position)[0].sequence == 2

    @store_property(max_examples=40)
    @given(
        keys=st.sets(st.sampled_from(sorted(PAGED)), max_size=30),
        page_size=st.integers(min_value=1, max_value=12),
        project=st.sampled_from([None, "p1", "p2"]),
        run=st.sampled_from([None, "run-1"]),
    )
    def test_paging_returns_every_row_exactly_once_in_order_for_any_page_size(
        self,
        tmp_path_factory: pytest.TempPathFactory,
        keys: set[tuple[str, str, int]],
        page_size: int,
        project: str | None,
        run: str | None,
    ) -> None:
        with self.open_new(tmp_path_factory.mktemp("paging")) as store:
            store.ingest([PAGED[k] for k in sorted(keys)])
            paged: list[EventPosition] = []
            after: EventPosition | None = None
            while page := store.events(
                "acme", run_id=run, after=after, limit=page_size, project_id=project
            ):
                assert len(page) <= page_size
                paged += [e.position for e in page]
                after = page[-1].position
            expected = sorted(
                EventPosition(r, p, s)
                for p, r, s in keys
                if project in (None, p) and run in (None, r)
            )
            assert paged == expected

    def test_runs_count_events_and_give_cursor_gaps_and_last_received(
        self, store: HubStore
    ) -> None:
        store.ingest([event_entry(sync_event(s, project_id="p1")) for s in (1, 2, 3)])
        store.ingest([event_entry(sync_event(s, project_id="p2")) for s in (1, 3, 4, 7, 9)])
        store.ingest([event_entry(sync_event(s, run_id="run-0", project_id="p2")) for s in (2,)])
        runs = store.runs("acme")
        assert [r.position for r in runs] == [
            RunPosition("run-0", "p2"),
            RunPosition("run-1", "p1"),
            RunPosition("run-1", "p2"),
        ]
        holed, whole, gapped = runs
        assert (holed.events, holed.sync_cursor, holed.missing, holed.gaps) == (1, 0, 1, ((1, 1),))
        assert (whole.events, whole.highest_sequence, whole.sync_cursor) == (3, 3, 3)
        assert (whole.missing, whole.gaps) == (0, ())
        assert (gapped.events, gapped.highest_sequence, gapped.sync_cursor) == (5, 9, 1)
        assert gapped.missing == 4
        assert gapped.gaps == ((2, 2), (5, 6), (8, 8))
        assert gapped.sync_cursor == store.sync_cursor("p2", "run-1")
        assert list(gapped.gaps) == store.gaps("p2", "run-1")
        assert gapped.last_received_at == max(e.received_at for e in store.events("acme", "run-1"))
        assert (gapped.hub_project, gapped.home_runtime_id) == ("acme", "rt-1")
        assert store.runs("acme", gaps_per_run=2)[2].gaps == ((2, 2), (5, 6))
        assert store.runs("acme", after=RunPosition("run-1", "p1")) == [gapped]
        assert store.runs("acme", limit=1) == [holed]
        assert [r.run_id for r in store.runs("acme", project_id="p2")] == ["run-0", "run-1"]
        assert store.runs("elsewhere") == []

    @store_property(max_examples=30)
    @given(
        keys=st.sets(st.sampled_from(sorted(PAGED)), max_size=30),
        page_size=st.integers(min_value=1, max_value=10),
    )
    def test_runs_page_every_run_exactly_once_and_agree_with_the_events(
        self,
        tmp_path_factory: pytest.TempPathFactory,
        keys: set[tuple[str, str, int]],
        page_size: int,
    ) -> None:
        with self.open_new(tmp_path_factory.mktemp("runs")) as store:
            store.ingest([PAGED[k] for k in sorted(keys)])
            paged: list[RunSummary] = []
            after: RunPosition | None = None
            while page := store.runs("acme", after=after, limit=page_size):
                assert len(page) <= page_size
                paged += page
                after = page[-1].position
            assert [r.position for r in paged] == sorted({RunPosition(r, p) for p, r, _ in keys})
            for summary in paged:
                sequences = {s for p, r, s in keys if summary.position == (r, p)}
                assert summary.events == len(sequences)
                assert summary.highest_sequence == max(sequences)
                assert summary.sync_cursor == store.sync_cursor(summary.project_id, summary.run_id)
                assert list(summary.gaps) == store.gaps(summary.project_id, summary.run_id)

    def test_runs_of_a_big_hub_page_through_every_run_with_its_gaps(self, store: HubStore) -> None:
        # What a page costs is counted in statements, per backend below, not timed.
        ingest_big_hub(store)
        paged: list[RunSummary] = []
        after: RunPosition | None = None
        while page := store.runs("acme", after=after, limit=1000):
            paged += page
            after = page[-1].position
        assert len(paged) == BIG_RUNS
        assert sum(r.events for r in paged) == BIG_RUNS * BIG_EVENTS_PER_RUN - BIG_RUNS // 10
        assert sum(1 for r in paged if r.gaps == ((2, 2),)) == BIG_RUNS // 10

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

    # ----- the hub's identity and its enrolled runtimes -----

    def test_a_new_hub_has_no_id_until_init_which_makes_one_once(self, store: HubStore) -> None:
        assert store.hub_id() is None
        hub_id = store.init_hub()
        assert re.fullmatch(r"hub-[0-9a-f]{16}", hub_id)
        assert store.init_hub() == hub_id
        assert store.hub_id() == hub_id

    def test_enrolling_before_init_is_refused(self, store: HubStore) -> None:
        with pytest.raises(HubNotInitializedError, match="no hub id yet"):
            store.enroll("rt-a", ["acme"], now=T0)
        assert store.enrolled_runtime("rt-a") is None

    def test_enrolling_gives_a_fresh_256_bit_key_for_the_hub_projects(
        self, store: HubStore
    ) -> None:
        hub_id = store.init_hub()
        enrollment = store.enroll("rt-a", ["zeta", "acme", "zeta"], now=T0)
        assert (enrollment.hub_id, enrollment.runtime_id) == (hub_id, "rt-a")
        assert enrollment.hub_projects == ("acme", "zeta")
        assert len(enrollment.key) == 32
        record = store.enrolled_runtime("rt-a")
        assert record is not None
        assert (record.runtime_id, record.state, record.hub_projects) == (
            "rt-a",
            RuntimeState.ACTIVE,
            ("acme", "zeta"),
        )
        assert (record.enrolled_at, record.rotated_at, record.revoked_at) == (T0, None, None)
        assert record.keys_at(T0) == (enrollment.key,)
        assert record.may_write("acme") and record.may_write("zeta")
        assert not record.may_write("other")

    def test_every_runtime_gets_its_own_key(self, store: HubStore) -> None:
        store.init_hub()
        keys = {store.enroll(f"rt-{i}", ["acme"], now=T0).key for i in range(5)}
        assert len(keys) == 5
        assert [r.runtime_id for r in store.enrolled_runtimes()] == [f"rt-{i}" for i in range(5)]

    def test_rotating_keeps_the_previous_key_valid_within_the_grace_only(
        self, store: HubStore
    ) -> None:
        store.init_hub()
        first = store.enroll("rt-a", ["acme"], now=T0)
        rotated_at = T0 + timedelta(days=3)
        second = store.enroll("rt-a", ["acme"], now=rotated_at, rotation_grace=timedelta(hours=2))
        assert second.key != first.key
        record = store.enrolled_runtime("rt-a")
        assert record is not None
        assert (record.enrolled_at, record.rotated_at) == (T0, rotated_at)
        assert record.previous_valid_until == rotated_at + timedelta(hours=2)
        assert record.keys_at(rotated_at + timedelta(minutes=119)) == (second.key, first.key)
        assert record.keys_at(rotated_at + timedelta(hours=2)) == (second.key,)

    def test_rotating_twice_keeps_only_the_key_just_replaced(self, store: HubStore) -> None:
        store.init_hub()
        first = store.enroll("rt-a", ["acme"], now=T0)
        second = store.enroll("rt-a", ["acme"], now=T0 + timedelta(minutes=1))
        third = store.enroll("rt-a", ["acme"], now=T0 + timedelta(minutes=2))
        record = store.enrolled_runtime("rt-a")
        assert record is not None
        keys = record.keys_at(T0 + timedelta(minutes=3))
        assert keys == (third.key, second.key) and first.key not in keys

    def test_the_default_grace_is_a_day(self, store: HubStore) -> None:
        store.init_hub()
        store.enroll("rt-a", ["acme"], now=T0)
        store.enroll("rt-a", ["acme"], now=T0)
        record = store.enrolled_runtime("rt-a")
        assert record is not None and record.previous_valid_until == T0 + DEFAULT_ROTATION_GRACE
        assert record.previous_valid_until - T0 == timedelta(hours=24)

    def test_a_grace_beyond_the_maximum_is_refused_and_changes_nothing(
        self, store: HubStore
    ) -> None:
        store.init_hub()
        first = store.enroll("rt-a", ["acme"], now=T0)
        store.enroll("rt-a", ["acme"], now=T0, rotation_grace=MAX_ROTATION_GRACE)  # the most
        before = store.enrolled_runtime("rt-a")
        for grace in (MAX_ROTATION_GRACE + timedelta(seconds=1), timedelta(days=999_999_999)):
            with pytest.raises(ValueError, match="between 0 and 30 days"):
                store.enroll("rt-a", ["acme"], now=T0, rotation_grace=grace)
        assert store.enrolled_runtime("rt-a") == before
        assert before is not None and first.key in before.keys_at(T0)

    def test_enrolling_again_replaces_the_hub_projects(self, store: HubStore) -> None:
        store.init_hub()
        store.enroll("rt-a", ["acme", "beta"], now=T0)
        store.enroll("rt-a", ["gamma"], now=T0)
        record = store.enrolled_runtime("rt-a")
        assert record is not None and record.hub_projects == ("gamma",)
        assert not record.may_write("acme")

    def test_revoking_leaves_no_valid_key_and_keeps_the_first_revocation_time(
        self, store: HubStore
    ) -> None:
        store.init_hub()
        store.enroll("rt-a", ["acme"], now=T0)
        store.enroll("rt-a", ["acme"], now=T0 + timedelta(minutes=1))
        revoked_at = T0 + timedelta(minutes=2)
        record = store.revoke("rt-a", now=revoked_at)
        assert store.enrolled_runtime("rt-a") == record
        assert (record.state, record.revoked_at) == (RuntimeState.REVOKED, revoked_at)
        assert (record.key, record.previous_key) == (None, None)
        assert record.keys_at(revoked_at) == ()
        assert not record.may_write("acme")
        again = store.revoke("rt-a", now=revoked_at + timedelta(hours=1))
        assert again.revoked_at == revoked_at

    def test_revoking_a_runtime_never_enrolled_is_refused(self, store: HubStore) -> None:
        store.init_hub()
        with pytest.raises(RuntimeNotEnrolledError, match="never enrolled"):
            store.revoke("rt-nobody", now=T0)
        assert store.enrolled_runtime("rt-nobody") is None

    def test_enrolling_a_revoked_runtime_again_gives_it_only_the_new_key(
        self, store: HubStore
    ) -> None:
        store.init_hub()
        old = store.enroll("rt-a", ["acme"], now=T0)
        store.revoke("rt-a", now=T0)
        later = T0 + timedelta(minutes=5)
        new = store.enroll("rt-a", ["acme"], now=later)
        record = store.enrolled_runtime("rt-a")
        assert record is not None
        assert (record.state, record.enrolled_at, record.revoked_at) == (
            RuntimeState.ACTIVE,
            later,
            None,
        )
        assert record.keys_at(later) == (new.key,) and old.key not in record.keys_at(later)

    def test_every_retired_key_leaves_a_revocation_signed_with_it(self, store: HubStore) -> None:
        store.init_hub()
        first = store.enroll("rt-a", ["acme"], now=T0)
        assert store.key_revocations() == []
        second = store.enroll("rt-a", ["acme"], now=T0 + timedelta(minutes=1))
        [rotated] = store.key_revocations()  # the first key: at the end of its grace
        assert rotated.runtime_id == "rt-a" and rotated.verifies(RuntimeKey(first.key))
        assert not rotated.verifies(RuntimeKey(second.key))
        grace_end = T0 + timedelta(minutes=1) + DEFAULT_ROTATION_GRACE
        assert not rotated.in_effect(grace_end - timedelta(seconds=1))
        assert rotated.in_effect(grace_end)

        revoked_at = T0 + timedelta(minutes=2)
        store.revoke("rt-a", now=revoked_at)
        records = {r.fingerprint: r for r in store.key_revocations()}
        for key in (first.key, second.key):  # both retired now, the first one sooner than planned
            record = records[RuntimeKey(key).fingerprint]
            assert record.verifies(RuntimeKey(key)) and record.in_effect(revoked_at)
        third = store.enroll("rt-a", ["acme"], now=T0 + timedelta(minutes=3))
        assert RuntimeKey(third.key).fingerprint not in {
            r.fingerprint for r in store.key_revocations()
        }
        assert len(store.key_revocations()) == 2

    @pytest.mark.parametrize(
        ("runtime_id", "hub_projects"),
        [("", ["acme"]), ("rt a", ["acme"]), ("rt-a", []), ("rt-a", ["ac{me}"])],
    )
    def test_a_bad_runtime_id_or_hub_project_list_is_refused_unwritten(
        self, store: HubStore, runtime_id: str, hub_projects: list[str]
    ) -> None:
        store.init_hub()
        with pytest.raises(ConfigError):
            store.enroll(runtime_id, hub_projects, now=T0)
        assert store.enrolled_runtimes() == []

    def test_no_repr_shows_a_key(self, store: HubStore) -> None:
        store.init_hub()
        enrollment = store.enroll("rt-a", ["acme"], now=T0)
        store.enroll("rt-a", ["acme"], now=T0)
        record = store.enrolled_runtime("rt-a")
        assert record is not None and record.previous_key == enrollment.key
        for shown in (repr(enrollment), repr(record), str(record)):
            assert enrollment.key.hex() not in shown and repr(enrollment.key) not in shown
            assert "key=" not in shown

    def test_the_hub_id_and_enrollments_outlive_the_process(self, tmp_path: Path) -> None:
        url = self.shared_url(tmp_path)
        if url is None:
            pytest.skip("this backend lives inside one process; nothing outlives it")
        with self.open_new(tmp_path) as store:
            hub_id = store.init_hub()
            enrollment = store.enroll("rt-a", ["acme"], now=T0)
            written = store.enrolled_runtime("rt-a")
        with open_store(url, create_schema=False) as reopened:
            assert reopened.hub_id() == hub_id
            assert reopened.init_hub() == hub_id
            assert reopened.enrolled_runtime("rt-a") == written
            assert written is not None and written.keys_at(T0) == (enrollment.key,)

    def test_each_ingest_batch_raises_the_commit_counter_by_one(self, store: HubStore) -> None:
        assert store.commit_counter() == 0 and store.committed == 0
        store.ingest([])  # nothing to commit: nothing raised
        assert store.commit_counter() == 0
        store.ingest(EVENTS[:3])
        assert store.commit_counter() == store.committed == 1
        store.ingest(EVENTS[:3])  # duplicates only, yet a committed batch
        store.ingest(EVENTS[3:])
        assert store.commit_counter() == store.committed == 3

    def test_the_commit_counter_is_shared_by_every_writer_and_outlives_the_process(
        self, tmp_path: Path
    ) -> None:
        url = self.shared_url(tmp_path)
        if url is None:
            pytest.skip("this backend lives inside one process; nothing outlives it")
        with self.open_new(tmp_path) as first, open_store(url, create_schema=False) as second:
            first.ingest(EVENTS[:2])
            second.ingest(EVENTS[2:4])
            assert second.committed == 2 and first.committed == 1
            first.ingest(EVENTS[4:6])
            assert first.committed == 3
        with open_store(url, create_schema=False) as reopened:
            assert reopened.commit_counter() == 3

    # One copy of this test runs per backend subclass (differing executors, on
    # purpose); each example opens fresh stores, so no state crosses examples.
    @store_property(max_examples=40)
    @given(batches=deliveries, order=st.permutations(range(len(EVENTS))))
    def test_any_interleaving_and_duplication_gives_the_in_order_state(
        self, tmp_path_factory: pytest.TempPathFactory, batches: list[list[int]], order: list[int]
    ) -> None:
        with self.open_new(tmp_path_factory.mktemp("in-order")) as reference:
            reference.ingest(EVENTS)
            expected = hub_state(reference)
        with self.open_new(tmp_path_factory.mktemp("shuffled")) as store:
            for batch in batches:
                store.ingest([EVENTS[i] for i in batch])
            # every event is delivered at least once, in some order, in some batches
            for start in range(0, len(order), 4):
                outcomes = store.ingest([EVENTS[i] for i in order[start : start + 4]])
                assert {o.outcome for o in outcomes} <= {Outcome.ACCEPTED, Outcome.DUPLICATE}
            assert hub_state(store) == expected

    def test_several_processes_share_one_store_without_lock_errors(self, tmp_path: Path) -> None:
        url = self.shared_url(tmp_path)
        if url is None:
            pytest.skip("this backend lives inside one process; no second process can open it")
        self.open_new(tmp_path).close()
        procs = [start_python("-c", WRITER, url) for _ in range(4)]
        results = [p.communicate(timeout=120) for p in procs]
        for proc, (_, err) in zip(procs, results, strict=True):
            assert "locked" not in err, err
            assert proc.returncode == 0, err
        with open_store(url, create_schema=False) as store:
            # 200 keys, each written by all four workers, stored once
            assert store.count_events() == 200
            assert store.alerts() == []

    # ----- resync requests -----

    def test_a_resync_report_counts_only_for_its_runtime_newest_first_and_done_stays_done(
        self, store: HubStore
    ) -> None:
        asked = ResyncRecord("rq-1", "rs-1", "rt-1", "acme", "restore", "{}", "run cursors", 1,
                             "2026-03-01T12:00:00.000000Z")  # fmt: skip
        store.record_resyncs([asked, replace(asked, runtime_id="rt-9")])  # a repeat: kept once
        [kept] = store.resyncs()
        assert kept == asked and not kept.done and kept.pending is None

        def report(runtime_id: str, at: str, pending: int) -> ResyncReport:
            return ResyncReport(runtime_id, "acme", "rq-1", 5, 1, 3, 1, 0, pending, at)

        late, early = "2026-03-01T12:00:09.000000Z", "2026-03-01T12:00:05.000000Z"
        assert store.record_resync_reports([report("rt-2", late, 0)]) == 0  # not asked of it
        assert store.record_resync_reports([report("rt-1", late, 2), report("rt-1", early, 0)]) == 1
        [progress] = store.resyncs(open_only=True)
        assert (progress.accepted, progress.pending, progress.reported_at) == (3, 2, late)
        done_at = "2026-03-01T12:00:10.000000Z"
        assert store.record_resync_reports([report("rt-1", done_at, 0)]) == 1
        assert store.resyncs(open_only=True) == [] and store.resyncs()[0].done_at == done_at
        assert store.record_resync_reports([report("rt-1", "2026-03-01T12:01:00.000000Z", 4)]) == 0


class TestSqliteHubStore(HubStoreContract):
    def open_new(self, directory: Path) -> HubStore:
        return open_store(hub_url_from_path(directory / "hub.db"), create_schema=True)

    def shared_url(self, directory: Path) -> str | None:
        return hub_url_from_path(directory / "hub.db")

    def test_a_page_of_runs_is_one_statement_however_many_runs(self, tmp_path: Path) -> None:
        with SqliteHubStore(tmp_path / "hub.db") as store:
            ingest_big_hub(store)
            statements: list[str] = []
            store._db.connection.set_trace_callback(statements.append)
            page = store.runs("acme", after=RunPosition("run-0500", "p0"), limit=1000)
            store._db.connection.set_trace_callback(None)
        assert len(page) == BIG_RUNS - 501
        assert [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))] == [
            statements[-1]
        ]
        assert len(statements) == 1

    def test_an_enrolled_runtime_is_one_primary_key_search(self, tmp_path: Path) -> None:
        # The plan of the statement the store itself runs, not of a query written here.
        with SqliteHubStore(tmp_path / "hub.db") as store:
            statements: list[str] = []
            store._db.connection.set_trace_callback(statements.append)
            assert store.enrolled_runtime("rt-a") is None
            store._db.connection.set_trace_callback(None)
            [statement] = statements
            plan = store._db.read(lambda c: c.execute(f"EXPLAIN QUERY PLAN {statement}").fetchall())
        assert len(plan) == 1 and "SEARCH enrolled_runtimes USING INDEX" in plan[0][3]

    def test_two_stores_on_one_file_agree_on_the_hub_id(self, tmp_path: Path) -> None:
        with (
            SqliteHubStore(tmp_path / "hub.db") as first,
            SqliteHubStore(tmp_path / "hub.db") as second,
        ):
            assert first.init_hub() == second.init_hub() == second.hub_id()


class TestMemoryHubStore(HubStoreContract):
    def open_new(self, directory: Path) -> HubStore:
        return open_store("memory://", create_schema=True)

    def shared_url(self, directory: Path) -> str | None:
        return None


class TestPostgresHubStore(HubStoreContract):
    """The contract on PostgreSQL: each store a new database of the test's private cluster."""

    @pytest.fixture(autouse=True)
    def _databases(self, postgres_databases: PostgresDatabases) -> None:
        self.databases = postgres_databases

    def open_new(self, directory: Path) -> HubStore:
        return open_store(self.databases.url_for(directory), create_schema=True)

    def shared_url(self, directory: Path) -> str | None:
        return self.databases.url_for(directory)

    def test_a_page_of_runs_is_one_statement_however_many_runs(self, tmp_path: Path) -> None:
        import psycopg

        statements: list[str] = []
        execute = psycopg.Connection.execute

        def recorded(connection: psycopg.Connection[Any], query: Any, *args: Any) -> Any:
            statements.append(str(query))
            return execute(connection, query, *args)

        with self.open_new(tmp_path) as store, pytest.MonkeyPatch.context() as patch:
            ingest_big_hub(store)
            patch.setattr(psycopg.Connection, "execute", recorded)
            page = store.runs("acme", after=RunPosition("run-0500", "p0"), limit=1000)
        assert len(page) == BIG_RUNS - 501
        assert len(statements) == 1, statements
