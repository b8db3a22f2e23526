"""Attacks by someone who can write to Redis, replayed against real Redis and real processes.

Each test stages the attack as an attacker would (reading and writing the
streams with plain Redis commands), runs the real ``hubsync relay --once`` and
``hubsync consume --once``, and shows that the attack fails and nothing is
lost: every genuine event reaches the hub once and every outbox row is acked.
The second-hub attack is in test_hub_binding.py.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from hubstore import hub_url_from_path, open_store
from hubstore.store import HubStore
from hubsync.core import keys
from hubsync.core.canonical import content_hash
from hubsync.core.entries import (
    ConflictReason,
    Outcome,
    OutcomeRecord,
    SecurityReason,
    decode_fields,
    event_entry_fields,
    outcomes_entry_fields,
    parse_outcomes_entry,
)
from hubsync.core.signing import (
    SIGNATURE_FIELD,
    RuntimeKey,
    sign_event_entry,
)
from hubsync.core.wire import SyncEvent
from hubsync.faults.inject import outcomes_signed_by_a_stranger
from hubsync.processes import run_hubsync
from tests.helpers.acl_support import EnrolledRuntime
from tests.helpers.consumer_support import consume_once
from tests.helpers.relay_player import sync_event
from tests.helpers.relay_support import append_many, make_runtime

HUB_PROJECT = "acme"
OTHER_PROJECT = "other"


@dataclass
class Site(EnrolledRuntime):
    """One hub (a SQLite file) and one runtime enrolled on it, with one project; ``url`` is
    the Redis URL of both."""

    hub_db: Path
    hub: HubStore

    @property
    def state_dir(self) -> Path:
        return self.registry.state_dir

    def relay_once(self) -> dict[str, Any]:
        # a tiny resend timeout: a row whose outcome never came goes out again next pass
        done = run_hubsync(
            ["relay", "--state-dir", str(self.state_dir), "--redis-url", self.url,
             "--once", "--json", "--resend-timeout", "0.01"]
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        self.stderr = done.stderr
        return dict(json.loads(done.stdout))

    def consume_once(self) -> dict[str, Any]:
        return consume_once(self.url, self.hub_db)

    def counts(self) -> dict[str, int]:
        return self.store.outbox_counts()

    def assert_all_synced(self, total: int) -> None:
        """Nothing lost: every event in the hub once, every outbox row acked."""
        assert self.hub.count_events() == total
        assert self.counts() == {
            "pending": 0, "attempted": 0, "acked": total, "conflict": 0, "rejected": 0,
            "total": total,
        }  # fmt: skip


@pytest.fixture
def site(redis_url: str, tmp_path: Path) -> Iterator[Site]:
    hub_db = tmp_path / "hub.db"
    with open_store(hub_url_from_path(hub_db), create_schema=True) as hub:
        hub.init_hub()
        registry, (store,) = make_runtime(tmp_path / "state", [HUB_PROJECT], hub=hub)
        try:
            yield Site(registry, store, redis_url, hub_db, hub)
        finally:
            store.close()
            registry.close()


def event_entries(client: redis.Redis, site: Site) -> list[tuple[str, dict[str, bytes]]]:
    """The event entries on the runtime's stream now (presence beats left out)."""
    found = []
    for entry_id, raw in client.xrange(site.events):
        fields = decode_fields(raw)
        if fields.get("kind") == b"event":
            found.append((entry_id.decode(), fields))
    return found


def unsigned_fields(event: SyncEvent) -> Any:
    """The fields of a well-formed event entry that no runtime signed (an attacker's)."""
    data, digest = event.encoded()
    return event_entry_fields(event, data, digest)


def security_alerts(hub: HubStore) -> list[Any]:
    return [a for a in hub.alerts() if isinstance(a.reason, SecurityReason)]


def conflicts(hub: HubStore) -> list[Any]:
    return [a for a in hub.alerts() if isinstance(a.reason, ConflictReason)]


# ----- 1. a forged ack -----


