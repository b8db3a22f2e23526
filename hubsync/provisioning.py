"""Enroll a runtime on a hub in one process: what ``hubsync hub init``, ``hubsync enroll``
and ``hubsync runtime join`` do, for the demo, the benchmark and the tests.

It goes the same way an operator does: the hub gets its id if it has none,
enrolls the runtime (a fresh key; a re-key when it was enrolled already), and
the runtime keeps the enrollment token's contents in its registry. The token
is encoded and decoded on the way, as it would travel, and never printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from hubstore.store import DEFAULT_ROTATION_GRACE, HubStore
from hubsync.core.enrollment import Enrollment, decode_token, encode_token
from producers.registry import RuntimeRegistry


def enroll_runtime(
    hub: HubStore,
    registry: RuntimeRegistry,
    hub_projects: Sequence[str],
    rotation_grace: timedelta = DEFAULT_ROTATION_GRACE,
) -> Enrollment:
    """Enroll ``registry``'s runtime on ``hub`` for ``hub_projects`` and join it there."""
    if hub.hub_id() is None:
        hub.init_hub()
    enrollment = hub.enroll(registry.runtime_id, list(hub_projects), rotation_grace=rotation_grace)
    registry.join(decode_token(encode_token(enrollment)))
    return enrollment


def enroll_state_dir(
    hub: HubStore, state_dir: Path, hub_projects: Sequence[str], runtime_id: str | None = None
) -> Enrollment:
    """``enroll_runtime`` for the runtime of ``state_dir`` (created, as ``runtime join`` does,
    when it does not exist yet)."""
    with RuntimeRegistry(state_dir, runtime_id) as registry:
        return enroll_runtime(hub, registry, hub_projects)
