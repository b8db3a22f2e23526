"""The storage-side fence for hub-store writes made under a lease.

A lease alone cannot stop a holder that was paused past its deadline from
writing after a newer holder took over: it does not know it lost. The store it
writes to has to refuse a token smaller than one it has already seen. This
module is that check for SQLite, self-contained so any store can adopt it:

* ``ensure_fence_table(conn)`` creates ``resource_fences(resource, highest_token,
  updated_at)`` once;
* ``advance_fence(conn, resource, token)`` is a compare-and-set to call *inside
  the same transaction* as the guarded write: it records ``token`` as the new
  highest, or raises ``FencedWriteRefusedError`` when a larger token has already
  been seen (the caller's transaction then rolls back, so the write never lands);
* ``fenced_write(db, resource, token, work)`` runs both as one write of a
  ``hubsync.core.sqlite.Database`` (``BEGIN IMMEDIATE``, re-run whole while busy).

Example (a store writing under a lease)::

    fenced_write(db, lease.resource, lease.token,
                 lambda conn: conn.execute("UPDATE ... "))  # lands only under the highest token
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from hubstore.errors import FencedWriteRefusedError
from hubstore.leases.args import validate_resource, validate_token
from hubsync.core.clock import utc_now_iso
from hubsync.core.sqlite import Database

T = TypeVar("T")

FENCE_DDL = """
CREATE TABLE IF NOT EXISTS resource_fences (
    resource TEXT PRIMARY KEY,
    highest_token INTEGER NOT NULL CHECK (highest_token >= 1),
    updated_at TEXT NOT NULL
) STRICT
"""


def ensure_fence_table(conn: sqlite3.Connection) -> None:
    """Create the ``resource_fences`` table if it does not exist."""
    conn.execute(FENCE_DDL)


def highest_token(conn: sqlite3.Connection, resource: str) -> int:
    """The highest token a write to ``resource`` has been made under (0 if none)."""
    row = conn.execute(
        "SELECT highest_token FROM resource_fences WHERE resource = ?", (resource,)
    ).fetchone()
    return int(row[0]) if row else 0


def advance_fence(conn: sqlite3.Connection, resource: str, token: int) -> None:
    """Record ``token`` as the highest seen for ``resource``, or refuse a stale one.

    Equal tokens pass (one holder writes many times under its token). Must run in
    the caller's transaction, before or after the guarded write but before COMMIT.
    """
    validate_resource(resource)
    validate_token(token)
    # One statement: the upsert only updates when the token is not smaller, so
    # the compare and the set cannot be split by another writer.
    cursor = conn.execute(
        """
        INSERT INTO resource_fences (resource, highest_token, updated_at) VALUES (?, ?, ?)
        ON CONFLICT (resource) DO UPDATE SET
            highest_token = excluded.highest_token, updated_at = excluded.updated_at
        WHERE excluded.highest_token >= resource_fences.highest_token
        """,
        (resource, token, utc_now_iso()),
    )
    if cursor.rowcount != 1:
        raise FencedWriteRefusedError(resource, token, highest_token(conn, resource), "stale")


def fenced_write(
    db: Database, resource: str, token: int, work: Callable[[sqlite3.Connection], T]
) -> T:
    """Advance the fence, then run ``work``, in one write transaction of ``db``.

    A stale token raises ``FencedWriteRefusedError``; it and any error of
    ``work`` roll everything back, so neither the write nor the fence lands.
    """

    def guarded(conn: sqlite3.Connection) -> T:
        advance_fence(conn, resource, token)
        return work(conn)

    return db.write(guarded)
