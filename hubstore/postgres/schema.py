"""Schema of the PostgreSQL hub store (version ``SCHEMA_VERSION``, kept in ``hub_schema_versions``).

The same tables as the SQLite hub database (docs/contract.md), in the current
schema of the connection (``search_path``; ``public`` unless the URL says
otherwise), with PostgreSQL's types: times are ``timestamptz``, keys ``bytea``,
an enrolled runtime's hub projects a ``text[]``. Every text column sorts
bytewise (``COLLATE "C"``), so listings come in the same order as on SQLite
whatever the database's locale, and keyset paging resumes exactly.

The store relies on the primary keys for its race-freedom: ``sync_events``,
``sync_projects`` and ``sync_runs`` are only ever inserted into (with
``ON CONFLICT DO NOTHING``), so a row, once committed, is final, and a second
writer of the same key finds it instead of overwriting it.

``hub_schema_versions`` holds one row per version reached (the version, what
the step did, when). ``ensure_schema`` creates a new schema at once or runs the
numbered, forward-only ``MIGRATIONS`` (``hubsync.core.migration.Migration``) in one
transaction, under an advisory lock so that two processes migrating at once
agree; ``check_schema`` refuses a missing, older or newer one. A schema
change is a new version: change the statements, then add the step that brings
the previous version to the same shape.
"""

from __future__ import annotations

from typing import Any

import psycopg

from hubstore.resyncs import POSTGRES_TABLE as POSTGRES_RESYNC_TABLE
from hubstore.sql_statements import FOLDED_BY_SENDER, KEPT_PER_OFFENCE
from hubsync.core.errors import SchemaVersionError
from hubsync.core.migration import Migration, SchemaChange, check_migrations, steps_from

SCHEMA_VERSION = 3

VERSION_TABLE = "hub_schema_versions"

TABLES = (
    "sync_events",
    "runtime_presence",
    "sync_alerts",
    "sync_projects",
    "sync_runs",
    "sync_project_moves",
    "hub_meta",
    "enrolled_runtimes",
    "sync_resyncs",
)
"""The hub tables; one of them without ``VERSION_TABLE`` beside it is someone else's."""

MIGRATION_LOCK = 0x6875_6273_796E_6301
"""The ``pg_advisory_xact_lock`` key a migration holds ("hubsync" and 1, as a bigint)."""

ALERT_INDEXES = (
    # One row per distinct conflict: a redelivered conflicting entry bumps
    # occurrences instead of flooding the table, yet nothing is ever dropped.
    f"""
    CREATE UNIQUE INDEX sync_alerts_per_offence
        ON sync_alerts (project_id, run_id, sequence, reason, offered_hash)
        WHERE {KEPT_PER_OFFENCE}
    """,
    # One row per sender of refused entries: forgeries under any number of keys
    # are one row counting them.
    f"""
    CREATE UNIQUE INDEX sync_alerts_per_sender
        ON sync_alerts (hub_project, runtime_id, reason) WHERE {FOLDED_BY_SENDER}
    """,
)
"""The unique indexes of ``sync_alerts``, as of version 2."""

MOVES_TABLE = """
    CREATE TABLE sync_project_moves (
        move_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        project_id text COLLATE "C" NOT NULL,
        hub_project text COLLATE "C" NOT NULL,
        from_runtime_id text COLLATE "C" NOT NULL,
        to_runtime_id text COLLATE "C" NOT NULL,
        runs integer NOT NULL,
        moved_at timestamptz NOT NULL
    )
"""
"""The record of project moves, as of version 2."""

# Version 1's alerts about refused entries, one per (hub project, claimed
# runtime, reason): the latest one keeps its key and hashes, and takes the
# first detection and the sum of occurrences; the others go.
_FOLD_REFUSED_ALERTS = (
    f"""
    UPDATE sync_alerts AS a SET detected_at = f.first_detected_at, occurrences = f.total
    FROM (
        SELECT alert_id, min(detected_at) OVER sender AS first_detected_at,
               sum(occurrences) OVER sender AS total,
               row_number() OVER (
                   PARTITION BY hub_project, runtime_id, reason
                   ORDER BY last_detected_at DESC, alert_id DESC
               ) AS n
        FROM sync_alerts WHERE {FOLDED_BY_SENDER}
        WINDOW sender AS (PARTITION BY hub_project, runtime_id, reason)
    ) AS f
    WHERE a.alert_id = f.alert_id AND f.n = 1
    """,
    f"""
    DELETE FROM sync_alerts AS a WHERE {FOLDED_BY_SENDER} AND EXISTS (
        SELECT 1 FROM sync_alerts AS b
        WHERE b.hub_project = a.hub_project AND b.runtime_id = a.runtime_id
          AND b.reason = a.reason
          AND (b.last_detected_at, b.alert_id) > (a.last_detected_at, a.alert_id)
    )
    """,
)

