"""A secret registered after an append is scrubbed from the rows not yet sent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from hubsync.core.canonical import content_hash
from hubsync.core.wire import parse_sync_event
from producers.derivation import StoreIdentity
from producers.redaction import Redactor
from producers.relay import Relay
from producers.store.event_store import RunEventStore
from producers.store.late_secrets import SECRET_IN_ID
from tests.helpers.hub_double import ack_everything, stream_events
from tests.helpers.relay_support import make_runtime, relay_settings

IDENTITY = StoreIdentity("proj-1", "acme", "rt-host-0001")
LATE = "late-secret-7f3a9c"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunEventStore]:
    with RunEventStore(tmp_path / "store.sqlite", IDENTITY, environ={}) as opened:
        yield opened


def file_bytes(path: Path) -> bytes:
    """The store file and its WAL, as they are on disk."""
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_registering_a_secret_scrubs_it_from_unsent_rows_and_local_events(
    store: RunEventStore,
) -> None:
    store.append_event("run-a", "step.completed", {"step_id": "s1", "outputs": {"url": LATE}})
    store.append_event("run-a", "step.completed", {"step_id": "s2", "note": f"x{LATE}x"})
    (before, other) = store.outbox_for_run("run-a")
    assert LATE.encode() in file_bytes(store.path)

    store.redactor.register(LATE)

    (after, untouched) = store.outbox_for_run("run-a")
    assert LATE.encode() not in file_bytes(store.path), "not in the file, nor in its WAL"
    assert all(LATE not in event.payload for event in store.events("run-a"))
    assert b"[REDACTED:registered]" in after.sync_event
    assert after.content_hash != before.content_hash
    assert content_hash(after.sync_event) == after.content_hash
    assert parse_sync_event(after.sync_event).sequence == 1
    assert after.state == "unsent"
    # its sync event never held the secret (not allowlisted): left as it was
    assert untouched == other


def test_a_row_already_sent_is_left_as_it_is(store: RunEventStore) -> None:
    appended = store.append_event("run-a", "step.completed", {"outputs": {"url": LATE}})
    store.mark_attempted([appended.outbox_seq], 1.0, 30, 600)
    (sent,) = store.outbox_for_run("run-a")

    store.redactor.register(LATE)

    assert store.outbox_for_run("run-a") == [sent], "bytes and hash unchanged: it may be at the hub"
    assert LATE.encode() in sent.sync_event
    assert all(LATE not in event.payload for event in store.events("run-a"))


def test_an_unsent_row_whose_run_id_holds_the_secret_is_parked_never_sent(
    store: RunEventStore,
) -> None:
    store.append_event(f"run-{LATE}", "step.completed", {})
    store.redactor.register(LATE)
    (row,) = store.outbox_for_run(f"run-{LATE}")
    assert (row.state, row.outcome_reason) == ("rejected", SECRET_IN_ID)
    assert store.unsent(0, 10) == []


def test_every_store_sharing_the_redactor_is_scrubbed_and_a_closed_one_is_left_alone(
    tmp_path: Path,
) -> None:
    redactor = Redactor()
    one = RunEventStore(tmp_path / "one.sqlite", IDENTITY, redactor=redactor, environ={})
    two = RunEventStore(tmp_path / "two.sqlite", IDENTITY, redactor=redactor, environ={})
    for opened in (one, two):
        opened.append_event("run-a", "step.completed", {"outputs": LATE})
    two.close()
    redactor.register(LATE)
    assert LATE.encode() not in file_bytes(one.path)
    assert LATE.encode() in file_bytes(two.path), "a closed store no longer listens"
    one.close()


def test_an_append_racing_the_registration_is_redacted_either_way(store: RunEventStore) -> None:
    # Register from another thread while this one appends: every row is either
    # scrubbed by the registration or prepared again under the write lock.
    done = threading.Event()

    def register() -> None:
        store.redactor.register(LATE)
        done.set()

    thread = threading.Thread(target=register)
    thread.start()
    for i in range(200):
        store.append_event("run-a", "step.completed", {"outputs": f"{i}-{LATE}"})
    thread.join(timeout=30)
    assert done.is_set()
    assert LATE.encode() not in file_bytes(store.path)


def test_a_re_derived_row_syncs_and_is_acked_under_its_new_hash(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    registry, (store,) = make_runtime(state_dir, ["alpha"])
    store.append_event("run-a", "step.completed", {"outputs": {"token": LATE}})
    store.redactor.register(LATE)

    relay = Relay(relay_settings(state_dir, redis_url), registry)
    relay.run_once()
    (entry,) = stream_events(redis_client, "alpha")
    assert LATE.encode() not in entry["event"]
    assert content_hash(entry["event"]) == entry["content_hash"].decode()
    ack_everything(redis_client, "alpha")
    relay.run_once()
    relay.close()
    assert store.outbox_counts()["acked"] == 1
