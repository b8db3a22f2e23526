"""PostgreSQL: project ownership under concurrency, and the upgrades from schema versions 1 and 2.

The upgrade is tested from a database built with the exact DDL hubsync shipped
as version 1, kept here as a fixture.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from hubstore import migrate_store, open_store
from hubstore.postgres import sql
from hubstore.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from hubstore.store import HubStore
from hubsync.core.entries import ConflictReason, Outcome, SecurityReason
from tests.contract.postgres_writers import ingested_after
from tests.helpers.postgres_races import blocked_sessions
from tests.helpers.postgres_server import PostgresDatabases
from tests.helpers.relay_player import event_entry, sync_event
from tests.helpers.support import wait_until

# The hub store's schema as shipped at version 1 (hubstore/postgres/schema.py before
# version 2). Never edit: it is what databases in the field were made with.
HUB_SCHEMA_V1 = (
    """
    CREATE TABLE hub_schema_versions (
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
    # One row per distinct offence: a redelivered conflicting entry bumps
    # occurrences instead of flooding the table, yet nothing is ever dropped.
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
        occurrences integer NOT NULL DEFAULT 1,
        UNIQUE (project_id, run_id, sequence, reason, offered_hash)
    )
    """,
    "CREATE INDEX sync_alerts_by_last_detected ON sync_alerts (last_detected_at)",
    "CREATE INDEX sync_alerts_by_hub_project ON sync_alerts (hub_project, alert_id)",
    "CREATE INDEX runtime_presence_by_heartbeat ON runtime_presence (heartbeat)",
    """
    CREATE TABLE sync_projects (
        project_id text COLLATE "C" PRIMARY KEY,
        hub_project text COLLATE "C" NOT NULL,
        first_seen_at timestamptz NOT NULL
    )
    """,
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
)


def make_v1_store(url: str) -> None:
    """A hub store as hubsync's version-1 code made it, holding rows: proj-1 with runs of two
    runtimes (rt-b's first), and refused entries' alerts of one sender under three keys."""
    with psycopg.connect(url) as conn:
        for statement in HUB_SCHEMA_V1:
            conn.execute(statement)
        conn.execute("INSERT INTO hub_schema_versions (version, summary) VALUES (1, 'created')")
        conn.execute(
            "INSERT INTO sync_projects VALUES ('proj-1', 'acme', '2024-01-01T00:00:00Z'), "
            "('proj-2', 'acme', '2024-01-01T00:00:05Z')"
        )
        conn.execute(
            "INSERT INTO sync_runs VALUES ('proj-1', 'run-2', 'rt-a', '2024-01-02T00:00:00Z'), "
            "('proj-1', 'run-1', 'rt-b', '2024-01-01T00:00:00Z'), "
            "('proj-2', 'run-1', 'rt-a', '2024-01-01T00:00:05Z')"
        )
        alerts = [
            ("unauthenticated", "rt-x", "run-1", "a", "2024-01-01T00:00:00Z", 2),
            ("unauthenticated", "rt-x", "run-2", "b", "2024-01-03T00:00:00Z", 1),
            ("unauthenticated", "rt-x", "run-3", "c", "2024-01-02T00:00:00Z", 4),
            ("sequence_reused", "rt-a", "run-1", "d", "2024-01-01T00:00:00Z", 3),
            ("sequence_reused", "rt-a", "run-2", "d", "2024-01-01T00:00:00Z", 1),
        ]
        for reason, runtime, run, offered, seen, occurrences in alerts:
            conn.execute(
                "INSERT INTO sync_alerts (reason, hub_project, runtime_id, project_id, run_id, "
                "sequence, offered_hash, detail, detected_at, last_detected_at, occurrences) "
                "VALUES (%s, 'acme', %s, 'proj-1', %s, 1, %s, %s, %s, %s, %s)",
                (reason, runtime, run, offered * 64, f"seen {run}", seen, seen, occurrences),
            )


def shape_of(url: str) -> dict[str, Any]:
    """The columns of every hub table and the definition of every index: what a schema is."""
    with psycopg.connect(url) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, collation_name "
            "FROM information_schema.columns WHERE table_schema = current_schema() "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "ORDER BY indexname"
        ).fetchall()
    return {"columns": columns, "indexes": [(n, d.split(" ON ", 1)[1]) for n, d in indexes]}


def test_a_v1_store_is_upgraded_each_project_owned_by_its_earliest_runs_runtime(
    postgres_databases: PostgresDatabases,
) -> None:
    url, fresh = postgres_databases.new_url(), postgres_databases.new_url()
    make_v1_store(url)
    change = migrate_store(url)
    assert (change.action, change.from_version, change.to_version) == ("upgraded", 1, 3)
    assert SCHEMA_VERSION == 3
    migrate_store(fresh)
    assert shape_of(url) == shape_of(fresh)
    with psycopg.connect(url) as conn:
        owners = conn.execute(
            "SELECT project_id, runtime_id FROM sync_projects ORDER BY project_id"
        ).fetchall()
    assert owners == [("proj-1", "rt-b"), ("proj-2", "rt-a")]
    with open_store(url, create_schema=False) as store:
        late = event_entry(sync_event(1, run_id="run-3", runtime_id="rt-a"))
        assert store.ingest([late])[0].reason == ConflictReason.NOT_OWNER
        folded = [a for a in store.alerts() if a.reason is SecurityReason.UNAUTHENTICATED]
        [alert] = folded
        assert (alert.run_id, alert.occurrences) == ("run-2", 7)  # the latest, all counted
        assert alert.detected_at.startswith("2024-01-01T00:00:00")
        assert alert.last_detected_at.startswith("2024-01-03T00:00:00")
        conflicts = [a for a in store.alerts() if a.reason is ConflictReason.SEQUENCE_REUSED]
        assert sorted((a.run_id, a.occurrences) for a in conflicts) == [("run-1", 3), ("run-2", 1)]


def test_a_v2_store_gains_the_resync_records(postgres_databases: PostgresDatabases) -> None:
    url, fresh = postgres_databases.new_url(), postgres_databases.new_url()
    make_v1_store(url)
    migrate_store(url)
    with psycopg.connect(url) as conn:  # version 3 is version 2 and sync_resyncs
        conn.execute("DROP TABLE sync_resyncs")
        conn.execute("DELETE FROM hub_schema_versions WHERE version = 3")
    change = migrate_store(url)
    assert (change.action, change.from_version, change.to_version) == ("upgraded", 2, 3)
    assert change.steps == (MIGRATIONS[1].summary,)
    migrate_store(fresh)
    assert shape_of(url) == shape_of(fresh)
    with open_store(url, create_schema=False) as store:
        assert store.resyncs() == [] and store.count_events() == 0


# ----- moves and ingest, concurrently -----


@pytest.fixture
def store(postgres_url: str) -> Iterator[HubStore]:
    with open_store(postgres_url, create_schema=True) as store:
        yield store


def test_an_ingest_waits_for_a_move_in_flight_and_judges_by_its_outcome(
    store: HubStore, postgres_url: str
) -> None:
    store.init_hub()
    store.enroll("rt-b", ["acme"])
    store.ingest([event_entry(sync_event(1))])  # proj-1 is rt-1's
    outcome = ingested_after(  # what move_project does, held open: the lock, then the new owner
        store,
        postgres_url,
        event_entry(sync_event(2)),
        f"SELECT pg_advisory_xact_lock({sql.OWNERS_LOCK})",
        "UPDATE sync_projects SET runtime_id = 'rt-b' WHERE project_id = 'proj-1'",
        what="ingest waiting on the move",
    )
    assert outcome.reason == ConflictReason.NOT_OWNER
    assert store.count_events() == 1


def test_a_move_waits_for_an_ingest_in_flight(store: HubStore, postgres_url: str) -> None:
    store.init_hub()
    store.enroll("rt-b", ["acme"])
    store.ingest([event_entry(sync_event(1))])
    with psycopg.connect(postgres_url) as other:
        # an ingest that read proj-1's owner and has not committed yet
        other.execute("SELECT pg_advisory_xact_lock_shared(%s)", (sql.OWNERS_LOCK,))
        moving: list[object] = []
        thread = threading.Thread(
            target=lambda: moving.append(store.move_project("proj-1", "rt-b"))
        )
        thread.start()
        wait_until(lambda: blocked_sessions(postgres_url) == 1, what="the move waiting")
        assert moving == []
        other.commit()
    thread.join(timeout=60)
    assert len(moving) == 1
    assert store.ingest([event_entry(sync_event(2))])[0].outcome is Outcome.CONFLICT
