"""The hub consumer worker against a real private redis-server.

The worker's behaviour does not depend on the store's backend, so most tests run on the
in-memory hub store; the ones where SQLite itself matters (a threaded worker sharing one
connection, a database locked by another process) use a real SQLite hub database."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import consumers.stream.judging
import consumers.stream.worker
from consumers.stream.publishing import parse_dead_letter
from consumers.stream.worker import HubConsumer
from hubstore import hub_url_from_path, open_store
from hubstore.sqlite.store import SqliteHubStore
from hubstore.store import HubStore
from hubsync.core import keys
from hubsync.core.canonical import content_hash
from hubsync.core.entries import (
    ConflictReason,
    Outcome,
    OutcomeRecord,
    PresenceBeat,
    SecurityReason,
    decode_fields,
    parse_outcomes_entry,
)
from hubsync.core.redis_values import as_text
from hubsync.core.settings import ConsumerSettings
from hubsync.core.signing import SIGNATURE_FIELD, RuntimeKey, sign_event_entry
from hubsync.core.wire import MAX_EVENT_BYTES
from tests.helpers.relay_player import (
    HUB_PROJECT,
    RUNTIME,
    entry_fields,
    send,
    send_fields,
    send_presence,
    sync_event,
)
from tests.helpers.support import wait_until
from tests.helpers.trust import enroll, signed_event

EVENTS = keys.events_stream(HUB_PROJECT, RUNTIME)
GROUP = keys.CONSUMER_GROUP


@pytest.fixture
def store() -> Iterator[HubStore]:
    with open_store("memory://", create_schema=True) as store:
        enroll(store, RUNTIME, [HUB_PROJECT])
        yield store


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[HubStore]:
    with open_store(hub_url_from_path(tmp_path / "hub.db"), create_schema=True) as store:
        enroll(store, RUNTIME, [HUB_PROJECT])
        yield store


def make_settings(redis_url: str, tmp_path: Path, **overrides: Any) -> ConsumerSettings:
    values: dict[str, Any] = {
        "hub_db": tmp_path / "hub.db",
        "redis_url": redis_url,
        "block_ms": 50,
        "reclaim_idle": 60.0,
        "reclaim_interval": 0.05,
    }
    values.update(overrides)
    return ConsumerSettings(**values)


@pytest.fixture
def worker(
    redis_client: redis.Redis, redis_url: str, store: HubStore, tmp_path: Path
) -> HubConsumer:
    worker = HubConsumer(redis_client, store, make_settings(redis_url, tmp_path), name="w1")
    # as after small batches (a fresh worker reads one entry per stream first,
    # tests/consumers/test_read_budget.py): the tests here judge whole batches
    worker.read_budget.count = worker.read_budget.read_count
    return worker


def outcomes(client: redis.Redis, runtime_id: str = "rt-1") -> list[list[OutcomeRecord]]:
    """Every outcomes entry on the runtime's acks stream, oldest first."""
    stream = keys.acks_stream(HUB_PROJECT, runtime_id)
    return [parse_outcomes_entry(decode_fields(f)) for _, f in client.xrange(stream)]


def dead_letters(client: redis.Redis) -> list[Any]:
    return [
        parse_dead_letter(decode_fields(f)) for _, f in client.xrange(keys.dead_stream(HUB_PROJECT))
    ]


def read_and_crash(client: redis.Redis, *consumers: str) -> None:
    """Create the group, then each of ``consumers`` reads what is new and never acks (crashed)."""
    client.xgroup_create(EVENTS, GROUP, id="0", mkstream=True)
    for consumer in consumers:
        client.xreadgroup(GROUP, consumer, {EVENTS: ">"}, count=10)


def wait_pending_idle(client: redis.Redis, idle_ms: int) -> None:
    """Wait until a pending entry has been idle ``idle_ms`` (past the worker's reclaim_idle)."""
    wait_until(
        lambda: client.xpending_range(EVENTS, GROUP, "-", "+", 1, idle=idle_ms),
        what=f"an entry idle {idle_ms} ms",
    )


def pending_count(client: redis.Redis) -> int:
    return int(client.xpending(EVENTS, GROUP)["pending"])


