"""A project's run event store: local events and their outbox, in one SQLite file.

``append_event`` gives an event the next sequence of its run and writes, in
ONE transaction, the local event row, the outbox row and its bytes (the
derived, allowlisted, redacted, hashed sync event, in ``outbox_payloads``).
Either all of them commit or none does; if derivation, redaction or the size
check fails, nothing is written.

No secret is written anywhere: the local ``run_events`` row keeps the full
payload, but redacted (the allowlist applies only to what crosses to the hub).
The environment's secrets are registered when the store opens, before any
append can happen.

Several processes may append to one store at once: writes take the lock up
front (``BEGIN IMMEDIATE``) and retry while the file is busy, so "database is
locked" never reaches the caller. One ``RunEventStore`` object may be shared
by the threads of a process; the relay uses its own object.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from hubsync.core.closing import ClosesOnExit
from hubsync.core.entries import Outcome
from hubsync.core.errors import ConfigError
from hubsync.core.resync import ResyncRequest
from hubsync.core.sqlite import (
    DEFAULT_BUSY_BUDGET,
    DEFAULT_BUSY_TIMEOUT,
    Database,
    Migration,
    split_statements,
)
from hubsync.core.tracing import current_traceparent
from producers.derivation import Allowlist, EventDeriver, PreparedEvent, StoreIdentity
from producers.errors import RebindError, StoreClosedError
from producers.redaction import Redactor
from producers.store import resync_rows
from producers.store.late_secrets import SECRET_IN_ID, scrub_late_secret
from producers.store.outbox import (
    OUTBOX_DDL,
    PAYLOADS_DDL,
    OutboxEntry,
    OutboxQueries,
    OutboxRow,
)
from producers.store.outbox_outcomes import OutcomeApplication
from producers.store.outbox_retry import RetryCounts, retry_parked
from producers.store.resync_rows import ResyncProgress
from producers.store.retention import RetentionQueries

EVENT_STORE_SCHEMA_VERSION = 3
"""``PRAGMA user_version`` of event store files: an older file is migrated at open (after a
backup), a newer one refused."""

_PAYLOADS_DDL_V2 = """
CREATE TABLE outbox_payloads (
  seq INTEGER PRIMARY KEY,
  sync_event BLOB NOT NULL
);
"""
"""``outbox_payloads`` as version 2 made it (the step from version 1 creates it as then)."""

EVENT_STORE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        from_version=1,
        summary="move the outbox rows' bytes (outbox.sync_event) to their own table, "
        "outbox_payloads, keyed by seq: acking a row no longer rewrites its bytes",
        change=(
            *split_statements(_PAYLOADS_DDL_V2),
            "INSERT INTO outbox_payloads (seq, sync_event) SELECT seq, sync_event FROM outbox",
            # The column is in no index, so SQLite drops it in place (rewriting each row
            # without it): the table keeps its indexes and its AUTOINCREMENT counter.
            "ALTER TABLE outbox DROP COLUMN sync_event",
        ),
    ),
    Migration(
        from_version=2,
        summary="keep the appending caller's trace context beside each outbox row's bytes "
        "(outbox_payloads.traceparent, NULL for the rows already there)",
        # ADD COLUMN with no default rewrites nothing: old records read the column as NULL.
        change=("ALTER TABLE outbox_payloads ADD COLUMN traceparent TEXT",),
    ),
)
"""Version N -> N+1 steps, oldest first (``hubsync.core.sqlite.Migration``)."""

RUN_EVENTS_DDL = """
CREATE TABLE run_events (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  event_type TEXT NOT NULL,
  occurred_at TEXT NOT NULL,
  recorded_at REAL NOT NULL,
  payload TEXT NOT NULL,
  UNIQUE (run_id, sequence)
);
"""
"""The local events table (one statement; ``scripts/bench_append.py`` times bare inserts
into the same table)."""

EVENT_STORE_DDL = (
    """
