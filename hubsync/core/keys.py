"""Every Redis key name hubsync uses, built in one place (docs/contract.md).

``{...}`` is a Redis Cluster hash tag: all keys of one hub project share a slot,
and a lease's hash and its audit log share one, so one Redis function may touch them
together. Names are validated before they are placed inside a tag.
"""

from __future__ import annotations

from typing import NamedTuple

from hubsync.core.names import validate_name

PREFIX = "hubsync"
PROJECTS = f"{PREFIX}:projects"
"""Set of hub projects that have an events stream."""
HUB_IDENTITY = f"{PREFIX}:hub"
"""String: the id of the hub that owns this namespace's consumer group (when one is bound)."""
HUB_MARK = f"{HUB_IDENTITY}:mark"
"""Sorted set: hub id -> the highest commit counter a consumer saw that hub's store commit
(raised with ``ZADD GT`` only), so a store restored from a backup is noticed."""

REVOCATIONS = f"{PREFIX}:revocations"
"""Hash: key fingerprint -> the signed revocation of that runtime key (``hubstore.revocations``),
published by the consumers so that a store restored from a backup cannot bring the key back."""

CONSUMER_GROUP = "hub"
"""The consumer group every hub worker reads the events streams in."""

EFFECTS_QUEUE = "hubsync-effects"
"""RQ queue name of shared-effect jobs (RQ stores it as ``rq:queue:hubsync-effects``)."""


def events_stream(hub_project: str) -> str:
    """``hubsync:{P}:events``: sync events and presence beats of hub project P."""
    return f"{PREFIX}:{{{validate_name(hub_project, 'hub project')}}}:events"


def acks_stream(hub_project: str, runtime_id: str) -> str:
    """``hubsync:{P}:acks:{R}``: the hub's outcomes for runtime R."""
    project = validate_name(hub_project, "hub project")
    return f"{PREFIX}:{{{project}}}:acks:{{{validate_name(runtime_id, 'runtime id')}}}"


def dead_stream(hub_project: str) -> str:
    """``hubsync:{P}:dead``: dead-lettered entries with their reason and original fields."""
    return f"{PREFIX}:{{{validate_name(hub_project, 'hub project')}}}:dead"


def alerts_stream(hub_project: str) -> str:
    """``hubsync:{P}:alerts``: conflicts, raised as security alerts."""
    return f"{PREFIX}:{{{validate_name(hub_project, 'hub project')}}}:alerts"


def lease(resource: str) -> str:
    """``hubsync:lease:{RES}``: the hash of one lease."""
    return f"{PREFIX}:lease:{{{validate_name(resource, 'lease resource')}}}"


def lease_log(resource: str) -> str:
    """``hubsync:lease:{RES}:log``: capped audit stream of that lease's transitions."""
    return f"{lease(resource)}:log"


def lease_counter(resource: str) -> str:
    """``hubsync:lease:{RES}:counter``: the highest fencing token ever issued on the resource.

    A string the lease functions only INCR, apart from the lease hash, so a user
    who may rewrite or delete the hash (and may only INCR and GET this key) can
    never make a token be issued twice.
    """
    return f"{lease(resource)}:counter"


def fenced_resource(resource: str, name: str) -> str:
    """``hubsync:lease:{RES}:fenced:NAME``: a value written only under a current fencing token.

    It shares the lease's hash slot so one script can compare the token with the
    lease's fence and the value's own highest token.
    """
    return f"{lease(resource)}:fenced:{validate_name(name, 'fenced resource name')}"


class LeaseGlobs(NamedTuple):
    """The key patterns (Redis globs) of the leases whose resources match one resource glob."""

    lease: str
    log: str
    counter: str
    fenced: str


def lease_globs(resource_glob: str) -> LeaseGlobs:
    """The patterns of ``lease``, ``lease_log``, ``lease_counter`` and every ``fenced_resource``
    of the resources matching ``resource_glob`` (validated by the caller: ACL rules)."""
    lease_glob = f"{PREFIX}:lease:{{{resource_glob}}}"
    return LeaseGlobs(
        lease_glob, f"{lease_glob}:log", f"{lease_glob}:counter", f"{lease_glob}:fenced:*"
    )


LEASE_SCAN_PATTERN = f"{PREFIX}:lease:{{*}}"
"""SCAN pattern matching every lease hash (and not its ``:log`` or ``:fenced:`` keys)."""


def relay_health(runtime_id: str) -> str:
    """TTL'd health key a relay refreshes while it is alive."""
    return f"{PREFIX}:health:relay:{validate_name(runtime_id, 'runtime id')}"


def consumer_health(consumer_name: str) -> str:
    """TTL'd health key a hub consumer refreshes while it is alive."""
    return f"{PREFIX}:health:consumer:{validate_name(consumer_name, 'consumer name')}"


RELAY_HEALTH_PATTERN = f"{PREFIX}:health:relay:*"
"""SCAN pattern matching every relay's health key."""

CONSUMER_HEALTH_PATTERN = f"{PREFIX}:health:consumer:*"
"""SCAN pattern matching every hub consumer's health key."""


def hub_project_of(stream_key: str) -> str:
    """The hub project P of a key ``hubsync:{P}:...``."""
    start = stream_key.index("{") + 1
    return stream_key[start : stream_key.index("}", start)]