def test_one_entry_delivered_three_times_is_one_row_and_two_duplicates(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    event = sync_event(1)
    for _ in range(3):
        send(redis_client, event)
    worker.run_once()
    assert store.count_events() == 1
    [entry] = outcomes(redis_client)  # one outcomes entry for the whole batch
    assert [o.outcome for o in entry] == [Outcome.ACCEPTED, Outcome.DUPLICATE, Outcome.DUPLICATE]
    assert {o.content_hash for o in entry} == {event.encoded()[1]}
    assert pending_count(redis_client) == 0


def test_genuine_entries_take_the_fast_path_and_others_the_general_one(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    general: list[dict[str, bytes]] = []

    def counted(raw: Any) -> dict[str, bytes]:
        general.append(fields := decode_fields(raw))
        return fields

    monkeypatch.setattr(consumers.stream.judging, "decode_fields", counted)
    for sequence in range(1, 6):
        send(redis_client, sync_event(sequence))
    forged = entry_fields(sync_event(6))
    forged[SIGNATURE_FIELD] = "0" * 64
    send_fields(redis_client, HUB_PROJECT, forged)
    send(redis_client, sync_event(7))
    worker.run_once()
    # the first entry names a runtime id not seen yet: the general path checks it (and
    # caches it); the forged one is refused there; every other one is proven on the fast path
    assert [f["sequence"] for f in general] == [b"1", b"6"]
    assert store.count_events() == 6
    assert [letter.reason for letter in dead_letters(redis_client)] == ["unauthenticated"]
    [entry] = outcomes(redis_client)
    assert [(o.sequence, o.outcome) for o in entry] == [
        (n, Outcome.ACCEPTED) for n in (1, 2, 3, 4, 5, 7)
    ]
    assert pending_count(redis_client) == 0


def test_a_redelivery_in_a_later_batch_is_a_duplicate(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    send(redis_client, sync_event(1))
    worker.run_once()
    send(redis_client, sync_event(1))
    worker.run_once()
    assert [[o.outcome for o in e] for e in outcomes(redis_client)] == [
        [Outcome.ACCEPTED],
        [Outcome.DUPLICATE],
    ]
    assert store.count_events() == 1


def test_the_same_key_with_other_bytes_is_a_conflict_alerted_and_never_stored(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    original, forged = sync_event(1), sync_event(1, data={"step_id": "evil"})
    send(redis_client, original)
    worker.run_once()
    send(redis_client, forged)
    worker.run_once()

    [stored] = store.events(HUB_PROJECT)
    assert stored.record == original.encoded()[0]
    [alert] = store.alerts()
    assert alert.reason is ConflictReason.SEQUENCE_REUSED
    assert (alert.existing_hash, alert.offered_hash) == (original.encoded()[1], forged.encoded()[1])

    [(_, raw)] = redis_client.xrange(keys.alerts_stream(HUB_PROJECT))
    fields = decode_fields(raw)
    assert fields["reason"] == b"sequence_reused"
    assert fields["existing_hash"] == original.encoded()[1].encode()
    assert fields["offered_hash"] == forged.encoded()[1].encode()
    assert set(fields) == {
        "reason",
        "project_id",
        "run_id",
        "sequence",
        "runtime_id",
        "existing_hash",
        "offered_hash",
        "detected_at",
    }

    conflict = outcomes(redis_client)[-1][0]
    assert conflict.outcome is Outcome.CONFLICT
    assert conflict.reason == "sequence_reused"
    assert conflict.content_hash == forged.encoded()[1]
    assert conflict.existing_hash == original.encoded()[1]
    assert pending_count(redis_client) == 0


def _garbage() -> dict[str, dict[str, str | bytes]]:
    """Bad content of the enrolled runtime: each entry is signed after it was spoiled, its
    hash the hash of its bytes, so it authenticates and what the hub judges is its content."""
    not_json = dict(
        entry_fields(sync_event(51)), event=b"{not json", content_hash=content_hash(b"{not json")
    )
    wrong_schema_bytes = entry_fields(sync_event(52))["event"]
    assert isinstance(wrong_schema_bytes, bytes)
    wrong_schema_bytes = wrong_schema_bytes.replace(b"sync-event.v1", b"sync-event.v9")
    wrong_schema = dict(
        entry_fields(sync_event(52)),
        event=wrong_schema_bytes,
        content_hash=content_hash(wrong_schema_bytes),
    )
    huge_bytes = b"x" * (MAX_EVENT_BYTES + 1)
    huge = dict(
        entry_fields(sync_event(54)), event=huge_bytes, content_hash=content_hash(huge_bytes)
    )
    spoiled = {"bad_json": not_json, "unknown_schema": wrong_schema, "too_large": huge}
    return {reason: signed_event(fields) for reason, fields in spoiled.items()}


def test_garbage_entries_become_dead_letters_while_valid_ones_are_ingested(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    garbage = _garbage()
    for sequence, (_, fields) in enumerate(garbage.items(), start=1):
        send(redis_client, sync_event(sequence))
        send_fields(redis_client, HUB_PROJECT, fields)
    send(redis_client, sync_event(len(garbage) + 1))
    worker.run_once()

    assert store.count_events() == len(garbage) + 1
    letters = dead_letters(redis_client)
    assert sorted(letter.reason for letter in letters) == sorted(garbage)
    assert all(letter.consumer == "w1" and letter.source_stream == EVENTS for letter in letters)
    [huge] = [letter for letter in letters if letter.reason == "too_large"]
    assert huge.truncated == {"event": MAX_EVENT_BYTES + 1}
    assert len(huge.fields["event"]) <= 4096
    assert pending_count(redis_client) == 0

    # Signed content is told "rejected", with its own (signed) hash, so only the row
    # holding exactly those bytes is touched.
    rejected = [o for e in outcomes(redis_client) for o in e if o.outcome is Outcome.REJECTED]
    assert {o.reason: o.content_hash for o in rejected} == {
        reason: fields["content_hash"] for reason, fields in garbage.items()
    }


def test_signed_data_outside_the_allowlist_is_refused_alerted_and_told_rejected(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    # what a runtime with a broken deriver would send: its own, signed, but too much
    leaky = [sync_event(n, data={"step_id": f"s{n}", "stack": "at secret.py:1"}) for n in (1, 3)]
    send(redis_client, leaky[0])  # a runtime the worker has not seen: the general path
    send(redis_client, sync_event(2))
    send(redis_client, leaky[1])  # its keys cached by now: the fast path
    stats = worker.run_once()

    assert (stats.accepted, stats.refused, store.count_events()) == (1, 2, 1)
    assert [letter.reason for letter in dead_letters(redis_client)] == ["not_allowlisted"] * 2
    assert "'stack'" in dead_letters(redis_client)[0].detail
    [alert] = store.alerts()  # folded: one per claimed runtime and reason
    assert (alert.reason, alert.occurrences) == (SecurityReason.NOT_ALLOWLISTED, 2)
    answered = {(o.sequence, o.outcome, o.content_hash) for e in outcomes(redis_client) for o in e}
    assert answered == {
        (1, Outcome.REJECTED, leaky[0].encoded()[1]),
        (2, Outcome.ACCEPTED, sync_event(2).encoded()[1]),
        (3, Outcome.REJECTED, leaky[1].encoded()[1]),
    }


def test_an_entry_signed_for_another_hub_project_is_refused_and_told_nothing(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    enroll(store, RUNTIME, [HUB_PROJECT, "other"])  # the runtime may write to both
    # its genuine entry for "other", copied onto this stream by someone with write access
    send_fields(redis_client, HUB_PROJECT, entry_fields(sync_event(1, hub_project="other")))
    worker.run_once()
    [letter] = dead_letters(redis_client)
    assert (letter.reason, store.count_events()) == ("unauthenticated", 0)
    assert "signed for another hub project" in letter.detail
    assert not redis_client.exists(keys.acks_stream(HUB_PROJECT, RUNTIME))


def _unsigned(fields: dict[str, str | bytes]) -> dict[str, str | bytes]:
    return {name: value for name, value in fields.items() if name != SIGNATURE_FIELD}


def test_entries_that_do_not_authenticate_are_refused_alerted_and_told_nothing(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    stranger_key = RuntimeKey.generate()
    wrong_key = _unsigned(entry_fields(sync_event(3)))
    wrong_key[SIGNATURE_FIELD] = sign_event_entry(stranger_key, wrong_key)
    # other bytes under the genuine signature of sequence 4: the hash it signed is not theirs
    evil = sync_event(4, data={"step_id": "evil"})
    tampered = dict(entry_fields(sync_event(4)), event=evil.encoded()[0])
    tampered["content_hash"] = evil.encoded()[1]
    stranger = entry_fields(sync_event(5, runtime_id="rt-stranger"))  # never enrolled
    stranger[SIGNATURE_FIELD] = sign_event_entry(stranger_key, stranger)
    # the runtime's own signature over what it did not write: the hub cannot tell
    # who changed the entry, so the copy is refused, not judged
    claimed = signed_event(dict(entry_fields(sync_event(53)), content_hash="0" * 64))
    flat = signed_event(dict(entry_fields(sync_event(6)), event_type="step.started"))
    refused = {
        "unsigned": _unsigned(entry_fields(sync_event(2))),
        "signed with another key": wrong_key,
        "tampered": tampered,
        "unknown runtime": stranger,
        # a bad entry that would be told "rejected" if it authenticated
        "unsigned garbage": _unsigned(_garbage()["bad_json"]),
        "another hash signed": claimed,
        "a flat field signed that the bytes disagree with": flat,
        "no event_type": {
            k: v for k, v in entry_fields(sync_event(7)).items() if k != "event_type"
        },
        "a junk field": entry_fields(sync_event(8)) | {"junk": b"x" * 16},
    }
    send(redis_client, sync_event(1))
    for fields in refused.values():
        send_fields(redis_client, HUB_PROJECT, fields)
    stats = worker.run_once()

    assert (stats.accepted, stats.refused, stats.rejected) == (1, len(refused), 0)
    assert store.count_events() == 1  # nothing refused reached the store
    letters = dead_letters(redis_client)
    assert [letter.reason for letter in letters] == ["unauthenticated"] * len(refused)
    assert [letter.fields for letter in letters] == [
        decode_fields(fields) for fields in refused.values()
    ]
    # kept folded: one alert per claimed runtime, counting its refused entries, showing the latest
    kept = store.alerts()
    assert [a.reason for a in kept] == [SecurityReason.UNAUTHENTICATED] * 2
    assert {(a.runtime_id, a.sequence, a.occurrences) for a in kept} == {
        (RUNTIME, 8, len(refused) - 1),  # the junk field's, the last of them
        ("rt-stranger", 5, 1),
    }
    # the live feed has each one, the tampered entry with the hash of the bytes it carried
    streamed = [decode_fields(f) for _, f in redis_client.xrange(keys.alerts_stream(HUB_PROJECT))]
    assert [f["reason"] for f in streamed] == [b"unauthenticated"] * len(refused)
    [tampered_alert] = [f for f in streamed if f["sequence"] == b"4"]
    assert tampered_alert["offered_hash"] == evil.encoded()[1].encode()
    # the runtime hears only about its genuine entry; nobody hears about the refused ones
    assert [[o.outcome for o in e] for e in outcomes(redis_client)] == [[Outcome.ACCEPTED]]
    assert not redis_client.exists(keys.acks_stream(HUB_PROJECT, "rt-stranger"))
    assert pending_count(redis_client) == 0


def test_an_entry_for_a_hub_project_its_runtime_is_not_enrolled_for_is_refused(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    enroll(store, "rt-other", ["other"])  # so that the worker follows "other" at all
    # signed with rt-1's genuine key, on the stream the worker reads
    send_fields(redis_client, "other", entry_fields(sync_event(1, hub_project="other")), "rt-other")
    worker.run_once()
    [(_, raw)] = redis_client.xrange(keys.dead_stream("other"))
    assert parse_dead_letter(decode_fields(raw)).reason == "not_enrolled"
    assert store.count_events() == 0
    [alert] = store.alerts()
    assert (alert.reason, alert.hub_project, alert.runtime_id) == (
        SecurityReason.NOT_ENROLLED,
        "other",
        RUNTIME,
    )
    assert not redis_client.exists(keys.acks_stream("other", RUNTIME))


def test_presence_beats_that_do_not_authenticate_are_refused(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    genuine = PresenceBeat(RUNTIME, HUB_PROJECT, "box", 7, "0.1.0", 12, "2026-11-29T16:38:54Z")
    send_presence(redis_client, genuine)
    forged = PresenceBeat(RUNTIME, HUB_PROJECT, "evil", 8, "0.1.0", 0, "2026-11-29T16:39:54Z")
    send_fields(redis_client, HUB_PROJECT, forged.to_fields())  # unsigned
    stranger = PresenceBeat("rt-stranger", HUB_PROJECT, "x", 9, "0.1.0", 0, genuine.heartbeat)
    send_presence(redis_client, stranger)  # not enrolled: unsigned
    stats = worker.run_once()
    assert (stats.presence, stats.refused) == (1, 2)
    [seen] = store.presence(HUB_PROJECT)
    assert seen.beat == genuine
    assert [letter.reason for letter in dead_letters(redis_client)] == ["unauthenticated"] * 2


def test_presence_beats_update_runtime_presence(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    beat = PresenceBeat("rt-1", HUB_PROJECT, "box", 7, "0.1.0", 12, "2026-11-29T16:38:54.123456Z")
    send_presence(redis_client, beat)
    worker.run_once()
    [seen] = store.presence(HUB_PROJECT)
    assert seen.beat == beat and not seen.stale
    assert pending_count(redis_client) == 0


def test_new_projects_are_picked_up_without_a_restart(
    redis_client: redis.Redis, redis_url: str, sqlite_store: HubStore, tmp_path: Path
) -> None:
    # The daemon loop in a thread while this one reads the same SQLite connection.
    store = sqlite_store
    enroll(store, RUNTIME, [HUB_PROJECT, "newcomer"])  # the runtime may write to both
    worker = HubConsumer(redis_client, store, make_settings(redis_url, tmp_path), name="w1")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        send(redis_client, sync_event(1))
        wait_until(lambda: store.count_events() == 1, what="first project ingested")
        send(redis_client, sync_event(1, project_id="p-new", hub_project="newcomer"))
        wait_until(lambda: store.count_events(hub_project="newcomer") == 1, what="new project")
    finally:
        worker.request_stop()
        thread.join(timeout=10)
    assert not thread.is_alive()


def test_a_hub_database_locked_past_its_budget_leaves_the_batch_pending_until_it_frees(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "hub.db"
    store = SqliteHubStore(path, busy_timeout=0.0, busy_budget=0.05)
    # the identity and the enrollment exist before the lock, as on a hub that has run before
    enroll(store, RUNTIME, [HUB_PROJECT])
    worker = HubConsumer(redis_client, store, make_settings(redis_url, tmp_path), name="w1")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's long write
    send(redis_client, sync_event(1))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: "hub store failed" in caplog.text, what="the busy store reported")
        assert pending_count(redis_client) == 1
        holder.execute("ROLLBACK")
        wait_until(lambda: store.count_events() == 1, what="the batch ingested once free")
        wait_until(lambda: pending_count(redis_client) == 0, what="the entry acked")
    finally:
        holder.close()
        worker.request_stop()
        thread.join(timeout=10)
        store.close()
    assert not thread.is_alive()


def test_entries_idle_in_a_dead_consumer_are_reclaimed(
    redis_client: redis.Redis, redis_url: str, store: HubStore, tmp_path: Path
) -> None:
    send(redis_client, sync_event(1))
    read_and_crash(redis_client, "dead-one")
    settings = make_settings(redis_url, tmp_path, reclaim_idle=0.2)
    worker = HubConsumer(redis_client, store, settings, name="w2")
    wait_pending_idle(redis_client, 200)
    stats = worker.run_once()
    assert stats.reclaimed == 1
    assert store.count_events() == 1
    assert pending_count(redis_client) == 0


def test_an_entry_delivered_too_often_is_dead_lettered_and_acked(
    redis_client: redis.Redis, redis_url: str, store: HubStore, tmp_path: Path
) -> None:
    entry_id = send(redis_client, sync_event(1))
    read_and_crash(redis_client, "crashy")
    for _ in range(4):  # four more deliveries to crashing consumers: five in all
        redis_client.xclaim(EVENTS, GROUP, "crashy", 0, [entry_id])
    settings = make_settings(redis_url, tmp_path, reclaim_idle=0.1, max_deliveries=5)
    worker = HubConsumer(redis_client, store, settings, name="w3")
    wait_pending_idle(redis_client, 100)
    worker.run_once()
    [letter] = dead_letters(redis_client)
    assert letter.reason == "max_deliveries"
    assert letter.deliveries == 5
    assert letter.source_id == entry_id
    assert letter.replayable and letter.fields["event"] == sync_event(1).encoded()[0]
    assert store.count_events() == 0
    assert pending_count(redis_client) == 0


def test_a_restarted_worker_takes_back_its_own_pending_entries_at_once(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    send(redis_client, sync_event(1))
    read_and_crash(redis_client, "w1")
    worker.run_once()  # reclaim_idle is 60 s: only own-pending recovery can explain this
    assert store.count_events() == 1
    assert pending_count(redis_client) == 0


def test_trimming_removes_acknowledged_entries_but_never_pending_ones(
    redis_client: redis.Redis, worker: HubConsumer
) -> None:
    for s in range(1, 6):
        send(redis_client, sync_event(s))
    worker.run_once()
    held = [send(redis_client, sync_event(s)) for s in range(6, 9)]
    redis_client.xreadgroup(GROUP, "slow", {EVENTS: ">"}, count=10)  # pending, unacked
    for s in range(9, 13):
        send(redis_client, sync_event(s))
    stats = worker.run_once()
    remaining = [as_text(i) for i, _ in redis_client.xrange(EVENTS)]
    assert stats.trimmed >= 4
    assert set(held) <= set(remaining)
    assert remaining[0] == held[0]
    assert len(remaining) == 3 + 4


def test_idle_consumers_with_nothing_pending_are_removed_but_not_those_with_pending(
    redis_client: redis.Redis, redis_url: str, store: HubStore, tmp_path: Path
) -> None:
    send(redis_client, sync_event(1))
    read_and_crash(redis_client, "holder", "ghost")  # the ghost found nothing left to read
    # reclaim_idle is large so "holder" keeps its entry; idle removal is 10 x 0.03 s
    settings = make_settings(redis_url, tmp_path, reclaim_idle=0.03)
    worker = HubConsumer(redis_client, store, settings, name="w4")
    worker.refresh_streams()
    wait_until(
        lambda: all(int(c["idle"]) >= 300 for c in redis_client.xinfo_consumers(EVENTS, GROUP)),
        what="consumers idle",
    )
    # Without reclaiming first, "holder" still owns its pending entry.
    worker.maintain()
    names = {c["name"].decode() for c in redis_client.xinfo_consumers(EVENTS, GROUP)}
    assert "ghost" not in names
    assert "holder" in names


def test_the_streams_followed_are_the_enrolled_runtimes_never_the_projects_set(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    bogus = [f"bogus-{index}" for index in range(2_000)]
    redis_client.sadd(keys.PROJECTS, *bogus, "bad{name}", "x" * 500)
    # the enrolled runtime's stream, made with its group before its relay's first XADD
    assert worker.refresh_streams(force=True) == [EVENTS]
    assert redis_client.xinfo_groups(EVENTS)[0]["name"] == GROUP.encode()
    assert not any(redis_client.exists(keys.events_stream(b, RUNTIME)) for b in bogus[:50])
    send(redis_client, sync_event(1))
    assert worker.run_once().accepted == 1


def test_only_enrolled_runtimes_streams_are_followed(
    redis_client: redis.Redis, worker: HubConsumer, store: HubStore
) -> None:
    send(redis_client, sync_event(1))
    send(redis_client, sync_event(1, project_id="p-squat", hub_project="squat"))
    squat = keys.events_stream("squat", RUNTIME)
    assert worker.refresh_streams(force=True) == [EVENTS]
    assert worker.run_once().read == 1
    assert redis_client.xlen(squat) == 1  # left unread, never stored
    assert not redis_client.xinfo_groups(squat)

    enroll(store, "rt-squat", ["squat"])  # once a runtime may write there, it is followed
    assert keys.events_stream("squat", "rt-squat") in worker.refresh_streams()
    assert squat not in worker.refresh_streams()  # rt-1 is not enrolled for it
    store.revoke("rt-squat")
    assert keys.events_stream("squat", "rt-squat") not in worker.refresh_streams()


def test_a_consumer_follows_at_most_max_projects_and_says_so_once(
    redis_client: redis.Redis,
    redis_url: str,
    store: HubStore,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    enroll(store, "rt-many", [f"proj-{index}" for index in range(5)])
    for index in range(5):
        send(redis_client, sync_event(1, project_id=f"p{index}", hub_project=f"proj-{index}"))
    settings = make_settings(redis_url, tmp_path, max_projects=3)
    worker = HubConsumer(redis_client, store, settings, name="w1")
    with caplog.at_level("WARNING", logger="consumers.stream.worker"):
        first = list(worker.refresh_streams(force=True))
        again = list(worker.refresh_streams(force=True))
    assert len(first) == 3 and again == first
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "--max-projects 3" in caplog.records[0].message
    groups = [s for s in first if redis_client.xinfo_groups(s)]
    assert groups == first
