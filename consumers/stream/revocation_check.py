"""The consumers' side of key revocations kept in Redis (``hubstore.revocations``).

``RevocationCheck`` does two things for a worker:

* ``apply``: before a runtime's enrollment record is used, the fingerprints of
  its keys are looked up in ``hubsync:revocations`` (one HMGET); a key whose
  record verifies under that very key and is in effect is dropped from the
  record, whatever the store says. This is what keeps a runtime revoked after
  the store was restored from a backup older than its revocation. A record
  that does not verify (forged, or of another key) is ignored.
* ``publish``: the store's own revocations are written to the hash (HSET, the
  same values again each time), so a revocation made on the hub reaches Redis
  within one maintenance pass of any worker, and one deleted there (or lost
  with a Redis restart without AOF) comes back.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

from hubstore.revocations import decoded
from hubstore.store import EnrolledRuntime, HubStore
from hubsync.core import keys
from hubsync.core.connections import RedisClient
from hubsync.core.signing import RuntimeKey

log = logging.getLogger(__name__)


class RevocationCheck:
    """Applies the verified revocations in Redis to enrollment records; publishes the store's."""

    def __init__(self, client: RedisClient, store: HubStore) -> None:
        self.client = client
        self.store = store
        self._published = False

    def apply(self, record: EnrolledRuntime, now: datetime) -> EnrolledRuntime:
        """``record`` without the keys Redis holds a verified revocation of, in effect at
        ``now``; a record whose current key is revoked keeps no key at all."""
        if not self._published:
            self.publish()  # once, before the first lookup: the store's own are there too
        held = [secret for secret in (record.key, record.previous_key) if secret is not None]
        if not held:
            return record
        runtime_keys = [RuntimeKey(secret) for secret in held]
        values = self.client.hmget(keys.REVOCATIONS, [k.fingerprint for k in runtime_keys])
        retired = set()
        for key, secret, value in zip(runtime_keys, held, values, strict=True):
            found = decoded(key.fingerprint, value)
            if found is None or found.runtime_id != record.runtime_id:
                continue
            if found.verifies(key) and found.in_effect(now):
                retired.add(secret)
        if not retired:
            return record
        log.warning(
            "runtime %s: %d key(s) the hub store holds were revoked (%s); refusing them",
            record.runtime_id,
            len(retired),
            keys.REVOCATIONS,
        )
        if record.key in retired:
            return replace(record, key=None, previous_key=None, previous_valid_until=None)
        return replace(record, previous_key=None, previous_valid_until=None)

    def publish(self) -> int:
        """Write every revocation the store made to ``hubsync:revocations``; how many."""
        records = self.store.key_revocations()
        if records:
            self.client.hset(
                keys.REVOCATIONS, mapping={r.fingerprint: r.encoded() for r in records}
            )
        self._published = True
        return len(records)
