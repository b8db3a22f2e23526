"""A valid sync event built straight from its fields, for wire-model tests."""

from __future__ import annotations

from hubsync.core.wire import SyncEvent


def make_event(**overrides: object) -> SyncEvent:
    """A valid ``SyncEvent``; ``overrides`` replace any of its fields."""
    fields: dict[str, object] = {
        "project_id": "proj-1",
        "hub_project": "acme",
        "home_runtime_id": "rt-1",
        "run_id": "run-1",
        "sequence": 1,
        "event_type": "step.completed",
        "occurred_at": "2026-11-29T16:38:54.123456Z",
        "data": {"step": "build", "ok": True},
    }
    fields.update(overrides)
    return SyncEvent.model_validate(fields)
