"""Plays the relay's part for hub tests: builds real sync events and XADDs their entries.

Entries are built with ``hubsync.core.wire.SyncEvent`` and
``hubsync.core.entries.event_entry_fields``, exactly what a relay sends, and signed
with the runtime's key when the test enrolled it (``tests.helpers.trust``), so
the hub under test sees the real protocol.
"""

from __future__ import annotations

from collections.abc import Mapping

import redis

from hubsync.core import keys
from hubsync.core.entries import EventEntry, PresenceBeat, event_entry_fields, parse_event_entry
from hubsync.core.entries import decode_fields as _decode
from hubsync.core.redis_values import as_text
from hubsync.core.wire import SyncEvent
from tests.helpers.trust import signed_event, signed_presence

HUB_PROJECT = "acme"
RUNTIME = "rt-1"


def sync_event(
    sequence: int,
    run_id: str = "run-1",
    project_id: str = "proj-1",
    hub_project: str = HUB_PROJECT,
    runtime_id: str = RUNTIME,
    data: Mapping[str, object] | None = None,
) -> SyncEvent:
    """A valid sync event; ``data`` changes its bytes (and so its hash)."""
    return SyncEvent.model_validate(
        {
            "project_id": project_id,
            "hub_project": hub_project,
            "home_runtime_id": runtime_id,
            "run_id": run_id,
            "sequence": sequence,
            "event_type": "step.completed",
            "occurred_at": "2026-11-29T16:38:54.123456Z",
            "data": dict(data) if data is not None else {"step_id": f"s{sequence}", "status": "ok"},
        }
    )


def entry_fields(event: SyncEvent) -> dict[str, str | bytes]:
    """The stream fields a relay XADDs for ``event`` (signed, if its runtime is enrolled)."""
    data, digest = event.encoded()
    return signed_event(event_entry_fields(event, data, digest))


def event_entry(event: SyncEvent) -> EventEntry:
    """The validated entry a hub consumer hands to ``HubStore.ingest``."""
    return parse_event_entry(_decode(entry_fields(event)))


def send(client: redis.Redis, event: SyncEvent) -> str:
    """XADD ``event`` to its runtime's events stream of its hub project; the id."""
    return send_fields(client, event.hub_project, entry_fields(event), event.home_runtime_id)


def send_fields(
    client: redis.Redis,
    hub_project: str,
    fields: Mapping[str, str | bytes],
    runtime_id: str = RUNTIME,
) -> str:
    """XADD raw fields (valid or not, naming any runtime) to ``runtime_id``'s events stream of
    a hub project; the entry id."""
    entry_id = client.xadd(keys.events_stream(hub_project, runtime_id), dict(fields))  # type: ignore[arg-type]
    return as_text(entry_id)


def send_presence(client: redis.Redis, beat: PresenceBeat, runtime_id: str = RUNTIME) -> str:
    """XADD a presence beat (signed, if its runtime is enrolled) to ``runtime_id``'s stream."""
    fields = signed_presence(dict(beat.to_fields()))
    return send_fields(client, beat.hub_project, fields, runtime_id)


EVENTS = keys.events_stream(HUB_PROJECT, RUNTIME)
"""The events stream of runtime ``RUNTIME`` for the test hub project."""
