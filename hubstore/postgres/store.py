"""``PostgresHubStore``: the hub store in a PostgreSQL database, shared by consumers on any host.

``postgresql://user[:password]@host[:port]/database[?parameters]`` (or
``postgres://``) selects it; the parameters are libpq's plus ``pool_size``
(``connection``). The tables are SQLite's, typed for PostgreSQL
(``schema``). The reads and small writes are every SQL store's
(``hubstore.sql_store.SqlHubStore``, in the ``sql.POSTGRES`` dialect); ingest
and the other batch writes are this module's, their statements in ``sql``.

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
(the same goes for a project's hub project and runtime, and a run's home
runtime). Rows of these three tables are never deleted, and only a project
move updates any (a project's runtime and its runs' homes); every ingest holds
``sql.OWNERS_LOCK`` shared and a move holds it alone, so nothing read can
change under the decision except by an insert, which the count catches.

Two consumers given batches that share a run (a run's events straddle the batches they
read) would both find a new run new, both insert it, and the second would lose and judge
its whole batch again. So before its read an ingest takes a transaction lock on each run of
its batch (``sql.RUN_LOCK_CLASS``, ``run_lock``), in ascending order: batches that share a
run are judged one after the other, the second reading what the first committed, and
batches that share none run side by side. Every ingest takes ``OWNERS_LOCK`` first and then
its run locks in one order, and nothing else takes a run lock, so no cycle can form. A
batch of more than ``sql.MAX_RUN_LOCKS`` runs takes no run lock (it may race, and the count
catches it, as above). What can still lose a race otherwise is two batches that share no run
naming one new project (the first events of a project, sent from two runs at once): rare,
and caught by the count.
"""

from __future__ import annotations

import secrets
import shlex
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from hubstore import sql_statements as statements
from hubstore.decide import Conflict, Known, ProjectOwner, decide, warn_conflicts
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
from hubstore.sql_store import (
    AlertRow,
    SqlHubStore,
    conflict_row,
    no_hub_id,
    one,
    security_alert_row,
)
from hubstore.sql_store import Connection as SqlConnection
from hubstore.store import HubStore, SecurityAlert
from hubsync.core.clock import format_timestamp, utc_now
from hubsync.core.entries import EventEntry, OutcomeRecord, PresenceBeat
from hubsync.core.migration import SchemaChange

T = TypeVar("T")

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
    counter: int


class PostgresHubStore(SqlHubStore):
    """The hub store in a PostgreSQL database (see the module docstring).

    ``create_schema`` creates the schema when missing and upgrades an older
    one; False opens a store at the current schema version only.
    ``schema_change`` says what opening did to the schema. ``busy_budget`` is
    how long one operation keeps retrying deadlocks and serialization failures
    before ``StoreBusyError``. One store may be shared by the threads of a
    process: each operation takes a connection of the pool.
    """

    dialect = sql.POSTGRES

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
        self.committed = result.counter  # once committed: a rolled-back attempt raised nothing
        if result.conflicts:
            warn_conflicts(result.conflicts)
        return result.outcomes

    def sync_cursor(self, project_id: str, run_id: str) -> int:
        """The run's highest sequence with no gap below it."""
        args = (project_id, run_id, 1, project_id, run_id)
        return int(self._db.read(lambda conn: one(conn, sql.CURSOR, args)))

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

    def record_security_alerts(self, alerts: Sequence[SecurityAlert]) -> None:
        """Keep alerts about entries that did not authenticate (one transaction)."""
        if not alerts:
            return
        rows = [security_alert_row(a) for a in alerts]
        args = _alert_arguments(rows, utc_now(), _sender)
        self._db.write(lambda conn: conn.execute(sql.UPSERT_SECURITY_ALERTS, args))

    def close(self) -> None:
        """Close the pool's connections (idempotent)."""
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()

    # ----- what the shared SQL store asks of PostgreSQL -----

    def _read(self, work: Callable[[Connection], T]) -> T:
        return self._db.read(work)

    def _write(self, work: Callable[[Connection], T]) -> T:
        return self._db.write(work)

    def _lock_owners(self, conn: SqlConnection) -> None:
        # a move changes what an ingest may have read: none runs while it does
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (sql.OWNERS_LOCK,))

    def _lock_enrollments(self, conn: SqlConnection) -> None:
        # enroll and revoke read a record, then write the next one: one at a time per hub
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (sql.ENROLLMENT_LOCK,))

    def _no_hub_id(self) -> HubNotInitializedError:
        return no_hub_id(f"the hub store {self.target.shown}", self.target.shown)

    @staticmethod
    def _timestamp(value: Any) -> str:
        return format_timestamp(value)  # a timestamptz arrives as an aware datetime

    @staticmethod
    def _moment(moment: datetime) -> object:
        return moment

    @staticmethod
    def _as_moment(value: Any) -> datetime:
        moment: datetime = value.astimezone(UTC)
        return moment

    @staticmethod
    def _list(values: list[str]) -> object:
        return values  # a text[] column

    @staticmethod
    def _as_list(value: Any) -> tuple[str, ...]:
        return tuple(value)

    @staticmethod
    def _gap_ranges(columns: Sequence[Any]) -> tuple[tuple[int, int], ...]:
        firsts, lasts = columns
        return tuple(zip(map(int, firsts or ()), map(int, lasts or ()), strict=True))


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


