"""What a processed batch sends back to Redis: dead letters, outcomes, alerts, then acks.

Outcomes are grouped per ``(hub project, runtime, key)`` into ONE outcomes
entry per batch, so acknowledging 500 events costs one XADD, not 500. Each
outcomes entry names this hub (``hub_id``) and is signed with the runtime key
the events it answers were signed with (during a rotation's grace period that
may be the previous one: the relay that sent them holds it). Only entries that
authenticated as a runtime's get outcomes: a refused entry's runtime is told
nothing, so a forged or tampered copy can never park the genuine outbox row; and
a ``rejected`` names only bytes the runtime signed (``rejected_outcome``).

Everything is published in one pipeline, and only once that pipeline was
answered are the entries XACKed in a second one: an entry is never
acknowledged to the stream before its verdict is on its way to the runtime.
A stream Redis refuses an XADD on (another type, or an ack stream whose last
id is the largest there is) is that stream's failure alone: one log line per
stream and batch, ``hubsync_consumer_stream_failures_total``, and for an ack
stream an alert on the hub project's alert stream; the rest of the batch is
published and acknowledged (what was stored stays stored, and a runtime whose
outcome was lost sends its rows again, which the hub answers ``duplicate``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from consumers.stream.streams import key_refused
from hubstore.store import SecurityAlert
from hubsync.core import keys, metrics
from hubsync.core.canonical import content_hash
from hubsync.core.clock import utc_now_iso
from hubsync.core.connections import RedisClient
from hubsync.core.entries import (
    KIND_EVENT,
    Outcome,
    OutcomeRecord,
    SecurityReason,
    entry_kind,
    outcomes_entry_fields,
)
from hubsync.core.errors import ConfigError
from hubsync.core.names import validate_name
from hubsync.core.redis_values import printable
from hubsync.core.signing import HUB_ID_FIELD, SIGNATURE_FIELD, RuntimeKey, sign_outcomes_entry

log = logging.getLogger(__name__)

DEAD_FIELD_PREVIEW_BYTES = 4096
"""Original fields longer than this are cut to this many bytes in a dead letter (and listed
in its ``truncated`` field), so a 10 MB garbage field never gets copied around."""

ORIGINAL_PREFIX = "field."
"""Dead letters carry the original entry's fields under this prefix (``field.event``, ...)."""

MAX_DELIVERIES_REASON = "max_deliveries"

ACKS_UNWRITABLE = "acks_unwritable"
"""Reason of the alert raised when a runtime's ack stream refuses the hub's outcomes."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead-letter entry read back (for operator tools and replay)."""

    reason: str
    detail: str
    source_stream: str
    source_id: str
    consumer: str
    dead_at: str
    deliveries: int | None
    truncated: dict[str, int]
    fields: dict[str, bytes]

    @property
    def replayable(self) -> bool:
        """True when the original fields are complete (nothing was truncated)."""
        return not self.truncated


def dead_letter_fields(
    *,
    reason: str,
    detail: str,
    source_stream: str,
    source_id: str,
    consumer: str,
    original: Mapping[str, bytes],
    deliveries: int | None = None,
    keep_up_to: int = DEAD_FIELD_PREVIEW_BYTES,
) -> dict[str, bytes | str]:
    """The fields of a dead letter: why, where from, by whom, and the (bounded) original fields."""
    out: dict[str, bytes | str] = {
        "reason": reason,
        "detail": detail[:1000],
        "source_stream": source_stream,
        "source_id": source_id,
        "consumer": consumer,
        "dead_at": utc_now_iso(),
    }
    if deliveries is not None:
        out["deliveries"] = str(deliveries)
    truncated: list[str] = []
    for name, value in original.items():
        # Field names are attacker-chosen too: bound them like the values.
        label = name[:200]
        if len(value) > keep_up_to:
            truncated.append(f"{label}:{len(value)}")
            value = value[:keep_up_to]
        out[ORIGINAL_PREFIX + label] = value
    if truncated:
        out["truncated"] = ",".join(truncated)
    return out


def parse_dead_letter(fields: Mapping[str, bytes]) -> DeadLetter:
    """Read a dead-letter entry's fields (``decode_fields`` output) back."""

    def text(name: str) -> str:
        return fields.get(name, b"").decode("utf-8", "replace")

    deliveries = _count(text("deliveries"))
    return DeadLetter(
        reason=text("reason"),
        detail=text("detail"),
        source_stream=text("source_stream"),
        source_id=text("source_id"),
        consumer=text("consumer"),
        dead_at=text("dead_at"),
        deliveries=deliveries,
        truncated=_truncated_sizes(text("truncated")),
        fields={
            name[len(ORIGINAL_PREFIX) :]: value
            for name, value in fields.items()
            if name.startswith(ORIGINAL_PREFIX)
        },
    )


