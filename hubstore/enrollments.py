"""What enrolling, re-keying and revoking a runtime do to its record, apart from any database;
and whether a project may be moved to a runtime.

Every backend asks these for the new ``EnrolledRuntime`` (or the move's
verdict) and only stores it, so all of them rotate, revoke and move alike (as
``decide`` does for verdicts).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from hubstore.decide import ProjectOwner
from hubstore.errors import ProjectMoveRefusedError, RuntimeNotEnrolledError
from hubstore.store import MAX_ROTATION_GRACE, EnrolledRuntime, ProjectMove, RuntimeState
from hubsync.core.enrollment import new_key, validate_hub_projects
from hubsync.core.names import validate_name

log = logging.getLogger(__name__)


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


def check_move(
    project_id: str, owner: ProjectOwner | None, runtime_id: str, target: EnrolledRuntime | None
) -> ProjectOwner:
    """The project's owner before a move to ``runtime_id`` (enrolled as ``target``), or
    ``ProjectMoveRefusedError`` saying why the move cannot be made."""
    validate_name(project_id, "project id")
    validate_name(runtime_id, "runtime id")
    if owner is None:
        raise ProjectMoveRefusedError(
            f"project {project_id} is not known to this hub (no event of it was stored); "
            "check the project id (hubsync runs --hub-project P lists them)"
        )
    if owner.runtime_id == runtime_id:
        raise ProjectMoveRefusedError(f"project {project_id} already belongs to {runtime_id}")
    refused = f"cannot move project {project_id} to runtime {runtime_id}"
    if target is None:
        raise ProjectMoveRefusedError(f"{refused}: it was never enrolled on this hub")
    if target.state is not RuntimeState.ACTIVE:
        raise ProjectMoveRefusedError(f"{refused}: it is revoked; enroll it again first")
    if not target.may_write(owner.hub_project):
        raise ProjectMoveRefusedError(
            f"{refused}: it is not enrolled for hub project {owner.hub_project} (enroll it "
            "for that hub project first)"
        )
    return owner


def log_move(move: ProjectMove) -> None:
    """The audit line of a project move, once the store has recorded it."""
    log.warning(
        "project %s of hub project %s moved from runtime %s to runtime %s (%d runs re-homed; "
        "move %d)",
        move.project_id,
        move.hub_project,
        move.from_runtime_id,
        move.to_runtime_id,
        move.runs,
        move.move_id,
    )