def run_lock(project_id: str, run_id: str) -> int:
    """The second key of a run's advisory lock: the same in every process (CRC-32, as a signed
    32-bit integer; two runs that share one are judged one after the other, nothing worse)."""
    return zlib.crc32(f"{project_id}\x1f{run_id}".encode()) - 2**31


def _lock_runs(conn: Connection, lookup: Lookup) -> None:
    """``OWNERS_LOCK`` shared, then a lock on each run of the batch in ascending order (none
    for a batch of more than ``MAX_RUN_LOCKS`` runs; module docstring)."""
    conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (sql.OWNERS_LOCK,))
    locks = sorted({run_lock(p, r) for p, r in zip(lookup[4], lookup[5], strict=True)})
    if len(locks) > sql.MAX_RUN_LOCKS:
        return
    if locks:  # one statement, pipelined with the read that follows: no round trip added
        conn.execute(sql.LOCK_RUNS, (sql.RUN_LOCK_CLASS, locks))


def _ingest(conn: Connection, batch: Sequence[EventEntry], lookup: Lookup) -> _Ingested:
    """One attempt: read, decide, insert what was decided; ``LostRace`` if a key was taken."""
    _lock_runs(conn, lookup)
    known = Known()
    for kind, project, run, sequence, value in conn.execute(sql.KNOWN, lookup).fetchall():
        if kind == 0:
            known.hashes[(project, run, sequence)] = value
        elif kind == 1:
            known.project_owners[project] = ProjectOwner(value, run)
        else:
            known.run_homes[(project, run)] = value
    decisions = decide(batch, known)
    now = utc_now()
    counted = []  # (cursor, rows it must have inserted); read once all are sent
    if decisions.new_projects:
        projects = sorted(decisions.new_projects.items())
        args: tuple[object, ...] = (
            now,
            [p for p, _ in projects],
            [o.hub_project for _, o in projects],
            [o.runtime_id for _, o in projects],
        )
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
        rows = [conflict_row(c) for c in decisions.conflicts]
        conn.execute(sql.UPSERT_CONFLICT_ALERTS, _alert_arguments(rows, now, _offence))
    # last: the counter's row lock is held only from here to the commit
    counter = conn.execute(statements.BUMP_COMMIT_COUNTER)
    for cursor, expected in counted:
        row = cursor.fetchone()
        if row is None or row[0] != expected:
            raise LostRace
    raised = counter.fetchone()
    assert raised is not None  # the upsert returns its row
    return _Ingested(decisions.outcomes, decisions.conflicts, int(raised[0]))


AlertKey = tuple[str | int, ...]


def _offence(row: AlertRow) -> AlertKey:
    """What makes two conflicts one alert: key, reason and offered hash."""
    return (row[3], row[4], row[5], row[0], row[7])


def _sender(row: AlertRow) -> AlertKey:
    """What makes two refused entries one alert: hub project, claimed runtime and reason."""
    return (row[1], row[2], row[0])


def _alert_arguments(
    rows: Sequence[AlertRow], now: datetime, key_of: Callable[[AlertRow], AlertKey]
) -> tuple[object, ...]:
    """An alert upsert's arguments: one row per alert ``key_of`` names (the latest of the
    rows it folds), counted, in key order."""
    kept: dict[AlertKey, AlertRow] = {}
    counts: dict[AlertKey, int] = {}
    for row in rows:
        key = key_of(row)
        kept[key] = row
        counts[key] = counts.get(key, 0) + 1
    keys = sorted(kept)
    columns = list(zip(*(kept[k] for k in keys), strict=True))
    return (now, now, *(list(column) for column in columns), [counts[k] for k in keys])


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
