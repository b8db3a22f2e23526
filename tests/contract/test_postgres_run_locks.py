"""PostgreSQL ingest takes a lock on each run of its batch before it reads: two consumers whose
batches share a new run are judged one after the other instead of both inserting the run and
one of them judging its batch again (``hubstore.postgres.store``, the module docstring)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import psycopg
import pytest

from hubstore import open_store
from hubstore.postgres import sql
from hubstore.postgres.store import run_lock
from hubstore.store import HubStore
from hubsync.core.entries import EventEntry, Outcome
from tests.contract.postgres_writers import insert_uncommitted
from tests.helpers.postgres_races import Ingesting, blocked_sessions
from tests.helpers.relay_player import event_entry, sync_event
from tests.helpers.support import wait_until

LOST = "lost a race for a key"


@pytest.fixture
def store(postgres_url: str) -> Iterator[HubStore]:
    with open_store(postgres_url, create_schema=True) as store:
        store.ingest([event_entry(sync_event(1, run_id="run-0"))])  # the project is known
        yield store


def test_batches_sharing_a_new_run_are_judged_one_after_the_other_without_a_lost_race(
    store: HubStore, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="hubstore.postgres.connection")
    first = [event_entry(sync_event(s)) for s in (1, 2, 3)]
    second = [event_entry(sync_event(s)) for s in (4, 5)]  # the same new run, run-1
    with psycopg.connect(postgres_url) as gate:
        insert_uncommitted(gate, first[2])  # holds the first ingest up at sequence 3
        ingesting_first = Ingesting(store, first)  # has inserted run-1, uncommitted
        wait_until(lambda: blocked_sessions(postgres_url) == 1, what="first ingest at seq 3")
        ingesting_second = Ingesting(store, second)
        # without the run's lock it would read run-1 as new and insert it too, then lose
        wait_until(lambda: blocked_sessions(postgres_url) == 2, what="second ingest waiting")
        gate.rollback()
    assert [o.outcome for o in ingesting_first.result()] == [Outcome.ACCEPTED] * 3  # type: ignore[attr-defined]
    assert [o.outcome for o in ingesting_second.result()] == [Outcome.ACCEPTED] * 2  # type: ignore[attr-defined]
    assert store.count_events(run_id="run-1") == 5
    assert LOST not in caplog.text


def test_batches_sharing_no_run_do_not_wait_for_each_other(
    store: HubStore, postgres_url: str
) -> None:
    with psycopg.connect(postgres_url) as gate:
        insert_uncommitted(gate, event_entry(sync_event(3)))  # holds run-1's ingest up
        held = Ingesting(store, [event_entry(sync_event(s)) for s in (1, 2, 3)])
        wait_until(lambda: blocked_sessions(postgres_url) == 1, what="run-1's ingest at seq 3")
        [other] = store.ingest([event_entry(sync_event(1, run_id="run-2"))])  # not blocked
        assert other.outcome is Outcome.ACCEPTED
        gate.rollback()
    assert len(held.result()) == 3
    assert store.count_events() == 5


def advisory_locks_while_held(
    store: HubStore, url: str, batch: list[EventEntry]
) -> set[tuple[int, int, int, str]]:
    """The advisory locks the ingest of ``batch`` holds while its last event's key is held up
    by another writer: (classid, objid, objsubid, mode) as ``pg_locks`` shows them."""
    with psycopg.connect(url) as gate:
        insert_uncommitted(gate, batch[-1])
        held = Ingesting(store, batch)
        wait_until(lambda: blocked_sessions(url) == 1, what="the ingest waiting")
        rows = gate.execute(
            "SELECT classid::bigint, objid::bigint, objsubid, mode FROM pg_locks "
            "WHERE locktype = 'advisory' AND pid <> pg_backend_pid() AND granted"
        ).fetchall()
        gate.rollback()
    assert len(held.result()) == len(batch)
    return {(int(c), int(o), int(n), str(m)) for c, o, n, m in rows}


OWNERS_SHARED = (sql.OWNERS_LOCK >> 32, sql.OWNERS_LOCK & 0xFFFF_FFFF, 1, "ShareLock")


def test_an_ingest_holds_the_owners_lock_shared_and_one_lock_per_run_of_its_batch(
    store: HubStore, postgres_url: str
) -> None:
    runs = ["run-1", "run-2", "run-3"]
    batch = [event_entry(sync_event(s, run_id=r)) for r in runs for s in (1, 2)]
    locks = advisory_locks_while_held(store, postgres_url, batch)
    # a two-key lock shows its keys as classid and objid (unsigned), objsubid 2
    per_run = {
        (sql.RUN_LOCK_CLASS, run_lock("proj-1", r) & 0xFFFF_FFFF, 2, "ExclusiveLock") for r in runs
    }
    assert locks == {OWNERS_SHARED} | per_run


def test_a_batch_of_more_runs_than_the_lock_limit_takes_no_run_lock(
    store: HubStore, postgres_url: str
) -> None:
    runs = sql.MAX_RUN_LOCKS + 1
    wide = [event_entry(sync_event(1, run_id=f"wide-{n}")) for n in range(runs)]
    # as every ingest took before run locks: no lock-table flood
    assert advisory_locks_while_held(store, postgres_url, wide) == {OWNERS_SHARED}


def test_a_runs_lock_is_pinned_so_consumers_of_every_version_agree_and_fits_an_int4() -> None:
    # Consumers of two versions ingest side by side during an upgrade: a run's key must
    # never change, nor depend on the process (as Python's str hash would).
    assert run_lock("proj-1", "run-1") == -489042241
    assert run_lock("proj-1", "run-2") == 2077269765
    assert run_lock("proj-1x", "run-1") != run_lock("proj-1", "xrun-1")
    assert all(-(2**31) <= run_lock(p, "r") < 2**31 for p in ("", "a", "z" * 128))
