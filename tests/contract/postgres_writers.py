"""Another PostgreSQL writer with its transaction open while the hub store under test ingests."""

from __future__ import annotations

import psycopg

from hubstore.store import HubStore
from hubsync.core.entries import EventEntry, OutcomeRecord
from tests.helpers.postgres_races import Ingesting, blocked_sessions
from tests.helpers.support import wait_until


def ingested_after(
    store: HubStore, url: str, entry: EventEntry, *held: str, what: str
) -> OutcomeRecord:
    """The outcome of ``store.ingest([entry])`` begun while another session of ``url`` has run
    the statements ``held`` and not committed: the ingest waits (``what``) until it commits."""
    with psycopg.connect(url) as other:
        for statement in held:
            other.execute(statement)
        ingesting = Ingesting(store, [entry])
        wait_until(lambda: blocked_sessions(url) == 1, what=what)
        other.commit()
    [outcome] = ingesting.result()
    assert isinstance(outcome, OutcomeRecord)
    return outcome


def insert_uncommitted(conn: psycopg.Connection[tuple[object, ...]], entry: EventEntry) -> None:
    """What another writer's transaction inserts for ``entry``, left uncommitted."""
    event = entry.event
    conn.execute(
        "INSERT INTO sync_events VALUES (%s, %s, %s, %s, %s, %s, %s, now(), %s)",
        (
            *entry.key,
            event.hub_project,
            event.home_runtime_id,
            event.event_type,
            entry.content_hash,
            entry.data.decode(),
        ),
    )
