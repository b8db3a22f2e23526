"""Entry signatures: the documented encodings, what breaks them, and what never leaks the key."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import pickle
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubsync.core.entries import (
    Outcome,
    OutcomeRecord,
    PresenceBeat,
    decode_fields,
    outcomes_entry_fields,
    raw_event_entry_fields,
)
from hubsync.core.errors import ConfigError
from hubsync.core.signing import (
    EVENT_SIGNED_FIELDS,
    EVENT_TAG,
    HUB_ID_FIELD,
    PRESENCE_SIGNED_FIELDS,
    PRESENCE_TAG,
    SIGNATURE_FIELD,
    EventSigner,
    RuntimeKey,
    event_message,
    event_signed_body,
    outcomes_message,
    presence_message,
    sign_event,
    sign_event_entry,
    sign_outcomes_entry,
    sign_presence_entry,
    verify_event_body,
    verify_event_entry,
    verify_outcomes_entry,
    verify_presence_entry,
)
from hubsync.processes import child_environment
from tests.helpers.support import REPO_ROOT

KEY = bytes(range(32))
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
HUB_ID = "hub-7d0c5a52"
RUNTIME = "rt-vm-76ff556c"

# The vectors of docs/contract.md (signed encodings), byte for byte.
EVENT_VECTOR = (
    b"16:hubsync/event/v2,5:event,13:shop-48ee17a7,4:shop,13:run-2026-0001,1:7,11:run.started,"
    b"14:rt-vm-76ff556c,64:" + EMPTY_SHA256.encode() + b","
)
EVENT_VECTOR_SIG = "a3dca1c0315ce0f08932f91205397459855bcc578f6e673d47f5a94eec3007c0"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACED_EVENT_VECTOR = EVENT_VECTOR + b"55:" + TRACEPARENT.encode() + b","
TRACED_EVENT_VECTOR_SIG = "9aca7bbcec4d59e797ebfc280570abaa66ce33bbb215b756b1f145480f51de6d"
EVENT_VALUES = (
    "event", "shop-48ee17a7", "shop", "run-2026-0001", 7, "run.started", RUNTIME, EMPTY_SHA256
)  # fmt: skip
"""The vector's ``EVENT_SIGNED_FIELDS``, in order."""
EVENT_VALUES_READ = tuple(str(value).encode() for value in EVENT_VALUES)
"""The same as the consumer reads them (bytes)."""
PRESENCE_VECTOR = (
    b"19:hubsync/presence/v1,14:rt-vm-76ff556c,4:shop,7:build-3,4:4242,5:0.4.0,1:0,"
    b"27:2026-12-01T00:03:51.698340Z,"
)
PRESENCE_VECTOR_SIG = "4479b2b2993e23b05e2f6a72fde541c12c3c54e2a37f4c051c8feca243da8658"
OUTCOMES_PAYLOAD = (
    b'[["shop-48ee17a7","run-2026-0001",7,"accepted","' + EMPTY_SHA256.encode() + b'",null,null]]'
)
OUTCOMES_VECTOR = (
    b"19:hubsync/outcomes/v1,12:hub-7d0c5a52,4:shop,14:rt-vm-76ff556c,125:"
    + OUTCOMES_PAYLOAD
    + b","
)
OUTCOMES_VECTOR_SIG = "3cac35144b85c48744a9573313a0f936fdbe9179c08eea7463fb404c43ecb167"


def hmac_hex(message: bytes, key: bytes = KEY) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def relay_event_fields(**changes: object) -> dict[str, str | bytes]:
    """Event entry fields as the relay builds them (str values), with ``changes`` applied."""
    values: dict[str, object] = {
        "project_id": "shop-48ee17a7",
        "hub_project": "shop",
        "run_id": "run-2026-0001",
        "sequence": 7,
        "event_type": "run.started",
        "runtime_id": RUNTIME,
        "digest": EMPTY_SHA256,
        "data": b"",
    } | changes
    return raw_event_entry_fields(**values)  # type: ignore[arg-type]


