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
from typing import TYPE_CHECKING

from hubsync.core.private_files import modes_left_alone
from hubsync.doctor.check import Check, Status
from hubsync.doctor.enrollment_checks import enrollment_check
from hubsync.doctor.redis_checks import redis_checks
from hubsync.doctor.store_checks import (
    hub_store_check,
    key_files_check,
    sqlite_path,
    state_dir_checks,
    store_commit_counter,
    store_identity,
)

if TYPE_CHECKING:
    from hubsync.core.connections import RedisTarget

__all__ = ["Check", "Status", "run_checks"]


def run_checks(
    redis: RedisTarget, hub_url: str | None, shown_hub: str, state_dir: Path | None
) -> list[Check]:
    """Every check, in report order: Redis, the hub store and its keys' file, the runtime's
    state dir, its keys' file and its enrollment. Nothing is changed: a file open to others,
    which the daemons would tighten, fails its check and is left as it is."""

    with modes_left_alone():  # a file open to others fails its own check, and stays as it is
        return _checks(redis, hub_url, shown_hub, state_dir)


def _checks(
    redis: RedisTarget, hub_url: str | None, shown_hub: str, state_dir: Path | None
) -> list[Check]:
    from producers.registry import REGISTRY_FILE

    store = None if hub_url is None else store_identity(hub_url, shown_hub)
    hub_file = None if hub_url is None else sqlite_path(hub_url)
    counter = None if hub_url is None else lambda: store_commit_counter(hub_url)
    return [
        *redis_checks(redis, store, counter),
        hub_store_check(hub_url, shown_hub),
        key_files_check(
            "hub-keys",
            hub_file,
            "the keys of every runtime enrolled on this hub",
            "no --hub-db given" if hub_url is None else "not a SQLite file",
        ),
        *state_dir_checks(state_dir),
        key_files_check(
            "runtime-keys",
            None if state_dir is None else state_dir.expanduser() / REGISTRY_FILE,
            "this runtime's key",
            "no --state-dir given",
        ),
        enrollment_check(state_dir, hub_url, shown_hub),
    ]
