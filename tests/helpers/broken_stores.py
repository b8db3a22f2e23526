"""Ways to make a project's store file unreadable, with real files, and to put it back.

Each breaker works as root too (a ``chmod 000`` would not stop root, so none
relies on permissions): another schema version, garbage bytes in place of the
database, a directory or a symbolic link where the file should be.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path


def other_schema_version(path: Path) -> None:
    """Mark the store as written by a newer hubsync (``PRAGMA user_version = 99``)."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA user_version = 99")
        connection.commit()
    finally:
        connection.close()


def garbage_bytes(path: Path) -> None:
    """Overwrite the file in place (same inode) with bytes that are not a database."""
    path.write_bytes(b"this is not an SQLite database\n" * 200)


def directory_in_place(path: Path) -> None:
    """Remove the file and put a directory of the same name there (no open can succeed)."""
    path.unlink()
    path.mkdir()


def corrupt_middle_page(path: Path, rows: int = 2000) -> None:
    """Grow the (closed) database with a table of ``rows`` rows, then overwrite one page in the
    middle of the file with garbage, as a torn write or a bad disk sector would.

    The schema (page 1) stays intact, so the file still opens and answers queries that do not
    touch the broken page: only an integrity check finds it.
    """
    connection = sqlite3.connect(path)
    try:
        connection.execute("CREATE TABLE filler (n INTEGER PRIMARY KEY, text TEXT NOT NULL)")
        connection.executemany(
            "INSERT INTO filler (text) VALUES (?)", ((f"row {n} " * 8,) for n in range(rows))
        )
        connection.commit()
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = int(connection.execute("PRAGMA page_size").fetchone()[0])
        pages = int(connection.execute("PRAGMA page_count").fetchone()[0])
    finally:
        connection.close()
    assert pages > 10, f"{path} has only {pages} pages: nothing in the middle to break"
    with path.open("r+b") as file:
        file.seek(page_size * (pages // 2))
        file.write(bytes((n * 7 + 13) % 256 for n in range(page_size)))


def link_in_place(path: Path) -> None:
    """Move the file aside and put a symbolic link to it in its place (refused, never followed)."""
    moved = path.with_name(path.name + ".moved")
    path.rename(moved)
    path.symlink_to(moved)


BREAKERS: dict[str, Callable[[Path], None]] = {
    "other_schema_version": other_schema_version,
    "garbage_bytes": garbage_bytes,
    "directory_in_place": directory_in_place,
    "link_in_place": link_in_place,
}


class BrokenStore:
    """A closed store file broken by one breaker; ``restore`` puts the original bytes back."""

    def __init__(self, path: Path, how: str) -> None:
        self.path = path
        self.backup = path.with_name(path.name + ".backup")
        for suffix in ("-wal", "-shm"):
            # the store was closed, so its WAL is checkpointed: only the main file matters
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        shutil.copyfile(path, self.backup)
        BREAKERS[how](path)

    def restore(self) -> None:
        """Put the original file back, as an operator restoring it would."""
        if self.path.is_symlink():
            self.path.unlink()
        elif self.path.is_dir():
            self.path.rmdir()
        shutil.copyfile(self.backup, self.path)
