"""Living with an unreachable Redis: which errors mean "retry later", one log line per change.

The relay must never fail or block an append because Redis is down; it simply
keeps rows pending and retries, waiting ``hubsync.core.backoff.Backoff`` delays in
between. Operators need to know when the state changes, not a line per retry,
so ``RedisHealth`` logs transitions only.
"""

from __future__ import annotations

import logging
import threading

import redis

from hubsync.core.connections import UNREACHABLE_ERRORS

log = logging.getLogger(__name__)

UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    *UNREACHABLE_ERRORS,  # unreachable, loading, or a cluster mid-failover (CLUSTERDOWN...)
    redis.ReadOnlyError,  # a replica, or a primary being failed over
)
"""Redis errors that mean "try again later", as opposed to a bug in our request."""


class RedisHealth:
    """Shared up/down state of Redis as the relay's threads see it; logs transitions only."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._up = True
        self._lock = threading.Lock()
        self.outages = 0

    @property
    def up(self) -> bool:
        """Whether the last operation against Redis succeeded."""
        return self._up

    def failed(self, exc: BaseException) -> None:
        """Note a failed operation; logs only when Redis was believed up."""
        with self._lock:
            if self._up:
                self._up = False
                self.outages += 1
                log.warning(
                    "%s: Redis unavailable (%s); rows stay pending, retrying with backoff",
                    self.name,
                    type(exc).__name__,
                )

    def succeeded(self) -> None:
        """Note a successful operation; logs only when Redis was believed down."""
        if self._up:
            return
        with self._lock:
            if not self._up:
                self._up = True
                log.info("%s: Redis reachable again; draining pending rows", self.name)