def signed_event(key: RuntimeKey, **changes: object) -> dict[str, bytes]:
    """A signed event entry as the consumer reads it (bytes values)."""
    fields = relay_event_fields(**changes)
    fields[SIGNATURE_FIELD] = sign_event_entry(key, fields)
    return decode_fields(fields)


def beat() -> PresenceBeat:
    return PresenceBeat(
        runtime_id=RUNTIME,
        hub_project="shop",
        host="build-3",
        pid=4242,
        version="0.4.0",
        backlog=0,
        heartbeat="2026-12-01T00:03:51.698340Z",
    )


def signed_beat(key: RuntimeKey) -> dict[str, bytes]:
    fields = beat().to_fields()
    fields[SIGNATURE_FIELD] = sign_presence_entry(key, fields)
    return decode_fields(fields)


def outcomes_fields(hub_id: str = HUB_ID) -> dict[str, str]:
    record = OutcomeRecord(
        project_id="shop-48ee17a7",
        run_id="run-2026-0001",
        sequence=7,
        outcome=Outcome.ACCEPTED,
        content_hash=EMPTY_SHA256,
    )
    return outcomes_entry_fields("shop", [record]) | {HUB_ID_FIELD: hub_id}


def signed_outcomes(key: RuntimeKey, runtime_id: str = RUNTIME) -> dict[str, bytes]:
    fields = outcomes_fields()
    fields[SIGNATURE_FIELD] = sign_outcomes_entry(key, fields, runtime_id=runtime_id)
    return decode_fields(fields)


# ----- known answers -----


def test_event_vector_is_the_hmac_of_the_documented_encoding() -> None:
    key = RuntimeKey(KEY)
    assert EVENT_TAG == b"hubsync/event/v2"
    assert event_message(*EVENT_VALUES) == EVENT_VECTOR
    assert hmac_hex(EVENT_VECTOR) == EVENT_VECTOR_SIG
    assert relay_event_fields()["sequence"] == "7"
    assert sign_event_entry(key, relay_event_fields()) == EVENT_VECTOR_SIG
    assert (
        sign_event(
            key,
            project_id="shop-48ee17a7",
            hub_project="shop",
            run_id="run-2026-0001",
            sequence=7,
            event_type="run.started",
            runtime_id=RUNTIME,
            content_hash=EMPTY_SHA256,
        )
        == EVENT_VECTOR_SIG
    )


def test_a_traceparent_is_one_more_netstring_and_signs_on_every_path() -> None:
    key = RuntimeKey(KEY)
    assert event_message(*EVENT_VALUES, traceparent=TRACEPARENT) == TRACED_EVENT_VECTOR
    assert hmac_hex(TRACED_EVENT_VECTOR) == TRACED_EVENT_VECTOR_SIG
    fields = relay_event_fields(traceparent=TRACEPARENT)
    assert sign_event_entry(key, fields) == TRACED_EVENT_VECTOR_SIG
    signer = EventSigner(key, project_id="shop-48ee17a7", hub_project="shop", runtime_id=RUNTIME)
    args = (b"run-2026-0001", b"7", b"run.started", EMPTY_SHA256.encode())
    assert signer.sign(*args, TRACEPARENT.encode()) == TRACED_EVENT_VECTOR_SIG
    assert signer.sign(*args) == EVENT_VECTOR_SIG, "without it, the message is as before"
    read = decode_fields(fields | {SIGNATURE_FIELD: TRACED_EVENT_VECTOR_SIG})
    assert verify_event_entry([key], read) is key
    assert (
        verify_event_body(
            [key], event_signed_body(*EVENT_VALUES_READ, TRACEPARENT.encode()), read["sig"]
        )
        is key
    )
    # taken away, added or changed, it breaks the signature
    stripped = {name: value for name, value in read.items() if name != "traceparent"}
    assert verify_event_entry([key], stripped) is None
    assert (
        verify_event_entry([key], signed_event(key) | {"traceparent": TRACEPARENT.encode()}) is None
    )
    changed = read | {"traceparent": TRACEPARENT[:-1].encode() + b"0"}
    assert verify_event_entry([key], changed) is None


