"""One hub per Redis namespace: the consumer group ``hub`` belongs to one hub id.

Consumers of group ``hub`` share the entries of every events stream, and each
XACKs what it stored, so a consumer writing to another hub's store would take
that hub's events and the runtimes would mark them done. ``hubsync:hub``
names the hub that owns the namespace; a consumer binds it before it reads any
stream, and re-binds it on every refresh of its streams, so a key an AOF-less
Redis restart lost is set again (docs/contract.md#trust).
"""

from __future__ import annotations

from consumers.errors import ConsumerError
from hubstore.redis_functions import functions_for
from hubsync.core import keys
from hubsync.core.connections import RedisClient, RedisPipeline
from hubsync.core.errors import ConfigError
from hubsync.core.redis_values import as_text, printable


class NamespaceOwnedError(ConsumerError, ConfigError):
    """The Redis namespace is bound to another hub (exit code 2 in the CLI)."""

    def __init__(self, owner: str, hub_id: str) -> None:
        super().__init__(
            f"this Redis namespace is owned by hub {printable(owner[:80])} ({keys.HUB_IDENTITY}), "
            f"not by this hub store's {hub_id}: point this consumer at that hub's store "
            "(--hub-db/--hub-url), or use another Redis or database"
        )
        self.owner = owner
        self.hub_id = hub_id


def bind_namespace(client: RedisClient, hub_id: str, *, claim: bool = True) -> None:
    """Make sure ``hubsync:hub`` names ``hub_id``; ``NamespaceOwnedError`` if it names another hub.

    The guarantee: once this returns, the key held ``hub_id`` (set now with
    ``SET NX`` when it was missing, so of two hubs racing for a free namespace
    exactly one wins) and no other hub's consumer that calls this before it
    reads can share the group. With ``claim=False`` (a read-only check) a
    missing key is left missing. It never deletes or overwrites the key.
    """
    pipe = client.pipeline(transaction=False)
    queue_binding(pipe, hub_id, claim=claim)
    check_owner(pipe.execute()[-1], hub_id)


def queue_binding(pipe: RedisPipeline, hub_id: str, *, claim: bool = True) -> None:
    """Queue ``bind_namespace``'s commands on ``pipe``, its last reply the owner for
    ``check_owner``: a caller with more to ask sends it in the same round trip."""
    if claim:
        pipe.set(keys.HUB_IDENTITY, hub_id, nx=True)
    pipe.get(keys.HUB_IDENTITY)


def check_owner(owner: bytes | str | None, hub_id: str) -> None:
    """``NamespaceOwnedError`` if ``owner`` (``hubsync:hub`` as read) names another hub."""
    if owner is not None and as_text(owner) != hub_id:
        raise NamespaceOwnedError(as_text(owner), hub_id)


def release_namespace(client: RedisClient, hub_id: str) -> bool:
    """Delete ``hubsync:hub`` if (and only if) it still names ``hub_id``; True if deleted.

    For a short-lived hub (the demo, a benchmark stage) that is done with the
    namespace: another hub's binding is never removed (one Redis function, so no
    binding made between a read and the delete is lost).
    """
    released = functions_for(client).hub_release(keys=[keys.HUB_IDENTITY], args=[hub_id])
    return bool(released)