def test_a_forged_ack_leaves_the_rows_unacked_and_they_reach_the_hub_after_the_resend(
    redis_client: redis.Redis, site: Site
) -> None:
    append_many(site.store, runs=2, per_run=10)
    assert site.relay_once()["sent"] == 20

    # The attacker reads the genuine hashes, deletes the entries before any hub
    # sees them and acknowledges them all: once unsigned, once signed with a
    # key of its own under the genuine hub id.
    genuine = event_entries(redis_client, site)
    records = [
        OutcomeRecord(
            f["project_id"].decode(), f["run_id"].decode(), int(f["sequence"]),
            Outcome.ACCEPTED, f["content_hash"].decode(),
        )
        for _, f in genuine
    ]  # fmt: skip
    redis_client.xdel(site.events, *[entry_id for entry_id, _ in genuine])
    acks = keys.acks_stream(HUB_PROJECT, site.registry.runtime_id)
    unsigned: Any = outcomes_entry_fields(HUB_PROJECT, records)
    redis_client.xadd(acks, unsigned)
    forged = outcomes_signed_by_a_stranger(
        site.registry.runtime_id, site.hub.hub_id(), outcomes_entry_fields(HUB_PROJECT, records)
    )
    redis_client.xadd(acks, forged)

    summary = site.relay_once()
    assert summary["acked"] == 0 and summary["unverified"] == 2
    assert site.counts()["acked"] == 0 and site.counts()["pending"] == 20
    assert site.stderr.count("security: ignored outcomes entry") == 2  # once per kind
    assert "(unsigned)" in site.stderr and "(bad_signature)" in site.stderr
    # the pass resent what the hub never acknowledged, each row at least once (a 10 ms
    # resend timeout can fall due again within one pass on a slow machine)
    assert summary["resent"] >= 20

    assert site.consume_once()["accepted"] == 20
    assert site.relay_once()["acked"] == 20
    site.assert_all_synced(20)


# ----- 3. a forged new key -----


def test_a_forged_new_key_is_dead_lettered_with_an_alert_and_the_genuine_event_is_accepted(
    redis_client: redis.Redis, site: Site
) -> None:
    project_id, runtime_id = site.store.project_id, site.registry.runtime_id
    append_many(site.store, runs=1, per_run=3)  # run-0, sequences 1..3
    assert site.relay_once()["sent"] == 3

    # well-formed, correct SHA-256, for the sequence the runtime will use next:
    # once unsigned, once signed with a key the hub never gave out
    for key in (None, RuntimeKey.generate()):
        fake = unsigned_fields(
            sync_event(4, run_id="run-0", project_id=project_id, runtime_id=runtime_id,
                       data={"forged": key is not None})
        )  # fmt: skip
        if key is not None:
            fake[SIGNATURE_FIELD] = sign_event_entry(key, fake)
        redis_client.xadd(site.events, fake)

    stats = site.consume_once()
    assert stats["accepted"] == 3 and stats["refused"] == 2
    assert site.hub.count_events() == 3
    [alert] = security_alerts(site.hub)  # one per claimed runtime and reason, counting both
    assert (alert.reason, alert.occurrences) == (SecurityReason.UNAUTHENTICATED, 2)
    assert (alert.project_id, alert.run_id, alert.sequence) == (project_id, "run-0", 4)
    letters = redis_client.xrange(keys.dead_stream(HUB_PROJECT))
    assert [decode_fields(raw)["reason"] for _, raw in letters] == [b"unauthenticated"] * 2
    streamed = redis_client.xrange(keys.alerts_stream(HUB_PROJECT))
    assert [decode_fields(raw)["reason"] for _, raw in streamed] == [b"unauthenticated"] * 2

    site.store.append_event("run-0", "step.completed", {"step": "s3", "ok": True})
    site.relay_once()
    assert site.consume_once()["accepted"] == 1
    site.relay_once()
    site.assert_all_synced(4)
    assert conflicts(site.hub) == []  # the genuine event was never taken for a reuse


# ----- 4. squatting -----


