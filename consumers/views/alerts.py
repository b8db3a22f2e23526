"""Reading the conflict alerts a hub project raised (``hubsync:{P}:alerts``), newest first.

The alert stream is the live feed (capped at ``--alerts-maxlen``); the hub
database's ``sync_alerts`` is the durable record (``HubStore.alerts``). Both
carry the key, the runtime and the two hashes, never the event bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hubsync.core import keys
from hubsync.core.connections import RedisClient
from hubsync.core.entries import decode_fields
from hubsync.core.redis_values import as_text


@dataclass(frozen=True, slots=True)
class StreamAlert:
    """One entry of a hub project's alert stream."""

    id: str
    hub_project: str
    reason: str
    project_id: str
    run_id: str
    sequence: int | None
    runtime_id: str
    existing_hash: str
    offered_hash: str
    detected_at: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def read_alerts(client: RedisClient, hub_project: str, count: int = 50) -> list[StreamAlert]:
    """The newest ``count`` alerts of ``hub_project``'s alert stream, newest first."""
    reply: Any = client.xrevrange(keys.alerts_stream(hub_project), "+", "-", count=count)
    return [_alert(hub_project, raw_id, decode_fields(raw or {})) for raw_id, raw in reply]


def _alert(hub_project: str, raw_id: bytes | str, fields: Mapping[str, bytes]) -> StreamAlert:
    def text(name: str) -> str:
        # Bounded: an alert names ids and hashes, nothing long.
        return fields.get(name, b"")[:256].decode("utf-8", "replace")

    sequence = text("sequence")
    return StreamAlert(
        id=as_text(raw_id),
        hub_project=hub_project,
        reason=text("reason"),
        project_id=text("project_id"),
        run_id=text("run_id"),
        sequence=int(sequence) if sequence.isdigit() else None,
        runtime_id=text("runtime_id"),
        existing_hash=text("existing_hash"),
        offered_hash=text("offered_hash"),
        detected_at=text("detected_at"),
    )
