"""Key revocations that outlive the hub store: a restored store must not bring a dead key back.

Revoking a runtime erases its keys from the store, and re-keying it ends its
old key after the rotation's grace; a store restored from an older backup
holds those keys again, alive. So each key the hub retires also gets a
revocation record kept outside the store, in Redis (``hubsync:revocations``,
a hash: key fingerprint -> record), and the consumers refuse a key whose
record is there and verifies, whatever their store says.

A record names the runtime, the key's fingerprint and the moment the key
stops being valid, and is signed (HMAC-SHA256) with **the retired key
itself**: whichever store holds the key can verify its revocation, which is
exactly the store that needs to (a store without the key accepts nothing
signed with it anyway), and no other secret has to survive the restore. What
a Redis writer can do with the hash:

* forge a record: without the key it does not verify and is ignored;
* replay a genuine record: it only revokes the key it was made for;
* delete a record: the key comes back only in a store restored from before
  the revocation, which the consumers refuse anyway until an operator accepts
  it (``hubsync:hub:mark``); the current store never holds a revoked key.

Whoever holds a key can revoke it: that is a runtime (or a thief) giving up
its own key, nothing more.

The store keeps the records it made (``HubStore.key_revocations``), written in
the transaction that retired the key; the consumers publish them to Redis
(``consumers.stream.revocation_check``), so a revocation reaches Redis without
the admin's command ever talking to it.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from datetime import datetime

from hubstore.store import EnrolledRuntime
from hubsync.core.clock import format_timestamp, parse_timestamp
from hubsync.core.signing import RuntimeKey
from hubsync.core.tagged_signing import sign_tagged

REVOCATION_TAG = b"hubsync/key-revocation/v1"
"""The domain tag of a revocation's signature (a signature of no other kind verifies as one)."""


@dataclass(frozen=True, slots=True)
class KeyRevocation:
    """One retired key: whose, which (its fingerprint), from when, signed with the key."""

    runtime_id: str
    fingerprint: str
    effective_at: str
    """When the key stops being valid (canonical UTC text): at once, or the end of a grace."""
    sig: str

    def encoded(self) -> str:
        """The record as kept (a JSON object; the fingerprint is the hash field's name)."""
        document = {"runtime_id": self.runtime_id, "effective_at": self.effective_at}
        return json.dumps(document | {"sig": self.sig}, sort_keys=True)

    def verifies(self, key: RuntimeKey) -> bool:
        """Whether this record was made with ``key`` (and names it)."""
        if key.fingerprint != self.fingerprint:
            return False
        expected = _signature(key.reveal(), self.runtime_id, self.fingerprint, self.effective_at)
        return hmac.compare_digest(expected, self.sig)

    def in_effect(self, now: datetime) -> bool:
        """Whether the key is no longer valid at ``now``."""
        return parse_timestamp(self.effective_at) <= now


def revocation(runtime_id: str, secret: bytes, effective_at: datetime) -> KeyRevocation:
    """The signed record retiring ``secret``, a key of ``runtime_id``, at ``effective_at``."""
    fingerprint = RuntimeKey(secret).fingerprint
    moment = format_timestamp(effective_at)
    return KeyRevocation(
        runtime_id, fingerprint, moment, _signature(secret, runtime_id, fingerprint, moment)
    )


def decoded(fingerprint: str, value: bytes | str | None) -> KeyRevocation | None:
    """The record kept under ``fingerprint``; None for a missing or malformed one."""
    if value is None:
        return None
    try:
        document = json.loads(value)
        record = KeyRevocation(
            str(document["runtime_id"]),
            fingerprint,
            str(document["effective_at"]),
            str(document["sig"]),
        )
        parse_timestamp(record.effective_at)
    except (ValueError, TypeError, KeyError):
        return None
    return record


def retired_keys(
    before: EnrolledRuntime | None, after: EnrolledRuntime, now: datetime
) -> list[KeyRevocation]:
    """The revocations of the keys ``before`` held that ``after`` no longer holds as current:
    a key kept as the previous one ends with the grace, any other at ``now``."""
    if before is None:
        return []
    retired = []
    for secret in (before.key, before.previous_key):
        if secret is None or secret == after.key:
            continue
        ends = after.previous_valid_until if secret == after.previous_key else None
        retired.append(revocation(after.runtime_id, secret, ends or now))
    return retired


def _signature(secret: bytes, runtime_id: str, fingerprint: str, effective_at: str) -> str:
    values = (runtime_id.encode(), fingerprint.encode(), effective_at.encode())
    return sign_tagged(RuntimeKey(secret), REVOCATION_TAG, values)
