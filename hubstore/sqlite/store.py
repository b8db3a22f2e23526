"""``SqliteHubStore``: the hub store on one SQLite file in WAL mode, shared by many workers.

Every write runs in ``BEGIN IMMEDIATE``: the write lock is taken before the
first read, so the verdicts of a batch are decided against a state no other
worker can change until commit (a deferred transaction would read, then fail
to upgrade its lock with a "database is locked" the busy handler cannot fix).
The connection, the busy retries, the private file and the schema version
check are ``hubsync.core.sqlite.Database``'s, shared with the runtime's files.
The reads and small writes are every SQL store's (``hubstore.sql_store.SqlHubStore``,
in the ``SQLITE`` dialect); ingest and the other batch writes are this module's.

Opening never creates or upgrades the schema unless asked (``create_schema=True``,
what ``hubsync consume`` and ``hubsync hub migrate`` do: a database of an older
version is backed up, then migrated); without it, a missing file or schema, or
an older version, is refused with a ``SchemaVersionError`` that says how to
create or upgrade it.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson

from hubstore import sql_statements as statements
from hubstore.decide import Known, ProjectOwner, decide, warn_conflicts
from hubstore.errors import HubNotInitializedError, StoreError, StoreOpenError
from hubstore.sql_statements import EVENT_COLUMNS, Dialect
from hubstore.sql_store import SqlHubStore, conflict_row, no_hub_id, security_alert_row
from hubstore.sqlite.schema import MIGRATIONS, SCHEMA_STATEMENTS, SCHEMA_VERSION
from hubstore.store import HubStore, SecurityAlert
from hubsync.core.clock import format_timestamp, parse_timestamp, utc_now_iso
from hubsync.core.entries import EventEntry, OutcomeRecord, PresenceBeat
from hubsync.core.errors import ConfigError, SchemaVersionError
from hubsync.core.settings import hub_url_from_path
from hubsync.core.sqlite import DEFAULT_BUSY_BUDGET, DEFAULT_BUSY_TIMEOUT, Database, SchemaChange

T = TypeVar("T")

URL_PREFIX = "sqlite:///"

WHAT = "hubsync hub database"


def how_to_migrate(path: Path) -> str:
    """What an operator runs to create or upgrade the schema of the hub database at ``path``."""
    return (
        f"run `hubsync hub migrate --hub-url {shlex.quote(hub_url_from_path(path))}` (it "
        "creates or upgrades the schema, keeping a backup of the file; `hubsync consume` "
        "does the same when it starts)"
    )


SQLITE = Dialect(
    mark="?",
    zero="0",
    probe_join="CROSS JOIN",
    gap_lists="json_group_array(json_array(first, last)) FILTER (WHERE n <= {mark}) AS ranges",
    gap_columns="g.ranges",
)
"""SQLite's words in the shared statements (``hubstore.sql_statements``)."""

_INSERT_EVENT = f"INSERT INTO sync_events ({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"

