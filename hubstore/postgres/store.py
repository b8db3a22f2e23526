"""``PostgresHubStore``: the hub store in a PostgreSQL database, shared by consumers on any host.

``postgresql://user[:password]@host[:port]/database[?parameters]`` (or
``postgres://``) selects it; the parameters are libpq's plus ``pool_size``
(``postgres_connection``). The tables are SQLite's, typed for PostgreSQL
(``postgres_schema``); the statements are in ``postgres_sql``.

Opening never creates or upgrades the schema unless asked:
``migrate_hub_store`` (``hubsync hub migrate``) does, with a role allowed to
create tables; the consumers may then run as a role that may only read and
write rows. A missing or older schema is refused with a ``SchemaVersionError``
naming the command to run.

Ingest is set-based and decided by the same ``hubstore.decide`` as every
backend, in one transaction per batch, and stays right when consumers on
several hosts ingest overlapping batches at the same moment. It does not
trust what it read under READ COMMITTED: it reads what the database holds for
the batch's keys, projects and runs, decides, then inserts the new projects,
runs and events with ``INSERT ... ON CONFLICT DO NOTHING``, sorted by key, and
counts what was inserted. The primary keys let one writer alone insert a key:
a second writer of the same key waits for the first to commit, then inserts
nothing. Fewer rows inserted than decided means another writer committed one
of these keys since the read; the transaction is rolled back and the batch
read and judged again, now against the rows that won. So each key is accepted
exactly once, and every later copy of it is a duplicate or a recorded conflict
(the same goes for a project's hub project and a run's home runtime). Rows of
these three tables are never updated or deleted, so nothing read can change
under the decision except by such an insert, which the count catches.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from hubstore.decide import Conflict, Known, decide, warn_conflicts
from hubstore.enrollments import enrolled, revoked
from hubstore.errors import HubNotInitializedError
from hubstore.postgres import sql
from hubstore.postgres.connection import (
    DEFAULT_BUSY_BUDGET,
    Connection,
    LostRace,
    PostgresDatabase,
    PostgresTarget,
    connect,
    database_errors,
    in_schema,
    postgres_target,
)
from hubstore.postgres.schema import SCHEMA_VERSION, check_schema, ensure_schema
from hubstore.store import (
    DEFAULT_ROTATION_GRACE,
    DEFAULT_STALE_AFTER,
    AlertRecord,
    EnrolledRuntime,
    EventPosition,
    HubStore,
    PresenceRecord,
    PurgeResult,
    RunPosition,
    RunSummary,
    RuntimeState,
    SecurityAlert,
    StoredEvent,
)
from hubsync.core.clock import format_timestamp, utc_now
from hubsync.core.enrollment import Enrollment, new_hub_id
from hubsync.core.entries import EventEntry, OutcomeRecord, PresenceBeat, alert_reason
from hubsync.core.migration import SchemaChange

__all__ = [
    "PostgresHubStore",
    "how_to_migrate",
    "migrate_hub_store",
    "open_hub_store",
    "scratch_schema",
]


def how_to_migrate(target: PostgresTarget) -> str:
    """What an operator runs to create or upgrade the schema of the store ``target`` names."""
    password = " (with the real password)" if ":***@" in target.shown else ""
    return (
        f"run `hubsync hub migrate --hub-url {shlex.quote(target.shown)}`{password} as a role "
        "allowed to create tables; it creates or upgrades the schema"
    )


@dataclass(frozen=True, slots=True)
class _Ingested:
    outcomes: list[OutcomeRecord]
    conflicts: list[Conflict]


class PostgresHubStore(HubStore):
    """The hub store in a PostgreSQL database (see the module docstring).

    ``create_schema`` creates the schema when missing and upgrades an older
    one; False opens a store at the current schema version only.
    ``schema_change`` says what opening did to the schema. ``busy_budget`` is
    how long one operation keeps retrying deadlocks and serialization failures
    before ``StoreBusyError``. One store may be shared by the threads of a
    process: each operation takes a connection of the pool.
    """

    def __init__(
        self,
        url: str,
        *,
        create_schema: bool = True,
        busy_budget: float = DEFAULT_BUSY_BUDGET,
    ) -> None:
        self.target = postgres_target(url)
        where = f"the hub store {self.target.shown}"
        with connect(self.target) as conn, database_errors(self.target):
            if create_schema:
                self.schema_change = ensure_schema(conn, where)
            else:
                check_schema(conn, where, how_to_migrate(self.target))
                self.schema_change = SchemaChange(SCHEMA_VERSION, SCHEMA_VERSION)
        self._db = PostgresDatabase(self.target, busy_budget=busy_budget)

    # ----- the contract -----

    def create_schema(self) -> None:
        """Create the schema if missing, or upgrade an older one (idempotent)."""
        where = f"the hub store {self.target.shown}"
        self._db.read(lambda conn: ensure_schema(conn, where))

    def ingest(self, batch: Sequence[EventEntry]) -> list[OutcomeRecord]:
        """Decide every event of ``batch`` in one transaction (see the module docstring)."""
        if not batch:
            return []
        lookup = lookup_arguments(batch)
        result = self._db.write_pipelined(lambda conn: _ingest(conn, batch, lookup))
        if result.conflicts:
            warn_conflicts(result.conflicts)
        return result.outcomes

    def sync_cursor(self, project_id: str, run_id: str) -> int:
        """The run's highest sequence with no gap below it."""
        args = (project_id, run_id, 1, project_id, run_id)
        return int(self._db.read(lambda conn: _one(conn, sql.CURSOR, args)))

    def gaps(self, project_id: str, run_id: str, limit: int = 1000) -> list[tuple[int, int]]:
        """Missing ranges ``(first, last)`` below the run's highest sequence."""
        rows = self._db.read(
            lambda conn: conn.execute(sql.GAPS, (project_id, run_id, limit)).fetchall()
        )
        return [(int(a), int(b)) for a, b in rows]

    def events(
        self,
        hub_project: str,
        run_id: str | None = None,
        after: EventPosition | None = None,
        limit: int = 1000,
        *,
        project_id: str | None = None,
    ) -> list[StoredEvent]:
        """Events of a hub project by run, project, then sequence, after ``after``."""
        where = ["hub_project = %s"]
        args: list[object] = [hub_project]
        for column, value in (("run_id", run_id), ("project_id", project_id)):
            if value is not None:
                where.append(f"{column} = %s")
                args.append(value)
        if after is not None:
            # A row comparison: an index seek on sync_events_by_position.
            where.append("(run_id, project_id, sequence) > (%s, %s, %s)")
            args.extend(after)
        statement = (
            f"SELECT {sql.EVENT_COLUMNS} FROM sync_events WHERE {' AND '.join(where)} "
            "ORDER BY run_id, project_id, sequence LIMIT %s"
        )
        args.append(limit)
        rows = self._db.read(lambda conn: conn.execute(statement, args).fetchall())
        return [
            StoredEvent(
                project_id=r[0],
                run_id=r[1],
                sequence=r[2],
                hub_project=r[3],
                home_runtime_id=r[4],
                event_type=r[5],
                content_hash=r[6],
                received_at=format_timestamp(r[7]),
                record=r[8].encode("utf-8"),
            )
            for r in rows
        ]

    def runs(
        self,
        hub_project: str,
        after: RunPosition | None = None,
        limit: int = 1000,
        *,
        project_id: str | None = None,
        gaps_per_run: int = 10,
    ) -> list[RunSummary]:
        """The runs of a hub project by run then project, after ``after``: one statement."""
        where = ["hub_project = %s"]
        args: list[object] = [hub_project]
        if project_id is not None:
            where.append("project_id = %s")
            args.append(project_id)
        if after is not None:
            where.append("(run_id, project_id) > (%s, %s)")
            args.extend(after)
        statement = sql.RUNS_PAGE.format(where=" AND ".join(where))
        args.extend((limit, gaps_per_run, gaps_per_run))
        rows = self._db.read(lambda conn: conn.execute(statement, args).fetchall())
        summaries = []
        for run, project, home, count, highest, last, first_gap, firsts, lasts in rows:
            gaps = tuple(zip(map(int, firsts or ()), map(int, lasts or ()), strict=True))
            summaries.append(
                RunSummary(
                    run_id=run,
                    project_id=project,
                    hub_project=hub_project,
                    home_runtime_id=home,
                    events=int(count),
                    highest_sequence=int(highest),
                    sync_cursor=int(highest) if first_gap is None else int(first_gap) - 1,
                    missing=int(highest) - int(count),
                    gaps=gaps,
                    last_received_at=format_timestamp(last),
                )
            )
        return summaries

    def count_events(
        self,
        hub_project: str | None = None,
        project_id: str | None = None,
        run_id: str | None = None,
    ) -> int:
        """How many events are stored, optionally filtered."""
        where, args = [], []
        for column, value in (
            ("hub_project", hub_project),
            ("project_id", project_id),
            ("run_id", run_id),
        ):
            if value is not None:
                where.append(f"{column} = %s")
                args.append(value)
        statement = "SELECT count(*) FROM sync_events" + (
            f" WHERE {' AND '.join(where)}" if where else ""
        )
        return int(self._db.read(lambda conn: _one(conn, statement, args)))

    def record_presence(self, beats: Sequence[PresenceBeat]) -> None:
        """Upsert each beat's runtime presence, stamped with the hub's clock."""
        if not beats:
            return
        # The latest beat of each runtime, in key order (one upsert cannot touch a row twice).
        latest = {(b.hub_project, b.runtime_id): b for b in beats}
        ordered = [latest[key] for key in sorted(latest)]
        args = (
            utc_now(),
            [b.runtime_id for b in ordered],
            [b.hub_project for b in ordered],
            [b.host for b in ordered],
            [b.record().decode("utf-8") for b in ordered],
        )
        self._db.write(lambda conn: conn.execute(sql.UPSERT_PRESENCE, args))

    def presence(
        self,
        hub_project: str | None = None,
        stale_after: timedelta = DEFAULT_STALE_AFTER,
        now: datetime | None = None,
    ) -> list[PresenceRecord]:
        """Known runtimes, each flagged stale when not heard from within ``stale_after``."""
        statement = "SELECT runtime_id, hub_project, host, heartbeat, record FROM runtime_presence"
        args: list[object] = []
        if hub_project is not None:
            statement += " WHERE hub_project = %s"
            args.append(hub_project)
        statement += " ORDER BY hub_project, runtime_id"
        rows = self._db.read(lambda conn: conn.execute(statement, args).fetchall())
        cutoff = (now or utc_now()) - stale_after
        return [
            PresenceRecord(
                runtime_id=r[0],
                hub_project=r[1],
                host=r[2],
                heartbeat=format_timestamp(r[3]),
                beat=PresenceBeat(**orjson.loads(r[4])),
                stale=r[3] < cutoff,
            )
            for r in rows
        ]

    def record_security_alerts(self, alerts: Sequence[SecurityAlert]) -> None:
        """Keep alerts about entries that did not authenticate (one transaction)."""
        if not alerts:
            return
        rows = [
            (
                a.reason.value,
                a.hub_project,
                a.runtime_id,
                a.project_id,
                a.run_id,
                a.sequence,
                None,
                a.offered_hash,
                a.detail,
            )
            for a in alerts
        ]
        args = _alert_arguments(rows, utc_now())
        self._db.write(lambda conn: conn.execute(sql.UPSERT_ALERTS, args))

    def alerts(self, hub_project: str | None = None, limit: int = 100) -> list[AlertRecord]:
        """Recorded alerts (conflicts and refused entries), newest first."""
        statement = f"SELECT {sql.ALERT_COLUMNS} FROM sync_alerts"
        args: list[object] = []
        if hub_project is not None:
            statement += " WHERE hub_project = %s"
            args.append(hub_project)
        statement += " ORDER BY alert_id DESC LIMIT %s"
        args.append(limit)
        rows = self._db.read(lambda conn: conn.execute(statement, args).fetchall())
        return [
            AlertRecord(
                alert_id=r[0],
                reason=alert_reason(r[1]),
                hub_project=r[2],
                runtime_id=r[3],
                project_id=r[4],
                run_id=r[5],
                sequence=r[6],
                existing_hash=r[7],
                offered_hash=r[8],
                detail=r[9],
                detected_at=format_timestamp(r[10]),
                last_detected_at=format_timestamp(r[11]),
                occurrences=r[12],
            )
            for r in rows
        ]

    def purge(self, retention: timedelta, now: datetime | None = None) -> PurgeResult:
        """Remove alerts and presence older than ``retention``; events stay."""
        cutoff = (now or utc_now()) - retention

        def work(conn: Connection) -> PurgeResult:
            alerts = conn.execute("DELETE FROM sync_alerts WHERE last_detected_at < %s", (cutoff,))
            presence = conn.execute("DELETE FROM runtime_presence WHERE heartbeat < %s", (cutoff,))
            return PurgeResult(alerts=alerts.rowcount, presence=presence.rowcount)

        return self._db.write(work)

    def init_hub(self) -> str:
        """This hub's id, made (``hub-<16 hex>``) and stored the first time only."""

        def work(conn: Connection) -> str:
            # A second init waits for the first to commit, then inserts nothing and
            # reads the first one's id: racing inits agree on one id.
            conn.execute(sql.INIT_HUB, (new_hub_id(), format_timestamp(utc_now())))
            return str(_one(conn, sql.HUB_ID, ()))

        return self._db.write(work)

    def hub_id(self) -> str | None:
        """This hub's id, or None before ``init_hub``."""
        return self._db.read(_hub_id)

    def enroll(
        self,
        runtime_id: str,
        hub_projects: Sequence[str],
        *,
        now: datetime | None = None,
        rotation_grace: timedelta = DEFAULT_ROTATION_GRACE,
    ) -> Enrollment:
        """Enroll or re-key ``runtime_id`` (see ``HubStore.enroll``), in one transaction."""
        moment = now or utc_now()

        def work(conn: Connection) -> Enrollment:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (sql.ENROLLMENT_LOCK,))
            hub_id = _hub_id(conn)
            if hub_id is None:
                raise HubNotInitializedError(
                    f"the hub store {self.target.shown} has no hub id yet; run `hubsync hub "
                    f"init --hub-url {shlex.quote(self.target.shown)}` first"
                )
            record = enrolled(
                _enrolled(conn, runtime_id), runtime_id, hub_projects, moment, rotation_grace
            )
            conn.execute(sql.UPSERT_ENROLLED, _enrolled_row(record))
            assert record.key is not None
            return Enrollment(hub_id, runtime_id, record.hub_projects, record.key)

        return self._db.write(work)

    def revoke(self, runtime_id: str, *, now: datetime | None = None) -> EnrolledRuntime:
        """Revoke ``runtime_id`` (see ``HubStore.revoke``), erasing its keys."""
        moment = now or utc_now()

        def work(conn: Connection) -> EnrolledRuntime:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (sql.ENROLLMENT_LOCK,))
            record = revoked(_enrolled(conn, runtime_id), runtime_id, moment)
            conn.execute(sql.UPSERT_ENROLLED, _enrolled_row(record))
            return record

        return self._db.write(work)

    def enrolled_runtime(self, runtime_id: str) -> EnrolledRuntime | None:
        """The enrollment of ``runtime_id``: one primary-key lookup."""
        return self._db.read(lambda conn: _enrolled(conn, runtime_id))

    def enrolled_runtimes(self) -> list[EnrolledRuntime]:
        """Every runtime ever enrolled, by runtime id."""
        statement = f"SELECT {sql.ENROLLED_COLUMNS} FROM enrolled_runtimes ORDER BY runtime_id"
        rows = self._db.read(lambda conn: conn.execute(statement).fetchall())
        return [_enrolled_record(row) for row in rows]

    def close(self) -> None:
        """Close the pool's connections (idempotent)."""
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()