def test_presence_vector_is_the_hmac_of_the_documented_encoding() -> None:
    assert presence_message(beat().to_fields()) == PRESENCE_VECTOR
    assert hmac_hex(PRESENCE_VECTOR) == PRESENCE_VECTOR_SIG
    assert sign_presence_entry(RuntimeKey(KEY), beat().to_fields()) == PRESENCE_VECTOR_SIG


def test_outcomes_vector_is_the_hmac_of_the_payload_as_sent() -> None:
    fields = outcomes_fields()
    assert fields["outcomes"].encode() == OUTCOMES_PAYLOAD
    assert outcomes_message(HUB_ID, "shop", RUNTIME, fields["outcomes"]) == OUTCOMES_VECTOR
    assert hmac_hex(OUTCOMES_VECTOR) == OUTCOMES_VECTOR_SIG
    assert sign_outcomes_entry(RuntimeKey(KEY), fields, runtime_id=RUNTIME) == OUTCOMES_VECTOR_SIG


def test_the_contract_shows_these_vectors() -> None:
    contract = (REPO_ROOT / "docs" / "contract.md").read_text()
    for message, sig in (
        (EVENT_VECTOR, EVENT_VECTOR_SIG),
        (TRACED_EVENT_VECTOR, TRACED_EVENT_VECTOR_SIG),
        (PRESENCE_VECTOR, PRESENCE_VECTOR_SIG),
        (OUTCOMES_VECTOR, OUTCOMES_VECTOR_SIG),
    ):
        shown = message.replace(EMPTY_SHA256.encode(), b"H").decode()
        assert f"`{shown}` | `{sig}`" in contract


# ----- round trips through the entry fields both sides build -----


def test_a_relay_signed_event_verifies_as_the_consumer_reads_it() -> None:
    key = RuntimeKey.generate()
    assert verify_event_entry([key], signed_event(key)) is key


def test_a_signed_beat_verifies_as_read() -> None:
    key = RuntimeKey.generate()
    assert verify_presence_entry([key], signed_beat(key)) is key


def test_a_hub_signed_outcomes_entry_verifies_for_its_runtime_only() -> None:
    key = RuntimeKey.generate()
    entry = signed_outcomes(key)
    assert verify_outcomes_entry([key], entry, runtime_id=RUNTIME) is key
    assert verify_outcomes_entry([key], entry, runtime_id=RUNTIME.encode()) is key
    assert verify_outcomes_entry([key], entry, runtime_id="rt-other") is None


Signer = Callable[[RuntimeKey], dict[str, bytes]]
Verifier = Callable[[Sequence[RuntimeKey], Mapping[str, str | bytes]], RuntimeKey | None]
SIGNED_FIELDS_OF_ENTRIES: list[tuple[Signer, Verifier, str]] = [
    *((signed_event, verify_event_entry, name) for name in EVENT_SIGNED_FIELDS),
    *((signed_beat, verify_presence_entry, name) for name in PRESENCE_SIGNED_FIELDS),
]
"""Each signed field of an event and of a presence entry, with how the entry is signed and read."""


@pytest.mark.parametrize(("sign", "verify", "name"), SIGNED_FIELDS_OF_ENTRIES)
def test_changing_any_signed_field_of_an_event_or_a_beat_breaks_the_signature(
    sign: Signer, verify: Verifier, name: str
) -> None:
    key = RuntimeKey.generate()
    entry = sign(key)
    entry[name] = entry[name] + b"1"
    assert verify([key], entry) is None


