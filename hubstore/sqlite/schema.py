"""Schema of the SQLite hub database (version ``SCHEMA_VERSION``, kept in ``PRAGMA user_version``).

The three contract tables (docs/contract.md) plus two ownership tables that make
``not_owner``, ``project_mismatch`` and ``home_runtime_mismatch`` one indexed
lookup per project and per run, instead of a search through the events; and, since
version 3, the hub's identity (``hub_meta``) and its enrolled runtimes
(``enrolled_runtimes``, keyed by runtime id: one lookup per runtime to verify).
Since version 4 a project names the runtime it belongs to (``sync_projects.runtime_id``),
moves of a project are recorded (``sync_project_moves``), and refused entries are
kept as one alert per hub project, claimed runtime and reason (``sync_alerts_per_sender``).
Since version 5 the requests to resync and the runtimes' progress with them are kept
(``sync_resyncs``, ``hubstore.resyncs``).

``SCHEMA_STATEMENTS`` is the latest schema, what a new database gets;
``MIGRATIONS`` upgrade an older one step by step (``hubsync.core.sqlite.Migration``).
A schema change is a new version: change the statements, then add the step
that brings a file of the previous version to the same shape.
"""

from __future__ import annotations

from hubstore.resyncs import SQLITE_TABLE as RESYNC_TABLE
from hubstore.sql_statements import ALERT_COLUMNS, FOLDED_BY_SENDER, KEPT_PER_OFFENCE
from hubsync.core.sqlite import Migration

SCHEMA_VERSION = 5

ENROLLMENT_TABLES = (
    # name -> value; 'hub_id' is written once by init_hub and never changed.
    """
    CREATE TABLE IF NOT EXISTS hub_meta (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) STRICT
    """,
    # The keys are stored as they are: the hub verifies entries with them, so it
    # must hold them (a revoked runtime's are deleted). hub_projects is a sorted
    # JSON array of names.
    """
    CREATE TABLE IF NOT EXISTS enrolled_runtimes (
        runtime_id TEXT PRIMARY KEY,
        state TEXT NOT NULL CHECK (state IN ('active', 'revoked')),
        hub_projects TEXT NOT NULL,
        key BLOB,
        previous_key BLOB,
        previous_valid_until TEXT,
        enrolled_at TEXT NOT NULL,
        rotated_at TEXT,
        revoked_at TEXT
    ) STRICT
    """,
)
"""The tables of version 3: the hub's identity and its enrolled runtimes."""

ALERT_TABLE = (
    """
    CREATE TABLE IF NOT EXISTS sync_alerts (
        alert_id INTEGER PRIMARY KEY,
        reason TEXT NOT NULL,
        hub_project TEXT NOT NULL,
        runtime_id TEXT NOT NULL,
        project_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        sequence INTEGER NOT NULL,
        existing_hash TEXT,
        offered_hash TEXT NOT NULL,
        detail TEXT NOT NULL,
        detected_at TEXT NOT NULL,
        last_detected_at TEXT NOT NULL,
        occurrences INTEGER NOT NULL DEFAULT 1
    ) STRICT
    """,
    # One row per distinct conflict: a redelivered conflicting entry bumps
    # occurrences instead of flooding the table, yet nothing is ever dropped.
    f"""
    CREATE UNIQUE INDEX IF NOT EXISTS sync_alerts_per_offence
        ON sync_alerts (project_id, run_id, sequence, reason, offered_hash)
        WHERE {KEPT_PER_OFFENCE}
    """,
    # One row per sender of refused entries: forgeries under any number of keys
    # are one row counting them.
    f"""
    CREATE UNIQUE INDEX IF NOT EXISTS sync_alerts_per_sender
        ON sync_alerts (hub_project, runtime_id, reason) WHERE {FOLDED_BY_SENDER}
    """,
    """
    CREATE INDEX IF NOT EXISTS sync_alerts_by_last_detected ON sync_alerts (last_detected_at)
    """,
)
"""``sync_alerts`` and its indexes, as of version 4."""

PROJECT_TABLES = (
    # runtime_id: the runtime the project belongs to (the first to write it, or
    # the one an operator moved it to); only it may write the project.
    """
    CREATE TABLE IF NOT EXISTS sync_projects (
        project_id TEXT PRIMARY KEY,
        hub_project TEXT NOT NULL,
        first_seen_at TEXT NOT NULL,
        runtime_id TEXT NOT NULL
    ) STRICT
    """,
    """
    CREATE TABLE IF NOT EXISTS sync_project_moves (
        move_id INTEGER PRIMARY KEY,
        project_id TEXT NOT NULL,
        hub_project TEXT NOT NULL,
        from_runtime_id TEXT NOT NULL,
        to_runtime_id TEXT NOT NULL,
        runs INTEGER NOT NULL,
        moved_at TEXT NOT NULL
    ) STRICT
    """,
)
"""``sync_projects`` and ``sync_project_moves``, as of version 4."""

