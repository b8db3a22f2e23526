"""The sending half of the relay: outbox rows onto ``hubsync:{P}:events``.

Rows go out in outbox order, batched by count and by bytes, in one pipelined
round trip per batch, and are marked attempted afterwards (by the marker
thread, in one SQLite transaction, while the next batch goes out). Marking after sending means a crash in between re-sends the batch
on restart, which the hub's dedupe turns into ``duplicate``; marking before
would risk a row recorded as sent that never left.

Each entry is signed at send time with the runtime's key (``sig``, see
``hubsync.signing``), so rows appended before the runtime joined its hub go
out signed once it has; until then, and for a hub project the runtime is not
enrolled for, nothing is sent (``producers.relay.credentials`` says why, once).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from hubsync import keys, metrics
from hubsync.clock import EpochClock, epoch_seconds
from hubsync.connections import RedisClient
from hubsync.entries import raw_event_entry_fields
from hubsync.settings import RelaySettings
from hubsync.signing import SIGNATURE_FIELD, RuntimeKey, sign_event
from hubsync.wire import MAX_EVENT_BYTES
from producers.event_store import OutboxRow, RunEventStore
from producers.relay.credentials import RelayCredentials
from producers.relay.marker import AttemptMarker

log = logging.getLogger(__name__)

ENTRY_OVERHEAD_BYTES = 256
"""Flat fields and stream bookkeeping per entry, counted against the batch's byte budget."""

_SENT_NEW = metrics.EVENTS_SENT.labels("new")
_SENT_AGAIN = metrics.EVENTS_SENT.labels("resend")


def outbox_entry_fields(
    store: RunEventStore, row: OutboxRow, key: RuntimeKey
) -> dict[str, str | bytes]:
    """The signed stream fields of one outbox row (its bytes were validated when appended)."""
    fields = raw_event_entry_fields(
        project_id=store.project_id,
        hub_project=store.hub_project,
        run_id=row.run_id,
        sequence=row.sequence,
        event_type=row.event_type,
        runtime_id=store.home_runtime_id,
        digest=row.content_hash,
        data=row.sync_event,
    )
    fields[SIGNATURE_FIELD] = sign_event(
        key,
        project_id=store.project_id,
        run_id=row.run_id,
        sequence=row.sequence,
        hub_project=store.hub_project,
        runtime_id=store.home_runtime_id,
        content_hash=row.content_hash,
    )
    return fields


@dataclass
class SenderStats:
    """What the sending half did since start."""

    sent: int = 0
    resent: int = 0
    rejected_locally: int = 0
    batches: int = 0


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
    ) -> None:
        self.store = store
        self.credentials = credentials
        self.clock = clock  # stamps attempts; resends fall due by the same clock
        self.marker = marker
        self.settings = settings
        self.stats = stats
        self.stream = keys.events_stream(store.hub_project)
        # Rows above the cursor have never been sent by this process. Outbox seqs
        # are assigned under SQLite's single-writer lock, so a row committed later
        # always has a larger seq: scanning forward from the cursor misses nothing.
        self.cursor = 0
        self._seen_version: int | None = None
        self.caught_up = False

    def has_news(self) -> bool:
        """True when another connection committed since the last look (cheap: no query)."""
        version = self.store.data_version()
        changed = version != self._seen_version
        self._seen_version = version
        return changed

    def send_unsent(self, client: RedisClient) -> int:
        """Send the next batch of never-attempted rows; return how many went out."""
        key = self.credentials.signer_for(self.store.hub_project)
        if key is None:
            return 0  # not enrolled (for this hub project): the rows wait
        rows = self.store.unsent(self.cursor, self.settings.batch_count)
        if not rows:
            self.caught_up = True
            return 0
        batch = self._within_budget(rows)
        sent = self._send(client, batch, key)
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
        if key is None:
            return 0
        rows = self.store.due_resends(now, self.settings.batch_count)
        if not rows:
            return 0
        batch = self._within_budget(rows)
        sent = self._send(client, batch, key)
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

    def _send(self, client: RedisClient, rows: Sequence[OutboxRow], key: RuntimeKey) -> int:
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
            rows = [row for row in rows if len(row.sync_event) <= MAX_EVENT_BYTES]
            if not rows:
                return 0
        store = self.store
        pipe = client.pipeline(transaction=False)
        pipe.sadd(keys.PROJECTS, store.hub_project)
        for row in rows:
            pipe.xadd(self.stream, outbox_entry_fields(store, row, key))  # type: ignore[arg-type]
        pipe.execute()
        self.marker.submit(store.project_id, [row.seq for row in rows], self.clock())
        self.stats.batches += 1
        return len(rows)
