"""``consumers.stream.fast_event_check`` against its references: the same verdict on every input.

``prove_sync_event`` must prove only bytes ``parse_sync_event`` (the pydantic
model) accepts, with the same field values; ``check_event_entry`` must give
``parse_event_entry``'s entry or its dead-letter reason and detail;
``prove_event_entry`` and ``FastEventCheck.prove`` must accept only what
``parse_event_entry`` and ``RuntimeAuthenticator.event`` accept, with the same
entry and key, and leave every refusal to them. Valid events, encoded every way
a writer might (canonical, orjson, spaced, unsorted, ASCII-escaped), and broken
ones (a byte changed, dropped or added; a field removed, renamed, retyped or
added; a wrong hash; flat fields that disagree; a forged or odd signature; a
``traceparent``, valid or not, signed or added after signing, or taken away) go through both.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import consumers.stream.fast_event_check
from consumers.stream.authentication import Refusal, RuntimeAuthenticator
from consumers.stream.fast_event_check import (
    FastEventCheck,
    check_event_entry,
    prove_event_entry,
    prove_sync_event,
)
from consumers.stream.fast_reads import fields_of
from hubstore.memory import MemoryHubStore
from hubsync.core.canonical import canonical_json, content_hash
from hubsync.core.clock import format_timestamp
from hubsync.core.entries import (
    FIELD_MISMATCH,
    MAX_FIELD_BYTES,
    SecurityReason,
    decode_fields,
    parse_event_entry,
)
from hubsync.core.errors import WireError
from hubsync.core.signing import RuntimeKey, sign_event_entry
from hubsync.core.wire import MAX_EVENT_BYTES, CheckedEvent, parse_sync_event

SCHEMA = "hubsync.sync-event.v1"
Verdict = tuple[str, str, str]

TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
valid_traceparents = st.from_regex(rb"\A00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z").filter(
    lambda v: v[3:35] != b"0" * 32 and v[36:52] != b"0" * 16
)
odd_traceparents = st.sampled_from(
    [
        b"",
        TRACEPARENT.upper(),
        b"01" + TRACEPARENT[2:],
        b"00-" + b"0" * 32 + TRACEPARENT[35:],
        TRACEPARENT[:36] + b"0" * 16 + TRACEPARENT[52:],
        TRACEPARENT + b"-00",
        TRACEPARENT + b"\n",
        TRACEPARENT[:-1],
        b"\xff" * 55,
        b"x" * 70,
    ]
)
traceparents = valid_traceparents | odd_traceparents


def _verdict(check: Any, *args: Any, **kwargs: Any) -> Verdict:
    """``("ok", repr of the fields, "")`` or ``("refused", reason, detail)``; repr tells
    1 from 1.0 from True, and keeps key order and the timestamp's tzinfo."""
    try:
        result = check(*args, **kwargs)
    except WireError as exc:
        return ("refused", exc.reason, exc.detail)
    if not isinstance(result, CheckedEvent):
        result = CheckedEvent.of(result)
    return ("ok", repr(tuple(result)), "")


def _quick_check(data: bytes, expected_hash: str | None) -> CheckedEvent:
    """The proof when the hash is right and it vouches for the bytes, else the model."""
    if expected_hash is None or content_hash(data) == expected_hash:
        proven = prove_sync_event(data)
        if proven is not None:
            return proven
    return CheckedEvent.of(parse_sync_event(data, expected_hash))


def _same_verdict(data: bytes, expected_hash: str | None) -> Verdict:
    quick = _verdict(_quick_check, data, expected_hash)
    model = _verdict(parse_sync_event, data, expected_hash)
    assert quick == model, data[:300]
    return quick


# ----- generated events -----

