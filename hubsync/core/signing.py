"""Signatures on stream entries: who wrote an event, a presence beat or an outcomes entry.

Each enrolled runtime shares a 32-byte key with the hub. An entry is signed
with HMAC-SHA256 under that key over a canonical encoding of the fields that
say what it is; the signature travels in the entry's ``sig`` field as 64
lowercase hex digits. The exact bytes signed are specified in docs/contract.md
(signed encodings) so that another implementation can sign compatibly:

* the message is a sequence of netstrings, ``<decimal length>:<bytes>,``, the
  first one the kind's domain tag (``hubsync/event/v2``, ``hubsync/presence/v1``,
  ``hubsync/outcomes/v1``), then the kind's fields in a fixed order. A length
  in front of every field means no byte can move across a field boundary, and
  the leading tag means a signature made for one kind never verifies as
  another, whatever the field values;
* integers (``sequence``, ``pid``, ``backlog``) are their decimal ASCII form,
  text is UTF-8, and a verifier signs the field bytes exactly as they came
  off the stream;
* an event signature covers every field of the entry but ``event`` itself, whose
  bytes it covers through ``content_hash`` (their SHA-256). The one optional field,
  ``traceparent``, is a last netstring when the entry carries it and nothing when it does
  not, so an entry without it signs and verifies exactly as before it existed. What else makes an
  entry authentic (exactly these fields, bytes that hash to the signed hash and
  agree with the flat fields) the hub checks beside the signature
  (``consumers.stream.authentication``).

Verification takes every key a runtime currently has (the current one and,
during a rotation's grace period, the previous one) and returns the key that
matched, or None. Anything malformed (a missing field, a signature of the
wrong length, non-hex, upper case) is simply not verified: the verify
functions never raise.

The consumer verifies every event, so each key keeps one HMAC context per
domain, keyed and already fed its tag (``hubsync.core.tagged_hmac``: OpenSSL's
object, without the standard library's Python wrapper around it): a signature
costs a copy of that context, the fields, and the final blocks.
``scripts/bench_signing.py`` measures it against a one-shot ``hmac.digest``
of the same bytes.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Final, NoReturn, cast

from hubsync.core.errors import ConfigError
from hubsync.core.tagged_hmac import TaggedMac, tagged_context

KEY_BYTES: Final = 32
"""A runtime key is 256 bits."""

SIGNATURE_FIELD: Final = "sig"
"""The entry field carrying the signature (events, presence beats, outcomes)."""

HUB_ID_FIELD: Final = "hub_id"
"""The outcomes entry field naming the hub that judged the events."""

SIGNATURE_HEX_CHARS: Final = 64
"""A signature is HMAC-SHA256 as lowercase hex."""

EVENT_TAG: Final = b"hubsync/event/v2"
PRESENCE_TAG: Final = b"hubsync/presence/v1"
OUTCOMES_TAG: Final = b"hubsync/outcomes/v1"
FINGERPRINT_TAG: Final = b"hubsync/key-fingerprint/v1"

EVENT_SIGNED_FIELDS: Final = (
    "kind",
    "project_id",
    "hub_project",
    "run_id",
    "sequence",
    "event_type",
    "runtime_id",
    "content_hash",
)
"""The event entry fields an event signature covers, in the order they are encoded: every
field of the entry but ``event`` (covered by ``content_hash``) and ``sig``."""

EVENT_OPTIONAL_SIGNED_FIELD: Final = "traceparent"
"""The optional event entry field a signature covers when present, after
``EVENT_SIGNED_FIELDS`` (``hubsync.core.tracing``: the appending caller's trace context)."""

EVENT_KIND: Final = b"event"
"""The ``kind`` of an event entry, the first field an event signature covers."""

PRESENCE_SIGNED_FIELDS: Final = (
    "runtime_id",
    "hub_project",
    "host",
    "pid",
    "version",
    "backlog",
    "heartbeat",
)
"""The presence entry fields a presence signature covers, in order."""

OUTCOMES_SIGNED_FIELDS: Final = (HUB_ID_FIELD, "hub_project", "runtime_id", "outcomes")
"""What an outcomes signature covers, in order; ``runtime_id`` is the acks stream's runtime
(it is in the stream's key, not in the entry)."""


def netstring(value: bytes) -> bytes:
    """``value`` as a netstring (``LEN:value,``): what every signed message is made of."""
    return b"%d:%b," % (len(value), value)


_SignedValues = tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]
"""``EVENT_SIGNED_FIELDS``' values as bytes, in order."""

