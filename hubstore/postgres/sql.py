"""The statements of the PostgreSQL hub store (``store``) apart from its Python: its dialect of
the statements every SQL store shares, and the batch statements of its own ingest.

Every batch statement takes whole columns as arrays and reads them with
``unnest``: one statement per table however large the batch, and the same
text every time, so psycopg prepares it once per connection. Inserts of keys
are ``ON CONFLICT DO NOTHING`` and count what they inserted: fewer rows than
sent means another writer committed one of the keys first (the store then
judges the batch again). Keys arrive sorted, so two writers lock shared keys
in one order and never deadlock each other.
"""

from __future__ import annotations

from hubstore import sql_statements as statements
from hubstore.sql_statements import EVENT_COLUMNS, Dialect

POSTGRES = Dialect(
    mark="%s",
    zero="0::bigint",
    probe_join="JOIN",
    gap_lists=(
        "array_agg(first ORDER BY first) FILTER (WHERE n <= {mark}) AS firsts,\n"
        "               array_agg(last ORDER BY first) FILTER (WHERE n <= {mark}) AS lasts"
    ),
    gap_columns="g.firsts, g.lasts",
)
"""PostgreSQL's words in the statements every SQL hub store shares (``hubstore.sql_statements``);
the reads and small writes are those, the batch writes of ingest are below."""

# What the store holds for a batch: hashes of its keys (kind 0), owners of its
# projects (1: the runtime in the third column, the hub project in the last),
# homes of its runs (2); one statement, one round trip. Each key
# is one primary-key probe however large the table grows: the LATERAL
# subqueries (LIMIT 1 keeps the planner from flattening them into a hash join
# that would read the whole table) run once per key of the batch.
KNOWN = """
    SELECT 0, k.project_id, k.run_id, k.sequence, e.content_hash
    FROM unnest(%b::text[], %b::text[], %b::bigint[]) AS k(project_id, run_id, sequence)
    CROSS JOIN LATERAL (
        SELECT content_hash FROM sync_events
        WHERE project_id = k.project_id AND run_id = k.run_id AND sequence = k.sequence
        LIMIT 1
    ) AS e
    UNION ALL
    SELECT 1, o.project_id, o.runtime_id, NULL, o.hub_project
    FROM sync_projects AS o WHERE o.project_id = ANY(%b::text[])
    UNION ALL
    SELECT 2, k.project_id, k.run_id, NULL, h.home_runtime_id
    FROM unnest(%b::text[], %b::text[]) AS k(project_id, run_id)
    CROSS JOIN LATERAL (
        SELECT home_runtime_id FROM sync_runs
        WHERE project_id = k.project_id AND run_id = k.run_id
        LIMIT 1
    ) AS h
"""

INSERT_PROJECTS = """
    WITH inserted AS (
        INSERT INTO sync_projects (project_id, hub_project, first_seen_at, runtime_id)
        SELECT k.project_id, k.hub_project, %b, k.runtime_id
        FROM unnest(%b::text[], %b::text[], %b::text[]) AS k(project_id, hub_project, runtime_id)
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT count(*) FROM inserted
"""

INSERT_RUNS = """
    WITH inserted AS (
        INSERT INTO sync_runs (project_id, run_id, home_runtime_id, first_seen_at)
        SELECT k.project_id, k.run_id, k.home_runtime_id, %b
        FROM unnest(%b::text[], %b::text[], %b::text[]) AS k(project_id, run_id, home_runtime_id)
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT count(*) FROM inserted
"""

INSERT_EVENTS = f"""
    WITH inserted AS (
        INSERT INTO sync_events ({EVENT_COLUMNS})
        SELECT k.project_id, k.run_id, k.sequence, k.hub_project, k.home_runtime_id,
               k.event_type, k.content_hash, %b, k.record
        FROM unnest(%b::text[], %b::text[], %b::bigint[], %b::text[], %b::text[], %b::text[],
                    %b::text[], %b::text[])
             AS k(project_id, run_id, sequence, hub_project, home_runtime_id, event_type,
                  content_hash, record)
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT count(*) FROM inserted
"""

