"""The verdict on each event of a batch, given what the database already holds.

Kept apart from SQL so every store implementation judges the same way: the
store fetches what it knows about the batch's keys in a few set-based queries,
``decide`` walks the batch in order (so the second copy of an event inside one
batch is a duplicate of the first, and other bytes under a key accepted
earlier in the batch are a conflict), and the store writes the result.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from hubsync.core.entries import ConflictReason, EventEntry, Outcome, OutcomeRecord

log = logging.getLogger(__name__)

EventKey = tuple[str, str, int]
RunKey = tuple[str, str]


@dataclass(slots=True)
class Known:
    """What the store holds for the batch: hashes by key, project owners, run homes."""

    hashes: dict[EventKey, str] = field(default_factory=dict)
    project_owners: dict[str, str] = field(default_factory=dict)
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
    new_projects: dict[str, str] = field(default_factory=dict)
    new_runs: dict[RunKey, str] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)


def decide(batch: Sequence[EventEntry], known: Known) -> Decisions:
    """Judge ``batch`` in order against ``known``, which this updates as it accepts."""
    out = Decisions()
    hashes = known.hashes
    owners = known.project_owners
    homes = known.run_homes
    for entry in batch:
        event = entry.event
        project_id = event.project_id
        run_id = event.run_id
        key = (project_id, run_id, event.sequence)
        digest = entry.content_hash
        existing = hashes.get(key)
        conflict: Conflict | None = None
        if existing is not None:
            if existing == digest:
                out.outcomes.append(
                    OutcomeRecord(project_id, run_id, event.sequence, Outcome.DUPLICATE, digest)
                )
                continue
            conflict = Conflict(
                entry,
                ConflictReason.SEQUENCE_REUSED,
                existing,
                "other bytes are already stored under this (project, run, sequence)",
            )
        else:
            owner = owners.get(project_id)
            home = homes.get((project_id, run_id))
            if owner is not None and owner != event.hub_project:
                conflict = Conflict(
                    entry,
                    ConflictReason.PROJECT_MISMATCH,
                    None,
                    f"project belongs to hub project {owner!r}",
                )
            elif home is not None and home != event.home_runtime_id:
                conflict = Conflict(
                    entry,
                    ConflictReason.HOME_RUNTIME_MISMATCH,
                    None,
                    f"run's home runtime is {home!r}",
                )
            elif owner is None:
                owners[project_id] = out.new_projects[project_id] = event.hub_project
            if conflict is None and home is None:
                homes[(project_id, run_id)] = out.new_runs[(project_id, run_id)] = (
                    event.home_runtime_id
                )
        if conflict is not None:
            out.conflicts.append(conflict)
            out.outcomes.append(
                _outcome(entry, Outcome.CONFLICT, conflict.reason, conflict.existing_hash)
            )
            continue
        hashes[key] = digest
        out.accepted.append(entry)
        out.outcomes.append(
            OutcomeRecord(project_id, run_id, event.sequence, Outcome.ACCEPTED, digest)
        )
    return out


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
