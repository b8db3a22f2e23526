"""SQLite plumbing shared by every SQLite file hubsync keeps.

The runtime's registry, event stores and effects ledger, the hub store and the
storage-side fence all go through ``Database``, so each of these is done one
way only:

* a new file is created private (mode 0600; SQLite gives its -wal and -shm the
  same mode) in WAL mode; before any file is opened, it and its sidecars and
  backups are looked at without following links: a symbolic link in the place of
  one is refused, a mode open to group or others tightened
  (``hubsync.core.private_files``);
* a write is a callback run in one ``BEGIN IMMEDIATE`` transaction: the write
  lock is taken before the first read, so the transaction never fails half-way
  on a lock upgrade (which SQLite's busy handler cannot fix), and a busy
  transaction is re-run whole;
* a busy or locked file is waited on by SQLite (``busy_timeout``), then retried
  with jittered backoff until ``busy_budget`` runs out; only then does
  ``StoreBusyError`` rise, so "database is locked" never reaches a caller while
  other processes write the same file;
* the schema version lives in ``PRAGMA user_version``. A fresh file gets the
  latest schema at once; an older one is copied to ``<file>.v<old>.bak`` (the
  online backup API, mode 0600) and then upgraded by its numbered, forward-only
  ``Migration`` steps in one transaction, so it ends at the latest version or
  stays as it was (``Migration`` and ``SchemaChange`` are ``hubsync.core.migration``'s,
  shared with the PostgreSQL hub store, and re-exported here). A newer version, or a file that is not ours, is refused
  (``SchemaVersionError``) and left untouched.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from hubsync.core.backoff import Backoff
from hubsync.core.closing import ClosesOnExit
from hubsync.core.errors import SchemaVersionError, StoreBusyError
from hubsync.core.migration import Migration, SchemaChange, check_migrations, steps_from
from hubsync.core.private_files import (
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    create_private_dirs,
    create_private_file,
    new_private_file,
    secure_existing_files,
)

__all__ = [
    "DEFAULT_BUSY_BUDGET",
    "DEFAULT_BUSY_TIMEOUT",
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "Database",
    "Migration",
    "SchemaChange",
    "backup_path",
    "companion_files",
    "create_private_dirs",
    "create_private_file",
    "damage_found",
    "new_private_file",
    "run_transaction",
    "split_statements",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_BUSY_TIMEOUT = 1.0
"""Seconds SQLite's own busy handler waits for a lock before the retry loop takes over.

Short, because a process blocked inside SQLite cannot act on a signal."""

DEFAULT_BUSY_BUDGET = 120.0
"""Seconds one operation keeps retrying a locked file before ``StoreBusyError``."""

FIRST_RETRY_DELAY = 0.002
"""Seconds before the first retry of a busy operation; doubles up to ``MAX_RETRY_DELAY``."""

MAX_RETRY_DELAY = 0.2
"""The longest pause between two retries of a busy operation, in seconds."""

SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is SQLITE_BUSY or SQLITE_LOCKED (another connection holds the lock)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _BUSY_CODES
    text = str(exc)
    return "locked" in text or "busy" in text


def backup_path(path: Path, version: int) -> Path:
    """Where the copy of ``path`` taken before upgrading it from ``version`` goes."""
    return path.with_name(f"{path.name}.v{version}.bak")


SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database, named after it."""


def companion_files(path: Path) -> list[Path]:
    """``path`` and the files beside it that hold copies of its pages: its -wal, -shm and
    -journal, and the copies taken before upgrades (``backup_path``), those that exist (a
    symbolic link in one's place, dangling or not, included)."""
    siblings = [path.with_name(path.name + suffix) for suffix in SIDECAR_SUFFIXES]
    backups = sorted(path.parent.glob(f"{_glob_literal(path.name)}.v*.bak"))
    return [p for p in (path, *siblings, *backups) if os.path.lexists(p)]


BackupProgress = Callable[[int, int], None]
"""Told ``(pages copied, pages in all)`` after each step of ``copy_database``."""

BACKUP_STEP_PAGES = 4096
"""Pages ``copy_database`` copies per step (16 MiB of 4 KiB pages) between progress reports."""


def copy_database(
    path: Path, to: Path, *, replace: bool = False, progress: BackupProgress | None = None
) -> int:
    """Copy the SQLite file ``path`` to ``to`` (mode 0600) while others may be writing it;
    return the pages copied.

    Online and consistent: one read transaction of a connection of its own
    holds a snapshot of the last commit (WAL mode: writers go on meanwhile), and
    the backup API copies that snapshot in steps of ``BACKUP_STEP_PAGES``, so a
    write between steps neither restarts nor tears the copy. The copy is made
    as ``<to>.partial``, then renamed: a crash mid-copy never leaves a half copy
    under ``to``. ``FileExistsError`` if ``to`` exists (unless ``replace``) or the partial
    one does.
    """
    partial = to.with_name(to.name + ".partial")
    _refuse_existing(to, replace)
    os.close(new_private_file(partial))
    try:
        source = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, isolation_level=None)
        try:
            source.execute("BEGIN")
            source.execute("SELECT count(*) FROM sqlite_schema").fetchone()  # the snapshot
            target = sqlite3.connect(partial)
            try:
                copied = _backup_steps(source, target, progress)
            finally:
                target.close()
        finally:
            source.close()
        _refuse_existing(to, replace)  # made meanwhile
        os.replace(partial, to)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return copied