SCHEMA_STATEMENTS = (
    f"""
    CREATE TABLE {VERSION_TABLE} (
        version integer PRIMARY KEY,
        summary text COLLATE "C" NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE sync_events (
        project_id text COLLATE "C" NOT NULL,
        run_id text COLLATE "C" NOT NULL,
        sequence bigint NOT NULL,
        hub_project text COLLATE "C" NOT NULL,
        home_runtime_id text COLLATE "C" NOT NULL,
        event_type text COLLATE "C" NOT NULL,
        content_hash text COLLATE "C" NOT NULL,
        received_at timestamptz NOT NULL,
        record text COLLATE "C" NOT NULL,
        PRIMARY KEY (project_id, run_id, sequence)
    )
    """,
    # The order HubStore.events pages in: a position includes project_id, as two
    # projects of one hub project may share a run id.
    """
    CREATE INDEX sync_events_by_position
        ON sync_events (hub_project, run_id, project_id, sequence)
    """,
    """
    CREATE TABLE runtime_presence (
        runtime_id text COLLATE "C" NOT NULL,
        hub_project text COLLATE "C" NOT NULL,
        host text COLLATE "C" NOT NULL,
        heartbeat timestamptz NOT NULL,
        record text COLLATE "C" NOT NULL,
        PRIMARY KEY (hub_project, runtime_id)
    )
    """,
    """
    CREATE TABLE sync_alerts (
        alert_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        reason text COLLATE "C" NOT NULL,
        hub_project text COLLATE "C" NOT NULL,
        runtime_id text COLLATE "C" NOT NULL,
        project_id text COLLATE "C" NOT NULL,
        run_id text COLLATE "C" NOT NULL,
        sequence bigint NOT NULL,
        existing_hash text COLLATE "C",
        offered_hash text COLLATE "C" NOT NULL,
        detail text COLLATE "C" NOT NULL,
        detected_at timestamptz NOT NULL,
        last_detected_at timestamptz NOT NULL,
        occurrences integer NOT NULL DEFAULT 1
    )
    """,
    *ALERT_INDEXES,
    "CREATE INDEX sync_alerts_by_last_detected ON sync_alerts (last_detected_at)",
    "CREATE INDEX sync_alerts_by_hub_project ON sync_alerts (hub_project, alert_id)",
    "CREATE INDEX runtime_presence_by_heartbeat ON runtime_presence (heartbeat)",
    # runtime_id: the runtime the project belongs to (the first to write it, or
    # the one an operator moved it to); only it may write the project.
    """
    CREATE TABLE sync_projects (
        project_id text COLLATE "C" PRIMARY KEY,
        hub_project text COLLATE "C" NOT NULL,
        first_seen_at timestamptz NOT NULL,
        runtime_id text COLLATE "C" NOT NULL
    )
    """,
    MOVES_TABLE,
    """
    CREATE TABLE sync_runs (
        project_id text COLLATE "C" NOT NULL,
        run_id text COLLATE "C" NOT NULL,
        home_runtime_id text COLLATE "C" NOT NULL,
        first_seen_at timestamptz NOT NULL,
        PRIMARY KEY (project_id, run_id)
    )
    """,
    # name -> value; 'hub_id' is written once by init_hub and never changed.
    """
    CREATE TABLE hub_meta (
        name text COLLATE "C" PRIMARY KEY,
        value text COLLATE "C" NOT NULL
    )
    """,
    # The keys are stored as they are: the hub verifies entries with them, so it
    # must hold them (a revoked runtime's are deleted). hub_projects is sorted.
    """
    CREATE TABLE enrolled_runtimes (
        runtime_id text COLLATE "C" PRIMARY KEY,
        state text COLLATE "C" NOT NULL CHECK (state IN ('active', 'revoked')),
        hub_projects text[] COLLATE "C" NOT NULL,
        key bytea,
        previous_key bytea,
        previous_valid_until timestamptz,
        enrolled_at timestamptz NOT NULL,
        rotated_at timestamptz,
        revoked_at timestamptz
    )
    """,
    POSTGRES_RESYNC_TABLE,
)
"""The latest schema, what a new hub store gets (the version table first)."""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        from_version=1,
        summary="a project belongs to a runtime (sync_projects.runtime_id, filled from the "
        "runtime of its earliest run); add sync_project_moves; fold the alerts about refused "
        "entries into one per hub project, claimed runtime and reason",
        change=(
            'ALTER TABLE sync_projects ADD COLUMN runtime_id text COLLATE "C"',
            """
            UPDATE sync_projects AS p SET runtime_id = coalesce(
                (SELECT r.home_runtime_id FROM sync_runs AS r WHERE r.project_id = p.project_id
                 ORDER BY r.first_seen_at, r.run_id LIMIT 1), '')
            """,
            "ALTER TABLE sync_projects ALTER COLUMN runtime_id SET NOT NULL",
            MOVES_TABLE,
            "ALTER TABLE sync_alerts DROP CONSTRAINT "
            "sync_alerts_project_id_run_id_sequence_reason_offered_hash_key",
            *_FOLD_REFUSED_ALERTS,
            *ALERT_INDEXES,
        ),
    ),
    Migration(
        from_version=2,
        summary="add sync_resyncs (requests to resync and the runtimes' progress with them)",
        change=(POSTGRES_RESYNC_TABLE,),
    ),
)
"""Version N -> N+1 steps, oldest first (``hubsync.core.migration.Migration``)."""

