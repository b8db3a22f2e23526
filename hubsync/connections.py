"""The one place hubsync builds Redis clients: from a URL and the role the client plays.

Every process reaches Redis through ``connect`` (or ``probe`` for a CLI command
that must find Redis now), so timeouts, retries and credentials are decided here
and nowhere else:

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

Credentials and transport come from the URL and are handled here only:
``redis://user:password@host:port/db`` authenticates as an ACL user (AUTH with
both), ``rediss://`` speaks TLS (``ssl_*`` query parameters pass through to
redis-py), ``unix://`` uses a socket. A password never leaves this module in a
message: errors name the URL through ``safe_url``.

A daemon keeps its password off its command line (``/proc/<pid>/cmdline`` is
readable by every user of the machine): the whole URL in ``HUBSYNC_REDIS_URL``,
or a URL without password plus ``--redis-password-file``. ``use_credentials``,
called once at a daemon's start, reads that file and makes its password the
one every client of the process authenticates with when its URL names none;
it warns once when the URL on the command line carries a password.

A Redis Cluster branch belongs in ``_client``: detect a cluster node (``INFO
cluster``) and return a ``redis.cluster.RedisCluster`` built with the same
timeouts and retry. Not built yet; every caller already goes through here.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry

from hubsync.backoff import Backoff
from hubsync.errors import ConfigError, RedisUnavailableError
from hubsync.settings import safe_url

log = logging.getLogger(__name__)

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

UNREACHABLE_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError,  # includes BusyLoadingError (LOADING)
    redis.TimeoutError,
)
"""Errors of a PING that mean "Redis is not there (yet)"."""
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


def connect(
    url: str, role: Role = Role.DAEMON, *, block_seconds: float | None = None
) -> redis.Redis:
    """A client of ``url`` for ``role``; no round trip yet. A malformed URL is a ``ConfigError``."""
    return _client(url, client_options(role, block_seconds))


def probe(url: str) -> redis.Redis:
    """A ``PROBE`` client of ``url`` that answered PING.

    Raises ``RedisUnavailableError`` (exit 3) if Redis cannot be reached and
    ``ConfigError`` (exit 2) if the URL is malformed.
    """
    client = connect(url, Role.PROBE)
    try:
        ping(client, url)
    except RedisUnavailableError:
        client.close()
        raise
    return client


def ping(client: redis.Redis, url: str) -> None:
    """PING through ``client``; raise ``RedisUnavailableError`` (exit 3) if Redis cannot answer."""
    try:
        client.ping()
    except CREDENTIAL_ERRORS:
        raise
    except UNREACHABLE_ERRORS as exc:
        raise RedisUnavailableError(f"{safe_url(url)}: {type(exc).__name__}") from None


def wait_until_reachable(client: redis.Redis, url: str, stop: threading.Event) -> bool:
    """PING until Redis answers, backing off; False if ``stop`` was set first.

    A daemon calls this at start, so compose ordering or a reboot that brings
    Redis up after it does not kill it. It logs one line when Redis is found
    unreachable and one when it answers, never a line per retry. A wrong user
    or password is not waited out: it raises.
    """
    backoff = Backoff(base=0.05, cap=START_WAIT_CAP_SECONDS)
    failures = 0
    while not stop.is_set():
        try:
            client.ping()
        except CREDENTIAL_ERRORS:
            raise
        except UNREACHABLE_ERRORS as exc:
            if failures == 0:
                log.warning(
                    "Redis unreachable at %s (%s); retrying with backoff",
                    safe_url(url),
                    type(exc).__name__,
                )
            failures += 1
            stop.wait(backoff.next_delay())
            continue
        if failures:
            log.info("Redis reachable at %s", safe_url(url))
        return True
    return False


_process_password: str | None = None
"""The password of ``--redis-password-file``, for every client whose URL names none."""


def read_password_file(path: Path) -> str:
    """The password a file holds, surrounding whitespace dropped; ``ConfigError`` if none.

    The message names the file, never its content.
    """
    try:
        password = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(
            f"--redis-password-file {path}: cannot read it ({reason}); give a readable file "
            "holding the Redis password"
        ) from None
    if not password:
        raise ConfigError(
            f"--redis-password-file {path}: the file is empty; put the password in it"
        )
    return password


def use_credentials(
    url: str, password_file: Path | None, *, url_on_command_line: bool = False
) -> None:
    """Set this process's Redis password from ``password_file`` (a daemon calls this once).

    A URL that carries a password of its own and a password file at once is a
    ``ConfigError``: which one was meant cannot be guessed. A password in a URL
    given on the command line works, with one warning to move it out of argv.
    """
    global _process_password
    url_password = _url_password(url)
    if password_file is not None:
        if url_password:
            raise ConfigError(
                f"--redis-password-file: the Redis URL {safe_url(url)} carries a password too; "
                "give it in one place only"
            )
        _process_password = read_password_file(password_file)
    else:
        _process_password = None
    if url_password and url_on_command_line:
        log.warning(
            "the Redis URL on the command line carries a password, which every user of this "
            "machine can read in the process list; pass the URL in HUBSYNC_REDIS_URL, or the "
            "password in a file named by --redis-password-file"
        )


def _url_password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None  # from_url names the malformed URL


def _client(url: str, options: ClientOptions) -> redis.Redis:
    # ACL user and password, TLS (rediss://) and later a cluster branch go here.
    # A password in the URL wins (redis-py lets URL options override keywords).
    credentials = {} if _process_password is None else {"password": _process_password}
    try:
        return redis.Redis.from_url(
            url,
            socket_connect_timeout=options.socket_connect_timeout,
            socket_timeout=options.socket_timeout,
            retry=options.retry,
            retry_on_error=[redis.ConnectionError],
            health_check_interval=options.health_check_interval,
            **credentials,
        )
    except ValueError as exc:
        raise ConfigError(
            f"Redis URL {safe_url(url)}: {exc} (expected redis://[user:password@]host:port/db, "
            "rediss:// for TLS, or unix:///path)"
        ) from None