valid_ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,24}\Z")
ids = (
    valid_ids
    | st.sampled_from(["", "a" * 128, "a" * 129, "a\n", "-lead", "a{b", "é", "a b", " a"])
    | st.integers(0, 3)
)
sequences = st.integers(1, 1000) | st.sampled_from(
    [0, -1, 2**62, 2**62 + 1, 2**63, 2**64, True, False, 1.0, "1", None]
)
event_types = st.from_regex(r"\A[a-z][a-z0-9_.-]{0,63}\Z") | st.sampled_from(
    ["Step.done", "a" * 65, "1a", "", "a\n", 7]
)
moments = st.datetimes(
    min_value=datetime(1, 1, 1, 0, 0, 1), max_value=datetime(9999, 12, 30, 23, 59)
)


@st.composite
def timestamps(draw: st.DrawFn) -> object:
    moment = draw(moments)
    style = draw(st.integers(0, 9))
    if style <= 4:
        return format_timestamp(moment.replace(tzinfo=UTC))  # the canonical spelling
    if style == 5:
        return moment.replace(tzinfo=UTC).isoformat()  # +00:00, maybe no microseconds
    if style == 6:
        offset = timezone(timedelta(hours=draw(st.integers(-12, 12))))
        return moment.replace(tzinfo=offset).isoformat(timespec="microseconds")
    if style == 7:
        return moment.isoformat(timespec="microseconds")  # naive
    if style == 8:
        return draw(
            st.sampled_from(
                [
                    "2026-11-29T24:00:00.000000Z",
                    "2026-11-29T16:38:60.000000Z",
                    "2026-13-29T16:38:54.123456Z",
                    "2026-02-30T16:38:54.123456Z",
                    "0000-01-01T00:00:00.000000Z",
                    "2026-11-29T16:38:54.123456z",
                    "2026-11-29 16:38:54.123456Z",
                    "2026-11-29T16:38:54.123456-00:00",
                    "2026-11-29T16:38:54.000000Z",
                    "2026-11-29T16:38:54Z",
                    "\uff12\uff10\uff12\uff16-11-29T16:38:54.123456Z",  # full-width digits
                ]
            )
        )
    return draw(st.sampled_from([1764434334, None, "", "yesterday"]))


numbers = (
    st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e-7, 1e16, 1e22, -0.0, 0.1, 5e-324, 1.7976931348623157e308, 2**64 - 1])
)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)


def _nested(depth: int) -> object:
    value: object = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


@st.composite
def events(draw: st.DrawFn) -> dict[str, object]:
    event: dict[str, object] = {
        "schema": SCHEMA,
        "project_id": draw(ids),
        "hub_project": draw(ids),
        "home_runtime_id": draw(ids),
        "run_id": draw(ids),
        "sequence": draw(sequences),
        "event_type": draw(event_types),
        "occurred_at": draw(timestamps()),
        "data": draw(st.dictionaries(st.text(max_size=6), json_values, max_size=5)),
    }
    if draw(st.integers(0, 9)) == 0:
        event["data"] = {"deep": _nested(draw(st.sampled_from([60, 127, 130, 190, 198, 220])))}
    change = draw(st.integers(0, 14))
    if change == 0:
        del event[draw(st.sampled_from(sorted(event)))]
    elif change == 1:
        event["schema_"] = event.pop("schema")
    elif change == 2:
        event["extra"] = draw(json_values)
    elif change == 3:
        event["schema"] = draw(st.sampled_from(["hubsync.sync-event.v2", "", None, 1]))
    elif change == 4:
        event["data"] = draw(json_values)
    return event


