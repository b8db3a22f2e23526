"""The read and bookkeeping statements the SQL hub stores share, written once for every dialect.

SQLite and PostgreSQL hold the same tables and answer the same queries; their
statement texts differ in a few words only: the parameter placeholder (``?``
or ``%s``), how a zero is typed for ``lag``, and how a run's gaps are
gathered into one value. A ``Dialect`` names those words; each function here
returns one statement and its arguments, ready for ``execute``.

``keyset_where`` is the one keyset-paging builder: equality filters, then a
row-value comparison ``(a, b, c) > (?, ?, ?)`` after the last position seen,
which both databases answer with an index seek. ``events_page`` and
``runs_page`` page through it. What ingest runs stays in each backend: it is
the hot path, and each database is fastest with its own batch statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from hubstore.pages import EventFilter, Page
from hubsync.core.entries import SecurityReason

if TYPE_CHECKING:
    from hubstore.store import EventPosition, RunPosition

Query = tuple[str, list[object]]
"""A statement and its arguments."""

Filters = Sequence[tuple[str, object | None]]
"""``(column, value)`` pairs; a value of None means no filter on that column."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """The words of a SQL hub store's statements that differ from one database to another.

    ``mark`` is the parameter placeholder. ``zero`` is the default ``lag`` gives
    the first sequence of a run (typed where the database wants it typed).
    ``probe_join`` joins a page of runs to its events (SQLite's ``CROSS JOIN``
    pins the page as the outer loop). ``gap_lists`` are the aggregate columns
    of a run's first gaps, each limited by one ``{mark}`` argument, and
    ``gap_columns`` what the page selects of them.
    """

    mark: str
    zero: str
    probe_join: str
    gap_lists: str
    gap_columns: str

    @property
    def gap_limits(self) -> int:
        """How many times ``runs_page`` passes ``gaps_per_run``."""
        return self.gap_lists.count("{mark}")


EVENT_COLUMNS = (
    "project_id, run_id, sequence, hub_project, home_runtime_id, event_type, content_hash, "
    "received_at, record"
)
ALERT_COLUMNS = (
    "alert_id, reason, hub_project, runtime_id, project_id, run_id, sequence, existing_hash, "
    "offered_hash, detail, detected_at, last_detected_at, occurrences"
)
PRESENCE_COLUMNS = "runtime_id, hub_project, host, heartbeat, record"
ENROLLED_COLUMNS = (
    "runtime_id, state, hub_projects, enrolled_at, rotated_at, revoked_at, "
    "previous_valid_until, key, previous_key"
)

FOLDED_BY_SENDER = "reason IN ({})".format(", ".join(f"'{r.value}'" for r in SecurityReason))
"""The alerts kept one per (hub project, claimed runtime, reason): refused entries. The condition
of the partial unique index ``sync_alerts_per_sender`` (and of its upserts, which must name it)."""

KEPT_PER_OFFENCE = f"NOT ({FOLDED_BY_SENDER})"
"""The alerts kept one per (key, reason, offered hash): conflicts. The condition of the partial
unique index ``sync_alerts_per_offence``."""

EVENT_ORDER = ("run_id", "project_id", "sequence")
"""How events are listed (``EventPosition``)."""

RUN_ORDER = ("run_id", "project_id")
"""How runs are listed (``RunPosition``)."""

HUB_ID = "SELECT value FROM hub_meta WHERE name = 'hub_id'"

REVOCATION_PREFIX = "key_revocation:"
"""``hub_meta`` names of key revocations: this prefix, then the key's fingerprint."""

KEY_REVOCATIONS = (
    "SELECT name, value FROM hub_meta WHERE name >= 'key_revocation:' "
    "AND name < 'key_revocation;' ORDER BY name"
)
"""Every key revocation (``;`` sorts right after ``:``: a range of the primary key)."""


@cache
def keep_revocation(dialect: Dialect) -> str:
    """Store one key revocation (name, value), replacing an earlier one of that key."""
    return f"""
        INSERT INTO hub_meta (name, value) VALUES ({dialect.mark}, {dialect.mark})
        ON CONFLICT (name) DO UPDATE SET value = excluded.value
    """


COMMIT_COUNTER = "SELECT value FROM hub_meta WHERE name = 'commit_counter'"

BUMP_COMMIT_COUNTER = """
    INSERT INTO hub_meta (name, value) VALUES ('commit_counter', '1')
    ON CONFLICT (name) DO UPDATE SET value = CAST(CAST(hub_meta.value AS BIGINT) + 1 AS TEXT)
    RETURNING value
"""
"""Raise the commit counter by one in the ingest's transaction (the row is made by the
first batch); returns the new value. Every dialect takes it as is."""


def equal_filters(dialect: Dialect, filters: Filters) -> tuple[list[str], list[object]]:
    """``column = <mark>`` for each filter that has a value, and those values."""
    where: list[str] = []
    args: list[object] = []
    for column, value in filters:
        if value is not None:
            where.append(f"{column} = {dialect.mark}")
            args.append(value)
    return where, args


