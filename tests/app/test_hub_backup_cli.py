"""``hubsync hub backup``: an online, consistent copy of a SQLite hub while a consumer writes it;
its refusals as one line each."""

from __future__ import annotations

import json
import sqlite3
import stat
import textwrap
from pathlib import Path

import pytest

from hubstore import hub_url_from_path
from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import sqlite as core_sqlite
from hubsync.core.sqlite import copy_database
from tests.helpers.operator_support import run_cli
from tests.helpers.relay_player import event_entry, sync_event
from tests.helpers.support import start_python

BATCH = 5

# Ingests batches of BATCH new events until killed: every commit holds BATCH events more
# and one commit more, so a copy of any one commit has events == BATCH * commits.
WRITER = textwrap.dedent(
    f"""
    import sys
    from hubstore import open_store
    from tests.helpers.relay_player import event_entry, sync_event

    store = open_store(sys.argv[1], create_schema=False)
    n = 0
    while True:
        store.ingest([event_entry(sync_event(n * {BATCH} + s)) for s in range(1, {BATCH} + 1)])
        n += 1
        if n == 20:
            print("ready", flush=True)
    """
)


@pytest.fixture
def hub_db(tmp_path: Path) -> Path:
    path = tmp_path / "hub.db"
    with SqliteHubStore(path) as store:
        store.init_hub()
    return path


def stored(path: Path) -> tuple[int, int]:
    """(events, commit counter) of a copy, read with plain SQL."""
    with sqlite3.connect(path) as conn:
        events = conn.execute("SELECT count(*) FROM sync_events").fetchone()[0]
        row = conn.execute("SELECT value FROM hub_meta WHERE name = 'commit_counter'").fetchone()
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    return int(events), int(row[0])


def test_a_copy_taken_while_a_consumer_writes_is_one_commit_whole(
    capsys: pytest.CaptureFixture[str], hub_db: Path, tmp_path: Path
) -> None:
    writer = start_python("-c", WRITER, hub_url_from_path(hub_db))
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        copies = []
        for n in range(3):
            copy = tmp_path / f"copy-{n}.db"
            run = run_cli(capsys, "hub", "backup", "--hub-db", str(hub_db), "--to", str(copy))
            assert run.code == 0, run.err
            assert f"backed up to {copy}" in run.out
            copies.append(copy)
    finally:
        writer.kill()
        writer.communicate()
    for copy in copies:
        events, commits = stored(copy)
        assert commits >= 20 and events == BATCH * commits
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
        assert not copy.with_name(copy.name + ".partial").exists()
    with (
        SqliteHubStore(copies[0], create_schema=False) as restored,
        SqliteHubStore(hub_db, create_schema=False) as original,
    ):
        assert restored.hub_id() == original.hub_id()


def test_an_existing_file_is_kept_unless_forced(
    capsys: pytest.CaptureFixture[str], hub_db: Path, tmp_path: Path
) -> None:
    target = tmp_path / "keep.db"
    target.write_text("precious")
    args = ["hub", "backup", "--hub-db", str(hub_db), "--to", str(target)]
    refused = run_cli(capsys, *args)
    assert (
        refused.code == 2
        and refused.err == f"error: --to: {target} exists; give --force to replace it\n"
    )
    assert target.read_text() == "precious"
    forced = run_cli(capsys, *args, "--force", "--json")
    assert forced.code == 0, forced.err
    document = json.loads(forced.out)
    assert document["to"] == str(target) and document["bytes"] == target.stat().st_size
    with SqliteHubStore(target, create_schema=False) as copy:
        assert copy.hub_id() is not None


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("postgresql://hubsync:secret@db.internal/hubsync", "pg_dump"),
        ("memory://", "nothing to back up"),
    ],
)
def test_a_store_that_is_no_sqlite_file_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, url: str, words: str
) -> None:
    run = run_cli(capsys, "hub", "backup", "--hub-url", url, "--to", str(tmp_path / "x.db"))
    assert run.code == 2 and words in run.err and run.err.count("\n") == 1
    assert "secret" not in run.err
    assert not (tmp_path / "x.db").exists()


def test_a_missing_hub_or_an_unwritable_target_is_one_line(
    capsys: pytest.CaptureFixture[str], hub_db: Path, tmp_path: Path
) -> None:
    missing = run_cli(
        capsys, "hub", "backup", "--hub-db", str(tmp_path / "no.db"), "--to", str(tmp_path / "a")
    )
    assert missing.code == 1 and "no hub database" in missing.err and missing.err.count("\n") == 1
    nowhere = tmp_path / "no-such-dir" / "copy.db"
    run = run_cli(capsys, "hub", "backup", "--hub-db", str(hub_db), "--to", str(nowhere))
    assert run.code == 1 and run.err.startswith("error: cannot write the backup")
    assert run.err.count("\n") == 1


def test_a_big_copy_reports_its_progress_step_by_step(
    monkeypatch: pytest.MonkeyPatch, hub_db: Path, tmp_path: Path
) -> None:
    with SqliteHubStore(hub_db) as store:
        store.ingest([event_entry(sync_event(s, data={"pad": "x" * 2000})) for s in range(1, 200)])
    monkeypatch.setattr(core_sqlite, "BACKUP_STEP_PAGES", 10)
    seen: list[tuple[int, int]] = []
    pages = copy_database(hub_db, tmp_path / "copy.db", progress=lambda c, t: seen.append((c, t)))
    assert len(seen) > 5 and seen[-1] == (pages, pages)
    assert [c for c, _ in seen] == sorted(c for c, _ in seen)
    assert stored(tmp_path / "copy.db")[0] == 199
