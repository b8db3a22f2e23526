"""Schema of the SQLite hub database (version ``SCHEMA_VERSION``, kept in ``PRAGMA user_version``).

The three contract tables (docs/contract.md) plus two ownership tables that make
``project_mismatch`` and ``home_runtime_mismatch`` one indexed lookup per
project and per run, instead of a search through the events; and, since
version 3, the hub's identity (``hub_meta``) and its enrolled runtimes
(``enrolled_runtimes``, keyed by runtime id: one lookup per runtime to verify).

``SCHEMA_STATEMENTS`` is the latest schema, what a new database gets;
``MIGRATIONS`` upgrade an older one step by step (``hubsync.core.sqlite.Migration``).
A schema change is a new version: change the statements, then add the step
that brings a file of the previous version to the same shape.
"""

from __future__ import annotations

from hubsync.core.sqlite import Migration

SCHEMA_VERSION = 3

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
    # One row per distinct offence: a redelivered conflicting entry bumps
    # occurrences instead of flooding the table, yet nothing is ever dropped.
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
        occurrences INTEGER NOT NULL DEFAULT 1,
        UNIQUE (project_id, run_id, sequence, reason, offered_hash)
    ) STRICT
    """,
    """
    CREATE INDEX IF NOT EXISTS sync_alerts_by_last_detected ON sync_alerts (last_detected_at)
    """,
    """
    CREATE TABLE IF NOT EXISTS sync_projects (
        project_id TEXT PRIMARY KEY,
        hub_project TEXT NOT NULL,
        first_seen_at TEXT NOT NULL
    ) STRICT
    """,
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
)
"""Version N -> N+1 steps, oldest first (see ``hubsync.core.sqlite.Database.ensure_schema``)."""
