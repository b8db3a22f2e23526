"""The dashboard's own 15-minute history: ingest rate and lag, sampled by the dashboard itself.

Redis keeps no history of a stream's counters, so the dashboard samples them:
each sample is ``(when, entries added, lag)`` per hub project, taken from the
same ``StatusReport`` the page shows. The ingest rate between two samples is
the growth of ``entries-added`` (XINFO STREAM, summed over the project's
streams) over the time between them; it is never negative (a stream deleted
and made again starts over, and that step is shown as 0). Time comes from an
injected monotonic clock, so a test can step it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from hubsync.cli.status_view import StatusReport

WINDOW_SECONDS = 15 * 60.0
"""How far back the sparklines reach."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One hub project's counters at one moment."""

    at: float
    entries_added: int
    lag: int | None


@dataclass(frozen=True, slots=True)
class Series:
    """What one hub project's sparklines draw: ``(seconds before now, value)`` points."""

    ingest_rate: list[tuple[float, float]]
    """Entries per second between consecutive samples, at the later one."""
    lag: list[tuple[float, float]]
    """Entries not yet delivered to group ``hub`` (samples where Redis could tell)."""


class History:
    """Samples of the last ``window`` seconds per hub project; safe to use from several threads."""

    def __init__(self, clock: Callable[[], float], window: float = WINDOW_SECONDS) -> None:
        self.clock = clock
        self.window = window
        self._samples: dict[str, deque[Sample]] = {}
        self._lock = threading.Lock()

    def record(self, report: StatusReport) -> None:
        """Add a sample of every hub project in ``report`` (none when Redis was not reached)."""
        if not report.redis_reachable:
            return
        now = self.clock()
        with self._lock:
            for project in report.hub_projects:
                lag = project.group.lag if project.group else None
                samples = self._samples.setdefault(project.hub_project, deque())
                samples.append(Sample(now, project.entries_added, lag))
                while samples and samples[0].at < now - self.window:
                    samples.popleft()

    def series(self, hub_project: str) -> Series:
        """The sparkline points of ``hub_project`` (empty before two samples)."""
        now = self.clock()
        with self._lock:
            samples = list(self._samples.get(hub_project, ()))
        rates = [
            (now - later.at, max(0, later.entries_added - earlier.entries_added) / elapsed)
            for earlier, later in pairwise(samples)
            if (elapsed := later.at - earlier.at) > 0
        ]
        lags = [(now - s.at, float(s.lag)) for s in samples if s.lag is not None]
        return Series(ingest_rate=rates, lag=lags)


def sparkline_points(
    points: Sequence[tuple[float, float]],
    width: float,
    height: float,
    window: float = WINDOW_SECONDS,
    margin: float = 2.0,
) -> str:
    """The ``points`` attribute of an SVG polyline drawing ``points`` (seconds ago, value).

    Now is the right edge and ``window`` seconds ago the left, or the oldest
    point when the history is younger (a dashboard started a minute ago draws
    that minute across the whole width); the highest value is drawn ``margin``
    below the top, 0 ``margin`` above the bottom (so a flat line never hides on
    the frame). Empty when there is nothing to draw.
    """
    if not points:
        return ""
    window = min(window, max(ago for ago, _ in points)) or window
    top = max(value for _, value in points) or 1.0
    span = height - 2 * margin
    return " ".join(
        f"{width * (1 - min(ago, window) / window):.1f},{margin + span * (1 - value / top):.1f}"
        for ago, value in sorted(points, key=lambda p: -p[0])
    )
