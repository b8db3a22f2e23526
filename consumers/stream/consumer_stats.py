"""What a hub worker did since it started: its stats, and the metrics counted with them.

``HubConsumer`` adds each batch here once it is published (``count_batch``) and each
ingest's outcomes (``count_ingested``): one ``inc`` per outcome and one batch of
latencies, not one call per event. The stats are also written into its health key.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from consumers.stream.judging import Verdicts
from consumers.stream.publishing import Publication
from hubsync.core import metrics
from hubsync.core.entries import EventEntry, Outcome, OutcomeRecord
from hubsync.core.redis_values import as_text

_INGESTED_ACCEPTED = metrics.EVENTS_INGESTED.labels(Outcome.ACCEPTED.value)
_INGESTED_DUPLICATE = metrics.EVENTS_INGESTED.labels(Outcome.DUPLICATE.value)
_INGESTED_CONFLICT = metrics.EVENTS_INGESTED.labels(Outcome.CONFLICT.value)

_VERDICT = attrgetter("outcome")


@dataclass
class ConsumerStats:
    """What a worker did since it started (also written into its health key)."""

    read: int = 0
    """Entries read from the streams (new and reclaimed)."""
    accepted: int = 0
    """Events stored for the first time."""
    duplicate: int = 0
    """Events the hub already held with the same bytes."""
    conflict: int = 0
    """Events refused: other bytes under their key, or another runtime's project or run."""
    dead: int = 0
    """Entries dead-lettered (bad bytes, refused, delivered too often)."""
    refused: int = 0
    """Of ``dead``: refused as unauthenticated (not signed by an enrolled runtime's key)."""
    rejected: int = 0
    """Of ``dead``: reported ``rejected`` to their runtime (its own content, refused)."""
    presence: int = 0
    """Presence beats recorded."""
    reclaimed: int = 0
    """Entries taken over from a consumer that left them pending too long."""
    trimmed: int = 0
    """Entries trimmed from the streams once every consumer had them."""
    batches: int = 0

    def summary(self) -> str:
        """One line for the log at exit."""
        return (
            f"{self.read} entries read in {self.batches} batches: {self.accepted} accepted, "
            f"{self.duplicate} duplicate, {self.conflict} conflict, {self.dead} dead-lettered "
            f"({self.refused} refused as unauthenticated, {self.rejected} reported rejected), {self.presence} presence beats, "
            f"{self.reclaimed} reclaimed, {self.trimmed} trimmed"
        )

    def count_batch(self, verdicts: Verdicts, pub: Publication) -> None:
        """Add one batch's entries, beats, dead letters and refusals to the stats and metrics."""
        if pub.dead_letters:
            metrics.count_by_label(
                metrics.DEAD_LETTERS, (as_text(letter["reason"]) for _, letter in pub.dead_letters)
            )
        self.read += verdicts.count
        self.presence += len(verdicts.beats)
        self.dead += pub.dead_count
        self.refused += len(pub.security_alerts)
        self.rejected += verdicts.rejected
        self.batches += 1 if verdicts.count else 0

    def count_ingested(
        self, valid: Sequence[EventEntry], outcomes: Sequence[OutcomeRecord]
    ) -> None:
        """Add one batch's outcomes to the stats and the metrics: one ``inc`` per outcome and
        one batch of latencies, not one call per event."""
        tally = Counter(map(_VERDICT, outcomes))
        accepted = tally[Outcome.ACCEPTED]
        duplicate = tally[Outcome.DUPLICATE]
        conflict = len(outcomes) - accepted - duplicate
        self.accepted += accepted
        self.duplicate += duplicate
        self.conflict += conflict
        _INGESTED_ACCEPTED.inc(accepted)
        _INGESTED_DUPLICATE.inc(duplicate)
        if conflict:
            _INGESTED_CONFLICT.inc(conflict)
            metrics.count_by_label(
                metrics.CONFLICTS,
                (o.reason or "unknown" for o in outcomes if o.outcome is Outcome.CONFLICT),
            )
        if accepted:
            # The commit just happened; a duplicate's latency would only measure
            # how late a resend was, so only first acceptances are observed.
            committed = time.time()
            latencies = [
                committed - entry.event.occurred_at.timestamp()
                for entry, record in zip(valid, outcomes, strict=True)
                if record.outcome is Outcome.ACCEPTED
            ]
            metrics.observe_many(
                metrics.END_TO_END_LATENCY_SECONDS, [max(0.0, late) for late in latencies]
            )