# ----- ingest -----

Lookup = tuple[list[str], list[str], list[int], list[str], list[str], list[str]]


def lookup_arguments(batch: Sequence[EventEntry]) -> Lookup:
    """The arguments of ``sql.KNOWN``: the batch's distinct keys, projects and runs."""
    keys = sorted({e.key for e in batch})
    runs = sorted({(p, r) for p, r, _ in keys})
    return (
        [k[0] for k in keys],
        [k[1] for k in keys],
        [k[2] for k in keys],
        sorted({k[0] for k in keys}),
        [r[0] for r in runs],
        [r[1] for r in runs],
    )


def _ingest(conn: Connection, batch: Sequence[EventEntry], lookup: Lookup) -> _Ingested:
    """One attempt: read, decide, insert what was decided; ``LostRace`` if a key was taken."""
    known = Known()
    for kind, project, run, sequence, value in conn.execute(sql.KNOWN, lookup).fetchall():
        if kind == 0:
            known.hashes[(project, run, sequence)] = value
        elif kind == 1:
            known.project_owners[project] = value
        else:
            known.run_homes[(project, run)] = value
    decisions = decide(batch, known)
    now = utc_now()
    counted = []  # (cursor, rows it must have inserted); read once all are sent
    if decisions.new_projects:
        projects = sorted(decisions.new_projects.items())
        args: tuple[object, ...] = (now, [p for p, _ in projects], [h for _, h in projects])
        counted.append((conn.execute(sql.INSERT_PROJECTS, args), len(projects)))
    if decisions.new_runs:
        runs = sorted(decisions.new_runs.items())
        args = (now, [k[0] for k, _ in runs], [k[1] for k, _ in runs], [h for _, h in runs])
        counted.append((conn.execute(sql.INSERT_RUNS, args), len(runs)))
    if decisions.accepted:
        accepted = sorted(decisions.accepted, key=lambda e: e.key)
        args = (
            now,
            [e.event.project_id for e in accepted],
            [e.event.run_id for e in accepted],
            [e.event.sequence for e in accepted],
            [e.event.hub_project for e in accepted],
            [e.event.home_runtime_id for e in accepted],
            [e.event.event_type for e in accepted],
            [e.content_hash for e in accepted],
            [e.data.decode("utf-8") for e in accepted],
        )
        counted.append((conn.execute(sql.INSERT_EVENTS, args), len(accepted)))
    if decisions.conflicts:
        rows = [_conflict_row(c) for c in decisions.conflicts]
        conn.execute(sql.UPSERT_ALERTS, _alert_arguments(rows, now))
    for cursor, expected in counted:
        row = cursor.fetchone()
        if row is None or row[0] != expected:
            raise LostRace
    return _Ingested(decisions.outcomes, decisions.conflicts)