def _encodings(event: dict[str, object]) -> list[bytes]:
    out = []
    for encode in (
        canonical_json,
        lambda v: orjson.dumps(v, option=orjson.OPT_SORT_KEYS),
        lambda v: json.dumps(v, sort_keys=True).encode(),  # spaces
        lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode(),  # unsorted
        lambda v: json.dumps(v, sort_keys=True, separators=(",", ":")).encode(),  # \u escapes
    ):
        try:
            out.append(encode(event))
        except (WireError, TypeError, ValueError, orjson.JSONEncodeError):
            continue
    return out


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events(), st.data())
def test_the_quick_check_and_the_model_agree_on_every_encoding(
    event: dict[str, object], data: st.DataObject
) -> None:
    encodings = _encodings(event)
    assume(encodings)
    for raw in encodings:
        _same_verdict(raw, content_hash(raw))
        _same_verdict(raw, None)
    raw = data.draw(st.sampled_from(encodings))
    _same_verdict(raw, "0" * 64)  # a hash of other bytes
    # one byte changed, dropped or added
    at = data.draw(st.integers(0, len(raw)))
    byte = bytes([data.draw(st.integers(0, 255))])
    for broken in (
        raw[:at] + byte + raw[at + 1 :],
        raw[:at] + raw[at + 1 :],
        raw[:at] + byte + raw[at:],
    ):
        _same_verdict(broken, content_hash(broken))


def _stream_fields(raw: bytes, hub_project: str = "shop") -> dict[str, bytes]:
    """The fields of a stream entry carrying ``raw`` (an ``_event()``), unsigned."""
    return {
        "project_id": b"proj-1",
        "hub_project": hub_project.encode(),
        "run_id": b"run-1",
        "sequence": b"7",
        "event_type": b"step.completed",
        "runtime_id": b"rt-1",
        "content_hash": content_hash(raw).encode(),
        "event": raw,
    }


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"null",
        b"[]",
        b"{}",
        b'"text"',
        b"NaN",
        b'{"a":1,"a":2}',
        b"\xff\xfe",
        b'{"data":{"x":"\\ud800"}}',
        b'{"data":{"x":1e400}}',
        b" " * 10,
        b"{" * 300,
    ],
)
def test_garbage_gets_the_models_reason(raw: bytes) -> None:
    assert _same_verdict(raw, content_hash(raw))[0] == "refused"


def _event(**changes: object) -> dict[str, object]:
    return {
        "schema": SCHEMA,
        "project_id": "proj-1",
        "hub_project": "shop",
        "home_runtime_id": "rt-1",
        "run_id": "run-1",
        "sequence": 7,
        "event_type": "step.completed",
        "occurred_at": "2026-11-29T16:38:54.123456Z",
        "data": {"step": "build", "n": 1, "x": 0.5, "nested": {"a": [1, 2, {"b": None}]}},
    } | changes


@pytest.mark.parametrize(
    "raw",
    [
        canonical_json(_event()),
        canonical_json(_event(data={"x": 1e-7})),  # json writes 1e-07, orjson 1e-7
        orjson.dumps(_event(data={"x": 1e-7}), option=orjson.OPT_SORT_KEYS),
        canonical_json(_event(data={"x": 2**64 - 1})),
        canonical_json(_event(data={"x": 2**64})),
        canonical_json(_event(data={"x": -(2**63) - 1})),
        canonical_json(_event(data={"x": "\u2028\x00\x7f\U0001f600"})),
        canonical_json(_event(data={"deep": _nested(150)})),
        canonical_json(_event(data={"deep": _nested(199)})),
        canonical_json(_event(data={"deep": _nested(230)})),
        canonical_json(_event(data={"text": "{[" * 100})),  # brackets that do not nest
        canonical_json(_event(sequence=2**62)),
        canonical_json(_event(sequence=2**62 + 1)),
        canonical_json(_event(sequence=True)),
        canonical_json(_event(occurred_at="2026-11-29T16:38:54.000000Z")),
        canonical_json(_event(occurred_at="2026-11-29T24:00:00.000000Z")),
        canonical_json(_event(project_id="p" * 128)),
        canonical_json(_event(project_id="p" * 129)),
        b"x" * (MAX_EVENT_BYTES + 1),
        canonical_json(_event(data={"pad": "x" * MAX_EVENT_BYTES})),
    ],
)
def test_edge_cases_get_the_models_verdict(raw: bytes) -> None:
    _same_verdict(raw, content_hash(raw))


