"""``effect_history``: every transition of an effect and every operator verdict, kept in the
ledger's own file, written in the same transaction as the transition it records.

A row outlives its effect's ledger row: an attempt that did nothing is dropped
from ``external_effects`` (so it may be retried) and its history says why. An
operator's ``resolve`` of a ``blocked_uncertain`` effect is recorded here with
who gave it, when and the note they wrote.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from enum import StrEnum

from hubsync.core.clock import utc_now_iso

HISTORY_DDL = """
CREATE TABLE IF NOT EXISTS effect_history (
    id INTEGER PRIMARY KEY,
    effect_key TEXT NOT NULL,
    at TEXT NOT NULL,
    event TEXT NOT NULL,
    attempt_id TEXT,
    actor TEXT,
    note TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS effect_history_key ON effect_history (effect_key, id);
"""
MAX_NOTE_LENGTH = 500
"""History notes (reasons, operator notes) are cut to this many characters."""


class EffectEvent(StrEnum):
    """What happened to an effect."""

    CLAIMED = "claimed"
    COMMITTED = "committed"
    PARKED = "parked"
    """Its attempt was parked ``blocked_uncertain``: it may have touched the world."""
    DROPPED = "dropped"
    """Its attempt certainly did nothing; the row was deleted, so it may be retried."""
    FAILED = "failed"
    """The target refused it for good (a 4xx): nothing landed; the row was deleted."""
    RESOLVED_COMMITTED = "resolved-committed"
    """An operator found the effect landed: committed."""
    RESOLVED_NOT_EXECUTED = "resolved-not-executed"
    """An operator found the effect did not land: the row was deleted, a retry may run it."""


@dataclass(frozen=True)
class HistoryEntry:
    """One row of ``effect_history``."""

    at: str
    event: EffectEvent
    attempt_id: str | None
    actor: str | None
    note: str | None

    def as_dict(self) -> dict[str, str | None]:
        """The entry as a JSON object."""
        return {
            "at": self.at,
            "event": self.event.value,
            "attempt_id": self.attempt_id,
            "actor": self.actor,
            "note": self.note,
        }


def record_event(
    conn: sqlite3.Connection,
    key: str,
    event: EffectEvent,
    *,
    attempt_id: str | None = None,
    actor: str | None = None,
    note: str | None = None,
) -> None:
    """Append one entry, inside the caller's write transaction."""
    conn.execute(
        "INSERT INTO effect_history (effect_key, at, event, attempt_id, actor, note) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            key,
            utc_now_iso(),
            event.value,
            attempt_id,
            actor,
            note[:MAX_NOTE_LENGTH] if note else None,
        ),
    )


def history_of(conn: sqlite3.Connection, key: str) -> list[HistoryEntry]:
    """Every entry of ``key``, oldest first."""
    return [
        HistoryEntry(at, EffectEvent(event), attempt, actor, note)
        for at, event, attempt, actor, note in conn.execute(
            "SELECT at, event, attempt_id, actor, note FROM effect_history "
            "WHERE effect_key = ? ORDER BY id",
            (key,),
        )
    ]


def purge_history(conn: sqlite3.Connection, cutoff: str) -> int:
    """Delete entries older than ``cutoff`` of effects that have no in-flight row."""
    cursor = conn.execute(
        "DELETE FROM effect_history WHERE at < ? AND effect_key NOT IN "
        "(SELECT effect_key FROM external_effects WHERE status = 'in-flight')",
        (cutoff,),
    )
    return cursor.rowcount
