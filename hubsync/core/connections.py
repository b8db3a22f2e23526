"""The one place hubsync builds Redis clients: from a ``RedisTarget`` and the role the client plays.

A ``RedisTarget`` is one Redis as a process was told to reach it: its URL, the
password of ``--redis-password-file`` (read once), and ``--redis-cluster``. It
is an immutable value, built once from the settings (``RedisTarget.from_settings``)
and handed to whatever talks to that Redis; two targets of one process (the
pipeline's Redis and RQ's, or two tests' servers) never share credentials or a
cluster mode. Every process reaches Redis through ``connect(target, role)`` (or
``probe(target)`` for a CLI command that must find Redis now), so timeouts,
retries and credentials are decided here and nowhere else:

* ``Role.DAEMON``: a long-lived command client (relay sender, consumer commands,
  leases, RQ jobs). Short timeouts so a dead server is noticed rather than
  waited on; two quick retries absorb the one failure a connection left over
  from before a Redis restart gives on first use.
* ``Role.BLOCKING``: a client that blocks in XREADGROUP. Its socket timeout is
  the block time plus ``BLOCK_MARGIN_SECONDS``, or every idle read would look
  like a dead connection.
* ``Role.PROBE``: a CLI command or health check. It fails fast: ``probe``
  PINGs once and an unreachable Redis becomes ``RedisUnavailableError`` (exit
  3, one line); a URL redis-py cannot parse becomes ``ConfigError`` (exit 2).

A wrong user or password is no outage: every first contact (``probe``,
``ping``, ``wait_until_reachable``, a cluster's slot table) turns Redis's
refusal into ``RedisCredentialsError`` (exit 1, one line naming the user,
never the password) through ``credentials_refused``.

Credentials and transport come from the URL and are handled here only:
``redis://user:password@host:port/db`` authenticates as an ACL user (AUTH with
both), ``rediss://`` speaks TLS (``ssl_*`` query parameters pass through to
redis-py), ``unix://`` uses a socket. A password never leaves this module in a
message: errors name the URL through ``safe_url``.

A command keeps its password off its command line (``/proc/<pid>/cmdline`` is
readable by every user of the machine): the whole URL in ``HUBSYNC_REDIS_URL``,
or a URL without password plus ``--redis-password-file`` (every command that
talks to Redis takes it). ``RedisTarget.of``, called once at a command's start,
reads that file; its password is the one every client of that target
authenticates with when the URL names none. It warns once when the URL on the
command line carries a password. A target's ``repr`` and ``str`` never show a
password.

Redis Cluster (docs/deploy.md): ``--redis-cluster auto|yes|no``
(``HUBSYNC_REDIS_CLUSTER``, the target's ``cluster``) decides whether
``connect`` hands out a ``redis.cluster.RedisCluster`` with the same timeouts
and retries per role. ``auto`` asks the server once per target (``INFO
cluster``: ``cluster_enabled:1``) and the target remembers the answer; a server
that cannot be asked yet gets a single-server client, so a daemon waits for
Redis with ``wait_for_redis`` before it makes the clients it keeps. Code takes
either kind as ``RedisClient``; the few reads that name keys of several hash
slots in one command go through ``hubsync.core.stream_reads``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Literal, TypeAlias, overload
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import (
    ClusterDownError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.retry import Retry

from hubsync.core.backoff import Backoff
from hubsync.core.errors import ConfigError, RedisCredentialsError, RedisUnavailableError
from hubsync.core.redis_credentials import (
    read_password_file,
    refuse_two_passwords,
    url_password,
    url_user,
)
from hubsync.core.settings import ClusterMode, CommonSettings, safe_url

log = logging.getLogger(__name__)

RedisClient: TypeAlias = redis.Redis | RedisCluster
"""What ``connect`` hands out: a client of one server, or of a Redis Cluster."""
RedisPipeline: TypeAlias = redis.client.Pipeline | ClusterPipeline
"""A pipeline of either kind of client (on a cluster: not a transaction, split by node)."""

CONNECT_TIMEOUT_SECONDS = 2.0
"""How long opening a connection may take, in every role: a live server answers in milliseconds."""
COMMAND_TIMEOUT_SECONDS = 5.0
"""How long a daemon waits for one reply before it calls Redis unavailable."""
PROBE_TIMEOUT_SECONDS = 10.0
"""How long a CLI command waits for one reply (operator commands may scan many streams)."""
BLOCK_MARGIN_SECONDS = 5.0
"""What a blocking reader's socket timeout adds to its block time."""
HEALTH_CHECK_INTERVAL_SECONDS = 30
"""A pooled connection idle this long is PINGed before use (redis-py ``health_check_interval``)."""
START_WAIT_CAP_SECONDS = 2.0
"""Longest pause between two PINGs while a daemon waits for Redis at start."""