# CROSS JOIN pins json_each as the outer loop, so each key is one primary-key
# probe however large the table grows.
_KNOWN_HASHES = """
    SELECT e.project_id, e.run_id, e.sequence, e.content_hash
    FROM json_each(?) AS k CROSS JOIN sync_events AS e
    ON e.project_id = json_extract(k.value, '$[0]')
       AND e.run_id = json_extract(k.value, '$[1]')
       AND e.sequence = json_extract(k.value, '$[2]')
"""
_KNOWN_OWNERS = """
    SELECT p.project_id, p.hub_project, p.runtime_id
    FROM json_each(?) AS k CROSS JOIN sync_projects AS p ON p.project_id = k.value
"""
_KNOWN_HOMES = """
    SELECT r.project_id, r.run_id, r.home_runtime_id
    FROM json_each(?) AS k CROSS JOIN sync_runs AS r
    ON r.project_id = json_extract(k.value, '$[0]') AND r.run_id = json_extract(k.value, '$[1]')
"""
_INSERT_ALERT = (
    f"INSERT INTO sync_alerts ({statements.INSERTED_ALERT_COLUMNS}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_CONFLICT_ALERT = f"""
    {_INSERT_ALERT}
    {statements.PER_OFFENCE_CONFLICT} DO UPDATE SET
        last_detected_at = excluded.last_detected_at, occurrences = occurrences + 1
"""
_UPSERT_SECURITY_ALERT = f"""
    {_INSERT_ALERT}
    {statements.PER_SENDER_CONFLICT} DO UPDATE SET
        {statements.LATEST_EXAMPLE},
        last_detected_at = excluded.last_detected_at, occurrences = occurrences + 1
"""
_UPSERT_PRESENCE = """
    INSERT INTO runtime_presence (runtime_id, hub_project, host, heartbeat, record)
    VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (hub_project, runtime_id) DO UPDATE SET
        host = excluded.host, heartbeat = excluded.heartbeat, record = excluded.record
"""

HUB_SYNCHRONOUS = "FULL"
"""SQLite durability of the hub database. The hub is the record: once a batch is answered
accepted, its runtime will prune the rows. A commit must survive a power cut, so the WAL is
synced at every commit (one fsync per batch), not at checkpoints only."""


class SqliteHubStore(SqlHubStore):
    """The hub store on a SQLite file.

    ``create_schema`` (the default here; ``open_store`` makes callers say it)
    creates the file and its schema when missing and upgrades an older schema
    (after a backup); False opens an existing database only, at the current
    schema version. ``schema_change`` says what
    opening did to the schema. ``busy_timeout`` is how long SQLite itself waits
    for a lock (seconds; short, because a process blocked inside SQLite cannot
    act on a signal);
    ``busy_budget`` is how long a whole operation keeps retrying before it gives
    up with ``StoreBusyError``. One store object may be shared by threads; its
    operations then run one at a time.
    """

    dialect = SQLITE

    def __init__(
        self,
        path: Path | str,
        *,
        create_schema: bool = True,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        busy_budget: float = DEFAULT_BUSY_BUDGET,
    ) -> None:
        self.path = Path(path)
        if not create_schema and not self.path.exists():
            raise SchemaVersionError(
                f"no hub database at {str(self.path)!r}; {how_to_migrate(self.path)}"
            )
        try:
            self._db = Database(
                self.path,
                busy_timeout=busy_timeout,
                busy_budget=busy_budget,
                create=create_schema,
                synchronous=HUB_SYNCHRONOUS,
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreOpenError(
                f"cannot open the hub database {str(self.path)!r} ({exc}); check the path "
                "and its permissions"
            ) from exc
        try:
            if create_schema:
                # Checked when creating only: a database this store created is WAL already.
                if self._db.journal_mode != "wal":
                    raise StoreOpenError(
                        f"the hub database {str(self.path)!r} cannot use WAL mode (got "
                        f"{self._db.journal_mode!r}); put it on a local filesystem"
                    )
                self.schema_change = self._bring_schema_up_to_date()
            else:
                self._db.check_schema(SCHEMA_VERSION, WHAT, how_to_migrate(self.path))
                self.schema_change = SchemaChange(SCHEMA_VERSION, SCHEMA_VERSION)
        except BaseException:
            self._db.close()
            raise

    # ----- the contract -----

    def create_schema(self) -> None:
        """Create the tables of a new database, or upgrade an older one after a backup
        (idempotent); refuse a newer version or a database of something else with
        ``SchemaVersionError``."""
        self._bring_schema_up_to_date()

    def ingest(self, batch: Sequence[EventEntry]) -> list[OutcomeRecord]:
        """Decide every event of ``batch`` in one transaction (see ``HubStore.ingest``)."""
        if not batch:
            return []
        outcomes, counter = self._write(lambda conn: self._ingest(conn, batch))
        self.committed = counter  # once committed: a rolled-back batch raised nothing
        return outcomes

    def sync_cursor(self, project_id: str, run_id: str) -> int:
        """The run's highest sequence with no gap below it."""

        def read(conn: sqlite3.Connection) -> int:
            first_gap = conn.execute(statements.gaps(SQLITE), (project_id, run_id, 1)).fetchone()
            if first_gap is not None:
                return int(first_gap[0]) - 1
            row = conn.execute(
                "SELECT MAX(sequence) FROM sync_events WHERE project_id = ? AND run_id = ?",
                (project_id, run_id),
            ).fetchone()
            return int(row[0] or 0)

        return self._read(read)

    def record_presence(self, beats: Sequence[PresenceBeat]) -> None:
        """Upsert each beat's runtime presence, stamped with the hub's clock."""
        if not beats:
            return
        now = utc_now_iso()
        rows = [
            (b.runtime_id, b.hub_project, b.host, now, b.record().decode("utf-8")) for b in beats
        ]
        self._write(lambda conn: conn.executemany(_UPSERT_PRESENCE, rows))

    def record_security_alerts(self, alerts: Sequence[SecurityAlert]) -> None:
        """Keep alerts about entries that did not authenticate (one transaction)."""
        if not alerts:
            return
        now = utc_now_iso()
        rows = [(*security_alert_row(a), now, now) for a in alerts]
        self._write(lambda conn: conn.executemany(_UPSERT_SECURITY_ALERT, rows))

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._db.close()

    # ----- what the shared SQL store asks of SQLite -----

    def _no_hub_id(self) -> HubNotInitializedError:
        return no_hub_id(f"the hub database {str(self.path)!r}", hub_url_from_path(self.path))

    @staticmethod
    def _timestamp(value: Any) -> str:
        return str(value)  # stored as canonical text

    @staticmethod
    def _moment(moment: datetime) -> object:
        return format_timestamp(moment)

    @staticmethod
    def _as_moment(value: Any) -> datetime:
        return parse_timestamp(str(value))

    @staticmethod
    def _list(values: list[str]) -> object:
        return json.dumps(values)

    @staticmethod
    def _as_list(value: Any) -> tuple[str, ...]:
        return tuple(json.loads(str(value)))

    @staticmethod
    def _gap_ranges(columns: Sequence[Any]) -> tuple[tuple[int, int], ...]:
        # json_group_array keeps no order: sorted here
        return tuple(sorted((int(a), int(b)) for a, b in json.loads(columns[0] or "[]")))

    # ----- ingest -----

    def _ingest(
        self, conn: sqlite3.Connection, batch: Sequence[EventEntry]
    ) -> tuple[list[OutcomeRecord], int]:
        """One batch's verdicts, written; its outcomes and the commit counter it raised."""
        decisions = decide(batch, self._known(conn, batch))
        now = utc_now_iso()
        if decisions.accepted:
            conn.executemany(
                _INSERT_EVENT,
                [
                    (
                        e.event.project_id,
                        e.event.run_id,
                        e.event.sequence,
                        e.event.hub_project,
                        e.event.home_runtime_id,
                        e.event.event_type,
                        e.content_hash,
                        now,
                        e.data.decode("utf-8"),
                    )
                    for e in decisions.accepted
                ],
            )
        if decisions.new_projects:
            conn.executemany(
                "INSERT INTO sync_projects (project_id, hub_project, first_seen_at, runtime_id) "
                "VALUES (?, ?, ?, ?)",
                [(p, o.hub_project, now, o.runtime_id) for p, o in decisions.new_projects.items()],
            )
        if decisions.new_runs:
            conn.executemany(
                "INSERT INTO sync_runs (project_id, run_id, home_runtime_id, first_seen_at) "
                "VALUES (?, ?, ?, ?)",
                [(p, r, home, now) for (p, r), home in decisions.new_runs.items()],
            )
        if decisions.conflicts:
            conn.executemany(
                _UPSERT_CONFLICT_ALERT,
                [(*conflict_row(c), now, now) for c in decisions.conflicts],
            )
            warn_conflicts(decisions.conflicts)
        counter = int(conn.execute(statements.BUMP_COMMIT_COUNTER).fetchone()[0])
        return decisions.outcomes, counter

    @staticmethod
    def _known(conn: sqlite3.Connection, batch: Sequence[EventEntry]) -> Known:
        # each entry's key (``EventEntry.key`` spelt out: no property call per event)
        events = [e.event for e in batch]
        keys = list(dict.fromkeys([(e.project_id, e.run_id, e.sequence) for e in events]))
        projects = list(dict.fromkeys(k[0] for k in keys))
        runs = list(dict.fromkeys((k[0], k[1]) for k in keys))
        known = Known()
        # orjson: the same JSON arrays as json.dumps, at a fraction of the cost per key (as
        # text: SQLite 3.45+ would read a BLOB as its binary JSON)
        for p, r, s, h in conn.execute(_KNOWN_HASHES, (orjson.dumps(keys).decode(),)):
            known.hashes[(p, r, s)] = h
        for p, h, r in conn.execute(_KNOWN_OWNERS, (orjson.dumps(projects).decode(),)):
            known.project_owners[p] = ProjectOwner(h, r)
        for p, r, home in conn.execute(_KNOWN_HOMES, (orjson.dumps(runs).decode(),)):
            known.run_homes[(p, r)] = home
        return known

    # ----- the connection -----
    # Database retries busy errors; any other driver error becomes a StoreError here.

    def _bring_schema_up_to_date(self) -> SchemaChange:
        try:
            return self._db.ensure_schema(SCHEMA_VERSION, SCHEMA_STATEMENTS, WHAT, MIGRATIONS)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"hub database {str(self.path)!r} failed: {exc}") from exc

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return self._db.write(work)
        except sqlite3.Error as exc:
            raise StoreError(f"hub database {str(self.path)!r} failed: {exc}") from exc

    def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return self._db.read(work)
        except sqlite3.Error as exc:
            raise StoreError(f"hub database {str(self.path)!r} failed: {exc}") from exc