@pytest.mark.parametrize("name", EVENT_SIGNED_FIELDS)
def test_an_event_missing_a_signed_field_is_not_verified(name: str) -> None:
    key = RuntimeKey.generate()
    entry = signed_event(key)
    del entry[name]
    assert verify_event_entry([key], entry) is None


def test_a_leading_zero_in_the_sequence_breaks_the_signature() -> None:
    key = RuntimeKey.generate()
    entry = signed_event(key)
    entry["sequence"] = b"07"
    assert verify_event_entry([key], entry) is None


@pytest.mark.parametrize("name", [HUB_ID_FIELD, "hub_project", "outcomes"])
def test_changing_any_signed_outcomes_field_breaks_the_signature(name: str) -> None:
    key = RuntimeKey.generate()
    entry = signed_outcomes(key)
    entry[name] = entry[name].replace(b"7", b"8") if name == "outcomes" else entry[name] + b"x"
    assert verify_outcomes_entry([key], entry, runtime_id=RUNTIME) is None


def test_another_runtimes_key_does_not_verify() -> None:
    entry = signed_event(RuntimeKey.generate())
    assert verify_event_entry([RuntimeKey.generate()], entry) is None
    assert verify_event_entry([], entry) is None


# ----- domain separation and field boundaries -----


def test_an_event_signature_never_verifies_as_presence_or_outcomes() -> None:
    key = RuntimeKey.generate()
    # Field values arranged so the untagged field lists line up: the presence beat's
    # seven fields are the event's first seven; the outcomes entry carries the event's
    # encoded fields as its payload.
    values = tuple(str(value) for value in EVENT_VALUES)
    sig = sign_event_entry(key, dict(zip(EVENT_SIGNED_FIELDS, values, strict=True)))
    presence = dict(zip(PRESENCE_SIGNED_FIELDS, values[:7], strict=True))
    presence[SIGNATURE_FIELD] = sig
    assert verify_presence_entry([key], presence) is None
    body = event_message(*values).split(b",", 1)[1]
    outcomes = {HUB_ID_FIELD: "", "hub_project": "", "outcomes": body, SIGNATURE_FIELD: sig}
    assert verify_outcomes_entry([key], outcomes, runtime_id="") is None


def test_presence_and_outcomes_signatures_never_verify_as_events() -> None:
    key = RuntimeKey.generate()
    event = signed_event(key)
    event[SIGNATURE_FIELD] = signed_beat(key)[SIGNATURE_FIELD]
    assert verify_event_entry([key], event) is None
    event[SIGNATURE_FIELD] = signed_outcomes(key)[SIGNATURE_FIELD]
    assert verify_event_entry([key], event) is None


ids = st.text(min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(event=st.tuples(*[ids] * 8), beat=st.tuples(*[ids] * 7))
def test_no_event_encoding_equals_a_presence_or_outcomes_encoding(
    event: tuple[str, ...], beat: tuple[str, ...]
) -> None:
    message = event_message(*event)
    assert message != presence_message(dict(zip(PRESENCE_SIGNED_FIELDS, beat, strict=True)))
    assert message != outcomes_message(*beat[:4])


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"project_id": "ab", "hub_project": "c"}, {"project_id": "a", "hub_project": "bc"}),
        ({"run_id": "r1", "sequence": 23}, {"run_id": "r12", "sequence": 3}),
        ({"sequence": 12, "event_type": "3run.x"}, {"sequence": 123, "event_type": "run.x"}),
        (
            {"event_type": "run.x", "runtime_id": "4:rt"},
            {"event_type": "run.x4:", "runtime_id": "rt"},
        ),
        ({"hub_project": "p,1:", "run_id": "xr"}, {"hub_project": "p", "run_id": ",1:xr"}),
    ],
)
def test_bytes_cannot_move_across_a_field_boundary(
    first: dict[str, object], second: dict[str, object]
) -> None:
    key = RuntimeKey.generate()
    one = signed_event(key, **first)
    other = signed_event(key, **second)
    # the naive concatenation of the signed fields is the same for both...
    assert b"".join(one[n] for n in EVENT_SIGNED_FIELDS) == b"".join(
        other[n] for n in EVENT_SIGNED_FIELDS
    )
    # ...but neither signature verifies the other's fields
    assert one[SIGNATURE_FIELD] != other[SIGNATURE_FIELD]
    one[SIGNATURE_FIELD], other[SIGNATURE_FIELD] = other[SIGNATURE_FIELD], one[SIGNATURE_FIELD]
    assert verify_event_entry([key], one) is None
    assert verify_event_entry([key], other) is None


