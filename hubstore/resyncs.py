"""Resync requests as the hub store keeps them: whom the hub asked, and how far each got.

``hubsync hub restore`` and ``hubsync resync`` record one row per request (one runtime,
one hub project) in ``sync_resyncs`` as they publish it; the consumers update it from the
runtime's signed progress reports (``hubsync.core.resync.ResyncReport``), verified like
every entry. A report only counts for a request recorded for the very runtime and hub
project that signed it, only a newer report replaces an older one, and a request once
done stays done. ``hubsync status`` lists the requests not done yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hubstore.sql_statements import Dialect
from hubsync.core.resync import REPORT_COUNTS, ResyncReport

ASKED_COLUMNS = (
    "request_id",
    "group_id",
    "runtime_id",
    "hub_project",
    "reason",
    "scope",
    "point",
    "parts",
    "asked_at",
)
"""What a request is kept with as it is published (``insert``)."""

REPORTED_COLUMNS = ("reported_at", *REPORT_COUNTS, "done_at")
"""What a report writes (``update``)."""

RESYNC_COLUMNS = ", ".join(ASKED_COLUMNS + REPORTED_COLUMNS)
"""Every column of ``sync_resyncs``: ``ResyncRecord``'s fields, in order."""

SQLITE_TABLE = """
    CREATE TABLE IF NOT EXISTS sync_resyncs (
        request_id TEXT PRIMARY KEY,
        group_id TEXT NOT NULL,
        runtime_id TEXT NOT NULL,
        hub_project TEXT NOT NULL,
        reason TEXT NOT NULL,
        scope TEXT NOT NULL,
        point TEXT NOT NULL,
        parts INTEGER NOT NULL,
        asked_at TEXT NOT NULL,
        reported_at TEXT,
        requeued INTEGER NOT NULL DEFAULT 0,
        rederived INTEGER NOT NULL DEFAULT 0,
        accepted INTEGER NOT NULL DEFAULT 0,
        duplicate INTEGER NOT NULL DEFAULT 0,
        refused INTEGER NOT NULL DEFAULT 0,
        pending INTEGER,
        done_at TEXT
    ) STRICT
"""
"""``sync_resyncs`` in the SQLite hub database (version 5)."""

POSTGRES_TABLE = """
    CREATE TABLE sync_resyncs (
        request_id text COLLATE "C" PRIMARY KEY,
        group_id text COLLATE "C" NOT NULL,
        runtime_id text COLLATE "C" NOT NULL,
        hub_project text COLLATE "C" NOT NULL,
        reason text COLLATE "C" NOT NULL,
        scope text COLLATE "C" NOT NULL,
        point text COLLATE "C" NOT NULL,
        parts integer NOT NULL,
        asked_at text COLLATE "C" NOT NULL,
        reported_at text COLLATE "C",
        requeued bigint NOT NULL DEFAULT 0,
        rederived bigint NOT NULL DEFAULT 0,
        accepted bigint NOT NULL DEFAULT 0,
        duplicate bigint NOT NULL DEFAULT 0,
        refused bigint NOT NULL DEFAULT 0,
        pending bigint,
        done_at text COLLATE "C"
    )
"""
"""``sync_resyncs`` in the PostgreSQL hub store (version 3); times are canonical UTC text,
as the runtimes report them."""


@dataclass(frozen=True, slots=True)
class ResyncRecord:
    """One request to resync: whom it asked, from where, and the runtime's latest report."""

    request_id: str
    group_id: str
    """The command that asked (one ``hub restore`` or ``resync``): its requests together."""
    runtime_id: str
    hub_project: str
    reason: str
    """``restore`` or ``resync``."""
    scope: str
    point: str
    """``run cursors`` or ``since <time>``."""
    parts: int
    asked_at: str
    reported_at: str | None = None
    requeued: int = 0
    rederived: int = 0
    accepted: int = 0
    """Rows resent that the hub stored anew: the events it had lacked."""
    duplicate: int = 0
    refused: int = 0
    pending: int | None = None
    """Rows resent and not judged yet; None before the first report."""
    done_at: str | None = None

    @property
    def done(self) -> bool:
        """Whether the runtime reported every row judged."""
        return self.done_at is not None


