"""The consumer's health key: ``hubsync:health:consumer:<name>``, refreshed with a TTL.

A worker that stops refreshing it (dead, stuck in a long stall) lets it expire;
``hubsync consume --check`` and container health checks read that.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping

from consumers.errors import ConsumerUnhealthyError
from hubsync.core import keys
from hubsync.core.clock import utc_now_iso
from hubsync.core.connections import RedisClient


def write_health(client: RedisClient, name: str, ttl: float, stats: Mapping[str, int]) -> None:
    """Refresh the health key of consumer ``name`` for ``ttl`` seconds."""
    value = json.dumps(
        {"name": name, "host": socket.gethostname(), "pid": os.getpid(), "at": utc_now_iso()}
        | dict(stats)
    )
    client.set(keys.consumer_health(name), value, px=max(1, int(ttl * 1000)))


def check_health(client: RedisClient, name: str) -> dict[str, object]:
    """The fresh health record of consumer ``name``; ``ConsumerUnhealthyError`` if none."""
    raw = client.get(keys.consumer_health(name))
    if raw is None:
        raise ConsumerUnhealthyError(
            f"consumer {name!r} has no fresh health key ({keys.consumer_health(name)}): it is "
            "not running, stuck, or cannot reach Redis"
        )
    record: dict[str, object] = json.loads(raw)
    return record