def sqlite_path(url: str) -> Path:
    """The file a ``sqlite:///PATH`` hub URL names (see ``hubstore.factory`` for the rule)."""
    if not url.lower().startswith(URL_PREFIX):
        raise ConfigError(
            f"hub URL {url[:60]!r} must start with sqlite:/// (a SQLite file has no host): "
            "write sqlite:///relative/hub.db or sqlite:////absolute/hub.db"
        )
    path = url[len(URL_PREFIX) :]
    if not path or path == ":memory:" or "?" in path or "#" in path:
        raise ConfigError(
            f"hub URL {url[:60]!r} names no usable file; write sqlite:///relative/hub.db or "
            "sqlite:////absolute/hub.db (no options after the path; memory:// for an in-memory "
            "store)"
        )
    return Path(path)


def open_hub_store(url: str, *, create_schema: bool, busy_budget: float | None) -> HubStore:
    """The ``sqlite`` backend of ``hubstore.open_store``."""
    budget = DEFAULT_BUSY_BUDGET if busy_budget is None else busy_budget
    return SqliteHubStore(sqlite_path(url), create_schema=create_schema, busy_budget=budget)


def migrate_hub_store(url: str, *, busy_budget: float | None) -> SchemaChange:
    """The ``sqlite`` backend of ``hubstore.migrate_store``: create or upgrade, then close."""
    budget = DEFAULT_BUSY_BUDGET if busy_budget is None else busy_budget
    with SqliteHubStore(sqlite_path(url), create_schema=True, busy_budget=budget) as store:
        return store.schema_change


__all__ = ["SqliteHubStore", "migrate_hub_store", "open_hub_store", "sqlite_path"]
