"""Redis commands that outlive a restart or a failover, and writes a replica confirms.

Faults are injected while Redis itself may be restarted (or a cluster's master failed
over): a stale connection or slot table fails once and the next attempt reconnects (and
reads the slot table again). On a Redis Cluster each write goes to its slot's master
together with ``WAIT 1``: a replica holds it before the next fault, which may kill that
master, so no injection the checks look for is ever lost with one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.exceptions import RedisClusterException

from hubsync.core.connections import RedisClient, master_of, reconnect

T = TypeVar("T")

REDIS_ERRORS = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.MovedError,
    RedisClusterException,
)
"""What a Redis restart or a failover makes a command fail with, for a moment."""
ATTEMPTS = 20
REPLICA_WAIT_MS = 5000

Command = Callable[[Any], object]
"""One command, given a pipeline to queue it on."""


class ResilientRedis:
    """Runs commands on ``client``, reconnecting through a restart or a failover."""

    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self._pause = threading.Event()  # never set: a wait with a timeout between attempts

    def run(self, action: Callable[[], T]) -> T:
        """``action()``, tried again (reconnected) while Redis is restarting."""
        for attempt in range(ATTEMPTS):
            try:
                return action()
            except REDIS_ERRORS:
                if attempt == ATTEMPTS - 1:
                    raise
                self._reconnect()
                self._pause.wait(0.1)
        raise AssertionError("unreachable")

    def write(self, key: str, *commands: Command) -> list[Any]:
        """Run ``commands`` on ``key``'s server in one round trip; their replies.

        On a cluster they go to the master of ``key``'s slot, followed by ``WAIT 1`` on
        the same connection: they are on a replica before this returns.
        """

        def once() -> list[Any]:
            master, name = master_of(self.client, key)
            pipe: Any = master.pipeline(transaction=False)
            for command in commands:
                command(pipe)
            if not name:  # a single server: no replica to wait for
                return list(pipe.execute())
            pipe.execute_command("WAIT", 1, REPLICA_WAIT_MS)
            *replies, replicas = pipe.execute()
            if int(replicas) < 1:  # not retried: a second copy would be an unrecorded one
                raise RuntimeError(f"no replica confirmed a write on {key}")
            return list(replies)

        return self.run(once)

    def _reconnect(self) -> None:
        reconnect(self.client)  # the next attempt tries again
