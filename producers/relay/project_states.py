"""Which projects the relay cannot read, and when to try each of them again.

One project's store may be unreadable (see ``producers.store.unreadable``) while the
others are fine, so that is the state of the project, never a failure of the
relay: ``ProjectStates`` records it with its reason, logs it once per change
(unreadable, a new reason, readable again; never once per retry), exports it
as the ``hubsync_relay_project_unreadable`` gauge, and says when the next try
falls due: the one backoff (``hubsync.core.backoff``) from ``RETRY_BASE`` up to
``RETRY_CAP`` seconds, so a fixed file is picked up without a restart. Shared
by the relay's threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from hubsync.core import metrics
from hubsync.core.backoff import Backoff

log = logging.getLogger(__name__)

RETRY_BASE = 1.0
"""Seconds before the first retry of a project found unreadable; doubles per failed retry."""

RETRY_CAP = 60.0
"""The longest wait, in seconds, between two tries of an unreadable project."""


@dataclass
class _Unreadable:
    reason: str
    backoff: Backoff
    retry_at: float


class ProjectStates:
    """Unreadable projects of one relay, their reasons and retry times (thread-safe).

    ``clock`` gives seconds (``time.monotonic`` by default; tests move a fake one).
    """

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._unreadable: dict[str, _Unreadable] = {}
        self._failures: dict[str, int] = {}

    def failed(self, project_id: str, reason: str) -> None:
        """Note that ``project_id``'s store could not be read; schedule its next try."""
        with self._lock:
            self._failures[project_id] = self._failures.get(project_id, 0) + 1
            state = self._unreadable.get(project_id)
            if state is None:
                state = _Unreadable(reason, Backoff(base=RETRY_BASE, cap=RETRY_CAP), 0.0)
                self._unreadable[project_id] = state
                metrics.PROJECT_UNREADABLE.labels(project_id).set(1)
                log.error(
                    "%s: project %s unreadable, its rows wait while the other projects sync; "
                    "retrying at most every %.0fs: %s",
                    self.name,
                    project_id,
                    RETRY_CAP,
                    reason,
                )
            elif reason != state.reason:
                state.reason = reason
                log.error("%s: project %s still unreadable: %s", self.name, project_id, reason)
            state.retry_at = self._clock() + state.backoff.next_delay()

    def readable(self, project_id: str) -> None:
        """Note that ``project_id``'s store opened; logs only if it was unreadable."""
        with self._lock:
            metrics.PROJECT_UNREADABLE.labels(project_id).set(0)
            if self._unreadable.pop(project_id, None) is not None:
                log.info("%s: project %s readable again; syncing it", self.name, project_id)

    def due(self, project_id: str) -> bool:
        """Whether to try opening ``project_id`` now: never failed, or its retry time came."""
        with self._lock:
            state = self._unreadable.get(project_id)
            return state is None or self._clock() >= state.retry_at

    def is_unreadable(self, project_id: str) -> bool:
        """Whether ``project_id`` was last found unreadable."""
        with self._lock:
            return project_id in self._unreadable

    def retry_in(self, project_id: str) -> float:
        """Seconds until the next try of an unreadable project (0 when due or readable)."""
        with self._lock:
            state = self._unreadable.get(project_id)
            return 0.0 if state is None else max(0.0, state.retry_at - self._clock())

    def failures(self, project_id: str) -> int:
        """How many times ``project_id`` was found unreadable: a store opened before the
        latest failure is stale (the file may have been replaced), so a thread compares."""
        with self._lock:
            return self._failures.get(project_id, 0)

    def unreadable(self) -> dict[str, str]:
        """Every unreadable project and its reason."""
        with self._lock:
            return {project_id: s.reason for project_id, s in self._unreadable.items()}
