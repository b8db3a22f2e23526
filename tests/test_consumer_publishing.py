"""Dead-letter and rejected-outcome construction: bounded copies, hashes of what arrived."""

from __future__ import annotations

import redis

from consumers.publishing import (
    DEAD_FIELD_PREVIEW_BYTES,
    Publication,
    dead_letter_fields,
    parse_dead_letter,
    rejected_outcome,
)
from hubsync import keys
from hubsync.canonical import content_hash
from hubsync.entries import Outcome, OutcomeRecord, decode_fields
from hubsync.settings import ConsumerSettings
from tests.helpers.relay_player import entry_fields, sync_event


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


def test_rejected_carries_the_hash_of_the_bytes_received_not_the_claimed_one() -> None:
    fields = decode_fields(dict(entry_fields(sync_event(3)), content_hash="0" * 64))
    runtime_id, record = rejected_outcome(fields, "hash_mismatch") or ("", None)
    assert runtime_id == "rt-1"
    assert record is not None and record.outcome is Outcome.REJECTED
    assert record.content_hash == content_hash(fields["event"])
    assert (record.project_id, record.run_id, record.sequence) == ("proj-1", "run-1", 3)


def test_no_rejected_outcome_for_an_entry_that_names_no_runtime_or_key() -> None:
    fields = decode_fields(entry_fields(sync_event(1)))
    assert rejected_outcome({k: v for k, v in fields.items() if k != "runtime_id"}, "x") is None
    assert rejected_outcome(dict(fields, sequence=b"zero"), "x") is None
    assert rejected_outcome(dict(fields, runtime_id=b"bad{name}"), "x") is None
    assert rejected_outcome(dict(fields, kind=b"presence"), "x") is None


def test_an_ack_stream_is_capped_near_its_maxlen(redis_client: redis.Redis) -> None:
    # A forger names runtime ids no relay reads: their ack streams must stay bounded.
    record = OutcomeRecord("p1", "run-1", 1, Outcome.ACCEPTED, "a" * 64, None, None)
    for _ in range(1_000):
        publication = Publication(
            consumer="w1", dead_maxlen=100, alerts_maxlen=100, acks_maxlen=100
        )
        publication.outcome("acme", "rt-nobody-reads", record)
        publication.send(redis_client)
    length = redis_client.xlen(keys.acks_stream("acme", "rt-nobody-reads"))
    # approximate trimming drops whole stream nodes (100 entries each by default)
    assert 100 <= length <= 200


def test_consumer_settings_cap_ack_streams_by_default() -> None:
    assert ConsumerSettings(hub_url="sqlite:///x").acks_maxlen == 10_000