def test_a_canonical_event_is_proven_without_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = canonical_json(_event())
    expected = CheckedEvent.of(parse_sync_event(raw))

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was consulted")

    monkeypatch.setattr(consumers.stream.fast_event_check, "parse_event_entry", no_model)
    checked = prove_sync_event(raw)
    assert checked is not None
    assert repr(checked) == repr(expected)
    assert checked.occurred_at == datetime(2026, 11, 29, 16, 38, 54, 123456, tzinfo=UTC)
    fields = _stream_fields(raw)
    assert check_event_entry(fields).event == checked
    monkeypatch.undo()
    assert checked.model() == parse_sync_event(raw)
    assert check_event_entry(fields) == parse_event_entry(fields)


# ----- whole entries -----


def _entry_fields(draw: st.DrawFn, event: dict[str, object]) -> dict[str, bytes]:
    """The fields of an event entry for ``event``, its bytes one of its drawn encodings."""
    encodings = _encodings(event)
    assume(encodings)
    raw = draw(st.sampled_from(encodings))
    fields = {
        name: str(event.get(source, "x")).encode()
        for name, source in (
            ("project_id", "project_id"),
            ("hub_project", "hub_project"),
            ("run_id", "run_id"),
            ("sequence", "sequence"),
            ("event_type", "event_type"),
            ("runtime_id", "home_runtime_id"),
        )
    }
    fields["kind"] = b"event"
    fields["event"] = raw
    fields["content_hash"] = content_hash(raw).encode()
    return fields


@st.composite
def entries(draw: st.DrawFn) -> dict[str, bytes]:
    event = draw(events())
    fields = _entry_fields(draw, event)
    change = draw(st.integers(0, 9))
    if change == 0:
        name = draw(st.sampled_from(sorted(fields)))
        fields[name] = draw(
            st.sampled_from([b"", b"\xff", b"07", b"A" * 64, b"0" * 64, b"x" * 70, b"rt-2"])
        )
    elif change == 1:
        del fields[draw(st.sampled_from(sorted(fields)))]
    elif change in (2, 3):
        fields["traceparent"] = draw(traceparents)
    return fields


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries())
def test_check_event_entry_gives_the_verdict_of_parse_event_entry(
    fields: dict[str, bytes],
) -> None:
    assert _entry_verdict(fields, check_event_entry) == _entry_verdict(fields)


def _entry_verdict(fields: dict[str, bytes], check: Any = parse_event_entry) -> Verdict:
    try:
        entry = check(fields)
    except WireError as exc:
        return ("refused", exc.reason, exc.detail)
    return ("ok", repr((tuple(entry.event), entry.data, entry.content_hash, entry.runtime_id)), "")


def test_a_valid_entry_is_proven_by_prove_event_entry() -> None:
    raw = canonical_json(_event())
    fields = _stream_fields(raw)
    proven = _proven_entry_verdict(fields)
    assert proven is not None and proven == _entry_verdict(fields)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries())
def test_prove_event_entry_accepts_only_what_parse_event_entry_accepts(
    fields: dict[str, bytes],
) -> None:
    proven = _proven_entry_verdict(fields)
    if proven is not None:
        assert proven == _entry_verdict(fields)


def _proven_entry_verdict(fields: dict[str, bytes]) -> Verdict | None:
    """``prove_event_entry``'s answer as an ok verdict; None for no verdict."""
    try:
        flat = tuple(fields[name] for name in _FLAT_ORDER)
        data, digest = fields["event"], fields["content_hash"]
    except KeyError:
        return None
    if max(map(len, fields.values())) > MAX_FIELD_BYTES:
        return None
    entry = prove_event_entry(data, digest, flat)  # type: ignore[arg-type]
    if entry is None:
        return None
    return ("ok", repr((tuple(entry.event), entry.data, entry.content_hash, entry.runtime_id)), "")


