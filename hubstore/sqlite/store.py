"""``SqliteHubStore``: the hub store on one SQLite file in WAL mode, shared by many workers.

Every write runs in ``BEGIN IMMEDIATE``: the write lock is taken before the
first read, so the verdicts of a batch are decided against a state no other
worker can change until commit (a deferred transaction would read, then fail
to upgrade its lock with a "database is locked" the busy handler cannot fix).
The connection, the busy retries, the private file and the schema version
check are ``hubsync.core.sqlite.Database``'s, shared with the runtime's files.

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
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import orjson

from hubstore.decide import Known, decide, warn_conflicts
from hubstore.enrollments import enrolled, revoked
from hubstore.errors import HubNotInitializedError, StoreError, StoreOpenError
from hubstore.sqlite.schema import MIGRATIONS, SCHEMA_STATEMENTS, SCHEMA_VERSION
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
from hubsync.core.clock import format_timestamp, parse_timestamp, utc_now, utc_now_iso
from hubsync.core.enrollment import Enrollment, new_hub_id
from hubsync.core.entries import EventEntry, OutcomeRecord, PresenceBeat, alert_reason
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


_EVENT_COLUMNS = (
    "project_id, run_id, sequence, hub_project, home_runtime_id, event_type, content_hash, "
    "received_at, record"
)
_INSERT_EVENT = f"INSERT INTO sync_events ({_EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"

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
    SELECT p.project_id, p.hub_project
    FROM json_each(?) AS k CROSS JOIN sync_projects AS p ON p.project_id = k.value
"""
_KNOWN_HOMES = """
    SELECT r.project_id, r.run_id, r.home_runtime_id
    FROM json_each(?) AS k CROSS JOIN sync_runs AS r
    ON r.project_id = json_extract(k.value, '$[0]') AND r.run_id = json_extract(k.value, '$[1]')
"""
_UPSERT_ALERT = """
    INSERT INTO sync_alerts (reason, hub_project, runtime_id, project_id, run_id, sequence,
                             existing_hash, offered_hash, detail, detected_at, last_detected_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (project_id, run_id, sequence, reason, offered_hash) DO UPDATE SET
        last_detected_at = excluded.last_detected_at,
        occurrences = occurrences + 1
"""
_UPSERT_PRESENCE = """
    INSERT INTO runtime_presence (runtime_id, hub_project, host, heartbeat, record)
    VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (hub_project, runtime_id) DO UPDATE SET
        host = excluded.host, heartbeat = excluded.heartbeat, record = excluded.record
"""
# One page of runs in one statement (one snapshot, no query per run). Sequences
# start at 1 and are unique, so a run has a gap exactly when it holds fewer
# events than its highest sequence: only those runs are walked for their gaps,
# each through the primary key.
_RUNS_PAGE = """
    WITH page AS MATERIALIZED (
        SELECT run_id, project_id, MIN(home_runtime_id) AS home, COUNT(*) AS events,
               MAX(sequence) AS highest, MAX(received_at) AS last_received
        FROM sync_events WHERE {where}
        GROUP BY run_id, project_id ORDER BY run_id, project_id LIMIT ?
    ),
    steps AS (
        SELECT e.run_id, e.project_id, e.sequence,
               LAG(e.sequence, 1, 0) OVER (
                   PARTITION BY e.run_id, e.project_id ORDER BY e.sequence
               ) AS previous
        FROM page AS p CROSS JOIN sync_events AS e
        ON e.project_id = p.project_id AND e.run_id = p.run_id
        WHERE p.events < p.highest
    ),
    gaps AS (
        SELECT run_id, project_id, previous + 1 AS first, sequence - 1 AS last,
               ROW_NUMBER() OVER (PARTITION BY run_id, project_id ORDER BY sequence) AS n
        FROM steps WHERE sequence - previous > 1
    ),
    gap_lists AS (
        SELECT run_id, project_id, MIN(first) AS first_gap,
               json_group_array(json_array(first, last)) FILTER (WHERE n <= ?) AS ranges
        FROM gaps GROUP BY run_id, project_id
    )
    SELECT p.run_id, p.project_id, p.home, p.events, p.highest, p.last_received,
           g.first_gap, g.ranges
    FROM page AS p LEFT JOIN gap_lists AS g USING (run_id, project_id)
    ORDER BY p.run_id, p.project_id
"""
_ENROLLED_COLUMNS = (
    "runtime_id, state, hub_projects, enrolled_at, rotated_at, revoked_at, "
    "previous_valid_until, key, previous_key"
)
_UPSERT_ENROLLED = f"""
    INSERT OR REPLACE INTO enrolled_runtimes ({_ENROLLED_COLUMNS})
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_ALERT_COLUMNS = (
    "alert_id, reason, hub_project, runtime_id, project_id, run_id, sequence, existing_hash, "
    "offered_hash, detail, detected_at, last_detected_at, occurrences"
)


HUB_SYNCHRONOUS = "FULL"
"""SQLite durability of the hub database. The hub is the record: once a batch is answered
accepted, its runtime will prune the rows. A commit must survive a power cut, so the WAL is
synced at every commit (one fsync per batch), not at checkpoints only."""


class SqliteHubStore(HubStore):
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
        return self._write(lambda conn: self._ingest(conn, batch))

    def sync_cursor(self, project_id: str, run_id: str) -> int:
        """The run's highest sequence with no gap below it."""

        def read(conn: sqlite3.Connection) -> int:
            first_gap = self._gaps(conn, project_id, run_id, 1)
            if first_gap:
                return first_gap[0][0] - 1
            row = conn.execute(
                "SELECT MAX(sequence) FROM sync_events WHERE project_id = ? AND run_id = ?",
                (project_id, run_id),
            ).fetchone()
            return int(row[0] or 0)

        return self._read(read)

    def gaps(self, project_id: str, run_id: str, limit: int = 1000) -> list[tuple[int, int]]:
        """Missing ranges ``(first, last)`` below the run's highest sequence."""
        return self._read(lambda conn: self._gaps(conn, project_id, run_id, limit))

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
        where = ["hub_project = ?"]
        args: list[object] = [hub_project]
        for column, value in (("run_id", run_id), ("project_id", project_id)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if after is not None:
            # A row-value comparison, so SQLite seeks the index instead of scanning.
            where.append("(run_id, project_id, sequence) > (?, ?, ?)")
            args.extend(after)
        sql = (
            f"SELECT {_EVENT_COLUMNS} FROM sync_events WHERE {' AND '.join(where)} "
            "ORDER BY run_id, project_id, sequence LIMIT ?"
        )
        args.append(limit)
        rows = self._read(lambda conn: conn.execute(sql, args).fetchall())
        return [
            StoredEvent(
                project_id=r[0],
                run_id=r[1],
                sequence=r[2],
                hub_project=r[3],
                home_runtime_id=r[4],
                event_type=r[5],
                content_hash=r[6],
                received_at=r[7],
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
        where = ["hub_project = ?"]
        args: list[object] = [hub_project]
        if project_id is not None:
            where.append("project_id = ?")
            args.append(project_id)
        if after is not None:
            where.append("(run_id, project_id) > (?, ?)")
            args.extend(after)
        sql = _RUNS_PAGE.format(where=" AND ".join(where))
        args.extend((limit, gaps_per_run))
        rows = self._read(lambda conn: conn.execute(sql, args).fetchall())
        summaries = []
        for run, project, home, count, highest, last_received, first_gap, ranges in rows:
            gaps = sorted((int(a), int(b)) for a, b in json.loads(ranges or "[]"))
            summaries.append(
                RunSummary(
                    run_id=run,
                    project_id=project,
                    hub_project=hub_project,
                    home_runtime_id=home,
                    events=count,
                    highest_sequence=highest,
                    sync_cursor=highest if first_gap is None else first_gap - 1,
                    missing=highest - count,
                    gaps=tuple(gaps),
                    last_received_at=last_received,
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
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT COUNT(*) FROM sync_events" + (
            f" WHERE {' AND '.join(where)}" if where else ""
        )
        return int(self._read(lambda conn: conn.execute(sql, args).fetchone()[0]))

    def record_presence(self, beats: Sequence[PresenceBeat]) -> None:
        """Upsert each beat's runtime presence, stamped with the hub's clock."""
        if not beats:
            return
        now = utc_now_iso()
        rows = [
            (b.runtime_id, b.hub_project, b.host, now, b.record().decode("utf-8")) for b in beats
        ]
        self._write(lambda conn: conn.executemany(_UPSERT_PRESENCE, rows))

    def presence(
        self,
        hub_project: str | None = None,
        stale_after: timedelta = DEFAULT_STALE_AFTER,
        now: datetime | None = None,
    ) -> list[PresenceRecord]:
        """Known runtimes, each flagged stale when not heard from within ``stale_after``."""
        sql = "SELECT runtime_id, hub_project, host, heartbeat, record FROM runtime_presence"
        args: list[object] = []
        if hub_project is not None:
            sql += " WHERE hub_project = ?"
            args.append(hub_project)
        sql += " ORDER BY hub_project, runtime_id"
        rows = self._read(lambda conn: conn.execute(sql, args).fetchall())
        cutoff = format_timestamp((now or utc_now()) - stale_after)
        return [
            PresenceRecord(
                runtime_id=r[0],
                hub_project=r[1],
                host=r[2],
                heartbeat=r[3],
                beat=PresenceBeat(**json.loads(r[4])),
                stale=r[3] < cutoff,
            )
            for r in rows
        ]

    def record_security_alerts(self, alerts: Sequence[SecurityAlert]) -> None:
        """Keep alerts about entries that did not authenticate (one transaction)."""
        if not alerts:
            return
        now = utc_now_iso()
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
                now,
                now,
            )
            for a in alerts
        ]
        self._write(lambda conn: conn.executemany(_UPSERT_ALERT, rows))

    def alerts(self, hub_project: str | None = None, limit: int = 100) -> list[AlertRecord]:
        """Recorded alerts (conflicts and refused entries), newest first."""
        sql = f"SELECT {_ALERT_COLUMNS} FROM sync_alerts"
        args: list[object] = []
        if hub_project is not None:
            sql += " WHERE hub_project = ?"
            args.append(hub_project)
        sql += " ORDER BY alert_id DESC LIMIT ?"
        args.append(limit)
        rows = self._read(lambda conn: conn.execute(sql, args).fetchall())
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
                detected_at=r[10],
                last_detected_at=r[11],
                occurrences=r[12],
            )
            for r in rows
        ]

    def purge(self, retention: timedelta, now: datetime | None = None) -> PurgeResult:
        """Remove alerts and presence older than ``retention``; events stay."""
        cutoff = format_timestamp((now or utc_now()) - retention)

        def work(conn: sqlite3.Connection) -> PurgeResult:
            alerts = conn.execute("DELETE FROM sync_alerts WHERE last_detected_at < ?", (cutoff,))
            presence = conn.execute("DELETE FROM runtime_presence WHERE heartbeat < ?", (cutoff,))
            return PurgeResult(alerts=alerts.rowcount, presence=presence.rowcount)

        return self._write(work)

    def init_hub(self) -> str:
        """This hub's id, made (``hub-<16 hex>``) and stored the first time only."""

        def work(conn: sqlite3.Connection) -> str:
            # INSERT OR IGNORE under the write lock: two racing inits agree on one id.
            conn.execute(
                "INSERT OR IGNORE INTO hub_meta (name, value) VALUES ('hub_id', ?), "
                "('hub_created_at', ?)",
                (new_hub_id(), utc_now_iso()),
            )
            return str(
                conn.execute("SELECT value FROM hub_meta WHERE name = 'hub_id'").fetchone()[0]
            )

        return self._write(work)

    def hub_id(self) -> str | None:
        """This hub's id, or None before ``init_hub``."""
        return self._read(self._hub_id)

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

        def work(conn: sqlite3.Connection) -> Enrollment:
            hub_id = self._hub_id(conn)
            if hub_id is None:
                raise HubNotInitializedError(
                    f"the hub database {str(self.path)!r} has no hub id yet; run `hubsync hub "
                    f"init --hub-url {shlex.quote(hub_url_from_path(self.path))}` first"
                )
            record = enrolled(
                self._enrolled(conn, runtime_id), runtime_id, hub_projects, moment, rotation_grace
            )
            conn.execute(_UPSERT_ENROLLED, _enrolled_row(record))
            assert record.key is not None
            return Enrollment(hub_id, runtime_id, record.hub_projects, record.key)

        return self._write(work)

    def revoke(self, runtime_id: str, *, now: datetime | None = None) -> EnrolledRuntime:
        """Revoke ``runtime_id`` (see ``HubStore.revoke``), erasing its keys."""
        moment = now or utc_now()

        def work(conn: sqlite3.Connection) -> EnrolledRuntime:
            record = revoked(self._enrolled(conn, runtime_id), runtime_id, moment)
            conn.execute(_UPSERT_ENROLLED, _enrolled_row(record))
            return record

        return self._write(work)

    def enrolled_runtime(self, runtime_id: str) -> EnrolledRuntime | None:
        """The enrollment of ``runtime_id``: one primary-key lookup."""
        return self._read(lambda conn: self._enrolled(conn, runtime_id))

    def enrolled_runtimes(self) -> list[EnrolledRuntime]:
        """Every runtime ever enrolled, by runtime id."""
        sql = f"SELECT {_ENROLLED_COLUMNS} FROM enrolled_runtimes ORDER BY runtime_id"
        rows = self._read(lambda conn: conn.execute(sql).fetchall())
        return [_enrolled_record(row) for row in rows]

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._db.close()

    # ----- enrollment -----

    @staticmethod
    def _hub_id(conn: sqlite3.Connection) -> str | None:
        row = conn.execute("SELECT value FROM hub_meta WHERE name = 'hub_id'").fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def _enrolled(conn: sqlite3.Connection, runtime_id: str) -> EnrolledRuntime | None:
        row = conn.execute(
            f"SELECT {_ENROLLED_COLUMNS} FROM enrolled_runtimes WHERE runtime_id = ?",
            (runtime_id,),
        ).fetchone()
        return None if row is None else _enrolled_record(row)

    # ----- ingest -----

    def _ingest(self, conn: sqlite3.Connection, batch: Sequence[EventEntry]) -> list[OutcomeRecord]:
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
                "INSERT INTO sync_projects (project_id, hub_project, first_seen_at) VALUES (?, ?, ?)",
                [(p, h, now) for p, h in decisions.new_projects.items()],
            )
        if decisions.new_runs:
            conn.executemany(
                "INSERT INTO sync_runs (project_id, run_id, home_runtime_id, first_seen_at) "
                "VALUES (?, ?, ?, ?)",
                [(p, r, home, now) for (p, r), home in decisions.new_runs.items()],
            )
        if decisions.conflicts:
            conn.executemany(
                _UPSERT_ALERT,
                [
                    (
                        c.reason.value,
                        c.entry.event.hub_project,
                        c.entry.runtime_id,
                        *c.entry.key,
                        c.existing_hash,
                        c.entry.content_hash,
                        c.detail,
                        now,
                        now,
                    )
                    for c in decisions.conflicts
                ],
            )
            warn_conflicts(decisions.conflicts)
        return decisions.outcomes

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
        for p, h in conn.execute(_KNOWN_OWNERS, (orjson.dumps(projects).decode(),)):
            known.project_owners[p] = h
        for p, r, home in conn.execute(_KNOWN_HOMES, (orjson.dumps(runs).decode(),)):
            known.run_homes[(p, r)] = home
        return known

    @staticmethod
    def _gaps(
        conn: sqlite3.Connection, project_id: str, run_id: str, limit: int
    ) -> list[tuple[int, int]]:
        rows = conn.execute(
            """
            SELECT previous + 1, sequence - 1 FROM (
                SELECT sequence, LAG(sequence, 1, 0) OVER (ORDER BY sequence) AS previous
                FROM sync_events WHERE project_id = ? AND run_id = ?
            ) WHERE sequence - previous > 1 ORDER BY sequence LIMIT ?
            """,
            (project_id, run_id, limit),
        ).fetchall()
        return [(int(a), int(b)) for a, b in rows]

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


def _enrolled_row(record: EnrolledRuntime) -> tuple[object, ...]:
    def moment(value: datetime | None) -> str | None:
        return None if value is None else format_timestamp(value)

    return (
        record.runtime_id,
        record.state.value,
        json.dumps(list(record.hub_projects)),
        format_timestamp(record.enrolled_at),
        moment(record.rotated_at),
        moment(record.revoked_at),
        moment(record.previous_valid_until),
        record.key,
        record.previous_key,
    )


def _enrolled_record(row: tuple[Any, ...]) -> EnrolledRuntime:
    def moment(value: object) -> datetime | None:
        return None if value is None else parse_timestamp(str(value))

    runtime_id, state, projects, enrolled_at, rotated, revoked_at, until, key, previous = row
    return EnrolledRuntime(
        runtime_id=str(runtime_id),
        state=RuntimeState(str(state)),
        hub_projects=tuple(json.loads(str(projects))),
        enrolled_at=parse_timestamp(str(enrolled_at)),
        rotated_at=moment(rotated),
        revoked_at=moment(revoked_at),
        previous_valid_until=moment(until),
        key=None if key is None else bytes(key),
        previous_key=None if previous is None else bytes(previous),
    )


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