def keyset_where(
    dialect: Dialect, filters: Filters, order: Sequence[str], after: Sequence[object] | None
) -> tuple[str, list[object]]:
    """The ``WHERE`` condition of one keyset page, and its arguments.

    The filters, then, when ``after`` is given, the rows past it in ``order``:
    one row-value comparison, so the database seeks its index to the position
    instead of scanning up to it. ``after`` holds one value per column of
    ``order``.
    """
    where, args = equal_filters(dialect, filters)
    if after is not None:
        if len(after) != len(order):
            raise ValueError(f"a position after {order} has {len(order)} values, got {after!r}")
        marks = ", ".join([dialect.mark] * len(order))
        where.append(f"({', '.join(order)}) > ({marks})")
        args.extend(after)
    return " AND ".join(where), args


def events_page(dialect: Dialect, page: Page[EventPosition]) -> Query:
    """One page of a hub project's events (``HubStore.events``)."""
    where, args = keyset_where(dialect, page.of.columns, EVENT_ORDER, page.after)
    statement = (
        f"SELECT {EVENT_COLUMNS} FROM sync_events WHERE {where} "
        f"ORDER BY {', '.join(EVENT_ORDER)} LIMIT {dialect.mark}"
    )
    return statement, [*args, page.limit]


# One page of runs in one statement (one snapshot, no query per run). Sequences
# start at 1 and are unique, so a run has a gap exactly when it holds fewer
# events than its highest sequence: only those runs are walked for their gaps,
# each through the primary key.
_RUNS_PAGE = """
    WITH page AS MATERIALIZED (
        SELECT run_id, project_id, min(home_runtime_id) AS home, count(*) AS events,
               max(sequence) AS highest, max(received_at) AS last_received
        FROM sync_events WHERE {where}
        GROUP BY run_id, project_id ORDER BY run_id, project_id LIMIT {mark}
    ),
    steps AS (
        SELECT e.run_id, e.project_id, e.sequence,
               lag(e.sequence, 1, {zero}) OVER (
                   PARTITION BY e.run_id, e.project_id ORDER BY e.sequence
               ) AS previous
        FROM page AS p {probe_join} sync_events AS e
        ON e.project_id = p.project_id AND e.run_id = p.run_id
        WHERE p.events < p.highest
    ),
    gaps AS (
        SELECT run_id, project_id, previous + 1 AS first, sequence - 1 AS last,
               row_number() OVER (PARTITION BY run_id, project_id ORDER BY sequence) AS n
        FROM steps WHERE sequence - previous > 1
    ),
    gap_lists AS (
        SELECT run_id, project_id, min(first) AS first_gap,
               {gap_lists}
        FROM gaps GROUP BY run_id, project_id
    )
    SELECT p.run_id, p.project_id, p.home, p.events, p.highest, p.last_received,
           g.first_gap, {gap_columns}
    FROM page AS p LEFT JOIN gap_lists AS g USING (run_id, project_id)
    ORDER BY p.run_id, p.project_id
"""


def runs_page(dialect: Dialect, page: Page[RunPosition], gaps_per_run: int) -> Query:
    """One page of a hub project's runs with their counts and first gaps (``HubStore.runs``).

    A row: run, project, home runtime, events, highest sequence, last received,
    first gap (None without one), then the dialect's ``gap_columns``.
    """
    where, args = keyset_where(dialect, page.of.columns, RUN_ORDER, page.after)
    statement = _RUNS_PAGE.format(
        where=where,
        mark=dialect.mark,
        zero=dialect.zero,
        probe_join=dialect.probe_join,
        gap_lists=dialect.gap_lists.format(mark=dialect.mark),
        gap_columns=dialect.gap_columns,
    )
    return statement, [*args, page.limit, *[gaps_per_run] * dialect.gap_limits]


def count_events(dialect: Dialect, of: EventFilter) -> Query:
    """How many events (``HubStore.count_events``)."""
    where, args = equal_filters(dialect, of.columns)
    return "SELECT count(*) FROM sync_events" + (
        f" WHERE {' AND '.join(where)}" if where else ""
    ), args


@cache
def gaps(dialect: Dialect) -> str:
    """The missing ranges of one run (project, run, limit), through its primary key."""
    return f"""
        SELECT previous + 1, sequence - 1 FROM (
            SELECT sequence, lag(sequence, 1, {dialect.zero}) OVER (ORDER BY sequence) AS previous
            FROM sync_events WHERE project_id = {dialect.mark} AND run_id = {dialect.mark}
        ) AS steps
        WHERE sequence - previous > 1 ORDER BY sequence LIMIT {dialect.mark}
    """


def presence(dialect: Dialect, hub_project: str | None) -> Query:
    """Known runtimes, of one hub project or all (``HubStore.presence``)."""
    where, args = equal_filters(dialect, (("hub_project", hub_project),))
    condition = f" WHERE {where[0]}" if where else ""
    statement = (
        f"SELECT {PRESENCE_COLUMNS} FROM runtime_presence{condition} "
        "ORDER BY hub_project, runtime_id"
    )
    return statement, args


