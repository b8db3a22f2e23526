"""The relay's pruner: acked outbox rows (and, if asked, old runs) leave each store.

It runs in its own thread on its own cadence (``prune_interval``), with its own
SQLite connections, so neither the sender nor the ack reader ever waits on it.
Each store is walked from its lowest rowid in chunks of ``chunk_rows`` rows, one
short transaction each, with a pause between chunks: an append waiting for the
write lock gets it after at most one chunk, not after a whole pass. After a
pass that deleted anything the store's WAL is checkpointed (PASSIVE; see
``RetentionQueries.checkpoint``).

One project whose store cannot be read is logged (once per change of its
error) and skipped; the others are still pruned.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from hubsync.core import metrics
from hubsync.core.clock import EpochClock, epoch_seconds
from hubsync.core.settings import RelaySettings
from producers.registry import ProjectRegistration, RuntimeRegistry
from producers.store.event_store import RunEventStore
from producers.store.outbox import BOOKKEEPING_SYNCHRONOUS
from producers.store.retention import PruneStep

log = logging.getLogger(__name__)

CHUNK_ROWS = 500
"""Rows one pruning transaction looks at: a few milliseconds of write lock."""

CHUNK_PAUSE = 0.01
"""Seconds between two chunks, so waiting appends take the lock in between."""

MAX_CHUNKS_PER_PASS = 2_000
"""Chunks of one table of one store per pass; the walk goes on at the next pass."""


@dataclass
class PruneStats:
    """What the pruner removed since the relay started."""

    outbox_rows: int = 0
    run_events: int = 0

    def as_dict(self) -> dict[str, int]:
        """JSON-ready form (the relay summary's ``pruned_*`` fields)."""
        return {
            "pruned_outbox_rows": self.outbox_rows,
            "pruned_run_events": self.run_events,
        }


class Pruner:
    """Applies ``outbox_retention`` and ``event_retention`` to every project of a runtime."""

    def __init__(
        self,
        settings: RelaySettings,
        registry: RuntimeRegistry,
        clock: EpochClock = epoch_seconds,
        *,
        chunk_rows: int = CHUNK_ROWS,
        chunk_pause: float = CHUNK_PAUSE,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.clock = clock
        self.chunk_rows = chunk_rows
        self.chunk_pause = chunk_pause
        self.stats = PruneStats()
        self._stop = threading.Event()
        self._wait = wait if wait is not None else self._stop.wait
        self._stores: dict[str, RunEventStore] = {}
        self._errors: dict[str, str] = {}

    def start(self, stop: threading.Event) -> threading.Thread:
        """Prune every ``prune_interval`` in a daemon thread until ``stop`` is set."""
        self._stop = stop
        self._wait = stop.wait
        thread = threading.Thread(target=self._loop, name="relay-pruner", daemon=True)
        thread.start()
        return thread

    def prune_once(self) -> PruneStats:
        """One pass over every registered project; returns the totals so far."""
        for registration in self.registry.projects():
            if self._stop.is_set():
                break
            try:
                self._prune_project(registration)
            except Exception as exc:  # one bad store must not stop the others
                self._report_error(registration.project_id, exc)
            else:
                self._errors.pop(registration.project_id, None)
        return self.stats

    def close(self) -> None:
        """Close the pruner's store connections."""
        for store in self._stores.values():
            store.close()
        self._stores.clear()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.prune_once()
                self._stop.wait(self.settings.prune_interval)
        finally:
            self.close()

    def _prune_project(self, registration: ProjectRegistration) -> None:
        if not registration.store_path.is_file():
            return  # nothing appended yet; the appending process creates the file
        store = self._stores.get(registration.project_id)
        if store is None:
            # NORMAL: a prune lost to a power cut is redone by the next pass (its rows
            # are still acked), so its commits need not wait for the disk.
            store = self.registry.open_store(registration, synchronous=BOOKKEEPING_SYNCHRONOUS)
            self._stores[registration.project_id] = store
        now = self.clock()
        outbox = partial(store.prune_acked_outbox, below=store.resync_floor())
        pruned = self._walk(outbox, now - self.settings.outbox_retention, now)
        self.stats.outbox_rows += pruned
        metrics.PRUNED_ROWS.labels("outbox").inc(pruned)
        if self.settings.event_retention is not None:
            # one read of the unacked runs per pass: it costs as much as the backlog
            old_runs = partial(store.prune_old_runs, unsettled=store.unsettled_runs())
            events = self._walk(old_runs, now - self.settings.event_retention, now)
            self.stats.run_events += events
            metrics.PRUNED_ROWS.labels("run_events").inc(events)
            pruned += events
        if pruned:
            store.checkpoint()
            log.info(
                "pruned %d rows from project %s (retention: outbox %.0fs, events %s)",
                pruned,
                registration.project_id,
                self.settings.outbox_retention,
                "kept" if self.settings.event_retention is None else self.settings.event_retention,
            )

    def _walk(
        self, chunk: Callable[[int, float, int, float], PruneStep], cutoff: float, now: float
    ) -> int:
        after, deleted = 0, 0
        for _ in range(MAX_CHUNKS_PER_PASS):
            step = chunk(after, cutoff, self.chunk_rows, now)
            deleted += step.deleted
            if step.done or self._stop.is_set():
                break
            after = step.last
            self._wait(self.chunk_pause)
        return deleted

    def _report_error(self, project_id: str, exc: Exception) -> None:
        message = f"{type(exc).__name__}: {exc}"
        if self._errors.get(project_id) == message:
            return  # said already; say it again only when it changes
        self._errors[project_id] = message
        log.warning("cannot prune project %s (%s); will retry next pass", project_id, message)
        store = self._stores.pop(project_id, None)
        if store is not None:
            store.close()