AlertRow = tuple[str, str, str, str, str, int, str | None, str, str]
"""reason, hub project, runtime, project, run, sequence, existing hash, offered hash, detail."""


def _conflict_row(c: Conflict) -> AlertRow:
    event = c.entry.event
    return (
        c.reason.value,
        event.hub_project,
        c.entry.runtime_id,
        event.project_id,
        event.run_id,
        event.sequence,
        c.existing_hash,
        c.entry.content_hash,
        c.detail,
    )


def _alert_arguments(rows: Sequence[AlertRow], now: datetime) -> tuple[object, ...]:
    """``sql.UPSERT_ALERTS``'s arguments: one row per distinct offence (key, reason, offered
    hash), the first of its kind, counted, in key order."""
    firsts: dict[tuple[str, str, int, str, str], AlertRow] = {}
    counts: dict[tuple[str, str, int, str, str], int] = {}
    for row in rows:
        key = (row[3], row[4], row[5], row[0], row[7])
        firsts.setdefault(key, row)
        counts[key] = counts.get(key, 0) + 1
    keys = sorted(firsts)
    columns = list(zip(*(firsts[k] for k in keys), strict=True))
    return (now, now, *(list(column) for column in columns), [counts[k] for k in keys])


# ----- small reads -----


def _one(conn: Connection, statement: str, args: Sequence[object]) -> Any:
    row = conn.execute(statement, args).fetchone()
    assert row is not None
    return row[0]


