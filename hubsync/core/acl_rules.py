"""Least-privilege Redis users: what each hubsync role may run, on which keys, as ACL rules.

Each role's user gets exactly the commands its code sends, on the keys
``hubsync/core/keys.py`` names for it, and nothing else (docs/operations.md,
"Least-privilege Redis users"):

* a **runtime** (its relay, and with ``effects`` its shared-effect holders)
  appends to the events streams of its own hub projects, reads and trims its
  own ack streams, and writes its own health key;
* the **consumer** reads the events streams in group ``hub`` and answers on
  the ack, dead-letter and alert streams;
* the **operator** only reads (``status``, ``dead list``, ``alerts``,
  ``lease show|list``, ``doctor``);
* the **replayer** is an operator who may also run ``dead replay``.

How Redis checks these (7.0+): a command passes if the user's root rules or
one of its selectors ``(...)`` allow the command *and every key it names*. A
function of hubsync's library (``hubstore/redis_functions.py``) is checked
twice: FCALL against the keys passed in KEYS, then every command the function
runs, against the same user. So whoever may run a function may also run its
commands directly: the replayer's ``dead_replay`` XADDs to events streams,
hence a separate role from the read-only operator. No user here may run EVAL,
EVALSHA, SCRIPT LOAD or FUNCTION LOAD (the library is loaded once by the
administrator: ``hubsync hub migrate --redis-url``), nor SELECT another
database.

Key patterns are Redis globs: ``{`` and ``}`` are literal there, ``* ? [ ] \\``
are not, so every id placed in a pattern goes through ``glob_literal``.
Passwords are never printed: a user is given the SHA-256 of its password
(``#<hex>``), which Redis accepts in place of the password itself.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hubsync.core import keys
from hubsync.core.errors import ConfigError
from hubsync.core.names import validate_name

DEFAULT_USER_PREFIX = "hubsync-"
"""What every user name starts with unless ``--user-prefix`` says otherwise."""

CONNECTION_COMMANDS = ("ping", "hello", "info", "cluster|slots", "command")
"""What redis-py may send on a connection of its own: PING (health checks, probes), HELLO (a
``protocol=3`` URL); and what a Redis Cluster client needs: INFO (``--redis-cluster auto``
asks ``INFO cluster``), CLUSTER SLOTS (redis-py's slot table) and COMMAND (redis-py's key
positions). AUTH is always allowed. Not SELECT: ACLs cannot limit a user to one database, so
hubsync's users work in database 0 (a URL naming another one is refused at connect)."""

CLIENT_SETINFO = "client|setinfo"
"""redis-py 5+ sends CLIENT SETINFO on connect and ignores a refusal; allowed on a line of its
own because Redis 7.0 and 7.1 do not know the subcommand and refuse the whole line."""

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")
_RESOURCE_GLOB = re.compile(r"[A-Za-z0-9._:@/+=*?-]{1,128}")
_USER_PREFIX = re.compile(r"[A-Za-z0-9._:@/+=-]{0,64}")


def glob_literal(text: str) -> str:
    """``text`` as a Redis glob that matches only itself (``* ? [ ] \\`` escaped)."""
    return _GLOB_SPECIAL.sub(r"\\\1", text)


@dataclass(frozen=True)
class Grant:
    """Commands a user may run on the keys matching ``patterns``: one ACL selector.

    Without patterns the commands name no key and go in the user's root rules.
    ``read_only`` grants the keys for reading only (``%R~``), so a write command
    listed by mistake would still be refused.
    """

    commands: tuple[str, ...]
    patterns: tuple[str, ...] = ()
    read_only: bool = False

    def rules(self) -> list[str]:
        """This grant's ACL rules: ``+cmd`` words, or one selector ``(~pattern ... +cmd ...)``."""
        allowed = [f"+{command}" for command in self.commands]
        if not self.patterns:
            return allowed
        marker = "%R~" if self.read_only else "~"
        return ["(" + " ".join([*(marker + p for p in self.patterns), *allowed]) + ")"]