def _refuse_existing(path: Path, replace: bool) -> None:
    if not replace and os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, "file exists", str(path))


def _backup_steps(
    source: sqlite3.Connection, target: sqlite3.Connection, progress: BackupProgress | None
) -> int:
    pages = [0]

    def step(_status: int, remaining: int, total: int) -> None:
        pages[0] = total
        if progress is not None:
            progress(total - remaining, total)

    source.backup(target, pages=BACKUP_STEP_PAGES, progress=step)
    return pages[0]


def _glob_literal(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


QUICK_CHECK_LIMIT = 3
"""Problems ``damage_found`` reports at most (the first says enough to act on)."""


def damage_found(path: Path, busy_budget: float = DEFAULT_BUSY_BUDGET) -> list[str]:
    """What ``PRAGMA quick_check`` finds wrong in the existing SQLite file ``path``: empty when
    it finds nothing.

    Opening a file and querying its schema reads a few pages only; a page broken
    by a torn write or a bad sector elsewhere goes unnoticed until a query
    reaches it. quick_check reads every page (not the index contents, which the
    slower integrity_check compares). A file too damaged to be read at all is
    one problem, in SQLite's words. Nothing is written.
    """
    try:
        with Database(path, create=False, busy_budget=busy_budget) as db:
            rows = db.read(
                lambda c: c.execute(f"PRAGMA quick_check({QUICK_CHECK_LIMIT})").fetchall()
            )
    except sqlite3.DatabaseError as exc:  # a busy file is StoreBusyError, raised on
        return [str(exc)]
    found = [str(row[0]) for row in rows]
    return [] if found == ["ok"] else found


def split_statements(ddl: str) -> list[str]:
    """The statements of a DDL script, to run one by one inside our own transaction.

    ``executescript`` would COMMIT the open transaction first.
    """
    return [s.strip() for s in ddl.split(";") if s.strip()]


def run_transaction(connection: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction; roll back on any error.

    ``connection`` must be in autocommit mode (``isolation_level=None``) so this
    owns the transaction. No retry here: ``Database.write`` adds it.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = work(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.rollback()
        raise
    return result


class Database(ClosesOnExit):
    """One connection to one SQLite file, safe to share between threads of a process.

    Separate processes (and separate ``Database`` objects) coordinate through
    SQLite's own locking; within one object a mutex serialises use of the
    connection, one attempt at a time. ``create=False`` opens an existing file
    only (a missing one is an ``sqlite3.OperationalError``, never a new file)
    and writes nothing to it on opening.
    """

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        busy_budget: float = DEFAULT_BUSY_BUDGET,
        synchronous: str = "NORMAL",
        create: bool = True,
    ) -> None:
        if synchronous.upper() not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}")
        self.path = path
        self.busy_budget = busy_budget
        self.mutex = threading.RLock()
        if create:
            create_private_file(path)
        # SQLite opens by path and follows a link at the main file's: look first, never through one
        secure_existing_files(companion_files(path))
        self.connection = sqlite3.connect(
            f"file:{quote(str(path))}?mode={'rwc' if create else 'rw'}",
            uri=True,
            timeout=busy_timeout,
            isolation_level=None,  # run_transaction issues BEGIN/COMMIT itself
            check_same_thread=False,  # guarded by self.mutex instead
            cached_statements=64,
        )
        self.closed = False
        try:
            # journal_mode needs a brief exclusive moment on a fresh file: retry it too.
            # An existing-only open changes nothing: a file we created is WAL already.
            pragma = "PRAGMA journal_mode=WAL" if create else "PRAGMA journal_mode"
            mode = self.read(lambda c: c.execute(pragma).fetchone()[0])
            self.journal_mode = str(mode).lower()
            # NORMAL in WAL mode: a commit survives a process crash; FULL also a power loss.
            self.connection.execute(f"PRAGMA synchronous={synchronous.upper()}")
        except BaseException:
            self.connection.close()
            raise

    def retrying(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation`` on the connection, retrying while the file is busy, up to the budget."""
        deadline = time.monotonic() + self.busy_budget
        backoff = Backoff(base=FIRST_RETRY_DELAY, cap=MAX_RETRY_DELAY)
        attempts = 0
        while True:
            attempts += 1
            with self.mutex:
                try:
                    return operation(self.connection)
                except sqlite3.OperationalError as exc:
                    if not is_busy(exc):
                        raise
                    if self.connection.in_transaction:
                        self.connection.rollback()
            if time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"{self.path} stayed locked by other writers for {self.busy_budget:.0f}s "
                    f"over {attempts} attempts; check for a stuck process holding it"
                ) from None
            log.debug("%s busy (attempt %s); retrying", self.path, attempts)
            time.sleep(backoff.next_delay())

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction, re-run whole while busy."""
        return self.retrying(lambda connection: run_transaction(connection, work))

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` (reads only, no explicit transaction), retrying while busy."""
        return self.retrying(work)

    def schema_version(self) -> int:
        """The file's ``PRAGMA user_version`` (0 for a file without our schema)."""
        return int(self.read(lambda c: c.execute("PRAGMA user_version").fetchone()[0]))

    def ensure_schema(
        self,
        version: int,
        statements: Sequence[str],
        what: str,
        migrations: Sequence[Migration] = (),
    ) -> SchemaChange:
        """Bring the file's schema to ``version``: create it, upgrade it, or find it current.

        ``statements`` are the latest schema, run on a fresh file;
        ``migrations`` the ordered steps from older versions up to ``version``
        (``Migration``). An older file is first copied to
        ``backup_path(path, old)``, then every step runs in one transaction
        with the new version number, so the file ends upgraded or unchanged.
        Idempotent, and safe against other processes opening the file at once
        (the version is read again under the write lock). ``what`` names the
        file in messages ("hubsync event store"). Raises ``SchemaVersionError``
        for a newer version, an older one no step starts from, or a file
        holding tables but no version; such a file is not written to.
        """
        check_migrations(migrations, version)
        found = self.schema_version()
        if found == version:
            return SchemaChange(version, version)  # most opens: checked without the write lock
        self._refuse_newer(found, version, what)

        def bring_up_to_date(connection: sqlite3.Connection) -> SchemaChange:
            found = _user_version(connection)
            if found == version:
                return SchemaChange(version, version)  # another process did it while we waited
            self._refuse_newer(found, version, what)
            if found == 0:
                self._refuse_foreign(connection, what)
                for statement in statements:
                    connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {int(version)}")
                return SchemaChange(0, version)
            steps = self._steps_from(found, version, migrations, what)
            backup = backup_path(self.path, found)
            self._copy_to(backup)  # under the write lock: the state the steps start from
            for step in steps:
                step.apply(connection)
            connection.execute(f"PRAGMA user_version = {int(version)}")
            return SchemaChange(found, version, backup, tuple(step.summary for step in steps))

        change = self.write(bring_up_to_date)
        if change.action == "upgraded":
            log.info(
                "%s: upgraded the %s from schema version %s to %s; the file as it was is kept "
                "at %s",
                self.path,
                what,
                change.from_version,
                change.to_version,
                change.backup,
            )
        return change

    def check_schema(self, version: int, what: str, how_to_fix: str) -> None:
        """Refuse a file whose schema is absent or of another version; never create or upgrade it.

        ``how_to_fix`` ends the message for a file without the schema or of an
        older version (the command that creates or upgrades it).
        """
        found = self.schema_version()
        if found == version:
            return
        self._refuse_newer(found, version, what)
        if found != 0:
            raise SchemaVersionError(
                f"{self.path} is a {what} of schema version {found}; this hubsync needs version "
                f"{version}: {how_to_fix}"
            )
        self.read(lambda connection: self._refuse_foreign(connection, what))
        raise SchemaVersionError(f"{self.path} has no {what} schema; {how_to_fix}")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.mutex:
            if not self.closed:
                self.closed = True
                self.connection.close()

    def _refuse_newer(self, found: int, version: int, what: str) -> None:
        if found > version:
            raise SchemaVersionError(
                f"{self.path} is a {what} of schema version {found}, newer than this hubsync "
                f"knows (it reads up to version {version}); the file was left untouched. Use a "
                "hubsync release that knows it, or move the file aside to start afresh"
            )

    def _steps_from(
        self, found: int, version: int, migrations: Sequence[Migration], what: str
    ) -> list[Migration]:
        steps = steps_from(found, version, migrations)
        if steps is None:
            oldest = migrations[0].from_version if migrations else version
            raise SchemaVersionError(
                f"{self.path} is a {what} of schema version {found}; this hubsync upgrades "
                f"from version {oldest} on only. Upgrade it with an earlier hubsync release "
                "first, or move the file aside to start afresh"
            )
        return steps

    def _copy_to(self, backup: Path) -> None:
        backup.with_name(backup.name + ".partial").unlink(missing_ok=True)
        copy_database(self.path, backup, replace=True)

    def _refuse_foreign(self, connection: sqlite3.Connection, what: str) -> None:
        tables = sorted(
            str(row[0])
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not str(row[0]).startswith("sqlite_")
        )
        if tables:
            raise SchemaVersionError(
                f"{self.path} is not a {what} (it has tables {', '.join(tables[:5])} but no "
                "schema version); point hubsync at another path"
            )


def _user_version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])
