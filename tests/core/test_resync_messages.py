"""The resync messages: exactly their fields, signed under the runtime's key with their own
domain tag, parts that cover every run exactly once."""

from __future__ import annotations

import pytest

from hubsync.core.entries import decode_fields
from hubsync.core.errors import WireError
from hubsync.core.resync import (
    ResyncPoint,
    ResyncReport,
    ResyncRequest,
    ResyncScope,
    RunCursor,
    cursor_parts,
    parse_resync_report,
    parse_resync_request,
    verify_resync_report,
    verify_resync_request,
)
from hubsync.core.signing import SIGNATURE_FIELD, RuntimeKey

KEY = RuntimeKey(b"k" * 32)


def request(point: ResyncPoint) -> ResyncRequest:
    return ResyncRequest(
        hub_id="hub-0123456789abcdef",
        hub_project="acme",
        runtime_id="rt-1",
        request_id="rq-1",
        issued_at="2026-12-01T10:00:00.000000Z",
        scope=ResyncScope(project_id="shop", run_id=None),
        point=point,
    )


def report(pending: int) -> ResyncReport:
    return ResyncReport("rt-1", "acme", "rq-1", 5, 2, 4, 1, 0, pending,
                        "2026-12-01T10:00:01.000000Z")  # fmt: skip


def as_read(fields: dict[str, str]) -> dict[str, bytes]:
    return decode_fields({k.encode(): v.encode() for k, v in fields.items()})


def test_a_signed_request_verifies_and_reads_back_as_sent() -> None:
    sent = request(ResyncPoint(cursors=(RunCursor("shop", "run-1", 7),), through=("shop", "z")))
    fields = as_read(sent.signed_fields(KEY))
    assert verify_resync_request([RuntimeKey.generate(), KEY], fields) is KEY
    assert parse_resync_request(fields) == sent


@pytest.mark.parametrize("field", ["point", "scope", "runtime_id", "hub_id", "part"])
def test_a_request_changed_in_any_field_does_not_verify(field: str) -> None:
    fields = as_read(request(ResyncPoint(since="2026-12-01T09:00:00.000000Z")).signed_fields(KEY))
    fields[field] = fields[field] + b"x" if field != "part" else b"2"
    assert verify_resync_request([KEY], fields) is None


def test_an_unsigned_forged_or_extended_request_does_not_verify() -> None:
    fields = as_read(request(ResyncPoint()).signed_fields(KEY))
    assert verify_resync_request([RuntimeKey.generate()], fields) is None
    assert verify_resync_request([KEY], {**fields, "extra": b"1"}) is None
    del fields[SIGNATURE_FIELD]
    assert verify_resync_request([KEY], fields) is None


def test_a_report_signature_never_verifies_as_a_request_and_back() -> None:
    sent = report(pending=0)
    fields = as_read(sent.signed_fields(KEY))
    assert verify_resync_report([KEY], fields) is KEY and parse_resync_report(fields) == sent
    assert sent.done and not report(pending=1).done
    as_request = as_read(request(ResyncPoint()).signed_fields(KEY))
    assert verify_resync_report([KEY], as_request) is None
    assert verify_resync_request([KEY], fields) is None


def test_a_malformed_request_is_refused_with_a_wire_error() -> None:
    fields = as_read(request(ResyncPoint()).signed_fields(KEY))
    fields["point"] = b'{"cursors": [["shop", "run-1", -1]], "after": null, "through": null}'
    with pytest.raises(WireError, match="malformed"):
        parse_resync_request(fields)


def test_parts_cover_every_run_exactly_once_listed_or_not() -> None:
    cursors = [RunCursor("p", f"run-{n:02}", n) for n in range(7)]
    parts = cursor_parts(cursors, size=3)
    assert len(parts) == 3
    runs = [("o", "x"), *((c.project_id, c.run_id) for c in cursors), ("p", "run-03a"), ("q", "a")]
    for run in runs:
        assert sum(part.covers(*run) for part in parts) == 1, run
    covering = next(part for part in parts if part.covers("p", "run-05"))
    assert covering.cursor_of("p", "run-05") == 5 and covering.cursor_of("p", "run-03a") == 0


def test_no_cursor_at_all_is_one_part_covering_every_run_from_its_start() -> None:
    [point] = cursor_parts([])
    assert point.covers("any", "run") and point.cursor_of("any", "run") == 0