# ----- keys in rotation -----


def test_the_previous_key_is_accepted_and_reported_as_the_match() -> None:
    previous, current = RuntimeKey.generate(), RuntimeKey.generate()
    assert verify_event_entry([current, previous], signed_event(previous)) is previous
    assert verify_event_entry([current, previous], signed_event(current)) is current
    assert verify_event_entry([current], signed_event(previous)) is None
    beat_entry = signed_beat(previous)
    assert verify_presence_entry([current, previous], beat_entry) is previous
    outcomes = signed_outcomes(previous)
    assert verify_outcomes_entry([current, previous], outcomes, runtime_id=RUNTIME) is previous


# ----- malformed signatures -----


@pytest.mark.parametrize(
    "signature",
    [
        b"",
        b"00",
        EVENT_VECTOR_SIG[:-1].encode(),
        (EVENT_VECTOR_SIG + "0").encode(),
        EVENT_VECTOR_SIG.upper().encode(),
        b"z" * 64,
        "é".encode() * 32,
        b"\xff" * 64,
        b"\x00" * 64,
        "é" * 64,
        EVENT_VECTOR_SIG.upper(),
        "\udcff" * 64,
        None,
        12345,
    ],
)
def test_a_malformed_signature_is_not_verified_and_nothing_is_raised(signature: object) -> None:
    key = RuntimeKey(KEY)
    entry: dict[str, object] = dict(signed_event(key))
    assert entry[SIGNATURE_FIELD] == EVENT_VECTOR_SIG.encode()
    entry[SIGNATURE_FIELD] = signature
    assert verify_event_entry([key], entry) is None  # type: ignore[arg-type]
    assert verify_presence_entry([key], entry) is None  # type: ignore[arg-type]
    assert verify_outcomes_entry([key], entry, runtime_id=RUNTIME) is None  # type: ignore[arg-type]


def test_an_unsigned_entry_is_not_verified() -> None:
    key = RuntimeKey.generate()
    entry = signed_event(key)
    del entry[SIGNATURE_FIELD]
    assert verify_event_entry([key], entry) is None
    assert verify_presence_entry([key], decode_fields(beat().to_fields())) is None
    assert (
        verify_outcomes_entry([key], decode_fields(outcomes_fields()), runtime_id=RUNTIME) is None
    )


def test_field_values_that_are_not_text_are_not_verified() -> None:
    key = RuntimeKey.generate()
    entry: dict[str, object] = dict(signed_event(key))
    entry["project_id"] = "\udcff"  # cannot be UTF-8
    assert verify_event_entry([key], entry) is None  # type: ignore[arg-type]
    entry["project_id"] = 3.5
    assert verify_event_entry([key], entry) is None  # type: ignore[arg-type]


def test_str_and_bytes_field_values_sign_the_same_bytes() -> None:
    key = RuntimeKey.generate()
    fields = relay_event_fields()
    fields[SIGNATURE_FIELD] = sign_event_entry(key, fields)
    assert verify_event_entry([key], fields) is key  # str values: the general path
    assert verify_event_entry([key], decode_fields(fields)) is key