_event_signed_values = itemgetter(*EVENT_SIGNED_FIELDS)
"""An entry's ``EVENT_SIGNED_FIELDS`` values, in order (one C-level call); ``KeyError`` when
one is missing."""

# One %-format per kind: a single C-level call builds the whole message body.
_EVENT_BODY = b"%d:%b," * len(EVENT_SIGNED_FIELDS)
_PRESENCE_BODY = b"%d:%b," * len(PRESENCE_SIGNED_FIELDS)
_OUTCOMES_BODY = b"%d:%b," * len(OUTCOMES_SIGNED_FIELDS)


def event_signed_body(
    kind: bytes,
    project_id: bytes,
    hub_project: bytes,
    run_id: bytes,
    sequence: bytes,
    event_type: bytes,
    runtime_id: bytes,
    content_hash: bytes,
    traceparent: bytes | None = None,
) -> bytes:
    """The bytes an event signature covers after its tag: ``EVENT_SIGNED_FIELDS``' netstrings,
    then ``traceparent``'s when the entry carries one (``EVENT_OPTIONAL_SIGNED_FIELD``).

    The one place an event's signed encoding is spelled out. The message a signature is
    the HMAC of is the tag's netstring then these bytes (``event_message``); every signer
    (``sign_event``, ``sign_event_entry``, ``EventSigner``) and every verifier
    (``verify_event_entry``, ``verify_event_body``, hence the consumer's fast path) builds
    it here, from each field's bytes exactly as the entry carries them. Anything but
    ``bytes`` raises ``TypeError``.
    """
    # one flat tuple (no unpacking): this runs for every event sent and received
    body = _EVENT_BODY % (
        len(kind), kind, len(project_id), project_id, len(hub_project), hub_project,
        len(run_id), run_id, len(sequence), sequence, len(event_type), event_type,
        len(runtime_id), runtime_id, len(content_hash), content_hash,
    )  # fmt: skip
    if traceparent is None:
        return body
    return body + b"%d:%b," % (len(traceparent), traceparent)


class RuntimeKey:
    """One runtime's 32-byte signing key; its repr and str never show the bytes.

    ``fingerprint`` (16 hex digits of HMAC(key, ``hubsync/key-fingerprint/v1``))
    names the key in logs and listings without revealing it. ``reveal()`` is
    the one way to the bytes, for storing the key.
    """

    __slots__ = ("_event", "_outcomes", "_presence", "_secret", "fingerprint")

    _secret: bytes
    _event: TaggedMac
    _presence: TaggedMac
    _outcomes: TaggedMac
    fingerprint: str

    def __init__(self, secret: bytes) -> None:
        if not isinstance(secret, bytes) or len(secret) != KEY_BYTES:
            size = f"{len(secret)} bytes" if isinstance(secret, bytes) else type(secret).__name__
            raise ConfigError(
                f"a runtime key must be {KEY_BYTES} bytes, got {size}; enroll the runtime again"
            )
        self._secret = secret
        # One keyed HMAC per domain, already fed its tag: signing copies it and
        # adds the body, so the key schedule and the tag are hashed once per key.
        self._event = tagged_context(secret, netstring(EVENT_TAG))
        self._presence = tagged_context(secret, netstring(PRESENCE_TAG))
        self._outcomes = tagged_context(secret, netstring(OUTCOMES_TAG))
        self.fingerprint = hmac.new(secret, netstring(FINGERPRINT_TAG), "sha256").hexdigest()[:16]

    @classmethod
    def generate(cls) -> RuntimeKey:
        """A new random key (``secrets.token_bytes``)."""
        return cls(secrets.token_bytes(KEY_BYTES))

    def reveal(self) -> bytes:
        """The key's bytes, for the one place that stores or hands them over."""
        return self._secret

    def __repr__(self) -> str:
        return f"RuntimeKey(fingerprint={self.fingerprint})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RuntimeKey):
            return NotImplemented
        return hmac.compare_digest(self._secret, other._secret)

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __reduce__(self) -> NoReturn:
        # Pickling would write the key wherever the pickle goes (a queue, a cache).
        raise TypeError("a RuntimeKey cannot be pickled; store reveal() deliberately")


