"""Retention of a project's event store: acked outbox rows, and optionally old runs.

Only acked rows ever go: a pending, attempted, conflict or rejected outbox row
(``acked_at IS NULL``) is never deleted, and a run's local events go only when
every outbox row of the run is acked. Each call does one bounded chunk in one
short write transaction, so an append never waits long on the write lock; the
caller (the relay's ``Pruner``) paces the chunks and checkpoints the WAL.

The outbox's ``acked_at`` and ``created_at`` are all it needs, and rows are
numbered in commit order (``seq``, ``run_events.id``), so the old rows sit at
the low end and a walk by rowid finds them first. ``seq`` is AUTOINCREMENT, so
a deleted number is never handed out again; a run's next sequence comes from
``run_events``, whose last row of each run is always kept (below).

The counts of what was pruned are kept in ``relay_state`` (``pruned_outbox_rows``,
``pruned_run_events``, ``pruned_at``) in the same transaction as the delete,
so ``hubsync status`` can show them without the relay.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from hubsync.core.sqlite import Database

PRUNED_OUTBOX_ROWS = "pruned_outbox_rows"
PRUNED_RUN_EVENTS = "pruned_run_events"
PRUNED_AT = "pruned_at"


@dataclass(frozen=True, slots=True)
class PruneStep:
    """What one chunk did: rows deleted, the last rowid it looked at, whether the walk is over."""

    deleted: int
    last: int
    done: bool


@dataclass(frozen=True, slots=True)
class PruneTotals:
    """What pruning has removed from one store since it was created."""

    outbox_rows: int
    run_events: int
    pruned_at: float | None


# The rows that are not acked are exactly those of the three partial indexes
# (unsent, resend, parked); naming them keeps the lookup off the table itself.
_UNSETTLED_RUNS = (
    "SELECT run_id FROM outbox INDEXED BY outbox_unsent "
    "WHERE attempts = 0 AND acked_at IS NULL AND outcome IS NULL "
    "UNION SELECT run_id FROM outbox INDEXED BY outbox_resend "
    "WHERE attempts > 0 AND acked_at IS NULL AND outcome IS NULL "
    "UNION SELECT run_id FROM outbox INDEXED BY outbox_parked "
    "WHERE acked_at IS NULL AND outcome IS NOT NULL"
)

_ACKED_BEFORE = "acked_at IS NOT NULL AND acked_at < ?"


class RetentionQueries:
    """The pruning API of ``RunEventStore`` (``self._db`` is its file)."""

    _db: Database

    def prune_acked_outbox(
        self, after_seq: int, cutoff: float, limit: int, now: float, *, below: int | None = None
    ) -> PruneStep:
        """Delete the rows acked before ``cutoff`` among the ``limit`` rows after ``after_seq``.

        ``now`` stamps ``pruned_at``. Rows from seq ``below`` on are kept (a resync request
        still open counts its progress on them: ``resync_floor``).

        Bounded: the window is ``seq > ? ORDER BY seq LIMIT ?`` on the integer
        primary key (EXPLAIN QUERY PLAN: ``SEARCH outbox USING INTEGER PRIMARY
        KEY (rowid>?)``), so it visits at most ``limit`` rows whatever the table
        holds, and the DELETE is a rowid range inside that window (``SEARCH ...
        (rowid>? AND rowid<?)``). The walk is over when the window is short or
        reaches a row created at or after ``cutoff``: every later row was
        committed later still, so none of them can have been acked before it.
        The rows' bytes (``outbox_payloads``) go in the same transaction, by
        integer primary key (``SEARCH outbox_payloads USING INTEGER PRIMARY KEY
        (rowid=?)`` per row of the same window).
        """

        def prune(c: sqlite3.Connection) -> PruneStep:
            last, newest, count = c.execute(
                "SELECT max(seq), max(created_at), count(*) FROM "
                "(SELECT seq, created_at FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?)",
                (after_seq, limit),
            ).fetchone()
            if not count:
                return PruneStep(0, after_seq, True)
            held = below is not None and last >= below
            if held:  # the rest of the walk is kept for an open resync request
                last = below - 1  # type: ignore[operator]
                if last <= after_seq:
                    return PruneStep(0, after_seq, True)
            # The bytes first, of the very rows the next statement deletes (same window,
            # same condition, same transaction): no row outlives its bytes nor they it.
            c.execute(
                "DELETE FROM outbox_payloads WHERE seq IN (SELECT seq FROM outbox "
                f"WHERE seq > ? AND seq <= ? AND {_ACKED_BEFORE})",
                (after_seq, last, cutoff),
            )
            deleted = c.execute(
                f"DELETE FROM outbox WHERE seq > ? AND seq <= ? AND {_ACKED_BEFORE}",
                (after_seq, last, cutoff),
            ).rowcount
            _add_pruned(c, PRUNED_OUTBOX_ROWS, deleted, now)
            done = held or count < limit or float(newest) >= cutoff
            return PruneStep(deleted, int(last), done)

        return self._db.write(prune)

    def unsettled_runs(self) -> frozenset[str]:
        """Runs with an outbox row not yet acked: ``prune_old_runs`` leaves them alone.

        Read once per pruning pass, before any write lock: it costs as much as
        there are unacked rows (the partial indexes). Safe outside the chunks'
        transactions, since a row goes back from acked only for a resync request
        (keeping its bytes in the outbox), and a run appended to meanwhile has a
        recent last event, checked under the lock.
        """
        return frozenset(
            row[0] for row in self._db.read(lambda c: c.execute(_UNSETTLED_RUNS).fetchall())
        )

    def prune_old_runs(
        self, after_id: int, cutoff: float, limit: int, now: float, *, unsettled: frozenset[str]
    ) -> PruneStep:
        """Delete local events of fully acked runs whose last event is older than ``cutoff``.

        Looks at the runs of the ``limit`` ``run_events`` rows after ``after_id``
        (a rowid window, bounded as in ``prune_acked_outbox``) and deletes, per
        run, at most ``limit`` rows by the ``(run_id, sequence)`` index. A run
        qualifies when its last event (by sequence) was recorded before
        ``cutoff`` and none of its outbox rows is unacked. The run's last event
        is always kept: the next sequence of a run is computed from
        ``run_events``, so a run that resumes continues after it instead of
        reusing sequences the hub already holds. ``unsettled`` is
        ``unsettled_runs()``, read once for the whole pass, not per chunk.
        """

        def prune(c: sqlite3.Connection) -> PruneStep:
            window = c.execute(
                "SELECT id, run_id, recorded_at FROM run_events WHERE id > ? ORDER BY id LIMIT ?",
                (after_id, limit),
            ).fetchall()
            if not window:
                return PruneStep(0, after_id, True)
            deleted = 0
            for run_id in dict.fromkeys(row[1] for row in window):
                if run_id in unsettled:
                    continue
                last_sequence, last_recorded = c.execute(
                    "SELECT sequence, recorded_at FROM run_events WHERE run_id = ? "
                    "ORDER BY sequence DESC LIMIT 1",
                    (run_id,),
                ).fetchone()
                if last_recorded >= cutoff:
                    continue
                deleted += c.execute(
                    "DELETE FROM run_events WHERE id IN (SELECT id FROM run_events "
                    "WHERE run_id = ? AND sequence < ? ORDER BY sequence LIMIT ?)",
                    (run_id, last_sequence, limit),
                ).rowcount
            _add_pruned(c, PRUNED_RUN_EVENTS, deleted, now)
            newest = max(row[2] for row in window)
            return PruneStep(deleted, int(window[-1][0]), len(window) < limit or newest >= cutoff)

        return self._db.write(prune)

    def checkpoint(self) -> tuple[int, int]:
        """Copy the WAL back into the file without blocking anyone; (WAL frames, frames copied).

        PASSIVE, not TRUNCATE: TRUNCATE takes the write lock and waits for every
        reader to finish before it resets the log, so appends would stall behind
        it, which is what pruning in small chunks avoids. PASSIVE copies what no
        reader still needs and returns at once; the next writer then starts the
        log over from its beginning, so the -wal file stays at the size of the
        largest stretch written between checkpoints (about one chunk plus the
        appends meanwhile) instead of growing. The freed pages of the main file
        are reused by later appends, so the file stops growing (it does not
        shrink without a VACUUM, which would lock the file for its whole run).
        """
        row = self._db.read(lambda c: c.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
        return int(row[1]), int(row[2])

    def prune_totals(self) -> PruneTotals:
        """What pruning removed from this store so far (kept in ``relay_state``)."""
        values = dict(
            self._db.read(
                lambda c: c.execute(
                    "SELECT name, value FROM relay_state WHERE name IN (?, ?, ?)",
                    (PRUNED_OUTBOX_ROWS, PRUNED_RUN_EVENTS, PRUNED_AT),
                ).fetchall()
            )
        )
        at = values.get(PRUNED_AT)
        return PruneTotals(
            outbox_rows=int(values.get(PRUNED_OUTBOX_ROWS, 0)),
            run_events=int(values.get(PRUNED_RUN_EVENTS, 0)),
            pruned_at=None if at is None else float(at),
        )


def _add_pruned(c: sqlite3.Connection, name: str, deleted: int, now: float) -> None:
    if not deleted:
        return
    c.execute(
        "INSERT INTO relay_state (name, value) VALUES (?, ?) ON CONFLICT (name) "
        "DO UPDATE SET value = CAST(CAST(value AS INTEGER) + ? AS TEXT)",
        (name, str(deleted), deleted),
    )
    c.execute(
        "INSERT INTO relay_state (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (PRUNED_AT, repr(now)),
    )