def test_signing_names_the_field_it_cannot_encode_without_its_value() -> None:
    key = RuntimeKey.generate()
    with pytest.raises(ConfigError, match="'run_id' is not valid text") as caught:
        sign_event_entry(key, relay_event_fields(run_id="secret-\udcff"))
    assert "secret" not in str(caught.value)
    fields = relay_event_fields()
    del fields["content_hash"]
    with pytest.raises(ConfigError, match="no 'content_hash' field"):
        sign_event_entry(key, fields)


# ----- the key itself -----


def test_a_key_never_shows_its_bytes() -> None:
    secret = bytes.fromhex("5e" * 32)
    key = RuntimeKey(secret)
    for text in (repr(key), str(key), f"{key}", f"{key!r}", repr([key]), repr({"k": key})):
        assert "5e5e" not in text
        assert secret.decode("latin-1") not in text
        assert text.count(key.fingerprint) == 1
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(key)
    with pytest.raises(TypeError):
        copy.copy(key)
    assert not hasattr(key, "__dict__")
    assert key.reveal() == secret


def test_a_key_of_the_wrong_size_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError, match="must be 32 bytes, got 31 bytes") as caught:
        RuntimeKey(b"s" * 31)
    assert "sss" not in str(caught.value)
    with pytest.raises(ConfigError, match="got str"):
        RuntimeKey("s" * 32)  # type: ignore[arg-type]


def test_keys_compare_by_their_bytes_and_fingerprint_stably() -> None:
    assert RuntimeKey(KEY) == RuntimeKey(KEY)
    assert RuntimeKey(KEY) != RuntimeKey.generate()
    assert RuntimeKey(KEY).fingerprint == hmac_hex(b"26:hubsync/key-fingerprint/v1,")[:16]
    assert len({RuntimeKey(KEY), RuntimeKey(KEY)}) == 1


# ----- property -----

text_ids = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=128)


def signed_values(max_sequence: int) -> st.SearchStrategy[dict[str, Any]]:
    """An event's signed values: ``EVENT_SIGNED_FIELDS`` (``kind`` ``event``, the sequence an
    ``int``, the ``content_hash`` hex)."""
    return st.fixed_dictionaries(
        {
            "kind": st.just("event"),
            "project_id": text_ids,
            "hub_project": text_ids,
            "run_id": text_ids,
            "sequence": st.integers(min_value=1, max_value=max_sequence),
            "event_type": text_ids,
            "runtime_id": text_ids,
            "content_hash": st.binary(min_size=32, max_size=32).map(bytes.hex),
        }
    )


@settings(max_examples=150, deadline=None)
@given(values=signed_values(2**63 - 1), other=text_ids)
def test_any_valid_event_round_trips_and_only_for_its_own_fields(
    values: dict[str, Any], other: str
) -> None:
    key = RuntimeKey(KEY)
    fields = dict(values)
    del fields["kind"]
    entry = signed_event(key, digest=fields.pop("content_hash"), **fields)
    message = event_message(*(values[name] for name in EVENT_SIGNED_FIELDS))
    assert entry[SIGNATURE_FIELD].decode() == hmac_hex(message)
    assert verify_event_entry([RuntimeKey.generate(), key], entry) is key
    if other != values["run_id"]:
        entry["run_id"] = other.encode()
        assert verify_event_entry([key], entry) is None


# ----- one encoding for every signer and verifier -----


def _event_signers(key: RuntimeKey, values: dict[str, str]) -> dict[str, str]:
    """The ``sig`` each event signer makes for ``values`` (``EVENT_SIGNED_FIELDS``, as text)."""
    fields = relay_event_fields(
        project_id=values["project_id"],
        hub_project=values["hub_project"],
        run_id=values["run_id"],
        sequence=int(values["sequence"]),
        event_type=values["event_type"],
        runtime_id=values["runtime_id"],
        digest=values["content_hash"],
    )
    signer = EventSigner(
        key,
        project_id=values["project_id"],
        hub_project=values["hub_project"],
        runtime_id=values["runtime_id"],
    )
    return {
        "sign_event": sign_event(key, **{n: v for n, v in values.items() if n != "kind"}),
        "sign_event_entry": sign_event_entry(key, fields),
        "EventSigner": signer.sign(
            values["run_id"].encode(),
            values["sequence"].encode(),
            values["event_type"].encode(),
            values["content_hash"].encode(),
        ),
    }


