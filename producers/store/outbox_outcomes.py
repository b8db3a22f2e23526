"""Hub outcomes applied to outbox rows one by one: the reference.

``apply_one_by_one`` applies any batch of outcomes, whatever they name, in batch
order: an outcome changes its row only when it names the row's own content hash
(otherwise it is ``foreign``) and the row is not acked yet; ``accepted`` and
``duplicate`` ack it, ``conflict`` and ``rejected`` park it with the reason (the
first outcome of each kind for a row in a batch wins); an outcome for no row is
``unknown``. An ack is never undone: the hub stored those bytes, so a ``conflict`` or
``rejected`` naming the same row and hash as an ack (an earlier one, or one in the
same batch, before or after it) leaves the row acked and is counted
``contradicted``, for the relay to report as a security warning. It looks
the rows up set-based (``rows_by_key``) and writes them in ranges of ``seq``, but
decides for each outcome in Python, in the plain way. The relay's drain takes a
faster path for the batches that only ack (``producers.store.outbox_spans``), which must
leave the rows and the counts exactly as this does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from hubsync.core.entries import Outcome, OutcomeRecord

ACKING = frozenset({Outcome.ACCEPTED, Outcome.DUPLICATE})
"""Hub outcomes that ack a row; the others (``conflict``, ``rejected``) park it."""


@dataclass(slots=True)
class OutcomeApplication:
    """What ``apply_outcomes`` did with one batch of hub outcomes."""

    acked: int = 0
    conflict: int = 0
    rejected: int = 0
    foreign: list[tuple[str, int]] = field(default_factory=list)
    unknown: int = 0
    contradicted: list[tuple[str, int]] = field(default_factory=list)
    """``(run_id, sequence)`` of each ``conflict`` or ``rejected`` that named an acked row's
    own hash: the row stays acked."""


def seq_ranges(seqs: Sequence[int]) -> Iterator[tuple[int, int]]:
    """Contiguous ``(first, last)`` runs of ``seqs`` (so a batch marks in a few UPDATEs)."""
    ordered = sorted(set(seqs))
    if not ordered:
        return
    first = last = ordered[0]
    for seq in ordered[1:]:
        if seq == last + 1:
            last = seq
            continue
        yield first, last
        first = last = seq
    yield first, last


def apply_one_by_one(
    c: sqlite3.Connection, outcomes: Sequence[OutcomeRecord], now: float
) -> OutcomeApplication:
    """Apply outcomes one by one in Python: any batch, whatever its outcomes name."""
    # Set-based: one lookup per chunk of keys, then range updates by seq,
    # instead of a SELECT and an UPDATE per outcome (acks arrive by the
    # thousand during a drain).
    rows = rows_by_key(c, [(o.run_id, o.sequence) for o in outcomes])
    result = OutcomeApplication()
    acks: dict[tuple[str, int], tuple[int, Outcome]] = {}  # row -> (seq, acking outcome)
    parks: dict[tuple[str, int], tuple[int, Outcome, str | None]] = {}
    parked_keys: list[tuple[str, int]] = []  # parking outcomes, in batch order
    for record in outcomes:
        row_key = (record.run_id, record.sequence)
        found = rows.get(row_key)
        if found is None:
            result.unknown += 1
        elif found[1] != record.content_hash:
            result.foreign.append(row_key)
        elif record.outcome in ACKING:
            if not found[2]:
                acks.setdefault(row_key, (found[0], record.outcome))
        else:
            parked_keys.append(row_key)
            if not found[2]:
                parks.setdefault(row_key, (found[0], record.outcome, record.reason))
    for row_key in parked_keys:
        found = rows[row_key]
        if found[2] or row_key in acks:  # acked before, or in this batch: it stays acked
            result.contradicted.append(row_key)
            parks.pop(row_key, None)
    _write(c, acks, parks, now, result)
    return result


def _write(
    c: sqlite3.Connection,
    acks: dict[tuple[str, int], tuple[int, Outcome]],
    parks: dict[tuple[str, int], tuple[int, Outcome, str | None]],
    now: float,
    result: OutcomeApplication,
) -> None:
    """Ack and park the rows decided, in ranges of ``seq``; count them on ``result``."""
    acked: dict[Outcome, list[int]] = {}
    for seq, outcome in acks.values():
        acked.setdefault(outcome, []).append(seq)
    parked: dict[tuple[Outcome, str | None], list[int]] = {}
    for seq, outcome, reason in parks.values():
        parked.setdefault((outcome, reason), []).append(seq)
        if outcome is Outcome.CONFLICT:
            result.conflict += 1
        else:
            result.rejected += 1
    result.acked += len(acks)
    for outcome, seqs in acked.items():
        c.executemany(
            "UPDATE outbox SET acked_at = ?, outcome = ?, outcome_reason = NULL, "
            "outcome_at = ? WHERE seq BETWEEN ? AND ? AND acked_at IS NULL",
            [(now, outcome.value, now, a, b) for a, b in seq_ranges(seqs)],
        )
    for (outcome, reason), seqs in parked.items():
        c.executemany(
            "UPDATE outbox SET outcome = ?, outcome_reason = ?, outcome_at = ? "
            "WHERE seq BETWEEN ? AND ? AND acked_at IS NULL",
            [(outcome.value, reason, now, a, b) for a, b in seq_ranges(seqs)],
        )


_ROWS_OF_RUN = (
    "SELECT sequence, seq, content_hash, acked_at FROM outbox "
    "WHERE run_id = ? AND sequence BETWEEN ? AND ?"
)
SQLITE_INTEGERS = range(-(2**63), 2**63)
"""The integers SQLite can bind; no row has a sequence outside them."""


def rows_by_key(
    c: sqlite3.Connection, keys: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, str, bool]]:
    """``(run_id, sequence) -> (seq, content_hash, settled)`` for the keys that exist.

    ``settled`` means acked: nothing changes it any more. A parked row is not
    settled, so a dead letter replayed after its fix can still ack it. The
    outcomes of a batch name runs of consecutive sequences, so each run of
    them is one range scan of UNIQUE (run_id, sequence).
    """
    by_run: dict[str, list[int]] = {}
    for run_id, sequence in keys:
        if sequence in SQLITE_INTEGERS:  # past 64 bits no row has it, and SQLite refuses it
            by_run.setdefault(run_id, []).append(sequence)
    found: dict[tuple[str, int], tuple[int, str, bool]] = {}
    for run_id, sequences in by_run.items():
        for first, last in seq_ranges(sequences):
            for sequence, seq, digest, acked_at in c.execute(_ROWS_OF_RUN, (run_id, first, last)):
                found[(run_id, sequence)] = (seq, digest, acked_at is not None)
    return found
