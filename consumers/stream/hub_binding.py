"""One hub per Redis namespace: the consumer group ``hub`` belongs to one hub id.

Consumers of group ``hub`` share the entries of every events stream, and each
XACKs what it stored, so a consumer writing to another hub's store would take
that hub's events and the runtimes would mark them done. ``hubsync:hub``
names the hub that owns the namespace; a consumer binds it before it reads any
stream, and re-binds it on every refresh of its streams, so a key an AOF-less
Redis restart lost is set again (docs/contract.md#trust).

The namespace also remembers how far the hub's store got: ``hubsync:hub:mark``
holds, per hub id, the highest commit counter a consumer published after a
commit (``ZADD GT``, so it only grows). In the same round trip as the binding
the consumer reads it, then reads its store's counter: a store that committed
a mark it had to have reached is never below it, so a store below it is older
than the namespace (restored from a backup) or another copy of the hub's store
(its counter diverged), and the consumer refuses to go on (``StoreBehindError``)
until an operator accepts it (``accept_restore``). See docs/operations.md,
"Backup and restore".
"""

from __future__ import annotations

from consumers.errors import ConsumerError
from hubstore.redis_functions import functions_for
from hubstore.store import HubStore
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


class StoreBehindError(ConsumerError, ConfigError):
    """The hub store has committed less than the namespace saw it commit (exit code 2 in
    the CLI): it was restored from a backup, or it is a copy of the hub's store."""

    def __init__(self, hub_id: str, counter: int, mark: int) -> None:
        super().__init__(
            f"the hub store is older than this Redis namespace: hub {hub_id} committed "
            f"{mark} ingest batches here ({keys.HUB_MARK}), this store holds {counter}, so it "
            "was restored from a backup or copied and lacks events the runtimes were told "
            "are stored. Point the consumer at the hub's newest store; if this is the newest "
            "there is, run hubsync hub restore, which has the runtimes resend what it lacks "
            "(or start one consumer with --accept-restore to take it as it is; "
            'docs/operations.md, "Backup and restore")'
        )
        self.hub_id = hub_id
        self.counter = counter
        self.mark = mark


def bind_namespace(
    client: RedisClient, hub_id: str, *, claim: bool = True, store: HubStore | None = None
) -> None:
    """Make sure ``hubsync:hub`` names ``hub_id``; ``NamespaceOwnedError`` if it names another hub.

    The guarantee: once this returns, the key held ``hub_id`` (set now with
    ``SET NX`` when it was missing, so of two hubs racing for a free namespace
    exactly one wins) and no other hub's consumer that calls this before it
    reads can share the group. With ``claim=False`` (a read-only check) a
    missing key is left missing. It never deletes or overwrites the key. With
    ``store`` (``hub_id``'s), also ``StoreBehindError`` if the store is behind
    the namespace's mark (``check_binding``).
    """
    pipe = client.pipeline(transaction=False)
    queue_binding(pipe, hub_id, claim=claim)
    *_, owner, mark = pipe.execute()
    check_binding(owner, mark, hub_id, store)


def queue_binding(pipe: RedisPipeline, hub_id: str, *, claim: bool = True) -> None:
    """Queue ``bind_namespace``'s commands on ``pipe``, its last two replies the owner and
    the mark for ``check_binding``: a caller with more to ask sends it in the same round
    trip."""
    if claim:
        pipe.set(keys.HUB_IDENTITY, hub_id, nx=True)
    pipe.get(keys.HUB_IDENTITY)
    pipe.zscore(keys.HUB_MARK, hub_id)


def check_binding(
    owner: bytes | str | None, mark: float | None, hub_id: str, store: HubStore | None
) -> None:
    """``NamespaceOwnedError`` if ``owner`` (``hubsync:hub`` as read) names another hub;
    ``StoreBehindError`` if ``store``'s commit counter, read now (after the mark), is below
    ``mark`` (``hubsync:hub:mark``'s score of ``hub_id`` as read). Without ``store`` only
    the owner is checked."""
    if owner is not None and as_text(owner) != hub_id:
        raise NamespaceOwnedError(as_text(owner), hub_id)
    if store is None or mark is None:
        return
    # The mark was read first: whatever a consumer of this very store published there, the
    # store had committed before, so its counter read now is at least as high.
    counter = store.commit_counter()
    if counter < int(mark):
        raise StoreBehindError(hub_id, counter, int(mark))


def namespace_mark(client: RedisClient, hub_id: str) -> int | None:
    """The highest commit counter of ``hub_id``'s store the namespace has seen; None if none."""
    mark = client.zscore(keys.HUB_MARK, hub_id)
    return None if mark is None else int(mark)


def accept_restore(client: RedisClient, hub_id: str, store: HubStore) -> tuple[int | None, int]:
    """Set ``hub_id``'s mark to ``store``'s commit counter, lowering it: the operator accepts
    that this store is the hub's from now on. The mark before, and the counter set."""
    before = namespace_mark(client, hub_id)
    counter = store.commit_counter()
    client.zadd(keys.HUB_MARK, {hub_id: counter})
    return before, counter


def release_namespace(client: RedisClient, hub_id: str) -> bool:
    """Delete ``hubsync:hub`` if (and only if) it still names ``hub_id``; True if deleted.

    For a short-lived hub (the demo, a benchmark stage) that is done with the
    namespace: another hub's binding is never removed (one Redis function, so no
    binding made between a read and the delete is lost).
    """
    released = functions_for(client).hub_release(keys=[keys.HUB_IDENTITY], args=[hub_id])
    if released:
        client.zrem(keys.HUB_MARK, hub_id)  # the mark of a hub gone from here means nothing
    return bool(released)