def alerts(dialect: Dialect, hub_project: str | None, limit: int) -> Query:
    """Recorded alerts, newest first (``HubStore.alerts``)."""
    where, args = equal_filters(dialect, (("hub_project", hub_project),))
    condition = f" WHERE {where[0]}" if where else ""
    statement = (
        f"SELECT {ALERT_COLUMNS} FROM sync_alerts{condition} "
        f"ORDER BY alert_id DESC LIMIT {dialect.mark}"
    )
    return statement, [*args, limit]


@cache
def purge(dialect: Dialect) -> tuple[str, str]:
    """The deletes of a retention purge (alerts, then presence), each taking the cutoff."""
    return (
        f"DELETE FROM sync_alerts WHERE last_detected_at < {dialect.mark}",
        f"DELETE FROM runtime_presence WHERE heartbeat < {dialect.mark}",
    )


@cache
def init_hub(dialect: Dialect) -> str:
    """Store the hub id and its creation time (two arguments) unless the hub has one."""
    return f"""
        INSERT INTO hub_meta (name, value) VALUES ('hub_id', {dialect.mark}),
            ('hub_created_at', {dialect.mark})
        ON CONFLICT (name) DO NOTHING
    """


@cache
def enrolled(dialect: Dialect) -> str:
    """The enrollment of one runtime: one primary-key lookup."""
    return f"SELECT {ENROLLED_COLUMNS} FROM enrolled_runtimes WHERE runtime_id = {dialect.mark}"


ALL_ENROLLED = f"SELECT {ENROLLED_COLUMNS} FROM enrolled_runtimes ORDER BY runtime_id"


@cache
def upsert_enrolled(dialect: Dialect) -> str:
    """Store a runtime's enrollment record, replacing the one it had."""
    marks = ", ".join([dialect.mark] * 9)
    return f"""
        INSERT INTO enrolled_runtimes ({ENROLLED_COLUMNS}) VALUES ({marks})
        ON CONFLICT (runtime_id) DO UPDATE SET
            state = excluded.state, hub_projects = excluded.hub_projects,
            enrolled_at = excluded.enrolled_at, rotated_at = excluded.rotated_at,
            revoked_at = excluded.revoked_at, previous_valid_until = excluded.previous_valid_until,
            key = excluded.key, previous_key = excluded.previous_key
    """


# ----- alerts -----


INSERTED_ALERT_COLUMNS = (
    "reason, hub_project, runtime_id, project_id, run_id, sequence, existing_hash, "
    "offered_hash, detail, detected_at, last_detected_at"
)
"""The columns an alert upsert writes: all but the id and ``occurrences``."""


PER_OFFENCE_CONFLICT = (
    f"ON CONFLICT (project_id, run_id, sequence, reason, offered_hash) WHERE {KEPT_PER_OFFENCE}"
)
"""The conflict target of a conflict's alert: the same key, reason and offered bytes."""

PER_SENDER_CONFLICT = f"ON CONFLICT (hub_project, runtime_id, reason) WHERE {FOLDED_BY_SENDER}"
"""The conflict target of a refused entry's alert: the same hub project, runtime and reason."""

LATEST_EXAMPLE = (
    "project_id = excluded.project_id, run_id = excluded.run_id, "
    "sequence = excluded.sequence, offered_hash = excluded.offered_hash, detail = excluded.detail"
)
"""What a folded alert about refused entries takes from the latest one."""


# ----- project ownership and moves -----

MOVE_COLUMNS = "move_id, project_id, hub_project, from_runtime_id, to_runtime_id, runs, moved_at"


@cache
def project_owner(dialect: Dialect) -> str:
    """The hub project and runtime one project belongs to."""
    return f"SELECT hub_project, runtime_id FROM sync_projects WHERE project_id = {dialect.mark}"


@cache
def move_project(dialect: Dialect) -> tuple[str, str, str]:
    """A move's writes: the project's new runtime and its runs' (each taking the runtime, then
    the project), and its record (project, hub project, from, to, runs, when), returning its id."""
    mark = dialect.mark
    return (
        f"UPDATE sync_projects SET runtime_id = {mark} WHERE project_id = {mark}",
        f"UPDATE sync_runs SET home_runtime_id = {mark} WHERE project_id = {mark}",
        f"""
        INSERT INTO sync_project_moves
            (project_id, hub_project, from_runtime_id, to_runtime_id, runs, moved_at)
        VALUES ({", ".join([mark] * 6)}) RETURNING move_id
        """,
    )


def project_moves(dialect: Dialect, project_id: str | None) -> Query:
    """The moves recorded, of one project or all, oldest first (``HubStore.project_moves``)."""
    where, args = equal_filters(dialect, (("project_id", project_id),))
    condition = f" WHERE {where[0]}" if where else ""
    return f"SELECT {MOVE_COLUMNS} FROM sync_project_moves{condition} ORDER BY move_id", args
