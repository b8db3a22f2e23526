"""The consumer's fast path for an event entry, fenced beside the reference it must equal.

The reference is plain code: ``RuntimeAuthenticator.event`` (who signed the entry,
``consumers.stream.authentication``) and ``hubsync.core.entries.parse_event_entry`` (is it valid: the
pydantic model ``hubsync.core.wire.parse_sync_event`` judges its bytes). Nearly every entry a
hub reads is a genuine one, and the model costs more than every other check together, so
this module proves such an entry without it. Every trick the hub's per-event path plays
lives here and nowhere else: the named tuples built with ``tuple.__new__``, the module-wide
cache of id sets already checked, fields read straight off redis-py's mapping.

The guarantee: each function here accepts only what its reference accepts, with the same
values, and says nothing (None) or defers to the reference for everything else, so the
verdict and dead-letter reason of any entry are the reference's own.

* ``prove_sync_event``: the event's fields when its bytes are provably what
  ``parse_sync_event`` accepts (orjson parse, canonical bytes, each field by the model's
  own rule); None otherwise.
* ``prove_event_entry``: ``parse_event_entry``'s entry from the ``event``, ``content_hash``
  and flat fields when they can be proven valid at once; None otherwise.
* ``check_event_entry``: ``parse_event_entry``'s verdict (an entry or its ``WireError``):
  the proof above, else the reference itself. The consumer's general path runs it.
* ``FastEventCheck.prove``: an entry as redis-py read it (bytes names and values), exactly
  an event entry's fields (with or without a ``traceparent``, which must be exactly a W3C
  one), its signature verified first under the runtime's cached keys,
  then proven as above; None for anything else (another kind or field set, an oversized
  field, a runtime id not yet seen, a rotation's grace, a signature, hash or flat field
  that disagrees, another hub project's event), which the general path then judges, with
  its reason.
* ``FastEventCheck.prove_pairs``: the same for an entry whose fields are the raw reply's
  names and values alternating (``consumers.stream.fast_reads``): read by position when
  they are in the relay's order, else ``prove`` of the mapping the reference reader makes.

``tests/consumers/test_fast_event_check_differential.py`` runs each against its reference over
generated entries, valid, re-encoded and broken.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

import orjson

from consumers.stream.authentication import RuntimeAuthenticator
from consumers.stream.fast_reads import fields_of
from hubsync.core.canonical import content_hash
from hubsync.core.entries import (
    EVENT_ENTRY_FIELDS,
    EVENT_FIELDS,
    MAX_FIELD_BYTES,
    TRACED_EVENT_ENTRY_FIELDS,
    EventEntry,
    flat_fields_of,
    flat_fields_read,
    parse_event_entry,
)
from hubsync.core.names import EVENT_TYPE_PATTERN, MAX_NAME_LENGTH, NAME_PATTERN
from hubsync.core.signing import (
    EVENT_KIND,
    EVENT_OPTIONAL_SIGNED_FIELD,
    SIGNATURE_FIELD,
    RuntimeKey,
    event_signed_body,
    verify_event_body,
)
from hubsync.core.tracing import is_traceparent
from hubsync.core.wire import MAX_EVENT_BYTES, MAX_SEQUENCE, SYNC_EVENT_SCHEMA, CheckedEvent

_KIND_EVENT = EVENT_KIND
_EVENT_ENTRY_FIELD_COUNT = len(EVENT_ENTRY_FIELDS)
_TRACED_FIELD_COUNT = len(TRACED_EVENT_ENTRY_FIELDS)
_TRACEPARENT = EVENT_OPTIONAL_SIGNED_FIELD.encode()
_RELAY_ORDER = [*(name.encode() for name in EVENT_FIELDS), SIGNATURE_FIELD.encode()]
"""An event entry's names in the order the relay writes them: the signed fields, ``event``,
``sig`` (a list: what a slice of the raw reply's list compares equal to)."""
_TRACED_RELAY_ORDER = [*_RELAY_ORDER[:-1], _TRACEPARENT, _RELAY_ORDER[-1]]
_EntryValues = tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]
"""An event entry's values in ``_RELAY_ORDER``'s order (``traceparent`` apart)."""

_QUICK_MAX_BRACKETS = 128
"""Bytes with more ``{`` and ``[`` than this (inside strings too) go to the model: they could
nest deeper than pydantic's parser allows (about 200 levels), which orjson would accept."""

_CANONICAL_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
_SYNC_EVENT_FIELDS = 9

_new_tuple = tuple.__new__
"""A named tuple without its Python-level constructor (one per event)."""

