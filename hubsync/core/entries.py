"""Stream entries: the flat, human-readable fields hubsync puts on Redis Streams.

One module for the whole protocol so the relay (writer of events and presence,
reader of outcomes) and the hub consumers (the reverse) cannot drift apart.

Events stream ``hubsync:{P}:events`` carries two kinds of entry:

* ``kind=event``: ``project_id``, ``hub_project``, ``run_id``, ``sequence``,
  ``event_type``, ``runtime_id``, ``content_hash``, ``event`` (the canonical
  JSON bytes) and ``sig``, and nothing else (``EVENT_ENTRY_FIELDS``), but for one
  optional field, ``traceparent`` (the appending caller's W3C trace context,
  ``TRACED_EVENT_ENTRY_FIELDS``). The flat fields are a readable index; the
  signature covers them, the ``traceparent`` when present and, through
  ``content_hash``, the bytes, and the hub checks that they agree.
* ``kind=presence``: a runtime's heartbeat (``runtime_id``, ``hub_project``,
  ``host``, ``pid``, ``version``, ``backlog``, ``heartbeat``, ``sig``, and nothing
  else: ``PRESENCE_ENTRY_FIELDS``).

Acks stream ``hubsync:{P}:acks:{R}`` carries ``kind=outcomes`` entries, each a
batch of outcomes for runtime R (one entry per ingested batch, not per event,
so acknowledging costs the hub far fewer writes than the events did).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

import orjson

from hubsync.core.canonical import canonical_json, content_hash
from hubsync.core.errors import WireError
from hubsync.core.names import validate_name
from hubsync.core.signing import (
    EVENT_OPTIONAL_SIGNED_FIELD,
    EVENT_SIGNED_FIELDS,
    PRESENCE_SIGNED_FIELDS,
    SIGNATURE_FIELD,
)
from hubsync.core.tracing import is_traceparent
from hubsync.core.wire import (
    MAX_EVENT_BYTES,
    CheckedEvent,
    SyncEvent,
    parse_sync_event,
)

KIND_EVENT = "event"
KIND_PRESENCE = "presence"
KIND_OUTCOMES = "outcomes"

EVENT_FIELDS = (*EVENT_SIGNED_FIELDS, "event")
"""The fields of an event entry but its ``sig``: the signed ones, then the event's bytes."""

EVENT_ENTRY_FIELDS = frozenset((*EVENT_FIELDS, SIGNATURE_FIELD))
"""Exactly the fields of a signed event entry without a trace context: one more (but
``traceparent``), or one less, and it is refused."""

TRACED_EVENT_ENTRY_FIELDS = EVENT_ENTRY_FIELDS | {EVENT_OPTIONAL_SIGNED_FIELD}
"""Exactly the fields of a signed event entry that carries a ``traceparent``."""


def event_entry_field_set(fields: Mapping[str, object]) -> frozenset[str]:
    """The field set an event entry must have exactly: with its ``traceparent`` if it has one."""
    if EVENT_OPTIONAL_SIGNED_FIELD in fields:
        return TRACED_EVENT_ENTRY_FIELDS
    return EVENT_ENTRY_FIELDS


PRESENCE_ENTRY_FIELDS = frozenset(("kind", *PRESENCE_SIGNED_FIELDS, SIGNATURE_FIELD))
"""Exactly the fields of a signed presence beat."""

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_FLAT_FIELDS = ("project_id", "hub_project", "run_id", "sequence", "event_type", "runtime_id")

FIELD_MISMATCH = "field_mismatch"
"""``parse_event_entry``'s reason for a flat field that disagrees with the event bytes."""

MAX_FIELD_BYTES = MAX_EVENT_BYTES + 1024
"""No single field of an entry may exceed this; a larger one is dead-lettered."""


