"""Reading a SQLite file as it is on disk, without changing it (migration and backup tests)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection that cannot write ``path`` (``mode=ro``), closed on leaving."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def version_of(path: Path) -> int:
    """The file's ``PRAGMA user_version``: the schema version its store wrote."""
    with read_only(path) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def columns_of(conn: sqlite3.Connection, table: str) -> list[tuple[object, ...]]:
    """``PRAGMA table_info`` of ``table``: (cid, name, type, notnull, default, pk) per column."""
    return [tuple(row) for row in conn.execute(f"PRAGMA table_info({table})")]


def index_columns(conn: sqlite3.Connection, index: str) -> list[str]:
    """The columns an index covers, in order."""
    return [row[2] for row in conn.execute(f"PRAGMA index_info({index})")]