def test_a_squatter_claiming_the_project_under_another_hub_project_is_refused(
    redis_client: redis.Redis, site: Site
) -> None:
    project_id, runtime_id = site.store.project_id, site.registry.runtime_id
    site.hub.enroll("rt-other", [OTHER_PROJECT])  # another hub project, in use by another runtime
    # First to name the project id, under that other hub project, as the genuine runtime
    squat = unsigned_fields(
        sync_event(1, run_id="run-0", project_id=project_id, hub_project=OTHER_PROJECT,
                   runtime_id=runtime_id)
    )  # fmt: skip
    redis_client.xadd(keys.events_stream(OTHER_PROJECT, "rt-other"), squat)
    stats = site.consume_once()
    assert stats["refused"] == 1 and stats["accepted"] == 0

    append_many(site.store, runs=1, per_run=5)
    site.relay_once()
    assert site.consume_once()["accepted"] == 5
    site.relay_once()
    site.assert_all_synced(5)
    assert conflicts(site.hub) == []  # no project_mismatch: nothing was bound by the squatter
    assert [a.hub_project for a in security_alerts(site.hub)] == [OTHER_PROJECT]


# ----- 5. a bad copy in the same batch -----


def test_a_bad_copy_in_the_same_batch_does_not_park_the_genuine_row(
    redis_client: redis.Redis, site: Site
) -> None:
    append_many(site.store, runs=1, per_run=2)
    site.relay_once()
    # the first entry (a pass slower than the tiny resend timeout may have sent a row twice)
    (_, genuine), *_others = event_entries(redis_client, site)

    # a copy claiming another hash: its signature no longer verifies
    wrong_hash = dict(genuine)
    wrong_hash["content_hash"] = b"0" * 64
    redis_client.xadd(site.events, wrong_hash)  # type: ignore[arg-type]
    # a copy keeping the signed fields (and so a valid signature) but other bytes: they
    # are not the signed content, so it is refused like a forgery and nobody is told
    other_bytes = dict(genuine)
    other_bytes["event"] = genuine["event"].replace(b'"data":{}', b'"data":{"forged":true}')
    assert other_bytes["event"] != genuine["event"]
    redis_client.xadd(site.events, other_bytes)  # type: ignore[arg-type]

    stats = site.consume_once()
    assert stats["accepted"] == 2 and stats["dead"] == 2 and stats["refused"] == 2
    answered = {o.outcome for o in published_outcomes(redis_client, site)}
    assert answered <= {Outcome.ACCEPTED, Outcome.DUPLICATE}
    summary = site.relay_once()
    assert summary["rejected"] == 0 and summary["foreign"] == 0
    site.assert_all_synced(2)
    letters = [decode_fields(raw) for _, raw in redis_client.xrange(keys.dead_stream(HUB_PROJECT))]
    assert [letter["reason"] for letter in letters] == [b"unauthenticated"] * 2
    # the refused copies' alerts name the hash of the bytes each carried
    streamed = [
        decode_fields(raw) for _, raw in redis_client.xrange(keys.alerts_stream(HUB_PROJECT))
    ]
    assert sorted(f["offered_hash"].decode() for f in streamed) == sorted(
        [content_hash(genuine["event"]), content_hash(other_bytes["event"])]
    )


def published_outcomes(client: redis.Redis, site: Site) -> list[OutcomeRecord]:
    """Every outcome on the runtime's ack stream now (read before its relay trims them)."""
    acks = keys.acks_stream(HUB_PROJECT, site.registry.runtime_id)
    return [o for _, raw in client.xrange(acks) for o in parse_outcomes_entry(decode_fields(raw))]


# ----- 6. a genuine entry tampered with by a keyless writer -----


def _retyped(fields: dict[str, bytes]) -> dict[str, bytes]:
    return fields | {"event_type": b"run.cancelled"}


def _untyped(fields: dict[str, bytes]) -> dict[str, bytes]:
    return {name: value for name, value in fields.items() if name != "event_type"}


def _padded(fields: dict[str, bytes]) -> dict[str, bytes]:
    return fields | {"junk": b"x" * 2 * 1024 * 1024}


