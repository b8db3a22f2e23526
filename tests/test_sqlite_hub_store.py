"""SQLite specifics of the hub store: schema checks, shared use by many processes, and
the property that delivery order and repetition never change the hub's final state."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubstore.errors import StoreSchemaError
from hubstore.sqlite_store import SqliteHubStore
from hubsync.entries import EventEntry, Outcome
from tests.helpers.relay_player import event_entry, sync_event

ROOT = Path(__file__).resolve().parents[1]

EVENTS: list[EventEntry] = [
    event_entry(sync_event(seq, run_id=run, project_id=project, runtime_id=runtime))
    for project, run, runtime in (
        ("proj-1", "run-1", "rt-1"),
        ("proj-1", "run-2", "rt-2"),
        ("proj-2", "run-1", "rt-1"),
    )
    for seq in range(1, 6)
]


def hub_state(store: SqliteHubStore) -> tuple[object, ...]:
    """Everything a delivery order could influence, minus receive times."""
    events = [
        (e.project_id, e.run_id, e.sequence, e.hub_project, e.home_runtime_id, e.content_hash)
        for e in store.events("acme", limit=10_000)
    ]
    cursors = sorted({(e[0], e[1], store.sync_cursor(e[0], e[1])) for e in events})
    return tuple(events), tuple(cursors), len(store.alerts())


def test_reopening_keeps_everything(tmp_path: Path) -> None:
    with SqliteHubStore(tmp_path / "hub.db") as store:
        store.ingest([EVENTS[0]])
    with SqliteHubStore(tmp_path / "hub.db") as store:
        assert store.ingest([EVENTS[0]])[0].outcome is Outcome.DUPLICATE


def test_a_database_of_another_schema_version_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    SqliteHubStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreSchemaError, match="schema version 99"):
        SqliteHubStore(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 99


def test_a_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(StoreSchemaError, match="invoices"):
        SqliteHubStore(path)


def test_the_database_is_in_wal_mode(tmp_path: Path) -> None:
    SqliteHubStore(tmp_path / "hub.db").close()
    with sqlite3.connect(tmp_path / "hub.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


deliveries = st.lists(
    st.lists(st.integers(min_value=0, max_value=len(EVENTS) - 1), min_size=1, max_size=12),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=deliveries, order=st.permutations(range(len(EVENTS))))
def test_any_interleaving_and_duplication_gives_the_in_order_state(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[int]], order: list[int]
) -> None:
    directory = tmp_path_factory.mktemp("prop")
    with SqliteHubStore(directory / "in-order.db") as reference:
        reference.ingest(EVENTS)
        expected = hub_state(reference)
    with SqliteHubStore(directory / "shuffled.db") as store:
        for batch in batches:
            store.ingest([EVENTS[i] for i in batch])
        # every event is delivered at least once, in some order, in some batches
        for start in range(0, len(order), 4):
            outcomes = store.ingest([EVENTS[i] for i in order[start : start + 4]])
            assert {o.outcome for o in outcomes} <= {Outcome.ACCEPTED, Outcome.DUPLICATE}
        assert hub_state(store) == expected


WRITER = textwrap.dedent(
    """
    import sys
    from hubstore.sqlite_store import SqliteHubStore
    from tests.helpers.relay_player import event_entry, sync_event

    path, worker = sys.argv[1], int(sys.argv[2])
    store = SqliteHubStore(path)
    # every worker writes the same keys, so they race on the very same rows
    for round_ in range(40):
        batch = [
            event_entry(sync_event(round_ * 5 + s, run_id=f"run-{round_ % 4}"))
            for s in range(1, 6)
        ]
        store.ingest(batch)
        store.count_events()
    store.close()
    """
)


def test_several_processes_share_one_database_without_lock_errors(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    SqliteHubStore(path).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(worker)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for worker in range(4)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert b"locked" not in err, err.decode()
        assert proc.returncode == 0, err.decode()
    with SqliteHubStore(path) as store:
        # 200 keys, each written by all four workers, stored once
        assert store.count_events() == 200
        assert store.alerts() == []
