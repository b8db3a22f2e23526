"""Stream entry fields and Redis key names: the contract both sides share."""

from __future__ import annotations

import json

import pytest

from hubsync.core import keys
from hubsync.core.entries import (
    Outcome,
    OutcomeRecord,
    PresenceBeat,
    decode_fields,
    event_entry_fields,
    outcomes_entry_fields,
    parse_event_entry,
    parse_outcomes_entry,
    parse_presence_entry,
)
from hubsync.core.errors import ConfigError, WireError
from tests.helpers.events import make_event
from tests.helpers.support import changed


def entry() -> dict[str, bytes]:
    event = make_event()
    raw, digest = event.encoded()
    return decode_fields(event_entry_fields(event, raw, digest))


def test_keys_follow_the_contract() -> None:
    assert keys.events_stream("acme", "rt-1") == "hubsync:{acme}:events:{rt-1}"
    assert keys.shared_events_stream("acme") == "hubsync:{acme}:events"
    assert keys.events_stream_pattern("acme") == "hubsync:{acme}:events:{*}"
    assert keys.acks_stream("acme", "rt-1") == "hubsync:{acme}:acks:{rt-1}"
    assert keys.dead_stream("acme") == "hubsync:{acme}:dead"
    assert keys.alerts_stream("acme") == "hubsync:{acme}:alerts"
    assert keys.lease("deploy") == "hubsync:lease:{deploy}"
    assert keys.lease_log("deploy") == "hubsync:lease:{deploy}:log"
    assert keys.hub_project_of("hubsync:{acme}:acks:{rt-1}") == "acme"
    assert keys.hub_project_of("hubsync:{acme}:events:{rt-1}") == "acme"


def test_the_runtime_of_a_stream_is_the_one_in_its_name() -> None:
    assert keys.runtime_of(keys.events_stream("acme", "rt-1")) == "rt-1"
    assert keys.runtime_of(keys.acks_stream("a:events", "rt:2")) == "rt:2"
    assert keys.runtime_of(keys.shared_events_stream("acme")) is None
    assert keys.runtime_of(keys.dead_stream("acme")) is None
    assert keys.runtime_of("hubsync:{acme}:lease:{x}") is None


@pytest.mark.parametrize("bad", ["", "a{b", "a}b", "a b", "x" * 129, "-lead", "tab\tx"])
def test_names_that_would_break_a_key_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        keys.events_stream(bad, "rt-1")
    with pytest.raises(ConfigError):
        keys.events_stream("acme", bad)


def test_event_entry_round_trips() -> None:
    parsed = parse_event_entry(entry())
    assert parsed.key == ("proj-1", "run-1", 1)
    assert parsed.runtime_id == "rt-1"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"event": None}, "missing_field"),
        ({"content_hash": b"zz"}, "bad_field"),
        ({"content_hash": b"0" * 64}, "hash_mismatch"),
        ({"sequence": b"2"}, "field_mismatch"),
        ({"runtime_id": b"rt-2"}, "field_mismatch"),
        ({"event": b"x" * (10 * 1024 * 1024)}, "field_too_large"),
        ({"event": b"\xff\xfe garbage"}, "hash_mismatch"),
    ],
)
def test_malformed_event_entries_name_their_dead_letter_reason(
    change: dict[str, bytes | None], reason: str
) -> None:
    with pytest.raises(WireError) as info:
        parse_event_entry(changed(entry(), change))
    assert info.value.reason == reason


def test_outcomes_travel_many_to_an_entry() -> None:
    records = [
        OutcomeRecord("p", "r", 1, Outcome.ACCEPTED, "a" * 64),
        OutcomeRecord("p", "r", 2, Outcome.CONFLICT, "b" * 64, "sequence_reused", "c" * 64),
    ]
    fields = decode_fields(outcomes_entry_fields("acme", records))
    assert parse_outcomes_entry(fields) == records
    with pytest.raises(WireError):
        parse_outcomes_entry({"kind": b"outcomes", "outcomes": b"[[1]]"})


def test_an_outcome_value_the_protocol_does_not_know_makes_the_entry_malformed() -> None:
    good = OutcomeRecord("p", "r", 1, Outcome.ACCEPTED, "a" * 64).to_wire()
    unknown = [*good[:3], "maybe", *good[4:]]
    fields = {"kind": b"outcomes", "outcomes": json.dumps([good, unknown]).encode()}
    with pytest.raises(WireError, match="malformed") as refused:
        parse_outcomes_entry(fields)
    assert refused.value.reason == "bad_outcomes"


def test_presence_beat_round_trips_and_refuses_garbage() -> None:
    beat = PresenceBeat("rt-1", "acme", "host-a", 42, "0.1.0", 7, "2026-11-29T16:38:54.000000Z")
    assert parse_presence_entry(decode_fields(beat.to_fields())) == beat
    with pytest.raises(WireError) as info:
        parse_presence_entry({"kind": b"presence", "runtime_id": b"rt-1"})
    assert info.value.reason == "missing_field"
