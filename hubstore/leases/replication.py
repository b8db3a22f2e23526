"""Grants that a replica confirms: a lease function and ``WAIT 1`` down one connection.

A lease granted on a master that fails over before a replica has it could be granted
again by the promoted replica: two holders, and a fencing token issued twice. So where a
lease's master has (or ever had) replicas, each granting function is followed by ``WAIT 1``
on the same connection, and a grant no replica confirmed in time is refused by the
caller (``LeaseClient``) and given back.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis

from hubstore.redis_functions import RedisFunction, missing_function_error
from hubsync.core.connections import RedisClient, master_of, reread_slots

log = logging.getLogger(__name__)

REPLICA_RECHECK_SECONDS = 5.0
"""How often a master's connected replicas (``INFO replication``) are counted again."""


class ReplicatedCalls:
    """Runs granting functions on the master of their lease's slot and waits for one replica."""

    def __init__(self, client: RedisClient, replica_wait_ms: int) -> None:
        self.client = client
        self.replica_wait_ms = replica_wait_ms
        self._replicas: dict[str, tuple[int, float]] = {}  # master -> (replicas, when asked)
        self._replicas_lock = threading.Lock()

    def run(
        self, function: RedisFunction, lease_keys: list[str], args: list[Any], ttl_ms: int
    ) -> tuple[Any, bool]:
        """Run a granting function; then, where the lease's master has replicas, ``WAIT 1``.

        Returns the function's reply and whether one replica confirmed it in time
        (True where there is no replica to wait for). WAIT counts the writes of
        its own connection, so the FCALL and the WAIT go down one connection to
        the master of the lease's slot, in one pipeline: the single server's
        client, or on a cluster the client of the node redis-py's slot table
        names. A node that no longer serves the slot (MOVED) ran nothing: the
        slot table is read again and the call made once more.
        """
        for attempt in (1, 2, 3):
            node, name = master_of(self.client, lease_keys[0])
            try:
                replicas = self._replica_count(node, name)
                if replicas == 0:  # nothing to wait for (the client routes the call itself)
                    return function(keys=lease_keys, args=args), True
                pipe: Any = node.pipeline(transaction=False)
                function.queue(pipe, lease_keys, args)
                pipe.execute_command("WAIT", 1, max(1, min(self.replica_wait_ms, ttl_ms // 2)))
                reply, acked = pipe.execute(raise_on_error=False)
                if isinstance(reply, redis.ResponseError):
                    raise missing_function_error(reply, function.redis_name)
                if isinstance(acked, Exception):
                    raise acked
            except redis.exceptions.MovedError:
                if attempt == 3:
                    raise
                reread_slots(self.client)
                continue
            except (redis.ConnectionError, redis.TimeoutError):
                reread_slots(self.client)  # a failed-over master: find the new one next time
                raise
            return reply, int(acked) >= 1
        raise AssertionError("unreachable")  # pragma: no cover

    def _replica_count(self, node: Any, name: str) -> int:
        """Replicas to wait for on ``node``: the most ``INFO replication`` ever showed connected.

        Asked at most every few seconds. The most ever, not the count now: a replica
        that lost its link (lagging, partitioned) can still be promoted, so a master
        once seen with a replica is always waited for, and its grants are refused
        while no replica confirms them. A master never seen with one (a single
        server, or a promoted replica whose old master is gone) is not waited for.
        """
        now = time.monotonic()
        with self._replicas_lock:
            known = self._replicas.get(name)
        if known is not None and now - known[1] < REPLICA_RECHECK_SECONDS:
            return known[0]
        try:
            count = int(node.info("replication").get("connected_slaves", 0))
        except redis.ResponseError as exc:  # INFO refused by an ACL, or a Redis without it
            if known is None:
                log.warning(
                    "leases: this Redis refuses INFO replication (%s), so grants are not waited "
                    "for a replica (a failover may lose one); a Redis user needs +info and +wait "
                    "(hubsync acl)",
                    type(exc).__name__,
                )
            count = 0
        count = max(count, known[0] if known is not None else 0)
        with self._replicas_lock:
            self._replicas[name] = (count, now)
        return count