def _mac(tagged: TaggedMac, body: bytes) -> str:
    """HMAC-SHA256 hex of (tag netstring + ``body``) from the key's tagged HMAC."""
    mac = tagged.copy()
    mac.update(body)
    return mac.hexdigest()


# ----- encodings (the bytes signed, without the key) -----


def event_message(*fields: str | bytes | int, traceparent: str | bytes | None = None) -> bytes:
    """The exact bytes an event signature is the HMAC of: the tag's netstring, then
    ``event_signed_body`` of ``fields`` (``EVENT_SIGNED_FIELDS``, in order, as text, bytes
    or integers) and of ``traceparent`` when given."""
    return netstring(EVENT_TAG) + _event_body(fields, traceparent)


def presence_message(fields: Mapping[str, str | bytes | int]) -> bytes:
    """The exact bytes a presence signature is the HMAC of (``PRESENCE_SIGNED_FIELDS``)."""
    return netstring(PRESENCE_TAG) + _presence_body(fields)


def outcomes_message(
    hub_id: str | bytes, hub_project: str | bytes, runtime_id: str | bytes, outcomes: str | bytes
) -> bytes:
    """The exact bytes an outcomes signature is the HMAC of; ``outcomes`` is the field as sent."""
    return netstring(OUTCOMES_TAG) + _outcomes_body(hub_id, hub_project, runtime_id, outcomes)


def _event_body(
    values: Sequence[str | bytes | int], traceparent: str | bytes | int | None = None
) -> bytes:
    """``event_signed_body`` of ``EVENT_SIGNED_FIELDS``' values (and ``traceparent``) given
    as text, bytes or integers (``_as_bytes``); ``ConfigError`` for another count of values."""
    if len(values) != len(EVENT_SIGNED_FIELDS):
        raise ConfigError(f"cannot sign: an event signs {len(EVENT_SIGNED_FIELDS)} fields")
    optional = None
    if traceparent is not None:
        optional = _as_bytes(EVENT_OPTIONAL_SIGNED_FIELD, traceparent)
    encoded = cast("_SignedValues", tuple(map(_as_bytes, EVENT_SIGNED_FIELDS, values)))
    return event_signed_body(*encoded, optional)


def _presence_body(fields: Mapping[str, str | bytes | int]) -> bytes:
    u = _as_bytes("runtime_id", _field(fields, "runtime_id"))
    p = _as_bytes("hub_project", _field(fields, "hub_project"))
    h = _as_bytes("host", _field(fields, "host"))
    i = _as_bytes("pid", _field(fields, "pid"))
    v = _as_bytes("version", _field(fields, "version"))
    b = _as_bytes("backlog", _field(fields, "backlog"))
    t = _as_bytes("heartbeat", _field(fields, "heartbeat"))
    return _PRESENCE_BODY % (
        *(len(u), u, len(p), p, len(h), h, len(i), i),
        *(len(v), v, len(b), b, len(t), t),
    )


def _outcomes_body(
    hub_id: str | bytes | int,
    hub_project: str | bytes | int,
    runtime_id: str | bytes | int,
    outcomes: str | bytes | int,
) -> bytes:
    i = _as_bytes(HUB_ID_FIELD, hub_id)
    p = _as_bytes("hub_project", hub_project)
    r = _as_bytes("runtime_id", runtime_id)
    o = _as_bytes("outcomes", outcomes)
    return _OUTCOMES_BODY % (len(i), i, len(p), p, len(r), r, len(o), o)


def _field(fields: Mapping[str, str | bytes | int], name: str) -> str | bytes | int:
    try:
        return fields[name]
    except KeyError:
        raise ConfigError(f"cannot sign: the entry has no {name!r} field") from None