_FLAT_ORDER = ("project_id", "hub_project", "run_id", "sequence", "event_type", "runtime_id")


# ----- the consumer's fast path, signature included -----

_HUB_PROJECT = "shop"
_hub = MemoryHubStore()
_hub.init_hub()
_KEYS = {
    "rt-1": RuntimeKey(_hub.enroll("rt-1", [_HUB_PROJECT, "other"]).key),
    "rt-2": RuntimeKey(_hub.enroll("rt-2", ["other"]).key),  # not enrolled for shop
}
_STRANGER = RuntimeKey(b"s" * 32)  # enrolled nowhere


def _genuine_fields(draw: st.DrawFn) -> dict[str, bytes]:
    """A genuine entry's fields but ``sig``: a valid event of rt-1 on the stream's hub
    project, canonical bytes, every flat field its own."""
    event = _event(
        run_id=draw(valid_ids),
        sequence=draw(st.integers(1, 2**62)),
        event_type=draw(st.from_regex(r"\A[a-z][a-z0-9_.-]{0,20}\Z")),
        data=draw(st.dictionaries(st.text(max_size=6), json_values, max_size=5)),
    )
    raw = canonical_json(event)
    return (
        {"kind": b"event"}
        | _stream_fields(raw)
        | {
            "run_id": str(event["run_id"]).encode(),
            "sequence": str(event["sequence"]).encode(),
            "event_type": str(event["event_type"]).encode(),
        }
    )


@st.composite
def signed_entries(draw: st.DrawFn) -> dict[bytes, bytes]:
    """Event entries as redis-py reads them (bytes names and values), signed: half of them
    genuine, so the fast path proves many; the others maybe broken: a field changed,
    dropped or added after signing, a forged or odd signature, another kind, a runtime not
    enrolled for the stream's hub project."""
    if draw(st.booleans()):
        fields = _genuine_fields(draw)
        if draw(st.booleans()):
            fields["traceparent"] = draw(valid_traceparents)
        fields["sig"] = sign_event_entry(_KEYS["rt-1"], fields).encode()
        return {name.encode(): value for name, value in fields.items()}
    event = draw(events())
    if draw(st.integers(0, 4)):  # mostly an enrolled runtime on the stream's hub project
        event["home_runtime_id"] = draw(st.sampled_from(["rt-1", "rt-1", "rt-2", "rt-3"]))
        event["hub_project"] = draw(st.sampled_from([_HUB_PROJECT, _HUB_PROJECT, "other"]))
    fields = _entry_fields(draw, event)
    if draw(st.integers(0, 3)) == 0:
        fields["traceparent"] = draw(traceparents)  # signed with the rest, valid or not
    signer = _KEYS.get(fields["runtime_id"].decode(), _STRANGER)
    fields["sig"] = sign_event_entry(signer, fields).encode()
    change = draw(st.integers(0, 15))
    if change in (0, 6):
        name = draw(st.sampled_from(sorted(fields)))
        fields[name] = draw(
            st.sampled_from([b"", b"\xff", b"07", b"A" * 64, b"0" * 64, b"x" * 70, b"rt-2"])
        )
        if change == 6 and name != "sig":  # changed by its signer: only the checks can tell
            fields["sig"] = sign_event_entry(signer, fields).encode()
    elif change == 1:
        del fields[draw(st.sampled_from(sorted(fields)))]
    elif change == 2:
        fields["sig"] = fields["sig"].upper()
    elif change == 3:
        fields["kind"] = draw(st.sampled_from([b"presence", b"Event", b"", b"event "]))
    elif change == 4:
        fields["extra"] = b"x" * draw(st.sampled_from([1, MAX_FIELD_BYTES, MAX_FIELD_BYTES + 1]))
    elif change == 5:
        fields["sig"] = sign_event_entry(_STRANGER, fields).encode()
    elif change == 7:
        del fields["kind"]  # what a plain producer wrote: not a signed event entry
    elif change == 8:
        fields["traceparent"] = draw(traceparents)  # added, or changed, after signing
    return {name.encode(): value for name, value in fields.items()}


