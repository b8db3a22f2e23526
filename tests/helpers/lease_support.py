"""Test helpers for leases: moving a lease's deadline instead of Redis's clock.

Redis TIME cannot be advanced, so "time passes by D ms" is modelled by moving
the stored deadline D ms into the past. The functions under test run unchanged and
still compare against the real Redis TIME.
"""

from __future__ import annotations

from collections.abc import Callable

import redis

from hubsync.core import keys


def age_lease(client: redis.Redis, resource: str, by_ms: int) -> None:
    """Make the lease on ``resource`` behave as if ``by_ms`` milliseconds had passed."""
    key = keys.lease(resource)
    if client.hexists(key, "deadline_ms"):
        client.hincrby(key, "deadline_ms", -by_ms)


def expire_lease(client: redis.Redis, resource: str) -> None:
    """Move the lease's deadline one hour into the past."""
    age_lease(client, resource, 3_600_000)


def counter_lowerings(client: redis.Redis, counter: str) -> list[Callable[[], object]]:
    """Each command that would lower, drop or replace the lease token counter ``counter``
    as ``client``: a user that may only read and increase it is refused every one."""
    return [
        lambda: client.set(counter, 0),
        lambda: client.delete(counter),
        lambda: client.unlink(counter),
        lambda: client.decr(counter),
        lambda: client.incrby(counter, -5),
        lambda: client.expire(counter, 1),
        lambda: client.execute_command("RESTORE", counter, 0, b"payload", "REPLACE"),
    ]
