"""The kinds of garbage entry, each a way to spoil an event entry's fields and the
dead-letter reason the hub must give the result.

A new kind is one spoiling function and one line of ``GARBAGE``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hubsync.core.canonical import content_hash

Fields = dict[str, Any]

OVERSIZED_PADDING = 300 * 1024
"""Bytes added to an oversized entry's event: past the hub's field limit."""


@dataclass(frozen=True)
class GarbageKind:
    """How to spoil an entry's fields (in place), and the reason the hub must give it."""

    reason: str
    spoil: Callable[[Fields], None]
    copies_genuine: bool = False
    """Spoil a copy of a genuine entry of the stream rather than a made-up event."""


def _bad_json(fields: Fields) -> None:
    fields["event"] = b'{"schema": "hubsync.sync-event.v1", "run_id": '
    fields["content_hash"] = content_hash(fields["event"])


def _missing_field(fields: Fields) -> None:
    del fields["event_type"]


def _hash_mismatch(fields: Fields) -> None:
    fields["content_hash"] = content_hash(fields["event"] + b" ")


def _corrupted_copy(fields: Fields) -> None:
    # Genuine bytes under a wrong hash: the hub's "rejected" names the hash of those
    # bytes, i.e. the genuine row's own, which must still end acked (or be explained).
    fields["content_hash"] = content_hash(fields["event"] + b"corrupted")


def _oversized(fields: Fields) -> None:
    fields["event"] = fields["event"] + b" " * OVERSIZED_PADDING


def _not_canonical(fields: Fields) -> None:
    loose = json.dumps(json.loads(fields["event"]), indent=1).encode()
    fields["event"], fields["content_hash"] = loose, content_hash(loose)


GARBAGE: dict[str, GarbageKind] = {
    "bad_json": GarbageKind("bad_json", _bad_json),
    "missing_field": GarbageKind("missing_field", _missing_field),
    "hash_mismatch": GarbageKind("hash_mismatch", _hash_mismatch),
    "corrupted_copy": GarbageKind("hash_mismatch", _corrupted_copy, copies_genuine=True),
    "oversized": GarbageKind("field_too_large", _oversized),
    "not_canonical": GarbageKind("not_canonical", _not_canonical),
}
"""Garbage kind -> how it is made and the dead-letter reason the hub must give it."""