def _event_verifiers(
    key: RuntimeKey, values: Mapping[str, bytes], signature: bytes
) -> dict[str, RuntimeKey | None]:
    """What each event verifier answers for ``values`` (the signed fields as read) and ``sig``."""
    read = dict(values) | {SIGNATURE_FIELD: signature}
    as_text = {name: value.decode() for name, value in read.items()}
    return {
        "verify_event_entry": verify_event_entry([key], read),
        "verify_event_entry (text)": verify_event_entry([key], as_text),
        "verify_event_body": verify_event_body(
            [key], event_signed_body(*(values[name] for name in EVENT_SIGNED_FIELDS)), signature
        ),
    }


@settings(max_examples=100, deadline=None)
@given(
    signed=signed_values(2**62),
    changed=st.sampled_from(EVENT_SIGNED_FIELDS),
    extra=st.binary(min_size=1, max_size=3),
)
def test_every_event_signer_and_verifier_uses_the_one_signed_encoding(
    signed: dict[str, Any], changed: str, extra: bytes
) -> None:
    """Every signer signs ``event_message`` (the tag, then ``event_signed_body``), every
    verifier accepts what they sign, and a change to any covered field verifies nowhere."""
    key = RuntimeKey(KEY)
    values = {name: str(value) for name, value in signed.items()}
    read = {name: value.encode() for name, value in values.items()}
    message = event_message(*(read[name] for name in EVENT_SIGNED_FIELDS))
    assert message == b"%d:%b," % (len(EVENT_TAG), EVENT_TAG) + event_signed_body(
        *(read[name] for name in EVENT_SIGNED_FIELDS)
    )
    expected = hmac_hex(message)
    assert _event_signers(key, values) == dict.fromkeys(
        ("sign_event", "sign_event_entry", "EventSigner"), expected
    )
    signature = expected.encode()
    assert set(_event_verifiers(key, read, signature).values()) == {key}
    if changed == "content_hash":
        tampered = read | {
            changed: read[changed][:-1] + (b"0" if read[changed][-1:] != b"0" else b"1")
        }
    else:
        tampered = read | {changed: read[changed] + extra.hex().encode()}
    assert set(_event_verifiers(key, tampered, signature).values()) == {None}
    # the tag is covered too: the same fields under another kind's tag sign other bytes
    other_kind = hmac_hex(
        b"%d:%b," % (len(PRESENCE_TAG), PRESENCE_TAG) + event_signed_body(*read.values())
    )
    assert set(_event_verifiers(key, read, other_kind.encode()).values()) == {None}


# ----- the benchmark -----


def test_the_benchmark_reports_every_operation_beside_raw_hmac() -> None:
    script = REPO_ROOT / "scripts" / "bench_signing.py"
    done = subprocess.run(
        [sys.executable, str(script), "--number", "50", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=child_environment(),
    )
    report = json.loads(done.stdout)
    operations = report["operations"]
    assert set(operations) == {
        "event_sign",
        "event_sign_entry",
        "event_verify_1_key",
        "event_verify_2_keys",
        "presence_sign",
        "presence_verify",
        "outcomes_500_sign",
        "outcomes_500_verify",
    }
    for row in operations.values():
        assert row["us"] > 0 and row["raw_hmac_digest_us"] > 0
        assert row["ratio_vs_raw"] == pytest.approx(row["us"] / row["raw_hmac_digest_us"], abs=0.01)
    assert report["target_event_verify_us"] == 3.0
    assert "event_verify_1_key" in done.stderr
