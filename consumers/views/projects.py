"""The hub projects Redis knows (``hubsync:projects``), as operator tools look them up.

Hub consumers write the set (the hub projects they follow); a key of another
type there is read as an empty set, so it stops no tool.
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
    """Every valid hub project name in ``hubsync:projects``, sorted (invalid members skipped)."""
    names = []
    try:
        members = client.smembers(keys.PROJECTS)
    except redis.ResponseError:
        return []  # not a set: nothing a tool can list (consumers say so in their log)
    for member in members:
        try:
            names.append(validate_name(as_text(member), "hub project"))
        except ConfigError:
            continue  # a stray member no worker reads either; never put it in a key
    return sorted(names)


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