CLUSTER_UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    ClusterDownError,  # CLUSTERDOWN, MASTERDOWN: a master lost, its replica not promoted yet
    TryAgainError,  # TRYAGAIN: a slot being moved or failed over
    SlotNotCoveredError,  # the client's slot table has no node for the key's slot (yet)
)
"""What a Redis Cluster answers while a master is failed over: try again later."""
UNREACHABLE_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError,  # includes BusyLoadingError (LOADING)
    redis.TimeoutError,
    *CLUSTER_UNAVAILABLE_ERRORS,
)
"""Errors that mean "Redis is not there (yet)": of a PING, or of a cluster mid-failover."""
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    *UNREACHABLE_ERRORS,
    redis.ReadOnlyError,  # a replica, or a primary being failed over: a write refused for now
)
"""Errors of a daemon's commands that mean "try again later", as opposed to a bug in the
request: Redis unreachable, or reachable but not taking writes (READONLY). A PING never
answers READONLY, so what probes and ``--check`` catch is ``UNREACHABLE_ERRORS``."""
CREDENTIAL_ERRORS: tuple[type[BaseException], ...] = (
    redis.AuthenticationError,
    redis.exceptions.AuthorizationError,
)
"""ConnectionError subclasses that no amount of waiting fixes: a wrong user or password."""


class Role(StrEnum):
    """What a client is for; it decides the client's timeouts and retries."""

    DAEMON = "daemon"
    BLOCKING = "blocking"
    PROBE = "probe"


@dataclass(frozen=True)
class ClientOptions:
    """Timeouts and retries of one client, as redis-py takes them."""

    socket_connect_timeout: float
    socket_timeout: float
    retry: Retry
    health_check_interval: int


def client_options(role: Role, block_seconds: float | None = None) -> ClientOptions:
    """The options a client in ``role`` gets; ``block_seconds`` is required for ``BLOCKING``."""
    if role is Role.PROBE:
        # one immediate retry absorbs a stale pooled connection; no more, the
        # operator is waiting for an answer
        return ClientOptions(
            CONNECT_TIMEOUT_SECONDS, PROBE_TIMEOUT_SECONDS, Retry(NoBackoff(), 1), 0
        )
    socket_timeout = COMMAND_TIMEOUT_SECONDS
    if role is Role.BLOCKING:
        if block_seconds is None:
            raise ValueError("a blocking client needs block_seconds")
        socket_timeout = block_seconds + BLOCK_MARGIN_SECONDS
    return ClientOptions(
        CONNECT_TIMEOUT_SECONDS,
        socket_timeout,
        Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
        HEALTH_CHECK_INTERVAL_SECONDS,
    )


class _ClusterAnswer:
    """``auto``'s answer for one target once the server gave it (None: not yet)."""

    __slots__ = ("found",)

    def __init__(self) -> None:
        self.found: bool | None = None


