"""Looking for planted secrets everywhere they must never be: files and every Redis key.

Each secret is looked for as written and as the base64 text it leaves when
encoded, wherever it sits in the encoded data: redaction removes both
(docs/redaction.md), so finding either is a leak.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hubsync.core.connections import RedisClient
from producers.redaction import base64_forms


def secret_needles(secrets: Sequence[str]) -> list[bytes]:
    """The bytes to look for: each secret, and each base64 form of it."""
    return [form.encode("utf-8") for s in secrets for form in (s, *sorted(base64_forms(s)))]


def files_containing(paths: Iterable[Path], secrets: Sequence[str]) -> list[str]:
    """Paths (files, or every file below a folder) whose bytes contain any secret."""
    wanted = secret_needles(secrets)
    found = []
    for path in paths:
        candidates = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for candidate in candidates:
            data = candidate.read_bytes()
            if any(needle in data for needle in wanted):
                found.append(str(candidate))
    return found


def redis_keys_containing(client: RedisClient, secrets: Sequence[str]) -> list[str]:
    """Keys whose value (any type, read whole) or name contains any secret."""
    wanted = secret_needles(secrets)
    found = []
    for key in client.scan_iter(count=1000):
        blob = key + _value_bytes(client, key)
        if any(needle in blob for needle in wanted):
            found.append(key.decode("utf-8", "replace"))
    return found


def _value_bytes(client: RedisClient, key: bytes) -> bytes:
    kind = client.type(key)
    parts: list[Any]
    if kind == b"stream":
        entries: Any = client.xrange(key)
        parts = [v for _, fields in entries for kv in fields.items() for v in kv]
    elif kind == b"hash":
        parts = [v for kv in client.hgetall(key).items() for v in kv]
    elif kind == b"string":
        parts = [client.get(key) or b""]
    elif kind in (b"list",):
        parts = list(client.lrange(key, 0, -1))
    elif kind == b"set":
        parts = list(client.smembers(key))
    elif kind == b"zset":
        parts = list(client.zrange(key, 0, -1))
    else:
        parts = [client.dump(key) or b""]
    return b"\0".join(p if isinstance(p, bytes) else str(p).encode() for p in parts)
