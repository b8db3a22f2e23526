"""The outbox side of a project's event store: what the relay reads and marks.

A row's life: written by ``append_event`` (pending, never attempted) -> sent by
the relay (``mark_attempted``: attempts + 1, resend due after a timeout that
doubles per attempt up to a cap) -> the hub's outcome arrives
(``apply_outcomes``): ``accepted``/``duplicate`` ack it; ``conflict``/
``rejected`` park it with the reason, never to be resent. An outcome is only
applied when it names the row's own content hash: a verdict on other bytes
under this row's key (a forger, a buggy twin) is handed back as ``foreign``
and leaves the row alone. ``apply_outcomes`` applies a batch that only acks in spans
(``producers.store.outbox_spans``, the fast path) and any other one by one
(``producers.store.outbox_outcomes``, the reference the spans must equal).

A row's bytes live apart from its state: ``outbox_payloads`` holds the sync
event keyed by the row's ``seq``, written in the append's transaction and
deleted with the row. SQLite rewrites the whole record an UPDATE changes, so
with the ~540-byte event out of it a mark or an ack rewrites about 115 bytes
instead of 670, and a batch of 500 acks writes about a quarter of the pages
(docs/runtime-store.md, "The outbox tables").

All times are UNIX epoch floats (``time.time()``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from hubsync.core.entries import Outcome, OutcomeRecord
from hubsync.core.sqlite import Database
from producers.errors import ProducerError
from producers.store.outbox_outcomes import ACKING, OutcomeApplication, apply_one_by_one, seq_ranges
from producers.store.outbox_spans import ack_spans, acking_spans


class OutboxRow(NamedTuple):
    """One row as the relay sends it (``event_type`` feeds the stream's flat field).

    A named tuple rather than a dataclass: the relay builds hundreds of
    thousands of these per second, and a tuple is made in C.
    """

    seq: int
    run_id: str
    sequence: int
    sync_event: bytes
    content_hash: str
    attempts: int
    event_type: str
    traceparent: str | None
    """The appending caller's trace context (``hubsync.core.tracing``), carried on the entry."""


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """Every column of one outbox row, for inspection and tests."""

    seq: int
    run_id: str
    sequence: int
    sync_event: bytes
    content_hash: str
    created_at: float
    attempts: int
    attempted_at: float | None
    next_attempt_at: float | None
    acked_at: float | None
    outcome: str | None
    outcome_reason: str | None
    event_type: str

    @property
    def state(self) -> str:
        """``acked``, ``conflict``, ``rejected``, ``attempted`` or ``unsent``."""
        if self.acked_at is not None:
            return "acked"
        if self.outcome is not None:
            return self.outcome
        return "attempted" if self.attempts else "unsent"


PAYLOADS_DDL = """
CREATE TABLE outbox_payloads (
  seq INTEGER PRIMARY KEY,
  sync_event BLOB NOT NULL,
  traceparent TEXT
);
"""
"""The outbox rows' bytes, keyed by ``outbox.seq``, and the trace context of the caller that
appended each (a W3C ``traceparent``, NULL when none: ``hubsync.core.tracing``). Both are
written once, with the row, so the context lives beside the bytes and an ack never rewrites
it. No declared foreign key: SQLite enforces one only with
``PRAGMA foreign_keys`` on; the writers keep the two tables in step instead (an append
inserts both, pruning deletes both, each in one transaction)."""

OUTBOX_DDL = """
CREATE TABLE outbox (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  event_type TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  created_at REAL NOT NULL,
  attempted_at REAL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at REAL,
  acked_at REAL,
  outcome TEXT,
  outcome_reason TEXT,
  outcome_at REAL,
  UNIQUE (run_id, sequence)
);
CREATE INDEX outbox_unsent ON outbox(seq)
  WHERE attempts = 0 AND acked_at IS NULL AND outcome IS NULL;
CREATE INDEX outbox_resend ON outbox(next_attempt_at)
  WHERE attempts > 0 AND acked_at IS NULL AND outcome IS NULL;
CREATE INDEX outbox_parked ON outbox(outcome) WHERE acked_at IS NULL AND outcome IS NOT NULL;
CREATE TABLE relay_state (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
"""

BOOKKEEPING_SYNCHRONOUS = "NORMAL"
"""SQLite durability of the relay's own writes: attempt marks and outcomes applied (the
pruner's too). Every one of them is idempotent and redone when lost: a mark or an ack a
power cut takes back (WAL, NORMAL: the last commits since the file was last synced) means
the rows are sent again and the hub answers ``duplicate``. Appends stay FULL; and a FULL
commit syncs the WAL frames before it, so a later append makes earlier marks durable too.
See docs/relay.md (durability)."""

_ROW_COLUMNS = (
    "o.seq, o.run_id, o.sequence, p.sync_event, o.content_hash, o.attempts, o.event_type, "
    "p.traceparent"
)
# The pending row first, then its bytes by integer primary key: CROSS JOIN keeps SQLite from
# choosing another loop order, so the partial index drives the walk.
_ROWS_FROM = "outbox AS o INDEXED BY {index} CROSS JOIN outbox_payloads AS p ON p.seq = o.seq"
_O_PENDING = "o.acked_at IS NULL AND o.outcome IS NULL"
_PENDING = "acked_at IS NULL AND outcome IS NULL"


def _over_pending(c: sqlite3.Connection, aggregate: str) -> tuple[Any, Any]:
    """``aggregate`` (an SQL expression) over the never-attempted and over the attempted pending
    rows: two queries, so that each walks its own partial index."""
    unsent = c.execute(
        f"SELECT {aggregate} FROM outbox INDEXED BY outbox_unsent WHERE attempts = 0 AND {_PENDING}"
    ).fetchone()[0]
    attempted = c.execute(
        f"SELECT {aggregate} FROM outbox INDEXED BY outbox_resend WHERE attempts > 0 AND {_PENDING}"
    ).fetchone()[0]
    return unsent, attempted


def _rows(cursor: sqlite3.Cursor) -> list[OutboxRow]:
    return list(map(OutboxRow._make, cursor.fetchall()))


class OutboxQueries:
    """The relay-facing outbox API of ``RunEventStore`` (``self._db`` is its file)."""

    _db: Database

    def data_version(self) -> int:
        """``PRAGMA data_version``: changes whenever ANOTHER connection commits to the file."""
        return int(self._db.read(lambda c: c.execute("PRAGMA data_version").fetchone()[0]))

    def unsent(self, after_seq: int, limit: int) -> list[OutboxRow]:
        """Never-attempted rows without outcome after ``after_seq``, in outbox order."""
        return self._db.read(
            lambda c: _rows(
                c.execute(
                    f"SELECT {_ROW_COLUMNS} FROM {_ROWS_FROM.format(index='outbox_unsent')} "
                    f"WHERE o.attempts = 0 AND {_O_PENDING} AND o.seq > ? ORDER BY o.seq LIMIT ?",
                    (after_seq, limit),
                )
            )
        )

    def due_resends(self, now: float, limit: int) -> list[OutboxRow]:
        """Attempted, unacked rows without outcome whose resend time has come, in seq order."""
        return self._db.read(
            lambda c: _rows(
                c.execute(
                    f"SELECT {_ROW_COLUMNS} FROM {_ROWS_FROM.format(index='outbox_resend')} "
                    f"WHERE o.attempts > 0 AND {_O_PENDING} AND o.next_attempt_at <= ? "
                    "ORDER BY o.seq LIMIT ?",
                    (now, limit),
                )
            )
        )

    def mark_attempted(
        self, seqs: Sequence[int], now: float, base_timeout: float, cap: float
    ) -> None:
        """Record a send: attempts + 1, resend due after ``min(cap, base * 2**attempts_before)``."""
        ranges = list(seq_ranges(seqs))
        if not ranges:
            return
        # attempts is clamped before the shift so a row resent forever cannot overflow.
        sql = (
            "UPDATE outbox SET attempts = attempts + 1, attempted_at = ?, "
            "next_attempt_at = ? + MIN(?, ? * (1 << MIN(attempts, 40))) "
            f"WHERE seq BETWEEN ? AND ? AND {_PENDING}"
        )
        params = [(now, now, float(cap), float(base_timeout), a, b) for a, b in ranges]
        self._db.write(lambda c: c.executemany(sql, params))

    def apply_outcomes(
        self,
        outcomes: Sequence[OutcomeRecord],
        now: float,
        position: tuple[str, str] | None = None,
    ) -> OutcomeApplication:
        """Apply hub outcomes, as parsed from the acks stream, in one transaction.

        The caller has matched each record's ``project_id`` to this store; each
        names its row by ``(run_id, sequence)``. Only rows whose own hash is
        named and that are not acked yet change; ``position`` (name, value) is
        saved to ``relay_state`` in the same transaction, so a crash can never
        apply the same ack entry twice differently nor lose one.
        """

        def apply(c: sqlite3.Connection) -> OutcomeApplication:
            spans = acking_spans(outcomes, now)
            if spans is None:
                result = apply_one_by_one(c, outcomes, now)
            else:
                result = ack_spans(c, spans, outcomes)
            if position is not None:
                _save_position(c, *position)
            return result

        return self._db.write(apply)

    def mark_acked(self, seqs: Sequence[int], now: float) -> int:
        """Ack rows by outbox seq; returns how many were newly acked."""
        return self.mark_outcome(seqs, Outcome.ACCEPTED, None, now)

    def mark_rejected(self, seqs: Sequence[int], reason: str, now: float) -> None:
        """Park rows as ``rejected`` locally (e.g. too large to send); never resent."""
        self.mark_outcome(seqs, Outcome.REJECTED, reason, now)

    def mark_outcome(
        self, seqs: Sequence[int], outcome: str, reason: str | None, now: float
    ) -> int:
        """Set an outcome on unacked rows by outbox seq; returns how many rows changed."""
        verdict = _outcome(outcome)
        ranges = list(seq_ranges(seqs))
        params: list[tuple[object, ...]]
        if verdict in ACKING:
            sql = (
                "UPDATE outbox SET acked_at = ?, outcome = ?, outcome_reason = ?, outcome_at = ? "
                "WHERE seq BETWEEN ? AND ? AND acked_at IS NULL"
            )
            params = [(now, verdict.value, reason, now, a, b) for a, b in ranges]
        else:
            sql = (
                "UPDATE outbox SET outcome = ?, outcome_reason = ?, outcome_at = ? "
                "WHERE seq BETWEEN ? AND ? AND acked_at IS NULL"
            )
            params = [(verdict.value, reason, now, a, b) for a, b in ranges]
        if not params:
            return 0
        return self._db.write(lambda c: c.executemany(sql, params).rowcount)

    def relay_position(self, name: str) -> str | None:
        """A value the relay saved with ``set_relay_position`` (or ``apply_outcomes``)."""
        row = self._db.read(
            lambda c: c.execute("SELECT value FROM relay_state WHERE name = ?", (name,)).fetchone()
        )
        return None if row is None else str(row[0])

    def set_relay_position(self, name: str, value: str) -> None:
        """Save a relay position (e.g. the ack stream's last read id)."""
        self._db.write(lambda c: _save_position(c, name, value))

    def pending_count(self) -> int:
        """Rows not yet acknowledged, sent or not: ``outbox_counts()["pending"]`` alone, from
        the two partial indexes (the relay's backlog, read every few seconds)."""
        unsent, attempted = self._db.read(lambda c: _over_pending(c, "count(*)"))
        return int(unsent) + int(attempted)

    def outbox_counts(self) -> dict[str, int]:
        """Rows by state: pending (attempted or not), attempted, acked, conflict, rejected, total."""

        def count(c: sqlite3.Connection) -> tuple[int, int, dict[str, int], int]:
            unsent, attempted = _over_pending(c, "count(*)")
            parked = dict(
                c.execute(
                    "SELECT outcome, count(*) FROM outbox INDEXED BY outbox_parked "
                    "WHERE acked_at IS NULL AND outcome IS NOT NULL GROUP BY outcome"
                ).fetchall()
            )
            total = c.execute("SELECT count(*) FROM outbox").fetchone()[0]
            return int(unsent), int(attempted), parked, int(total)

        unsent, attempted, parked, total = self._db.read(count)
        pending = unsent + attempted
        conflict = parked.get("conflict", 0)
        rejected = parked.get("rejected", 0)
        return {
            "pending": pending,
            "attempted": attempted,
            "acked": total - pending - conflict - rejected,
            "conflict": conflict,
            "rejected": rejected,
            "total": total,
        }

    def oldest_pending_age(self, now: float) -> float | None:
        """Seconds since the oldest pending row was committed, or None with nothing pending."""

        def oldest(c: sqlite3.Connection) -> float | None:
            first_unsent, first_attempted = _over_pending(c, "min(seq)")
            seqs = [s for s in (first_unsent, first_attempted) if s is not None]
            if not seqs:
                return None
            row = c.execute("SELECT created_at FROM outbox WHERE seq = ?", (min(seqs),))
            return float(row.fetchone()[0])

        created = self._db.read(oldest)
        return None if created is None else max(0.0, now - created)

    def traceparents(self, rows: Sequence[tuple[str, int]]) -> list[str]:
        """The trace contexts kept with the rows ``(run_id, sequence)`` that have one (the
        relay's ack span links to them; asked only while tracing)."""

        def read(c: sqlite3.Connection) -> list[str]:
            found = []
            for run_id, sequence in rows:
                row = c.execute(
                    "SELECT p.traceparent FROM outbox AS o "
                    "JOIN outbox_payloads AS p ON p.seq = o.seq "
                    "WHERE o.run_id = ? AND o.sequence = ? AND p.traceparent IS NOT NULL",
                    (run_id, sequence),
                ).fetchone()
                if row is not None:
                    found.append(row[0])
            return found

        return self._db.read(read)

    def outbox_for_run(self, run_id: str) -> list[OutboxEntry]:
        """Every outbox row of one run, in sequence order."""
        return self._db.read(
            lambda c: [
                OutboxEntry(*row)
                for row in c.execute(
                    "SELECT o.seq, o.run_id, o.sequence, p.sync_event, o.content_hash, "
                    "o.created_at, o.attempts, o.attempted_at, o.next_attempt_at, o.acked_at, "
                    "o.outcome, o.outcome_reason, o.event_type FROM outbox AS o "
                    "JOIN outbox_payloads AS p ON p.seq = o.seq "
                    "WHERE o.run_id = ? ORDER BY o.sequence",
                    (run_id,),
                ).fetchall()
            ]
        )


def _outcome(value: str) -> Outcome:
    try:
        return Outcome(value)
    except ValueError:
        raise ProducerError(
            f"unknown outcome {str(value)[:40]!r}; expected accepted, duplicate, conflict or "
            "rejected"
        ) from None


def _save_position(c: sqlite3.Connection, name: str, value: str) -> None:
    c.execute(
        "INSERT INTO relay_state (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (name, value),
    )
