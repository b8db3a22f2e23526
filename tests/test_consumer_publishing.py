"""Dead-letter and rejected-outcome construction: bounded copies, hashes of what arrived."""

from __future__ import annotations

from consumers.publishing import (
    DEAD_FIELD_PREVIEW_BYTES,
    dead_letter_fields,
    parse_dead_letter,
    rejected_outcome,
)
from hubsync.canonical import content_hash
from hubsync.entries import Outcome, decode_fields
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