_valid_ids: dict[tuple[object, ...], None] = {}
"""Id sets (``project_id``, ``hub_project``, ``home_runtime_id``, ``run_id``, ``event_type``)
that passed the model's rules, as exact ``str`` values (a tuple of other types, or of str
subclasses, never compares equal to one of these: the rules ran on ``str`` only)."""
_MAX_VALID_IDS = 4096


def prove_sync_event(data: bytes) -> CheckedEvent | None:
    """The event's fields when ``data`` is provably what ``parse_sync_event`` accepts; else None.

    The bytes parse (orjson), render back to themselves with sorted keys (what the model's
    canonical check accepts), hold exactly the nine fields, and each field passes the
    model's own rule (the same patterns, bounds and timestamp parser). The hash is the
    caller's to check, and a None is no verdict: anything this cannot vouch for (a refusal,
    a float or timestamp spelled another way, deep nesting) is the model's to judge.
    """
    if len(data) > MAX_EVENT_BYTES or data.count(b"{") + data.count(b"[") > _QUICK_MAX_BRACKETS:
        return None
    try:
        body = orjson.loads(data)
        if type(body) is not dict or len(body) != _SYNC_EVENT_FIELDS:
            return None
        if orjson.dumps(body, option=orjson.OPT_SORT_KEYS) != data:
            return None
        schema = body["schema"]
        ids = (
            body["project_id"],
            body["hub_project"],
            body["home_runtime_id"],
            body["run_id"],
            body["event_type"],
        )
        sequence = body["sequence"]
        occurred = body["occurred_at"]
        payload = body["data"]
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, KeyError):
        return None  # nine fields, but not these nine: the model says which
    if schema != SYNC_EVENT_SCHEMA or type(payload) is not dict:
        return None
    if type(sequence) is not int or not 1 <= sequence <= MAX_SEQUENCE:
        return None
    if ids not in _valid_ids:  # a run's events share their ids: each set is checked once
        if not _ids_are_valid(ids):
            return None
        if len(_valid_ids) >= _MAX_VALID_IDS:
            _valid_ids.clear()
        _valid_ids[ids] = None
    # The canonical spelling (``format_timestamp``'s) digit for digit, in UTC (``Z``): the
    # model's parser reads exactly these fields back, or refuses them (month 13, ...). Hour
    # 24, which some parsers take for the next midnight, is left to the model.
    if (
        type(occurred) is not str
        or not _CANONICAL_TIME.fullmatch(occurred)
        or occurred[11:13] == "24"
    ):
        return None
    try:
        moment = datetime.fromisoformat(occurred)
    except ValueError:
        return None
    project_id, hub_project, home_runtime_id, run_id, event_type = ids
    return _new_tuple(
        CheckedEvent,
        (project_id, hub_project, home_runtime_id, run_id, sequence, event_type, moment, payload),
    )


def _ids_are_valid(ids: tuple[object, ...]) -> bool:
    *names, event_type = ids
    for name in names:
        if type(name) is not str or len(name) > MAX_NAME_LENGTH or not NAME_PATTERN.fullmatch(name):
            return False
    return type(event_type) is str and EVENT_TYPE_PATTERN.fullmatch(event_type) is not None


def prove_event_entry(
    data: bytes, raw_digest: bytes, flat: tuple[bytes, bytes, bytes, bytes, bytes, bytes]
) -> EventEntry | None:
    """``parse_event_entry``'s entry when its fields can be proven valid at once, else None.

    ``data``, ``raw_digest`` and ``flat`` are the entry's ``event``, ``content_hash`` and
    flat fields (in ``flat_fields_of``'s order: project_id, hub_project, run_id, sequence,
    event_type, runtime_id) exactly as read, every value ``bytes``; the caller has seen
    that no field of the entry exceeds ``MAX_FIELD_BYTES``. The same checks in full: the
    bytes hash to the digest, ``prove_sync_event`` vouches for them, and every flat field
    is the bytes' own. None is no verdict (a refusal, or anything the proof leaves to the
    model): ``parse_event_entry`` then judges the entry, with its reason.
    """
    digest = content_hash(data)
    if digest.encode("ascii") != raw_digest:
        return None
    event = prove_sync_event(data)
    if event is None:
        return None
    if flat != flat_fields_of(event):
        return None
    # flat[5] is runtime_id's UTF-8: the str parse_event_entry decodes from it
    return _new_tuple(EventEntry, (event, data, digest, event.home_runtime_id))