@dataclass(frozen=True)
class RedisUser:
    """One Redis user: its name and its grants."""

    name: str
    grants: tuple[Grant, ...]

    def setuser_lines(self, password: str | None = None) -> list[str]:
        """``ACL SETUSER`` lines that make this user exactly its grants (redis-cli pipeable).

        With ``password`` the user's passwords are replaced by that one (given
        as its SHA-256, never in clear) and the user is switched on. Without it
        the lines set the rules only: an existing user keeps its passwords and
        its on/off state, and a new user stays off, with no password, until
        one is set.
        """
        login = []
        if password is not None:
            login = ["resetpass", "#" + hashlib.sha256(password.encode()).hexdigest(), "on"]
        rules = [
            *login,
            "resetkeys",
            "resetchannels",
            "clearselectors",
            "-@all",
            *(rule for grant in self.grants for rule in grant.rules()),
        ]
        return [
            " ".join(["ACL", "SETUSER", self.name, *rules]),
            " ".join(["ACL", "SETUSER", self.name, f"+{CLIENT_SETINFO}"]),
        ]


def user_prefix(prefix: str) -> str:
    """``prefix`` if it can start a Redis user name (and sit in a URL), else ``ConfigError``."""
    if not _USER_PREFIX.fullmatch(prefix):
        raise ConfigError(
            "user prefix may hold only letters, digits and . _ : @ / + = - (at most 64)"
        )
    return prefix


def resource_glob(pattern: str) -> str:
    """A lease resource pattern (an id, ``*`` and ``?`` allowed), or ``ConfigError``."""
    if not _RESOURCE_GLOB.fullmatch(pattern):
        raise ConfigError(
            "effects pattern may hold only letters, digits, . _ : @ / + = - and the "
            "wildcards * and ? (at most 128 characters), e.g. 'effect:*'"
        )
    return pattern


def _connection(*extra: str) -> Grant:
    return Grant((*CONNECTION_COMMANDS, *extra))


def runtime_user(
    runtime_id: str,
    hub_projects: Sequence[str],
    *,
    effects: Sequence[str] = (),
    prefix: str = DEFAULT_USER_PREFIX,
) -> RedisUser:
    """The user of runtime ``runtime_id``, which syncs to ``hub_projects``.

    Its relay (producers/relay/) XADDs events and presence beats to
    ``hubsync:{P}:events`` and SADDs P to ``hubsync:projects`` (sender.py,
    daemon.py), XREADs its own ``hubsync:{P}:acks:{R}`` and XTRIMs what it
    applied (acks.py), and SETs, GETs (``relay --check``) and DELs
    ``hubsync:health:relay:R``. It never touches another runtime's acks, never
    trims or deletes from an events stream, never reads one.

    ``effects`` are lease-resource patterns (``effect:webhook:*``, or one
    resource) this runtime's shared-effect holders take leases on, given per
    runtime: FCALL of the lease functions (hubstore/lua/lease_*.lua,
    fenced_write.lua), which run TIME, HMGET, HSET and HDEL on
    ``hubsync:lease:{RES}`` and its ``:fenced:*`` values, XADD on its ``:log``,
    and only GET and INCR on its ``:counter``, so rewriting or deleting a lease
    hash never lowers the next token; a grant then waits for a replica (INFO
    replication, WAIT).

    The hub projects are the caller's: given on the command line today, and
    read from the hub's enrolled runtimes when the hub store can say them.
    """
    runtime = validate_name(runtime_id, "runtime id")
    projects = sorted({validate_name(p, "hub project") for p in hub_projects})
    if not projects:
        raise ConfigError(f"runtime {runtime} needs at least one hub project to write to")
    grants = [
        # leases: Redis's clock, and WAIT for a replica after a grant
        _connection(*(("time", "wait") if effects else ())),
        # its events streams: events and presence beats
        Grant(
            ("xadd",),
            tuple(glob_literal(keys.events_stream(p)) for p in projects),
        ),
        # announce its hub projects
        Grant(("sadd",), (glob_literal(keys.PROJECTS),)),
        # its own ack streams: read, then trim what it applied
        Grant(
            ("xread", "xtrim"),
            tuple(glob_literal(keys.acks_stream(p, runtime)) for p in projects),
        ),
        # its health key
        Grant(
            ("set", "get", "del"),
            (glob_literal(keys.relay_health(runtime)),),
        ),
    ]
    if effects:
        grants += _lease_grants(sorted({resource_glob(p) for p in effects}))
    return RedisUser(f"{user_prefix(prefix)}runtime-{runtime}", tuple(grants))


