"""The hub store contract on who may write a project: its owning runtime, folded alerts about
refused entries, and moving a project to another runtime.

``HubStoreContract`` inherits these, so every backend runs them.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from hubstore.errors import ProjectMoveRefusedError
from hubstore.store import HubStore, SecurityAlert
from hubsync.core.entries import ConflictReason, Outcome, SecurityReason
from hubsync.core.errors import ConfigError
from tests.helpers.relay_player import event_entry, sync_event

MOVED_AT = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)


def forgery(n: int, **changes: object) -> SecurityAlert:
    """A refused entry's alert, the ``n``-th of a flood: each claims another key and hash."""
    alert = SecurityAlert(
        reason=SecurityReason.UNAUTHENTICATED,
        hub_project="acme",
        runtime_id="rt-b",
        project_id="proj-1",
        run_id=f"run-{n}",
        sequence=n,
        offered_hash=f"{n:064x}",
        detail=f"forgery {n}",
    )
    return replace(alert, **changes)  # type: ignore[arg-type]


def two_runtimes(store: HubStore, *hub_projects: str) -> None:
    """rt-a and rt-b enrolled for ``hub_projects`` (acme by default)."""
    store.init_hub()
    for runtime_id in ("rt-a", "rt-b"):
        store.enroll(runtime_id, list(hub_projects or ["acme"]))


