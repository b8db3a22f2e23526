"""Schema migrations: every SQLite file hubsync keeps is upgraded at open, forward only,
after a backup copy, in one transaction; a newer version is refused and left untouched.

The hub database's migrations (v1 -> v2 -> v3) are tested from files built
with the exact DDL hubsync shipped as versions 1 and 2, kept here as fixtures.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

from hubstore import hub_url_from_path, migrate_store, open_store
from hubstore.sqlite import schema as sqlite_schema
from hubstore.sqlite.store import SqliteHubStore
from hubsync.core.enrollment import Enrollment, new_key
from hubsync.core.entries import Outcome
from hubsync.core.errors import ConfigError, SchemaVersionError
from hubsync.core.sqlite import Database, Migration, SchemaChange, backup_path, split_statements
from producers import registry
from producers.derivation import StoreIdentity
from producers.effects import ledger
from producers.effects.ledger import EffectsLedger
from producers.registry import REGISTRY_FILE, RuntimeRegistry
from producers.store import event_store
from producers.store.event_store import RunEventStore
from tests.helpers.operator_support import run_cli
from tests.helpers.relay_player import event_entry, sync_event
from tests.helpers.sqlite_files import columns_of, index_columns, read_only, version_of

# The hub database's schema as shipped at version 1 (hubstore/sqlite/schema.py before
# version 2). Never edit: it is what files in the field were made with.
HUB_SCHEMA_V1 = (
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
    """
    CREATE INDEX IF NOT EXISTS sync_events_by_hub_project
        ON sync_events (hub_project, run_id, sequence)
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
)

# The hub database's schema as shipped at version 2 (before the enrollment tables of
# version 3): version 1 with its index replaced by the paging-order one. Never edit.
HUB_SCHEMA_V2 = (
    HUB_SCHEMA_V1[0],
    """
    CREATE INDEX IF NOT EXISTS sync_events_by_position
        ON sync_events (hub_project, run_id, project_id, sequence)
    """,
    *HUB_SCHEMA_V1[2:],
)

