"""The sync event: what crosses from a runtime to the hub.

Schema ``hubsync.sync-event.v1``. A sync event is built once, on the runtime,
inside ``append_event``'s transaction; its canonical bytes are what the outbox,
the stream and the hub store hold, and its content hash is the SHA-256 of those
exact bytes. The hub never re-serialises: it verifies the bytes it received.
"""

from __future__ import annotations

import json
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
from hubsync.core.names import EventType, Name

SYNC_EVENT_SCHEMA = "hubsync.sync-event.v1"

MAX_EVENT_BYTES = 256 * 1024
"""Largest canonical sync event, in bytes. Larger events are refused at append
time on the runtime and dead-lettered at the hub: one event must never be able
to stall a stream or bloat a batch."""


MAX_SEQUENCE = 2**62
"""Largest sequence number an event may carry."""


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
    sequence: int = Field(ge=1, le=MAX_SEQUENCE)
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

    ``of`` takes them from a validated model; the consumer's fast path
    (``consumers.stream.fast_event_check.prove_sync_event``) builds one per event it
    proves, with the values the ``SyncEvent`` of the same bytes holds
    (``model()`` builds that).
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
