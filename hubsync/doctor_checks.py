"""What ``hubsync doctor`` checks in a deployment, one verdict per check.

Each check reads what it needs (INFO and CONFIG GET on Redis, the hub store
opened without creating it, the runtime's registry and stores) and gives a
``Check``: ok, warn (works, with a stated risk), FAIL with what to change, or
skip when its input was not given. The verdicts on Redis's settings are pure
functions of what was read (``judge_*``), so every configuration is testable
without a server configured that way.

Only Redis is always checked (its URL has a default, as in every command); an
unreachable Redis is a failed check, not an error, so the other checks still
run and the report stays one line per check.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import redis

from consumers.projects import known_hub_projects
from hubsync import keys
from hubsync.connections import Role, connect, ping
from hubsync.errors import HubsyncError, RedisUnavailableError, SchemaVersionError
from hubsync.redis_values import as_text
from hubsync.settings import SQLITE_URL_PREFIX, safe_url

if TYPE_CHECKING:
    from producers.registry import ProjectRegistration, RuntimeRegistry

MIN_REDIS_VERSION = (7, 0)
"""Reclaim relies on XAUTOCLAIM reporting entries deleted while pending, and lag on
XINFO GROUPS ``lag``: both Redis 7.0."""

HUB_IDENTITY_KEY = f"{keys.PREFIX}:hub"
"""The hub id owning the namespace's consumer group, written by hub trust when enabled;
doctor shows it when present and says nothing when it is absent."""

REDIS_CHECKS = ("redis-version", "maxmemory-policy", "aof", "consumer-group")
"""The checks that need Redis, skipped when it cannot be reached."""

STORE_BUSY_BUDGET = 10.0
"""Seconds a check waits for a store locked by a writer before failing its line."""

T = TypeVar("T")
_VERSION = re.compile(r"(\d+)\.(\d+)")
_OPEN_ERRORS = (HubsyncError, sqlite3.Error, OSError)


class Status(StrEnum):
    """A check's verdict; only ``FAIL`` makes doctor exit 1."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


_LABELS = {Status.OK: "ok", Status.WARN: "warn", Status.FAIL: "FAIL", Status.SKIP: "skip"}


@dataclass(frozen=True, slots=True)
class Check:
    """One check: its name, verdict, what was found and, when not ok, what to do."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        """Whether this check makes the deployment unhealthy."""
        return self.status is Status.FAIL

    def line(self) -> str:
        """``ok   name: detail`` / ``FAIL name: what is wrong; what to do`` / ``skip name: why``."""
        text = f"{self.detail}; {self.fix}" if self.fix else self.detail
        return f"{_LABELS[self.status]:<4} {self.name}: {text}"

    def as_dict(self) -> dict[str, str | None]:
        """JSON-ready form (``fix`` is null when there is nothing to do)."""
        return {
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
            "fix": self.fix or None,
        }


def from_error(name: str, exc: BaseException, fallback_fix: str) -> Check:
    """A failed check from a hubsync error, whose message reads ``what was wrong; what to do``."""
    what, _, todo = str(exc).partition("; ")
    return Check(name, Status.FAIL, what, todo or fallback_fix)


def run_checks(
    redis_url: str, hub_url: str | None, shown_hub: str, state_dir: Path | None
) -> list[Check]:
    """Every check, in report order: Redis, the hub store, the runtime's state dir."""
    return [
        *redis_checks(redis_url),
        hub_store_check(hub_url, shown_hub),
        *state_dir_checks(state_dir),
    ]


# ----- Redis -----


def redis_checks(redis_url: str) -> list[Check]:
    """Reachability, version, eviction policy, AOF, consumer groups and hub identity.

    A malformed URL raises ``ConfigError`` (a usage error, before any check).
    """
    client = connect(redis_url, Role.PROBE)
    try:
        reached = _reach(client, redis_url)
        if reached.failed:
            skipped = [Check(n, Status.SKIP, "Redis unreachable") for n in REDIS_CHECKS]
            return [reached, *skipped]
        checks = [
            reached,
            _guarded(
                "redis-version", lambda: judge_version(_info(client, "server")["redis_version"])
            ),
            _guarded("maxmemory-policy", lambda: judge_eviction(_eviction_policy(client))),
            _guarded("aof", lambda: _aof(client)),
            _guarded("consumer-group", lambda: consumer_group_check(client)),
        ]
        identity = _guarded("hub-identity", lambda: hub_identity_check(client))
        return checks if identity is None else [*checks, identity]
    finally:
        client.close()


def _reach(client: redis.Redis, redis_url: str) -> Check:
    shown = safe_url(redis_url)
    try:
        ping(client, redis_url)
    except RedisUnavailableError as exc:
        return Check(
            "redis",
            Status.FAIL,
            f"cannot reach {exc}",
            "start Redis, or fix --redis-url (HUBSYNC_REDIS_URL)",
        )
    except (redis.AuthenticationError, redis.exceptions.AuthorizationError) as exc:
        return Check(
            "redis",
            Status.FAIL,
            f"{shown} refused the credentials ({type(exc).__name__})",
            "fix the user and password in --redis-url (HUBSYNC_REDIS_URL)",
        )
    return Check("redis", Status.OK, f"{shown} answered PING")


