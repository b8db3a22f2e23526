"""Dead-letter, rejected-outcome and outcomes construction: bounded copies, hashes of what
arrived, signed outcomes, and nothing told about a refused entry."""

from __future__ import annotations

import redis

from consumers.stream.publishing import (
    DEAD_FIELD_PREVIEW_BYTES,
    Publication,
    dead_letter_fields,
    parse_dead_letter,
    rejected_outcome,
    signed_outcomes_entry_fields,
)
from hubsync.core import keys
from hubsync.core.canonical import content_hash
from hubsync.core.entries import Outcome, OutcomeRecord, SecurityReason, decode_fields
from hubsync.core.settings import ConsumerSettings
from hubsync.core.signing import HUB_ID_FIELD, RuntimeKey, verify_outcomes_entry
from tests.helpers.relay_player import entry_fields, sync_event

HUB_ID = "hub-test-1"


def letter(original: dict[str, bytes], **extra: object) -> dict[str, bytes]:
    fields = dead_letter_fields(
        reason="bad_json",
        detail="event is not valid JSON",
        source_stream="hubsync:{acme}:events",
        source_id="1-0",
        consumer="w1",
        original=original,
        **extra,  # type: ignore[arg-type]
    )
    return decode_fields(fields)


def test_a_dead_letter_round_trips_with_its_original_fields() -> None:
    original = decode_fields(entry_fields(sync_event(1)))
    parsed = parse_dead_letter(letter(original))
    assert (parsed.reason, parsed.source_id, parsed.consumer) == ("bad_json", "1-0", "w1")
    assert parsed.fields == original
    assert parsed.replayable and parsed.deliveries is None


def test_an_oversized_field_is_cut_and_its_size_recorded() -> None:
    parsed = parse_dead_letter(letter({"event": b"x" * 10_000_000, "kind": b"event"}))
    assert len(parsed.fields["event"]) == DEAD_FIELD_PREVIEW_BYTES
    assert parsed.truncated == {"event": 10_000_000}
    assert not parsed.replayable


def test_rejected_carries_the_signed_hash_of_the_bytes_received() -> None:
    fields = decode_fields(entry_fields(sync_event(3)))
    runtime_id, record = rejected_outcome(fields, "bad_json") or ("", None)
    assert runtime_id == "rt-1"
    assert record is not None and record.outcome is Outcome.REJECTED
    assert record.content_hash == content_hash(fields["event"]) == fields["content_hash"].decode()
    assert (record.project_id, record.run_id, record.sequence) == ("proj-1", "run-1", 3)


def test_no_rejected_outcome_for_bytes_that_are_not_the_signed_content() -> None:
    # a rejected names only bytes its runtime signed: other bytes, or another claimed hash,
    # could otherwise park the outbox row whose hash either of them is
    fields = decode_fields(entry_fields(sync_event(3)))
    assert rejected_outcome(dict(fields, content_hash=b"0" * 64), "x") is None
    assert rejected_outcome(dict(fields, event=fields["event"] + b" "), "x") is None
    assert rejected_outcome({k: v for k, v in fields.items() if k != "content_hash"}, "x") is None


def test_no_rejected_outcome_for_an_entry_that_names_no_runtime_or_key() -> None:
    fields = decode_fields(entry_fields(sync_event(1)))
    assert rejected_outcome({k: v for k, v in fields.items() if k != "runtime_id"}, "x") is None
    assert rejected_outcome(dict(fields, sequence=b"zero"), "x") is None
    assert rejected_outcome(dict(fields, runtime_id=b"bad{name}"), "x") is None
    assert rejected_outcome(dict(fields, kind=b"presence"), "x") is None


def test_an_ack_stream_is_capped_near_its_maxlen(redis_client: redis.Redis) -> None:
    # A relay that stopped reading its acks stream must not grow it for ever.
    record = OutcomeRecord("p1", "run-1", 1, Outcome.ACCEPTED, "a" * 64, None, None)
    key = RuntimeKey.generate()
    for _ in range(1_000):
        publication = Publication(
            consumer="w1", hub_id=HUB_ID, dead_maxlen=100, alerts_maxlen=100, acks_maxlen=100
        )
        publication.outcome("acme", "rt-gone-quiet", record, key)
        publication.send(redis_client)
    length = redis_client.xlen(keys.acks_stream("acme", "rt-gone-quiet"))
    # approximate trimming drops whole stream nodes (100 entries each by default)
    assert 100 <= length <= 200