def _general_verdict(auth: RuntimeAuthenticator, raw: dict[bytes, bytes]) -> tuple[object, ...]:
    """What the reference decides (``decode_fields``, ``RuntimeAuthenticator.event``,
    ``parse_event_entry``, a flat field at odds with the signed bytes refused), as the
    consumer's general path does."""
    fields = decode_fields(raw)
    if fields.get("kind", b"event") != b"event":
        return ("not an event",)
    key = auth.event(fields, _HUB_PROJECT)
    if isinstance(key, Refusal):
        return ("refused", key.reason)
    try:
        entry = parse_event_entry(fields)
    except WireError as exc:
        if exc.reason == FIELD_MISMATCH:
            return ("refused", SecurityReason.UNAUTHENTICATED)
        return ("dead", exc.reason, exc.detail)
    assert entry.event.hub_project == _HUB_PROJECT  # the signed one, the stream's
    return ("ok", entry, key)


def test_the_fast_path_accepts_only_what_the_general_path_accepts() -> None:
    proven: list[bool] = []

    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(signed_entries(), st.booleans())
    def same_verdict(raw: dict[bytes, bytes], sized: bool) -> None:
        auth = RuntimeAuthenticator(_hub)
        fast = FastEventCheck(auth)
        general = _general_verdict(auth, raw)  # first: it caches the runtime's name and keys
        sized = sized and sum(map(len, raw)) + sum(map(len, raw.values())) <= MAX_FIELD_BYTES
        answer = fast.prove(raw, _HUB_PROJECT, sized)
        proven.append(answer is not None)
        if answer is not None:
            assert general == ("ok", *answer)
        elif general[0] == "ok":
            # a valid signed entry the fast path declines must be one the quick proof leaves
            # to the model (a spelling it cannot vouch for), never a signed canonical one
            assert prove_sync_event(raw[b"event"]) is None

    same_verdict()
    # the genuine half is proven (all but spellings only the model judges)
    assert sum(proven) >= len(proven) // 4, (sum(proven), len(proven))


_RELAY_ORDER = [
    b"kind", b"project_id", b"hub_project", b"run_id", b"sequence", b"event_type",
    b"runtime_id", b"content_hash", b"event", b"traceparent", b"sig",
]  # fmt: skip
"""The order the relay writes an entry's fields in (``EntryBuilder.pairs``)."""


def _relay_pairs(raw: dict[bytes, bytes]) -> list[bytes]:
    """``raw``'s fields as the raw XREADGROUP reply lists them when the relay wrote them:
    names and values alternating, in the relay's order (any other name last)."""
    names = sorted(raw, key=lambda n: _RELAY_ORDER.index(n) if n in _RELAY_ORDER else 99)
    return [part for name in names for part in (name, raw[name])]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(signed_entries(), st.booleans(), st.randoms(use_true_random=False), st.integers(0, 3))
def test_the_pairs_get_the_verdict_of_the_mapping_the_reference_reader_makes(
    raw: dict[bytes, bytes], sized: bool, rng: Any, layout: int
) -> None:
    auth = RuntimeAuthenticator(_hub)
    fast = FastEventCheck(auth)
    _general_verdict(auth, raw)  # the runtime's name and keys cached, as in a running worker
    pairs = _relay_pairs(raw)
    if layout == 1:  # another writer's order
        order = list(raw)
        rng.shuffle(order)
        pairs = [part for name in order for part in (name, raw[name])]
    elif layout == 2 and raw:  # a name given twice: the mapping keeps the last value
        name = rng.choice(sorted(raw))
        pairs = [name, b"earlier", *pairs]
    elif layout == 3 and raw:  # a name given twice, the other value last
        name = rng.choice(sorted(raw))
        pairs = [*pairs, name, b"later"]
    sized = sized and sum(map(len, pairs)) <= MAX_FIELD_BYTES
    assert fast.prove_pairs(pairs, _HUB_PROJECT, sized) == fast.prove(
        fields_of(pairs), _HUB_PROJECT, sized
    )


