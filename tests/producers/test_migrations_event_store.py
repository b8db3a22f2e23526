"""The event store's schema migration 1 -> 2: the outbox rows' bytes move to ``outbox_payloads``.

(A version-1 file goes on through every later step, up to the current version.)

A version-1 file is built with the exact DDL hubsync shipped as version 1 (kept
here, never edited), holding real sync events in every outbox state (acked,
parked conflict and rejected, attempted, never sent). Opened by the relay or by
the operator's commands, it is upgraded after a backup, keeps every row, byte
for byte, and the relay sends exactly its unsent rows.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from hubsync.core.sqlite import backup_path, split_statements
from producers.derivation import StoreIdentity
from producers.registry import RuntimeRegistry
from producers.relay import Relay
from producers.store.event_store import EVENT_STORE_SCHEMA_VERSION, RunEventStore
from tests.helpers.hub_double import ack_everything, stream_events
from tests.helpers.operator_support import run_cli
from tests.helpers.relay_support import make_runtime, relay_settings
from tests.helpers.sqlite_files import columns_of, index_columns, read_only, version_of
from tests.producers.shipped_schemas import EVENT_STORE_SCHEMA_V1

HUB_PROJECT = "alpha"

V1_OUTBOX_COLUMNS = (
    "seq, run_id, sequence, event_type, sync_event, content_hash, created_at, attempted_at, "
    "attempts, next_attempt_at, acked_at, outcome, outcome_reason, outcome_at"
)
# The same row read from a version-2 file: its bytes from their own table.
V2_OUTBOX_COLUMNS = ", ".join(
    "p.sync_event" if c == "sync_event" else f"o.{c}" for c in V1_OUTBOX_COLUMNS.split(", ")
)


def fill(store: RunEventStore) -> dict[str, list[tuple[str, int]]]:
    """Rows in every outbox state; the keys ``(run_id, sequence)`` of each."""
    for sequence in range(1, 7):
        store.append_event("run-a", "step.completed", {"step": f"s{sequence}", "ok": True})
    for sequence in range(1, 4):
        store.append_event("run-b", "step.completed", {"step": f"b{sequence}", "note": "café"})
    seq = {e.sequence: e.seq for e in store.outbox_for_run("run-a")}
    now = time.time()
    store.mark_attempted([seq[1], seq[2], seq[5]], now, base_timeout=3600.0, cap=3600.0)
    store.mark_acked([seq[1], seq[2]], now)
    store.mark_outcome([seq[3]], "conflict", "sequence_reused", now)
    store.mark_rejected([seq[4]], "too_large", now)
    store.set_relay_position("acks:alpha", "1700000000000-0")
    return {
        "acked": [("run-a", 1), ("run-a", 2)],
        "parked": [("run-a", 3), ("run-a", 4)],
        "attempted": [("run-a", 5)],
        "unsent": [("run-a", 6), ("run-b", 1), ("run-b", 2), ("run-b", 3)],
    }


def rewrite_as_old(path: Path, schema: str, version: int, copies: Sequence[str]) -> None:
    """Replace the store at ``path`` by a file of ``schema`` at ``version`` holding the same
    rows, numbers and all: ``copies`` are the statements filling ``main`` from ``source``."""
    source = path.with_name(path.name + ".source")
    os.replace(path, source)
    conn = sqlite3.connect(path, isolation_level=None)
    path.chmod(0o600)  # private, as every hubsync made it
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("ATTACH DATABASE ? AS source", (str(source),))
    conn.execute("BEGIN")
    for statement in split_statements(schema):
        conn.execute(statement)
    conn.execute(f"PRAGMA main.user_version = {version}")
    for statement in copies:
        conn.execute(statement)
    conn.execute("COMMIT")
    conn.execute("DETACH DATABASE source")
    conn.close()
    source.unlink()


def rewrite_as_v1(path: Path) -> None:
    """Replace the store at ``path`` by a version-1 file holding the same rows, numbers and all."""
    copies = [
        f"INSERT INTO main.{table} SELECT * FROM source.{table}"
        for table in ("store_meta", "run_events", "relay_state")
    ]
    copies.append(
        f"INSERT INTO main.outbox ({V1_OUTBOX_COLUMNS}) SELECT {V2_OUTBOX_COLUMNS} "
        "FROM source.outbox AS o JOIN source.outbox_payloads AS p ON p.seq = o.seq"
    )
    rewrite_as_old(path, EVENT_STORE_SCHEMA_V1, 1, copies)


def old_runtime(
    state_dir: Path, rewrite: Callable[[Path], None], version: int
) -> tuple[RuntimeRegistry, Path, dict[str, list[tuple[str, int]]]]:
    """A runtime with one project whose store ``rewrite`` made a ``version`` file, in every
    outbox state."""
    registry, (store,) = make_runtime(state_dir, [HUB_PROJECT])
    with store:
        keys = fill(store)
        path = store.path
    rewrite(path)
    assert version_of(path) == version
    return registry, path, keys


def v1_runtime(state_dir: Path) -> tuple[RuntimeRegistry, Path, dict[str, list[tuple[str, int]]]]:
    """A runtime with one project whose store is a version-1 file in every outbox state."""
    return old_runtime(state_dir, rewrite_as_v1, 1)


def file_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the file, the outbox's with its bytes, whichever version it is."""
    with read_only(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        outbox = (
            f"SELECT {V2_OUTBOX_COLUMNS} FROM outbox AS o "
            "JOIN outbox_payloads AS p ON p.seq = o.seq ORDER BY o.seq"
            if "outbox_payloads" in tables
            else f"SELECT {V1_OUTBOX_COLUMNS} FROM outbox ORDER BY seq"
        )
        found = {"outbox": conn.execute(outbox).fetchall()}
        for table in ("store_meta", "run_events", "relay_state", "sqlite_sequence"):
            found[table] = conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
        return found


def schema_of(path: Path) -> dict[str, Any]:
    """Each table's columns and each index's definition (partial ones with their WHERE)."""
    with read_only(path) as conn:
        shape: dict[str, Any] = {}
        for name, kind, sql in conn.execute("SELECT name, type, sql FROM sqlite_master"):
            if kind == "table":
                shape[name] = columns_of(conn, name)
            elif kind == "index":
                # an autoindex has no SQL: its columns say what it is
                shape[name] = (" ".join(sql.split()) if sql else None, index_columns(conn, name))
        return shape


def fresh_store_schema(tmp_path: Path) -> dict[str, Any]:
    """The schema a new store gets."""
    path = tmp_path / "fresh.sqlite"
    RunEventStore(path, StoreIdentity("proj-new", HUB_PROJECT, "rt-new"), environ={}).close()
    return schema_of(path)


def test_a_v1_store_is_upgraded_when_the_relay_opens_it_and_its_unsent_rows_are_sent(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    registry, path, keys = v1_runtime(tmp_path / "state")
    before = file_rows(path)

    relay = Relay(relay_settings(tmp_path / "state", redis_url), registry)
    relay.run_once()

    assert version_of(path) == EVENT_STORE_SCHEMA_VERSION == 3
    backup = backup_path(path, 1)
    assert version_of(backup) == 1 and file_rows(backup) == before
    assert os.stat(backup).st_mode & 0o777 == 0o600
    assert schema_of(path) == fresh_store_schema(tmp_path)

    sent = stream_events(redis_client, HUB_PROJECT)
    assert [(f["run_id"].decode(), int(f["sequence"])) for f in sent] == keys["unsent"]
    stored = {(r[1], r[2]): (r[4], r[5]) for r in before["outbox"]}
    assert [(f["event"], f["content_hash"].decode()) for f in sent] == [
        stored[key] for key in keys["unsent"]
    ]

    ack_everything(redis_client, HUB_PROJECT)
    relay.run_once()
    relay.close()
    with registry.open_store(registry.projects()[0]) as store:
        counts = store.outbox_counts()
        appended = store.append_event("run-b", "step.completed", {"step": "b4"})
    assert counts == {
        "pending": 1,
        "attempted": 1,
        "acked": 6,
        "conflict": 1,
        "rejected": 1,
        "total": 9,
    }
    assert appended.sequence == 4 and appended.outbox_seq == 10, "numbering carries on"
    registry.close()


@contextmanager
def reopened_store(state_dir: Path) -> Iterator[RunEventStore]:
    """The first project's store of the runtime at ``state_dir``, opened as a relay opens it
    (which upgrades an older file)."""
    with (
        RuntimeRegistry(state_dir, create=False) as registry,
        registry.open_store(registry.projects()[0]) as store,
    ):
        yield store


def test_a_v1_store_keeps_every_row_and_state_byte_for_byte(tmp_path: Path) -> None:
    registry, path, _ = v1_runtime(tmp_path / "state")
    registry.close()
    before = file_rows(path)
    with reopened_store(tmp_path / "state") as store:
        entries = store.outbox_for_run("run-a") + store.outbox_for_run("run-b")
    after = file_rows(path)
    assert after == before
    assert [e.state for e in entries] == ["acked"] * 2 + ["conflict", "rejected"] + [
        "attempted"
    ] + ["unsent"] * 4
    assert {(e.seq, e.sync_event, e.content_hash) for e in entries} == {
        (r[0], r[4], r[5]) for r in before["outbox"]
    }
    # The old bytes' column is gone from the outbox itself.
    with read_only(path) as conn:
        columns = [c[1] for c in columns_of(conn, "outbox")]
    assert "sync_event" not in columns


@pytest.mark.parametrize("command", ["status", "doctor"])
def test_status_and_doctor_open_a_v1_store_upgrading_it_and_show_its_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], redis_url: str, command: str
) -> None:
    state_dir = tmp_path / "state"
    registry, path, _ = v1_runtime(state_dir)
    registry.close()
    env = {"HUBSYNC_REDIS_URL": redis_url}

    if command == "status":
        code, out, err = run_cli(
            capsys, "status", "--no-redis", "--state-dir", str(state_dir), "--json", env=env
        )
        assert code == 0, err
        [project] = json.loads(out)["local"]["projects"]
        shown = {name: project[name] for name in ("pending", "acked", "conflict", "rejected")}
        assert project["state"] == "ok" and shown == {
            "pending": 5,
            "acked": 2,
            "conflict": 1,
            "rejected": 1,
        }
    else:
        code, out, err = run_cli(capsys, "doctor", "--state-dir", str(state_dir), env=env)
        [line] = [line for line in out.splitlines() if line[5:].startswith("project ")]
        assert line.startswith("ok   project "), out + err
        assert "outbox 5 pending, 2 acked, 1 conflict, 1 rejected" in line
    assert version_of(path) == 3 and version_of(backup_path(path, 1)) == 1