def reported(record: ResyncRecord, report: ResyncReport) -> ResyncRecord | None:
    """``record`` with ``report`` applied; None when the report does not count for it (another
    runtime's or hub project's, older than the latest, or the request is done)."""
    if (report.runtime_id, report.hub_project) != (record.runtime_id, record.hub_project):
        return None
    if record.done or (record.reported_at is not None and report.reported_at < record.reported_at):
        return None
    counts = {name: getattr(report, name) for name in REPORT_COUNTS}
    done_at = report.reported_at if report.done else None
    return replace(record, reported_at=report.reported_at, done_at=done_at, **counts)


def insert(dialect: Dialect) -> str:
    """Keep one new request (a request id recorded already is left as it is)."""
    marks = ", ".join([dialect.mark] * len(ASKED_COLUMNS))
    return (
        f"INSERT INTO sync_resyncs ({', '.join(ASKED_COLUMNS)}) VALUES ({marks}) "
        "ON CONFLICT (request_id) DO NOTHING"
    )


def insert_args(record: ResyncRecord) -> tuple[object, ...]:
    """``insert``'s arguments for ``record``."""
    return tuple(getattr(record, column) for column in ASKED_COLUMNS)


def select(dialect: Dialect) -> str:
    """One request by id."""
    return f"SELECT {RESYNC_COLUMNS} FROM sync_resyncs WHERE request_id = {dialect.mark}"


def update(dialect: Dialect) -> str:
    """Write a record's report columns back (``reported``'s result)."""
    columns = ", ".join(f"{column} = {dialect.mark}" for column in REPORTED_COLUMNS)
    return f"UPDATE sync_resyncs SET {columns} WHERE request_id = {dialect.mark}"


def update_args(record: ResyncRecord) -> tuple[object, ...]:
    """``update``'s arguments for ``record``."""
    return (*(getattr(record, column) for column in REPORTED_COLUMNS), record.request_id)


def listing(open_only: bool) -> str:
    """Every request (or those not done), oldest first."""
    where = " WHERE done_at IS NULL" if open_only else ""
    return f"SELECT {RESYNC_COLUMNS} FROM sync_resyncs{where} ORDER BY asked_at, request_id"


def record_of(row: Sequence[Any]) -> ResyncRecord:
    """A ``sync_resyncs`` row as a record."""
    return ResyncRecord(*row)


@dataclass(frozen=True, slots=True)
class ResyncGroup:
    """The requests of one command (``group_id``) together: what ``status`` shows."""

    group_id: str
    reason: str
    asked_at: str
    runtimes: int
    """Runtimes asked."""
    done: int
    """Runtimes that reported every request of theirs done."""
    accepted: int
    """Events the hub stored anew from what the runtimes resent (it had lacked them)."""
    duplicate: int
    pending: int
    """Rows resent and not judged yet, as last reported."""
    unreported: int
    """Requests with no report yet."""

    @property
    def finished(self) -> bool:
        """Whether every runtime asked is done."""
        return self.done == self.runtimes

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "group_id": self.group_id,
            "reason": self.reason,
            "asked_at": self.asked_at,
            "runtimes_asked": self.runtimes,
            "runtimes_done": self.done,
            "events_reaccepted": self.accepted,
            "duplicates": self.duplicate,
            "pending": self.pending,
            "unreported": self.unreported,
        }

    def line(self) -> str:
        """One line of progress."""
        waiting = f", {self.unreported} requests not reported yet" if self.unreported else ""
        return (
            f"resync {self.group_id} ({self.reason}, asked {self.asked_at}): "
            f"{self.done} of {self.runtimes} runtimes done, {self.accepted} events re-accepted, "
            f"{self.duplicate} already held, {self.pending} rows pending{waiting}"
        )


def groups(records: Sequence[ResyncRecord]) -> list[ResyncGroup]:
    """``records`` by group, oldest group first."""
    by_group: dict[str, list[ResyncRecord]] = {}
    for record in records:
        by_group.setdefault(record.group_id, []).append(record)
    found = []
    for group_id, members in by_group.items():
        runtimes: dict[str, bool] = {}
        for r in members:
            runtimes[r.runtime_id] = runtimes.get(r.runtime_id, True) and r.done
        found.append(
            ResyncGroup(
                group_id=group_id,
                reason=members[0].reason,
                asked_at=min(r.asked_at for r in members),
                runtimes=len(runtimes),
                done=sum(runtimes.values()),
                accepted=sum(r.accepted for r in members),
                duplicate=sum(r.duplicate for r in members),
                pending=sum(r.pending or 0 for r in members),
                unreported=sum(r.pending is None for r in members),
            )
        )
    return sorted(found, key=lambda g: (g.asked_at, g.group_id))