def _as_bytes(name: str, value: str | bytes | int) -> bytes:
    """A field's signed bytes: bytes as they are, text as UTF-8, an integer in decimal ASCII."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"cannot sign: field {name!r} is not valid text") from None
    if isinstance(value, int) and not isinstance(value, bool):
        return b"%d" % value
    raise ConfigError(f"cannot sign: field {name!r} is a {type(value).__name__}")


# ----- events -----


def sign_event(
    key: RuntimeKey,
    *,
    project_id: str | bytes,
    hub_project: str | bytes,
    run_id: str | bytes,
    sequence: int | str | bytes,
    event_type: str | bytes,
    runtime_id: str | bytes,
    content_hash: str | bytes,
    traceparent: str | bytes | None = None,
) -> str:
    """The ``sig`` of one event entry (``kind`` ``event``, with ``traceparent`` when it carries
    one); raises ``ConfigError`` naming a field it cannot encode."""
    body = _event_body(
        (
            EVENT_KIND,
            project_id,
            hub_project,
            run_id,
            sequence,
            event_type,
            runtime_id,
            content_hash,
        ),
        traceparent,
    )
    return _mac(key._event, body)


class EventSigner:
    """Signs the events of one project: ``sign_event`` with the fields that never change
    between its events (kind, project, hub project, runtime) encoded once.

    The relay signs every event it sends, so the per-event part is
    ``event_signed_body`` of bytes already encoded and one HMAC; ``sign`` gives
    exactly what ``sign_event`` gives for the same fields.
    """

    __slots__ = ("_hub_project", "_mac", "_project_id", "_runtime_id", "key")

    def __init__(
        self, key: RuntimeKey, *, project_id: str, hub_project: str, runtime_id: str
    ) -> None:
        self.key = key
        self._mac = key._event
        self._project_id = _as_bytes("project_id", project_id)
        self._hub_project = _as_bytes("hub_project", hub_project)
        self._runtime_id = _as_bytes("runtime_id", runtime_id)

    def sign(
        self,
        run_id: bytes,
        sequence: bytes,
        event_type: bytes,
        content_hash: bytes,
        traceparent: bytes | None = None,
    ) -> str:
        """The ``sig`` of this project's event ``(run_id, sequence)`` of that type and hash
        (and trace context, when it carries one), each given as the bytes the entry carries."""
        body = event_signed_body(
            EVENT_KIND,
            self._project_id,
            self._hub_project,
            run_id,
            sequence,
            event_type,
            self._runtime_id,
            content_hash,
            traceparent,
        )
        return _mac(self._mac, body)


def sign_event_entry(key: RuntimeKey, fields: Mapping[str, str | bytes]) -> str:
    """The ``sig`` of an event entry's fields (``hubsync.core.entries.raw_event_entry_fields``)."""
    body = _event_body(
        [_field(fields, name) for name in EVENT_SIGNED_FIELDS],
        fields.get(EVENT_OPTIONAL_SIGNED_FIELD),
    )
    return _mac(key._event, body)


def verify_event_entry(
    keys: Sequence[RuntimeKey], fields: Mapping[str, str | bytes]
) -> RuntimeKey | None:
    """The key among ``keys`` whose signature the event entry carries, or None.

    ``fields`` is the entry as read (``hubsync.core.entries.decode_fields``: bytes
    values); str values are accepted too. Never raises: a missing field or a
    malformed ``sig`` is "not verified". Only the signature: the entry's other
    conditions (exactly its fields, its bytes' hash) are the caller's.
    """
    try:
        signature = fields[SIGNATURE_FIELD]
        values = _event_signed_values(fields)
    except KeyError:
        return None
    traceparent = fields.get(EVENT_OPTIONAL_SIGNED_FIELD)
    try:
        signed = cast("_SignedValues", values)
        body = event_signed_body(*signed, cast("bytes | None", traceparent))
    except TypeError:  # str values (or worse): encode each as a signer does
        try:
            body = _event_body(values, traceparent)
        except ConfigError:
            return None
    return _first_match(keys, "_event", body, signature)


