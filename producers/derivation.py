"""Derivation: which fields of a local run event cross to the hub, and in what bytes.

A per-event-type allowlist decides (the table and its rules are the kernel's,
``hubsync.core.allowlist``, which the hub enforces too). Each entry is a field
name or a dotted path into a nested object (``error.message`` lets
``error.message`` cross but not ``error.stack``); a field named whole crosses
with everything beneath it. An event type the allowlist does not know crosses
with an empty ``data`` object, so a new local event type never leaks by
default. Extend it at runtime with ``Allowlist.extend`` (the hub checks only the
types of the table: one a runtime adds is its own).

Derivation runs on the redacted payload, and the sync event's canonical bytes
and content hash are computed here, once, on the runtime (``hubsync.core.wire``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hubsync.core.allowlist import DEFAULT_ALLOWLIST, Tree, compile_paths, select
from hubsync.core.canonical import canonical_json, content_hash
from hubsync.core.clock import format_timestamp
from hubsync.core.errors import ConfigError, WireError
from hubsync.core.names import validate_event_type, validate_name
from hubsync.core.wire import MAX_EVENT_BYTES, SYNC_EVENT_SCHEMA, SyncEvent, parse_sync_event
from producers.errors import DerivationError, EventTooLargeError, SecretInIdError
from producers.redaction import Redactor


def _check_field_path(path: str) -> str:
    if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
        raise ConfigError(
            f"allowlist field {str(path)[:60]!r} must be a field name or a dotted path "
            "such as 'error.message'"
        )
    return path


class Allowlist:
    """Per-event-type field allowlist; thread-safe to extend while in use."""

    def __init__(self, table: Mapping[str, Iterable[str]] = DEFAULT_ALLOWLIST) -> None:
        self._paths: dict[str, frozenset[str]] = {}
        self._trees: dict[str, Tree] = {}
        self._lock = threading.Lock()
        for event_type, fields in table.items():
            self.extend(event_type, fields)

    def extend(self, event_type: str, fields: Iterable[str]) -> None:
        """Let ``fields`` (names or dotted paths) of ``event_type`` cross from now on."""
        validate_event_type(event_type)
        new = frozenset(_check_field_path(f) for f in fields)
        with self._lock:
            paths = self._paths.get(event_type, frozenset()) | new
            self._paths[event_type] = paths
            self._trees[event_type] = compile_paths(paths)

    def fields(self, event_type: str) -> frozenset[str]:
        """The allowlisted paths of ``event_type`` (empty for an unknown type)."""
        return self._paths.get(event_type, frozenset())

    def event_types(self) -> list[str]:
        """Every event type with an entry, sorted."""
        return sorted(self._paths)

    def select(self, event_type: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The allowlisted part of ``payload`` (shares nested values, does not copy)."""
        tree = self._trees.get(event_type)
        return select(tree, payload) if tree else {}


@dataclass(frozen=True, slots=True)
class StoreIdentity:
    """The ids every sync event of one project store carries."""

    project_id: str
    hub_project: str
    home_runtime_id: str

    def __post_init__(self) -> None:
        validate_name(self.project_id, "project id")
        validate_name(self.hub_project, "hub project")
        validate_name(self.home_runtime_id, "home runtime id")


@dataclass(frozen=True, slots=True)
class PreparedEvent:
    """A local event after redaction and allowlisting, waiting for its sequence number."""

    run_id: str
    event_type: str
    occurred_at: str
    local_json: str
    data: dict[str, Any]