class Outcome(StrEnum):
    """What the hub decided about one event (the values on the acks stream)."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"
    REJECTED = "rejected"


class ConflictReason(StrEnum):
    """Why a conflict was raised (see docs/contract.md, hub tables)."""

    SEQUENCE_REUSED = "sequence_reused"
    PROJECT_MISMATCH = "project_mismatch"
    HOME_RUNTIME_MISMATCH = "home_runtime_mismatch"
    NOT_OWNER = "not_owner"
    """The project belongs to another runtime (the first to write it, or the one it was moved to)."""


class SecurityReason(StrEnum):
    """Why an entry was refused before it was judged: it did not authenticate, or its data
    is not allowlisted (see docs/contract.md, trust). Dead letters and security alerts
    carry these."""

    UNAUTHENTICATED = "unauthenticated"
    """Unsigned, badly signed, or naming a runtime the hub never enrolled or revoked."""
    NOT_ENROLLED = "not_enrolled"
    """Signed by an enrolled runtime, for a hub project it is not enrolled for."""
    NOT_ALLOWLISTED = "not_allowlisted"
    """A signed event whose ``data`` holds a field its type's allowlist does not let cross
    (``hubsync.core.allowlist``): its runtime derived it wrongly. Unlike the others, its
    runtime is told (``rejected``): the content is its own."""


AlertReason = ConflictReason | SecurityReason
"""What an alert can be about: a refused conflict or an entry that did not authenticate."""


def alert_reason(text: str) -> AlertReason:
    """The alert reason ``text`` names; ``ValueError`` for an unknown one."""
    if text in _SECURITY_REASONS:
        return SecurityReason(text)
    return ConflictReason(text)


_SECURITY_REASONS = frozenset(reason.value for reason in SecurityReason)


Fields = Mapping[str, str | bytes]
RawFields = Mapping[bytes, bytes] | Mapping[str, str] | Mapping[str | bytes, str | bytes]


class EventEntry(NamedTuple):
    """A validated ``kind=event`` entry: the checked event's fields and its exact bytes.

    A named tuple (made in C): the hub builds one per event it receives.
    """

    event: CheckedEvent
    data: bytes
    content_hash: str
    runtime_id: str

    @property
    def key(self) -> tuple[str, str, int]:
        """The dedupe key ``(project_id, run_id, sequence)``."""
        event = self.event
        return (event.project_id, event.run_id, event.sequence)


def event_entry_fields(event: SyncEvent, data: bytes, digest: str) -> dict[str, str | bytes]:
    """The stream fields of one sync event whose canonical bytes and hash are known."""
    return raw_event_entry_fields(
        project_id=event.project_id,
        hub_project=event.hub_project,
        run_id=event.run_id,
        sequence=event.sequence,
        event_type=event.event_type,
        runtime_id=event.home_runtime_id,
        digest=digest,
        data=data,
    )


def raw_event_entry_fields(
    *,
    project_id: str,
    hub_project: str,
    run_id: str,
    sequence: int,
    event_type: str,
    runtime_id: str,
    digest: str,
    data: bytes,
    traceparent: str | None = None,
) -> dict[str, str | bytes]:
    """The same fields from already-validated parts (the relay's hot path: no re-parse), with
    ``traceparent`` when one is given."""
    fields: dict[str, str | bytes] = {
        "kind": KIND_EVENT,
        "project_id": project_id,
        "hub_project": hub_project,
        "run_id": run_id,
        "sequence": str(sequence),
        "event_type": event_type,
        "runtime_id": runtime_id,
        "content_hash": digest,
        "event": data,
    }
    if traceparent is not None:
        fields[EVENT_OPTIONAL_SIGNED_FIELD] = traceparent
    return fields


_BYTES_ONLY = frozenset({bytes})


def decode_fields(raw: RawFields) -> dict[str, bytes]:
    """Normalise a redis-py field mapping (bytes or str keys) to ``str -> bytes``."""
    try:
        # What a client without decode_responses reads: bytes names and values (the hub's
        # per-entry path, so one comprehension, then one look at the values' types).
        fast = {key.decode("utf-8", "replace"): value for key, value in raw.items()}  # type: ignore[union-attr]
        if set(map(type, fast.values())) <= _BYTES_ONLY:
            return fast  # type: ignore[return-value]
    except AttributeError:  # str names
        pass
    out: dict[str, bytes] = {}
    for key, value in raw.items():
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        out[name] = value if isinstance(value, bytes) else str(value).encode("utf-8")
    return out


def field_set_problem(fields: Mapping[str, object], expected: frozenset[str]) -> str | None:
    """Why an entry's field names are not exactly ``expected`` (a missing or an extra one,
    named safely), or None when they are."""
    if fields.keys() == expected:
        return None
    missing = sorted(expected.difference(fields))
    if missing:
        return f"the entry has no {missing[0]!r} field"
    extra = sorted(set(fields).difference(expected))
    # repr: the name is the writer's choice, control characters and all
    return f"the entry has a field {extra[0][:40]!r} its kind does not have"


def entry_kind(fields: Mapping[str, bytes]) -> str:
    """The ``kind`` field, ``event`` when absent (plain producers may omit it)."""
    return fields.get("kind", KIND_EVENT.encode()).decode("utf-8", "replace")


def parse_event_entry(fields: Mapping[str, bytes]) -> EventEntry:
    """Validate a ``kind=event`` entry; raise ``WireError`` with a dead-letter reason.

    Reasons: ``missing_field``, ``field_too_large``, ``bad_field`` (also for a
    ``traceparent`` that is not exactly a W3C one), and those of ``parse_sync_event``
    (``hash_mismatch``, ``bad_json``, ...), then ``field_mismatch`` when a flat field
    disagrees with the event bytes.

    The reference check: the pydantic model (``parse_sync_event``) judges the
    bytes. The hub's consumers reach the same verdict, with the same reason,
    without the model for an entry they can prove valid
    (``consumers.stream.fast_event_check.check_event_entry``).
    """
    try:
        data = fields["event"]
        flat = flat_fields_read(fields)
        raw_digest = fields["content_hash"]
    except KeyError:
        missing = next(name for name in EVENT_FIELDS[1:] if name not in fields)
        raise WireError("missing_field", f"entry has no {missing!r} field") from None
    if max(map(len, fields.values())) > MAX_FIELD_BYTES:
        name, value = max(fields.items(), key=lambda item: len(item[1]))
        raise WireError(
            "field_too_large",
            f"field {name[:40]!r} is {len(value)} bytes; the limit is {MAX_FIELD_BYTES}",
        )
    try:
        digest = raw_digest.decode("ascii")
        runtime_id = flat[5].decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("bad_field", "content_hash or runtime_id is not text") from None
    if not _SHA256_HEX.fullmatch(digest):
        raise WireError("bad_field", "content_hash must be 64 lowercase hex digits")
    traceparent = fields.get(EVENT_OPTIONAL_SIGNED_FIELD)
    if traceparent is not None and not is_traceparent(traceparent):
        raise WireError("bad_field", "traceparent is not a W3C version-00 traceparent")
    event = CheckedEvent.of(parse_sync_event(data, expected_hash=digest))
    expected = flat_fields_of(event)
    if flat != expected:
        name = next(n for n, a, b in zip(_FLAT_FIELDS, flat, expected, strict=True) if a != b)
        raise WireError(FIELD_MISMATCH, f"field {name!r} disagrees with the event bytes")
    return EventEntry(event, data, digest, runtime_id)


def flat_fields_of(event: CheckedEvent) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes]:
    """The flat fields an entry of ``event`` must carry, as bytes, in the order
    project_id, hub_project, run_id, sequence, event_type, runtime_id."""
    return (
        event.project_id.encode(),
        event.hub_project.encode(),
        event.run_id.encode(),
        b"%d" % event.sequence,
        event.event_type.encode(),
        event.home_runtime_id.encode(),
    )


def flat_fields_read(
    fields: Mapping[str, bytes],
) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes]:
    """An entry's flat fields as read, in ``flat_fields_of``'s order; ``KeyError`` names the
    first one missing."""
    return (
        fields["project_id"],
        fields["hub_project"],
        fields["run_id"],
        fields["sequence"],
        fields["event_type"],
        fields["runtime_id"],
    )


class OutcomeRecord(NamedTuple):
    """The hub's verdict on one event, as carried back to its runtime.

    ``content_hash`` is the hash of the bytes the hub judged. The relay applies
    an outcome to an outbox row only when that hash is the row's own, so a
    verdict on someone else's bytes under this runtime's key never touches it.
    A named tuple (made in C): the hub makes one per event, the relay one per
    outcome it reads.
    """

    project_id: str
    run_id: str
    sequence: int
    outcome: Outcome
    content_hash: str
    reason: str | None = None
    existing_hash: str | None = None

    def to_wire(self) -> list[Any]:
        """Compact positional form used inside an outcomes entry."""
        return [
            self.project_id,
            self.run_id,
            self.sequence,
            self.outcome.value,
            self.content_hash,
            self.reason,
            self.existing_hash,
        ]


def outcomes_entry_fields(hub_project: str, outcomes: Sequence[OutcomeRecord]) -> dict[str, str]:
    """One acks-stream entry carrying many outcomes (read twice when a sequence is past 64 bits,
    hence a sequence, not any iterable)."""
    records = [tuple(o) for o in outcomes]  # to_wire's lists: orjson writes an enum as its value
    try:
        # Compact UTF-8, as canonical_json writes lists of text, integers and nulls.
        body = orjson.dumps(records).decode("utf-8")
    except orjson.JSONEncodeError:  # a sequence past 64 bits (a refused entry's claim)
        body = canonical_json([o.to_wire() for o in outcomes]).decode("utf-8")
    return {
        "kind": KIND_OUTCOMES,
        "hub_project": hub_project,
        "count": str(len(records)),
        "columns": "project_id,run_id,sequence,outcome,content_hash,reason,existing_hash",
        "outcomes": body,
    }


def parse_outcomes_entry(fields: Mapping[str, bytes]) -> list[OutcomeRecord]:
    """Decode an outcomes entry; raise ``WireError`` if it is malformed."""
    if entry_kind(fields) != KIND_OUTCOMES or "outcomes" not in fields:
        raise WireError("bad_outcomes", "entry is not an outcomes entry")
    try:
        fast = _plain_outcome_records(orjson.loads(fields["outcomes"]))
    except orjson.JSONDecodeError:
        fast = None  # json's rules (NaN, ...) decide below
    if fast is not None:
        return fast
    try:
        records = json.loads(fields["outcomes"])
        return [
            OutcomeRecord(
                project_id=str(r[0]),
                run_id=str(r[1]),
                sequence=int(r[2]),
                outcome=Outcome(r[3]),
                content_hash=str(r[4]),
                reason=None if r[5] is None else str(r[5]),
                existing_hash=None if r[6] is None else str(r[6]),
            )
            for r in records
        ]
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise WireError("bad_outcomes", f"outcomes entry is malformed ({exc})") from None


_OUTCOME_OF = {outcome.value: outcome for outcome in Outcome}


def _plain_outcome_records(records: object) -> list[OutcomeRecord] | None:
    """The records of an outcomes list whose every value already has its type (what hubs
    write), as the general path would make them; None for anything else, which that path
    converts or refuses. The relay reads thousands of these per second."""
    if type(records) is not list:
        return None
    out = []
    for r in records:
        if type(r) is not list or len(r) < 7:
            return None
        project_id, run_id, sequence, verdict, digest, reason, existing = r[:7]
        outcome = _OUTCOME_OF.get(verdict) if type(verdict) is str else None
        if (
            outcome is None
            or type(project_id) is not str
            or type(run_id) is not str
            or type(sequence) is not int
            or type(digest) is not str
            or (reason is not None and type(reason) is not str)
            or (existing is not None and type(existing) is not str)
        ):
            return None
        out.append(OutcomeRecord(project_id, run_id, sequence, outcome, digest, reason, existing))
    return out


@dataclass(frozen=True, slots=True)
class PresenceBeat:
    """A runtime's heartbeat as carried on the events stream."""

    runtime_id: str
    hub_project: str
    host: str
    pid: int
    version: str
    backlog: int
    heartbeat: str

    def to_fields(self) -> dict[str, str]:
        """The stream fields of this beat."""
        return {
            "kind": KIND_PRESENCE,
            "runtime_id": self.runtime_id,
            "hub_project": self.hub_project,
            "host": self.host,
            "pid": str(self.pid),
            "version": self.version,
            "backlog": str(self.backlog),
            "heartbeat": self.heartbeat,
        }

    def record(self) -> bytes:
        """Canonical JSON of the beat, as the hub stores it."""
        return canonical_json(
            {
                "runtime_id": self.runtime_id,
                "hub_project": self.hub_project,
                "host": self.host,
                "pid": self.pid,
                "version": self.version,
                "backlog": self.backlog,
                "heartbeat": self.heartbeat,
            }
        )