def _count(text: str) -> int | None:
    # str.isdigit() also accepts '²' and other digits int() refuses: ASCII only.
    return int(text) if text.isascii() and text.isdigit() else None


def _truncated_sizes(text: str) -> dict[str, int]:
    """The ``name:size,...`` list of a letter's ``truncated`` field, whatever its names hold.

    A field name may itself hold ',' and ':', so pieces are joined back until one
    ends in ``:<size>``; text that never does is kept under size -1.
    """
    sizes: dict[str, int] = {}
    pieces: list[str] = []
    for piece in text.split(",") if text else []:
        pieces.append(piece)
        name, colon, size = ",".join(pieces).rpartition(":")
        if colon and (count := _count(size)) is not None:
            sizes[name] = count
            pieces = []
    if pieces:
        sizes[",".join(pieces)] = -1
    return sizes


def rejected_outcome(fields: Mapping[str, bytes], reason: str) -> tuple[str, OutcomeRecord] | None:
    """``(runtime_id, outcome)`` telling a runtime its entry was refused, when the entry says whose.

    Only for an entry that authenticated as that runtime's (the caller holds the key its
    signature verified under), and only for its signed content: the outcome carries the
    hash of the bytes the hub received, and that must be the ``content_hash`` the runtime
    signed, so a relay applies it to the outbox row whose own bytes those are and to no
    other. Returns None when the entry does not name a runtime, a key and event bytes, or
    when its bytes are not its signed hash's.
    """
    if entry_kind(fields) != KIND_EVENT or "event" not in fields:
        return None
    try:
        runtime_id = validate_name(fields["runtime_id"].decode("utf-8"), "runtime id")
        project_id = validate_name(fields["project_id"].decode("utf-8"), "project id")
        run_id = validate_name(fields["run_id"].decode("utf-8"), "run id")
        sequence = int(fields["sequence"].decode("ascii"))
        signed_hash = fields["content_hash"].decode("ascii")
    except (KeyError, UnicodeDecodeError, ValueError, ConfigError):
        return None
    received = content_hash(fields["event"])
    if sequence < 1 or received != signed_hash:
        return None
    return runtime_id, OutcomeRecord(
        project_id=project_id,
        run_id=run_id,
        sequence=sequence,
        outcome=Outcome.REJECTED,
        content_hash=received,
        reason=reason,
    )


def alert_fields(record: OutcomeRecord, runtime_id: str, detected_at: str) -> dict[str, str]:
    """An alert-stream entry for a conflict: the key, both hashes, never the bytes."""
    return {
        "reason": record.reason or "",
        "project_id": record.project_id,
        "run_id": record.run_id,
        "sequence": str(record.sequence),
        "runtime_id": runtime_id,
        "existing_hash": record.existing_hash or "",
        "offered_hash": record.content_hash,
        "detected_at": detected_at,
    }


def security_alert(
    hub_project: str, fields: Mapping[str, bytes], reason: SecurityReason, detail: str
) -> SecurityAlert:
    """The alert about an entry that did not authenticate: its claims, shown safely, and a hash."""
    sequence = _count(_claimed(fields, "sequence"))
    return SecurityAlert(
        reason=reason,
        hub_project=hub_project,
        runtime_id=_claimed(fields, "runtime_id"),
        project_id=_claimed(fields, "project_id"),
        run_id=_claimed(fields, "run_id"),
        sequence=sequence if sequence is not None and sequence < 2**63 else 0,
        offered_hash=content_hash(fields.get("event", b"")),
        detail=detail[:1000],
    )


def _claimed(fields: Mapping[str, bytes], name: str) -> str:
    """What an unauthenticated entry claims in ``name``: bounded, control characters escaped."""
    return printable(fields.get(name, b"")[:200].decode("utf-8", "replace"))


def security_alert_fields(alert: SecurityAlert, detected_at: str) -> dict[str, str]:
    """An alert-stream entry for a refused entry: the same fields as a conflict's, and why."""
    return {
        "reason": alert.reason.value,
        "project_id": alert.project_id,
        "run_id": alert.run_id,
        "sequence": str(alert.sequence),
        "runtime_id": alert.runtime_id,
        "existing_hash": "",
        "offered_hash": alert.offered_hash,
        "detail": alert.detail,
        "detected_at": detected_at,
    }


