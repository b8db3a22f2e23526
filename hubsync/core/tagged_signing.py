"""Signatures of the rarer signed kinds (resync requests and reports, key revocations).

Each is HMAC-SHA256 under a runtime's key of the netstrings of its own tag, then its values,
like the kinds ``hubsync.core.signing`` keeps a tagged HMAC per key for; these are signed
too rarely for that to pay.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from hubsync.core.signing import RuntimeKey, claimed_signature, netstring


def sign_tagged(key: RuntimeKey, tag: bytes, values: Sequence[bytes]) -> str:
    """HMAC-SHA256 hex under ``key`` of the netstrings of ``tag`` then ``values``."""
    message = b"".join(map(netstring, (tag, *values)))
    return hmac.new(key.reveal(), message, "sha256").hexdigest()


def verify_tagged(
    keys: Sequence[RuntimeKey], tag: bytes, values: Sequence[bytes], signature: object
) -> RuntimeKey | None:
    """The key among ``keys`` whose ``sign_tagged`` of ``tag`` and ``values`` is
    ``signature`` (64 lowercase hex digits, as text or bytes), or None; never raises."""
    claimed = claimed_signature(signature)
    if claimed is None:
        return None
    for key in keys:
        if hmac.compare_digest(sign_tagged(key, tag, values), claimed):
            return key
    return None
