"""The consumer's lean path for an event entry: every check, on the fields as redis-py read them.

``HubConsumer.process`` judges an event entry with ``RuntimeAuthenticator.event``
then ``parse_event_entry``, both over ``decode_fields``'s str-keyed copy of
the entry. Nearly every entry a hub reads is a genuine one, so this path
proves such an entry first, straight from redis-py's ``bytes -> bytes``
mapping, reading each field once: the signature under the runtime's cached
keys (before anything else of the entry is looked at), then the content hash,
the quick event proof (schema, canonical bytes, fields) and the flat fields
against the bytes, the same checks ``parse_event_entry`` makes
(``hubsync.core.entries.lean_event_entry``).

It only ever says "this entry is valid, signed with this key". Anything else
(another kind, a missing or oversized field, a value that is not ``bytes``, a
runtime id not seen before, a signature that does not verify under the cached
keys, a rotation's grace, a hash or flat field that disagrees, an event the
quick proof leaves to the model, another hub project's event) gives None, and
the entry takes the general path, whose verdict and dead-letter reason are
the answer. So the lean path accepts nothing the general one refuses
(``tests/consumers/test_event_check_differential.py`` runs both over generated entries).
"""

from __future__ import annotations

from collections.abc import Mapping

from consumers.stream.authentication import RuntimeAuthenticator
from hubsync.core.entries import MAX_FIELD_BYTES, EventEntry, lean_event_entry
from hubsync.core.signing import RuntimeKey

_KIND_EVENT = b"event"


class LeanEventCheck:
    """Proves an event entry valid and signed from its raw fields; None when it cannot."""

    def __init__(self, authenticator: RuntimeAuthenticator) -> None:
        self.authenticator = authenticator

    def __call__(
        self, raw: Mapping[bytes, bytes], hub_project: str, sized: bool = False
    ) -> tuple[EventEntry, RuntimeKey] | None:
        """The entry and the key that signed it, or None (take the general path).

        ``sized``: the caller measured the whole entry (names and values) at no more
        than ``MAX_FIELD_BYTES``, so no field can be over the limit.
        """
        try:
            kind = raw.get(b"kind")
            if kind is not None and kind != _KIND_EVENT:
                return None
            signature = raw[b"sig"]
            project_id = raw[b"project_id"]
            run_id = raw[b"run_id"]
            sequence = raw[b"sequence"]
            claimed_project = raw[b"hub_project"]
            runtime_id = raw[b"runtime_id"]
            digest = raw[b"content_hash"]
            event_type = raw[b"event_type"]
            data = raw[b"event"]
            if not sized and max(map(len, raw.values())) > MAX_FIELD_BYTES:
                return None
            # the signature first: nothing of an entry is read before it authenticates
            key = self.authenticator.cached_event_key(
                hub_project,
                (project_id, run_id, sequence, claimed_project, runtime_id, digest),
                signature,
            )
            if key is None:
                return None
            entry = lean_event_entry(
                data,
                digest,
                (project_id, claimed_project, run_id, sequence, event_type, runtime_id),
            )
        except (KeyError, TypeError, ValueError):
            return None  # not bytes names, a missing field, a value that is not bytes
        if entry is None or entry.event.hub_project != hub_project:
            return None
        return entry, key
