"""A drain's acks applied in spans: the relay's fast path, fenced beside its reference.

A drain's batch of outcomes is simple: one ``accepted`` (or ``duplicate``) per row,
runs of consecutive sequences of one run. ``acking_spans`` turns such a batch into
spans, and ``ack_spans`` acks each span's rows with ONE UPDATE, each row only while
unacked and only when its own hash is the slice of the span's hashes at its sequence,
instead of deciding row by row in Python. Any other batch (a park, a hash of another
length, a sequence SQLite cannot bind) gives no spans, and
``producers.store.outbox_outcomes.apply_one_by_one``, the reference, applies it.

The guarantee: for every batch it takes, this leaves the rows and the counts
(acked, unknown, foreign) exactly as ``apply_one_by_one`` does
(``tests/producers/test_outbox_spans_differential.py`` compares the two over generated
batches and earlier states).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from hubsync.core.entries import Outcome, OutcomeRecord
from producers.store.outbox_outcomes import (
    ACKING,
    SQLITE_INTEGERS,
    OutcomeApplication,
    rows_by_key,
)

HASH_CHARS = 64
"""Length of a content hash (SHA-256 in hex), the slice width of a span's hashes."""

# The span's hashes travel as one BLOB: SQLite slices a BLOB by byte offset, but TEXT by
# walking its characters from the start, which made each slice cost as much as the span.
_ACK_SPAN = (
    "UPDATE outbox SET acked_at = ?1, outcome = ?2, outcome_reason = NULL, outcome_at = ?1 "
    "WHERE run_id = ?3 AND sequence BETWEEN ?4 AND ?5 AND acked_at IS NULL "
    f"AND content_hash = CAST(substr(?6, (sequence - ?4) * {HASH_CHARS} + 1, {HASH_CHARS}) AS TEXT)"
)
AckSpan = tuple[float, str, str, int, int, bytes]
"""``_ACK_SPAN``'s parameters: now, verdict, run id, first and last sequence, the hashes."""


def acking_spans(outcomes: Sequence[OutcomeRecord], now: float) -> list[AckSpan] | None:
    """The batch as spans (outcomes in a row of one run and verdict, consecutive sequences,
    in batch order), when every outcome acks and names a well-formed hash; else None.

    A drain's batch is this simple: one ``accepted`` per row, runs of consecutive
    sequences. Anything else (a park, a hash of another length, a sequence past 64
    bits, which SQLite cannot bind) is left to ``apply_one_by_one``.
    """
    spans: list[AckSpan] = []
    hashes: list[str] = []
    run_id, verdict, first, last = "", Outcome.ACCEPTED, 0, 0
    for record in outcomes:
        if record.outcome not in ACKING or len(record.content_hash) != HASH_CHARS:
            return None
        if (
            hashes
            and record.sequence == last + 1
            and record.run_id == run_id
            and record.outcome is verdict
        ):
            hashes.append(record.content_hash)
            last += 1
            continue
        if hashes:
            spans.append(_span(now, verdict, run_id, first, last, hashes))
        run_id, verdict, first = record.run_id, record.outcome, record.sequence
        last, hashes = first, [record.content_hash]
    if hashes:
        spans.append(_span(now, verdict, run_id, first, last, hashes))
    if any(
        span[3] not in SQLITE_INTEGERS
        or span[4] not in SQLITE_INTEGERS
        or len(span[5]) != HASH_CHARS * (span[4] - span[3] + 1)  # a character past ASCII
        for span in spans
    ):
        return None
    return spans


def _span(
    now: float, verdict: Outcome, run_id: str, first: int, last: int, hashes: list[str]
) -> AckSpan:
    return (now, verdict.value, run_id, first, last, "".join(hashes).encode())


def ack_spans(
    c: sqlite3.Connection, spans: list[AckSpan], outcomes: Sequence[OutcomeRecord]
) -> OutcomeApplication:
    """Ack every span's rows in SQL: one UPDATE per span, each row only while unacked and
    only when its own hash is the slice of the span's hashes at its sequence.

    In batch order, this is what ``apply_one_by_one`` does with a batch that only acks:
    the first outcome for a row acks it, a later one finds it acked. When every
    outcome changed a row, nothing was unknown or foreign; otherwise one lookup
    counts those (the updates changed neither a row's hash nor whether it exists).
    """
    result = OutcomeApplication()
    for span in spans:
        result.acked += c.execute(_ACK_SPAN, span).rowcount
    if result.acked == len(outcomes):
        return result
    rows = rows_by_key(c, [(o.run_id, o.sequence) for o in outcomes])
    for record in outcomes:
        found = rows.get((record.run_id, record.sequence))
        if found is None:
            result.unknown += 1
        elif found[1] != record.content_hash:
            result.foreign.append((record.run_id, record.sequence))
    return result
