"""Living with an unreachable Redis: exponential backoff with jitter, one log line per change.

The relay must never fail or block an append because Redis is down; it simply
keeps rows pending and retries. Operators need to know when the state changes,
not a line per retry, so ``RedisHealth`` logs transitions only.
"""

from __future__ import annotations

import logging
import random
import threading

import redis

log = logging.getLogger("hubsync.relay")

UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError,  # includes BusyLoadingError (LOADING)
    redis.TimeoutError,
    redis.ReadOnlyError,  # a replica, or a primary being failed over
)
"""Redis errors that mean "try again later", as opposed to a bug in our request."""


class Backoff:
    """Exponential backoff with full jitter, capped; ``reset`` after a success."""

    def __init__(self, base: float = 0.05, cap: float = 30.0) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0

    def next_delay(self) -> float:
        """Record one more failure and return how long to wait before the next try."""
        self.failures += 1
        ceiling = min(self.cap, self.base * 2 ** min(self.failures, 30))
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        """Forget past failures."""
        self.failures = 0


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