class EventDeriver:
    """Turns local events of one project into sync event bytes (the hot path of append)."""

    def __init__(self, identity: StoreIdentity, allowlist: Allowlist, redactor: Redactor) -> None:
        self.identity = identity
        self.allowlist = allowlist
        self.redactor = redactor
        # Ids repeat across a run's events; validating each once keeps append cheap.
        # A secret registered since an id was checked voids every check made before it.
        self._valid_runs: set[str] = set()
        self._valid_types: set[str] = set()
        self._checked_against = redactor.secret_count

    def prepare(
        self,
        run_id: str,
        event_type: str,
        payload: Mapping[str, Any],
        occurred_at: datetime | str | None = None,
    ) -> PreparedEvent:
        """Validate, redact and allowlist one event; raises ``DerivationError`` on bad input."""
        self._check_ids(run_id, event_type)
        if not isinstance(payload, Mapping):
            raise DerivationError(
                f"the payload of a {event_type} event must be a JSON object, "
                f"not {type(payload).__name__}"
            )
        try:
            redacted, local_json = self.redactor.redact_json(payload)
        except (ValueError, TypeError) as exc:
            raise DerivationError(
                f"the payload of a {event_type} event is not JSON ({exc}); "
                "use only objects, arrays, strings, finite numbers, booleans and null"
            ) from None
        except RecursionError:
            raise DerivationError(
                f"the payload of a {event_type} event is nested too deeply to encode; "
                "flatten it (the hub accepts events nested up to about 200 levels)"
            ) from None
        data = self.allowlist.select(event_type, redacted)
        return PreparedEvent(run_id, event_type, _timestamp(occurred_at), local_json, data)

    def encode(self, event: PreparedEvent, sequence: int) -> tuple[bytes, str]:
        """Canonical sync-event bytes and content hash of ``event`` at ``sequence``."""
        identity = self.identity
        wire = {
            "schema": SYNC_EVENT_SCHEMA,
            "project_id": identity.project_id,
            "hub_project": identity.hub_project,
            "home_runtime_id": identity.home_runtime_id,
            "run_id": event.run_id,
            "sequence": sequence,
            "event_type": event.event_type,
            "occurred_at": event.occurred_at,
            "data": event.data,
        }
        try:
            data = canonical_json(wire)
        except WireError as exc:
            raise DerivationError(
                f"the {event.event_type} event cannot be encoded: {exc.detail}"
            ) from None
        if len(data) > MAX_EVENT_BYTES:
            raise EventTooLargeError(
                f"the {event.event_type} sync event of run {event.run_id} is {len(data)} bytes; "
                f"the limit is {MAX_EVENT_BYTES} (shorten the allowlisted fields of its payload "
                "or narrow the event type's allowlist)"
            )
        # An event the hub would refuse must be refused here, before commit, not lost
        # later as `rejected`. Everything else in these bytes was validated as it was
        # built; only the data's nesting and keys are left, and when they are plain
        # the hub's own check (a full parse) would only repeat that work.
        if not _plain_json(event.data, HUB_MAX_NESTING - 1):
            try:
                parse_sync_event(data)
            except WireError as exc:
                raise DerivationError(
                    f"the {event.event_type} sync event of run {event.run_id} would be refused "
                    f"by the hub ({exc}); nothing was written (flatten or shorten its "
                    "allowlisted fields)"
                ) from None
        return data, content_hash(data)

    def rederive(
        self, run_id: str, sequence: int, event_type: str, occurred_at: str, local_json: str
    ) -> tuple[bytes, str]:
        """Canonical sync-event bytes and content hash of a stored local event (a
        ``run_events`` row, its payload redacted when it was appended), derived again as its
        append derived them: the same bytes, unless a secret scrubbed from the payload since
        changed them."""
        local = json.loads(local_json)
        data = self.allowlist.select(event_type, local)
        return self.encode(
            PreparedEvent(run_id, event_type, occurred_at, local_json, data), sequence
        )

    def _check_ids(self, run_id: str, event_type: str) -> None:
        secrets = self.redactor.secret_count
        if secrets != self._checked_against:
            self._valid_runs.clear()
            self._valid_types.clear()
            self._checked_against = secrets
        if run_id not in self._valid_runs:
            self._check_id(run_id, "run id", lambda: validate_name(run_id, "run id"))
            if len(self._valid_runs) > 10_000:
                self._valid_runs.clear()
            self._valid_runs.add(run_id)
        if event_type not in self._valid_types:
            self._check_id(event_type, "event type", lambda: validate_event_type(event_type))
            self._valid_types.add(event_type)

    def _check_id(self, value: str, what: str, validate: Callable[[], str]) -> None:
        # Neither message repeats the value: a refused id may be a credential.
        try:
            validate()
        except ConfigError as exc:
            raise DerivationError(str(exc)) from None
        if self.redactor.contains_secret(value):
            raise SecretInIdError(
                f"the {what} holds a secret (a credential format, or a registered or "
                f"environment secret); a {what} reaches the hub as it is, never redacted, "
                "so the event was refused and nothing was written: use one that holds no secret"
            )


HUB_MAX_NESTING = 200
"""Deepest nesting of non-empty JSON objects and arrays the hub's parser accepts in a
whole sync event (the event object itself is one level); deeper is ``bad_json``."""


def _plain_json(value: Any, levels: int) -> bool:
    # Whether `value` nests non-empty objects and arrays at most `levels` deep and every
    # object key is a string: then the hub's parser takes its canonical bytes as they are.
    # (A non-string key is written as a string, and may sort differently once it is one.)
    if not value:
        return True
    if levels <= 0:
        return False
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            return False
        children: Iterable[Any] = value.values()
    else:
        children = value
    return all(
        _plain_json(child, levels - 1)
        for child in children
        if isinstance(child, dict | list | tuple)
    )


def _timestamp(occurred_at: datetime | str | None) -> str:
    if occurred_at is None:
        # The common case, on the hot path: isoformat is several times faster than
        # strftime and, for an aware UTC "now", spells the same text.
        return datetime.now(UTC).isoformat(timespec="microseconds")[:-6] + "Z"
    if isinstance(occurred_at, str):
        try:
            occurred_at = datetime.fromisoformat(occurred_at)
        except ValueError:
            raise DerivationError(
                "occurred_at must be an ISO-8601 timestamp with a UTC offset"
            ) from None
    if occurred_at.tzinfo is None:
        raise DerivationError("occurred_at must be timezone-aware (UTC)")
    return format_timestamp(occurred_at)


def derive_sync_event(
    identity: StoreIdentity,
    run_id: str,
    sequence: int,
    event_type: str,
    payload: Mapping[str, Any],
    *,
    allowlist: Allowlist | None = None,
    redactor: Redactor | None = None,
    occurred_at: datetime | str | None = None,
) -> tuple[SyncEvent, bytes, str]:
    """Build the redacted, allowlisted ``SyncEvent`` of one local event, with bytes and hash.

    The same path ``RunEventStore.append_event`` takes, exposed for callers that
    want the event without storing it.
    """
    deriver = EventDeriver(identity, allowlist or Allowlist(), redactor or Redactor())
    prepared = deriver.prepare(run_id, event_type, payload, occurred_at)
    data, digest = deriver.encode(prepared, sequence)
    event = SyncEvent.model_validate_json(data)
    return event, data, digest
