"""``hubsync.core.tracing``: the caller's context captured, a carried one judged strictly, and
a batch span that costs nothing to gather links for without an SDK."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from hubsync.core.tracing import (
    SpanKind,
    batch_span,
    current_traceparent,
    is_traceparent,
    link_traceparents,
    parse_traceparent,
)

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_no_span_means_no_traceparent() -> None:
    assert current_traceparent() is None


def test_the_current_sdk_span_is_captured_as_a_w3c_traceparent() -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("commit") as span:
        captured = current_traceparent()
    context = span.get_span_context()
    assert captured == (
        f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    )
    assert captured is not None and is_traceparent(captured.encode())
    assert current_traceparent() is None, "outside the span, nothing"


def test_a_valid_traceparent_parses_to_a_remote_context() -> None:
    context = parse_traceparent(VALID.encode())
    assert context is not None and context.is_remote and context.is_valid
    assert (context.trace_id, context.span_id) == (
        0x4BF92F3577B34DA6A3CE929D0E0E4736,
        0x00F067AA0BA902B7,
    )
    assert context.trace_flags.sampled
    assert parse_traceparent(VALID) == context


@pytest.mark.parametrize(
    "value",
    [
        b"",
        VALID.upper().encode(),
        b"01" + VALID[2:].encode(),  # another version
        b"ff" + VALID[2:].encode(),
        ("00-" + "0" * 32 + VALID[35:]).encode(),  # no trace
        (VALID[:36] + "0" * 16 + VALID[52:]).encode(),  # no span
        (VALID + "-00").encode(),  # a later version's extra part, not version 00's
        (VALID + "\n").encode(),
        VALID[:-1].encode(),
        VALID.replace("-", "_").encode(),
        b"\xff" * 55,
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\u0661".encode(),
    ],
)
def test_anything_not_exactly_a_version_00_traceparent_is_refused(value: bytes) -> None:
    assert parse_traceparent(value) is None
    assert not is_traceparent(value)


def test_without_an_sdk_a_batch_span_does_not_record_and_gathers_no_link() -> None:
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    with batch_span("hubsync ingest", "s", 3, kind=SpanKind.CONSUMER, operation="process") as span:
        assert not span.is_recording()
        link_traceparents(span, [VALID])  # a no-op: nothing to hold it


def test_links_go_once_to_each_distinct_valid_context_only() -> None:
    span = TracerProvider().get_tracer("test").start_span("batch")
    other = VALID[:3] + "1" * 32 + VALID[35:]
    values = [VALID.encode(), None, b"garbage", other, VALID.upper(), VALID.encode(), other]
    link_traceparents(span, values)
    span.end()
    linked = [(link.context.trace_id, link.context.span_id) for link in span.links]  # type: ignore[attr-defined]
    assert linked == [
        (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7),
        (int("1" * 32, 16), 0x00F067AA0BA902B7),
    ]