def check_event_entry(fields: Mapping[str, bytes]) -> EventEntry:
    """``parse_event_entry(fields)``: the same entry, or the same ``WireError``, proven
    without the model when ``prove_event_entry`` can (the consumer's general path)."""
    try:
        data = fields["event"]
        digest = fields["content_hash"]
        flat = flat_fields_read(fields)
    except KeyError:
        return parse_event_entry(fields)  # missing_field
    if max(map(len, fields.values())) <= MAX_FIELD_BYTES:
        entry = prove_event_entry(data, digest, flat)
        if entry is not None:
            return entry
    return parse_event_entry(fields)


class FastEventCheck:
    """Proves an event entry valid and signed from its raw fields; None when it cannot."""

    def __init__(self, authenticator: RuntimeAuthenticator) -> None:
        self.authenticator = authenticator

    def prove(
        self, raw: Mapping[bytes, bytes], hub_project: str, sized: bool = False
    ) -> tuple[EventEntry, RuntimeKey] | None:
        """The entry and the key that signed it, or None (take the general path).

        ``sized``: the caller measured the whole entry (names and values) at no more
        than ``MAX_FIELD_BYTES``, so no field can be over the limit.
        """
        try:
            # exactly the ten fields of a signed event entry, each read below, or eleven
            # with a traceparent that is exactly a W3C one
            traceparent = None
            if len(raw) != _EVENT_ENTRY_FIELD_COUNT:
                if len(raw) != _TRACED_FIELD_COUNT:
                    return None
                traceparent = raw[_TRACEPARENT]
            values: _EntryValues = (
                raw[b"kind"],
                raw[b"project_id"],
                raw[b"hub_project"],
                raw[b"run_id"],
                raw[b"sequence"],
                raw[b"event_type"],
                raw[b"runtime_id"],
                raw[b"content_hash"],
                raw[b"event"],
                raw[b"sig"],
            )
            if not sized and max(map(len, raw.values())) > MAX_FIELD_BYTES:
                return None
        except (KeyError, TypeError, ValueError):
            return None  # not bytes names, a missing field, a value that is not bytes
        return self._proven(values, traceparent, hub_project)

    def prove_pairs(
        self, pairs: list[bytes], hub_project: str, sized: bool = False
    ) -> tuple[EventEntry, RuntimeKey] | None:
        """``prove`` of the entry whose fields are ``pairs``, names and values alternating
        as the raw XREADGROUP reply lists them (``consumers.stream.fast_reads``).

        An entry in the relay's own order (``producers.relay.sender.EntryBuilder.pairs``)
        is read by position, with no mapping made; one in any other order gets ``prove``
        of the mapping redis-py would have made of it (the last value of a repeated name).
        """
        try:
            names = pairs[0::2]
            if names == _RELAY_ORDER:
                kind, project_id, claimed, run_id, sequence, event_type, runtime_id, digest, data, sig = pairs[1::2]  # fmt: skip
                traceparent = None
            elif names == _TRACED_RELAY_ORDER:
                kind, project_id, claimed, run_id, sequence, event_type, runtime_id, digest, data, traceparent, sig = pairs[1::2]  # fmt: skip
            else:
                return self.prove(fields_of(pairs), hub_project, sized)
            # names here are short: the longest value is the longest of the pairs
            if not sized and max(map(len, pairs)) > MAX_FIELD_BYTES:
                return None
        except (TypeError, ValueError):
            return None  # a value that is not bytes, an odd count
        values = (kind, project_id, claimed, run_id, sequence, event_type, runtime_id, digest)
        return self._proven((*values, data, sig), traceparent, hub_project)

    def _proven(
        self, values: _EntryValues, traceparent: bytes | None, hub_project: str
    ) -> tuple[EventEntry, RuntimeKey] | None:
        """The checks of ``prove`` on an entry's values (``_RELAY_ORDER``'s, but its
        ``traceparent``), once its field set and sizes are known right."""
        kind, project_id, claimed, run_id, sequence, event_type, runtime_id, digest = values[:8]
        data, signature = values[8:]
        try:
            if kind != _KIND_EVENT:
                return None
            if traceparent is not None and not is_traceparent(traceparent):
                return None
            # the signature first: nothing of an entry is read before it authenticates
            keys = self.authenticator.cached_keys(hub_project, runtime_id)
            if keys is None:
                return None
            body = event_signed_body(
                _KIND_EVENT,
                project_id,
                claimed,
                run_id,
                sequence,
                event_type,
                runtime_id,
                digest,
                traceparent,
            )
            key = verify_event_body(keys, body, signature)
            if key is None:
                return None
            flat = (project_id, claimed, run_id, sequence, event_type, runtime_id)
            entry = prove_event_entry(data, digest, flat)
        except (KeyError, TypeError, ValueError):
            return None  # a value that is not bytes
        if entry is None or entry.event.hub_project != hub_project:
            return None
        return entry, key
