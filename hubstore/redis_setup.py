"""The hub's setup step on Redis: load hubsync's functions, move old lease fences into counters.

``hubsync hub migrate --redis-url`` (and ``hub init``) run ``prepare_redis`` as a
Redis user allowed FUNCTION LOAD and SET (the administrator): the runtimes' and
consumers' users may do neither. Running it again changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hubstore.errors import InvalidLeaseArgumentError
from hubstore.leases.args import validate_resource
from hubstore.redis_functions import LIBRARY_NAME, LIBRARY_VERSION, functions_for, load_library
from hubsync.core import keys
from hubsync.core.redis_values import as_text


@dataclass
class RedisPrepared:
    """What ``prepare_redis`` did: the library it loaded and the fences it moved."""

    library: str = LIBRARY_NAME
    version: int = LIBRARY_VERSION
    fences_moved: int = 0
    unreadable: list[str] = field(default_factory=list)
    """Resources whose old fence or counter is not an integer: left as they are (they refuse)."""

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict (for ``--json``)."""
        return {
            "library": self.library,
            "version": self.version,
            "fences_moved": self.fences_moved,
            "unreadable": list(self.unreadable),
        }


def prepare_redis(client: Any) -> RedisPrepared:
    """Load the library (every master of a cluster), then move every lease's old fence."""
    load_library(client)
    done = RedisPrepared()
    migrate = functions_for(client).lease_migrate
    for key in client.scan_iter(match=keys.LEASE_SCAN_PATTERN, count=500):
        try:
            resource = validate_resource(keys.hub_project_of(as_text(key)))
        except InvalidLeaseArgumentError:
            continue  # not a name hubsync made, so no lease of hubsync's
        status, _ = migrate(keys=[keys.lease(resource), keys.lease_counter(resource)], args=[])
        if as_text(status) == "moved":
            done.fences_moved += 1
        elif as_text(status) == "unreadable":
            done.unreadable.append(resource)
    return done
