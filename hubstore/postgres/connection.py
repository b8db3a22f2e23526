"""Connections of the PostgreSQL hub store: its URL, its pool, and how an operation is retried.

A store holds one ``psycopg_pool.ConnectionPool`` (at most ``pool_size``
connections, autocommit; a write opens its own transaction), so one store may
be shared by the threads of a process. ``PostgresDatabase.run`` runs one
operation on a pooled connection and rides out what a busy database does to
it:

* a deadlock or serialization failure (another writer took the same keys in
  another order) rolls the transaction back and re-runs it whole, after the
  one backoff of ``hubsync.core.backoff`` (2 ms doubling up to 200 ms, jittered),
  until ``busy_budget`` runs out; only then does ``StoreBusyError`` rise;
* ``LostRace``, raised by an operation whose insert found a row another
  writer committed meanwhile, re-runs it at once: that row is committed, so
  the next attempt reads it;
* a pooled connection the server dropped (a restart) is discarded with the
  pool's other dead ones and the operation tried once more; while the server
  is away the pool tries to reconnect every few seconds (``RECONNECT_TIMEOUT``),
  so the store answers soon after it is back (a failover);
* any other database error is a ``StoreError`` naming the store by its URL
  with the password masked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors

from hubstore.errors import StoreError, StoreOpenError
from hubstore.factory import shown_url, unsplit_url
from hubsync.core.backoff import Backoff
from hubsync.core.closing import ClosesOnExit
from hubsync.core.errors import ConfigError, StoreBusyError

log = logging.getLogger(__name__)

T = TypeVar("T")

Connection = psycopg.Connection[Any]

SCHEMES = ("postgresql", "postgres")

DEFAULT_POOL_SIZE = 4
"""The most connections one store opens unless the URL says ``pool_size``."""

MAX_POOL_SIZE = 100

DEFAULT_CONNECT_TIMEOUT = 10
"""Seconds to establish a connection unless the URL says ``connect_timeout``."""

DEFAULT_BUSY_BUDGET = 120.0
"""Seconds one operation keeps retrying deadlocks and serialization failures."""

FIRST_RETRY_DELAY = 0.002
MAX_RETRY_DELAY = 0.2

MAX_POOL_WAIT = 30.0
"""The longest an operation waits for a free connection of the pool, in seconds."""

RECONNECT_TIMEOUT = 10.0
"""How long one round of the pool's reconnection tries lasts (1 s, 2 s, 4 s apart) before a
new round starts from 1 s: psycopg_pool's default (300 s) lets the pause between tries grow
to minutes during an outage, so the store would stay idle that long after a failover."""

RETRIED = (
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    pg_errors.LockNotAvailable,
)
"""Errors after which the whole transaction is run again (within the busy budget)."""

_SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})
"""admin_shutdown, crash_shutdown, cannot_connect_now: the server went away."""


class LostRace(Exception):
    """An insert found a row that another writer committed meanwhile: judge the batch again."""


@dataclass(frozen=True, slots=True)
class PostgresTarget:
    """Where a ``postgresql://`` hub URL points: libpq's URL, how it is shown, the pool size."""

    conninfo: str
    shown: str
    pool_size: int


def postgres_target(url: str) -> PostgresTarget:
    """Split a hub URL into libpq's URL and hubsync's own parameter (``pool_size``).

    ``ConfigError`` for another scheme, a bad ``pool_size`` or parameters libpq
    does not know, naming the URL with its password masked.
    """
    shown = shown_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"hub URL {shown!r}: {exc}") from None
    if parts.scheme.lower() not in SCHEMES:
        raise ConfigError(
            f"hub URL {shown!r} must start with postgresql:// (or postgres://): "
            "postgresql://user[:password]@host[:port]/database"
        )
    query = parse_qsl(parts.query, keep_blank_values=True)
    pool_size = DEFAULT_POOL_SIZE
    kept: list[tuple[str, str]] = []
    for name, value in query:
        if name == "pool_size":
            if not value.isdigit() or not 1 <= int(value) <= MAX_POOL_SIZE:
                raise ConfigError(
                    f"hub URL {shown!r}: pool_size must be a whole number from 1 to "
                    f"{MAX_POOL_SIZE}, got {value!r}"
                )
            pool_size = int(value)
        else:
            kept.append((name, value))
    if not any(name == "connect_timeout" for name, _ in kept):
        kept.append(("connect_timeout", str(DEFAULT_CONNECT_TIMEOUT)))
    if not any(name == "application_name" for name, _ in kept):
        kept.append(("application_name", "hubsync"))
    conninfo = unsplit_url(
        parts._replace(scheme="postgresql", query=urlencode(kept, quote_via=quote))
    )
    try:
        psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"hub URL {shown!r} is not a valid PostgreSQL URL: {exc}") from None
    return PostgresTarget(conninfo=conninfo, shown=shown, pool_size=pool_size)


