"""Making a hub store restored from a backup whole again (``hubsync hub restore``).

Three steps, each idempotent, so the command can run again:

1. ``reapply_revocations``: every key the restored store holds as a runtime's current
   key is looked up in ``hubsync:revocations``; a record that verifies under that very key
   (``hubstore.revocations``: nobody without the key can forge one) and is in effect
   revokes the runtime in the store itself, so it stays revoked whatever Redis later
   holds. One not yet in effect (a re-key whose grace still runs) is reported: the new
   key is not in the backup, so the runtime must be enrolled again.
2. the namespace's mark is lowered to the store's commit counter, as
   ``hubsync consume --accept-restore`` does (``consumers.stream.hub_binding``);
3. every active runtime is asked to resync each of its hub projects from the store's own
   run cursors (``consumers.stream.resync_requests``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from consumers.stream.revocation_check import RevocationCheck
from hubstore.revocations import decoded
from hubstore.store import EnrolledRuntime, HubStore, RuntimeState
from hubsync.core import keys
from hubsync.core.connections import RedisClient
from hubsync.core.signing import RuntimeKey


@dataclass(frozen=True, slots=True)
class KeyRetired:
    """A runtime whose current key in the restored store was retired after the backup."""

    runtime_id: str
    fingerprint: str
    effective_at: str
    revoked: bool
    """True: revoked in the store now; False: its key ends at ``effective_at`` (a re-key)."""


def reapply_revocations(client: RedisClient, store: HubStore, now: datetime) -> list[KeyRetired]:
    """Revoke in ``store`` every active runtime whose current key Redis holds a verified
    revocation of, in effect at ``now``; report the ones not in effect yet too."""
    retired = []
    for runtime in store.enrolled_runtimes():
        if runtime.state is not RuntimeState.ACTIVE or runtime.key is None:
            continue
        key = RuntimeKey(runtime.key)
        found = decoded(key.fingerprint, client.hget(keys.REVOCATIONS, key.fingerprint))
        if found is None or found.runtime_id != runtime.runtime_id or not found.verifies(key):
            continue  # none, forged, or another key's
        in_effect = found.in_effect(now)
        if in_effect:
            store.revoke(runtime.runtime_id, now=now)
        retired.append(KeyRetired(runtime.runtime_id, key.fingerprint, found.effective_at,
                                  in_effect))  # fmt: skip
    RevocationCheck(client, store).publish()  # the store's own, the new ones among them
    return retired


def active_runtimes(store: HubStore) -> list[EnrolledRuntime]:
    """The runtimes that may sync now (active, with a key), by runtime id."""
    return [
        r for r in store.enrolled_runtimes() if r.state is RuntimeState.ACTIVE and r.key is not None
    ]
