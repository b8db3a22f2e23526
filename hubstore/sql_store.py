"""``SqlHubStore``: what the SQL hub stores (SQLite, PostgreSQL) do alike, written once.

The reads (events, runs, counts, gaps, presence, alerts, enrollments) and the
small writes (purge, the hub id, enroll and revoke) run the statements of
``hubstore.sql_statements`` in the backend's ``Dialect`` and shape the rows
into the contract's records here. A backend supplies its connection
(``_read``, ``_write``), how its driver hands over timestamps and lists
(``_timestamp``, ``_moment``, ``_as_moment``, ``_list``, ``_as_list``), how
its runs page returns gaps (``_gap_ranges``), and its own ``ingest``,
``sync_cursor``, ``record_presence`` and ``record_security_alerts``, where each
database is fastest with its own batch statements.
"""

from __future__ import annotations

import shlex
from abc import abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol, TypeVar

import orjson

from hubstore import resyncs, store
from hubstore import sql_statements as statements
from hubstore.decide import Conflict, ProjectOwner
from hubstore.enrollments import check_move, enrolled, log_move, revoked
from hubstore.errors import HubNotInitializedError
from hubstore.pages import EventFilter, Page
from hubstore.resyncs import ResyncRecord
from hubstore.revocations import KeyRevocation, decoded, retired_keys
from hubstore.sql_statements import Dialect
from hubsync.core.clock import format_timestamp, utc_now
from hubsync.core.enrollment import Enrollment, new_hub_id
from hubsync.core.entries import PresenceBeat, alert_reason
from hubsync.core.resync import ResyncReport

T = TypeVar("T")


class Cursor(Protocol):
    """What the shared code uses of a DB-API cursor."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What the shared code uses of a DB-API connection (``sqlite3``'s, psycopg's)."""

    def execute(self, statement: str, args: Sequence[Any] = ..., /) -> Cursor: ...


AlertRow = tuple[str, str, str, str, str, int, str | None, str, str]
"""reason, hub project, runtime, project, run, sequence, existing hash, offered hash, detail."""


def security_alert_row(alert: store.SecurityAlert) -> AlertRow:
    """The columns of a refused entry's alert (no existing hash)."""
    return (
        alert.reason.value,
        alert.hub_project,
        alert.runtime_id,
        alert.project_id,
        alert.run_id,
        alert.sequence,
        None,
        alert.offered_hash,
        alert.detail,
    )


def conflict_row(conflict: Conflict) -> AlertRow:
    """The columns of a refused conflict's alert."""
    entry = conflict.entry
    return (
        conflict.reason.value,
        entry.event.hub_project,
        entry.runtime_id,
        *entry.key,
        conflict.existing_hash,
        entry.content_hash,
        conflict.detail,
    )


def one(conn: Connection, statement: str, args: Sequence[object] = ()) -> Any:
    """The first column of the one row ``statement`` returns."""
    row = conn.execute(statement, args).fetchone()
    assert row is not None
    return row[0]


