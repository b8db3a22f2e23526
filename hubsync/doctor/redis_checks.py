"""The Redis checks: reachable, version 7.0 or later, noeviction, AOF, hubsync's functions,
group ``hub``, hub id.

Settings are read from INFO where INFO has them (managed Redis services often
refuse CONFIG); only the fsync policy needs CONFIG GET, and a refusal makes it
"unknown", a warning. The verdicts on what was read (``judge_*``) are pure
functions, testable for configurations no test server has.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import redis

from consumers.views.projects import known_hub_projects
from consumers.views.queue_status import events_streams
from hubstore.redis_functions import (
    LIBRARY_NAME,
    LIBRARY_VERSION,
    LOAD_COMMAND,
    FunctionsMissingError,
    require_library,
)
from hubsync.core import keys
from hubsync.core.connections import RedisClient, RedisTarget, Role, connect, ping
from hubsync.core.errors import RedisCredentialsError, RedisUnavailableError
from hubsync.core.redis_values import as_text, printable
from hubsync.doctor.check import Check, Status, counted

MIN_REDIS_VERSION = (7, 0)
"""Reclaim relies on XAUTOCLAIM reporting entries deleted while pending, and lag on
XINFO GROUPS ``lag``: both Redis 7.0."""

REDIS_CHECKS = ("redis-version", "maxmemory-policy", "aof", "functions", "consumer-group")
"""The checks that need Redis, skipped when it cannot be reached."""

T = TypeVar("T")
_VERSION = re.compile(r"(\d+)\.(\d+)")


def redis_checks(
    redis: RedisTarget,
    store: tuple[str, str | None] | None = None,
    commit_counter: Callable[[], int | None] | None = None,
) -> list[Check]:
    """Reachability, version, eviction policy, AOF, consumer groups, hub identity and mark.

    ``store``: the hub store given (as shown, and its hub id), compared with
    ``hubsync:hub``; ``commit_counter`` reads its commit counter (None if it
    cannot), compared with ``hubsync:hub:mark``.

    A malformed URL raises ``ConfigError`` (a usage error, before any check).
    """
    client = connect(redis, Role.PROBE)
    try:
        reached = _reach(client, redis)
        if reached.failed:
            why = (
                "Redis refused the password"
                if reached.detail.startswith("Redis refused")
                else "Redis unreachable"
            )
            skipped = [Check(n, Status.SKIP, why) for n in REDIS_CHECKS]
            return [reached, *skipped]
        checks = [
            reached,
            _guarded(
                "redis-version", lambda: judge_version(_info(client, "server")["redis_version"])
            ),
            _guarded("maxmemory-policy", lambda: judge_eviction(_eviction_policy(client))),
            _guarded("aof", lambda: _aof(client)),
            _guarded("functions", lambda: functions_check(client)),
            _guarded("consumer-group", lambda: consumer_group_check(client)),
        ]
        identity = _guarded("hub-identity", lambda: hub_identity_check(client, store))
        mark = _guarded("hub-mark", lambda: hub_mark_check(client, store, commit_counter))
        return [*checks, *(c for c in (identity, mark) if c is not None)]
    finally:
        client.close()


def _reach(client: RedisClient, redis: RedisTarget) -> Check:
    try:
        ping(client, redis)
    except RedisUnavailableError as exc:
        return Check(
            "redis",
            Status.FAIL,
            f"cannot reach {exc}",
            "start Redis, or fix --redis-url (HUBSYNC_REDIS_URL)",
        )
    except RedisCredentialsError as exc:
        message, _, fix = str(exc).partition("; ")
        return Check("redis", Status.FAIL, message, fix)
    return Check("redis", Status.OK, f"{redis.shown} answered PING")


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
    "if it is NOPERM, let doctor's Redis user run INFO, CONFIG GET, FCALL_RO, SMEMBERS, XINFO "
    "and GET"
)
_RETRY_FIX = "check that Redis is up and answering, then run hubsync doctor again"


def _info(client: RedisClient, section: str) -> dict[str, Any]:
    return dict(client.info(section))


def _eviction_policy(client: RedisClient) -> str:
    # INFO, not CONFIG GET: managed Redis services often refuse CONFIG.
    return str(_info(client, "memory")["maxmemory_policy"])


def _aof(client: RedisClient) -> Check:
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


def functions_check(client: RedisClient) -> Check:
    """Does this Redis hold the version of hubsync's functions library this hubsync calls?"""
    try:
        require_library(client)
    except FunctionsMissingError:
        return Check(
            "functions",
            Status.FAIL,
            f"Redis has no functions library {LIBRARY_NAME} version {LIBRARY_VERSION} (leases, "
            "trimming and dead replay refuse to run)",
            f"load it: {LOAD_COMMAND}, as a Redis user allowed FUNCTION LOAD",
        )
    return Check("functions", Status.OK, f"library {LIBRARY_NAME} version {LIBRARY_VERSION}")


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


