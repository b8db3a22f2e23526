"""How a relay's backlog drains: a line every few seconds while one drains, and two gauges.

Every ``progress_interval`` the relay hands ``DrainProgress.sample`` its backlog (outbox
rows not yet acknowledged, all its projects) and how many rows the hub has settled since
the relay started (acked, or parked as conflict or rejected). Over the samples of the last
six intervals it works out how many rows the hub settles per second and how fast the
backlog shrinks net of new rows; the time left is the backlog at that pace.

Only a backlog worth reading about is logged: one that was there at the previous sample
too and holds more rows than were settled since (more than an interval's work at the
current pace). A relay that keeps up (its backlog only the rows in flight) or has nothing
to do says nothing. When a logged backlog is down to an interval's work, one line says the
relay caught up. One that does not move (nothing settled over an interval: no hub
consumer, Redis away, a hub project the runtime is not enrolled for) is logged once, not
every interval, until it moves again.

A line's figures are also the ``progress`` object of its JSON log record, and the gauges
``hubsync_relay_drain_rows_per_second`` and ``hubsync_relay_drain_eta_seconds`` follow
every sample, logged or not.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

from hubsync.core import metrics
from hubsync.core.daemon import MonotonicClock
from hubsync.core.durations import format_duration
from producers.relay.acks import AckStats
from producers.relay.sender import SenderStats
from producers.store.event_store import RunEventStore

log = logging.getLogger(__name__)

RATE_WINDOW_INTERVALS = 6
"""Rates are measured over this many progress intervals: long enough to smooth one slow
batch, short enough to follow a change of pace within half a minute (at the default 5 s)."""


def project_backlog(store: RunEventStore) -> int:
    """A project's outbox backlog (rows not yet acknowledged), ``hubsync_outbox_backlog`` of
    the project (and its runtime, the relay's) set to it."""
    backlog = store.pending_count()
    metrics.OUTBOX_BACKLOG.labels(store.project_id, store.home_runtime_id).set(backlog)
    return backlog


def settled_rows(acks: AckStats, sender: SenderStats) -> int:
    """Rows that left the backlog for good since start: acked, parked as conflict or rejected
    by the hub, or rejected locally (too large to send)."""
    return acks.acked + acks.conflict + acks.rejected + sender.rejected_locally


class _Sample(NamedTuple):
    at: float
    backlog: int
    settled: int


@dataclass(frozen=True, slots=True)
class DrainReading:
    """What one sample says about the backlog."""

    backlog: int
    """Outbox rows not yet acknowledged, all projects."""
    settled_per_second: float
    """Rows the hub settled per second over the window."""
    shrink_per_second: float
    """How fast the backlog shrank over the window, net of new rows (negative: it grew)."""
    window_seconds: float
    """The time the rates are measured over (0 at the first sample)."""
    eta_seconds: float | None
    """The backlog at the pace it shrinks; 0 with no backlog, None while it does not shrink."""

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form (a JSON log record's ``progress`` object)."""
        return {
            "backlog": self.backlog,
            "settled_per_second": round(self.settled_per_second, 3),
            "shrink_per_second": round(self.shrink_per_second, 3),
            "window_seconds": round(self.window_seconds, 3),
            "eta_seconds": None if self.eta_seconds is None else round(self.eta_seconds, 3),
        }

    def time_left(self) -> str:
        """``about 2m05s left``, or why there is no estimate."""
        if self.eta_seconds is None:
            return "not shrinking (new rows arrive as fast as rows are acked)"
        return f"about {format_duration(self.eta_seconds)} left"


class DrainProgress:
    """The samples of a relay's backlog, the gauges they set and the lines they log."""

    def __init__(
        self, label: str, interval: float, monotonic: MonotonicClock = time.monotonic
    ) -> None:
        self.label = label
        """How lines name the relay (``relay <runtime>``)."""
        self.window = RATE_WINDOW_INTERVALS * interval
        self._monotonic = monotonic
        self._samples: deque[_Sample] = deque()
        self._logging = False  # a backlog was logged and has not drained yet
        self._stall_logged = False
        self.last: DrainReading | None = None
        """The latest sample's reading (None before the first)."""

    def sample(self, backlog: int, settled: int) -> DrainReading:
        """Record the backlog and the rows settled since start (``settled_rows``) now; set
        the gauges, log a line if the backlog is worth one, and return the reading."""
        now = self._monotonic()
        previous = self._samples[-1] if self._samples else None
        self._samples.append(_Sample(now, backlog, settled))
        # keep the last sample at or before the window's start: the rates span the window
        while len(self._samples) > 2 and self._samples[1].at <= now - self.window:
            self._samples.popleft()
        reading = self._reading()
        self.last = reading
        metrics.DRAIN_RATE.set(reading.settled_per_second)
        metrics.DRAIN_ETA.set(math.inf if reading.eta_seconds is None else reading.eta_seconds)
        if previous is not None:
            self._report(reading, previous, settled - previous.settled, now - previous.at)
        return reading

    def _reading(self) -> DrainReading:
        first, last = self._samples[0], self._samples[-1]
        span = last.at - first.at
        settled = (last.settled - first.settled) / span if span > 0 else 0.0
        shrink = (first.backlog - last.backlog) / span if span > 0 else 0.0
        if last.backlog == 0:
            eta: float | None = 0.0
        else:
            eta = last.backlog / shrink if shrink > 0 else None
        return DrainReading(last.backlog, settled, shrink, span, eta)

    def _report(
        self, reading: DrainReading, previous: _Sample, settled_since: int, since: float
    ) -> None:
        backlog = reading.backlog
        if not (previous.backlog > 0 and backlog > settled_since):
            if self._logging:
                rate = self._rate(reading)
                self._log(
                    f"caught up with the outbox backlog: {backlog} rows pending, {rate}", reading
                )
            self._logging = self._stall_logged = False
            return
        self._logging = True
        if settled_since == 0:
            if not self._stall_logged:
                self._stall_logged = True
                self._log(
                    f"outbox backlog of {backlog} rows not moving: nothing acked in the last "
                    f"{format_duration(since)}; the rows stay pending (is a hub consumer "
                    "running, and the runtime enrolled for their hub projects?)",
                    reading,
                )
            return
        self._stall_logged = False
        self._log(
            f"draining the outbox backlog: {backlog} rows left, {self._rate(reading)}, "
            f"{reading.time_left()}",
            reading,
        )

    @staticmethod
    def _rate(reading: DrainReading) -> str:
        window = format_duration(reading.window_seconds)
        return f"{reading.settled_per_second:.1f} rows/s acked over the last {window}"

    def _log(self, line: str, reading: DrainReading) -> None:
        log.info(
            "%s: %s",
            self.label,
            line,
            extra={"daemon": self.label, "progress": reading.as_dict()},
        )