# The alerts of a batch, each counted (occurrences): one upsert cannot touch a
# row twice, so the batch's repeats of one alert arrive as one row.
_ALERTS = f"""
    INSERT INTO sync_alerts ({statements.INSERTED_ALERT_COLUMNS}, occurrences)
    SELECT k.reason, k.hub_project, k.runtime_id, k.project_id, k.run_id, k.sequence,
           k.existing_hash, k.offered_hash, k.detail, %b, %b, k.occurrences
    FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::bigint[],
                %b::text[], %b::text[], %b::text[], %b::integer[])
         AS k(reason, hub_project, runtime_id, project_id, run_id, sequence, existing_hash,
              offered_hash, detail, occurrences)
"""

UPSERT_CONFLICT_ALERTS = f"""
    {_ALERTS}
    {statements.PER_OFFENCE_CONFLICT} DO UPDATE SET
        last_detected_at = excluded.last_detected_at,
        occurrences = sync_alerts.occurrences + excluded.occurrences
"""
"""Conflicts: one row per (key, reason, offered hash)."""

UPSERT_SECURITY_ALERTS = f"""
    {_ALERTS}
    {statements.PER_SENDER_CONFLICT} DO UPDATE SET
        {statements.LATEST_EXAMPLE},
        last_detected_at = excluded.last_detected_at,
        occurrences = sync_alerts.occurrences + excluded.occurrences
"""
"""Refused entries: one row per (hub project, claimed runtime, reason)."""

UPSERT_PRESENCE = """
    INSERT INTO runtime_presence (runtime_id, hub_project, host, heartbeat, record)
    SELECT k.runtime_id, k.hub_project, k.host, %b, k.record
    FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[])
         AS k(runtime_id, hub_project, host, record)
    ON CONFLICT (hub_project, runtime_id) DO UPDATE SET
        host = excluded.host, heartbeat = excluded.heartbeat, record = excluded.record
"""

# The missing ranges of one run, through its primary key.
GAPS = statements.gaps(POSTGRES)

# The run's highest sequence with no gap below it, in one statement (one snapshot).
CURSOR = f"""
    SELECT coalesce(
        (SELECT first - 1 FROM ({GAPS}) AS g(first, last)),
        (SELECT max(sequence) FROM sync_events WHERE project_id = %s AND run_id = %s),
        0
    )
"""

OWNERS_LOCK = 0x6875_6273_796E_6303
"""The ``pg_advisory_xact_lock`` key ("hubsync" and 3) that keeps ingest and project moves
apart: every ingest holds it shared, a move alone. Ingest trusts the owners it read, and a
move is the one write that changes a project's or a run's runtime."""

RUN_LOCK_CLASS = 0x6875_6272
"""The first key of the two-key ``pg_advisory_xact_lock`` an ingest takes on each run of its
batch ("hubr"); the second is the run's ``store.run_lock``. Two-key advisory locks are a key
space of their own, apart from the one-key locks here."""

LOCK_RUNS = """
    SELECT count(pg_advisory_xact_lock(%s::integer, k)) FROM unnest(%s::integer[]) AS k
"""
"""Every run lock of a batch in one statement, in the order of the array, which the caller
sorts: ``unnest`` yields an array's elements in storage order, and the aggregate takes each
row as the scan yields it, so the locks are taken one by one in that order."""

MAX_RUN_LOCKS = 64
"""A batch of more distinct runs than this (a consumer reading many runtimes' streams at once)
takes no run lock, only ``OWNERS_LOCK`` shared, as every ingest did before run locks: no
transaction fills the server's shared lock table (``max_locks_per_transaction`` is 64 per
connection by default), and such batches still run side by side, a lost race costing a
retry."""

ENROLLMENT_LOCK = 0x6875_6273_796E_6302
"""The ``pg_advisory_xact_lock`` key that makes enroll and revoke one at a time per hub
("hubsync" and 2): each reads a runtime's record, then writes the next one."""
