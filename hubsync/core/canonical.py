"""Canonical JSON and content hashing.

The canonical form is what the content hash covers, so it must be the same
bytes for the same value on every machine: sorted keys, compact separators,
UTF-8 (not ASCII escapes), and no NaN or Infinity, which JSON cannot carry.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hubsync.core.errors import WireError


def canonical_json(value: Any) -> bytes:
    """Serialise ``value`` canonically; raise ``WireError`` for what JSON cannot carry."""
    try:
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode("utf-8")
    except ValueError as exc:  # NaN/Infinity, or a lone surrogate that UTF-8 cannot hold
        raise WireError("not_canonical", f"value cannot be canonical JSON ({exc})") from None
    except TypeError as exc:
        raise WireError("not_canonical", f"value is not JSON-serialisable ({exc})") from None


def content_hash(data: bytes) -> str:
    """SHA-256 of exactly these bytes, as lowercase hex."""
    return hashlib.sha256(data).hexdigest()


def verify_content_hash(data: bytes, expected: str) -> None:
    """Raise ``WireError('hash_mismatch')`` unless ``data`` hashes to ``expected``."""
    actual = content_hash(data)
    if actual != expected:
        raise WireError(
            "hash_mismatch",
            f"content hash {expected[:16]}... does not match the bytes (they hash to "
            f"{actual[:16]}...)",
        )