def test_a_signed_entry_in_the_relays_order_is_proven_by_position() -> None:
    auth = RuntimeAuthenticator(_hub)
    fast = FastEventCheck(auth)
    for raw in (_signed(), _signed(traceparent=TRACEPARENT)):
        general = _general_verdict(auth, raw)
        assert general[0] == "ok"
        pairs = _relay_pairs(raw)
        assert pairs[0::2] in ([*_RELAY_ORDER[:9], b"sig"], _RELAY_ORDER)
        assert fast.prove_pairs(pairs, _HUB_PROJECT) == general[1:]
        assert fast.prove_pairs(pairs, "other") is None
        assert fast.prove_pairs([*pairs[:-1], b"0" * 64], _HUB_PROJECT) is None  # forged sig


def _signed(
    base: dict[str, object] | None = None, data: bytes | None = None, **changes: bytes
) -> dict[bytes, bytes]:
    """A genuine entry of ``base`` (``_event()`` on the stream's hub project), or of the
    bytes ``data``, with ``changes`` made by its signer (signed after the change), as
    redis-py reads it."""
    data = data or canonical_json(base or _event(hub_project=_HUB_PROJECT))
    fields = (
        {"kind": b"event"}
        | _stream_fields(data, hub_project=_HUB_PROJECT)
        | {name: value for name, value in changes.items()}
    )
    signer = _KEYS.get(fields["runtime_id"].decode(), _STRANGER)
    fields["sig"] = sign_event_entry(signer, fields).encode()
    return {name.encode(): value for name, value in fields.items()}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (_signed(project_id=b"proj-2"), ("refused", "unauthenticated")),
        (_signed(hub_project=b"other"), ("refused", "unauthenticated")),
        (_signed(run_id=b"run-2"), ("refused", "unauthenticated")),
        (_signed(sequence=b"07"), ("refused", "unauthenticated")),
        (_signed(sequence=b"8"), ("refused", "unauthenticated")),
        (_signed(event_type=b"step.started"), ("refused", "unauthenticated")),
        (_signed(content_hash=b"0" * 64), ("refused", "unauthenticated")),
        (_signed(content_hash=b"A" * 64), ("refused", "unauthenticated")),
        (_signed(extra=b"x"), ("refused", "unauthenticated")),
        (_signed() | {b"junk": b"x" * 2**21}, ("refused", "unauthenticated")),
        (_signed() | {b"event_type": b"step.started"}, ("refused", "unauthenticated")),
        (
            {k: v for k, v in _signed().items() if k != b"event_type"},
            ("refused", "unauthenticated"),
        ),
        ({k: v for k, v in _signed().items() if k != b"kind"}, ("refused", "unauthenticated")),
        (_signed(data=b"x" * (MAX_FIELD_BYTES + 1)), ("refused", "unauthenticated")),
        (_signed(data=b"x" * 64), ("dead", "bad_json")),
        (_signed(data=json.dumps(_event(hub_project=_HUB_PROJECT)).encode()), None),
        (
            _signed(_event(hub_project="other"), hub_project=b"other"),
            ("refused", "unauthenticated"),
        ),
        (
            _signed(_event(hub_project=_HUB_PROJECT, home_runtime_id="rt-2"), runtime_id=b"rt-2"),
            ("refused", SecurityReason.NOT_ENROLLED),
        ),
        (
            _signed(_event(hub_project=_HUB_PROJECT, home_runtime_id="rt-3"), runtime_id=b"rt-3"),
            ("refused", SecurityReason.UNAUTHENTICATED),
        ),
        (_signed() | {b"sig": _signed()[b"sig"].upper()}, ("refused", "unauthenticated")),
        (_signed() | {b"sig": b"0" * 64}, ("refused", "unauthenticated")),
        ({k: v for k, v in _signed().items() if k != b"sig"}, ("refused", "unauthenticated")),
        (_signed() | {b"project_id": b"proj-2"}, ("refused", "unauthenticated")),
        (_signed(kind=b"presence"), ("not an event",)),
        (_signed() | {b"traceparent": TRACEPARENT}, ("refused", "unauthenticated")),
        (
            {k: v for k, v in _signed(traceparent=TRACEPARENT).items() if k != b"traceparent"},
            ("refused", "unauthenticated"),
        ),
        (
            _signed(traceparent=TRACEPARENT) | {b"traceparent": TRACEPARENT[:-1] + b"0"},
            ("refused", "unauthenticated"),
        ),
        (_signed(traceparent=TRACEPARENT.upper()), ("dead", "bad_field")),
        (_signed(traceparent=b"00-" + b"0" * 32 + TRACEPARENT[35:]), ("dead", "bad_field")),
        (_signed(traceparent=TRACEPARENT + b"\n"), ("dead", "bad_field")),
        (_signed(traceparent=b""), ("dead", "bad_field")),
    ],
)
def test_the_fast_path_leaves_every_refusal_to_the_general_path(
    raw: dict[bytes, bytes], expected: tuple[object, ...] | None
) -> None:
    auth = RuntimeAuthenticator(_hub)
    fast = FastEventCheck(auth)
    _general_verdict(auth, _signed())  # rt-1's name and keys cached, as in a running worker
    general = _general_verdict(auth, raw)
    if expected is None:
        assert general[:2] == ("dead", "not_canonical")
    else:
        assert general[: len(expected)] == expected
    assert fast.prove(raw, _HUB_PROJECT) is None
    assert fast.prove(raw, _HUB_PROJECT, sized=True) is None
    assert fast.prove_pairs(_relay_pairs(raw), _HUB_PROJECT) is None
    assert fast.prove_pairs(_relay_pairs(raw), _HUB_PROJECT, sized=True) is None


