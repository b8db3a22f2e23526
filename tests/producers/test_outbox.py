"""The outbox API the relay drives: pending order, resend doubling, outcomes, counts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hubsync.core.entries import Outcome, OutcomeRecord
from producers.derivation import StoreIdentity
from producers.errors import ProducerError
from producers.store.event_store import RunEventStore, open_store_file
from producers.store.outbox import seq_ranges

IDENTITY = StoreIdentity("proj-1", "acme", "rt-host-0001")
BASE, CAP = 10.0, 35.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunEventStore]:
    with RunEventStore(tmp_path / "store.sqlite", IDENTITY, environ={}) as opened:
        for i in range(6):
            opened.append_event("run-1", "step.started", {"i": i})
        yield opened


def outcome(
    store: RunEventStore, sequence: int, verdict: str, reason: str | None = None
) -> OutcomeRecord:
    [row] = [r for r in store.outbox_for_run("run-1") if r.sequence == sequence]
    return record("run-1", sequence, row.content_hash, verdict, reason)


def record(
    run_id: str, sequence: int, digest: str, verdict: str, reason: str | None = None
) -> OutcomeRecord:
    return OutcomeRecord(IDENTITY.project_id, run_id, sequence, Outcome(verdict), digest, reason)


def test_unsent_lists_never_attempted_rows_in_order_after_the_cursor(store: RunEventStore) -> None:
    assert [r.seq for r in store.unsent(0, 100)] == [1, 2, 3, 4, 5, 6]
    assert [r.seq for r in store.unsent(2, 3)] == [3, 4, 5]
    store.mark_attempted([3], now=100.0, base_timeout=BASE, cap=CAP)
    store.mark_acked([4], now=100.0)
    store.mark_rejected([5], "too_large", now=100.0)
    assert [r.seq for r in store.unsent(0, 100)] == [1, 2, 6]
    first = store.unsent(0, 1)[0]
    assert (first.run_id, first.sequence, first.attempts) == ("run-1", 1, 0)
    assert first.sync_event.startswith(b"{") and len(first.content_hash) == 64


def test_resend_timeout_doubles_per_attempt_up_to_the_cap(store: RunEventStore) -> None:
    def next_attempt() -> float | None:
        return store.outbox_for_run("run-1")[0].next_attempt_at

    store.mark_attempted([1], now=100.0, base_timeout=BASE, cap=CAP)
    assert next_attempt() == 110.0
    store.mark_attempted([1], now=200.0, base_timeout=BASE, cap=CAP)
    assert next_attempt() == 220.0
    store.mark_attempted([1], now=300.0, base_timeout=BASE, cap=CAP)
    assert next_attempt() == 335.0  # 40 capped at 35
    entry = store.outbox_for_run("run-1")[0]
    assert (entry.attempts, entry.attempted_at, entry.state) == (3, 300.0, "attempted")


def test_due_resends_are_attempted_unacked_rows_whose_time_has_come(
    store: RunEventStore,
) -> None:
    store.mark_attempted([1, 2, 3, 5], now=100.0, base_timeout=BASE, cap=CAP)
    store.mark_attempted([2], now=105.0, base_timeout=BASE, cap=CAP)  # due at 125
    store.mark_acked([3], now=101.0)
    store.apply_outcomes([outcome(store, 5, "conflict", "sequence_reused")], now=101.0)
    assert store.due_resends(now=109.9, limit=10) == []
    assert [r.seq for r in store.due_resends(now=110.0, limit=10)] == [1]
    assert [r.seq for r in store.due_resends(now=500.0, limit=10)] == [1, 2]
    assert [r.seq for r in store.due_resends(now=500.0, limit=1)] == [1]
    assert store.due_resends(now=500.0, limit=10)[1].attempts == 2


def test_mark_attempted_leaves_acked_and_parked_rows_alone(store: RunEventStore) -> None:
    store.mark_acked([1], now=50.0)
    store.mark_rejected([2], "too_large", now=50.0)
    store.mark_attempted([1, 2, 3, 6], now=100.0, base_timeout=BASE, cap=CAP)
    attempts = {r.seq: r.attempts for r in store.outbox_for_run("run-1")}
    assert attempts == {1: 0, 2: 0, 3: 1, 4: 0, 5: 0, 6: 1}


def test_seq_ranges_group_contiguous_runs() -> None:
    assert list(seq_ranges([7, 1, 2, 3, 5, 6, 9, 2])) == [(1, 3), (5, 7), (9, 9)]
    assert list(seq_ranges([])) == []


def test_accepted_and_duplicate_outcomes_ack_their_rows(store: RunEventStore) -> None:
    store.mark_attempted([1, 2], now=100.0, base_timeout=BASE, cap=CAP)
    applied = store.apply_outcomes(
        [outcome(store, 1, "accepted"), outcome(store, 2, "duplicate")], now=120.0
    )
    assert (applied.acked, applied.conflict, applied.rejected, applied.unknown) == (2, 0, 0, 0)
    assert applied.foreign == []
    rows = store.outbox_for_run("run-1")
    assert [(r.acked_at, r.outcome, r.state) for r in rows[:2]] == [
        (120.0, "accepted", "acked"),
        (120.0, "duplicate", "acked"),
    ]
    assert store.due_resends(now=10_000.0, limit=10) == []


def test_conflict_and_rejected_outcomes_park_rows_with_their_reason(store: RunEventStore) -> None:
    store.mark_attempted([1, 2], now=100.0, base_timeout=BASE, cap=CAP)
    applied = store.apply_outcomes(
        [
            outcome(store, 1, "conflict", "sequence_reused"),
            outcome(store, 2, "rejected", "invalid_event"),
        ],
        now=120.0,
    )
    assert (applied.conflict, applied.rejected, applied.acked) == (1, 1, 0)
    rows = store.outbox_for_run("run-1")
    assert [(r.outcome, r.outcome_reason, r.acked_at) for r in rows[:2]] == [
        ("conflict", "sequence_reused", None),
        ("rejected", "invalid_event", None),
    ]
    assert [r.seq for r in store.unsent(0, 10)] == [3, 4, 5, 6]
    assert store.due_resends(now=10_000.0, limit=10) == []


def test_an_outcome_naming_other_bytes_is_foreign_and_leaves_the_row_alone(
    store: RunEventStore,
) -> None:
    store.mark_attempted([1], now=100.0, base_timeout=BASE, cap=CAP)
    before = store.outbox_for_run("run-1")[0]
    forged = record("run-1", 1, "f" * 64, "conflict", "sequence_reused")
    applied = store.apply_outcomes([forged, record("run-1", 1, "e" * 64, "accepted")], now=120.0)
    assert applied.foreign == [("run-1", 1), ("run-1", 1)]
    assert (applied.acked, applied.conflict) == (0, 0)
    assert store.outbox_for_run("run-1")[0] == before


def test_an_outcome_for_no_such_row_is_counted_unknown(store: RunEventStore) -> None:
    applied = store.apply_outcomes(
        [record("run-9", 1, "a" * 64, "accepted"), record("run-1", 99, "a" * 64, "accepted")],
        now=1.0,
    )
    assert applied.unknown == 2


def test_an_acked_row_is_not_changed_by_a_later_outcome(store: RunEventStore) -> None:
    store.apply_outcomes([outcome(store, 1, "accepted")], now=100.0)
    again = store.apply_outcomes(
        [outcome(store, 1, "conflict", "sequence_reused"), outcome(store, 1, "duplicate")],
        now=200.0,
    )
    assert (again.acked, again.conflict) == (0, 0)
    assert again.contradicted == [("run-1", 1)]
    row = store.outbox_for_run("run-1")[0]
    assert (row.acked_at, row.outcome) == (100.0, "accepted")


@pytest.mark.parametrize("ack", ["accepted", "duplicate"])
@pytest.mark.parametrize("park", ["rejected", "conflict"])
def test_a_verdict_against_an_ack_of_the_same_bytes_never_parks_the_row(
    store: RunEventStore, ack: str, park: str
) -> None:
    # in one batch, either order; and after the ack, in a later batch
    first = store.apply_outcomes([outcome(store, 1, park, "x"), outcome(store, 1, ack)], now=100.0)
    second = store.apply_outcomes([outcome(store, 2, ack), outcome(store, 2, park, "x")], now=100.0)
    store.apply_outcomes([outcome(store, 3, ack)], now=100.0)
    later = store.apply_outcomes([outcome(store, 3, park, "x")], now=200.0)
    assert [a.contradicted for a in (first, second, later)] == [
        [("run-1", 1)],
        [("run-1", 2)],
        [("run-1", 3)],
    ]
    assert (first.acked, first.rejected + first.conflict) == (1, 0)
    assert (later.acked, later.rejected + later.conflict) == (0, 0)
    rows = store.outbox_for_run("run-1")[:3]
    assert [(r.state, r.outcome, r.outcome_reason) for r in rows] == [("acked", ack, None)] * 3
    # a verdict on a parked row's hash is not a contradiction: the first park stands
    parked = store.apply_outcomes(
        [outcome(store, 4, "rejected", "bad_json"), outcome(store, 4, "conflict", "y")], now=1.0
    )
    assert (parked.rejected, parked.conflict, parked.contradicted) == (1, 0, [])


def test_a_parked_row_is_acked_when_its_replayed_event_is_accepted(store: RunEventStore) -> None:
    store.apply_outcomes([outcome(store, 2, "rejected", "max_deliveries")], now=100.0)
    assert store.outbox_counts()["rejected"] == 1
    later = store.apply_outcomes([outcome(store, 2, "accepted")], now=200.0)
    assert later.acked == 1
    assert store.outbox_counts()["rejected"] == 0 and store.outbox_counts()["acked"] == 1


def test_the_first_outcome_for_a_row_in_one_batch_wins(store: RunEventStore) -> None:
    batch = [outcome(store, s, "accepted") for s in (1, 2, 3, 4)]
    batch += [outcome(store, 3, "conflict", "sequence_reused"), outcome(store, 5, "duplicate")]
    result = store.apply_outcomes(batch, now=100.0)
    assert (result.acked, result.conflict) == (5, 0)
    states = [row.state for row in store.outbox_for_run("run-1")]
    assert states == ["acked"] * 5 + ["unsent"]


def test_hashes_of_other_lengths_cannot_shift_a_span_onto_a_row(store: RunEventStore) -> None:
    # A span's hashes are sliced by sequence: an outcome naming 63 characters and the
    # next 65 would line the slices up with the rows' own hashes.
    first, second = (row.content_hash for row in store.outbox_for_run("run-1")[:2])
    shifted = [
        record("run-1", 1, first[:63], "accepted"),
        record("run-1", 2, first[63] + second, "accepted"),
        record("run-1", 3, "\u00e9" * 64, "accepted"),  # 64 characters, 128 bytes
    ]
    applied = store.apply_outcomes(shifted, now=100.0)
    assert (applied.acked, applied.foreign) == (0, [("run-1", 1), ("run-1", 2), ("run-1", 3)])
    assert [r.state for r in store.outbox_for_run("run-1")] == ["unsent"] * 6


def test_a_sequence_past_64_bits_among_acks_is_unknown(store: RunEventStore) -> None:
    huge = [record("run-1", 2**64 + 1, "a" * 64, "accepted"), outcome(store, 1, "accepted")]
    applied = store.apply_outcomes(huge, now=100.0)
    assert (applied.acked, applied.unknown) == (1, 1)
    applied = store.apply_outcomes([record("run-1", -(2**63) - 1, "a" * 64, "duplicate")], 1.0)
    assert (applied.acked, applied.unknown) == (0, 1)


def test_the_read_position_is_saved_with_the_outcomes(store: RunEventStore) -> None:
    assert store.relay_position("acks:acme") is None
    store.apply_outcomes([outcome(store, 1, "accepted")], now=1.0, position=("acks:acme", "5-0"))
    assert store.relay_position("acks:acme") == "5-0"
    store.apply_outcomes([], now=2.0, position=("acks:acme", "9-1"))
    assert store.relay_position("acks:acme") == "9-1"
    store.set_relay_position("acks:acme", "10-0")
    assert store.relay_position("acks:acme") == "10-0"


def test_mark_acked_and_mark_outcome_count_only_rows_they_changed(store: RunEventStore) -> None:
    assert store.mark_acked([1, 2], now=1.0) == 2
    assert store.mark_acked([1, 2, 3], now=2.0) == 1
    assert store.mark_outcome([3, 4], "conflict", "sequence_reused", now=3.0) == 1
    assert store.mark_outcome([4], "duplicate", None, now=4.0) == 1
    with pytest.raises(ProducerError):
        store.mark_outcome([5], "lost", None, now=5.0)


def test_outbox_counts_by_state(store: RunEventStore) -> None:
    store.mark_attempted([1, 2, 3], now=100.0, base_timeout=BASE, cap=CAP)
    store.mark_acked([1], now=101.0)
    store.mark_outcome([2], "conflict", "sequence_reused", now=101.0)
    store.mark_rejected([4], "too_large", now=101.0)
    assert store.outbox_counts() == {
        "pending": 3,  # 3 (attempted), 5 and 6 (never attempted)
        "attempted": 1,
        "acked": 1,
        "conflict": 1,
        "rejected": 1,
        "total": 6,
    }


def test_oldest_pending_age_follows_the_oldest_unacked_row(store: RunEventStore) -> None:
    rows = store.outbox_for_run("run-1")
    created = rows[0].created_at
    assert store.oldest_pending_age(created + 5.0) == pytest.approx(5.0)
    store.mark_attempted([2], now=created, base_timeout=BASE, cap=CAP)
    store.mark_acked([1], now=created)
    assert store.oldest_pending_age(rows[1].created_at + 1.0) == pytest.approx(1.0)
    store.mark_acked([2, 3, 4, 5, 6], now=created)
    assert store.oldest_pending_age(created + 5.0) is None


def test_data_version_changes_when_another_connection_commits(store: RunEventStore) -> None:
    with open_store_file(store.path, environ={}) as relay_side:
        seen = relay_side.data_version()
        assert relay_side.data_version() == seen
        store.append_event("run-1", "step.started", {})
        assert relay_side.data_version() != seen
