"""``decide``: the verdicts within one batch, where nothing is in the database yet.

The hub store contract covers what is already stored; these cover what the
batch itself teaches as it is walked: an accepted event's project owner, run
home and hash judge the events after it, and a refused one teaches nothing.
"""

from __future__ import annotations

from hubstore.decide import Known, decide
from hubsync.core.entries import ConflictReason, Outcome
from tests.helpers.relay_player import event_entry, sync_event


def test_an_accepted_event_teaches_the_rest_of_the_batch() -> None:
    first = event_entry(sync_event(1))
    batch = [
        first,
        event_entry(sync_event(1)),  # the same bytes again: a duplicate
        event_entry(sync_event(1, data={"other": 1})),  # other bytes, same key
        event_entry(sync_event(2, run_id="run-2", hub_project="elsewhere")),
        event_entry(sync_event(2, runtime_id="rt-other")),
        event_entry(sync_event(3)),
    ]
    decisions = decide(batch, Known())
    assert [(o.outcome, o.reason) for o in decisions.outcomes] == [
        (Outcome.ACCEPTED, None),
        (Outcome.DUPLICATE, None),
        (Outcome.CONFLICT, ConflictReason.SEQUENCE_REUSED.value),
        (Outcome.CONFLICT, ConflictReason.PROJECT_MISMATCH.value),
        (Outcome.CONFLICT, ConflictReason.HOME_RUNTIME_MISMATCH.value),
        (Outcome.ACCEPTED, None),
    ]
    assert decisions.outcomes[2].existing_hash == first.content_hash
    assert [entry.key for entry in decisions.accepted] == [first.key, batch[5].key]
    assert decisions.new_projects == {"proj-1": first.event.hub_project}
    assert decisions.new_runs == {("proj-1", "run-1"): first.event.home_runtime_id}


def test_a_refused_event_teaches_nothing() -> None:
    known = Known(project_owners={"proj-1": "shop"})
    batch = [
        event_entry(sync_event(1, hub_project="elsewhere")),  # project mismatch: refused
        event_entry(sync_event(2, hub_project="shop", runtime_id="rt-9")),
        event_entry(sync_event(1, project_id="proj-2", runtime_id="rt-8")),
        event_entry(sync_event(2, project_id="proj-2", hub_project="other")),
    ]
    decisions = decide(batch, known)
    assert [o.outcome for o in decisions.outcomes] == [
        Outcome.CONFLICT,
        Outcome.ACCEPTED,  # the refused event made no run home: this one makes it
        Outcome.ACCEPTED,
        Outcome.CONFLICT,  # proj-2 was claimed for hub project acme by the event before
    ]
    assert decisions.new_runs == {
        ("proj-1", "run-1"): "rt-9",
        ("proj-2", "run-1"): "rt-8",
    }
    assert decisions.new_projects == {"proj-2": "acme"}
    assert known.hashes.keys() == {("proj-1", "run-1", 2), ("proj-2", "run-1", 1)}