# The hub database's schema as shipped at version 3 (before projects had owning runtimes):
# version 2 with the hub id and the enrolled runtimes. Never edit.
HUB_SCHEMA_V3 = (
    *HUB_SCHEMA_V2,
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


V1_EVENTS = [
    # Two projects of one hub project sharing a run id: the case the v2 index orders.
    ("p1", "run-1", 1, "acme", "rt-a", "step", "h" * 64, "2024-01-01T00:00:00.000001Z",
     '{"data":{"note":"caf\u00e9 \u2603"},"sequence":1}'),
    ("p2", "run-1", 1, "acme", "rt-b", "step", "i" * 64, "2024-01-01T00:00:01.000000Z",
     '{"data":{"bytes":"\\u0000 tab\\t"},"sequence":1}'),
    ("p1", "run-1", 2, "acme", "rt-a", "done", "j" * 64, "2024-01-01T00:00:02.000000Z",
     '{"data":{},"sequence":2}'),
]  # fmt: skip
TABLES = ("sync_events", "runtime_presence", "sync_alerts", "sync_projects", "sync_runs")


def make_v1_hub(path: Path) -> Path:
    """A hub database as hubsync version-1 code made it (WAL, version 1), holding rows,
    at ``path``."""
    make_hub(path, HUB_SCHEMA_V1, 1)
    return path


def make_v2_hub(path: Path) -> Path:
    """A hub database as hubsync version-2 code made it (WAL, version 2), holding rows,
    at ``path``."""
    make_hub(path, HUB_SCHEMA_V2, 2)
    return path


def make_v3_hub(path: Path) -> Path:
    """A hub database as hubsync version-3 code made it (WAL, version 3), holding rows,
    at ``path``."""
    make_hub(path, HUB_SCHEMA_V3, 3)
    return path


def make_hub(path: Path, schema: tuple[str, ...], version: int) -> None:
    """A hub database of ``schema`` at ``version``, holding a row in every table."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for statement in schema:
        conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.executemany("INSERT INTO sync_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", V1_EVENTS)
    conn.executemany(
        "INSERT INTO sync_projects VALUES (?, ?, ?)",
        [("p1", "acme", "2024-01-01T00:00:00Z"), ("p2", "acme", "2024-01-01T00:00:01Z")],
    )
    conn.executemany(
        "INSERT INTO sync_runs VALUES (?, ?, ?, ?)",
        [("p1", "run-1", "rt-a", "2024-01-01T00:00:00Z"), ("p2", "run-1", "rt-b", "2024-01-01Z")],
    )
    conn.execute(
        "INSERT INTO runtime_presence VALUES (?, ?, ?, ?, ?)",
        ("rt-a", "acme", "host-a", "2024-01-01T00:00:00Z", '{"pid":1}'),
    )
    conn.execute(
        "INSERT INTO sync_alerts (reason, hub_project, runtime_id, project_id, run_id, sequence, "
        "existing_hash, offered_hash, detail, detected_at, last_detected_at, occurrences) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ("sequence_reused", "acme", "rt-a", "p1", "run-1", 1, "h" * 64, "k" * 64, "other bytes",
         "2024-01-01T00:00:03Z", "2024-01-01T00:00:04Z", 3),
    )  # fmt: skip
    conn.execute("COMMIT")
    conn.close()


def rows_of(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every hub table, each column as its type and bytes (``quote``)."""
    with read_only(path) as conn:
        found = {}
        for table in TABLES:
            quoted = ", ".join(
                f"typeof({c[1]}), quote(CAST({c[1]} AS BLOB))" for c in columns_of(conn, table)
            )
            found[table] = conn.execute(f"SELECT {quoted} FROM {table} ORDER BY rowid").fetchall()
        return found


def shape_of(path: Path) -> dict[str, Any]:
    """Tables with their columns, and indexes with their columns: what a schema is."""
    with read_only(path) as conn:
        shape: dict[str, Any] = {}
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            shape[table] = columns_of(conn, table)
            for index in conn.execute(f"PRAGMA index_list({table})").fetchall():
                # unique?, columns
                shape[f"{table}.{index[1]}"] = (index[2], index_columns(conn, index[1]))
        return shape


def assert_shaped_as_a_new_hub(path: Path, tmp_path: Path) -> None:
    """A migrated hub file has the shape of one created new by this version."""
    fresh = tmp_path / "fresh.db"
    SqliteHubStore(fresh).close()
    assert shape_of(path) == shape_of(fresh), "a migrated file has the shape of a new one"


def assert_rows_kept(path: Path, before: dict[str, list[tuple[Any, ...]]]) -> None:
    """Every row of an upgraded hub file is kept byte for byte; each project gains the runtime of
    its earliest run (p1: rt-a, p2: rt-b in every fixture)."""
    after = rows_of(path)
    assert {t: r for t, r in after.items() if t != "sync_projects"} == {
        t: r for t, r in before.items() if t != "sync_projects"
    }
    owners = [("text", "X'72742D61'"), ("text", "X'72742D62'")]  # rt-a, rt-b
    assert after["sync_projects"] == [
        (*row, *owner) for row, owner in zip(before["sync_projects"], owners, strict=True)
    ]


def assert_backup_of(
    backup: Path, version: int, rows: dict[str, list[tuple[Any, ...]]], shape: dict[str, Any]
) -> None:
    """``backup`` is private to its owner and holds the old file: its version, rows and shape."""
    assert os.stat(backup).st_mode & 0o777 == 0o600
    assert (version_of(backup), rows_of(backup), shape_of(backup)) == (version, rows, shape)


# ----- the hub database: version 1 -> 2 -----


def test_a_v1_hub_database_is_upgraded_at_open_keeping_every_row_byte_for_byte(
    tmp_path: Path,
) -> None:
    path = make_v1_hub(tmp_path / "hub.db")
    before = rows_of(path)
    with SqliteHubStore(path, create_schema=True) as store:
        assert store.schema_change.action == "upgraded"
        assert (store.schema_change.from_version, store.schema_change.to_version) == (1, 5)
        assert store.schema_change.backup == tmp_path / "hub.db.v1.bak"
    assert version_of(path) == sqlite_schema.SCHEMA_VERSION == 5
    assert_rows_kept(path, before)
    assert_shaped_as_a_new_hub(path, tmp_path)
    assert shape_of(path)["sync_events.sync_events_by_position"] == (
        0,
        ["hub_project", "run_id", "project_id", "sequence"],
    )
    assert "sync_events.sync_events_by_hub_project" not in shape_of(path)


# ----- the hub database: version 3 -> 4 -----


def test_a_v3_hub_database_gives_each_project_to_its_earliest_runs_runtime_and_folds_alerts(
    tmp_path: Path,
) -> None:
    path = make_v3_hub(tmp_path / "hub.db")
    conn = sqlite3.connect(path)
    # p1's earliest run is rt-b's (first seen before rt-a's run-1); p2 gets a later run of rt-a
    conn.executemany(
        "INSERT INTO sync_runs VALUES (?, ?, ?, ?)",
        [("p1", "run-0", "rt-b", "2023-12-31T23:59:59Z"), ("p2", "run-2", "rt-a", "2025-01-01Z")],
    )
    forged = [("run-5", "2024-02-01T00:00:00Z", 2), ("run-6", "2024-03-01T00:00:00Z", 1),
              ("run-7", "2024-01-15T00:00:00Z", 5)]  # fmt: skip
    for run, seen, occurrences in forged:
        conn.execute(
            "INSERT INTO sync_alerts (reason, hub_project, runtime_id, project_id, run_id, "
            "sequence, offered_hash, detail, detected_at, last_detected_at, occurrences) "
            "VALUES ('unauthenticated', 'acme', 'rt-x', 'p1', ?, 1, ?, 'forged', ?, ?, ?)",
            (run, run * 10, seen, seen, occurrences),
        )
    conn.commit()
    conn.close()
    with SqliteHubStore(path, create_schema=True) as store:
        change = store.schema_change
        assert (change.from_version, change.to_version, change.backup) == (
            3, 5, backup_path(path, 3),
        )  # fmt: skip
        assert change.steps == tuple(m.summary for m in sqlite_schema.MIGRATIONS[2:])
        [folded] = [a for a in store.alerts() if a.reason.value == "unauthenticated"]
        assert (folded.run_id, folded.occurrences) == ("run-6", 8)  # the latest, all counted
        assert (folded.detected_at, folded.last_detected_at) == (
            "2024-01-15T00:00:00Z", "2024-03-01T00:00:00Z",
        )  # fmt: skip
        [conflict] = [a for a in store.alerts() if a.reason.value == "sequence_reused"]
        assert conflict.occurrences == 3
        outcomes = store.ingest(
            [
                event_entry(sync_event(1, run_id="run-8", project_id="p1", runtime_id="rt-b")),
                event_entry(sync_event(1, run_id="run-8", project_id="p2", runtime_id="rt-b")),
                event_entry(sync_event(1, run_id="run-9", project_id="p1", runtime_id="rt-a")),
            ]
        )
        assert [o.reason for o in outcomes] == [None, None, "not_owner"]
    conn = sqlite3.connect(path)
    owners = conn.execute("SELECT project_id, runtime_id FROM sync_projects ORDER BY 1").fetchall()
    conn.close()
    assert owners == [("p1", "rt-b"), ("p2", "rt-b")]
    assert_shaped_as_a_new_hub(path, tmp_path)


# ----- the hub database: version 4 -> 5 -----


def make_v4_hub(path: Path) -> Path:
    """A hub database of version 4, holding rows: version 5 has exactly one table more
    (``sync_resyncs``), so it is a new database without it."""
    make_v3_hub(path)
    SqliteHubStore(path, create_schema=True).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE sync_resyncs")
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    backup_path(path, 3).unlink()
    return path


def test_a_v4_hub_database_gains_the_resync_records_keeping_every_row(tmp_path: Path) -> None:
    path = make_v4_hub(tmp_path / "hub.db")
    before = rows_of(path)
    with SqliteHubStore(path, create_schema=True) as store:
        change = store.schema_change
        assert (change.from_version, change.to_version, change.backup) == (
            4,
            5,
            backup_path(path, 4),
        )
        assert change.steps == (sqlite_schema.MIGRATIONS[3].summary,)
        assert store.resyncs() == []
    assert rows_of(path) == before  # byte for byte, the projects' owners included
    assert_shaped_as_a_new_hub(path, tmp_path)


# ----- the hub database: version 2 -> 3 -----


def test_a_v2_hub_database_is_upgraded_at_open_keeping_every_row_byte_for_byte(
    tmp_path: Path,
) -> None:
    path = make_v2_hub(tmp_path / "hub.db")
    before, v2_shape = rows_of(path), shape_of(path)
    with SqliteHubStore(path, create_schema=True) as store:
        change = store.schema_change
        assert (change.action, change.from_version, change.to_version) == ("upgraded", 2, 5)
        assert change.backup == backup_path(path, 2)
        assert change.steps == tuple(m.summary for m in sqlite_schema.MIGRATIONS[1:])
    assert version_of(path) == 5
    assert_rows_kept(path, before)
    assert_shaped_as_a_new_hub(path, tmp_path)
    assert {"hub_meta", "enrolled_runtimes"} <= set(shape_of(path)) - set(v2_shape)
    assert_backup_of(backup_path(path, 2), 2, before, v2_shape)


def test_an_upgraded_v2_hub_database_has_no_hub_id_until_init_then_enrolls(
    tmp_path: Path,
) -> None:
    path = make_v2_hub(tmp_path / "hub.db")
    with open_store(hub_url_from_path(path), create_schema=True) as store:
        assert store.hub_id() is None and store.enrolled_runtimes() == []
        hub_id = store.init_hub()
        enrollment = store.enroll("rt-a", ["acme"])
        assert store.count_events(hub_project="acme") == 3
    with open_store(hub_url_from_path(path), create_schema=False) as store:
        assert store.hub_id() == hub_id
        record = store.enrolled_runtime("rt-a")
        assert record is not None and enrollment.key in record.keys_at(record.enrolled_at)


def test_reading_a_v2_hub_database_without_creating_is_refused_untouched(tmp_path: Path) -> None:
    path = make_v2_hub(tmp_path / "hub.db")
    image = path.read_bytes()
    with pytest.raises(SchemaVersionError, match="schema version 2; this hubsync needs version 5"):
        open_store(hub_url_from_path(path), create_schema=False)
    assert path.read_bytes() == image


def test_the_backup_of_an_upgraded_hub_database_is_a_private_valid_v1_database(
    tmp_path: Path,
) -> None:
    path = make_v1_hub(tmp_path / "hub.db")
    before, v1_shape = rows_of(path), shape_of(path)
    SqliteHubStore(path, create_schema=True).close()
    backup = tmp_path / "hub.db.v1.bak"
    assert backup == backup_path(path, 1)
    assert_backup_of(backup, 1, before, v1_shape)
    with read_only(backup) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert not list(tmp_path.glob("*.partial")), "no half-copied backup is left behind"


def test_an_upgraded_hub_database_keeps_its_verdicts_and_pages(tmp_path: Path) -> None:
    path = make_v1_hub(tmp_path / "hub.db")
    url = hub_url_from_path(path)
    with open_store(url, create_schema=True) as store:
        assert store.count_events(hub_project="acme") == 3
        assert [(e.project_id, e.sequence) for e in store.events("acme", run_id="run-1")] != []
        new = event_entry(sync_event(1, run_id="run-2", project_id="p1", runtime_id="rt-a"))
        assert store.ingest([new])[0].outcome is Outcome.ACCEPTED
        squat = event_entry(sync_event(1, run_id="run-3", project_id="p1", runtime_id="rt-b"))
        assert store.ingest([squat])[0].reason == "not_owner"
    with open_store(url, create_schema=False) as store:
        assert store.count_events(hub_project="acme") == 4


def test_reading_a_v1_hub_database_without_creating_is_refused_naming_hub_migrate_untouched(
    tmp_path: Path,
) -> None:
    path = make_v1_hub(tmp_path / "hub.db")
    image = path.read_bytes()
    with pytest.raises(SchemaVersionError) as info:
        open_store(hub_url_from_path(path), create_schema=False)
    message = str(info.value)
    assert "schema version 1" in message and "needs version 5" in message
    assert f"hubsync hub migrate --hub-url {hub_url_from_path(path)}" in message
    assert path.read_bytes() == image
    assert not backup_path(path, 1).exists()


def test_hub_migrate_upgrades_then_finds_the_database_current(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HUBSYNC_HUB_URL", "HUBSYNC_HUB_DB"):
        monkeypatch.delenv(name, raising=False)
    path = make_v1_hub(tmp_path / "hub.db")
    code, out, _ = run_cli(capsys, "hub", "migrate", "--hub-url", hub_url_from_path(path))
    assert code == 0
    assert out.startswith(f"hub store {path}: upgraded from schema version 1 to 5; ")
    assert f"kept at {path}.v1.bak" in out and "1 -> 2: index sync_events" in out
    assert "2 -> 3: add hub_meta (the hub id) and enrolled_runtimes" in out
    assert "3 -> 4: a project belongs to a runtime" in out
    code, out, _ = run_cli(capsys, "hub", "migrate", "--hub-db", str(path), "--json")
    assert code == 0
    document = json.loads(out)
    assert document.pop("hub_id").startswith("hub-")  # the first migrate gave it
    assert document == {
        "store": str(path),
        "action": "current",
        "from_version": 5,
        "to_version": 5,
        "backup": None,
        "steps": [],
        "hub_id_created": False,
    }


def test_hub_migrate_creates_a_missing_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HUBSYNC_HUB_URL", "HUBSYNC_HUB_DB"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "new" / "hub.db"
    code, out, _ = run_cli(capsys, "hub", "migrate", "--hub-db", str(path), "--json")
    assert code == 0
    document = json.loads(out)
    assert (document["action"], document["from_version"], document["to_version"]) == (
        "created",
        0,
        5,
    )
    with open_store(hub_url_from_path(path), create_schema=False) as store:
        assert store.count_events() == 0


def test_hub_migrate_refuses_a_newer_database_untouched_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HUBSYNC_HUB_URL", "HUBSYNC_HUB_DB"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "hub.db"
    SqliteHubStore(path).close()
    set_version(path, 6)
    image = path.read_bytes()
    code, out, err = run_cli(capsys, "hub", "migrate", "--hub-db", str(path))
    assert (code, out) == (1, "")
    assert "schema version 6, newer than this hubsync knows" in err
    assert "Traceback" not in err
    assert path.read_bytes() == image


def test_hub_migrate_needs_a_hub_and_refuses_an_in_memory_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HUBSYNC_HUB_URL", "HUBSYNC_HUB_DB"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = run_cli(capsys, "hub", "migrate")
    assert code == 2 and "--hub-url: missing" in err
    with pytest.raises(ConfigError, match="no schema to migrate"):
        migrate_store("memory://")


# ----- every file: a newer version is refused, byte for byte untouched -----


def set_version(path: Path, version: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()


IDENTITY = StoreIdentity("proj-1", "acme", "rt-test-1")


class Closable(Protocol):
    """An opened file: a registry, a store, a ledger."""

    def close(self) -> None: ...


def open_registry(path: Path) -> Closable:
    return RuntimeRegistry(path.parent)


def open_event_store(path: Path) -> Closable:
    return RunEventStore(path, IDENTITY, environ={})


def open_ledger(path: Path) -> Closable:
    return EffectsLedger(path)


def open_hub(path: Path) -> Closable:
    return SqliteHubStore(path, create_schema=True)


def read_hub(path: Path) -> Closable:
    return SqliteHubStore(path, create_schema=False)


FILES: dict[str, tuple[str, Callable[[Path], Closable], int]] = {
    "registry": (REGISTRY_FILE, open_registry, registry.REGISTRY_SCHEMA_VERSION),
    "event store": ("store.sqlite", open_event_store, event_store.EVENT_STORE_SCHEMA_VERSION),
    "effects ledger": ("effects.sqlite", open_ledger, ledger.SCHEMA_VERSION),
    "hub store": ("hub.db", open_hub, sqlite_schema.SCHEMA_VERSION),
    "hub store, read only": ("hub.db", read_hub, sqlite_schema.SCHEMA_VERSION),
}


@pytest.mark.parametrize("kind", sorted(FILES))
def test_a_file_of_a_newer_version_is_refused_and_left_byte_identical(
    tmp_path: Path, kind: str
) -> None:
    name, opener, version = FILES[kind]
    path = tmp_path / name
    (open_hub if kind == "hub store, read only" else opener)(path).close()
    set_version(path, version + 1)
    image = path.read_bytes()
    with pytest.raises(SchemaVersionError, match=f"schema version {version + 1}, newer than"):
        opener(path)
    assert path.read_bytes() == image
    assert sorted(p.name for p in tmp_path.iterdir() if ".bak" in p.name) == []


# ----- the runtime registry: version 1 -> 2 -----

# The registry's schema as shipped at version 1 (producers/registry.py before the
# enrollment table of version 2). Never edit.
REGISTRY_SCHEMA_V1 = """
CREATE TABLE registry_meta (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE projects (
  position INTEGER PRIMARY KEY,
  project_id TEXT NOT NULL UNIQUE,
  project_root TEXT NOT NULL UNIQUE,
  hub_project TEXT NOT NULL,
  home_runtime_id TEXT NOT NULL,
  store_path TEXT NOT NULL,
  registered_at TEXT NOT NULL
);
"""


def make_v1_registry(state_dir: Path) -> Path:
    """A registry as hubsync version-1 code made it, for runtime rt-old, with one project."""
    state_dir.mkdir()
    path = state_dir / REGISTRY_FILE
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for statement in split_statements(REGISTRY_SCHEMA_V1):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.executemany(
        "INSERT INTO registry_meta VALUES (?, ?)",
        [("runtime_id", "rt-old"), ("created_at", "2024-01-01T00:00:00.000000Z")],
    )
    conn.execute(
        "INSERT INTO projects (project_id, project_root, hub_project, home_runtime_id, "
        "store_path, registered_at) VALUES (?, ?, ?, ?, ?, ?)",
        ("shop-1", "/src/shop", "acme", "rt-old", "stores/shop-1.sqlite", "2024-01-01Z"),
    )
    conn.execute("COMMIT")
    conn.close()
    return path


def registry_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with read_only(path) as conn:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
            for table in ("registry_meta", "projects")
        }


def test_a_v1_registry_is_upgraded_at_open_keeping_its_runtime_and_projects(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    path = make_v1_registry(state_dir)
    before = registry_rows(path)
    with RuntimeRegistry(state_dir, create=False) as opened:
        assert opened.runtime_id == "rt-old"
        assert [p.project_id for p in opened.projects()] == ["shop-1"]
        assert opened.enrollment() is None
        enrollment = Enrollment("hub-0123456789abcdef", "rt-old", ("acme",), new_key())
        opened.join(enrollment)
    assert version_of(path) == registry.REGISTRY_SCHEMA_VERSION == 2
    assert registry_rows(path) == before
    fresh = tmp_path / "fresh"
    RuntimeRegistry(fresh, "rt-new").close()
    assert shape_of(path) == shape_of(fresh / REGISTRY_FILE)
    backup = backup_path(path, 1)
    assert version_of(backup) == 1 and registry_rows(backup) == before
    assert os.stat(backup).st_mode & 0o777 == 0o600
    with RuntimeRegistry(state_dir, create=False) as reopened:
        assert reopened.enrollment() == enrollment


# ----- the runtime files run their module's migrations -----


def next_step(from_version: int) -> Migration:
    """A step past a module's latest version, for a test to add."""
    return Migration(
        from_version=from_version,
        summary="add a table",
        change=("CREATE TABLE added_in_next (x INTEGER)", "INSERT INTO added_in_next VALUES (42)"),
    )


RUNTIME_MODULES: dict[str, tuple[str, Callable[[Path], Closable], Any, str, str]] = {
    "registry": (REGISTRY_FILE, open_registry, registry, "REGISTRY_SCHEMA_VERSION",
                 "REGISTRY_MIGRATIONS"),
    "event store": ("store.sqlite", open_event_store, event_store, "EVENT_STORE_SCHEMA_VERSION",
                    "EVENT_STORE_MIGRATIONS"),
    "effects ledger": ("effects.sqlite", open_ledger, ledger, "SCHEMA_VERSION", "MIGRATIONS"),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(RUNTIME_MODULES))
def test_a_runtime_file_is_upgraded_at_open_by_its_modules_migrations(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, opener, module, version_name, migrations_name = RUNTIME_MODULES[kind]
    path = tmp_path / name
    opener(path).close()
    latest = getattr(module, version_name)
    assert version_of(path) == latest
    monkeypatch.setattr(module, version_name, latest + 1)
    monkeypatch.setattr(
        module, migrations_name, (*getattr(module, migrations_name), next_step(latest))
    )
    opener(path).close()
    assert version_of(path) == latest + 1
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT x FROM added_in_next").fetchall() == [(42,)]
    conn.close()
    assert version_of(backup_path(path, latest)) == latest


# ----- the mechanism (hubsync.core.sqlite.Database) -----

LATEST = ("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, size INTEGER)",)


def v1_file(path: Path) -> None:
    with Database(path) as db:
        db.ensure_schema(
            1, ("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)",), "test file"
        )
        db.write(lambda c: c.executemany("INSERT INTO items (name) VALUES (?)", [("a",), ("b",)]))


def add_size(connection: sqlite3.Connection) -> None:
    connection.execute("ALTER TABLE items ADD COLUMN size INTEGER")
    connection.execute("UPDATE items SET size = length(name) * 10")


STEPS = (
    Migration(1, "add size", add_size),
    Migration(2, "uppercase names", ("UPDATE items SET name = upper(name)",)),
)


def test_a_fresh_file_gets_the_latest_schema_directly_without_a_backup(tmp_path: Path) -> None:
    with Database(tmp_path / "f.db") as db:
        change = db.ensure_schema(3, LATEST, "test file", STEPS)
        assert change == SchemaChange(0, 3)
        assert change.action == "created"
        assert db.ensure_schema(3, LATEST, "test file", STEPS).action == "current"
    assert list(tmp_path.glob("*.bak")) == []


def test_an_old_file_runs_every_step_in_order_in_one_go(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    v1_file(path)
    with Database(path) as db:
        change = db.ensure_schema(3, LATEST, "test file", STEPS)
        rows = db.read(lambda c: c.execute("SELECT name, size FROM items ORDER BY id").fetchall())
    assert change == SchemaChange(1, 3, tmp_path / "f.db.v1.bak", ("add size", "uppercase names"))
    assert rows == [("A", 10), ("B", 10)]
    assert version_of(path) == 3


def test_a_failing_step_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    v1_file(path)
    broken = (STEPS[0], Migration(2, "broken", ("UPDATE no_such_table SET x = 1",)))
    with Database(path) as db, pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        db.ensure_schema(3, LATEST, "test file", broken)
    assert version_of(path) == 1
    conn = sqlite3.connect(path)
    assert [r[1] for r in conn.execute("PRAGMA table_info(items)")] == ["id", "name"]
    conn.close()
    with Database(path) as db:  # fixed, the next open upgrades it
        assert db.ensure_schema(3, LATEST, "test file", STEPS).action == "upgraded"


def test_a_version_no_step_starts_from_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    v1_file(path)
    image = path.read_bytes()
    with Database(path) as db, pytest.raises(SchemaVersionError, match="from version 2 on only"):
        db.ensure_schema(3, LATEST, "test file", STEPS[1:])
    assert path.read_bytes() == image
    assert not backup_path(path, 1).exists()


def test_steps_must_be_numbered_one_after_another_up_to_the_version(tmp_path: Path) -> None:
    with Database(tmp_path / "f.db") as db:
        for steps, version in [(STEPS, 4), (STEPS[::-1], 3), (STEPS, 2), (STEPS[:1], 3)]:
            with pytest.raises(ValueError, match="one version at a time"):
                db.ensure_schema(version, LATEST, "test file", steps)
    with pytest.raises(TypeError, match="not one string"):
        Migration(1, "one string", "CREATE TABLE x (y)")  # type: ignore[arg-type]


def test_two_processes_opening_an_old_file_at_once_upgrade_it_once(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    v1_file(path)
    counted = (
        Migration(1, "count", ("CREATE TABLE upgrades (n)", "INSERT INTO upgrades VALUES (1)")),
    )
    start = threading.Barrier(2)
    changes: list[SchemaChange] = []

    def open_it() -> None:
        with Database(path) as db:
            start.wait(timeout=10)
            changes.append(db.ensure_schema(2, LATEST, "test file", counted))

    threads = [threading.Thread(target=open_it) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(c.action for c in changes) == ["current", "upgraded"]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM upgrades").fetchone()[0] == 1
    conn.close()
