"""Scrubbing a store of a secret registered after rows holding it were written.

Who can do it: the secret is registered in the appending process
(``Redactor.register``) and lives only in that process's memory; the relay is
another process and never learns it. So the store that registered it scrubs
its own file, in the registering call (``Redactor.on_register`` runs
``RunEventStore._scrub_late_secret``):

1. every ``run_events`` payload holding the value is redacted again (the local
   row was redacted with the secrets known at its append);
2. every outbox row not yet sent (``attempts = 0``, no outcome) whose bytes hold
   it is derived again from its now clean ``run_events`` row: new bytes, new
   content hash, before any hub saw the old ones. A row whose run id or event
   type holds the value cannot be re-derived (ids are never redacted): it is
   parked ``rejected`` (reason ``secret_in_id``) so it never leaves;
3. a row already attempted is left as it is: it may be in Redis or at the hub
   already, and re-deriving it would only turn its ack into a conflict.

Each step walks in chunks of ``SCRUB_CHUNK`` rows, one short transaction each.
SQLite keeps old bytes of changed rows in free space and in the WAL, so the
rewrite runs with ``secure_delete`` on, and the WAL is checkpointed with
TRUNCATE afterwards (a rare, deliberate call: here erasing the old frames is
the point, which PASSIVE would leave in the file).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass

from hubsync.core.sqlite import Database
from producers.derivation import EventDeriver
from producers.errors import ProducerError

log = logging.getLogger(__name__)

SCRUB_CHUNK = 500
"""Rows looked at per transaction while scrubbing."""

SECRET_IN_ID = "secret_in_id"  # noqa: S105 - a reason, not a password
"""``outcome_reason`` of an unsent row parked because its id holds a late secret."""

_HIT = "(instr({col}, ?) > 0 OR instr({col}, ?) > 0)"


@dataclass(frozen=True, slots=True)
class ScrubResult:
    """What one registration changed in one store."""

    run_events: int
    outbox_rows: int
    parked: int


def scrub_late_secret(db: Database, deriver: EventDeriver, value: str) -> ScrubResult:
    """Remove ``value`` from the local events and the unsent outbox rows of ``db``."""
    # Its spellings in stored JSON: as is, and JSON-escaped (the local payload and
    # the canonical sync event both keep non-ASCII as UTF-8, so they escape alike).
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    forms = (value, escaped)
    db.read(lambda c: c.execute("PRAGMA secure_delete = ON"))
    try:
        events = _scrub_run_events(db, deriver, forms)
        outbox, parked = _rederive_unsent(db, deriver, value, forms)
    finally:
        db.read(lambda c: c.execute("PRAGMA secure_delete = OFF"))
    if events or outbox or parked:
        # A reader still on the old frames makes this a partial checkpoint; the
        # frames are then overwritten as the log restarts.
        db.read(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    return ScrubResult(events, outbox, parked)


def _scrub_run_events(db: Database, deriver: EventDeriver, forms: tuple[str, str]) -> int:
    hit = _HIT.format(col="payload")
    query = (
        f"SELECT id, CASE WHEN {hit} THEN payload END FROM run_events "
        "WHERE id > ? ORDER BY id LIMIT ?"
    )
    changed = 0
    after = 0
    while True:
        # Read without the write lock (a rowid window; instr runs in SQLite, so only
        # hits come back), then rewrite the hits in one short transaction.
        params = (*forms, after, SCRUB_CHUNK)
        window: list[tuple[int, str | None]] = db.read(
            lambda c: c.execute(query, params).fetchall()  # noqa: B023 - called at once
        )
        if not window:
            return changed
        updates = [
            (deriver.redactor.redact_json(json.loads(payload))[1], row_id, payload)
            for row_id, payload in window
            if payload is not None
        ]
        if updates:

            def rewrite(
                c: sqlite3.Connection, updates: list[tuple[str, int, str]] = updates
            ) -> int:
                return c.executemany(
                    "UPDATE run_events SET payload = ? WHERE id = ? AND payload = ?", updates
                ).rowcount

            changed += db.write(rewrite)
        after = window[-1][0]


def _rederive_unsent(
    db: Database, deriver: EventDeriver, value: str, forms: tuple[str, str]
) -> tuple[int, int]:
    raw = tuple(form.encode("utf-8") for form in forms)
    hit = _HIT.format(col="p.sync_event")
    rewritten = parked = 0
    after = 0
    while True:
        # Under the write lock: the relay must not take a row between our read and
        # our rewrite, and `attempts = 0` is checked in the same transaction.
        def chunk(c: sqlite3.Connection, after: int = after) -> tuple[int | None, int, int]:
            rows = c.execute(
                "SELECT o.seq, o.run_id, o.sequence, o.event_type, "
                f"{hit}, e.occurred_at, e.payload "
                "FROM outbox AS o INDEXED BY outbox_unsent "
                "CROSS JOIN outbox_payloads AS p ON p.seq = o.seq "
                "LEFT JOIN run_events AS e ON e.run_id = o.run_id AND e.sequence = o.sequence "
                "WHERE o.attempts = 0 AND o.acked_at IS NULL AND o.outcome IS NULL AND o.seq > ? "
                "ORDER BY o.seq LIMIT ?",
                (*raw, after, SCRUB_CHUNK),
            ).fetchall()
            done = rewritten_here = parked_here = 0
            for seq, run_id, sequence, event_type, holds, occurred_at, payload in rows:
                if value in run_id or value in event_type:
                    parked_here += _park(c, seq)
                elif holds:
                    rewritten_here += _rewrite(c, deriver, seq, run_id, sequence, event_type,
                                               occurred_at, payload)  # fmt: skip
                done = seq
            return (done if len(rows) == SCRUB_CHUNK else None), rewritten_here, parked_here

        last, rewritten_now, parked_now = db.write(chunk)
        rewritten += rewritten_now
        parked += parked_now
        if last is None:
            return rewritten, parked
        after = last


def _park(c: sqlite3.Connection, seq: int) -> int:
    return c.execute(
        "UPDATE outbox SET outcome = 'rejected', outcome_reason = ?, outcome_at = created_at "
        "WHERE seq = ?",
        (SECRET_IN_ID, seq),
    ).rowcount


def _rewrite(
    c: sqlite3.Connection,
    deriver: EventDeriver,
    seq: int,
    run_id: str,
    sequence: int,
    event_type: str,
    occurred_at: str | None,
    payload: str | None,
) -> int:
    if payload is None or occurred_at is None:
        # Retention never deletes the events of a run with an unsent row, so this
        # is a damaged file; refusing beats sending the secret.
        raise ProducerError(
            f"outbox row {seq} has no local event to derive it again from; it was left "
            "unchanged and still holds a secret: mark it rejected before the relay sends it"
        )
    # the payload was scrubbed by _scrub_run_events just before
    data, digest = deriver.rederive(run_id, sequence, event_type, occurred_at, payload)
    # Hash and bytes change together, in the caller's transaction (the row is unsent:
    # checked under the same write lock).
    changed: int = c.execute(
        "UPDATE outbox SET content_hash = ? WHERE seq = ? AND attempts = 0", (digest, seq)
    ).rowcount
    if changed:
        c.execute("UPDATE outbox_payloads SET sync_event = ? WHERE seq = ?", (data, seq))
    return changed
