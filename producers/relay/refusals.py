"""A hub project whose events stream refuses the relay's XADDs: set aside, retried with backoff.

Redis answers an XADD with an error when the stream cannot take it: the key
holds another type, or the stream's last id is the largest there is (someone
added an entry at ``18446744073709551615-18446744073709551615``). That is a
failure of this runtime's stream of that hub project only, never of the relay:
its rows stay pending (marked only after a send succeeded), the project is
retried after a backoff, one line is logged when it starts refusing and one
when it takes entries again, and ``hubsync_relay_send_failures_total`` counts
every refused batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis

from hubsync.core import metrics
from hubsync.core.backoff import Backoff
from hubsync.core.redis_values import printable

log = logging.getLogger(__name__)

REFUSAL_BACKOFF_BASE = 1.0
REFUSAL_BACKOFF_CAP = 60.0


class StreamRefusals:
    """Whether a hub project's stream may be written to now, after the refusals seen."""

    def __init__(self, hub_project: str, stream: str, now: Callable[[], float]) -> None:
        self.hub_project = hub_project
        self.stream = stream
        self._now = now
        self._backoff = Backoff(base=REFUSAL_BACKOFF_BASE, cap=REFUSAL_BACKOFF_CAP)
        self._retry_at: float | None = None

    @property
    def refusing(self) -> bool:
        """True while the last try was refused."""
        return self._retry_at is not None

    def may_send(self) -> bool:
        """False while a refusal's backoff runs."""
        return self._retry_at is None or self._now() >= self._retry_at

    def refused(self, exc: redis.ResponseError) -> None:
        """Redis refused a write to the stream: back off, count it, say so once per episode."""
        metrics.SEND_FAILURES.labels(self.hub_project).inc()
        delay = self._backoff.next_delay()
        if self._retry_at is None:
            log.error(
                "%s refused the relay's entries (%s); rows stay pending, retrying with "
                "backoff, other projects go on",
                self.stream,
                printable(str(exc)[:200]),
            )
        self._retry_at = self._now() + delay

    def accepted(self) -> None:
        """A write went through: the episode, if any, is over."""
        if self._retry_at is not None:
            log.info("%s takes the relay's entries again", self.stream)
        self._retry_at = None
        self._backoff.reset()
