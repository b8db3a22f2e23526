"""The relay's side of a resync: the hub's signed requests applied, progress reported signed.

A ``kind=resync`` entry on an acks stream is believed exactly as an outcomes entry is
(``producers.relay.acks``): signed with this runtime's key, by the hub it joined, for the
hub project of the stream, and naming this runtime; anything else is counted as
``unverified`` and skipped. A believed part is applied to every store of its hub project
(``RunEventStore.apply_resync``: rows back to pending, pruned ones derived again; a part
applied before changes nothing).

While a request is open the relay reports its progress on the events stream of its hub
project, a ``kind=resync_report`` entry signed with the runtime's key
(``hubsync.core.resync.ResyncReport``): at once after applying it, then at most every
``REPORT_INTERVAL`` seconds, and a last time once the hub has judged every row it put
back; the request is then closed in each store (its rows may be pruned again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from hubsync.core import keys
from hubsync.core.clock import utc_now_iso
from hubsync.core.connections import UNAVAILABLE_ERRORS, RedisClient
from hubsync.core.errors import WireError
from hubsync.core.redis_values import printable
from hubsync.core.resync import (
    REPORT_COUNTS,
    ResyncReport,
    ResyncRequest,
    parse_resync_request,
    verify_resync_request,
)
from hubsync.core.signing import HUB_ID_FIELD, SIGNATURE_FIELD
from producers.relay.credentials import RelayCredentials
from producers.store.event_store import RunEventStore
from producers.store.resync_rows import ResyncProgress

log = logging.getLogger(__name__)

REPORT_INTERVAL = 1.0
"""Seconds between two progress reports of open requests (a new request reports at once)."""


@dataclass
class ResyncStats:
    """What the relay did with resync requests since start."""

    applied: int = 0
    """Request parts applied to at least one store."""
    replayed: int = 0
    """Request parts every store had applied before: nothing changed."""
    reports: int = 0
    finished: set[str] = field(default_factory=set)
    """Request ids the hub finished judging."""


@dataclass
class RelayResyncs:
    """Applies the verified resync requests of a relay's ack streams and reports on them."""

    runtime_id: str
    credentials: RelayCredentials
    stats: ResyncStats
    report_interval: float = REPORT_INTERVAL
    _reported_at: float = field(default=float("-inf"), init=False)
    _news: bool = field(default=False, init=False)
    """Whether a part was applied since the last report (reported at once)."""

    def unverified(self, fields: dict[str, bytes], hub_project: str) -> str | None:
        """Why a resync entry is not to be believed, or None when it is."""
        current = self.credentials.current
        if current is None:
            return "not_enrolled"
        if SIGNATURE_FIELD not in fields:
            return "unsigned"
        if verify_resync_request([current.key], fields) is None:
            return "bad_signature"
        if fields.get(HUB_ID_FIELD) != current.hub_id.encode():
            return "other_hub"
        if fields.get("hub_project") != hub_project.encode():
            return "wrong_stream"
        if fields.get("runtime_id") != self.runtime_id.encode():
            return "other_runtime"
        return None

    def parsed(self, fields: dict[str, bytes]) -> ResyncRequest | None:
        """A verified request part's content; None (logged) when it is malformed."""
        try:
            return parse_resync_request(fields)
        except WireError as exc:
            log.warning("skipped a malformed resync request (%s)", exc.detail)
            return None

    def applied(self, request: ResyncRequest, stores: int) -> None:
        """Count a part ``stores`` stores applied (0: every one had, it was a replay)."""
        if not stores:
            self.stats.replayed += 1
            return
        self.stats.applied += 1
        self._news = True
        log.info(
            "resync %s (part %d of %d) from hub %s: rows beyond the hub's %s put back to "
            "pending in %d projects of hub project %s",
            request.request_id,
            request.part,
            request.parts,
            printable(request.hub_id),
            "time " + request.point.since if request.point.since else "run cursors",
            stores,
            request.hub_project,
        )

    def report(
        self, client: RedisClient, stores: Iterable[RunEventStore], force: bool = False
    ) -> None:
        """Report the open requests of ``stores`` when due (or ``force``d, or new ones)."""
        now = time.monotonic()
        if not (force or self._news or now - self._reported_at >= self.report_interval):
            return
        self._reported_at = now
        self._news = False
        totals: dict[tuple[str, str], list[ResyncProgress]] = {}
        holders: dict[str, list[RunEventStore]] = {}
        for store in stores:
            for progress in store.resync_progress():
                totals.setdefault((progress.request_id, progress.hub_project), []).append(progress)
                holders.setdefault(progress.request_id, []).append(store)
        if not totals:
            return
        pipe = client.pipeline(transaction=False)
        reports = []
        for (request_id, hub_project), parts in totals.items():
            key = self.credentials.signer_for(hub_project)
            if key is None:
                continue
            report = _summed(self.runtime_id, request_id, hub_project, parts)
            stream = keys.events_stream(hub_project, self.runtime_id)
            pipe.xadd(stream, report.signed_fields(key))  # type: ignore[arg-type]
            reports.append(report)
        sent = []
        for report, reply in zip(reports, pipe.execute(raise_on_error=False), strict=True):
            if isinstance(reply, UNAVAILABLE_ERRORS):
                raise reply  # Redis's, not the stream's: the caller backs off
            if isinstance(reply, Exception):
                log.warning("the events stream of hub project %s refused a resync report (%s)",
                            report.hub_project, printable(str(reply)[:200]))  # fmt: skip
            else:
                sent.append(report)
        self.stats.reports += len(sent)
        for report in sent:
            if report.done:
                for store in holders[report.request_id]:
                    store.close_resync(report.request_id)
                self.stats.finished.add(report.request_id)
                log.info(
                    "resync %s done: %d rows put back, %d derived again; the hub accepted %d, "
                    "had %d, refused %d",
                    report.request_id,
                    report.requeued,
                    report.rederived,
                    report.accepted,
                    report.duplicate,
                    report.refused,
                )


def _summed(
    runtime_id: str, request_id: str, hub_project: str, parts: list[ResyncProgress]
) -> ResyncReport:
    counts = {name: sum(p.counts[name] for p in parts) for name in REPORT_COUNTS}
    return ResyncReport(runtime_id, hub_project, request_id, reported_at=utc_now_iso(), **counts)


__all__ = ["REPORT_INTERVAL", "RelayResyncs", "ResyncRequest", "ResyncStats"]