def verify_event_body(
    keys: Sequence[RuntimeKey], body: bytes, signature: bytes
) -> RuntimeKey | None:
    """``verify_event_entry`` for ``body``, the ``event_signed_body`` of the signed fields
    as read off the stream, and ``sig`` as read.

    The consumer's fast path (``consumers.stream.fast_event_check``): it builds ``body``
    from the values as they came (anything but ``bytes`` raises ``TypeError`` there, and it
    takes the general path). A ``sig`` matches exactly when it is the 64 lowercase hex
    digits of the HMAC, as ``verify_event_entry`` decides.
    """
    return _first_match(keys, "_event", body, signature)


# ----- presence beats -----


def sign_presence_entry(key: RuntimeKey, fields: Mapping[str, str | bytes | int]) -> str:
    """The ``sig`` of a presence entry's fields (``PresenceBeat.to_fields()``)."""
    return _mac(key._presence, _presence_body(fields))


def verify_presence_entry(
    keys: Sequence[RuntimeKey], fields: Mapping[str, str | bytes]
) -> RuntimeKey | None:
    """The key among ``keys`` that signed this presence entry as read, or None; never raises."""
    try:
        signature = fields[SIGNATURE_FIELD]
        body = _presence_body(fields)
    except (KeyError, ConfigError):
        return None
    return _first_match(keys, "_presence", body, signature)


# ----- outcomes -----


def sign_outcomes_entry(
    key: RuntimeKey, fields: Mapping[str, str | bytes], *, runtime_id: str | bytes
) -> str:
    """The ``sig`` of an outcomes entry for ``runtime_id``: its ``hub_id``, ``hub_project``
    and ``outcomes`` fields (``hubsync.core.entries.outcomes_entry_fields`` plus ``hub_id``)."""
    body = _outcomes_body(
        _field(fields, HUB_ID_FIELD),
        _field(fields, "hub_project"),
        runtime_id,
        _field(fields, "outcomes"),
    )
    return _mac(key._outcomes, body)


def verify_outcomes_entry(
    keys: Sequence[RuntimeKey],
    fields: Mapping[str, str | bytes],
    *,
    runtime_id: str | bytes,
) -> RuntimeKey | None:
    """The key among ``keys`` that signed this outcomes entry for ``runtime_id``, or None.

    A match proves the entry came from a holder of this runtime's key; which
    hub that is, is the entry's ``hub_id`` field, which the caller compares
    with the hub it trusts. Never raises.
    """
    try:
        signature = fields[SIGNATURE_FIELD]
        body = _outcomes_body(
            fields[HUB_ID_FIELD], fields["hub_project"], runtime_id, fields["outcomes"]
        )
    except (KeyError, ConfigError):
        return None
    return _first_match(keys, "_outcomes", body, signature)


# ----- matching -----


def claimed_signature(signature: object) -> str | None:
    """``signature`` as text if it can be one (64 ASCII characters, as text or bytes)."""
    if isinstance(signature, bytes):
        signature = signature.decode("ascii", "replace")
    if not isinstance(signature, str) or len(signature) != SIGNATURE_HEX_CHARS:
        return None
    return signature if signature.isascii() else None


def _first_match(
    keys: Sequence[RuntimeKey], domain: str, body: bytes, signature: object
) -> RuntimeKey | None:
    claimed = claimed_signature(signature)
    if claimed is None:
        return None
    # Upper-case or non-hex text can never equal a hexdigest: no separate check needed.
    for key in keys:
        if hmac.compare_digest(_mac(getattr(key, domain), body), claimed):
            return key
    return None


__all__ = [
    "EVENT_KIND",
    "EVENT_OPTIONAL_SIGNED_FIELD",
    "EVENT_SIGNED_FIELDS",
    "EVENT_TAG",
    "HUB_ID_FIELD",
    "KEY_BYTES",
    "OUTCOMES_SIGNED_FIELDS",
    "OUTCOMES_TAG",
    "PRESENCE_SIGNED_FIELDS",
    "PRESENCE_TAG",
    "SIGNATURE_FIELD",
    "EventSigner",
    "RuntimeKey",
    "claimed_signature",
    "event_message",
    "event_signed_body",
    "netstring",
    "outcomes_message",
    "presence_message",
    "sign_event",
    "sign_event_entry",
    "sign_outcomes_entry",
    "sign_presence_entry",
    "verify_event_body",
    "verify_event_entry",
    "verify_outcomes_entry",
    "verify_presence_entry",
]
