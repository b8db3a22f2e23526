"""Judging a batch's entries: which are valid signed events, which are beats, which are refused.

``EntryJudge.judge`` walks a batch as XREADGROUP returned it. Each event entry
takes the fast path first (``consumers.stream.fast_event_check.FastEventCheck``: valid
and signed, proven on the fields as read); anything that path does not prove
takes the general path, whose verdict and dead-letter reason are the answer:
``decode_fields``, then by kind

* ``event``: ``RuntimeAuthenticator.event`` (a refusal is dead-lettered with its
  ``SecurityReason`` and raises a security alert), then ``check_event_entry``:
  a flat field that disagrees with the signed bytes (``field_mismatch``) is
  refused ``unauthenticated`` likewise; any other ``WireError`` is dead-lettered
  with its reason, and answered ``rejected``: the bytes are the runtime's own;
* then, on either path, a valid event whose ``data`` holds a field its type's
  allowlist does not let cross (``hubsync.core.allowlist.not_allowlisted``) is
  refused ``not_allowlisted``: dead letter, security alert, and ``rejected`` to
  its runtime;
* ``presence``: ``RuntimeAuthenticator.presence``, then ``parse_presence_entry``
  and ``wrong_stream`` likewise; a valid beat is acknowledged at once;
* ``resync_report``: ``RuntimeAuthenticator.resync_report``, then
  ``parse_resync_report`` and ``wrong_stream`` likewise; a valid report is
  acknowledged at once and kept (``HubStore.record_resync_reports``);
* anything else: ``unknown_kind``; and a ``ValueError``, ``TypeError``,
  ``KeyError`` or ``UnicodeError`` while validating: ``invalid_entry``.

Refusals, dead letters and the acks of entries with nothing to ingest go on the
batch's ``Publication``; the valid events, who to answer for each, and the
beats come back in a ``Verdicts`` for the worker to ingest and publish.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from consumers.stream.authentication import Refusal, RuntimeAuthenticator
from consumers.stream.fast_event_check import FastEventCheck, check_event_entry
from consumers.stream.fast_reads import EntryFields, PairsEntry, fields_of
from consumers.stream.publishing import AnswerTo, Publication
from hubsync.core import keys
from hubsync.core.allowlist import not_allowlisted
from hubsync.core.entries import (
    FIELD_MISMATCH,
    KIND_EVENT,
    KIND_PRESENCE,
    MAX_FIELD_BYTES,
    EventEntry,
    PresenceBeat,
    SecurityReason,
    decode_fields,
    entry_kind,
    parse_presence_entry,
)
from hubsync.core.errors import WireError
from hubsync.core.redis_values import RawEntry
from hubsync.core.resync import KIND_RESYNC_REPORT, ResyncReport, parse_resync_report
from hubsync.core.signing import EVENT_OPTIONAL_SIGNED_FIELD, RuntimeKey

log = logging.getLogger(__name__)

StreamBatch = Sequence[tuple[str, Sequence[PairsEntry | RawEntry]]]
"""Entries grouped by the stream they came from, as XREADGROUP returns them: each entry's
fields as the reference reader's mapping or the fast reader's pairs
(``consumers.stream.fast_reads``)."""

_KIND_EVENT = KIND_EVENT.encode()
_KIND_PRESENCE = KIND_PRESENCE.encode()
_KIND_REPORT = KIND_RESYNC_REPORT.encode()
_TRACEPARENT = EVENT_OPTIONAL_SIGNED_FIELD.encode()


@dataclass(slots=True)
class Verdicts:
    """What a batch's entries came to, beside what is already on its publication."""

    valid: list[EventEntry] = field(default_factory=list)
    """The valid events, in batch order: one ``HubStore.ingest`` for them all."""
    answer_to: list[AnswerTo] = field(default_factory=list)
    """(hub project, runtime, key) per valid event: where its outcome goes, signed how."""
    valid_ids: dict[str, list[str]] = field(default_factory=dict)
    """Stream -> ids of its valid events, acknowledged once their outcomes are queued."""
    beats: list[PresenceBeat] = field(default_factory=list)
    reports: list[ResyncReport] = field(default_factory=list)
    """Verified resync progress reports, for the hub store."""
    count: int = 0
    """Entries judged (deleted ones included)."""
    rejected: int = 0
    """Outcomes ``rejected`` queued for dead letters a runtime's key signed."""


