"""The sending half of the relay: outbox rows onto the runtime's ``hubsync:{P}:events:{R}``.

Rows go out in outbox order, batched by count and by bytes, in one pipelined
round trip per batch, and are marked attempted afterwards (by the marker
thread, in one SQLite transaction, while the next batch goes out). Marking after sending means a crash in between re-sends the batch
on restart, which the hub's dedupe turns into ``duplicate``; marking before
would risk a row recorded as sent that never left.

While a backlog drains, the next batch is read and signed while Redis works
through the one just written (``split_pipeline``), before its replies are
read. That read-ahead is only a head start: it is used only by the next call,
only if it starts where the sent batch ended, was signed with the key still in
force, and came back full (a short one may predate a commit the caller was
told about, so the rows are read again instead); otherwise it is dropped and
the rows are read afresh.

Each entry is signed at send time with the runtime's key (``sig``, see
``hubsync.core.signing``), so rows appended before the runtime joined its hub go
out signed once it has; until then, and for a hub project the runtime is not
enrolled for, nothing is sent (``producers.relay.credentials`` says why, once).

An error reply to an XADD (the stream cannot take entries) sets the project
aside with a backoff (``producers.relay.refusals``); its rows stay pending.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from hubsync.core import keys, metrics
from hubsync.core.clock import EpochClock, epoch_seconds
from hubsync.core.connections import UNAVAILABLE_ERRORS, RedisClient
from hubsync.core.entries import KIND_EVENT
from hubsync.core.settings import RelaySettings
from hubsync.core.signing import (
    EVENT_OPTIONAL_SIGNED_FIELD,
    SIGNATURE_FIELD,
    EventSigner,
    RuntimeKey,
)
from hubsync.core.tracing import SpanKind, batch_span, is_traceparent, link_traceparents
from hubsync.core.wire import MAX_EVENT_BYTES
from producers.relay.credentials import RelayCredentials
from producers.relay.marker import AttemptMarker
from producers.relay.refusals import StreamRefusals
from producers.relay.split_pipeline import Command, WrittenCommands
from producers.store.event_store import OutboxRow, RunEventStore
from producers.store.unreadable import UNREADABLE_STORE_ERRORS

log = logging.getLogger(__name__)

ENTRY_OVERHEAD_BYTES = 256
"""Flat fields and stream bookkeeping per entry, counted against the batch's byte budget."""

_SENT_NEW = metrics.EVENTS_SENT.labels("new")
_SENT_AGAIN = metrics.EVENTS_SENT.labels("resend")


class EntryBuilder:
    """The signed stream entries of one project's outbox rows (its bytes were validated when
    appended): the fields of ``raw_event_entry_fields``, in its order, then ``sig``.

    The relay builds one entry per row it sends, so what never changes between
    a project's rows (its ids, the runtime, the signing key's encoding of them)
    is made once, here.
    """

    __slots__ = ("_head", "_runtime_id", "key", "signer")

    def __init__(self, store: RunEventStore, key: RuntimeKey) -> None:
        self.key = key
        self.signer = EventSigner(
            key,
            project_id=store.project_id,
            hub_project=store.hub_project,
            runtime_id=store.home_runtime_id,
        )
        self._head = (
            "kind",
            KIND_EVENT,
            "project_id",
            store.project_id,
            "hub_project",
            store.hub_project,
        )
        self._runtime_id = store.home_runtime_id

    def pairs(self, row: OutboxRow) -> tuple[str | bytes, ...]:
        """Field names and values, alternating: the arguments of XADD after the id. A row
        that kept its caller's trace context carries it, signed, after ``event``, when it is
        exactly a W3C ``traceparent`` (a row another writer left with anything else goes out
        without it)."""
        run_id, digest, event_type = row.run_id, row.content_hash, row.event_type
        sequence = b"%d" % row.sequence
        traceparent = None if row.traceparent is None else row.traceparent.encode()
        traced: tuple[str | bytes, ...] = ()
        if traceparent is not None:
            if is_traceparent(traceparent):
                traced = (EVENT_OPTIONAL_SIGNED_FIELD, traceparent)
            else:
                traceparent = None
        sig = self.signer.sign(
            run_id.encode(), sequence, event_type.encode(), digest.encode(), traceparent
        )
        return (
            *self._head,
            "run_id",
            run_id,
            "sequence",
            sequence,
            "event_type",
            event_type,
            "runtime_id",
            self._runtime_id,
            "content_hash",
            digest,
            "event",
            row.sync_event,
            *traced,
            SIGNATURE_FIELD,
            sig,
        )

    def fields(self, row: OutboxRow) -> dict[str, str | bytes]:
        """The same entry as a field mapping (what ``xadd`` takes)."""
        pairs = self.pairs(row)
        return dict(zip(map(str, pairs[::2]), pairs[1::2], strict=True))