def _hub_id(conn: Connection) -> str | None:
    row = conn.execute(sql.HUB_ID).fetchone()
    return None if row is None else str(row[0])


def _enrolled(conn: Connection, runtime_id: str) -> EnrolledRuntime | None:
    row = conn.execute(sql.ENROLLED, (runtime_id,)).fetchone()
    return None if row is None else _enrolled_record(row)


def _enrolled_row(record: EnrolledRuntime) -> tuple[object, ...]:
    return (
        record.runtime_id,
        record.state.value,
        list(record.hub_projects),
        record.enrolled_at,
        record.rotated_at,
        record.revoked_at,
        record.previous_valid_until,
        record.key,
        record.previous_key,
    )


def _enrolled_record(row: Sequence[Any]) -> EnrolledRuntime:
    def moment(value: datetime | None) -> datetime | None:
        return None if value is None else value.astimezone(UTC)

    runtime_id, state, projects, enrolled_at, rotated, revoked_at, until, key, previous = row
    return EnrolledRuntime(
        runtime_id=str(runtime_id),
        state=RuntimeState(str(state)),
        hub_projects=tuple(projects),
        enrolled_at=enrolled_at.astimezone(UTC),
        rotated_at=moment(rotated),
        revoked_at=moment(revoked_at),
        previous_valid_until=moment(until),
        key=None if key is None else bytes(key),
        previous_key=None if previous is None else bytes(previous),
    )