Connection = psycopg.Connection[Any]


def schema_version(conn: Connection) -> int:
    """The schema version in the connection's current schema; 0 without a version table."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables "
        "WHERE schemaname = current_schema() AND tablename = %s)",
        (VERSION_TABLE,),
    ).fetchone()
    if row is None or not row[0]:
        return 0
    row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def ensure_schema(conn: Connection, where: str) -> SchemaChange:
    """Bring the hub schema to ``SCHEMA_VERSION``: create it, upgrade it, or find it current.

    ``conn`` is in autocommit mode; the change is one transaction holding
    ``MIGRATION_LOCK``, the version read again under it, so two processes
    migrating at once leave one schema (the second finds it current). A
    current schema is checked without the lock and without any DDL, so a role
    without DDL rights may call this. ``where`` names the store in messages.
    Raises ``SchemaVersionError`` for a newer version, an older one no step
    starts from, or hub tables without a version (left untouched).
    """
    check_migrations(MIGRATIONS, SCHEMA_VERSION)
    found = schema_version(conn)
    if found == SCHEMA_VERSION:
        return SchemaChange(SCHEMA_VERSION, SCHEMA_VERSION)
    _refuse_newer(found, where)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        found = schema_version(conn)
        if found == SCHEMA_VERSION:
            return SchemaChange(SCHEMA_VERSION, SCHEMA_VERSION)
        _refuse_newer(found, where)
        if found == 0:
            _refuse_foreign(conn, where)
            for statement in SCHEMA_STATEMENTS:
                conn.execute(statement)
            _record_version(conn, SCHEMA_VERSION, "created")
            return SchemaChange(0, SCHEMA_VERSION)
        steps = steps_from(found, SCHEMA_VERSION, MIGRATIONS)
        if steps is None:
            raise SchemaVersionError(
                f"{where} holds a hubsync hub schema of version {found}; this hubsync upgrades "
                f"from version {MIGRATIONS[0].from_version if MIGRATIONS else SCHEMA_VERSION} "
                "on only. Upgrade it with an earlier hubsync release first"
            )
        for step in steps:
            step.apply(conn)
            _record_version(conn, step.from_version + 1, step.summary)
        return SchemaChange(found, SCHEMA_VERSION, None, tuple(step.summary for step in steps))


def check_schema(conn: Connection, where: str, how_to_fix: str) -> None:
    """Refuse a schema that is absent or of another version; never create or upgrade it."""
    found = schema_version(conn)
    if found == SCHEMA_VERSION:
        return
    _refuse_newer(found, where)
    if found != 0:
        raise SchemaVersionError(
            f"{where} holds a hubsync hub schema of version {found}; this hubsync needs version "
            f"{SCHEMA_VERSION}: {how_to_fix}"
        )
    _refuse_foreign(conn, where)
    raise SchemaVersionError(f"{where} has no hubsync hub schema; {how_to_fix}")


def _record_version(conn: Connection, version: int, summary: str) -> None:
    conn.execute(
        f"INSERT INTO {VERSION_TABLE} (version, summary) VALUES (%s, %s)", (version, summary)
    )


def _refuse_newer(found: int, where: str) -> None:
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} holds a hubsync hub schema of version {found}, newer than this hubsync "
            f"knows (it reads up to version {SCHEMA_VERSION}); it was left untouched. Use a "
            "hubsync release that knows it"
        )


def _refuse_foreign(conn: Connection, where: str) -> None:
    rows = conn.execute(
        "SELECT tablename FROM pg_catalog.pg_tables "
        "WHERE schemaname = current_schema() AND tablename = ANY(%s) ORDER BY tablename",
        (list(TABLES),),
    ).fetchall()
    if rows:
        names = ", ".join(str(row[0]) for row in rows)
        raise SchemaVersionError(
            f"{where} already has tables named as hubsync's ({names}) but no {VERSION_TABLE}: "
            "they are not a hubsync hub store; use another database or schema"
        )
