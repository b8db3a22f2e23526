"""The verdict on each event of a batch, given what the database already holds.

Kept apart from SQL so every store implementation judges the same way: the
store fetches what it knows about the batch's keys in a few set-based queries,
``decide`` walks the batch in order (so the second copy of an event inside one
batch is a duplicate of the first, and other bytes under a key accepted
earlier in the batch are a conflict), and the store writes the result.

A project id belongs to one hub project and one runtime: those of the first
authenticated event that named it (an operator may move it to another runtime
later, ``HubStore.move_project``). Every run of a project belongs to the
project's runtime, so no other runtime's key can start, continue or squat a
run in it: its events are refused ``not_owner`` before anything else is
looked at. ``home_runtime_mismatch`` remains for runs a hub stored before
projects had an owning runtime, when two runtimes wrote into one project.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from hubsync.core.entries import ConflictReason, EventEntry, Outcome, OutcomeRecord

log = logging.getLogger(__name__)

EventKey = tuple[str, str, int]
RunKey = tuple[str, str]


class ProjectOwner(NamedTuple):
    """Who a project id belongs to: its hub project and its runtime."""

    hub_project: str
    runtime_id: str


@dataclass(slots=True)
class Known:
    """What the store holds for the batch: hashes by key, project owners, run homes."""

    hashes: dict[EventKey, str] = field(default_factory=dict)
    project_owners: dict[str, ProjectOwner] = field(default_factory=dict)
    run_homes: dict[RunKey, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Conflict:
    """A refused event, to be recorded as an alert (never its bytes)."""

    entry: EventEntry
    reason: ConflictReason
    existing_hash: str | None
    detail: str


@dataclass(slots=True)
class Decisions:
    """The outcome of every entry (in batch order) and what the store must write."""

    outcomes: list[OutcomeRecord] = field(default_factory=list)
    accepted: list[EventEntry] = field(default_factory=list)
    new_projects: dict[str, ProjectOwner] = field(default_factory=dict)
    new_runs: dict[RunKey, str] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)


def decide(batch: Sequence[EventEntry], known: Known) -> Decisions:
    """Judge ``batch`` in order against ``known``, which this updates as it accepts.

    In this order: the same bytes as stored are a ``duplicate``; a project of
    another runtime is ``not_owner``; other bytes under a used key are
    ``sequence_reused``; a project of another hub project is
    ``project_mismatch``; a run homed on another runtime is
    ``home_runtime_mismatch``. A refused event teaches the batch nothing.
    """
    out = Decisions()
    hashes = known.hashes
    owners = known.project_owners
    homes = known.run_homes
    for entry in batch:
        event = entry.event
        project_id, run_id, sequence = key = (event.project_id, event.run_id, event.sequence)
        digest = entry.content_hash
        existing = hashes.get(key)
        if existing == digest:
            out.outcomes.append(
                OutcomeRecord(project_id, run_id, sequence, Outcome.DUPLICATE, digest)
            )
            continue
        conflict = _conflict(entry, existing, owners.get(event.project_id), homes)
        if conflict is not None:
            out.conflicts.append(conflict)
            out.outcomes.append(
                _outcome(entry, Outcome.CONFLICT, conflict.reason, conflict.existing_hash)
            )
            continue
        if project_id not in owners:
            owner = ProjectOwner(event.hub_project, entry.runtime_id)
            owners[project_id] = out.new_projects[project_id] = owner
        if (project_id, run_id) not in homes:
            homes[(project_id, run_id)] = out.new_runs[(project_id, run_id)] = entry.runtime_id
        hashes[key] = digest
        out.accepted.append(entry)
        out.outcomes.append(OutcomeRecord(project_id, run_id, sequence, Outcome.ACCEPTED, digest))
    return out


def _conflict(
    entry: EventEntry,
    existing: str | None,
    owner: ProjectOwner | None,
    homes: dict[RunKey, str],
) -> Conflict | None:
    """Why ``entry`` (not a duplicate) is refused, or None if it is to be accepted."""
    event = entry.event
    if owner is not None and owner.runtime_id != entry.runtime_id:
        return Conflict(
            entry,
            ConflictReason.NOT_OWNER,
            None,
            f"project belongs to runtime {owner.runtime_id!r}",
        )
    if existing is not None:
        return Conflict(
            entry,
            ConflictReason.SEQUENCE_REUSED,
            existing,
            "other bytes are already stored under this (project, run, sequence)",
        )
    if owner is not None and owner.hub_project != event.hub_project:
        return Conflict(
            entry,
            ConflictReason.PROJECT_MISMATCH,
            None,
            f"project belongs to hub project {owner.hub_project!r}",
        )
    home = homes.get((event.project_id, event.run_id))
    if home is not None and home != entry.runtime_id:
        return Conflict(
            entry, ConflictReason.HOME_RUNTIME_MISMATCH, None, f"run's home runtime is {home!r}"
        )
    return None


def warn_conflicts(conflicts: Sequence[Conflict]) -> None:
    """Log each refused conflict once the store has recorded it (hash prefixes, never bytes)."""
    for c in conflicts:
        log.warning(
            "conflict refused: %s for %s/%s/%s from runtime %s (offered %s, stored %s)",
            c.reason.value,
            *c.entry.key,
            c.entry.runtime_id,
            c.entry.content_hash[:16],
            (c.existing_hash or "-")[:16],
        )


def _outcome(
    entry: EventEntry,
    outcome: Outcome,
    reason: ConflictReason | None = None,
    existing_hash: str | None = None,
) -> OutcomeRecord:
    project_id, run_id, sequence = entry.key
    return OutcomeRecord(
        project_id=project_id,
        run_id=run_id,
        sequence=sequence,
        outcome=outcome,
        content_hash=entry.content_hash,
        reason=None if reason is None else reason.value,
        existing_hash=existing_hash,
    )