class EntryJudge:
    """Judges each entry of a batch: the fast path first, the general path for the rest."""

    def __init__(self, authenticator: RuntimeAuthenticator) -> None:
        self.authenticator = authenticator
        self.fast = FastEventCheck(authenticator)

    def judge(self, batch: StreamBatch, pub: Publication, largest: int | None) -> Verdicts:
        """The verdicts on ``batch``; refusals, dead letters and bare acks go on ``pub``.

        ``largest``: the size of the batch's largest entry (names and values), when measured.
        """
        verdicts = Verdicts(count=sum(len(entries) for _, entries in batch))
        valid = verdicts.valid
        answer_to = verdicts.answer_to
        fast = self.fast
        sized = largest is not None and largest <= MAX_FIELD_BYTES
        for stream, entries in batch:
            project = keys.hub_project_of(stream)
            ids = verdicts.valid_ids.setdefault(stream, [])
            for entry_id, raw in entries:
                if raw is None:  # deleted while pending: nothing left to judge
                    pub.ack(stream, entry_id)
                    continue
                if isinstance(raw, list):  # the fast reader's pairs
                    proven = fast.prove_pairs(raw, project, sized)
                else:
                    proven = fast.prove(raw, project, sized)
                if proven is not None:  # valid and signed, proven on the fields as read
                    entry, key = proven
                    if _outside_allowlist(pub, stream, entry_id, raw, entry, key):
                        continue
                    valid.append(entry)
                    answer_to.append((project, entry.runtime_id, key))
                    ids.append(entry_id)
                    continue
                self._general(verdicts, pub, stream, project, entry_id, fields_of(raw))
        return verdicts

    def _general(
        self,
        verdicts: Verdicts,
        pub: Publication,
        stream: str,
        project: str,
        entry_id: str,
        raw: Mapping[bytes, bytes],
    ) -> None:
        """The general path for one entry: its verdict and dead-letter reason are the answer."""
        fields = decode_fields(raw)
        key: RuntimeKey | Refusal | None = None
        try:
            kind = fields.get("kind", _KIND_EVENT)
            if kind == _KIND_EVENT:
                key = self.authenticator.event(fields, project)
                if isinstance(key, Refusal):
                    _refuse(pub, stream, entry_id, fields, key)
                    return
                try:
                    entry = check_event_entry(fields)
                except WireError as exc:
                    if exc.reason != FIELD_MISMATCH:
                        raise
                    # every flat field is signed: the entry is not what its signer wrote
                    why = Refusal(SecurityReason.UNAUTHENTICATED, exc.detail)
                    _refuse(pub, stream, entry_id, fields, why)
                    return
                if _outside_allowlist(pub, stream, entry_id, raw, entry, key):
                    return
                verdicts.valid.append(entry)
                verdicts.answer_to.append((project, entry.runtime_id, key))
                verdicts.valid_ids[stream].append(entry_id)
            elif kind in (_KIND_PRESENCE, _KIND_REPORT):
                presence = kind == _KIND_PRESENCE
                check = (
                    self.authenticator.presence if presence else self.authenticator.resync_report
                )
                key = check(fields, project)
                if isinstance(key, Refusal):
                    _refuse(pub, stream, entry_id, fields, key)
                    return
                if presence:
                    beat = parse_presence_entry(fields)
                    _same_project(beat.hub_project, project)
                    verdicts.beats.append(beat)
                else:
                    report = parse_resync_report(fields)
                    _same_project(report.hub_project, project)
                    verdicts.reports.append(report)
                pub.ack(stream, entry_id)
            else:
                named = entry_kind(fields)
                raise WireError("unknown_kind", f"entry kind {named[:40]!r} is not known")
        except WireError as exc:
            verdicts.rejected += _dead_letter(
                pub, stream, entry_id, fields, exc.reason, exc.detail, key
            )
        except (ValueError, TypeError, KeyError, UnicodeError) as exc:
            detail = f"{type(exc).__name__} while validating the entry"
            verdicts.rejected += _dead_letter(
                pub, stream, entry_id, fields, "invalid_entry", detail, key
            )


def traceparents_of(batch: StreamBatch, verdicts: Verdicts) -> list[bytes]:
    """The ``traceparent`` of each valid event of ``batch`` that carries one: signed, so
    vouched for by its runtime (refused entries are never linked). Gathered only for a
    recording span, after judging: the per-entry path pays nothing for it."""
    found = []
    for stream, entries in batch:
        valid = set(verdicts.valid_ids.get(stream, ()))
        for entry_id, raw in entries:
            if raw is not None and entry_id in valid:
                value = fields_of(raw).get(_TRACEPARENT)
                if value is not None:
                    found.append(value)
    return found


def _refuse(
    pub: Publication,
    stream: str,
    entry_id: str,
    fields: dict[str, bytes],
    why: Refusal,
    key: RuntimeKey | None = None,
) -> None:
    log.warning(
        "security: refusing entry %s of %s (%s): %s", entry_id, stream, why.reason, why.detail
    )
    pub.refused(stream, entry_id, fields, why.reason, why.detail, key=key)


def _outside_allowlist(
    pub: Publication,
    stream: str,
    entry_id: str,
    raw: EntryFields,
    entry: EventEntry,
    key: RuntimeKey,
) -> bool:
    """Refuse a valid, signed event whose data its type's allowlist does not let cross (a
    security alert, and ``rejected`` to its runtime: the content is its own); whether it was."""
    event = entry.event
    outside = not_allowlisted(event.event_type, event.data)
    if outside is None:
        return False
    detail = f"data field {outside[:80]!r} is not allowlisted for {event.event_type} events"
    why = Refusal(SecurityReason.NOT_ALLOWLISTED, detail)
    _refuse(pub, stream, entry_id, decode_fields(fields_of(raw)), why, key)
    return True


def _dead_letter(
    pub: Publication,
    stream: str,
    entry_id: str,
    fields: dict[str, bytes],
    reason: str,
    detail: str,
    key: RuntimeKey | Refusal | None,
) -> int:
    """Dead-letter one entry; how many ``rejected`` outcomes that queued (0 or 1)."""
    log.warning("dead-lettering entry %s of %s: %s", entry_id, stream, reason)
    before = sum(len(v) for v in pub.outcomes.values())
    signed_by = key if isinstance(key, RuntimeKey) else None
    pub.dead(stream, entry_id, fields, reason, detail, key=signed_by)
    return sum(len(v) for v in pub.outcomes.values()) - before


def _same_project(claimed: str, stream_project: str) -> None:
    if claimed != stream_project:
        raise WireError(
            "wrong_stream",
            f"entry names hub project {claimed!r} but arrived on the stream of {stream_project!r}",
        )