def _guarded(name: str, check: Callable[[], T]) -> T | Check:
    """Run one Redis check; a Redis error (lost connection, NOPERM, renamed command) fails it."""
    try:
        return check()
    except redis.ResponseError as exc:
        # Redis's own words (NOPERM ...): never holds the URL or a password.
        return Check(name, Status.FAIL, f"Redis refused it: {exc}", _PERMISSIONS_FIX)
    except redis.RedisError as exc:
        return Check(name, Status.FAIL, f"Redis failed it ({type(exc).__name__})", _RETRY_FIX)


_PERMISSIONS_FIX = (
    "let doctor's Redis user run INFO, CONFIG GET, SMEMBERS, XINFO and GET, or run it as an admin"
)
_RETRY_FIX = "check that Redis is up and answering, then run hubsync doctor again"


def _info(client: redis.Redis, section: str) -> dict[str, Any]:
    return dict(client.info(section))


def _eviction_policy(client: redis.Redis) -> str:
    # INFO, not CONFIG GET: managed Redis services often refuse CONFIG.
    return str(_info(client, "memory")["maxmemory_policy"])


def _aof(client: redis.Redis) -> Check:
    persistence = _info(client, "persistence")
    fsync: str | None
    try:
        fsync = as_text(client.config_get("appendfsync").get("appendfsync")) or None
    except redis.ResponseError:
        fsync = None  # CONFIG refused (managed Redis, ACL): the policy is stated as unknown
    return judge_aof(
        bool(int(persistence.get("aof_enabled", 0))),
        fsync,
        str(persistence.get("aof_last_write_status", "ok")),
    )


def judge_version(version: str) -> Check:
    """Redis ``version`` (INFO server ``redis_version``) against ``MIN_REDIS_VERSION``."""
    match = _VERSION.match(version)
    if match is None:
        return Check(
            "redis-version",
            Status.WARN,
            f"Redis reports version {version[:40]!r}, which is not MAJOR.MINOR",
            "make sure it is Redis 7.0 or later",
        )
    if (int(match.group(1)), int(match.group(2))) >= MIN_REDIS_VERSION:
        return Check("redis-version", Status.OK, f"Redis {version} (7.0 or later)")
    return Check(
        "redis-version",
        Status.FAIL,
        f"Redis {version} is older than 7.0: hub consumers rely on XAUTOCLAIM reporting "
        "entries deleted while pending and on XINFO GROUPS lag",
        "upgrade Redis to 7.0 or later",
    )


def judge_eviction(policy: str) -> Check:
    """``maxmemory-policy``: anything but noeviction may drop fences and streams."""
    if policy == "noeviction":
        return Check(
            "maxmemory-policy",
            Status.OK,
            "noeviction: at maxmemory, writes are refused (and retried), never a key dropped",
        )
    return Check(
        "maxmemory-policy",
        Status.FAIL,
        f"{policy}: under memory pressure Redis may evict a lease's fence (tokens could "
        "repeat, letting two holders both act) or an events stream (entries lost before "
        "the hub stored them)",
        "run `CONFIG SET maxmemory-policy noeviction` and put `maxmemory-policy noeviction` "
        "in redis.conf",
    )


_FSYNC_RISKS = {
    "everysec": (
        Status.OK,
        "a power cut or OS crash can lose up to about 1 s of acknowledged writes "
        "(a crash of Redis alone loses none)",
    ),
    "always": (
        Status.OK,
        "no acknowledged write is lost; every write waits for its fsync (slowest)",
    ),
    "no": (
        Status.WARN,
        "the OS flushes when it chooses (about every 30 s on Linux): a power cut or OS crash "
        "can lose that much of acknowledged writes, lease grants and stream entries included",
    ),
}
_AOF_CONF = "`appendonly yes` and `appendfsync everysec` in redis.conf"


def judge_aof(enabled: bool, fsync: str | None, last_write: str = "ok") -> Check:
    """AOF: off fails (an acknowledged write may vanish on restart); the fsync policy's risk."""
    if not enabled:
        return Check(
            "aof",
            Status.FAIL,
            "appendonly no: a Redis restart loses what was written since the last snapshot, "
            "acknowledged lease grants (tokens could repeat) and stream entries included",
            f"run `CONFIG SET appendonly yes` and put {_AOF_CONF}",
        )
    if last_write != "ok":
        return Check(
            "aof",
            Status.FAIL,
            f"appendonly yes, but the last AOF write failed (aof_last_write_status:{last_write})",
            "free disk space where Redis keeps its AOF, then check the Redis log",
        )
    if fsync is None:
        return Check(
            "aof",
            Status.WARN,
            "appendonly yes; the fsync policy is unknown (CONFIG GET appendfsync refused)",
            "make sure redis.conf says `appendfsync everysec` (or always)",
        )
    status, risk = _FSYNC_RISKS.get(
        fsync, (Status.WARN, "an fsync policy doctor does not know; its risk is unknown")
    )
    fix = (
        ""
        if status is Status.OK
        else "run `CONFIG SET appendfsync everysec` and put it in redis.conf"
    )
    return Check("aof", status, f"appendonly yes, appendfsync {fsync}: {risk}", fix)