def test_the_fast_path_proves_a_signed_entry_and_refuses_nothing_itself() -> None:
    raw = _signed()
    fields = {name.decode(): value for name, value in raw.items() if name != b"sig"}
    auth = RuntimeAuthenticator(_hub)
    fast = FastEventCheck(auth)
    assert fast.prove(raw, _HUB_PROJECT) is None  # a runtime id not yet checked: the general path
    general = _general_verdict(auth, raw)
    assert general[0] == "ok"
    assert fast.prove(raw, _HUB_PROJECT) == general[1:]
    assert fast.prove(raw, "other") is None  # another stream's hub project: refused there
    assert fast.prove({k.decode(): v for k, v in raw.items()}, _HUB_PROJECT) is None  # type: ignore[arg-type]
    forged = raw | {b"sig": sign_event_entry(_STRANGER, fields).encode()}
    assert fast.prove(forged, _HUB_PROJECT) is None
    assert _general_verdict(auth, forged)[:2] == ("refused", SecurityReason.UNAUTHENTICATED)


def test_the_fast_path_proves_a_signed_entry_with_its_traceparent() -> None:
    raw = _signed(traceparent=TRACEPARENT)
    auth = RuntimeAuthenticator(_hub)
    fast = FastEventCheck(auth)
    general = _general_verdict(auth, raw)
    assert general[0] == "ok"
    assert fast.prove(raw, _HUB_PROJECT) == general[1:]
    # without the field the same signature is another message: refused on both paths
    stripped = {k: v for k, v in raw.items() if k != b"traceparent"}
    assert fast.prove(stripped, _HUB_PROJECT) is None
    assert _general_verdict(auth, stripped)[:2] == ("refused", SecurityReason.UNAUTHENTICATED)