@dataclass(frozen=True, repr=False)
class RedisTarget:
    """One Redis as this process reaches it: URL, password and ``--redis-cluster``.

    Build it once per command (``from_settings``, or ``of`` for a URL and a
    password file) and hand it to what talks to that Redis; ``connect``,
    ``probe`` and ``wait_for_redis`` take it. The URL carries the user, TLS
    (``rediss://``, ``ssl_*`` query parameters) and the database; ``password``
    is the one of ``--redis-password-file``, used when the URL names none (a
    target never holds both). ``repr`` and ``str`` never show a password:
    ``str`` is the URL as ``safe_url`` shows it.

    Under ``cluster="auto"`` the target asks its server once (``INFO cluster``)
    and remembers the answer: a server does not turn into a cluster while a
    process runs. That memo is the one thing of a target that changes, and it
    takes no part in equality.
    """

    url: str
    password: str | None = None
    cluster: ClusterMode = "auto"
    _answer: _ClusterAnswer = field(
        default_factory=_ClusterAnswer, init=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if self.cluster not in ("auto", "yes", "no"):
            raise ConfigError(f"--redis-cluster: {self.cluster!r} is not one of auto, yes, no")
        if self.password is not None:
            refuse_two_passwords(self.url)

    @classmethod
    def of(
        cls,
        url: str,
        password_file: Path | None = None,
        cluster: ClusterMode = "auto",
        *,
        url_on_command_line: bool = False,
    ) -> RedisTarget:
        """The target of ``url`` with the password of ``password_file`` (read now, once).

        A URL that carries a password of its own and a password file at once is
        a ``ConfigError``: which one was meant cannot be guessed. A password in a
        URL given on the command line works, with one warning to move it out of
        argv.
        """
        password = None
        if password_file is not None:
            refuse_two_passwords(url)  # before the file is read: which one was meant?
            password = read_password_file(password_file)
        if url_on_command_line and url_password(url):
            log.warning(
                "the Redis URL on the command line carries a password, which every user of "
                "this machine can read in the process list; pass the URL in HUBSYNC_REDIS_URL, "
                "or the password in a file named by --redis-password-file"
            )
        return cls(url, password, cluster)

    @classmethod
    def from_settings(
        cls, settings: CommonSettings, *, url_on_command_line: bool = False
    ) -> RedisTarget:
        """The target of ``--redis-url``, ``--redis-password-file`` and ``--redis-cluster``."""
        return cls.of(
            settings.redis_url,
            settings.redis_password_file,
            settings.redis_cluster,
            url_on_command_line=url_on_command_line,
        )

    def with_url(self, url: str) -> RedisTarget:
        """Another Redis reached as this one: the same password (unless ``url`` names its
        own) and the same ``--redis-cluster``."""
        return RedisTarget(url, None if url_password(url) else self.password, self.cluster)

    @property
    def user(self) -> str:
        """The ACL user this target authenticates as: the URL's, or Redis's ``default``."""
        return url_user(self.url) or "default"

    @property
    def has_password(self) -> bool:
        """Whether a password is given, in the URL or from a password file."""
        return self.password is not None or bool(url_password(self.url))

    @property
    def shown(self) -> str:
        """The URL as shown to people (``safe_url``: no user, no password)."""
        return safe_url(self.url)

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        password = "'***'" if self.has_password else "None"
        return (
            f"RedisTarget(url={self.shown!r}, user={self.user!r}, password={password}, "
            f"cluster={self.cluster!r})"
        )

    def uses_cluster(self) -> bool:
        """Whether ``connect(self)`` makes a cluster client: ``--redis-cluster``, or under
        ``auto`` the server's own answer (``INFO cluster``), asked once.

        Under ``auto`` a server that cannot be asked now (unreachable, a wrong
        password, INFO refused by its ACL) counts as a single server, and is
        asked again next time; ``yes`` never asks.
        """
        if self.cluster != "auto":
            return self.cluster == "yes"
        known = self._answer.found
        if known is not None:
            return known
        try:
            found = _cluster_enabled(self)
        except redis.RedisError:
            return False  # not answered: the first command says why (exit 3, 1 or 2)
        self._answer.found = found
        if found:
            log.debug("Redis at %s is a cluster node: using a cluster client", self.shown)
        return found

    def server_is_cluster(self) -> bool:
        """Whether the server says it is a cluster node (``INFO cluster``), whatever
        ``cluster`` says; False when it cannot be asked now."""
        try:
            return _cluster_enabled(self)
        except redis.RedisError:
            return False  # not answered: the first command says why (exit 3, 1 or 2)


@overload
def connect(
    target: RedisTarget,
    role: Role = Role.DAEMON,
    *,
    block_seconds: float | None = None,
    cluster: Literal[False],
) -> redis.Redis: ...


@overload
def connect(
    target: RedisTarget,
    role: Role = Role.DAEMON,
    *,
    block_seconds: float | None = None,
    cluster: bool | None = None,
) -> RedisClient: ...


def connect(
    target: RedisTarget,
    role: Role = Role.DAEMON,
    *,
    block_seconds: float | None = None,
    cluster: bool | None = None,
) -> RedisClient:
    """A client of ``target`` for ``role``. A malformed URL is a ``ConfigError``.

    ``cluster`` None follows the target's ``--redis-cluster`` (``uses_cluster``);
    False makes a client of that one server even if it is a cluster node (to
    start or administer it). A single server's client makes no round trip yet.
    A cluster's does (redis-py reads the slot table when it is made): an
    unreachable cluster is a ``RedisUnavailableError`` (exit 3), so a daemon
    calls ``wait_for_redis`` first.
    """
    options = client_options(role, block_seconds)
    if target.uses_cluster() if cluster is None else cluster:
        return _cluster_client(target, options)
    return _client(target, options)


def is_cluster(client: RedisClient) -> bool:
    """Whether ``client`` is a Redis Cluster's (its multi-key reads go slot by slot)."""
    return isinstance(client, RedisCluster)


def master_of(client: RedisClient, key: str | bytes) -> tuple[redis.Redis, str]:
    """The single-server client of ``key``'s master and the node's name: ``client`` itself
    (and ``""``) for a single server; on a cluster, the node client ``client`` keeps."""
    if not isinstance(client, RedisCluster):
        return client, ""
    node = client.get_node_from_key(key)  # type: ignore[no-untyped-call]
    return client.get_redis_connection(node), str(node.name)


def reread_slots(client: RedisClient) -> None:
    """After a failed command on a cluster: read the slot table again, so a failed-over
    master is found next time (a single server's client has nothing to re-read). Never
    raises: the next command says what is wrong."""
    if isinstance(client, RedisCluster):
        with contextlib.suppress(redis.RedisError, redis.exceptions.RedisClusterException):
            client.nodes_manager.initialize()


def reconnect(client: RedisClient) -> None:
    """After a failed command: a cluster reads its slot table again (``reread_slots``), a
    single server's client drops its pooled connections (to a restarted server). Never raises."""
    if isinstance(client, RedisCluster):
        reread_slots(client)
        return
    with contextlib.suppress(redis.RedisError):
        client.connection_pool.disconnect()


def probe(target: RedisTarget) -> RedisClient:
    """A ``PROBE`` client of ``target`` that answered PING.

    Raises ``RedisUnavailableError`` (exit 3) if Redis cannot be reached and
    ``ConfigError`` (exit 2) if the URL is malformed.
    """
    client = connect(target, Role.PROBE)
    try:
        ping(client, target)
    except (RedisUnavailableError, RedisCredentialsError):
        client.close()
        raise
    return client


def ping(client: RedisClient, target: RedisTarget) -> None:
    """PING through ``client``; raise ``RedisUnavailableError`` (exit 3) if Redis cannot answer."""
    try:
        client.ping()
    except CREDENTIAL_ERRORS as exc:
        raise credentials_refused(target, exc) from None
    except UNREACHABLE_ERRORS as exc:
        raise RedisUnavailableError(f"{target.shown}: {type(exc).__name__}") from None


def credentials_refused(target: RedisTarget, exc: BaseException) -> RedisCredentialsError:
    """Redis's refusal of ``target``'s credentials as one line naming the user.

    The user is the URL's, or ``default`` (Redis's user for a bare password).
    Redis's own reason for a wrong password is kept (``user is disabled``...):
    Redis never repeats the password in it, and neither does this message.
    """
    user = target.user
    where = target.shown
    reason = str(exc).rstrip(". ") or type(exc).__name__
    if target.has_password:
        return RedisCredentialsError(
            f"Redis refused the password for user {user} at {where} ({reason}); check the "
            "password in --redis-password-file (HUBSYNC_REDIS_PASSWORD_FILE) or in the Redis URL"
        )
    return RedisCredentialsError(
        f"Redis refused user {user} at {where} without a password; put the password "
        "in a file named by --redis-password-file (HUBSYNC_REDIS_PASSWORD_FILE), or in "
        "HUBSYNC_REDIS_URL"
    )


def wait_for_redis(target: RedisTarget, stop: threading.Event) -> bool:
    """``wait_until_reachable`` through a short-lived single-server client of ``target``.

    A daemon calls this before it makes the clients it keeps: a cluster's client
    cannot be made while the cluster is down, and ``--redis-cluster auto`` can
    only ask a server that answers. PING is answered by any cluster node.
    """
    client = _client(target, client_options(Role.DAEMON))
    try:
        return wait_until_reachable(client, target, stop)
    finally:
        client.close()


def wait_until_reachable(client: RedisClient, target: RedisTarget, stop: threading.Event) -> bool:
    """PING until Redis answers, backing off; False if ``stop`` was set first.

    A daemon calls this at start, so compose ordering or a reboot that brings
    Redis up after it does not kill it. It logs one line when Redis is found
    unreachable and one when it answers, never a line per retry. A wrong user
    or password is not waited out: it raises ``RedisCredentialsError``.
    """
    backoff = Backoff(base=0.05, cap=START_WAIT_CAP_SECONDS)
    failures = 0
    while not stop.is_set():
        try:
            client.ping()
        except CREDENTIAL_ERRORS as exc:
            raise credentials_refused(target, exc) from None
        except UNREACHABLE_ERRORS as exc:
            if failures == 0:
                log.warning(
                    "Redis unreachable at %s (%s); retrying with backoff",
                    target.shown,
                    type(exc).__name__,
                )
            failures += 1
            stop.wait(backoff.next_delay())
            continue
        if failures:
            log.info("Redis reachable at %s", target.shown)
        return True
    return False


def _cluster_enabled(target: RedisTarget) -> bool:
    """``INFO cluster`` of the one server of ``target``: ``cluster_enabled:1``?"""
    asker = _client(target, client_options(Role.PROBE))
    try:
        return str(asker.info("cluster").get("cluster_enabled")) == "1"
    finally:
        asker.close()


def _credentials(target: RedisTarget) -> dict[str, str]:
    # A target never holds a password of its own beside one in its URL.
    return {} if target.password is None else {"password": target.password}


_CLUSTER_START_ERRORS: tuple[type[BaseException], ...] = (
    RedisClusterException,
    *UNREACHABLE_ERRORS,
)


def _cluster_client(target: RedisTarget, options: ClientOptions) -> RedisCluster:
    """A ``RedisCluster`` of ``target`` (any node: redis-py finds the others), reading its slots.

    Timeouts are the role's; the role's retry count is the cluster client's too,
    each retry re-reading the slot table (how a failed-over master is found).
    """
    url = target.url
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or parts.path.strip("/") not in ("", "0"):
        raise ConfigError(
            f"Redis URL {safe_url(url)}: a cluster is reached over TCP and has database 0 only "
            "(redis://[user:password@]host:port, or rediss:// for TLS)"
        )
    try:
        return RedisCluster.from_url(
            url,
            socket_connect_timeout=options.socket_connect_timeout,
            socket_timeout=options.socket_timeout,
            retry=Retry(NoBackoff(), options.retry.get_retries()),
            **_credentials(target),
        )
    except ValueError as exc:
        raise ConfigError(
            f"Redis URL {safe_url(url)}: {exc} (expected redis://[user:password@]host:port, "
            "or rediss:// for TLS)"
        ) from None
    except CREDENTIAL_ERRORS as exc:
        raise credentials_refused(target, exc) from None
    except _CLUSTER_START_ERRORS as exc:
        raise RedisUnavailableError(
            f"{safe_url(url)}: the cluster's slot table could not be read ({type(exc).__name__})"
        ) from None


def _client(target: RedisTarget, options: ClientOptions) -> redis.Redis:
    # ACL user and password and TLS (rediss://) go here; a cluster's in _cluster_client.
    try:
        return redis.Redis.from_url(
            target.url,
            socket_connect_timeout=options.socket_connect_timeout,
            socket_timeout=options.socket_timeout,
            retry=options.retry,
            retry_on_error=[redis.ConnectionError],
            health_check_interval=options.health_check_interval,
            **_credentials(target),
        )
    except ValueError as exc:
        raise ConfigError(
            f"Redis URL {safe_url(target.url)}: {exc} (expected "
            "redis://[user:password@]host:port/db, rediss:// for TLS, or unix:///path)"
        ) from None