def signed_outcomes_entry_fields(
    hub_id: str,
    hub_project: str,
    runtime_id: str,
    records: Sequence[OutcomeRecord],
    key: RuntimeKey,
) -> dict[str, str]:
    """One outcomes entry for ``runtime_id``, naming this hub and signed with ``key``."""
    fields = outcomes_entry_fields(hub_project, records)
    fields[HUB_ID_FIELD] = hub_id
    fields[SIGNATURE_FIELD] = sign_outcomes_entry(key, fields, runtime_id=runtime_id)
    return fields


AnswerTo = tuple[str, str, RuntimeKey]
"""Where an outcome goes: ``(hub project, runtime, key)``, the key its entry was signed with."""


@dataclass
class Publication:
    """Collects what one batch sends back, then sends it: publish first, XACK after."""

    consumer: str
    hub_id: str
    dead_maxlen: int
    alerts_maxlen: int
    acks_maxlen: int = 10_000
    """Approximate cap of each ack stream: an entry holds one batch's outcomes for one runtime."""
    dead_letters: list[tuple[str, dict[str, bytes | str]]] = field(default_factory=list)
    outcomes: dict[AnswerTo, list[OutcomeRecord]] = field(default_factory=lambda: defaultdict(list))
    alerts: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    security_alerts: list[SecurityAlert] = field(default_factory=list)
    """Refused entries, for the hub store (the worker keeps them before ``send``)."""
    acks: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    mark: int | None = None
    """The store's commit counter after this batch's ingest, to raise ``hubsync:hub:mark`` to."""

    def dead(
        self,
        stream: str,
        entry_id: str,
        fields: Mapping[str, bytes],
        reason: str,
        detail: str,
        deliveries: int | None = None,
        key: RuntimeKey | None = None,
    ) -> None:
        """Dead-letter an entry of ``stream``; tell its runtime only when it authenticated
        (``key``: the key its signature verified under)."""
        hub_project = keys.hub_project_of(stream)
        # An over-delivered entry may be perfectly valid: keep it whole (its
        # fields passed the size limit on a first delivery or it would have
        # died then) so it can be replayed.
        keep = 512 * 1024 if reason == MAX_DELIVERIES_REASON else DEAD_FIELD_PREVIEW_BYTES
        letter = dead_letter_fields(
            reason=reason,
            detail=detail,
            source_stream=stream,
            source_id=entry_id,
            consumer=self.consumer,
            original=fields,
            deliveries=deliveries,
            keep_up_to=keep,
        )
        self.dead_letters.append((keys.dead_stream(hub_project), letter))
        if key is not None and reason != MAX_DELIVERIES_REASON:
            # Over-delivery is usually the hub's own trouble: let the relay resend
            # (dedupe makes that safe) instead of giving the event up.
            rejected = rejected_outcome(fields, reason)
            if rejected is not None:
                self.outcome(hub_project, *rejected, key)
        self.ack(stream, entry_id)

    def refused(
        self,
        stream: str,
        entry_id: str,
        fields: Mapping[str, bytes],
        reason: SecurityReason,
        detail: str,
        key: RuntimeKey | None = None,
    ) -> None:
        """Dead-letter a refused entry and raise a security alert about it.

        Its runtime (whoever it claims to be) is told nothing, unless ``key`` says the
        entry is its signed content (``rejected``, as ``dead`` does).
        """
        hub_project = keys.hub_project_of(stream)
        alert = security_alert(hub_project, fields, reason, detail)
        self.security_alerts.append(alert)
        self.alerts.append(
            (keys.alerts_stream(hub_project), security_alert_fields(alert, utc_now_iso()))
        )
        self.dead(stream, entry_id, fields, reason.value, detail, key=key)

    def outcome(
        self, hub_project: str, runtime_id: str, record: OutcomeRecord, key: RuntimeKey
    ) -> None:
        """Queue an outcome for the runtime's acks stream, to be signed with ``key`` (and an
        alert for a conflict)."""
        self.outcomes[(hub_project, runtime_id, key)].append(record)
        if record.outcome is Outcome.CONFLICT:
            self._conflict_alert(hub_project, runtime_id, record)

    def outcomes_to(self, answer_to: Sequence[AnswerTo], records: Sequence[OutcomeRecord]) -> None:
        """``outcome`` for each record in turn, to the ``(hub project, runtime, key)`` beside it
        (a batch's ingest outcomes: one call, not one per event)."""
        outcomes = self.outcomes
        for to, record in zip(answer_to, records, strict=True):
            outcomes[to].append(record)
            if record.outcome is Outcome.CONFLICT:
                self._conflict_alert(to[0], to[1], record)

    def _conflict_alert(self, hub_project: str, runtime_id: str, record: OutcomeRecord) -> None:
        alert = alert_fields(record, runtime_id, utc_now_iso())
        self.alerts.append((keys.alerts_stream(hub_project), alert))

    def ack(self, stream: str, entry_id: str) -> None:
        """Queue the XACK of one entry (sent after everything else)."""
        self.acks[stream].append(entry_id)

    def ack_many(self, stream: str, entry_ids: Sequence[str]) -> None:
        """Queue the XACK of these entries of ``stream`` (sent after everything else)."""
        if entry_ids:
            self.acks[stream].extend(entry_ids)

    def send(self, client: RedisClient) -> None:
        """Raise the mark, publish dead letters, outcomes and alerts in one pipeline, then XACK
        in another."""
        if self.dead_letters or self.outcomes or self.alerts or self.mark is not None:
            pipe = client.pipeline(transaction=False)
            written: list[tuple[str, str]] = []  # (kind, stream) of each XADD, in order
            if self.mark is not None:
                # First: no runtime hears of a commit the namespace has not seen.
                pipe.zadd(keys.HUB_MARK, {self.hub_id: self.mark}, gt=True)
            for stream, letter in self.dead_letters:
                pipe.xadd(stream, letter, maxlen=self.dead_maxlen, approximate=True)  # type: ignore[arg-type]
                written.append(("dead", stream))
            for (hub_project, runtime_id, key), records in self.outcomes.items():
                # Capped: a relay that stopped reading must not grow its stream for
                # ever. An outcome trimmed before its relay read it is made good by
                # the relay's resend, which the hub answers ``duplicate``.
                fields = signed_outcomes_entry_fields(
                    self.hub_id, hub_project, runtime_id, records, key
                )
                acks = keys.acks_stream(hub_project, runtime_id)
                pipe.xadd(acks, fields, maxlen=self.acks_maxlen, approximate=True)  # type: ignore[arg-type]
                written.append(("acks", acks))
            for stream, alert in self.alerts:
                pipe.xadd(stream, alert, maxlen=self.alerts_maxlen, approximate=True)  # type: ignore[arg-type]
                written.append(("alerts", stream))
            replies = pipe.execute(raise_on_error=False)
            if self.mark is not None:
                marked, *replies = replies
                if isinstance(marked, Exception):
                    raise marked  # the namespace's mark, not one stream's: the batch fails
            _report_refusals(client, written, replies, self.alerts_maxlen)
        if self.acks:
            pipe = client.pipeline(transaction=False)
            acked = list(self.acks.items())
            for stream, ids in acked:
                pipe.xack(stream, keys.CONSUMER_GROUP, *ids)
            replies = pipe.execute(raise_on_error=False)
            _report_refusals(client, [("events", s) for s, _ in acked], replies, None)

    @property
    def dead_count(self) -> int:
        """How many entries this batch dead-lettered."""
        return len(self.dead_letters)