Entry = tuple[str | bytes, ...]
"""One entry's field names and values, alternating (``EntryBuilder.pairs``)."""


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """The next batch of never-sent rows, read and signed while the previous one was on the wire."""

    after: int
    """The outbox seq the rows were read after: used only if the cursor is still there."""
    key: RuntimeKey
    rows: list[OutboxRow]
    entries: list[Entry]
    """``rows``' entries, one each, signed with ``key``."""


@dataclass
class SenderStats:
    """What the sending half did since start."""

    sent: int = 0
    """Rows XADDed for the first time."""
    resent: int = 0
    """Rows XADDed again after their resend timeout passed without an outcome."""
    rejected_locally: int = 0
    """Rows parked ``rejected`` without being sent (too large for an entry)."""
    batches: int = 0
    """XADD pipelines sent."""


class OutboxSender:
    """Sends one project's outbox; holds the highest outbox seq this process sent."""

    def __init__(
        self,
        store: RunEventStore,
        settings: RelaySettings,
        stats: SenderStats,
        marker: AttemptMarker,
        credentials: RelayCredentials,
        clock: EpochClock = epoch_seconds,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.credentials = credentials
        self.clock = clock  # stamps attempts; resends fall due by the same clock
        self.marker = marker
        self.settings = settings
        self.stats = stats
        self.stream = keys.events_stream(store.hub_project, store.home_runtime_id)
        self.refusals = StreamRefusals(store.hub_project, self.stream, monotonic)
        # Rows above the cursor have never been sent by this process. Outbox seqs
        # are assigned under SQLite's single-writer lock, so a row committed later
        # always has a larger seq: scanning forward from the cursor misses nothing.
        self.cursor = 0
        self._seen_version: int | None = None
        self.caught_up = False
        self._builder: EntryBuilder | None = None  # remade when the key changes
        self._read_ahead: ReadAhead | None = None

    def has_news(self) -> bool:
        """True when another connection committed since the last look (cheap: no query)."""
        version = self.store.data_version()
        changed = version != self._seen_version
        self._seen_version = version
        return changed

    def send_unsent(self, client: RedisClient) -> int:
        """Send the next batch of never-attempted rows; return how many went out."""
        key = self.credentials.signer_for(self.store.hub_project)
        ahead, self._read_ahead = self._read_ahead, None
        if key is None or not self.refusals.may_send():
            return 0  # not enrolled (for this hub project), or the stream refused: the rows wait
        limit = self.settings.batch_count
        if ahead is not None and ahead.after == self.cursor and ahead.key is key:
            rows, entries = ahead.rows, ahead.entries
        else:
            rows = self.store.unsent(self.cursor, limit)
            entries = self._entries(rows, key)
        if not rows:
            self.caught_up = True
            return 0
        batch = self._within_budget(rows)
        # a full read means a backlog: read the next batch while this one is on the wire
        sent = self._send(client, batch, entries, key, read_ahead=len(rows) == limit)
        if self.refusals.refusing:
            return 0  # refused: the same rows go again once the backoff ran out
        # Only after a successful send: a failure leaves the cursor and the
        # caught-up flag as they were, so the same rows are tried again.
        self.cursor = batch[-1].seq
        self.caught_up = len(batch) == len(rows) and len(rows) < self.settings.batch_count
        self.stats.sent += sent
        _SENT_NEW.inc(sent)
        return sent

    def send_due_resends(self, client: RedisClient, now: float) -> int:
        """Send again the rows attempted but unacknowledged past their resend time."""
        key = self.credentials.signer_for(self.store.hub_project)
        if key is None or not self.refusals.may_send():
            return 0
        rows = self.store.due_resends(now, self.settings.batch_count)
        if not rows:
            return 0
        batch = self._within_budget(rows)
        sent = self._send(client, batch, self._entries(batch, key), key)
        # the next look for due rows must see these marked, or it would resend them again
        self.marker.flush()
        self.stats.resent += sent
        _SENT_AGAIN.inc(sent)
        if sent:
            log.info("%s: resent %d unacknowledged rows", self.stream, sent)
        return sent

    def _within_budget(self, rows: Sequence[OutboxRow]) -> Sequence[OutboxRow]:
        budget = self.settings.batch_bytes
        used = 0
        for index, row in enumerate(rows):
            used += len(row.sync_event) + ENTRY_OVERHEAD_BYTES
            if used > budget and index > 0:
                return rows[:index]
        return rows

    def _entries(self, rows: Sequence[OutboxRow], key: RuntimeKey) -> list[Entry]:
        builder = self._builder
        if builder is None or builder.key is not key:
            builder = self._builder = EntryBuilder(self.store, key)
        return list(map(builder.pairs, rows))

    def _send(
        self,
        client: RedisClient,
        rows: Sequence[OutboxRow],
        entries: Sequence[Entry],
        key: RuntimeKey,
        read_ahead: bool = False,
    ) -> int:
        """XADD ``rows`` (``entries`` are theirs, in order, at least as many), then queue
        their marks; with ``read_ahead``, read and sign the next batch before the replies."""
        oversized = [row.seq for row in rows if len(row.sync_event) > MAX_EVENT_BYTES]
        if oversized:
            # append_event refuses such rows, so only an older or foreign writer can
            # leave one; it must never block the rows behind it.
            self.store.mark_rejected(oversized, "too_large", self.clock())
            self.stats.rejected_locally += len(oversized)
            log.error(
                "%s: %d outbox rows exceed %d bytes and were marked rejected locally (first seq %d)",
                self.stream,
                len(oversized),
                MAX_EVENT_BYTES,
                oversized[0],
            )
            kept = [
                (row, entry)
                for row, entry in zip(rows, entries, strict=False)
                if len(row.sync_event) <= MAX_EVENT_BYTES
            ]
            rows, entries = [row for row, _ in kept], [entry for _, entry in kept]
            if not rows:
                return 0
        with batch_span(
            "hubsync send", self.stream, len(rows), kind=SpanKind.PRODUCER, operation="send"
        ) as span:
            if span.is_recording():
                link_traceparents(span, [row.traceparent for row in rows])
            return self._xadd(client, rows, entries, key, read_ahead)

    def _xadd(
        self,
        client: RedisClient,
        rows: Sequence[OutboxRow],
        entries: Sequence[Entry],
        key: RuntimeKey,
        read_ahead: bool,
    ) -> int:
        # XADD stream * field value ...: what xadd() sends, without its per-call dict and
        # option handling (this runs once per event).
        stream = self.stream
        commands: list[Command] = [("XADD", stream, "*", *entry) for entry in entries[: len(rows)]]
        try:
            written = WrittenCommands(client, commands)
            try:
                if read_ahead:
                    self._read_ahead_after(rows[-1].seq, key)
                written.read_replies()
            finally:
                written.abandon()  # a no-op once the replies were read
        except redis.ResponseError as exc:
            if isinstance(exc, UNAVAILABLE_ERRORS):
                raise  # CLUSTERDOWN, READONLY...: Redis's, waited out as an outage
            # Entries before the refused one may be in; none is marked, so all go again
            # (the hub answers ``duplicate`` for those it has).
            self._read_ahead = None
            self.refusals.refused(exc)
            return 0
        self.refusals.accepted()
        self.marker.submit(self.store.project_id, [row.seq for row in rows], self.clock())
        self.stats.batches += 1
        return len(rows)

    def _read_ahead_after(self, seq: int, key: RuntimeKey) -> None:
        """Read and sign the batch after ``seq``, kept only when full (see the module docstring)."""
        try:
            rows = self.store.unsent(seq, self.settings.batch_count)
        except UNREADABLE_STORE_ERRORS:
            return  # the next call reads again, and meets the error where it is handled
        if len(rows) == self.settings.batch_count:
            self._read_ahead = ReadAhead(seq, key, rows, self._entries(rows, key))
