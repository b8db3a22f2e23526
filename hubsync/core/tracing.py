"""Following one event with OpenTelemetry: its trace context, captured, carried and linked.

The runtime captures the caller's span context when an event is appended
(``current_traceparent``) and keeps it in the outbox row; the relay carries it on the
entry as a W3C ``traceparent`` field, signed with the rest; the relay's send span, the
hub's ingest span and the relay's ack span link to it (``start_batch_span``,
``link_traceparents``), as OpenTelemetry's messaging conventions do for a batch: one span
per batch, one link per message.

Only the OpenTelemetry API is used here. Without an SDK configured the API's tracer is a
no-op: capturing is one context-variable read, a batch span is a non-recording span, and
no link is gathered or built (callers ask ``span.is_recording()`` first). What configures the SDK is the daemon's business (``hubsync.telemetry``).

A ``traceparent`` is judged strictly (``parse_traceparent``): version ``00``, a 32-hex
trace id and a 16-hex span id that are not all zeros, two hex flag digits, lower case,
nothing more. A value that is not exactly that is never linked to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Final

from opentelemetry import trace
from opentelemetry.trace import Span, SpanContext, SpanKind, TraceFlags

_TRACEPARENT = re.compile(rb"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_NO_TRACE = b"0" * 32
_NO_SPAN = b"0" * 16

MESSAGING_SYSTEM: Final = "redis_streams"
"""``messaging.system`` of hubsync's spans (no registered value names Redis Streams)."""

_tracer = trace.get_tracer("hubsync")


def current_traceparent() -> str | None:
    """The current span's context as a ``traceparent``, or None when there is no valid one
    (no span, or no SDK configured: the API's non-recording span has an invalid context)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def is_traceparent(value: bytes) -> bool:
    """Whether ``value`` is exactly a valid version-00 ``traceparent`` (see the module): what
    ``parse_traceparent`` accepts, without making the context (the relay asks per row)."""
    match = _TRACEPARENT.fullmatch(value)
    return match is not None and match[1] != _NO_TRACE and match[2] != _NO_SPAN


def parse_traceparent(value: bytes | str) -> SpanContext | None:
    """The remote span context ``value`` carries, or None for anything not exactly valid."""
    raw = value.encode("ascii", "replace") if isinstance(value, str) else value
    match = _TRACEPARENT.fullmatch(raw)
    if match is None:
        return None
    trace_id, span_id, flags = match.groups()
    if trace_id == _NO_TRACE or span_id == _NO_SPAN:
        return None
    return SpanContext(
        int(trace_id, 16),
        int(span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(int(flags, 16)),
    )


@contextmanager
def batch_span(
    name: str, destination: str | None, count: int, *, kind: SpanKind, operation: str
) -> Iterator[Span]:
    """The current span, while the block runs, for one batch of ``count`` messages on
    ``destination`` (None: several), with the messaging attributes; link it to the
    messages' contexts with ``link_traceparents``. With the API alone this is a
    non-recording span, made and ended at the cost of a few calls."""
    span = _tracer.start_span(name, kind=kind)
    if not span.is_recording():
        # no SDK (or not sampled): nothing to describe, and nothing worth making current
        yield span
        return
    span.set_attributes(
        {
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation": operation,
            "messaging.operation.type": operation,
            "messaging.batch.message_count": count,
        }
    )
    if destination is not None:
        span.set_attribute("messaging.destination.name", destination)
    with trace.use_span(span, end_on_exit=True):
        yield span


def link_traceparents(span: Span, traceparents: Iterable[bytes | str | None]) -> None:
    """Link ``span`` once to each distinct valid context of ``traceparents`` (None and
    anything not exactly a ``traceparent`` are skipped). Only a recording span is given links: ask
    ``span.is_recording()`` before gathering them."""
    if not span.is_recording():
        return
    # one link per context: the events one span appended (an append_events call) share it
    for value in dict.fromkeys(traceparents):
        context = parse_traceparent(value) if value is not None else None
        if context is not None:
            span.add_link(context)


__all__ = [
    "MESSAGING_SYSTEM",
    "Span",
    "SpanKind",
    "batch_span",
    "current_traceparent",
    "is_traceparent",
    "link_traceparents",
    "parse_traceparent",
]
