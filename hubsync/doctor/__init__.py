"""``hubsync doctor``: what it checks in a deployment, one verdict per check.

Each check reads what it needs (INFO and CONFIG GET on Redis, the hub store
opened without creating it, the runtime's registry and stores) and gives a
``Check``: ok, warn (works, with a stated risk), FAIL with what to change, or
skip when its input was not given. The verdicts on Redis's settings are pure
functions of what was read (``judge_*``).

Only Redis is always checked (its URL has a default, as in every command); an
unreachable Redis is a failed check, not an error, so the other checks still
run and the report stays one line per check.
"""

from __future__ import annotations

from pathlib import Path

from hubsync.doctor.check import Check, Status
from hubsync.doctor.enrollment_checks import enrollment_check
from hubsync.doctor.redis_checks import redis_checks
from hubsync.doctor.store_checks import hub_store_check, state_dir_checks, store_identity

__all__ = ["Check", "Status", "run_checks"]


def run_checks(
    redis_url: str, hub_url: str | None, shown_hub: str, state_dir: Path | None
) -> list[Check]:
    """Every check, in report order: Redis, the hub store, the runtime's state dir and its
    enrollment."""
    store = None if hub_url is None else store_identity(hub_url, shown_hub)
    return [
        *redis_checks(redis_url, store),
        hub_store_check(hub_url, shown_hub),
        *state_dir_checks(state_dir),
        enrollment_check(state_dir, hub_url, shown_hub),
    ]
