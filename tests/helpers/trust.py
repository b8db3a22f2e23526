"""Enrollment for tests: runtimes enrolled on a hub store, and what their keys sign.

Tests enroll runtimes the way operators do (``hubsync.provisioning``: the hub
enrolls, the runtime joins). The enrollments made here are remembered for
the test (an autouse fixture forgets them after each one), so the helpers that
play a relay (``relay_player``) or a hub (``hub_double``) sign with the key the
hub under test knows, as a real relay or hub would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hubstore.memory import MemoryHubStore
from hubstore.store import HubStore
from hubsync.core.enrollment import Enrollment
from hubsync.core.signing import (
    HUB_ID_FIELD,
    SIGNATURE_FIELD,
    RuntimeKey,
    sign_event_entry,
    sign_outcomes_entry,
    sign_presence_entry,
)
from hubsync.provisioning import enroll_runtime
from producers.registry import RuntimeRegistry

_enrolled: dict[str, Enrollment] = {}


def forget_enrollments() -> None:
    """Forget every enrollment remembered so far (after each test)."""
    _enrolled.clear()


def remember(enrollment: Enrollment) -> Enrollment:
    """Sign this runtime's entries (and the hub's outcomes to it) with this enrollment's key."""
    _enrolled[enrollment.runtime_id] = enrollment
    return enrollment


def enroll(hub: HubStore, runtime_id: str, hub_projects: Sequence[str]) -> RuntimeKey:
    """Enroll ``runtime_id`` on ``hub`` (giving the hub an id first); its key."""
    if hub.hub_id() is None:
        hub.init_hub()
    enrollment = remember(hub.enroll(runtime_id, list(hub_projects)))
    return RuntimeKey(enrollment.key)


def join(
    registry: RuntimeRegistry, hub_projects: Sequence[str], hub: HubStore | None = None
) -> Enrollment:
    """Enroll ``registry``'s runtime on ``hub`` and join it (``hubsync enroll`` + ``runtime
    join``); a throw-away in-memory hub when the test plays the hub itself."""
    return remember(enroll_runtime(hub or MemoryHubStore(), registry, hub_projects))


def enrollment_of(runtime_id: str) -> Enrollment | None:
    """The enrollment remembered for ``runtime_id``, if any."""
    return _enrolled.get(runtime_id)


def key_of(runtime_id: str) -> RuntimeKey | None:
    """The key remembered for ``runtime_id``, if any."""
    enrollment = _enrolled.get(runtime_id)
    return None if enrollment is None else RuntimeKey(enrollment.key)


def _runtime(fields: Mapping[str, Any]) -> str:
    value = fields.get("runtime_id", "")
    return value.decode() if isinstance(value, bytes) else str(value)


def signed_event(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with the ``sig`` of its runtime's remembered key (unchanged if none)."""
    key = key_of(_runtime(fields))
    if key is not None:
        fields[SIGNATURE_FIELD] = sign_event_entry(key, fields)
    return fields


def signed_presence(fields: dict[str, Any]) -> dict[str, Any]:
    """A presence beat's fields with its runtime's signature (unchanged if none)."""
    key = key_of(_runtime(fields))
    if key is not None:
        fields[SIGNATURE_FIELD] = sign_presence_entry(key, fields)
    return fields


def signed_outcomes(runtime_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """An outcomes entry for ``runtime_id`` as its hub signs it (unchanged if not enrolled)."""
    enrollment = _enrolled.get(runtime_id)
    if enrollment is not None:
        fields[HUB_ID_FIELD] = enrollment.hub_id
        key = RuntimeKey(enrollment.key)
        fields[SIGNATURE_FIELD] = sign_outcomes_entry(key, fields, runtime_id=runtime_id)
    return fields
