"""Looking for planted secrets everywhere they must never be: files and every Redis key.

What is found is named by place (a file's path, a key's name), never by the bytes around
it. A needle is each secret whole and its random tail, so a secret cut short is found too,
and each base64 form of it (redaction removes those as well: docs/redaction.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hubsync.core.connections import RedisClient
from hubsync.core.redis_values import as_text
from producers.redaction import base64_forms

TAIL = 20
"""Characters of a secret's end that are searched for on their own."""


@dataclass
class Scan:
    """Where the needles were found, and how much was read."""

    found: list[str] = field(default_factory=list)
    files: int = 0
    file_bytes: int = 0
    redis_keys: int = 0
    redis_bytes: int = 0


def needles(secrets: Iterable[str]) -> list[bytes]:
    """Byte strings none of which may appear anywhere: each secret, its random tail and the
    text of each base64 encoding of it, wherever it sits in the encoded data."""
    out: list[bytes] = []
    for secret in secrets:
        out += [secret.encode(), secret[-TAIL:].encode()]
        out += [form.encode() for form in sorted(base64_forms(secret))]
    return out


def files_under(paths: Iterable[Path]) -> list[Path]:
    """Every regular file among ``paths`` and below those that are folders."""
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
        elif path.exists():
            found += sorted(p for p in path.rglob("*") if p.is_file())
    return found


def scan_files(paths: Iterable[Path], wanted: Sequence[bytes], scan: Scan | None = None) -> Scan:
    """Read every file among and below ``paths`` whole, noting those holding a needle."""
    scan = scan or Scan()
    for path in files_under(paths):
        data = path.read_bytes()
        scan.files += 1
        scan.file_bytes += len(data)
        if any(needle in data for needle in wanted):
            scan.found.append(str(path))
    return scan


def scan_redis(client: RedisClient, wanted: Sequence[bytes], scan: Scan | None = None) -> Scan:
    """Read every key (on every master of a cluster): its name, its DUMP and its contents
    (a stream's entries, a hash's fields...), noting the keys holding a needle."""
    scan = scan or Scan()
    for key in client.scan_iter(count=1000):
        blob = key + b"\0" + b"\0".join(_value_parts(client, key))
        scan.redis_keys += 1
        scan.redis_bytes += len(blob)
        if any(needle in blob for needle in wanted):
            scan.found.append(f"Redis key {as_text(key)}")
    return scan


def _value_parts(client: RedisClient, key: bytes) -> list[bytes]:
    parts: list[Any] = [client.dump(key) or b""]
    kind = as_text(client.type(key))
    if kind == "stream":
        entries: Any = client.xrange(key)
        parts += [v for _, fields in entries for kv in fields.items() for v in kv]
    elif kind == "hash":
        parts += [v for kv in client.hgetall(key).items() for v in kv]
    elif kind == "string":
        parts.append(client.get(key) or b"")
    elif kind == "list":
        parts += list(client.lrange(key, 0, -1))
    elif kind == "set":
        parts += list(client.smembers(key))
    elif kind == "zset":
        parts += list(client.zrange(key, 0, -1))
    return [p if isinstance(p, bytes) else str(p).encode() for p in parts]