def consumer_group_check(client: redis.Redis) -> Check:
    """Group ``hub`` on the events stream of every project in ``hubsync:projects``."""
    projects = known_hub_projects(client)
    if not projects:
        return Check(
            "consumer-group",
            Status.OK,
            f"no projects yet in {keys.PROJECTS} (a relay adds its project on its first send)",
        )
    pipe = client.pipeline(transaction=False)
    for project in projects:
        pipe.xinfo_groups(keys.events_stream(project))
    missing = []
    for project, reply in zip(projects, pipe.execute(raise_on_error=False), strict=True):
        if isinstance(reply, redis.ResponseError) and "no such key" in str(reply).lower():
            missing.append(project)
        elif isinstance(reply, Exception):
            raise reply
        elif not any(as_text(group.get("name")) == keys.CONSUMER_GROUP for group in reply):
            missing.append(project)
    if missing:
        shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
        return Check(
            "consumer-group",
            Status.FAIL,
            f"no group {keys.CONSUMER_GROUP} on the events stream of {len(missing)} of "
            f"{len(projects)} projects ({shown}): nothing reads their events",
            "start a hub consumer (hubsync consume); it creates the group on every project "
            f"in {keys.PROJECTS}",
        )
    return Check(
        "consumer-group",
        Status.OK,
        f"group {keys.CONSUMER_GROUP} on the events stream of all {len(projects)} projects",
    )


def hub_identity_check(client: redis.Redis) -> Check | None:
    """The hub id in ``hubsync:hub`` when the key exists; None (no line) when it does not."""
    value = client.get(HUB_IDENTITY_KEY)
    if value is None:
        return None
    text = as_text(value)
    shown = text if text.isprintable() and len(text) <= 200 else repr(text[:200])
    return Check("hub-identity", Status.OK, f"{HUB_IDENTITY_KEY} = {shown}")


# ----- stores -----


def hub_store_check(hub_url: str | None, shown: str) -> Check:
    """The hub store opens without being created, at this hubsync's schema version.

    ``shown`` is the store as shown to people (a path, or the URL without credentials).
    """
    if hub_url is None:
        return Check("hub-store", Status.SKIP, "no --hub-url or --hub-db given")
    from hubstore import open_store

    try:
        store = open_store(hub_url, create_schema=False, busy_budget=STORE_BUSY_BUDGET)
    except SchemaVersionError as exc:
        check = from_error("hub-store", exc, f"check {shown}")
        sqlite = hub_url.startswith(SQLITE_URL_PREFIX)
        if sqlite and not Path(shown).exists():
            return check  # nothing to upgrade: its message says how to create one
        option = f"--hub-db {shown}" if sqlite else f"--hub-url {shown}"
        upgrade = (
            f"a store of an older schema version is upgraded by `hubsync hub migrate {option}`"
        )
        return replace(check, fix=f"{check.fix}; {upgrade}")
    except _OPEN_ERRORS as exc:
        return from_error("hub-store", exc, f"check {shown} and its permissions")
    store.close()
    return Check("hub-store", Status.OK, f"{shown} opens, at this hubsync's schema version")


def state_dir_checks(state_dir: Path | None) -> list[Check]:
    """The runtime's registry opens, then one check per registered project: does its store open."""
    if state_dir is None:
        return [Check("state-dir", Status.SKIP, "no --state-dir given")]
    from producers.registry import RuntimeRegistry

    try:
        registry = RuntimeRegistry(state_dir, create=False)
    except _OPEN_ERRORS as exc:
        return [from_error("state-dir", exc, _ACCESS_FIX)]
    with registry:
        try:
            projects = registry.projects()
        except _OPEN_ERRORS as exc:
            return [from_error("state-dir", exc, _ACCESS_FIX)]
        found = Check(
            "state-dir",
            Status.OK,
            f"{registry.state_dir}: runtime {registry.runtime_id}, "
            f"{len(projects)} project{'' if len(projects) == 1 else 's'}",
        )
        return [found, *(_project_check(registry, p) for p in projects)]


_ACCESS_FIX = "check the path and that this user may read and write it (as the relay does)"


def _project_check(registry: RuntimeRegistry, project: ProjectRegistration) -> Check:
    name = f"project {project.project_id}"
    where = f"hub project {project.hub_project}, store {project.store_path}"
    if not project.store_path.is_file():
        # Opening would create it; a project with nothing appended has no store yet.
        return Check(name, Status.OK, f"{where}: no store yet (nothing appended)")
    try:
        with registry.open_store(project, busy_budget=STORE_BUSY_BUDGET) as store:
            counts = store.outbox_counts()
    except _OPEN_ERRORS as exc:
        return from_error(name, exc, _ACCESS_FIX)
    states = ", ".join(f"{counts[s]} {s}" for s in ("pending", "acked", "conflict", "rejected"))
    return Check(name, Status.OK, f"{where}: opens; outbox {states}")
