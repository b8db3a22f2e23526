"""SQLite plumbing shared by the runtime's files (registry and event stores).

Every file is WAL, has a busy timeout, and stores its schema version in
``PRAGMA user_version``; a file of another version is refused, never reshaped.
Writes go through ``write_transaction``: ``BEGIN IMMEDIATE`` (the write lock
is taken up front, so a transaction never fails half-way on a lock upgrade),
retried with jittered backoff on SQLITE_BUSY/LOCKED, so that "database is
locked" never reaches a caller while other processes write the same file.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from producers.errors import SchemaVersionError, StoreBusyError

T = TypeVar("T")

DEFAULT_BUSY_TIMEOUT = 5.0
"""Seconds SQLite's own busy handler waits for a lock before we retry."""

DEFAULT_LOCK_DEADLINE = 120.0
"""Seconds a write keeps retrying a locked file before ``StoreBusyError``."""

SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc)
    return "locked" in text or "busy" in text


def create_private_file(path: Path) -> None:
    """Create ``path`` (mode 0600) if missing; SQLite gives its -wal and -shm the same mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


class Database:
    """One connection to one SQLite file, safe to share between threads of a process.

    Separate processes (and separate ``Database`` objects) coordinate through
    SQLite's own locking; within one object a mutex serialises use of the
    connection.
    """

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        lock_deadline: float = DEFAULT_LOCK_DEADLINE,
        synchronous: str = "NORMAL",
    ) -> None:
        if synchronous.upper() not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}")
        self.path = path
        self.lock_deadline = lock_deadline
        self.mutex = threading.RLock()
        create_private_file(path)
        self.connection = sqlite3.connect(
            path,
            timeout=busy_timeout,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # guarded by self.mutex instead
            cached_statements=64,
        )
        self.closed = False
        try:
            # journal_mode needs a brief exclusive moment on a fresh file: retry it too.
            self.retrying(lambda: self.connection.execute("PRAGMA journal_mode=WAL").fetchone())
            self.connection.execute(f"PRAGMA synchronous={synchronous.upper()}")
        except BaseException:
            self.connection.close()
            raise

    def retrying(self, operation: Callable[[], T]) -> T:
        """Run ``operation``, retrying while the file is busy, up to the lock deadline."""
        deadline = time.monotonic() + self.lock_deadline
        delay = 0.001
        while True:
            try:
                return operation()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                if self.connection.in_transaction:
                    self.connection.rollback()
                if time.monotonic() >= deadline:
                    raise StoreBusyError(
                        f"{self.path} stayed locked by other writers for "
                        f"{self.lock_deadline:.0f}s; check for a stuck process holding it"
                    ) from None
            time.sleep(delay * (0.5 + random.random()))  # jitter, not crypto
            delay = min(delay * 2, 0.1)

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction; roll back on any error."""
        connection = self.connection

        def attempt() -> T:
            connection.execute("BEGIN IMMEDIATE")
            try:
                result = work(connection)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.rollback()
                raise
            return result

        with self.mutex:
            return self.retrying(attempt)

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` (reads only) under the connection mutex, retrying while busy."""
        with self.mutex:
            return self.retrying(lambda: work(self.connection))

    def ensure_schema(self, version: int, ddl: str, what: str) -> bool:
        """Create the schema of a fresh file, or check the version of an existing one.

        Returns True if this call created it. Raises ``SchemaVersionError`` for
        a file of another version, or a non-empty file that is not ``what``.
        """

        def create(connection: sqlite3.Connection) -> bool:
            found = connection.execute("PRAGMA user_version").fetchone()[0]
            if found == 0:
                tables = connection.execute(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                ).fetchone()[0]
                if tables:
                    raise SchemaVersionError(
                        f"{self.path} is not a {what} (it has tables but no schema version); "
                        "point hubsync at another path"
                    )
                for statement in _statements(ddl):
                    connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {int(version)}")
                return True
            if found != version:
                raise SchemaVersionError(
                    f"{self.path} is a {what} of schema version {found}; this hubsync reads "
                    f"version {version} only and does not convert files. Use a hubsync "
                    f"release that matches it, or move the file aside to start afresh"
                )
            return False

        # Most opens find the schema in place: check it without taking the write lock.
        found = self.read(lambda c: c.execute("PRAGMA user_version").fetchone()[0])
        if found == version:
            return False
        return self.write(create)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.mutex:
            if not self.closed:
                self.closed = True
                self.connection.close()


def _statements(ddl: str) -> list[str]:
    # executescript would COMMIT our transaction first; run the DDL statement by statement.
    return [s.strip() for s in ddl.split(";") if s.strip()]
