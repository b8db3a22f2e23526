"""Validation of what callers pass to lease operations, before anything reaches Redis.

A resource name sits inside the ``{hash tag}`` of ``hubsync:lease:{RES}``, so it
follows ``hubsync.core.names.validate_name``. A holder id is stored as a value, not a
key, so it may hold any printable character except ``{`` and ``}`` (kept out so
every id in a lease reads the same way everywhere), within a bounded length.
"""

from __future__ import annotations

import re

from hubstore.errors import InvalidLeaseArgumentError
from hubsync.core.errors import ConfigError
from hubsync.core.names import validate_name

MIN_TTL_MS = 50
"""Shortest lease: shorter than a round trip makes a lease that expires as it is granted."""
MAX_TTL_MS = 24 * 60 * 60 * 1000
"""Longest lease (one day): a crashed holder blocks the resource at most this long."""
MAX_HOLDER_LENGTH = 128
MAX_TOKEN = 2**53 - 1
"""Tokens are Lua numbers (doubles) inside the functions: exact up to 2**53."""
MAX_PROOF_LENGTH = 256
_PROOF = re.compile(r"[A-Za-z0-9_-]+")


def validate_resource(resource: str) -> str:
    """A lease resource name (it becomes ``hubsync:lease:{RES}``)."""
    try:
        return validate_name(resource, "lease resource")
    except ConfigError as exc:
        raise InvalidLeaseArgumentError(str(exc)) from None


def validate_holder(holder: str) -> str:
    """A holder id: 1-128 printable characters, no ``{`` or ``}``."""
    if not isinstance(holder, str) or not holder:
        raise InvalidLeaseArgumentError("holder must be a non-empty string")
    if len(holder) > MAX_HOLDER_LENGTH:
        raise InvalidLeaseArgumentError(
            f"holder is {len(holder)} characters long; the limit is {MAX_HOLDER_LENGTH}"
        )
    if not holder.isprintable() or "{" in holder or "}" in holder:
        raise InvalidLeaseArgumentError(
            f"holder {holder[:40]!r} must be printable, without control characters, '{{' or '}}'"
        )
    return holder


def validate_ttl_ms(ttl_ms: int) -> int:
    """A TTL in milliseconds within ``[MIN_TTL_MS, MAX_TTL_MS]``."""
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int):
        raise InvalidLeaseArgumentError(f"ttl must be an integer number of ms, not {ttl_ms!r}")
    if not MIN_TTL_MS <= ttl_ms <= MAX_TTL_MS:
        raise InvalidLeaseArgumentError(
            f"ttl {ttl_ms} ms is out of range; use {MIN_TTL_MS}..{MAX_TTL_MS} ms"
        )
    return ttl_ms


def validate_token(token: int) -> int:
    """A fencing token: a positive integer Lua can represent exactly."""
    if isinstance(token, bool) or not isinstance(token, int) or not 1 <= token <= MAX_TOKEN:
        raise InvalidLeaseArgumentError(
            f"token must be an integer in 1..{MAX_TOKEN} (as acquire returned it)"
        )
    return token


def validate_proof(proof: str) -> str:
    """A proof secret as ``acquire`` handed it out (URL-safe base64 characters)."""
    if not isinstance(proof, str) or not proof or len(proof) > MAX_PROOF_LENGTH:
        raise InvalidLeaseArgumentError(
            f"proof must be the 1..{MAX_PROOF_LENGTH} character secret acquire returned"
        )
    if not _PROOF.fullmatch(proof):
        # Deliberately does not echo the value: it is a secret, even when malformed.
        raise InvalidLeaseArgumentError(
            "proof may hold only letters, digits, '-' and '_' (as acquire returned it)"
        )
    return proof