# ----- the backend -----


def open_hub_store(url: str, *, create_schema: bool, busy_budget: float | None) -> HubStore:
    """The ``postgresql`` backend of ``hubstore.open_store``."""
    budget = DEFAULT_BUSY_BUDGET if busy_budget is None else busy_budget
    return PostgresHubStore(url, create_schema=create_schema, busy_budget=budget)


@contextmanager
def scratch_schema(url: str, prefix: str = "hubsync_scratch") -> Iterator[str]:
    """A hub URL whose tables go in a new, empty schema of ``url``'s database, dropped (with
    everything in it) on leaving; for benchmarks that need a fresh hub store each time. The
    role must be allowed to create schemas."""
    target = postgres_target(url)
    schema = f"{prefix}_{secrets.token_hex(4)}"
    with connect(target) as conn, database_errors(target):
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield in_schema(url, schema)
    finally:
        with connect(target) as conn, database_errors(target):
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def migrate_hub_store(url: str, *, busy_budget: float | None) -> SchemaChange:
    """The ``postgresql`` backend of ``hubstore.migrate_store``: create or upgrade, then close.

    Needs no pool: one connection of its own, one transaction.
    """
    target = postgres_target(url)
    with connect(target) as conn, database_errors(target):
        return ensure_schema(conn, f"the hub store {target.shown}")