def _lease_grants(resources: Sequence[str]) -> list[Grant]:
    """The leases on ``resources``: their functions, and what those run on each key."""
    globs = [keys.lease_globs(r) for r in resources]
    return [
        Grant(("fcall", "fcall_ro"), tuple(p for g in globs for p in g)),
        Grant(("hmget", "hset", "hdel"), tuple(p for g in globs for p in (g.lease, g.fenced))),
        Grant(("xadd",), tuple(g.log for g in globs)),
        # the counter only goes up: no SET, DEL, DECR, INCRBY, RENAME, RESTORE or EXPIRE
        Grant(("get", "incr"), tuple(g.counter for g in globs)),
    ]


_ANY_EVENTS = f"{keys.PREFIX}:{{*}}:events"
_ANY_ACKS = f"{keys.PREFIX}:{{*}}:acks:{{*}}"
_ANY_DEAD = f"{keys.PREFIX}:{{*}}:dead"
_ANY_ALERTS = f"{keys.PREFIX}:{{*}}:alerts"


def consumer_user(*, prefix: str = DEFAULT_USER_PREFIX) -> RedisUser:
    """The user every hub consumer (``hubsync consume``) shares.

    consumers/stream/worker.py: SMEMBERS ``hubsync:projects``, XGROUP CREATE (MKSTREAM),
    XREADGROUP; reclaim.py: XPENDING, XCLAIM, XAUTOCLAIM, XINFO CONSUMERS;
    publishing.py: XADD to acks, dead and alerts, XACK; lag.py: TIME, XINFO
    GROUPS, XPENDING; trim.py and reclaim.py FCALL stream_trim_acked (EXISTS,
    XINFO GROUPS, XPENDING, XTRIM) and stream_remove_idle_consumer (XPENDING,
    XGROUP DELCONSUMER); health.py SETs, GETs and DELs its health key. It reads
    and sets ``hubsync:hub``, the hub id that owns the namespace's group, and reads and
    raises (ZSCORE, ZADD) ``hubsync:hub:mark``, how far that hub's store has committed,
    and reads and writes (HMGET, HSET) ``hubsync:revocations``, the revoked runtime keys;
    ``hubsync consumers remove`` (XAUTOCLAIM, XGROUP DELCONSUMER) runs as this user too.
    """
    grants = (
        _connection("time"),
        # the hub projects to read
        Grant(("smembers",), (glob_literal(keys.PROJECTS),)),
        # the hub id owning group hub, and how far its store has committed
        Grant(("get", "set"), (glob_literal(keys.HUB_IDENTITY),)),
        Grant(("zadd", "zscore"), (glob_literal(keys.HUB_MARK),)),
        # the revocations of runtime keys, kept beside the store
        Grant(("hmget", "hset"), (glob_literal(keys.REVOCATIONS),)),
        # events streams: group hub, reclaim, lag, trim (and its functions)
        Grant(
            (
                "xgroup|create",
                "xgroup|delconsumer",
                "xreadgroup",
                "xack",
                "xpending",
                "xclaim",
                "xautoclaim",
                "xinfo|groups",
                "xinfo|consumers",
                "exists",
                "xtrim",
                "fcall",
            ),
            (_ANY_EVENTS,),
        ),
        # outcomes, dead letters, alerts
        Grant(("xadd",), (_ANY_ACKS, _ANY_DEAD, _ANY_ALERTS)),
        # consumer health keys
        Grant(
            ("set", "get", "del"),
            (keys.CONSUMER_HEALTH_PATTERN,),
        ),
    )
    return RedisUser(f"{user_prefix(prefix)}consumer", grants)