CREATE TABLE store_meta (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
"""
    + RUN_EVENTS_DDL
    + OUTBOX_DDL
    + PAYLOADS_DDL
)

_IDENTITY_FIELDS = ("project_id", "hub_project", "home_runtime_id")

log = logging.getLogger(__name__)


class NewEvent(NamedTuple):
    """One event for ``append_events``."""

    run_id: str
    event_type: str
    payload: Mapping[str, Any]
    occurred_at: datetime | str | None = None


@dataclass(frozen=True, slots=True)
class AppendedEvent:
    """Where an appended event landed."""

    run_id: str
    sequence: int
    content_hash: str
    outbox_seq: int


@dataclass(frozen=True, slots=True)
class RunEvent:
    """A local event as stored (payload redacted, as JSON text)."""

    run_id: str
    sequence: int
    event_type: str
    occurred_at: str
    recorded_at: float
    payload: str


class RunEventStore(ClosesOnExit, OutboxQueries, RetentionQueries):
    """The event store and outbox of one project (see the module docstring)."""

    def __init__(
        self,
        path: Path | str,
        identity: StoreIdentity | None = None,
        *,
        redactor: Redactor | None = None,
        allowlist: Allowlist | None = None,
        environ: Mapping[str, str] | None = None,
        project_root: Path | str | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        busy_budget: float = DEFAULT_BUSY_BUDGET,
        synchronous: str = "FULL",
    ) -> None:
        """Open (creating if needed) the store at ``path``.

        ``identity`` binds a new file; an existing file must carry the same one
        (``RebindError`` otherwise), or pass None to adopt the recorded one.
        ``environ`` (default ``os.environ``) is scanned for secrets now.
        ``project_root`` is the project's directory: absolute paths in payloads are
        made relative to it, or replaced when outside it (docs/redaction.md). It
        belongs to the redactor, so it is refused with a ``redactor`` of your own:
        make that one with ``Redactor(project_root=...)``.
        ``synchronous`` is SQLite's durability level: FULL (the default) makes a
        returned append survive power loss; NORMAL survives a process crash only
        (a power cut may undo the last commits, event and outbox row together)
        and appends several times faster.
        """
        self.path = Path(path)
        # Secrets first: nothing can be appended before the environment's are known.
        if redactor is not None and project_root is not None:
            raise ConfigError(
                "pass project_root to the shared Redactor (Redactor(project_root=...)), "
                "not to the store"
            )
        self.redactor = redactor if redactor is not None else Redactor(project_root=project_root)
        self.redactor.register_environment(environ)
        self.allowlist = allowlist if allowlist is not None else Allowlist()
        self._db = Database(
            self.path,
            busy_timeout=busy_timeout,
            busy_budget=busy_budget,
            synchronous=synchronous,
        )
        try:
            self._db.ensure_schema(
                EVENT_STORE_SCHEMA_VERSION,
                split_statements(EVENT_STORE_DDL),
                "hubsync event store",
                EVENT_STORE_MIGRATIONS,
            )
            bound = self._bind(identity)
        except BaseException:
            self._db.close()
            raise
        self.identity = bound
        self.project_id = bound.project_id
        self.hub_project = bound.hub_project
        self.home_runtime_id = bound.home_runtime_id
        self._deriver = EventDeriver(bound, self.allowlist, self.redactor)
        # A secret registered from now on is also scrubbed from what is stored already.
        self._unsubscribe = self.redactor.on_register(self._scrub_late_secret)

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._unsubscribe()
        self._db.close()

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._db.closed

    def append_event(
        self,
        run_id: str,
        event_type: str,
        payload: Mapping[str, Any],
        occurred_at: datetime | str | None = None,
    ) -> AppendedEvent:
        """Append one event to its run; event row and outbox row commit together.

        The outbox row keeps the caller's current trace context, if any
        (``hubsync.core.tracing.current_traceparent``)."""
        args = NewEvent(run_id, event_type, payload, occurred_at)
        known = self.redactor.secret_count
        prepared = self._deriver.prepare(*args)
        traced = current_traceparent()
        self._check_open()
        return self._db.write(
            lambda c: self._insert(c, self._current(prepared, args, known), None, traced)
        )

    def append_events(self, items: Iterable[NewEvent | tuple[Any, ...]]) -> list[AppendedEvent]:
        """Append many events in ONE transaction (all or nothing), in the order given; each
        outbox row keeps the caller's current trace context, if any."""
        events = [NewEvent(*item) for item in items]
        known = self.redactor.secret_count
        prepared = [self._deriver.prepare(*event) for event in events]
        if not prepared:
            return []
        traced = current_traceparent()
        self._check_open()

        def insert_all(c: sqlite3.Connection) -> list[AppendedEvent]:
            next_sequence: dict[str, int] = {}
            return [
                self._insert(c, self._current(p, event, known), next_sequence, traced)
                for p, event in zip(prepared, events, strict=True)
            ]

        return self._db.write(insert_all)

    def _current(self, prepared: PreparedEvent, event: NewEvent, known: int) -> PreparedEvent:
        # Called under the write lock. A secret registered since `prepared` was made
        # is being scrubbed by another thread, which may have walked past the place
        # this row is about to take: prepare it again with that secret known.
        if self.redactor.secret_count == known:
            return prepared
        return self._deriver.prepare(*event)

    def retry_parked(
        self, now: float, *, run_id: str | None = None, outcome: Outcome | None = None
    ) -> RetryCounts:
        """Put parked rows (of one run, of one outcome) back to pending, due for a resend at
        ``now``; rows whose bytes hold a secret this store's redactor knows stay parked
        (``producers.store.outbox_retry``)."""
        self._check_open()
        return retry_parked(self._db, self.redactor, now, run_id=run_id, outcome=outcome)

    def apply_resync(self, request: ResyncRequest, now: float) -> bool:
        """Apply one part of a verified resync request; False when it was applied before
        (``producers.store.resync_rows``)."""
        self._check_open()
        return resync_rows.apply_resync(self._db, self._deriver, request, now)

    def resync_progress(self) -> list[ResyncProgress]:
        """The resync requests this store applied that the hub has not finished judging."""
        return resync_rows.resync_progress(self._db)

    def close_resync(self, request_id: str) -> None:
        """Remember that the hub judged every row ``request_id`` put back."""
        resync_rows.close_resync(self._db, request_id)

    def resync_floor(self) -> int | None:
        """The lowest outbox seq an open resync request put back (retention keeps it)."""
        return resync_rows.resync_floor(self._db)

    def _scrub_late_secret(self, value: str) -> None:
        if self._db.closed:
            return
        result = scrub_late_secret(self._db, self._deriver, value)
        if result.run_events or result.outbox_rows or result.parked:
            log.info(
                "a newly registered secret was scrubbed from %s: %d local events, %d unsent "
                "outbox rows derived again, %d parked as %s (rows already sent keep it)",
                self.path,
                result.run_events,
                result.outbox_rows,
                result.parked,
                SECRET_IN_ID,
            )

    def _insert(
        self,
        c: sqlite3.Connection,
        event: PreparedEvent,
        next_sequence: dict[str, int] | None,
        traceparent: str | None,
    ) -> AppendedEvent:
        run_id = event.run_id
        now = time.time()
        sequence = next_sequence.get(run_id) if next_sequence is not None else None
        if sequence is None:
            # The next sequence is computed inside the INSERT: one statement, under
            # the write lock taken by BEGIN IMMEDIATE, so two writers cannot pick it twice.
            sequence = c.execute(
                "INSERT INTO run_events (run_id, sequence, event_type, occurred_at, recorded_at, "
                "payload) SELECT ?, coalesce(max(sequence), 0) + 1, ?, ?, ?, ? FROM run_events "
                "WHERE run_id = ? RETURNING sequence",
                (run_id, event.event_type, event.occurred_at, now, event.local_json, run_id),
            ).fetchall()[0][0]
        else:
            c.execute(
                "INSERT INTO run_events (run_id, sequence, event_type, occurred_at, recorded_at, "
                "payload) VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, sequence, event.event_type, event.occurred_at, now, event.local_json),
            )
        # Encoded inside the transaction: the sequence is part of the hashed bytes. A
        # failure here rolls the event row back with everything else.
        data, digest = self._deriver.encode(event, sequence)
        outbox_seq = c.execute(
            "INSERT INTO outbox (run_id, sequence, event_type, content_hash, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (run_id, sequence, event.event_type, digest, now),
        ).lastrowid
        c.execute(
            "INSERT INTO outbox_payloads (seq, sync_event, traceparent) VALUES (?, ?, ?)",
            (outbox_seq, data, traceparent),
        )
        if next_sequence is not None:
            next_sequence[run_id] = sequence + 1
        assert outbox_seq is not None  # an INSERT into a rowid table always has one
        return AppendedEvent(run_id, sequence, digest, outbox_seq)

    def events(self, run_id: str, after_sequence: int = 0, limit: int = 1000) -> list[RunEvent]:
        """Local events of a run after ``after_sequence``, in sequence order."""
        return self._db.read(
            lambda c: [
                RunEvent(*row)
                for row in c.execute(
                    "SELECT run_id, sequence, event_type, occurred_at, recorded_at, payload "
                    "FROM run_events WHERE run_id = ? AND sequence > ? ORDER BY sequence LIMIT ?",
                    (run_id, after_sequence, limit),
                ).fetchall()
            ]
        )

    def run_ids(self) -> list[str]:
        """Every run with at least one event, sorted."""
        return self._db.read(
            lambda c: [
                r[0] for r in c.execute("SELECT DISTINCT run_id FROM run_events ORDER BY run_id")
            ]
        )

    def last_sequence(self, run_id: str) -> int:
        """The highest sequence of a run (0 when it has no event)."""
        return int(
            self._db.read(
                lambda c: c.execute(
                    "SELECT coalesce(max(sequence), 0) FROM run_events WHERE run_id = ?",
                    (run_id,),
                ).fetchone()[0]
            )
        )

    def _check_open(self) -> None:
        if self._db.closed:
            raise StoreClosedError(f"the event store {self.path} is closed; open it again")

    def _bind(self, identity: StoreIdentity | None) -> StoreIdentity:
        found = self._recorded_identity()
        if found is None:
            if identity is None:
                raise RebindError(
                    f"{self.path} is a new event store: give its project identity to create it"
                )

            def record(c: sqlite3.Connection) -> None:
                c.executemany(
                    "INSERT OR IGNORE INTO store_meta (name, value) VALUES (?, ?)",
                    [(name, getattr(identity, name)) for name in _IDENTITY_FIELDS],
                )

            self._db.write(record)
            # Another process may have bound the file first; what is recorded decides.
            found = self._recorded_identity()
            assert found is not None
        if identity is not None and identity != found:
            raise RebindError(
                f"{self.path} belongs to project {found.project_id} (hub project "
                f"{found.hub_project}, home runtime {found.home_runtime_id}); refusing "
                f"to open it as project {identity.project_id} (hub project "
                f"{identity.hub_project}, home runtime {identity.home_runtime_id})"
            )
        return found

    def _recorded_identity(self) -> StoreIdentity | None:
        recorded = dict(
            self._db.read(lambda c: c.execute("SELECT name, value FROM store_meta").fetchall())
        )
        if not all(name in recorded for name in _IDENTITY_FIELDS):
            return None
        return StoreIdentity(*(recorded[name] for name in _IDENTITY_FIELDS))


def open_store_file(path: Path | str, **options: Any) -> RunEventStore:
    """Open an existing store, adopting the identity recorded in it."""
    return RunEventStore(path, None, **options)


__all__ = [
    "EVENT_STORE_SCHEMA_VERSION",
    "AppendedEvent",
    "NewEvent",
    "OutboxEntry",
    "OutboxRow",
    "OutcomeApplication",
    "RunEvent",
    "RunEventStore",
    "open_store_file",
]
