"""The wire model: canonical bytes, hashes, and refusal of malformed input."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hubsync.core.canonical import canonical_json, content_hash, verify_content_hash
from hubsync.core.errors import WireError
from hubsync.core.wire import MAX_EVENT_BYTES, parse_sync_event
from tests.helpers.events import make_event

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def test_canonical_json_sorts_keys_and_uses_compact_utf8() -> None:
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_same_value_gives_same_bytes_whatever_the_dict_order(data: dict[str, object]) -> None:
    items = list(data.items())
    random.shuffle(items)
    assert canonical_json(dict(items)) == canonical_json(data)
    event_a, event_b = make_event(data=data), make_event(data=dict(items))
    assert event_a.encoded() == event_b.encoded()


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_encoded_event_round_trips_through_parse(data: dict[str, object]) -> None:
    raw, digest = make_event(data=data).encoded()
    assert parse_sync_event(raw, digest).data == json.loads(raw)["data"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "\ud800"])
def test_canonical_json_refuses_what_json_cannot_carry(bad: object) -> None:
    with pytest.raises(WireError) as info:
        canonical_json({"x": bad})
    assert info.value.reason == "not_canonical"


def test_tampered_bytes_fail_hash_verification() -> None:
    raw, digest = make_event().encoded()
    tampered = raw.replace(b'"build"', b'"deploy"')
    with pytest.raises(WireError) as info:
        parse_sync_event(tampered, digest)
    assert info.value.reason == "hash_mismatch"
    verify_content_hash(raw, digest)
    assert content_hash(raw) == digest


def _raw() -> bytes:
    return make_event().canonical_bytes()


def replaced(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    """A change to an event's bytes: ``old`` replaced with ``new``."""
    return lambda raw: raw.replace(old, new)


@pytest.mark.parametrize(
    ("mutate", "reason", "names"),
    [
        (lambda raw: b"{not json", "bad_json", "JSON"),
        (replaced(b"hubsync.sync-event.v1", b"hubsync.sync-event.v9"), "unknown_schema", "schema"),
        (replaced(b'"schema":"hubsync.sync-event.v1",', b""), "unknown_schema", "schema"),
        (replaced(b'"sequence":1', b'"sequence":0'), "invalid_event", "sequence"),
        (replaced(b'"sequence":1', b'"sequence":"1"'), "invalid_event", "sequence"),
        (replaced(b'"run_id":"run-1"', b'"run_id":7'), "invalid_event", "run_id"),
        (replaced(b'"run_id":"run-1"', b'"run_id":"a{b}"'), "invalid_event", "run_id"),
        (lambda raw: raw[:-1] + b',"zzz":1}', "invalid_event", "zzz"),
        (
            lambda raw: raw.replace(b'"data":{', b'"data":[').replace(b"true}", b"true]"),
            "bad_json",
            "JSON",
        ),
        (replaced(b"54.123456Z", b"54.123456+02:00"), "invalid_event", "occurred_at"),
        (replaced(b'"ok":true', b'"ok": true'), "not_canonical", "canonical"),
        (replaced(b"54.123456Z", b"54.123456+00:00"), "not_canonical", "canonical"),
        (replaced(b"54.123456Z", b"54Z"), "not_canonical", "canonical"),
        (
            replaced(b'"ok":true,"step"', b'"step":"build","ok":true,"x"'),
            "not_canonical",
            "canonical",
        ),
        (replaced(b'"ok":true', b'"ok":NaN'), "not_canonical", "canonical"),
        (lambda raw: b"[]", "invalid_event", "object"),
        (
            lambda raw: raw.replace(b'"ok":true', b'"ok":' + b"[" * 300 + b"]" * 300),
            "bad_json",
            "recursion limit",
        ),
    ],
)
def test_malformed_wire_input_is_refused_with_an_error_naming_the_problem(
    mutate: Callable[[bytes], bytes], reason: str, names: str
) -> None:
    bad = mutate(_raw())
    with pytest.raises(WireError) as info:
        parse_sync_event(bad)
    assert info.value.reason == reason
    assert names in str(info.value)


def test_events_over_the_size_limit_are_refused_both_ways() -> None:
    big = make_event(data={"blob": "x" * MAX_EVENT_BYTES})
    with pytest.raises(WireError) as info:
        big.canonical_bytes()
    assert info.value.reason == "too_large"
    with pytest.raises(WireError) as info:
        parse_sync_event(b" " * (MAX_EVENT_BYTES + 1))
    assert info.value.reason == "too_large"