def in_schema(url: str, schema: str) -> str:
    """``url`` with its tables in ``schema`` (libpq's ``options=-csearch_path=SCHEMA``, added to
    any options the URL has)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    given = " ".join(value for name, value in query if name == "options")
    kept = [(name, value) for name, value in query if name != "options"]
    kept.append(("options", f"{given} -csearch_path={schema}".strip()))
    return unsplit_url(parts._replace(query=urlencode(kept, quote_via=quote)))


def connect(target: PostgresTarget) -> Connection:
    """One autocommit connection outside the pool (opening, migrating): precise errors."""
    try:
        return psycopg.connect(target.conninfo, autocommit=True)
    except psycopg.Error as exc:
        raise StoreOpenError(
            f"cannot connect to the hub store {target.shown} ({_one_line(exc)}); check the URL, "
            "that the server is up and that the database exists (hubsync does not create it)"
        ) from None


@contextmanager
def database_errors(target: PostgresTarget) -> Iterator[None]:
    """Turn a driver error inside the block into a ``StoreError`` naming the masked URL."""
    try:
        yield
    except psycopg.Error as exc:
        raise StoreError(f"hub store {target.shown} failed: {_one_line(exc)}") from None


class PostgresDatabase(ClosesOnExit):
    """A pool of connections to the hub store's database, and the retries of each operation."""

    def __init__(self, target: PostgresTarget, *, busy_budget: float) -> None:
        self.target = target
        self.busy_budget = busy_budget
        self.closed = False
        self._pool: psycopg_pool.ConnectionPool[Connection] = psycopg_pool.ConnectionPool(
            target.conninfo,
            min_size=1,
            max_size=target.pool_size,
            kwargs={"autocommit": True},
            open=False,
            timeout=max(1.0, min(busy_budget, MAX_POOL_WAIT)),
            reconnect_timeout=RECONNECT_TIMEOUT,
            name="hubsync-hub",
        )
        self._pool.open(wait=False)

    def read(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` (reads only) outside a transaction: each statement sees the latest commits."""
        return self._run(work, _plain)

    def write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one transaction, re-run whole after a deadlock or a lost race."""
        return self._run(work, _transaction)

    def write_pipelined(self, work: Callable[[Connection], T]) -> T:
        """As ``write``, in pipeline mode: statements go out together until a result is read."""
        return self._run(work, _pipelined_transaction)

    def close(self) -> None:
        """Close every connection of the pool (idempotent)."""
        if not self.closed:
            self.closed = True
            self._pool.close()

    def _run(
        self,
        work: Callable[[Connection], T],
        scope: Callable[[Connection], Any],
    ) -> T:
        deadline = time.monotonic() + self.busy_budget
        backoff = Backoff(base=FIRST_RETRY_DELAY, cap=MAX_RETRY_DELAY)
        attempts = 0
        reconnected = False
        while True:
            attempts += 1
            try:
                with self._pool.connection() as conn, scope(conn):
                    return work(conn)
            except LostRace:
                log.debug("%s: lost a race for a key (attempt %s); judging again", self, attempts)
                if time.monotonic() < deadline:
                    continue
                cause = "kept losing races for its keys"
            except RETRIED as exc:
                log.debug("%s: %s (attempt %s); retrying", self, exc.sqlstate, attempts)
                if time.monotonic() < deadline:
                    time.sleep(backoff.next_delay())
                    continue
                cause = f"kept failing with {type(exc).__name__}"
            except psycopg_pool.PoolTimeout:
                raise StoreError(
                    f"hub store {self.target.shown}: no connection within "
                    f"{self._pool.timeout:.0f}s; check that the server is up and accepts "
                    "connections"
                ) from None
            except psycopg.Error as exc:
                if _server_gone(exc) and not reconnected:
                    # Pooled connections outlived the server (a restart): drop them, go again.
                    reconnected = True
                    log.info("%s: connection lost (%s); reconnecting", self, _one_line(exc))
                    self._pool.check()
                    continue
                raise StoreError(
                    f"hub store {self.target.shown} failed: {_one_line(exc)}"
                ) from None
            raise StoreBusyError(
                f"hub store {self.target.shown}: an operation {cause} for "
                f"{self.busy_budget:.0f}s over {attempts} attempts; check for a stuck session "
                "holding locks (pg_stat_activity)"
            )

    def __str__(self) -> str:
        return f"hub store {self.target.shown}"


@contextmanager
def _plain(conn: Connection) -> Iterator[None]:
    yield


@contextmanager
def _transaction(conn: Connection) -> Iterator[None]:
    with conn.transaction():
        yield


@contextmanager
def _pipelined_transaction(conn: Connection) -> Iterator[None]:
    with conn.pipeline(), conn.transaction():
        yield


def _server_gone(exc: psycopg.Error) -> bool:
    if exc.sqlstate in _SERVER_GONE:
        return True
    return isinstance(exc, psycopg.OperationalError) and (
        exc.sqlstate is None or exc.sqlstate.startswith("08")
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