@pytest.mark.parametrize(
    "tamper", [_retyped, _untyped, _padded], ids=["retyped", "untyped", "junk"]
)
@pytest.mark.parametrize("deleted", [True, False], ids=["genuine-deleted", "genuine-kept"])
def test_a_tampered_copy_is_refused_told_nobody_and_the_genuine_rows_reach_the_hub(
    redis_client: redis.Redis, site: Site, tamper: Any, deleted: bool
) -> None:
    append_many(site.store, runs=1, per_run=3)
    assert site.relay_once()["sent"] == 3
    genuine = event_entries(redis_client, site)

    # The attacker (write access to Redis, no key) replaces each genuine entry with a
    # tampered copy, or adds the copy behind it: the signature still verifies over the
    # fields v1 signed, so only the v2 signature and the exact field set can tell.
    if deleted:
        redis_client.xdel(site.events, *[entry_id for entry_id, _ in genuine])
    for _, fields in genuine:
        redis_client.xadd(site.events, tamper(fields))  # type: ignore[arg-type]

    # (a pass may send a row twice: a 10 ms resend timeout can fall due within it)
    copies = len(genuine)
    stats = site.consume_once()
    assert stats["refused"] == copies and stats["accepted"] == (0 if deleted else 3)
    letters = [decode_fields(raw) for _, raw in redis_client.xrange(keys.dead_stream(HUB_PROJECT))]
    assert [letter["reason"] for letter in letters] == [b"unauthenticated"] * copies
    assert {a.reason for a in security_alerts(site.hub)} == {SecurityReason.UNAUTHENTICATED}
    # no outcome about a tampered copy, to anyone: only the genuine entries were answered
    answered = [o.outcome for o in published_outcomes(redis_client, site)]
    assert len(answered) == (0 if deleted else copies)
    assert set(answered) <= {Outcome.ACCEPTED, Outcome.DUPLICATE}

    summary = site.relay_once()  # applies what there is, resends what was never answered
    assert summary["rejected"] == 0 and summary["contradicted"] == 0
    if deleted:
        assert summary["acked"] == 0 and summary["resent"] >= 3
        assert site.consume_once()["accepted"] == 3
        site.relay_once()
    site.assert_all_synced(3)


# ----- 7. entries an older relay signed (event signature v1) -----


def _signed_v1(key: bytes, fields: dict[str, bytes]) -> bytes:
    """The ``sig`` a relay of the previous release gave an event entry: HMAC-SHA256 of the
    netstrings of ``hubsync/event/v1``, project_id, run_id, sequence, hub_project,
    runtime_id and content_hash."""
    items = [b"hubsync/event/v1"] + [
        fields[name]
        for name in (
            "project_id",
            "run_id",
            "sequence",
            "hub_project",
            "runtime_id",
            "content_hash",
        )
    ]
    message = b"".join(b"%d:%b," % (len(item), item) for item in items)
    return hmac.new(key, message, "sha256").hexdigest().encode()


def test_entries_left_pending_by_an_older_relay_are_refused_and_resent_signed_v2(
    redis_client: redis.Redis, site: Site
) -> None:
    append_many(site.store, runs=2, per_run=3)
    assert site.relay_once()["sent"] == 6
    # what an upgrade finds: the same rows' entries as the previous release signed them
    enrollment = site.registry.enrollment()
    assert enrollment is not None
    genuine = event_entries(redis_client, site)
    redis_client.xdel(site.events, *[entry_id for entry_id, _ in genuine])
    for _, fields in genuine:
        v1 = fields | {SIGNATURE_FIELD: _signed_v1(enrollment.key, fields)}
        redis_client.xadd(site.events, v1)  # type: ignore[arg-type]

    stats = site.consume_once()
    assert stats["refused"] == len(genuine) and stats["accepted"] == 0
    assert published_outcomes(redis_client, site) == []  # no row is parked by the upgrade
    summary = site.relay_once()
    assert summary["resent"] >= 6 and summary["rejected"] == 0
    assert site.consume_once()["accepted"] == 6
    site.relay_once()
    site.assert_all_synced(6)  # nothing lost
