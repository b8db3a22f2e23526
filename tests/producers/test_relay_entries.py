"""The relay's entries: built once per project, they are exactly what the contract says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubsync.core.canonical import canonical_json
from hubsync.core.entries import (
    Outcome,
    OutcomeRecord,
    decode_fields,
    event_entry_fields,
    outcomes_entry_fields,
    parse_event_entry,
    parse_outcomes_entry,
)
from hubsync.core.errors import WireError
from hubsync.core.signing import (
    SIGNATURE_FIELD,
    EventSigner,
    RuntimeKey,
    sign_event,
    sign_event_entry,
    verify_event_entry,
)
from hubsync.core.wire import parse_sync_event
from producers.relay.sender import EntryBuilder
from producers.store.event_store import RunEventStore, StoreIdentity

KEY = RuntimeKey(bytes(range(32)))
IDENTITY = StoreIdentity("proj-1", "acme", "rt-host-0001")
H = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,30}\Z")


def test_the_event_signer_gives_the_contract_vector() -> None:
    signer = EventSigner(
        KEY, project_id="shop-48ee17a7", hub_project="shop", runtime_id="rt-vm-76ff556c"
    )
    assert (
        signer.sign(b"run-2026-0001", b"7", b"run.started", H.encode())
        == "a3dca1c0315ce0f08932f91205397459855bcc578f6e673d47f5a94eec3007c0"
    )


@given(ids, ids, ids, ids, st.integers(1, 2**62), ids, st.binary(min_size=64, max_size=64))
def test_the_event_signer_signs_as_sign_event(
    project_id: str,
    hub_project: str,
    runtime_id: str,
    run_id: str,
    sequence: int,
    event_type: str,
    digest: bytes,
) -> None:
    signer = EventSigner(KEY, project_id=project_id, hub_project=hub_project, runtime_id=runtime_id)
    expected = sign_event(
        KEY,
        project_id=project_id,
        hub_project=hub_project,
        run_id=run_id,
        sequence=sequence,
        event_type=event_type,
        runtime_id=runtime_id,
        content_hash=digest,
    )
    assert signer.sign(run_id.encode(), b"%d" % sequence, event_type.encode(), digest) == expected


def test_an_outbox_entry_is_the_contract_entry_signed(tmp_path: Path) -> None:
    with RunEventStore(tmp_path / "s.sqlite", IDENTITY) as store:
        for n in range(3):
            store.append_event(f"run-{n}", "step.completed", {"step": f"s{n}"})
        rows = store.unsent(0, 10)
        builder = EntryBuilder(store, KEY)
        for row in rows:
            fields = builder.fields(row)
            # the reference: the entry of the event its bytes hold, as the contract builds it
            event = parse_sync_event(row.sync_event, row.content_hash)
            assert (event.run_id, event.sequence) == (row.run_id, row.sequence)
            expected = event_entry_fields(event, row.sync_event, row.content_hash)
            expected[SIGNATURE_FIELD] = sign_event_entry(KEY, expected)
            read = decode_fields(fields)  # as a hub reads the entry back
            assert read == decode_fields(expected)
            assert list(read) == list(expected)  # the same field order, for redis-cli
            assert verify_event_entry([KEY], read) is KEY
            entry = parse_event_entry(read)
            assert entry.key == (store.project_id, row.run_id, row.sequence)


def test_an_outcomes_entry_is_compact_json_whatever_the_sequence() -> None:
    records = [
        OutcomeRecord("p-1", "r-1", 7, Outcome.ACCEPTED, H),
        OutcomeRecord("p-1", "r-1", 8, Outcome.CONFLICT, H, "sequence_reused", "0" * 64),
    ]
    fields = outcomes_entry_fields("acme", records)
    assert fields["outcomes"].encode() == canonical_json([r.to_wire() for r in records])
    assert parse_outcomes_entry(decode_fields(fields)) == records
    # a refused entry's claimed sequence may be past 64 bits: still one valid entry
    huge = [*records, OutcomeRecord("p-1", "r-1", 10**30, Outcome.REJECTED, H, "bad_json")]
    fields = outcomes_entry_fields("acme", huge)
    assert fields["outcomes"].encode() == canonical_json([r.to_wire() for r in huge])
    assert parse_outcomes_entry(decode_fields(fields)) == huge


def _outcomes_as_coerced(raw: bytes) -> list[OutcomeRecord] | str:
    """The outcomes the general rule reads from ``raw`` (json, then each value converted),
    or "malformed": what parse_outcomes_entry must agree with."""
    try:
        return [
            OutcomeRecord(
                str(r[0]),
                str(r[1]),
                int(r[2]),
                Outcome(r[3]),
                str(r[4]),
                None if r[5] is None else str(r[5]),
                None if r[6] is None else str(r[6]),
            )
            for r in json.loads(raw)
        ]
    except (ValueError, TypeError, IndexError, KeyError):
        return "malformed"


values = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=4)
)


@st.composite
def odd_records(draw: st.DrawFn) -> object:
    """A hub's record with one slot changed, one cut or one added; or something else."""
    verdict = draw(st.sampled_from(list(Outcome))).value
    record: list[object] = ["p-1", "r-1", 7, verdict, H, None, None]
    change = draw(st.integers(0, 5))
    if change <= 2:
        record[draw(st.integers(0, 6))] = draw(values | st.sampled_from(["maybe", "accepted"]))
    elif change == 3:
        record = record[: draw(st.integers(0, 6))]
    elif change == 4:
        record.append(draw(values))
    else:
        return draw(values)
    return record


outcome_lists = st.lists(odd_records(), max_size=4) | values


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(ids, ids, st.integers(1, 2**62), st.sampled_from(list(Outcome)), st.text()),
        max_size=5,
    ),
    outcome_lists,
)
def test_outcomes_are_read_as_the_general_rule_reads_them(
    good: list[tuple[str, str, int, Outcome, str]], odd: list[object]
) -> None:
    records = [
        OutcomeRecord(p, r, s, o, d, None if o is Outcome.ACCEPTED else d) for p, r, s, o, d in good
    ]
    fields = decode_fields(outcomes_entry_fields("acme", records))
    assert parse_outcomes_entry(fields) == records
    for raw in (json.dumps(odd).encode(), json.dumps(odd).replace("null", "NaN", 1).encode()):
        try:
            got: list[OutcomeRecord] | str = parse_outcomes_entry(
                {"kind": b"outcomes", "outcomes": raw}
            )
        except WireError as exc:
            assert exc.reason == "bad_outcomes"
            got = "malformed"
        expected = _outcomes_as_coerced(raw)
        assert repr(got) == repr(expected)


@pytest.mark.parametrize(
    ("slot", "value"),
    [
        (0, 1),
        (1, None),
        (2, True),
        (2, False),
        (2, 7.0),
        (2, "7"),
        (2, 2**70),
        (3, "maybe"),
        (3, 1),
        (4, 5),
        (5, 1),
        (5, "sequence_reused"),
        (6, 2.5),
        (6, H),
    ],
)
def test_an_outcome_of_another_type_is_read_as_the_general_rule_reads_it(
    slot: int, value: object
) -> None:
    record: list[object] = ["p-1", "r-1", 7, "accepted", H, None, None]
    record[slot] = value
    raw = json.dumps([["p-1", "r-1", 6, "duplicate", H, None, None], record]).encode()
    try:
        got: list[OutcomeRecord] | str = parse_outcomes_entry(
            {"kind": b"outcomes", "outcomes": raw}
        )
    except WireError:
        got = "malformed"
    assert repr(got) == repr(_outcomes_as_coerced(raw))