def parse_presence_entry(fields: Mapping[str, bytes]) -> PresenceBeat:
    """Validate a ``kind=presence`` entry; raise ``WireError`` naming the problem."""
    try:
        text = {k: v.decode("utf-8") for k, v in fields.items() if len(v) <= 1024}
        return PresenceBeat(
            runtime_id=validate_name(text["runtime_id"], "runtime id"),
            hub_project=validate_name(text["hub_project"], "hub project"),
            host=text["host"][:255],
            pid=int(text["pid"]),
            version=text["version"][:64],
            backlog=int(text["backlog"]),
            heartbeat=text["heartbeat"],
        )
    except KeyError as exc:
        raise WireError("missing_field", f"presence entry has no {exc.args[0]!r} field") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError("bad_field", f"presence entry is malformed ({exc})") from None


__all__ = [
    "EVENT_ENTRY_FIELDS",
    "FIELD_MISMATCH",
    "KIND_EVENT",
    "KIND_OUTCOMES",
    "KIND_PRESENCE",
    "PRESENCE_ENTRY_FIELDS",
    "TRACED_EVENT_ENTRY_FIELDS",
    "AlertReason",
    "ConflictReason",
    "EventEntry",
    "Outcome",
    "OutcomeRecord",
    "PresenceBeat",
    "SecurityReason",
    "alert_reason",
    "content_hash",
    "decode_fields",
    "entry_kind",
    "event_entry_field_set",
    "event_entry_fields",
    "field_set_problem",
    "flat_fields_of",
    "outcomes_entry_fields",
    "parse_event_entry",
    "parse_outcomes_entry",
    "parse_presence_entry",
    "raw_event_entry_fields",
]