def consumer_group_check(client: RedisClient) -> Check:
    """Group ``hub`` on every events stream of every project in ``hubsync:projects``."""
    projects = known_hub_projects(client)
    if not projects:
        return Check(
            "consumer-group",
            Status.OK,
            f"no projects yet in {keys.PROJECTS} (a hub consumer adds the hub projects of "
            "its enrolled runtimes)",
        )
    streams = [stream for project in projects for stream in events_streams(client, project)]
    pipe = client.pipeline(transaction=False)
    for stream in streams:
        pipe.xinfo_groups(stream)
    missing = []
    for stream, reply in zip(streams, pipe.execute(raise_on_error=False), strict=True):
        if isinstance(reply, redis.ResponseError):
            missing.append(stream)  # gone since the scan, or not a stream
        elif isinstance(reply, Exception):
            raise reply
        elif not any(as_text(group.get("name")) == keys.CONSUMER_GROUP for group in reply):
            missing.append(stream)
    if missing:
        shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
        return Check(
            "consumer-group",
            Status.FAIL,
            f"no group {keys.CONSUMER_GROUP} on {len(missing)} of "
            f"{counted(len(streams), 'events stream')} ({shown}): nothing reads their events",
            "start a hub consumer (hubsync consume); it creates the group on the stream of "
            "every enrolled runtime",
        )
    return Check(
        "consumer-group",
        Status.OK,
        f"group {keys.CONSUMER_GROUP} on every events stream "
        f"({counted(len(streams), 'stream')} of {counted(len(projects), 'project')})",
    )


def hub_identity_check(
    client: RedisClient, store: tuple[str, str | None] | None = None
) -> Check | None:
    """The hub id in ``hubsync:hub`` when the key exists; None (no line) when it does not.

    ``store`` is the hub store given (as shown, and its hub id or None): the
    line FAILs when the key names another hub, since that store's consumers
    would be refused (a store with no id yet gets a new one at start, so it
    differs too).
    """
    value = client.get(keys.HUB_IDENTITY)
    if value is None:
        return None
    text = as_text(value)
    shown = printable(text[:200])
    if store is not None and store[1] != text:
        store_shown, hub_id = store
        return Check(
            "hub-identity",
            Status.FAIL,
            f"{keys.HUB_IDENTITY} = {shown}, but {store_shown} is hub {hub_id or '(no id yet)'}: "
            "its consumers are refused",
            "give the store of the hub that owns this Redis, or use another Redis or database",
        )
    return Check("hub-identity", Status.OK, f"{keys.HUB_IDENTITY} = {shown}")


def hub_mark_check(
    client: RedisClient,
    store: tuple[str, str | None] | None,
    commit_counter: Callable[[], int | None] | None,
) -> Check | None:
    """The store's commit counter against ``hubsync:hub:mark``: FAIL when the store is behind
    (restored from a backup, or a copy), which its consumers refuse; None (no line) without
    a store, a hub id, a mark or a readable counter.

    The mark is read first: a store that committed what the mark says holds at least as
    much when read after it, so a running consumer's commits cannot fail the check.
    """
    shown, hub_id = store or ("", None)
    if hub_id is None or commit_counter is None:
        return None
    mark = client.zscore(keys.HUB_MARK, hub_id)
    counter = None if mark is None else commit_counter()
    if mark is None or counter is None:
        return None
    if counter < int(mark):
        return Check(
            "hub-mark",
            Status.FAIL,
            f"{shown} has committed {counter} ingest batches, but this Redis saw hub {hub_id} "
            f"commit {int(mark)} ({keys.HUB_MARK}): it was restored from a backup or is a copy, "
            "and its consumers refuse to start",
            "point the consumers at the hub's newest store; if this is it, run hubsync hub "
            'restore (docs/operations.md, "Backup and restore")',
        )
    return Check(
        "hub-mark",
        Status.OK,
        f"{shown} has committed {counter} ingest batches, this Redis saw {int(mark)}",
    )
