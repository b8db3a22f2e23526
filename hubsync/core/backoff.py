"""The one retry delay of hubsync: exponential backoff with equal jitter, capped.

Every retry loop of hubsync sleeps ``Backoff.next_delay()`` between tries: the
relay's sender and ack reader and the hub consumer waiting out an unreachable
Redis, a daemon waiting for Redis at start (``hubsync.core.connections``), and a
SQLite operation waiting out a busy file (``hubsync.core.sqlite``). (redis-py's own
per-command reconnect, configured in ``hubsync.core.connections``, is the one other
retry.) After ``n`` consecutive failures the ceiling is
``c = min(cap, base * 2 ** (n - 1))`` and the delay is drawn uniformly from
``[c / 2, c]`` ("equal jitter", as redis-py's ``EqualJitterBackoff``):

* the fixed half guarantees a real pause even on a low draw, so a daemon never
  spins against a dead server;
* the random half spreads processes that failed together, so they do not all
  reconnect in the same instant when the server comes back.

All durations are seconds. The random source is injectable so that tests can
draw from a seeded generator instead of the global one.
"""

from __future__ import annotations

import random
from collections.abc import Callable

MAX_DOUBLINGS = 64
"""Past this many failures the ceiling stops growing (it is at ``cap`` long before)."""


def backoff_ceiling(failures: int, *, base: float, cap: float) -> float:
    """Longest wait after ``failures`` consecutive failures (>= 1): ``min(cap, base * 2**(n-1))``."""
    if failures < 1:
        raise ValueError(f"failures must be at least 1, got {failures}")
    return min(cap, base * 2.0 ** min(failures - 1, MAX_DOUBLINGS))


def compute_backoff(
    failures: int,
    *,
    base: float,
    cap: float,
    random_fraction: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait after ``failures`` consecutive failures: uniform in ``[c/2, c]``.

    ``c`` is ``backoff_ceiling(failures, base=base, cap=cap)``;
    ``random_fraction`` returns a float in ``[0, 1)`` (``random.random`` by default).
    """
    half = backoff_ceiling(failures, base=base, cap=cap) / 2
    return half + half * random_fraction()


class Backoff:
    """Consecutive-failure counter that turns failures into waits; ``reset`` after a success.

    Not thread-safe: each thread that retries keeps its own ``Backoff``.
    """

    def __init__(
        self,
        base: float = 0.1,
        cap: float = 30.0,
        random_fraction: Callable[[], float] = random.random,
    ) -> None:
        if base <= 0 or cap <= 0:
            raise ValueError(f"backoff base and cap must be positive, got base={base} cap={cap}")
        self.base = base
        self.cap = cap
        self.failures = 0
        self._random_fraction = random_fraction

    def next_delay(self) -> float:
        """Record one more failure and return how many seconds to wait before the next try."""
        self.failures += 1
        return compute_backoff(
            self.failures, base=self.base, cap=self.cap, random_fraction=self._random_fraction
        )

    def reset(self) -> None:
        """Forget past failures: the next failure waits at most ``base`` again."""
        self.failures = 0
