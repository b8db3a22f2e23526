"""The kinds of garbage entry, each a way to spoil an event entry's fields and the
dead-letter reason the hub must give the result.

Two sorts: bad content a runtime's key signed (the hub judges it, dead-letters it with
its reason and answers ``rejected``), and entries that are not exactly what a key signed
(a field dropped or added, a hash or a flat field changed, bytes over the limit): the hub
refuses those ``unauthenticated``, with a security alert, and answers nobody.

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

JUNK_BYTES = 2 * 1024 * 1024
"""The size of the field a junk copy adds to a genuine entry."""


@dataclass(frozen=True)
class GarbageKind:
    """How to spoil an entry's fields (in place), and the reason the hub must give it."""

    reason: str
    spoil: Callable[[Fields], None]
    copies_genuine: bool = False
    """Spoil a copy of a genuine entry of the stream rather than a made-up event."""
    keyless: bool = False
    """Spoiled after it was signed, as someone without the key would (else signed after)."""

    @property
    def refused(self) -> bool:
        """Whether the hub must refuse it (a security alert, no outcome) rather than judge it."""
        return self.reason == "unauthenticated"


def _bad_json(fields: Fields) -> None:
    fields["event"] = b'{"schema": "hubsync.sync-event.v1", "run_id": '
    fields["content_hash"] = content_hash(fields["event"])


def _missing_field(fields: Fields) -> None:
    del fields["event_type"]


def _hash_mismatch(fields: Fields) -> None:
    fields["content_hash"] = content_hash(fields["event"] + b" ")


def _corrupted_copy(fields: Fields) -> None:
    # Genuine bytes under a wrong hash, signed: not the signed content, refused, and the
    # genuine row is answered through its own entry.
    fields["content_hash"] = content_hash(fields["event"] + b"corrupted")


def _retyped(fields: Fields) -> None:
    fields["event_type"] = b"run.cancelled"


def _junk_field(fields: Fields) -> None:
    fields["junk"] = b"x" * JUNK_BYTES


def _oversized(fields: Fields) -> None:
    fields["event"] = fields["event"] + b" " * OVERSIZED_PADDING


def _not_canonical(fields: Fields) -> None:
    loose = json.dumps(json.loads(fields["event"]), indent=1).encode()
    fields["event"], fields["content_hash"] = loose, content_hash(loose)


_REFUSED = "unauthenticated"

GARBAGE: dict[str, GarbageKind] = {
    "bad_json": GarbageKind("bad_json", _bad_json),
    "missing_field": GarbageKind(_REFUSED, _missing_field, keyless=True),
    "hash_mismatch": GarbageKind(_REFUSED, _hash_mismatch),
    "corrupted_copy": GarbageKind(_REFUSED, _corrupted_copy, copies_genuine=True),
    "oversized": GarbageKind(_REFUSED, _oversized),  # too large to be hashed, so unproven
    "not_canonical": GarbageKind("not_canonical", _not_canonical),
    "retyped_copy": GarbageKind(_REFUSED, _retyped, copies_genuine=True, keyless=True),
    "junk_copy": GarbageKind(_REFUSED, _junk_field, copies_genuine=True, keyless=True),
}
"""Garbage kind -> how it is made and the dead-letter reason the hub must give it."""