class SqlHubStore(store.HubStore):
    """The ``HubStore`` contract over SQL, apart from ingest (see the module docstring)."""

    dialect: ClassVar[Dialect]

    # ----- what a backend supplies -----

    @abstractmethod
    def _read(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` on a connection, for reading."""

    @abstractmethod
    def _write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one write transaction."""

    @abstractmethod
    def _no_hub_id(self) -> HubNotInitializedError:
        """The error ``enroll`` raises before ``init_hub``, naming this store."""

    @staticmethod
    @abstractmethod
    def _timestamp(value: Any) -> str:
        """A timestamp column as the contract's text (``format_timestamp``)."""

    @staticmethod
    @abstractmethod
    def _moment(moment: datetime) -> object:
        """An aware datetime as a timestamp argument."""

    @staticmethod
    @abstractmethod
    def _as_moment(value: Any) -> datetime:
        """A timestamp column as an aware UTC datetime."""

    @staticmethod
    @abstractmethod
    def _list(values: list[str]) -> object:
        """A list of names as an argument of a list column."""

    @staticmethod
    @abstractmethod
    def _as_list(value: Any) -> tuple[str, ...]:
        """A list column as a tuple of names."""

    @staticmethod
    @abstractmethod
    def _gap_ranges(columns: Sequence[Any]) -> tuple[tuple[int, int], ...]:
        """A runs page row's ``gap_columns`` as the run's first gaps, in order."""

    def _lock_enrollments(self, conn: Connection) -> None:
        """Make enroll and revoke one at a time, if the write transaction does not already."""

    def _lock_owners(self, conn: Connection) -> None:
        """Keep every ingest out while a project moves, if the write transaction does not."""

    # ----- reads -----

    def gaps(self, project_id: str, run_id: str, limit: int = 1000) -> list[tuple[int, int]]:
        """Missing ranges ``(first, last)`` below the run's highest sequence."""
        statement = statements.gaps(self.dialect)
        args = (project_id, run_id, limit)
        rows = self._read(lambda conn: conn.execute(statement, args).fetchall())
        return [(int(a), int(b)) for a, b in rows]

    def _list_events(self, page: Page[store.EventPosition]) -> list[store.StoredEvent]:
        """The page's events by run, project, then sequence: one statement."""
        statement, args = statements.events_page(self.dialect, page)
        rows = self._read(lambda conn: conn.execute(statement, args).fetchall())
        timestamp = self._timestamp
        # EVENT_COLUMNS are StoredEvent's fields, in order
        return [
            store.StoredEvent(
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], timestamp(r[7]), r[8].encode("utf-8")
            )
            for r in rows
        ]

    def _list_runs(
        self, page: Page[store.RunPosition], gaps_per_run: int
    ) -> list[store.RunSummary]:
        """The page's runs by run then project: one statement."""
        statement, args = statements.runs_page(self.dialect, page, gaps_per_run)
        hub_project = page.of.hub_project
        assert hub_project is not None  # ``runs`` lists one hub project's
        rows = self._read(lambda conn: conn.execute(statement, args).fetchall())
        summaries = []
        for run, project, home, count, highest, last, first_gap, *gap_columns in rows:
            summaries.append(
                store.RunSummary(
                    run_id=run,
                    project_id=project,
                    hub_project=hub_project,
                    home_runtime_id=home,
                    events=int(count),
                    highest_sequence=int(highest),
                    sync_cursor=int(highest) if first_gap is None else int(first_gap) - 1,
                    missing=int(highest) - int(count),
                    gaps=self._gap_ranges(gap_columns),
                    last_received_at=self._timestamp(last),
                )
            )
        return summaries

    def _count_events(self, of: EventFilter) -> int:
        """How many stored events ``of`` takes."""
        statement, args = statements.count_events(self.dialect, of)
        return int(self._read(lambda conn: one(conn, statement, args)))

    def _list_presence(
        self, hub_project: str | None, cutoff: datetime
    ) -> list[store.PresenceRecord]:
        """Known runtimes, each flagged stale when last heard from before ``cutoff``."""
        statement, args = statements.presence(self.dialect, hub_project)
        rows = self._read(lambda conn: conn.execute(statement, args).fetchall())
        # compared as the column holds it: canonical text (SQLite), a timestamptz (PostgreSQL)
        stale_before = self._moment(cutoff)
        return [
            store.PresenceRecord(
                runtime_id=r[0],
                hub_project=r[1],
                host=r[2],
                heartbeat=self._timestamp(r[3]),
                beat=PresenceBeat(**orjson.loads(r[4])),
                stale=r[3] < stale_before,
            )
            for r in rows
        ]

    def alerts(self, hub_project: str | None = None, limit: int = 100) -> list[store.AlertRecord]:
        """Recorded alerts (conflicts and refused entries), newest first."""
        statement, args = statements.alerts(self.dialect, hub_project, limit)
        rows = self._read(lambda conn: conn.execute(statement, args).fetchall())
        timestamp = self._timestamp
        return [
            store.AlertRecord(
                alert_id=r[0],
                reason=alert_reason(r[1]),
                hub_project=r[2],
                runtime_id=r[3],
                project_id=r[4],
                run_id=r[5],
                sequence=r[6],
                existing_hash=r[7],
                offered_hash=r[8],
                detail=r[9],
                detected_at=timestamp(r[10]),
                last_detected_at=timestamp(r[11]),
                occurrences=r[12],
            )
            for r in rows
        ]

    # ----- retention and the hub's identity -----

    def purge(self, retention: timedelta, now: datetime | None = None) -> store.PurgeResult:
        """Remove alerts and presence older than ``retention``; events stay."""
        cutoff = (self._moment((now or utc_now()) - retention),)
        delete_alerts, delete_presence = statements.purge(self.dialect)

        def work(conn: Connection) -> store.PurgeResult:
            alerts = conn.execute(delete_alerts, cutoff).rowcount
            presence = conn.execute(delete_presence, cutoff).rowcount
            return store.PurgeResult(alerts=alerts, presence=presence)

        return self._write(work)

    def init_hub(self) -> str:
        """This hub's id, made (``hub-<16 hex>``) and stored the first time only."""
        statement = statements.init_hub(self.dialect)

        def work(conn: Connection) -> str:
            # Under the write lock, or waiting for the first writer to commit: a second
            # init inserts nothing and reads the first one's id, so racing inits agree.
            conn.execute(statement, (new_hub_id(), format_timestamp(utc_now())))
            return str(one(conn, statements.HUB_ID))

        return self._write(work)

    def hub_id(self) -> str | None:
        """This hub's id, or None before ``init_hub``."""
        return self._read(_hub_id)

    def commit_counter(self) -> int:
        """How many ingest batches this store committed (``hub_meta`` ``commit_counter``)."""
        row = self._read(lambda conn: conn.execute(statements.COMMIT_COUNTER).fetchone())
        return 0 if row is None else int(row[0])

    # ----- enrollment -----

    def _enroll(
        self, runtime_id: str, hub_projects: Sequence[str], now: datetime, rotation_grace: timedelta
    ) -> Enrollment:
        """Enroll or re-key ``runtime_id`` (see ``HubStore.enroll``), in one transaction."""

        def work(conn: Connection) -> Enrollment:
            self._lock_enrollments(conn)
            hub_id = _hub_id(conn)
            if hub_id is None:
                raise self._no_hub_id()
            existing = self._enrolled(conn, runtime_id)
            record = enrolled(existing, runtime_id, hub_projects, now, rotation_grace)
            conn.execute(statements.upsert_enrolled(self.dialect), self._enrolled_row(record))
            self._keep_revocations(conn, retired_keys(existing, record, now))
            assert record.key is not None
            return Enrollment(hub_id, runtime_id, record.hub_projects, record.key)

        return self._write(work)

    def revoke(self, runtime_id: str, *, now: datetime | None = None) -> store.EnrolledRuntime:
        """Revoke ``runtime_id`` (see ``HubStore.revoke``), erasing its keys."""
        moment = now or utc_now()

        def work(conn: Connection) -> store.EnrolledRuntime:
            self._lock_enrollments(conn)
            existing = self._enrolled(conn, runtime_id)
            record = revoked(existing, runtime_id, moment)
            conn.execute(statements.upsert_enrolled(self.dialect), self._enrolled_row(record))
            self._keep_revocations(conn, retired_keys(existing, record, moment))
            return record

        return self._write(work)

    def enrolled_runtime(self, runtime_id: str) -> store.EnrolledRuntime | None:
        """The enrollment of ``runtime_id``: one primary-key lookup."""
        return self._read(lambda conn: self._enrolled(conn, runtime_id))

    def enrolled_runtimes(self) -> list[store.EnrolledRuntime]:
        """Every runtime ever enrolled, by runtime id."""
        rows = self._read(lambda conn: conn.execute(statements.ALL_ENROLLED).fetchall())
        return [self._enrolled_record(row) for row in rows]

    def key_revocations(self) -> list[KeyRevocation]:
        """Every key revocation kept in ``hub_meta``, by fingerprint."""
        rows = self._read(lambda conn: conn.execute(statements.KEY_REVOCATIONS).fetchall())
        found = (decoded(str(n).removeprefix(statements.REVOCATION_PREFIX), v) for n, v in rows)
        return [record for record in found if record is not None]

    def _keep_revocations(self, conn: Connection, records: Sequence[KeyRevocation]) -> None:
        statement = statements.keep_revocation(self.dialect)
        for record in records:
            conn.execute(
                statement, (statements.REVOCATION_PREFIX + record.fingerprint, record.encoded())
            )

    # ----- project ownership -----

    def move_project(
        self, project_id: str, runtime_id: str, *, now: datetime | None = None
    ) -> store.ProjectMove:
        """Give ``project_id`` and its runs to ``runtime_id`` (see ``HubStore.move_project``)."""
        moment = now or utc_now()
        set_owner, rehome_runs, record = statements.move_project(self.dialect)

        def work(conn: Connection) -> store.ProjectMove:
            self._lock_owners(conn)
            row = conn.execute(statements.project_owner(self.dialect), (project_id,)).fetchone()
            owner = None if row is None else ProjectOwner(str(row[0]), str(row[1]))
            target = self._enrolled(conn, runtime_id)
            before = check_move(project_id, owner, runtime_id, target)
            conn.execute(set_owner, (runtime_id, project_id))
            runs = conn.execute(rehome_runs, (runtime_id, project_id)).rowcount
            args = (project_id, before.hub_project, before.runtime_id, runtime_id, runs)
            move_id = one(conn, record, (*args, self._moment(moment)))
            return store.ProjectMove(int(move_id), *args, moment)

        move = self._write(work)
        log_move(move)
        return move

    def project_moves(self, project_id: str | None = None) -> list[store.ProjectMove]:
        """Every move recorded (of one project, if given), oldest first."""
        statement, args = statements.project_moves(self.dialect, project_id)
        rows = self._read(lambda conn: conn.execute(statement, args).fetchall())
        return [
            store.ProjectMove(int(r[0]), r[1], r[2], r[3], r[4], int(r[5]), self._as_moment(r[6]))
            for r in rows
        ]

    # ----- resync requests -----

    def record_resyncs(self, records: Sequence[ResyncRecord]) -> None:
        """Keep requests to resync as they are published (``hubstore.resyncs``)."""
        statement = resyncs.insert(self.dialect)

        def work(conn: Connection) -> None:
            for record in records:
                conn.execute(statement, resyncs.insert_args(record))

        self._write(work)

    def record_resync_reports(self, reports: Sequence[ResyncReport]) -> int:
        """Apply verified progress reports to their requests; how many counted."""
        select, update = resyncs.select(self.dialect), resyncs.update(self.dialect)

        def work(conn: Connection) -> int:
            counted = 0
            for report in reports:
                row = conn.execute(select, (report.request_id,)).fetchone()
                changed = None if row is None else resyncs.reported(resyncs.record_of(row), report)
                if changed is not None:
                    conn.execute(update, resyncs.update_args(changed))
                    counted += 1
            return counted

        return self._write(work)

    def resyncs(self, *, open_only: bool = False) -> list[ResyncRecord]:
        """The requests to resync kept (those not done, if ``open_only``), oldest first."""
        rows = self._read(lambda conn: conn.execute(resyncs.listing(open_only)).fetchall())
        return [resyncs.record_of(row) for row in rows]

    def _enrolled(self, conn: Connection, runtime_id: str) -> store.EnrolledRuntime | None:
        row = conn.execute(statements.enrolled(self.dialect), (runtime_id,)).fetchone()
        return None if row is None else self._enrolled_record(row)

    def _enrolled_row(self, record: store.EnrolledRuntime) -> tuple[object, ...]:
        def moment(value: datetime | None) -> object:
            return None if value is None else self._moment(value)

        return (
            record.runtime_id,
            record.state.value,
            self._list(list(record.hub_projects)),
            self._moment(record.enrolled_at),
            moment(record.rotated_at),
            moment(record.revoked_at),
            moment(record.previous_valid_until),
            record.key,
            record.previous_key,
        )

    def _enrolled_record(self, row: Sequence[Any]) -> store.EnrolledRuntime:
        def moment(value: object) -> datetime | None:
            return None if value is None else self._as_moment(value)

        runtime_id, state, projects, enrolled_at, rotated, revoked_at, until, key, previous = row
        return store.EnrolledRuntime(
            runtime_id=str(runtime_id),
            state=store.RuntimeState(str(state)),
            hub_projects=self._as_list(projects),
            enrolled_at=self._as_moment(enrolled_at),
            rotated_at=moment(rotated),
            revoked_at=moment(revoked_at),
            previous_valid_until=moment(until),
            key=None if key is None else bytes(key),
            previous_key=None if previous is None else bytes(previous),
        )


def _hub_id(conn: Connection) -> str | None:
    row = conn.execute(statements.HUB_ID).fetchone()
    return None if row is None else str(row[0])


def no_hub_id(shown: str, url: str) -> HubNotInitializedError:
    """``enroll`` before ``init_hub`` on the store ``shown`` to an operator, opened by ``url``."""
    return HubNotInitializedError(
        f"{shown} has no hub id yet; run `hubsync hub init --hub-url {shlex.quote(url)}` first"
    )
