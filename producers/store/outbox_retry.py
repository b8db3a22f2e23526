"""Putting parked outbox rows back to pending once the hub-side cause is fixed.

A row the hub answered ``conflict`` or ``rejected`` is parked: the relay never
sends it again by itself. When the cause is gone at the hub (a wrong row
removed, a runtime enrolled for its hub project, a limit raised), an operator
re-queues it (``hubsync outbox retry``): its outcome is cleared and it is due
for a resend now, so the running relay sends it with its next pass, and the
hub judges it afresh (dedupe makes a row the hub already holds ``duplicate``).

A parked row keeps the bytes it was derived with. One whose bytes hold a
secret this store's redactor knows now (registered in this process, an
environment secret, a credential format), say one registered since the row
was derived, is not re-queued: sending it would put the secret on the wire.
The late-secret scrub (``producers.store.late_secrets``) never touches a row
once attempted, so this check is the only one such a row meets. A row parked
``secret_in_id`` (its ids hold a secret) is never re-queued either.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field

from hubsync.core.entries import Outcome
from hubsync.core.sqlite import Database
from producers.redaction import Redactor
from producers.store.late_secrets import SCRUB_CHUNK, SECRET_IN_ID

RETRYABLE = (Outcome.CONFLICT, Outcome.REJECTED)
"""The outcomes that park a row, and so the ones a retry clears."""


@dataclass(slots=True)
class RetryCounts:
    """What one retry did in one store, per run id."""

    requeued: Counter[str] = field(default_factory=Counter)
    """Rows put back to pending."""
    refused: Counter[str] = field(default_factory=Counter)
    """Parked rows left parked because their bytes hold a secret."""


def retry_parked(
    db: Database,
    redactor: Redactor,
    now: float,
    *,
    run_id: str | None = None,
    outcome: Outcome | None = None,
) -> RetryCounts:
    """Re-queue the parked rows of ``db`` (of one run, of one outcome, if given).

    Walks the parked rows in chunks of ``SCRUB_CHUNK``, each chunk one write
    transaction (the relay cannot apply an outcome to a row between the read
    and the change). A re-queued row has no outcome and is due for a resend at
    ``now`` (as an attempted row, so the relay's resend pass picks it up
    whatever its send position).
    """
    if outcome is not None and outcome not in RETRYABLE:
        raise ValueError(f"only parked rows are retried ({', '.join(RETRYABLE)}), not {outcome}")
    counts = RetryCounts()
    after = 0
    while True:

        def chunk(c: sqlite3.Connection, after: int = after) -> int | None:
            return _retry_chunk(c, redactor, counts, now, after, run_id, outcome)

        last = db.write(chunk)
        if last is None:
            return counts
        after = last


def _retry_chunk(
    c: sqlite3.Connection,
    redactor: Redactor,
    counts: RetryCounts,
    now: float,
    after: int,
    run_id: str | None,
    outcome: Outcome | None,
) -> int | None:
    """One chunk: the last seq looked at, or None when it was the last chunk."""
    where = ["o.acked_at IS NULL", "o.outcome IS NOT NULL", "o.seq > ?",
             "o.outcome_reason IS NOT ?"]  # fmt: skip
    args: list[object] = [after, SECRET_IN_ID]
    if run_id is not None:
        where.append("o.run_id = ?")
        args.append(run_id)
    if outcome is not None:
        where.append("o.outcome = ?")
        args.append(outcome.value)
    rows = c.execute(
        "SELECT o.seq, o.run_id, p.sync_event FROM outbox AS o INDEXED BY outbox_parked "
        f"CROSS JOIN outbox_payloads AS p ON p.seq = o.seq WHERE {' AND '.join(where)} "
        "ORDER BY o.seq LIMIT ?",
        (*args, SCRUB_CHUNK),
    ).fetchall()
    requeue = []
    for seq, run, data in rows:
        if redactor.contains_secret(bytes(data).decode("utf-8", "replace")):
            counts.refused[run] += 1
        else:
            requeue.append((now, seq))
            counts.requeued[run] += 1
    c.executemany(
        "UPDATE outbox SET outcome = NULL, outcome_reason = NULL, outcome_at = NULL, "
        "attempts = MAX(attempts, 1), next_attempt_at = ? "
        "WHERE seq = ? AND acked_at IS NULL AND outcome IS NOT NULL",
        requeue,
    )
    return int(rows[-1][0]) if len(rows) == SCRUB_CHUNK else None
