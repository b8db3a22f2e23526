"""The hub projects Redis knows, as operator tools look them up: those in ``hubsync:projects``
(which hub consumers write: the hub projects they follow) and those a runtime's events stream
names. A ``hubsync:projects`` of another type is read as an empty set: it stops no tool.
"""

from __future__ import annotations

import redis

from consumers.errors import UnknownHubProjectError
from hubsync.core import keys
from hubsync.core.connections import RedisClient
from hubsync.core.errors import ConfigError
from hubsync.core.names import validate_name
from hubsync.core.redis_values import as_text


def known_hub_projects(client: RedisClient) -> list[str]:
    """Every valid hub project name in ``hubsync:projects`` or with a runtime's events stream,
    sorted (invalid names skipped)."""
    try:
        members = list(client.smembers(keys.PROJECTS))
    except redis.ResponseError:
        members = []  # not a set: the streams still say (consumers log the key's trouble)
    streams = client.scan_iter(match=keys.EVENTS_STREAMS_PATTERN, count=1000)
    names = {as_text(member) for member in members}
    names.update(keys.hub_project_of(as_text(stream)) for stream in streams)
    valid = set()
    for name in names:
        try:
            valid.add(validate_name(name, "hub project"))
        except ConfigError:
            continue  # a stray member no worker reads either; never put it in a key
    return sorted(valid)


def require_hub_project(client: RedisClient, hub_project: str) -> str:
    """``hub_project`` validated and known to Redis; ``UnknownHubProjectError`` (exit 2) if not.

    A project counts as known when it is in ``hubsync:projects`` or still has a
    dead-letter or alert stream (left over after its events stream was removed).
    """
    name = validate_name(hub_project, "hub project")
    if name in known_hub_projects(client):
        return name
    if client.exists(keys.dead_stream(name), keys.alerts_stream(name)):
        return name
    known = known_hub_projects(client)
    listing = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "") if known else "none"
    raise UnknownHubProjectError(
        f"unknown hub project {name!r}: it is not in {keys.PROJECTS} (known: {listing}); "
        "check the name, or run `hubsync status` to list the projects"
    )
