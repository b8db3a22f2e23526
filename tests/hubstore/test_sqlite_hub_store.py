"""SQLite specifics of the hub store: URLs, schema creation and versions, WAL, file modes
and a busy database. The backend-neutral behaviour is in test_hubstore_contract.py."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from hubstore import hub_url_from_path, open_store
from hubstore.sqlite.store import SqliteHubStore, sqlite_path
from hubsync.core.entries import Outcome
from hubsync.core.errors import ConfigError, SchemaVersionError, StoreBusyError
from tests.helpers.relay_player import event_entry, sync_event
from tests.helpers.support import wait_until


def test_three_slashes_then_a_relative_path_four_for_an_absolute_one(tmp_path: Path) -> None:
    assert sqlite_path("sqlite:///hub.db") == Path("hub.db")
    assert sqlite_path("sqlite:///data/hub.db") == Path("data/hub.db")
    assert sqlite_path("sqlite:////var/lib/hub.db") == Path("/var/lib/hub.db")
    assert hub_url_from_path(tmp_path / "hub.db") == f"sqlite:///{tmp_path}/hub.db"
    assert sqlite_path(hub_url_from_path(tmp_path / "hub.db")) == tmp_path / "hub.db"


def test_a_relative_url_opens_the_file_under_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///sub/hub.db", create_schema=True) as store:
        store.ingest([event_entry(sync_event(1))])
    with open_store(f"sqlite:///{tmp_path}/sub/hub.db", create_schema=False) as store:
        assert store.count_events() == 1


@pytest.mark.parametrize(
    "url", ["sqlite://host/hub.db", "sqlite:///", "sqlite:///:memory:", "sqlite:///hub.db?mode=ro"]
)
def test_a_malformed_sqlite_url_is_a_config_error_showing_the_right_form(url: str) -> None:
    with pytest.raises(ConfigError, match=r"sqlite:////absolute/hub\.db"):
        open_store(url, create_schema=True)


def test_reopening_keeps_everything(tmp_path: Path) -> None:
    url = hub_url_from_path(tmp_path / "hub.db")
    with open_store(url, create_schema=True) as store:
        store.ingest([event_entry(sync_event(1))])
    with open_store(url, create_schema=False) as store:
        assert store.ingest([event_entry(sync_event(1))])[0].outcome is Outcome.DUPLICATE


def test_opening_without_creating_refuses_a_missing_file_and_creates_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hub.db"
    with pytest.raises(SchemaVersionError, match=r"run `hubsync hub migrate --hub-url sqlite:///"):
        open_store(hub_url_from_path(path), create_schema=False)
    assert not path.exists()


def test_opening_without_creating_refuses_an_empty_database_and_says_how_to_create_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hub.db"
    path.touch()
    with pytest.raises(SchemaVersionError, match=r"no hubsync hub database schema.*hub migrate"):
        open_store(hub_url_from_path(path), create_schema=False)
    assert path.stat().st_size == 0


def test_a_database_of_a_newer_schema_version_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    SqliteHubStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    for create in (True, False):
        with pytest.raises(SchemaVersionError, match="schema version 99"):
            SqliteHubStore(path, create_schema=create)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 99


def test_a_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    for create in (True, False):
        with pytest.raises(SchemaVersionError, match="invoices"):
            SqliteHubStore(path, create_schema=create)


def test_the_database_is_in_wal_mode(tmp_path: Path) -> None:
    SqliteHubStore(tmp_path / "hub.db").close()
    with sqlite3.connect(tmp_path / "hub.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_new_database_is_private_to_its_owner(tmp_path: Path) -> None:
    previous = os.umask(0o000)  # a umask that would leave everything world-readable
    try:
        with SqliteHubStore(tmp_path / "hub" / "hub.db") as store:
            store.ingest([event_entry(sync_event(1))])
            modes = {
                name: stat.S_IMODE(os.stat(tmp_path / "hub" / name).st_mode)
                for name in ("hub.db", "hub.db-wal", "hub.db-shm")
            }
    finally:
        os.umask(previous)
    assert modes == {"hub.db": 0o600, "hub.db-wal": 0o600, "hub.db-shm": 0o600}
    assert stat.S_IMODE(os.stat(tmp_path / "hub").st_mode) == 0o700


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_a_write_waits_out_a_busy_database_then_lands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "hub.db"
    store = SqliteHubStore(path, busy_timeout=0.0, busy_budget=60.0)
    holder = _hold_write_lock(path)
    results: list[object] = []
    caplog.set_level(logging.DEBUG, logger="hubsync.core.sqlite")
    writer = threading.Thread(
        target=lambda: results.append(store.ingest([event_entry(sync_event(1))]))
    )
    writer.start()
    try:
        wait_until(lambda: "busy (attempt" in caplog.text, what="a retry on the busy database")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    writer.join(timeout=30)
    [[outcome]] = results
    assert outcome.outcome is Outcome.ACCEPTED  # type: ignore[attr-defined]
    assert store.count_events() == 1
    store.close()


def test_a_database_locked_past_the_busy_budget_raises_store_busy(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    store = SqliteHubStore(path, busy_timeout=0.0, busy_budget=0.05)
    holder = _hold_write_lock(path)
    try:
        with pytest.raises(StoreBusyError, match="stayed locked"):
            store.ingest([event_entry(sync_event(1))])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.count_events() == 0
    store.close()


def test_the_hub_database_syncs_every_commit(tmp_path: Path) -> None:
    # An answered "accepted" lets the runtime prune its row: the commit behind it must
    # survive a power cut, so the WAL is synced at each commit (synchronous=FULL is 2).
    with SqliteHubStore(tmp_path / "hub.db") as store:
        assert store._db.connection.execute("PRAGMA synchronous").fetchone()[0] == 2