FOLD_REFUSED_ALERTS = f"""
    INSERT INTO sync_alerts ({ALERT_COLUMNS})
    SELECT alert_id, reason, hub_project, runtime_id, project_id, run_id, sequence,
           existing_hash, offered_hash, detail, first_detected_at, last_detected_at, total
    FROM (
        SELECT *, min(detected_at) OVER sender AS first_detected_at,
               sum(occurrences) OVER sender AS total,
               row_number() OVER (
                   PARTITION BY hub_project, runtime_id, reason
                   ORDER BY last_detected_at DESC, alert_id DESC
               ) AS n
        FROM sync_alerts_v3 WHERE {FOLDED_BY_SENDER}
        WINDOW sender AS (PARTITION BY hub_project, runtime_id, reason)
    ) AS ranked
    WHERE n = 1
"""
"""Version 3's alerts about refused entries, one row per (hub project, claimed runtime,
reason): the latest one's key and hashes, the first detection, the sum of occurrences."""

OWNER_FROM_EARLIEST_RUN = """
    INSERT INTO sync_projects (project_id, hub_project, first_seen_at, runtime_id)
    SELECT p.project_id, p.hub_project, p.first_seen_at, coalesce(
        (SELECT r.home_runtime_id FROM sync_runs AS r WHERE r.project_id = p.project_id
         ORDER BY r.first_seen_at, r.run_id LIMIT 1), '')
    FROM sync_projects_v3 AS p
"""
"""Version 3's projects, each belonging to the home runtime of its earliest run."""

SCHEMA_STATEMENTS = (
    """
    CREATE TABLE IF NOT EXISTS sync_events (
        project_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        sequence INTEGER NOT NULL,
        hub_project TEXT NOT NULL,
        home_runtime_id TEXT NOT NULL,
        event_type TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        received_at TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (project_id, run_id, sequence)
    ) STRICT
    """,
    # The order HubStore.events pages in: a position includes project_id, as two
    # projects of one hub project may share a run id.
    """
    CREATE INDEX IF NOT EXISTS sync_events_by_position
        ON sync_events (hub_project, run_id, project_id, sequence)
    """,
    """
    CREATE TABLE IF NOT EXISTS runtime_presence (
        runtime_id TEXT NOT NULL,
        hub_project TEXT NOT NULL,
        host TEXT NOT NULL,
        heartbeat TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (hub_project, runtime_id)
    ) STRICT
    """,
    *ALERT_TABLE,
    *PROJECT_TABLES,
    """
    CREATE TABLE IF NOT EXISTS sync_runs (
        project_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        home_runtime_id TEXT NOT NULL,
        first_seen_at TEXT NOT NULL,
        PRIMARY KEY (project_id, run_id)
    ) STRICT
    """,
    *ENROLLMENT_TABLES,
    RESYNC_TABLE,
)

MIGRATIONS = (
    Migration(
        from_version=1,
        summary="index sync_events by hub_project, run_id, project_id, sequence (the paging "
        "order of events); drop sync_events_by_hub_project, which it replaces",
        change=(
            """
            CREATE INDEX sync_events_by_position
                ON sync_events (hub_project, run_id, project_id, sequence)
            """,
            "DROP INDEX sync_events_by_hub_project",
        ),
    ),
    Migration(
        from_version=2,
        summary="add hub_meta (the hub id) and enrolled_runtimes (runtime keys and hub projects)",
        change=ENROLLMENT_TABLES,
    ),
    Migration(
        from_version=3,
        summary="a project belongs to a runtime (sync_projects.runtime_id, filled from the "
        "runtime of its earliest run); add sync_project_moves; fold the alerts about refused "
        "entries into one per hub project, claimed runtime and reason",
        change=(
            "ALTER TABLE sync_projects RENAME TO sync_projects_v3",
            *PROJECT_TABLES,
            OWNER_FROM_EARLIEST_RUN,
            "DROP TABLE sync_projects_v3",
            "DROP INDEX sync_alerts_by_last_detected",
            "ALTER TABLE sync_alerts RENAME TO sync_alerts_v3",
            *ALERT_TABLE,
            f"INSERT INTO sync_alerts SELECT * FROM sync_alerts_v3 WHERE {KEPT_PER_OFFENCE}",
            FOLD_REFUSED_ALERTS,
            "DROP TABLE sync_alerts_v3",
        ),
    ),
    Migration(
        from_version=4,
        summary="add sync_resyncs (requests to resync and the runtimes' progress with them)",
        change=(RESYNC_TABLE,),
    ),
)
"""Version N -> N+1 steps, oldest first (see ``hubsync.core.sqlite.Database.ensure_schema``)."""