class OwnershipContract:
    """Project ownership, folded alerts and moves; mixed into ``HubStoreContract``."""

    def test_another_runtimes_event_in_a_project_is_refused_not_owner(
        self, store: HubStore
    ) -> None:
        store.ingest([event_entry(sync_event(1, runtime_id="rt-a"))])
        fake = event_entry(sync_event(1, run_id="run-new", runtime_id="rt-b"))
        [outcome] = store.ingest([fake])
        assert (outcome.outcome, outcome.reason) == (Outcome.CONFLICT, ConflictReason.NOT_OWNER)
        assert (outcome.content_hash, outcome.existing_hash) == (fake.content_hash, None)
        assert store.count_events() == 1
        assert [r.run_id for r in store.runs("acme")] == ["run-1"]
        [alert] = store.alerts()
        assert (alert.reason, alert.runtime_id, alert.project_id, alert.run_id) == (
            ConflictReason.NOT_OWNER,
            "rt-b",
            "proj-1",
            "run-new",
        )
        assert alert.detail == "project belongs to runtime 'rt-a'"

    def test_a_squatted_run_id_is_refused_and_the_owner_still_writes_it(
        self, store: HubStore
    ) -> None:
        store.ingest([event_entry(sync_event(1, run_id="run-0", runtime_id="rt-a"))])
        squat = event_entry(sync_event(1, run_id="nightly-2026-12-02", runtime_id="rt-b"))
        assert store.ingest([squat])[0].reason == ConflictReason.NOT_OWNER
        own = [event_entry(sync_event(s, run_id="nightly-2026-12-02", runtime_id="rt-a"))
               for s in (1, 2)]  # fmt: skip
        assert [o.outcome for o in store.ingest(own)] == [Outcome.ACCEPTED] * 2
        assert store.sync_cursor("proj-1", "nightly-2026-12-02") == 2
        homes = {(r.run_id, r.home_runtime_id, r.events) for r in store.runs("acme")}
        assert homes == {("nightly-2026-12-02", "rt-a", 2), ("run-0", "rt-a", 1)}

    def test_the_first_writer_in_a_batch_owns_the_project(self, store: HubStore) -> None:
        outcomes = store.ingest(
            [
                event_entry(sync_event(1, run_id="run-b", runtime_id="rt-b")),
                event_entry(sync_event(1, run_id="run-a", runtime_id="rt-a")),
            ]
        )
        assert [o.reason for o in outcomes] == [None, ConflictReason.NOT_OWNER]
        later = store.ingest([event_entry(sync_event(2, run_id="run-b", runtime_id="rt-b"))])
        assert later[0].outcome is Outcome.ACCEPTED

    # ----- refused entries: one alert per hub project, claimed runtime and reason -----

    def test_a_flood_of_forgeries_under_distinct_keys_is_one_alert(self, store: HubStore) -> None:
        store.record_security_alerts([forgery(n) for n in range(1, 2001)])
        for start in range(2001, 3001, 250):
            store.record_security_alerts([forgery(n) for n in range(start, start + 250)])
        [alert] = store.alerts(limit=10_000)
        assert (alert.reason, alert.hub_project, alert.runtime_id) == (
            SecurityReason.UNAUTHENTICATED,
            "acme",
            "rt-b",
        )
        assert alert.occurrences == 3000
        assert alert.detected_at <= alert.last_detected_at
        # the latest forgery's claims stand for the flood
        assert (alert.run_id, alert.sequence, alert.offered_hash, alert.detail) == (
            "run-3000",
            3000,
            f"{3000:064x}",
            "forgery 3000",
        )
        assert store.count_events() == 0

    def test_refused_entries_fold_per_hub_project_runtime_and_reason_only(
        self, store: HubStore
    ) -> None:
        store.record_security_alerts(
            [
                forgery(1),
                forgery(2, runtime_id="rt-c"),
                forgery(3, hub_project="beta"),
                forgery(4, reason=SecurityReason.NOT_ENROLLED),
                forgery(5),
            ]
        )
        kept = {(a.hub_project, a.runtime_id, a.reason): a.occurrences for a in store.alerts()}
        assert kept == {
            ("acme", "rt-b", SecurityReason.UNAUTHENTICATED): 2,
            ("acme", "rt-c", SecurityReason.UNAUTHENTICATED): 1,
            ("beta", "rt-b", SecurityReason.UNAUTHENTICATED): 1,
            ("acme", "rt-b", SecurityReason.NOT_ENROLLED): 1,
        }

    def test_conflicts_are_still_one_alert_per_key_and_offered_bytes(self, store: HubStore) -> None:
        store.ingest([event_entry(sync_event(s, runtime_id="rt-a")) for s in (1, 2)])
        forged = [event_entry(sync_event(s, runtime_id="rt-a", data={"f": 1})) for s in (1, 2)]
        store.ingest(forged)
        store.ingest(forged[:1])
        store.record_security_alerts([forgery(1)])  # alongside, never folded with them
        per_key = sorted((a.sequence, a.occurrences) for a in store.alerts() if a.existing_hash)
        assert per_key == [(1, 2), (2, 1)]
        assert len(store.alerts()) == 3

    # ----- moving a project to another runtime -----

    def test_a_moved_project_and_its_runs_belong_to_the_new_runtime(self, store: HubStore) -> None:
        two_runtimes(store)
        store.ingest([event_entry(sync_event(s, run_id=r, runtime_id="rt-a"))
                      for r in ("run-1", "run-2") for s in (1, 2)])  # fmt: skip
        move = store.move_project("proj-1", "rt-b", now=MOVED_AT)
        assert (move.project_id, move.hub_project, move.from_runtime_id, move.to_runtime_id) == (
            "proj-1",
            "acme",
            "rt-a",
            "rt-b",
        )
        assert (move.runs, move.moved_at) == (2, MOVED_AT)
        assert store.project_moves() == [move] == store.project_moves("proj-1")
        assert store.project_moves("proj-2") == []
        # the new runtime continues a run and starts one; the old one is refused
        outcomes = store.ingest(
            [
                event_entry(sync_event(3, run_id="run-1", runtime_id="rt-b")),
                event_entry(sync_event(1, run_id="run-3", runtime_id="rt-b")),
                event_entry(sync_event(3, run_id="run-2", runtime_id="rt-a")),
            ]
        )
        assert [o.reason for o in outcomes] == [None, None, ConflictReason.NOT_OWNER]
        # what was stored stays as it was: the same bytes are still a duplicate
        again = store.ingest([event_entry(sync_event(1, run_id="run-1", runtime_id="rt-a"))])
        assert again[0].outcome is Outcome.DUPLICATE
        assert store.count_events() == 6

    def test_moving_back_is_a_second_move(self, store: HubStore) -> None:
        two_runtimes(store)
        store.ingest([event_entry(sync_event(1, runtime_id="rt-a"))])
        first = store.move_project("proj-1", "rt-b", now=MOVED_AT)
        second = store.move_project("proj-1", "rt-a", now=MOVED_AT + timedelta(hours=1))
        assert store.project_moves() == [first, second]
        assert second.move_id > first.move_id
        assert (second.from_runtime_id, second.to_runtime_id, second.runs) == ("rt-b", "rt-a", 1)
        assert store.ingest([event_entry(sync_event(2, runtime_id="rt-a"))])[0].reason is None

    @pytest.mark.parametrize(
        ("project_id", "runtime_id", "message"),
        [
            ("proj-9", "rt-b", "project proj-9 is not known to this hub"),
            ("proj-1", "rt-nobody", "it was never enrolled on this hub"),
            ("proj-1", "rt-revoked", "it is revoked"),
            ("proj-1", "rt-beta", "it is not enrolled for hub project acme"),
            ("proj-1", "rt-a", "project proj-1 already belongs to rt-a"),
            ("proj 1", "rt-b", "project id"),
        ],
    )
    def test_a_move_that_cannot_be_made_is_refused_and_changes_nothing(
        self, store: HubStore, project_id: str, runtime_id: str, message: str
    ) -> None:
        two_runtimes(store)
        store.enroll("rt-beta", ["beta"])
        store.enroll("rt-revoked", ["acme"])
        store.revoke("rt-revoked")
        store.ingest([event_entry(sync_event(1, runtime_id="rt-a"))])
        # a refusal is a ConfigError (a bad argument: one line, exit 2)
        refused = ConfigError if " " in project_id else ProjectMoveRefusedError
        with pytest.raises(refused, match=message):
            store.move_project(project_id, runtime_id, now=MOVED_AT)
        assert store.project_moves() == []
        assert store.ingest([event_entry(sync_event(2, runtime_id="rt-a"))])[0].reason is None
