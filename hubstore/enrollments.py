"""What enrolling, re-keying and revoking a runtime do to its record, apart from any database.

Every backend asks these for the new ``EnrolledRuntime`` and only stores it,
so all of them rotate and revoke alike (as ``decide`` does for verdicts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from hubstore.errors import RuntimeNotEnrolledError
from hubstore.store import MAX_ROTATION_GRACE, EnrolledRuntime, RuntimeState
from hubsync.core.enrollment import new_key, validate_hub_projects
from hubsync.core.names import validate_name


def enrolled(
    existing: EnrolledRuntime | None,
    runtime_id: str,
    hub_projects: Sequence[str],
    now: datetime,
    rotation_grace: timedelta,
) -> EnrolledRuntime:
    """The record of ``runtime_id`` after enrolling it (again) with a fresh key.

    An active runtime's current key becomes its previous one, valid for
    ``rotation_grace`` more; a new or revoked runtime gets the new key alone.
    """
    validate_name(runtime_id, "runtime id")
    projects = validate_hub_projects(list(hub_projects))
    if not timedelta(0) <= rotation_grace <= MAX_ROTATION_GRACE:
        raise ValueError(
            f"rotation_grace must be between 0 and {MAX_ROTATION_GRACE.days} days, "
            f"not {rotation_grace}"
        )
    key = new_key()
    if existing is None:
        return EnrolledRuntime(
            runtime_id=runtime_id,
            state=RuntimeState.ACTIVE,
            hub_projects=projects,
            enrolled_at=now,
            rotated_at=None,
            revoked_at=None,
            previous_valid_until=None,
            key=key,
            previous_key=None,
        )
    rotating = existing.state is RuntimeState.ACTIVE and existing.key is not None
    return replace(
        existing,
        state=RuntimeState.ACTIVE,
        hub_projects=projects,
        enrolled_at=existing.enrolled_at if rotating else now,
        rotated_at=now if rotating else None,
        revoked_at=None,
        previous_valid_until=now + rotation_grace if rotating else None,
        key=key,
        previous_key=existing.key if rotating else None,
    )


def revoked(existing: EnrolledRuntime | None, runtime_id: str, now: datetime) -> EnrolledRuntime:
    """The record of ``runtime_id`` once revoked: no key kept, the first revocation time kept."""
    validate_name(runtime_id, "runtime id")
    if existing is None:
        raise RuntimeNotEnrolledError(
            f"runtime {runtime_id} was never enrolled on this hub, so there is nothing to "
            "revoke; check the runtime id"
        )
    if existing.state is RuntimeState.REVOKED:
        return existing
    return replace(
        existing,
        state=RuntimeState.REVOKED,
        revoked_at=now,
        previous_valid_until=None,
        key=None,
        previous_key=None,
    )