def _report_refusals(
    client: RedisClient,
    written: Sequence[tuple[str, str]],
    replies: Sequence[object],
    alerts_maxlen: int | None,
) -> None:
    """Log and count each command Redis refused (once per stream); for a refused ack stream,
    raise an alert (``alerts_maxlen`` set) on its hub project's alert stream."""
    refused: dict[tuple[str, str], Exception] = {}
    for where, reply in zip(written, replies, strict=True):
        if isinstance(reply, Exception):
            if not key_refused(reply):
                raise reply  # not the key's trouble (an outage): the batch stays pending
            refused.setdefault(where, reply)
    for (kind, stream), exc in refused.items():
        hub_project = keys.hub_project_of(stream)
        detail = printable(str(exc)[:200])
        metrics.STREAM_FAILURES.labels(kind, hub_project).inc()
        log.error(
            "%s refused the hub's %s entry (%s); the rest of the batch goes on",
            stream,
            kind,
            detail,
        )
        if kind == "acks" and alerts_maxlen is not None:
            alert: Any = {
                "reason": ACKS_UNWRITABLE,
                "stream": stream,
                "runtime_id": keys.runtime_of(stream) or "",
                "detail": detail,
                "detected_at": utc_now_iso(),
            }
            try:
                client.xadd(
                    keys.alerts_stream(hub_project), alert, maxlen=alerts_maxlen, approximate=True
                )
            except redis.ResponseError as alert_exc:
                if not key_refused(alert_exc):
                    raise
                metrics.STREAM_FAILURES.labels("alerts", hub_project).inc()
