"""Racing a PostgreSQL hub store from a test: an ingest in a thread, and how many sessions wait."""

from __future__ import annotations

import threading

import psycopg

from hubstore.store import HubStore
from hubsync.core.entries import EventEntry


def blocked_sessions(url: str) -> int:
    """How many sessions of ``url``'s database wait for a lock."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'",
        ).fetchone()
    assert row is not None
    return int(row[0])


class Ingesting:
    """``store.ingest(batch)`` in a thread, its outcomes kept."""

    def __init__(self, store: HubStore, batch: list[EventEntry]) -> None:
        self.outcomes: list[object] = []
        self.thread = threading.Thread(target=lambda: self.outcomes.extend(store.ingest(batch)))
        self.thread.start()

    def result(self) -> list[object]:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        return self.outcomes