def test_outcomes_are_signed_for_their_runtime_with_the_key_and_name_the_hub(
    fake_redis: redis.Redis,
) -> None:
    record = OutcomeRecord("p1", "run-1", 1, Outcome.ACCEPTED, "a" * 64, None, None)
    key, previous = RuntimeKey.generate(), RuntimeKey.generate()
    publication = Publication(consumer="w1", hub_id=HUB_ID, dead_maxlen=10, alerts_maxlen=10)
    publication.outcome("acme", "rt-1", record, key)
    publication.outcome("acme", "rt-1", record, previous)  # sent signed with the old key
    publication.send(fake_redis)
    entries = [decode_fields(f) for _, f in fake_redis.xrange(keys.acks_stream("acme", "rt-1"))]
    assert [e[HUB_ID_FIELD] for e in entries] == [HUB_ID.encode()] * 2
    assert [verify_outcomes_entry([key, previous], e, runtime_id="rt-1") for e in entries] == [
        key,
        previous,
    ]
    # a signature for rt-1 is no signature for another runtime's stream
    assert verify_outcomes_entry([key], entries[0], runtime_id="rt-2") is None
    fields = signed_outcomes_entry_fields(HUB_ID, "acme", "rt-1", [record], key)
    assert verify_outcomes_entry([key], decode_fields(fields), runtime_id="rt-1") is key


def test_a_refused_entry_is_dead_lettered_and_alerted_and_its_runtime_told_nothing() -> None:
    fields = decode_fields(dict(entry_fields(sync_event(3)), content_hash="0" * 64))
    publication = Publication(consumer="w1", hub_id=HUB_ID, dead_maxlen=10, alerts_maxlen=10)
    publication.refused(
        keys.events_stream("acme", "rt-1"),
        "1-0",
        fields,
        SecurityReason.UNAUTHENTICATED,
        "unsigned",
    )
    [(stream, dead)] = publication.dead_letters
    assert stream == keys.dead_stream("acme") and dead["reason"] == "unauthenticated"
    [alert] = publication.security_alerts
    assert (alert.reason, alert.runtime_id, alert.sequence) == (
        SecurityReason.UNAUTHENTICATED,
        "rt-1",
        3,
    )
    assert alert.offered_hash == content_hash(fields["event"])
    [(stream, streamed)] = publication.alerts
    assert stream == keys.alerts_stream("acme") and streamed["reason"] == "unauthenticated"
    assert not publication.outcomes
    assert publication.acks == {keys.events_stream("acme", "rt-1"): ["1-0"]}


def test_a_bad_entry_is_told_rejected_only_when_it_authenticated() -> None:
    fields = decode_fields(entry_fields(sync_event(3)))
    key = RuntimeKey.generate()
    stream = keys.events_stream("acme", "rt-1")
    unsigned = Publication(consumer="w1", hub_id=HUB_ID, dead_maxlen=10, alerts_maxlen=10)
    unsigned.dead(stream, "1-0", fields, "bad_json", "json")
    assert not unsigned.outcomes
    signed = Publication(consumer="w1", hub_id=HUB_ID, dead_maxlen=10, alerts_maxlen=10)
    signed.dead(stream, "1-0", fields, "bad_json", "json", key=key)
    [((hub_project, runtime_id, signer), [record])] = signed.outcomes.items()
    assert (hub_project, runtime_id, signer) == ("acme", "rt-1", key)
    assert record.outcome is Outcome.REJECTED and record.reason == "bad_json"


def test_consumer_settings_cap_ack_streams_by_default() -> None:
    assert ConsumerSettings(hub_url="sqlite:///x").acks_maxlen == 10_000


def test_an_ack_stream_that_refuses_xadd_is_alerted_and_the_rest_is_published_and_acked(
    redis_client: redis.Redis,
) -> None:
    stream = keys.events_stream("acme", "rt-1")
    redis_client.xgroup_create(stream, keys.CONSUMER_GROUP, id="0", mkstream=True)
    ids = [redis_client.xadd(stream, {"n": str(n)}).decode() for n in range(2)]
    redis_client.xreadgroup(keys.CONSUMER_GROUP, "w1", {stream: ">"})
    # rt-1's acks stream at the largest id there is: no XADD * can follow
    exhausted = keys.acks_stream("acme", "rt-1")
    redis_client.xadd(exhausted, {"x": "1"}, id="18446744073709551615-18446744073709551615")
    key = RuntimeKey.generate()
    record = OutcomeRecord("proj-1", "run-1", 1, Outcome.ACCEPTED, "0" * 64)
    publication = Publication(consumer="w1", hub_id=HUB_ID, dead_maxlen=100, alerts_maxlen=100)
    publication.outcome("acme", "rt-1", record, key)
    publication.outcome("acme", "rt-2", record, key)
    publication.ack_many(stream, ids)

    publication.send(redis_client)  # no exception: one stream's refusal is its own

    assert redis_client.xlen(keys.acks_stream("acme", "rt-2")) == 1
    assert redis_client.xlen(exhausted) == 1
    assert redis_client.xpending(stream, keys.CONSUMER_GROUP)["pending"] == 0
    [(_, alert)] = redis_client.xrange(keys.alerts_stream("acme"))
    assert decode_fields(alert)["reason"] == b"acks_unwritable"
    assert decode_fields(alert)["runtime_id"] == b"rt-1"
