"""The storage-side fence for hub-store writes made under a lease.

A lease alone cannot stop a holder that was paused past its deadline from
writing after a newer holder took over: it does not know it lost. The store it
writes to has to refuse a token smaller than one it has already seen. This
module is that check for SQLite, self-contained so any store can adopt it:

* ``ensure_fence_table(conn)`` creates ``resource_fences(resource, highest_token,
  holder, updated_at)`` once (and gives a table made before ``holder`` its column);
* ``advance_fence(conn, resource, token, holder)`` is a compare-and-set to call
  *inside the same transaction* as the guarded write: it records ``token`` and its
  holder as the new highest, or raises ``FencedWriteRefusedError`` when a larger
  token has already been seen (``stale``), or this token with another holder
  (``not_holder``: two holders can only share a token if the lease was tampered
  with); the caller's transaction then rolls back, so the write never lands;
* ``fenced_write(db, resource, token, holder, work)`` runs both as one write of a
  ``hubsync.core.sqlite.Database`` (``BEGIN IMMEDIATE``, re-run whole while busy).

Example (a store writing under a lease)::

    fenced_write(db, lease.resource, lease.token, lease.holder,
                 lambda conn: conn.execute("UPDATE ... "))  # lands only under the highest token
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from hubstore.errors import FencedWriteRefusedError
from hubstore.leases.args import validate_holder, validate_resource, validate_token
from hubsync.core.clock import utc_now_iso
from hubsync.core.sqlite import Database

T = TypeVar("T")

FENCE_DDL = """
CREATE TABLE IF NOT EXISTS resource_fences (
    resource TEXT PRIMARY KEY,
    highest_token INTEGER NOT NULL CHECK (highest_token >= 1),
    holder TEXT,
    updated_at TEXT NOT NULL
) STRICT
"""


FENCE_HOLDER_COLUMN = "ALTER TABLE resource_fences ADD COLUMN holder TEXT"
"""What a ``resource_fences`` table made before the holder was kept needs (NULL: not known;
the next write under that token records its holder)."""


def ensure_fence_table(conn: sqlite3.Connection) -> None:
    """Create the ``resource_fences`` table if it does not exist, or add its ``holder``."""
    conn.execute(FENCE_DDL)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(resource_fences)")}
    if "holder" not in columns:
        conn.execute(FENCE_HOLDER_COLUMN)


def highest_token(conn: sqlite3.Connection, resource: str) -> int:
    """The highest token a write to ``resource`` has been made under (0 if none)."""
    row = conn.execute(
        "SELECT highest_token FROM resource_fences WHERE resource = ?", (resource,)
    ).fetchone()
    return int(row[0]) if row else 0


def advance_fence(conn: sqlite3.Connection, resource: str, token: int, holder: str) -> None:
    """Record ``token`` and ``holder`` as the highest seen for ``resource``, or refuse.

    A smaller token is refused ``stale``; the highest token from another holder
    ``not_holder``. The same token from its own holder passes (one holder writes
    many times under its token). Must run in the caller's transaction, before or
    after the guarded write but before COMMIT.
    """
    validate_resource(resource)
    validate_token(token)
    validate_holder(holder)
    # One statement: the upsert only updates when the token is larger, or equal and
    # this holder's, so the compare and the set cannot be split by another writer.
    cursor = conn.execute(
        """
        INSERT INTO resource_fences (resource, highest_token, holder, updated_at)
        VALUES (?, ?, ?, ?)
        ON CONFLICT (resource) DO UPDATE SET
            highest_token = excluded.highest_token, holder = excluded.holder,
            updated_at = excluded.updated_at
        WHERE excluded.highest_token > resource_fences.highest_token
           OR (excluded.highest_token = resource_fences.highest_token
               AND coalesce(resource_fences.holder, excluded.holder) = excluded.holder)
        """,
        (resource, token, holder, utc_now_iso()),
    )
    if cursor.rowcount != 1:
        highest = highest_token(conn, resource)
        reason = "stale" if token < highest else "not_holder"
        raise FencedWriteRefusedError(resource, token, highest, reason)


def fenced_write(
    db: Database,
    resource: str,
    token: int,
    holder: str,
    work: Callable[[sqlite3.Connection], T],
) -> T:
    """Advance the fence, then run ``work``, in one write transaction of ``db``.

    A stale token, or the highest token from another holder, raises
    ``FencedWriteRefusedError``; it and any error of ``work`` roll everything
    back, so neither the write nor the fence lands.
    """

    def guarded(conn: sqlite3.Connection) -> T:
        advance_fence(conn, resource, token, holder)
        return work(conn)

    return db.write(guarded)
