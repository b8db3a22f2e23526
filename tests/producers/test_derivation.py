"""Derivation: the allowlist decides what crosses; the bytes are canonical and hashed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from hubsync.core.canonical import content_hash, verify_content_hash
from hubsync.core.errors import ConfigError, WireError
from hubsync.core.wire import MAX_EVENT_BYTES, parse_sync_event
from producers.derivation import (
    DEFAULT_ALLOWLIST,
    Allowlist,
    EventDeriver,
    StoreIdentity,
    derive_sync_event,
)
from producers.errors import DerivationError, EventTooLargeError, SecretInIdError
from producers.redaction import Redactor

IDENTITY = StoreIdentity("proj-1", "acme", "rt-host-0001")
WHEN = "2026-11-29T16:38:54.123456Z"


def derive(event_type: str, payload: dict[str, object], **kwargs: object) -> dict[str, object]:
    event, data, digest = derive_sync_event(
        IDENTITY, "run-1", 1, event_type, payload, occurred_at=WHEN, **kwargs
    )
    assert content_hash(data) == digest
    return event.data


def test_only_allowlisted_fields_cross() -> None:
    data = derive(
        "step.completed",
        {"step_id": "s1", "status": "ok", "outputs": {"n": 1}, "env": {"PATH": "/bin"}},
    )
    assert data == {"step_id": "s1", "status": "ok", "outputs": {"n": 1}}


def test_a_dotted_path_lets_only_that_nested_field_cross() -> None:
    data = derive(
        "step.failed",
        {"step_id": "s1", "error": {"type": "Boom", "message": "bad", "stack": ["f.py:1"]}},
    )
    assert data == {"step_id": "s1", "error": {"type": "Boom", "message": "bad"}}


def test_a_nested_path_into_a_non_object_crosses_nothing() -> None:
    assert derive("step.failed", {"error": "plain text"}) == {}


def test_an_unknown_event_type_crosses_with_empty_data() -> None:
    assert derive("custom.thing", {"anything": "at all", "step_id": "s"}) == {}


def test_the_allowlist_can_be_extended_at_runtime() -> None:
    allowlist = Allowlist()
    allowlist.extend("custom.thing", ["visible", "nested.part"])
    data = derive(
        "custom.thing",
        {"visible": 1, "hidden": 2, "nested": {"part": 3, "other": 4}},
        allowlist=allowlist,
    )
    assert data == {"visible": 1, "nested": {"part": 3}}
    assert allowlist.fields("custom.thing") == {"visible", "nested.part"}


def test_a_whole_field_wins_over_a_path_beneath_it() -> None:
    allowlist = Allowlist({"x.y": ["error.message", "error"]})
    assert allowlist.select("x.y", {"error": {"message": "m", "stack": "s"}}) == {
        "error": {"message": "m", "stack": "s"}
    }


@pytest.mark.parametrize("bad", ["", "a..b", ".a", "a."])
def test_a_malformed_allowlist_path_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        Allowlist().extend("run.started", [bad])


def test_a_malformed_event_type_cannot_be_allowlisted() -> None:
    with pytest.raises(ConfigError):
        Allowlist().extend("Not A Type", ["x"])


def test_default_allowlist_covers_the_documented_event_types() -> None:
    assert set(Allowlist().event_types()) == set(DEFAULT_ALLOWLIST)
    assert {"run.started", "run.completed", "step.failed", "approval.requested"} <= set(
        DEFAULT_ALLOWLIST
    )


def test_derivation_redacts_what_crosses() -> None:
    redactor = Redactor()
    redactor.register("tok-abcdef-123")
    data = derive(
        "step.completed",
        {"outputs": {"tok-abcdef-123": "auth tok-abcdef-123"}},
        redactor=redactor,
    )
    assert data == {"outputs": {"[REDACTED:registered]": "auth [REDACTED:registered]"}}


def test_the_same_event_gives_the_same_bytes_and_hash_whatever_the_dict_order() -> None:
    first = {"step_id": "s", "outputs": {"a": 1, "b": [1, {"y": 2, "x": 1}]}, "status": "ok"}
    second = {"status": "ok", "outputs": {"b": [1, {"x": 1, "y": 2}], "a": 1}, "step_id": "s"}
    _, bytes_1, hash_1 = derive_sync_event(
        IDENTITY, "r", 3, "step.completed", first, occurred_at=WHEN
    )
    _, bytes_2, hash_2 = derive_sync_event(
        IDENTITY, "r", 3, "step.completed", second, occurred_at=WHEN
    )
    assert bytes_1 == bytes_2
    assert hash_1 == hash_2


def test_derived_bytes_are_a_valid_canonical_wire_event() -> None:
    event, data, digest = derive_sync_event(
        IDENTITY, "run-7", 42, "run.started", {"workflow_id": "wf", "é": "ü"}, occurred_at=WHEN
    )
    parsed = parse_sync_event(data, digest)
    assert parsed == event
    assert parsed.sequence == 42
    assert parsed.home_runtime_id == "rt-host-0001"
    assert data == event.canonical_bytes()


def test_tampered_bytes_fail_hash_verification() -> None:
    _, data, digest = derive_sync_event(
        IDENTITY, "run-7", 1, "run.started", {"workflow_id": "wf"}, occurred_at=WHEN
    )
    tampered = data.replace(b'"wf"', b'"wX"')
    with pytest.raises(WireError) as info:
        verify_content_hash(tampered, digest)
    assert info.value.reason == "hash_mismatch"


def test_occurred_at_in_another_offset_is_normalised_to_utc() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=2)))
    event, _, _ = derive_sync_event(IDENTITY, "r", 1, "run.started", {}, occurred_at=when)
    assert event.to_wire()["occurred_at"] == "2026-01-02T01:04:05.000006Z"


def test_a_default_occurred_at_is_now_in_the_canonical_format() -> None:
    event, _, _ = derive_sync_event(IDENTITY, "r", 1, "run.started", {})
    text = event.to_wire()["occurred_at"]
    assert text.endswith("Z") and len(text) == len(WHEN)


@pytest.mark.parametrize(
    ("run_id", "event_type", "payload", "occurred_at", "words"),
    [
        ("bad run id", "run.started", {}, None, "run id"),
        ("r", "Bad Type", {}, None, "event type"),
        ("r", "run.started", ["not", "an", "object"], None, "JSON object"),
        ("r", "run.started", {"x": float("nan")}, None, "not JSON"),
        ("r", "run.started", {"x": {1, 2}}, None, "not JSON"),
        ("r", "run.started", {}, datetime(2026, 1, 1), "timezone-aware"),
        ("r", "run.started", {}, "yesterday", "ISO-8601"),
    ],
)
def test_bad_local_input_is_refused_with_an_error_naming_the_problem(
    run_id: str, event_type: str, payload: object, occurred_at: object, words: str
) -> None:
    with pytest.raises(DerivationError) as info:
        derive_sync_event(IDENTITY, run_id, 1, event_type, payload, occurred_at=occurred_at)  # type: ignore[arg-type]
    assert words in str(info.value)


def test_an_event_over_the_size_limit_is_refused_naming_its_size() -> None:
    deriver = EventDeriver(IDENTITY, Allowlist(), Redactor())
    prepared = deriver.prepare("r", "run.completed", {"summary": "x" * MAX_EVENT_BYTES})
    with pytest.raises(EventTooLargeError) as info:
        deriver.encode(prepared, 1)
    assert str(MAX_EVENT_BYTES) in str(info.value)


def test_local_json_keeps_every_field_but_redacted() -> None:
    redactor = Redactor()
    redactor.register("local-secret-99")
    deriver = EventDeriver(IDENTITY, Allowlist(), redactor)
    prepared = deriver.prepare("r", "run.started", {"env": {"K": "local-secret-99"}, "x": 1})
    assert json.loads(prepared.local_json) == {"env": {"K": "[REDACTED:registered]"}, "x": 1}
    assert prepared.data == {}


@pytest.mark.parametrize(
    ("run_id", "event_type", "field", "offending"),
    [
        ("bad run id", "run.started", "run id", "bad run"),
        ("r", "Bad Type", "event type", "Bad Type"),
        ("ghp_" + "Q" * 150, "run.started", "run id", "ghp_"),  # too long AND a token
        ("xoxb-1234567890-abcdef", "run.started", "run id", "xoxb"),
        ("r", "xoxb-1234567890-abcdef", "event type", "xoxb"),
    ],
)
def test_an_error_about_an_id_names_the_field_but_never_repeats_the_value(
    run_id: str, event_type: str, field: str, offending: str
) -> None:
    with pytest.raises(DerivationError) as info:
        derive_sync_event(IDENTITY, run_id, 1, event_type, {})
    assert field in str(info.value)
    assert offending not in str(info.value)


def test_an_id_cleared_before_a_secret_was_registered_is_checked_again() -> None:
    redactor = Redactor()
    deriver = EventDeriver(IDENTITY, Allowlist(), redactor)
    deriver.prepare("run-with-secret-77", "run.started", {})
    redactor.register("secret-77")
    with pytest.raises(SecretInIdError):
        deriver.prepare("run-with-secret-77", "run.started", {})
