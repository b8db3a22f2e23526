"""The sync event: what crosses from a runtime to the hub.

Schema ``hubsync.sync-event.v1``. A sync event is built once, on the runtime,
inside ``append_event``'s transaction; its canonical bytes are what the outbox,
the stream and the hub store hold, and its content hash is the SHA-256 of those
exact bytes. The hub never re-serialises: it verifies the bytes it received.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
)

from hubsync.core.canonical import canonical_json, content_hash, verify_content_hash
from hubsync.core.clock import format_timestamp
from hubsync.core.errors import WireError
from hubsync.core.names import EVENT_TYPE_PATTERN, MAX_NAME_LENGTH, NAME_PATTERN, EventType, Name

SYNC_EVENT_SCHEMA = "hubsync.sync-event.v1"

MAX_EVENT_BYTES = 256 * 1024
"""Largest canonical sync event, in bytes. Larger events are refused at append
time on the runtime and dead-lettered at the hub: one event must never be able
to stall a stream or bloat a batch."""


_MAX_SEQUENCE = 2**62


class SyncEvent(BaseModel):
    """One redacted, allowlisted run event as the hub sees it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)

    schema_: Literal["hubsync.sync-event.v1"] = Field(
        default="hubsync.sync-event.v1", alias="schema"
    )
    project_id: Name
    hub_project: Name
    home_runtime_id: Name
    run_id: Name
    sequence: int = Field(ge=1, le=_MAX_SEQUENCE)
    event_type: EventType
    occurred_at: datetime
    data: dict[str, JsonValue]

    @field_validator("occurred_at", mode="before")
    @classmethod
    def _occurred_at_is_utc_text_or_datetime(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                raise ValueError("occurred_at must be an ISO-8601 UTC timestamp") from None
        return value

    @field_validator("occurred_at")
    @classmethod
    def _occurred_at_must_be_utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() != UTC.utcoffset(None):
            raise ValueError("occurred_at must be in UTC (suffix Z or +00:00)")
        return value

    def to_wire(self) -> dict[str, Any]:
        """The plain JSON object that ``canonical_bytes`` serialises."""
        return {
            "schema": SYNC_EVENT_SCHEMA,
            "project_id": self.project_id,
            "hub_project": self.hub_project,
            "home_runtime_id": self.home_runtime_id,
            "run_id": self.run_id,
            "sequence": self.sequence,
            "event_type": self.event_type,
            "occurred_at": format_timestamp(self.occurred_at),
            "data": self.data,
        }

    def canonical_bytes(self) -> bytes:
        """Canonical JSON of the event; raises ``WireError('too_large')`` past the limit."""
        data = canonical_json(self.to_wire())
        if len(data) > MAX_EVENT_BYTES:
            raise WireError(
                "too_large",
                f"sync event is {len(data)} bytes; the limit is {MAX_EVENT_BYTES} "
                "(narrow the event type's allowlist or shorten its payload)",
            )
        return data

    def encoded(self) -> tuple[bytes, str]:
        """The canonical bytes and their content hash."""
        data = self.canonical_bytes()
        return data, content_hash(data)


class CheckedEvent(NamedTuple):
    """The fields of a sync event the hub checked, without the pydantic model.

    ``check_sync_event`` builds one per event the hub receives; its values are
    those the ``SyncEvent`` of the same bytes holds (``model()`` builds that).
    """

    project_id: str
    hub_project: str
    home_runtime_id: str
    run_id: str
    sequence: int
    event_type: str
    occurred_at: datetime
    data: dict[str, JsonValue]

    @classmethod
    def of(cls, event: SyncEvent) -> CheckedEvent:
        """The fields of a validated model."""
        return cls(
            event.project_id,
            event.hub_project,
            event.home_runtime_id,
            event.run_id,
            event.sequence,
            event.event_type,
            event.occurred_at,
            event.data,
        )

    def model(self) -> SyncEvent:
        """The authoritative model of these fields (validated again)."""
        return SyncEvent.model_validate(self._asdict())


def parse_sync_event(data: bytes, expected_hash: str | None = None) -> SyncEvent:
    """Validate wire bytes into a ``SyncEvent``.

    Checks, in order: size, hash (when ``expected_hash`` is given, over the raw
    bytes), JSON, schema, field types, and that the bytes are the event's
    canonical form (so the hub stores and compares one spelling per event).
    Each failure raises ``WireError`` whose ``reason`` names the problem:
    ``too_large``, ``hash_mismatch``, ``bad_json``, ``unknown_schema``,
    ``invalid_event`` or ``not_canonical``.
    """
    if len(data) > MAX_EVENT_BYTES:
        raise WireError("too_large", f"event is {len(data)} bytes; the limit is {MAX_EVENT_BYTES}")
    if expected_hash is not None:
        verify_content_hash(data, expected_hash)
    try:
        event = SyncEvent.model_validate_json(data)
    except ValidationError as exc:
        raise _wire_error_from(exc) from None
    _require_canonical(data, event)
    return event


def check_sync_event(
    data: bytes, expected_hash: str | None = None, *, hash_checked: bool = False
) -> CheckedEvent:
    """``parse_sync_event``'s verdict on ``data``, without building the model when it accepts.

    The hub checks every event it receives, and the pydantic model costs more
    than every other check together, so the common case is proven here: the
    bytes parse (orjson), render back to themselves with sorted keys (what
    ``_require_canonical`` accepts as canonical), hold exactly the nine fields,
    and each field passes the model's own rule (the same patterns, bounds and
    timestamp parser). Anything this quick proof cannot vouch for (a refusal,
    a float or timestamp spelled another way, deep nesting) goes to
    ``parse_sync_event`` itself, whose ``WireError`` (or model) is the answer.
    So this accepts exactly what ``parse_sync_event`` accepts, with the same
    values, and refuses the rest with the same reason and detail
    (``tests/consumers/test_event_check_differential.py`` compares the two).
    ``hash_checked`` says the caller has just seen ``data`` hash to ``expected_hash``.
    """
    if hash_checked or expected_hash is None or content_hash(data) == expected_hash:
        checked = prove_sync_event(data)
        if checked is not None:
            return checked
    return CheckedEvent.of(parse_sync_event(data, expected_hash))


_QUICK_MAX_BRACKETS = 128
"""Bytes with more ``{`` and ``[`` than this (inside strings too) go to the model: they could
nest deeper than pydantic's parser allows (about 200 levels), which orjson would accept."""

_CANONICAL_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
_SYNC_EVENT_FIELDS = 9


def prove_sync_event(data: bytes) -> CheckedEvent | None:
    """The event's fields when ``data`` is provably what ``parse_sync_event`` accepts; else None.

    The quick proof of ``check_sync_event`` (size, JSON, canonical bytes, fields), and
    nothing else: the hash is the caller's to check, and a None is no verdict (ask
    ``check_sync_event``, which asks the model).
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
    if type(sequence) is not int or not 1 <= sequence <= _MAX_SEQUENCE:
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
    # tuple.__new__: the named tuple without its Python-level constructor (one per event)
    project_id, hub_project, home_runtime_id, run_id, event_type = ids
    return _new_tuple(
        CheckedEvent,
        (project_id, hub_project, home_runtime_id, run_id, sequence, event_type, moment, payload),
    )


_new_tuple = tuple.__new__


_valid_ids: dict[tuple[object, ...], None] = {}
"""Id sets (``project_id``, ``hub_project``, ``home_runtime_id``, ``run_id``, ``event_type``)
that passed the model's rules, as exact ``str`` values (a tuple of other types, or of str
subclasses, never compares equal to one of these: the rules ran on ``str`` only)."""
_MAX_VALID_IDS = 4096


def _ids_are_valid(ids: tuple[object, ...]) -> bool:
    *names, event_type = ids
    for name in names:
        if type(name) is not str or len(name) > MAX_NAME_LENGTH or not NAME_PATTERN.fullmatch(name):
            return False
    return type(event_type) is str and EVENT_TYPE_PATTERN.fullmatch(event_type) is not None


def _require_canonical(data: bytes, event: SyncEvent) -> None:
    """Refuse bytes that are not the event's one canonical spelling.

    The hub checks every event it receives, so the common case takes a fast
    path: orjson re-renders the parsed bytes with sorted keys, and equal bytes
    are canonical. Only when that differs does the authoritative check run
    (the same ``canonical_json`` the runtime wrote with), so no genuine event is
    ever refused for a difference between the two renderers.
    """
    try:
        body = orjson.loads(data)
        fast = orjson.dumps(body, option=orjson.OPT_SORT_KEYS) == data
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        body, fast = None, False
    if fast and isinstance(body, dict):
        # verbatim round trips keep the timestamp's spelling: check it too
        if "schema" in body and body.get("occurred_at") == format_timestamp(event.occurred_at):
            return
    elif canonical_json(event.to_wire()) == data:
        return
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if isinstance(body, dict) and "schema" not in body:
        raise WireError("unknown_schema", "event has no 'schema' field")
    raise WireError("not_canonical", "event bytes are not in canonical JSON form")


def _wire_error_from(exc: ValidationError) -> WireError:
    errors = exc.errors(include_url=False, include_input=False)
    if bad := [e for e in errors if e["type"] == "json_invalid"]:
        # The parser's own words (a position, or "recursion limit exceeded"), no input.
        why = (bad[0].get("ctx") or {}).get("error")
        return WireError("bad_json", "event is not valid JSON" + (f" ({why})" if why else ""))
    if any(e["loc"] == ("schema",) or "'schema'" in e["msg"] for e in errors):
        return WireError("unknown_schema", f"event schema must be {SYNC_EVENT_SCHEMA!r}")
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'event'}: {e['msg']}" for e in errors[:5]
    )
    return WireError("invalid_event", problems)
