"""``decide``: the verdicts within one batch, where nothing is in the database yet.

The hub store contract covers what is already stored; these cover what the
batch itself teaches as it is walked: an accepted event's project owner, run
home and hash judge the events after it, and a refused one teaches nothing.
"""

from __future__ import annotations

from hubstore.decide import Known, ProjectOwner, decide
from hubsync.core.entries import ConflictReason, Outcome
from tests.helpers.relay_player import event_entry, sync_event


def test_an_accepted_event_teaches_the_rest_of_the_batch() -> None:
    first = event_entry(sync_event(1))
    batch = [
        first,
        event_entry(sync_event(1)),  # the same bytes again: a duplicate
        event_entry(sync_event(1, data={"other": 1})),  # other bytes, same key
        event_entry(sync_event(2, run_id="run-2", hub_project="elsewhere")),
        event_entry(sync_event(2, runtime_id="rt-other")),  # the project is rt-1's now
        event_entry(sync_event(3)),
    ]
    decisions = decide(batch, Known())
    assert [(o.outcome, o.reason) for o in decisions.outcomes] == [
        (Outcome.ACCEPTED, None),
        (Outcome.DUPLICATE, None),
        (Outcome.CONFLICT, ConflictReason.SEQUENCE_REUSED.value),
        (Outcome.CONFLICT, ConflictReason.PROJECT_MISMATCH.value),
        (Outcome.CONFLICT, ConflictReason.NOT_OWNER.value),
        (Outcome.ACCEPTED, None),
    ]
    assert decisions.outcomes[2].existing_hash == first.content_hash
    assert [entry.key for entry in decisions.accepted] == [first.key, batch[5].key]
    assert decisions.new_projects == {"proj-1": ProjectOwner("acme", "rt-1")}
    assert decisions.new_runs == {("proj-1", "run-1"): "rt-1"}
    assert [c.detail for c in decisions.conflicts][2] == "project belongs to runtime 'rt-1'"


def test_a_refused_event_teaches_nothing() -> None:
    known = Known(project_owners={"proj-1": ProjectOwner("shop", "rt-9")})
    batch = [
        event_entry(sync_event(1, hub_project="elsewhere", runtime_id="rt-9")),  # mismatch
        event_entry(sync_event(2, hub_project="shop", runtime_id="rt-9")),
        event_entry(sync_event(1, project_id="proj-2", runtime_id="rt-8", hub_project="x")),
        event_entry(sync_event(2, project_id="proj-2", runtime_id="rt-8", hub_project="other")),
    ]
    decisions = decide(batch, known)
    assert [o.outcome for o in decisions.outcomes] == [
        Outcome.CONFLICT,
        Outcome.ACCEPTED,  # the refused event made no run home: this one makes it
        Outcome.ACCEPTED,
        Outcome.CONFLICT,  # proj-2 was claimed for hub project x by the event before
    ]
    assert decisions.new_runs == {
        ("proj-1", "run-1"): "rt-9",
        ("proj-2", "run-1"): "rt-8",
    }
    assert decisions.new_projects == {"proj-2": ProjectOwner("x", "rt-8")}
    assert known.hashes.keys() == {("proj-1", "run-1", 2), ("proj-2", "run-1", 1)}


def test_a_project_belongs_to_the_first_runtime_to_write_it_whatever_the_run() -> None:
    # rt-b's key, rt-a's project: neither a new run nor a squatted run id is taken
    known = Known(project_owners={"proj-1": ProjectOwner("acme", "rt-a")})
    batch = [
        event_entry(sync_event(1, run_id="nightly-2026-12-02", runtime_id="rt-b")),
        event_entry(sync_event(1, run_id="fresh", runtime_id="rt-b", data={"x": 1})),
        event_entry(sync_event(1, run_id="nightly-2026-12-02", runtime_id="rt-a")),
    ]
    decisions = decide(batch, known)
    assert [(o.outcome, o.reason) for o in decisions.outcomes] == [
        (Outcome.CONFLICT, ConflictReason.NOT_OWNER.value),
        (Outcome.CONFLICT, ConflictReason.NOT_OWNER.value),
        (Outcome.ACCEPTED, None),
    ]
    assert decisions.new_runs == {("proj-1", "nightly-2026-12-02"): "rt-a"}
    assert decisions.new_projects == {}


def test_not_owner_comes_before_the_key_so_a_non_owner_learns_no_stored_hash() -> None:
    stored = event_entry(sync_event(1, runtime_id="rt-a"))
    known = Known(
        hashes={stored.key: stored.content_hash},
        project_owners={"proj-1": ProjectOwner("acme", "rt-a")},
        run_homes={("proj-1", "run-1"): "rt-a"},
    )
    [outcome] = decide([event_entry(sync_event(1, runtime_id="rt-b"))], known).outcomes
    assert (outcome.reason, outcome.existing_hash) == (ConflictReason.NOT_OWNER.value, None)


def test_a_run_homed_elsewhere_before_projects_had_owners_is_a_home_mismatch() -> None:
    # a hub upgraded from a version without owners: proj-1 went to rt-a (its earliest run),
    # but rt-b had started run-2 in it
    known = Known(
        project_owners={"proj-1": ProjectOwner("acme", "rt-a")},
        run_homes={("proj-1", "run-1"): "rt-a", ("proj-1", "run-2"): "rt-b"},
    )
    batch = [
        event_entry(sync_event(5, run_id="run-2", runtime_id="rt-a")),
        event_entry(sync_event(5, run_id="run-2", runtime_id="rt-b")),
    ]
    assert [o.reason for o in decide(batch, known).outcomes] == [
        ConflictReason.HOME_RUNTIME_MISMATCH.value,
        ConflictReason.NOT_OWNER.value,
    ]