_OPERATOR_ROOT = ("time", "scan", "info", "multi", "exec", "fcall_ro")
"""Keyless commands of the operator tools: Redis's clock, SCAN of health and lease keys, INFO
for doctor, MULTI/EXEC around a lease read, and FCALL_RO of hubsync's keyless
``library_version`` (doctor: is the library loaded?). In the root rules, which name no key,
FCALL_RO can call no function with a key."""

_OPERATOR_READS = Grant(
    (
        "smembers",
        "sismember",
        "exists",
        "xlen",
        "xrange",
        "xrevrange",
        "xpending",
        "xinfo|stream",
        "xinfo|groups",
        "xinfo|consumers",
        "get",
        "pttl",
        "hgetall",
        "zscore",
    ),
    (
        glob_literal(keys.PROJECTS),
        glob_literal(keys.HUB_IDENTITY),
        glob_literal(keys.HUB_MARK),
        _ANY_EVENTS,
        _ANY_DEAD,
        _ANY_ALERTS,
        keys.RELAY_HEALTH_PATTERN,
        keys.CONSUMER_HEALTH_PATTERN,
        f"{keys.PREFIX}:lease:*",
    ),
    read_only=True,
)
"""What ``status``, ``dead list``, ``alerts list``, ``lease show|list`` and ``doctor`` read."""


def operator_user(*, prefix: str = DEFAULT_USER_PREFIX) -> RedisUser:
    """A read-only user for ``status``, ``dead list``, ``alerts``, ``lease show|list`` and ``doctor``.

    consumers/views/queue_status.py and projects.py: SMEMBERS, SISMEMBER, EXISTS,
    XLEN, XINFO STREAM|GROUPS|CONSUMERS, XPENDING, XREVRANGE (presence), SCAN
    and GET/PTTL of the health keys, TIME; dead_letters.py: XLEN, XRANGE;
    alerts.py: XREVRANGE; hubstore/leases/client.py: HGETALL, GET (the counter) and TIME in
    MULTI/EXEC, SCAN, XREVRANGE of the log; doctor: INFO, SMEMBERS, XINFO
    GROUPS, GET ``hubsync:hub``, ZSCORE ``hubsync:hub:mark``. CONFIG GET is not granted (it can read
    ``requirepass``), so doctor states the AOF fsync policy as unknown. Ack
    streams are not readable: no operator command reads them.
    """
    grants = (_connection(*_OPERATOR_ROOT), _OPERATOR_READS)
    return RedisUser(f"{user_prefix(prefix)}operator", grants)


def replayer_user(*, prefix: str = DEFAULT_USER_PREFIX) -> RedisUser:
    """The operator's reads plus ``dead replay``: the dead_replay function XRANGEs and XDELs a
    letter on ``hubsync:{P}:dead`` and XADDs it to ``hubsync:{P}:events``.

    Redis checks a function's commands against its caller, so this user may also
    XADD to any events stream and XDEL dead letters directly; that is why replay
    is a user of its own and the operator stays read-only.
    """
    grants = (
        _connection(*_OPERATOR_ROOT),
        _OPERATOR_READS,
        # dead replay (the dead_replay function and its commands)
        Grant(
            ("fcall", "xrange", "xadd", "xdel"),
            (_ANY_DEAD, _ANY_EVENTS),
        ),
    )
    return RedisUser(f"{user_prefix(prefix)}replayer", grants)
