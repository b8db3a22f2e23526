"""Marking sent rows attempted, off the sending thread.

Marking a batch costs a SQLite write transaction (index updates and, at the
default durability, an fsync); done inline it would stall the next XADD. A
marker thread with its own connection does it while the sender talks to
Redis, and coalesces what queued up into one transaction. A crash before a
mark lands only means those rows are sent again after restart, which the hub
answers ``duplicate``; the sender's in-memory cursor keeps them from going out
twice within one process.

A mark waits ``MARK_DELAY`` seconds (at most a quarter of the resend
timeout) before it is written, so a row the hub acknowledges meanwhile is
never marked at all: the ack's own write is the row's only one (marking
rewrites the whole row, event bytes included, in SQLite). The mark keeps the
time of the send, so resends fall due as they would have. ``flush`` (the
resend pass, a ``--once`` run, shutdown) writes every mark at once.

A project whose store cannot be read is reported through ``on_unreadable``
and its marks are dropped (those rows are sent again once it is readable);
the other projects' marks go on.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from producers.store.event_store import RunEventStore
from producers.store.unreadable import UNREADABLE_STORE_ERRORS

log = logging.getLogger(__name__)

MARK_DELAY = 5.0
"""Seconds a mark waits for the row's ack before it is written (see the module docstring)."""

_STOP = object()
_FLUSH = object()
Job = tuple[str, list[int], float, float]
"""``(project id, outbox seqs, when sent (the relay's clock), when submitted (monotonic))``."""


@dataclass(frozen=True)
class _Forget:
    project_id: str


class AttemptMarker:
    """A thread that runs ``mark_attempted`` for the sender, coalescing batches."""

    def __init__(
        self,
        open_store: Callable[[str], RunEventStore | None],
        base_timeout: float,
        cap: float,
        on_unreadable: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        """``open_store`` returns None for a project no longer synced (its marks are dropped)."""
        self._open_store = open_store
        self._on_unreadable = on_unreadable
        self._base_timeout = base_timeout
        self._cap = cap
        self._stores: dict[str, RunEventStore] = {}
        self.delay = min(MARK_DELAY, base_timeout / 4)
        """Seconds a mark waits for its row's ack (0: written as soon as the thread can)."""
        self._queue: queue.Queue[Job | object] = queue.Queue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="relay-marker", daemon=True)
        self._thread.start()

    def submit(self, project_id: str, seqs: Sequence[int], now: float) -> None:
        """Queue these rows of ``project_id`` to be marked attempted at ``now``."""
        if self.error is not None:
            raise self.error
        self._queue.put((project_id, list(seqs), now, time.monotonic()))

    def forget(self, project_id: str) -> None:
        """Close this thread's connection to ``project_id`` (its file may be replaced)."""
        self._queue.put(_Forget(project_id))

    def flush(self) -> None:
        """Mark everything submitted so far now, and wait for it; raise what marking raised."""
        self._queue.put(_FLUSH)
        self._queue.join()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        """Mark what is queued, stop the thread, close its connections."""
        self._queue.put(_STOP)
        self._thread.join()
        for store in self._stores.values():
            store.close()
        self._stores.clear()

    def _work(self) -> None:
        held: list[Job | object] = []  # taken from the queue, not written yet
        while True:
            if not held:
                held.append(self._queue.get())
            while True:
                try:
                    held.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            urgent = any(not isinstance(item, tuple) for item in held)  # stop, flush, forget
            if urgent:
                due, held = held, []
            else:
                cutoff = time.monotonic() - self.delay
                due = [item for item in held if isinstance(item, tuple) and item[3] <= cutoff]
                if not due:
                    oldest = min(item[3] for item in held if isinstance(item, tuple))
                    with contextlib.suppress(queue.Empty):
                        wait = max(0.001, oldest + self.delay - time.monotonic())
                        held.append(self._queue.get(timeout=wait))
                    continue
                held = [
                    item for item in held if not (isinstance(item, tuple) and item[3] <= cutoff)
                ]
            stop = _STOP in due
            try:
                if self.error is None:
                    for item in due:
                        if isinstance(item, _Forget):
                            self._close(item.project_id)
                    self._mark([item for item in due if isinstance(item, tuple)])
            except Exception as exc:  # surfaced to the sender, which stops the relay
                log.exception("relay: marking rows attempted failed")
                self.error = exc
            finally:
                for _ in due:
                    self._queue.task_done()
            if stop:
                return

    def _mark(self, items: list[Job]) -> None:
        by_project: dict[str, list[int]] = defaultdict(list)
        latest: dict[str, float] = {}
        for project_id, seqs, now, _ in items:
            by_project[project_id].extend(seqs)
            latest[project_id] = max(now, latest.get(project_id, 0.0))
        for project_id, seqs in by_project.items():
            try:
                store = self._stores.get(project_id)
                if store is None:
                    opened = self._open_store(project_id)
                    if opened is None:
                        continue
                    store = self._stores[project_id] = opened
                store.mark_attempted(seqs, latest[project_id], self._base_timeout, self._cap)
            except UNREADABLE_STORE_ERRORS as exc:
                if self._on_unreadable is None:
                    raise
                self._close(project_id)
                self._on_unreadable(project_id, exc)

    def _close(self, project_id: str) -> None:
        store = self._stores.pop(project_id, None)
        if store is not None:
            store.close()
