"""The consumer's health key: ``hubsync:health:consumer:<name>``, refreshed with a TTL.

A worker that stops refreshing it (dead, stuck in a long stall) lets it expire;
``hubsync consume --check`` and container health checks read that. The key is
also the worker's hold on its name: a worker starts by claiming it
(``claim_name``), refused while another live consumer's key is fresh.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping

from consumers.errors import ConsumerNameTakenError, ConsumerUnhealthyError
from hubsync.core import keys
from hubsync.core.clock import utc_now_iso
from hubsync.core.connections import RedisClient
from hubsync.core.daemon import HealthKey


def write_health(client: RedisClient, name: str, ttl: float, stats: Mapping[str, int]) -> None:
    """Refresh the health key of consumer ``name`` for ``ttl`` seconds."""
    HealthKey(keys.consumer_health(name), ttl).write(client, _record(name, stats))


def claim_name(client: RedisClient, name: str, ttl: float, stats: Mapping[str, int]) -> None:
    """Write the health key of consumer ``name`` unless another live consumer holds it.

    The key is set only if absent (``SET NX``), so of two workers starting at
    once one wins. A fresh key is taken over only when its writer is known to
    have ended: this very process, or a pid of this host that no longer runs
    (a worker killed and restarted within the TTL). Otherwise raises
    ``ConsumerNameTakenError`` naming the holder's pid and host; the name is
    free again once that worker stops (it deletes its key) or its key expires.
    """
    health = HealthKey(keys.consumer_health(name), ttl)
    key = health.key
    while True:
        if client.set(key, _record(name, stats), px=health.ttl_ms, nx=True):
            return
        raw = client.get(key)
        if raw is None:
            continue  # it expired between the two commands: try to take it again
        holder = _parsed(raw)
        if _writer_ended(holder):
            write_health(client, name, ttl, stats)
            return
        raise ConsumerNameTakenError(
            f"consumer name {name!r} is in use by a running consumer (pid "
            f"{holder.get('pid', '?')} on host {holder.get('host', '?')}, last beat "
            f"{holder.get('at', '?')}): give this one another --name, or stop that one first "
            "(a stopped consumer frees its name at once, a killed one after --health-ttl)"
        )


def _record(name: str, stats: Mapping[str, int]) -> str:
    writer = {"name": name, "host": socket.gethostname(), "pid": os.getpid()}
    return json.dumps(
        writer | {"pid_namespace": _pid_namespace(), "at": utc_now_iso()} | dict(stats)
    )


def _pid_namespace() -> int | None:
    """This process's pid namespace (the inode of ``/proc/self/ns/pid``), None where unknown.

    Two containers can share a host name (host networking) while each has its
    own pids: a pid says whether its process runs only within one namespace.
    """
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _parsed(raw: bytes | str) -> dict[str, object]:
    """A health record; an unreadable one as empty (its writer unknown, so never taken over)."""
    try:
        record = json.loads(raw)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _writer_ended(record: Mapping[str, object]) -> bool:
    """Whether the process that wrote ``record`` is known to be gone (or is this one).

    Only a pid of this host and pid namespace can be looked up; any other
    writer's key is trusted until it expires (a container restarted with a new
    namespace waits for the TTL).
    """
    pid, namespace = record.get("pid"), _pid_namespace()
    here = record.get("host") == socket.gethostname() and record.get("pid_namespace") == namespace
    if not here or namespace is None or not isinstance(pid, int):
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)  # signal 0: does the process exist
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, as another user's process
    return False


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
