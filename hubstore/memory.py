"""``MemoryHubStore``: the whole hub store contract in one process's memory (``memory://``).

For tests and throw-away runs: nothing survives the process, and no second
process can open it. Verdicts come from ``hubstore.decide`` exactly as in the
SQLite store; one lock makes each operation atomic, as a transaction would.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from hubstore.decide import EventKey, Known, ProjectOwner, RunKey, decide, warn_conflicts
from hubstore.enrollments import check_move, enrolled, log_move, revoked
from hubstore.errors import HubNotInitializedError
from hubstore.pages import EventFilter, Page
from hubstore.resyncs import ResyncRecord, reported
from hubstore.revocations import KeyRevocation, retired_keys
from hubstore.store import (
    AlertRecord,
    EnrolledRuntime,
    EventPosition,
    HubStore,
    PresenceRecord,
    ProjectMove,
    PurgeResult,
    RunPosition,
    RunSummary,
    SecurityAlert,
    StoredEvent,
)
from hubsync.core.clock import format_timestamp, utc_now, utc_now_iso
from hubsync.core.enrollment import Enrollment, new_hub_id
from hubsync.core.entries import (
    AlertReason,
    EventEntry,
    OutcomeRecord,
    PresenceBeat,
    SecurityReason,
)
from hubsync.core.errors import ConfigError
from hubsync.core.migration import SchemaChange
from hubsync.core.resync import ResyncReport

AlertKey = tuple[str | int, ...]
"""What makes two alerts one: for a conflict the key, the reason and the offered hash; for a
refused entry the hub project, the claimed runtime and the reason."""


@dataclass(frozen=True, slots=True)
class _Presence:
    host: str
    heartbeat: str
    beat: PresenceBeat


class MemoryHubStore(HubStore):
    """The hub store in memory; safe to share between the threads of one process."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._events: dict[EventKey, StoredEvent] = {}
        self._project_owners: dict[str, ProjectOwner] = {}
        self._moves: list[ProjectMove] = []
        self._run_homes: dict[RunKey, str] = {}
        self._presence: dict[tuple[str, str], _Presence] = {}
        self._alerts: dict[AlertKey, AlertRecord] = {}
        self._next_alert_id = 1
        self._hub_id: str | None = None
        self._commit_counter = 0
        self._revocations: dict[str, KeyRevocation] = {}
        self._enrolled: dict[str, EnrolledRuntime] = {}
        self._resyncs: dict[str, ResyncRecord] = {}

    def record_resyncs(self, records: Sequence[ResyncRecord]) -> None:
        """Keep requests to resync (see ``HubStore.record_resyncs``)."""
        with self._lock:
            for record in records:
                self._resyncs.setdefault(record.request_id, record)

    def record_resync_reports(self, reports: Sequence[ResyncReport]) -> int:
        """Apply verified progress reports (see ``HubStore.record_resync_reports``)."""
        counted = 0
        with self._lock:
            for report in reports:
                record = self._resyncs.get(report.request_id)
                changed = None if record is None else reported(record, report)
                if changed is not None:
                    self._resyncs[report.request_id] = changed
                    counted += 1
        return counted

    def resyncs(self, *, open_only: bool = False) -> list[ResyncRecord]:
        """The requests kept (those not done, if ``open_only``), oldest first."""
        with self._lock:
            kept = sorted(self._resyncs.values(), key=lambda r: (r.asked_at, r.request_id))
        return [r for r in kept if not (open_only and r.done)]

    def create_schema(self) -> None:
        """Nothing to create: a memory store starts with its (empty) tables."""

    def ingest(self, batch: Sequence[EventEntry]) -> list[OutcomeRecord]:
        """Decide every event of ``batch`` atomically (see ``HubStore.ingest``)."""
        if not batch:
            return []
        with self._lock:
            decisions = decide(batch, self._known(batch))
            now = utc_now_iso()
            for entry in decisions.accepted:
                event = entry.event
                self._events[entry.key] = StoredEvent(
                    project_id=event.project_id,
                    run_id=event.run_id,
                    sequence=event.sequence,
                    hub_project=event.hub_project,
                    home_runtime_id=event.home_runtime_id,
                    event_type=event.event_type,
                    content_hash=entry.content_hash,
                    received_at=now,
                    record=entry.data,
                )
            self._project_owners.update(decisions.new_projects)
            self._run_homes.update(decisions.new_runs)
            for conflict in decisions.conflicts:
                entry = conflict.entry
                self._keep_alert(
                    conflict.reason,
                    entry.event.hub_project,
                    entry.runtime_id,
                    entry.key,
                    entry.content_hash,
                    conflict.detail,
                    now,
                    existing_hash=conflict.existing_hash,
                )
            warn_conflicts(decisions.conflicts)
            self._commit_counter += 1
            self.committed = self._commit_counter
            return decisions.outcomes

    def commit_counter(self) -> int:
        """How many ingest batches this store committed."""
        with self._lock:
            return self._commit_counter

    def record_security_alerts(self, alerts: Sequence[SecurityAlert]) -> None:
        """Keep alerts about entries that did not authenticate (atomically)."""
        now = utc_now_iso()
        with self._lock:
            for a in alerts:
                key = (a.project_id, a.run_id, a.sequence)
                self._keep_alert(
                    a.reason, a.hub_project, a.runtime_id, key, a.offered_hash, a.detail, now
                )

    def _keep_alert(
        self,
        reason: AlertReason,
        hub_project: str,
        runtime_id: str,
        key: EventKey,
        offered_hash: str,
        detail: str,
        now: str,
        existing_hash: str | None = None,
    ) -> None:
        """A new alert gets the next id; a repeat counts an occurrence of the one kept (a
        refused entry's makes its key, offered hash and detail the latest ones)."""
        project_id, run_id, sequence = key
        folded = isinstance(reason, SecurityReason)
        alert_key: AlertKey = (
            (hub_project, runtime_id, reason) if folded else (*key, reason, offered_hash)
        )
        seen = self._alerts.get(alert_key)
        if seen is not None:
            seen = replace(seen, last_detected_at=now, occurrences=seen.occurrences + 1)
            if folded:
                seen = replace(
                    seen,
                    project_id=project_id,
                    run_id=run_id,
                    sequence=sequence,
                    offered_hash=offered_hash,
                    detail=detail,
                )
            self._alerts[alert_key] = seen
            return
        self._alerts[alert_key] = AlertRecord(
            alert_id=self._next_alert_id,
            reason=reason,
            hub_project=hub_project,
            runtime_id=runtime_id,
            project_id=project_id,
            run_id=run_id,
            sequence=sequence,
            existing_hash=existing_hash,
            offered_hash=offered_hash,
            detail=detail,
            detected_at=now,
            last_detected_at=now,
            occurrences=1,
        )
        self._next_alert_id += 1

    def move_project(
        self, project_id: str, runtime_id: str, *, now: datetime | None = None
    ) -> ProjectMove:
        """Give ``project_id`` and its runs to ``runtime_id`` (see ``HubStore.move_project``)."""
        moment = now or utc_now()
        with self._lock:
            owner = self._project_owners.get(project_id)
            before = check_move(project_id, owner, runtime_id, self._enrolled.get(runtime_id))
            self._project_owners[project_id] = ProjectOwner(before.hub_project, runtime_id)
            runs = [run for run in self._run_homes if run[0] == project_id]
            for run in runs:
                self._run_homes[run] = runtime_id
            move = ProjectMove(
                len(self._moves) + 1,
                project_id,
                before.hub_project,
                before.runtime_id,
                runtime_id,
                len(runs),
                moment,
            )
            self._moves.append(move)
        log_move(move)
        return move

    def project_moves(self, project_id: str | None = None) -> list[ProjectMove]:
        """Every move recorded (of one project, if given), oldest first."""
        with self._lock:
            return [m for m in self._moves if project_id in (None, m.project_id)]

    def sync_cursor(self, project_id: str, run_id: str) -> int:
        """The run's highest sequence with no gap below it."""
        with self._lock:
            sequences = self._sequences(project_id, run_id)
        return _cursor(sequences, _gap_ranges(sequences))

    def gaps(self, project_id: str, run_id: str, limit: int = 1000) -> list[tuple[int, int]]:
        """Missing ranges ``(first, last)`` below the run's highest sequence."""
        with self._lock:
            sequences = self._sequences(project_id, run_id)
        return _gap_ranges(sequences)[:limit]

    def _list_events(self, page: Page[EventPosition]) -> list[StoredEvent]:
        """The page's events by run, project, then sequence."""
        with self._lock:
            chosen = [
                e for e in self._events.values() if page.of.matches(e) and page.past(e.position)
            ]
        chosen.sort(key=lambda e: e.position)
        return chosen[: page.limit]

    def _list_runs(self, page: Page[RunPosition], gaps_per_run: int) -> list[RunSummary]:
        """The page's runs by run then project."""
        by_run: dict[RunPosition, list[StoredEvent]] = {}
        with self._lock:
            for e in self._events.values():
                position = RunPosition(e.run_id, e.project_id)
                if page.of.matches(e) and page.past(position):
                    by_run.setdefault(position, []).append(e)
        return [_summary(by_run[p], gaps_per_run) for p in sorted(by_run)[: page.limit]]

    def _count_events(self, of: EventFilter) -> int:
        """How many stored events ``of`` takes."""
        with self._lock:
            return sum(1 for e in self._events.values() if of.matches(e))

    def record_presence(self, beats: Sequence[PresenceBeat]) -> None:
        """Upsert each beat's runtime presence, stamped with the hub's clock."""
        now = utc_now_iso()
        with self._lock:
            for beat in beats:
                self._presence[(beat.hub_project, beat.runtime_id)] = _Presence(
                    beat.host, now, beat
                )

    def _list_presence(self, hub_project: str | None, cutoff: datetime) -> list[PresenceRecord]:
        """Known runtimes, each flagged stale when last heard from before ``cutoff``."""
        stale_before = format_timestamp(cutoff)
        with self._lock:
            rows = sorted(self._presence.items())
        return [
            PresenceRecord(
                runtime_id=runtime_id,
                hub_project=project,
                host=p.host,
                heartbeat=p.heartbeat,
                beat=p.beat,
                stale=p.heartbeat < stale_before,
            )
            for (project, runtime_id), p in rows
            if hub_project is None or project == hub_project
        ]

    def alerts(self, hub_project: str | None = None, limit: int = 100) -> list[AlertRecord]:
        """Recorded conflicts, newest first."""
        with self._lock:
            chosen = [
                a
                for a in self._alerts.values()
                if hub_project is None or a.hub_project == hub_project
            ]
        chosen.sort(key=lambda a: a.alert_id, reverse=True)
        return chosen[:limit]

    def purge(self, retention: timedelta, now: datetime | None = None) -> PurgeResult:
        """Remove alerts and presence older than ``retention``; events stay."""
        cutoff = format_timestamp((now or utc_now()) - retention)
        with self._lock:
            old_alerts = [k for k, a in self._alerts.items() if a.last_detected_at < cutoff]
            old_presence = [k for k, p in self._presence.items() if p.heartbeat < cutoff]
            for alert_key in old_alerts:
                del self._alerts[alert_key]
            for presence_key in old_presence:
                del self._presence[presence_key]
        return PurgeResult(alerts=len(old_alerts), presence=len(old_presence))

    def init_hub(self) -> str:
        """This hub's id, made (``hub-<16 hex>``) the first time only."""
        with self._lock:
            if self._hub_id is None:
                self._hub_id = new_hub_id()
            return self._hub_id

    def hub_id(self) -> str | None:
        """This hub's id, or None before ``init_hub``."""
        with self._lock:
            return self._hub_id

    def _enroll(
        self, runtime_id: str, hub_projects: Sequence[str], now: datetime, rotation_grace: timedelta
    ) -> Enrollment:
        """Enroll or re-key ``runtime_id`` (see ``HubStore.enroll``)."""
        with self._lock:
            if self._hub_id is None:
                raise HubNotInitializedError(
                    "this in-memory hub store has no hub id yet; call init_hub() first"
                )
            existing = self._enrolled.get(runtime_id)
            record = enrolled(existing, runtime_id, hub_projects, now, rotation_grace)
            self._enrolled[runtime_id] = record
            self._keep_revocations(retired_keys(existing, record, now))
            assert record.key is not None
            return Enrollment(self._hub_id, runtime_id, record.hub_projects, record.key)

    def revoke(self, runtime_id: str, *, now: datetime | None = None) -> EnrolledRuntime:
        """Revoke ``runtime_id`` (see ``HubStore.revoke``), erasing its keys."""
        moment = now or utc_now()
        with self._lock:
            existing = self._enrolled.get(runtime_id)
            record = revoked(existing, runtime_id, moment)
            self._enrolled[runtime_id] = record
            self._keep_revocations(retired_keys(existing, record, moment))
            return record

    def key_revocations(self) -> list[KeyRevocation]:
        """Every key revocation made here, by fingerprint."""
        with self._lock:
            return [self._revocations[f] for f in sorted(self._revocations)]

    def _keep_revocations(self, records: Sequence[KeyRevocation]) -> None:
        for record in records:
            self._revocations[record.fingerprint] = record

    def enrolled_runtime(self, runtime_id: str) -> EnrolledRuntime | None:
        """The enrollment of ``runtime_id``, if it was ever enrolled."""
        with self._lock:
            return self._enrolled.get(runtime_id)

    def enrolled_runtimes(self) -> list[EnrolledRuntime]:
        """Every runtime ever enrolled, by runtime id."""
        with self._lock:
            return [self._enrolled[r] for r in sorted(self._enrolled)]

    def close(self) -> None:
        """Nothing to release; the contents stay readable until the object is dropped."""

    def _known(self, batch: Sequence[EventEntry]) -> Known:
        # Only what the batch touches, as the SQLite store fetches it: decide()
        # updates this copy as it accepts, never the store itself.
        known = Known()
        for entry in batch:
            project_id, run_id, _ = entry.key
            if entry.key in self._events:
                known.hashes[entry.key] = self._events[entry.key].content_hash
            if project_id in self._project_owners:
                known.project_owners[project_id] = self._project_owners[project_id]
            if (project_id, run_id) in self._run_homes:
                known.run_homes[(project_id, run_id)] = self._run_homes[(project_id, run_id)]
        return known

    def _sequences(self, project_id: str, run_id: str) -> list[int]:
        return sorted(s for (p, r, s) in self._events if p == project_id and r == run_id)


def _gap_ranges(sequences: list[int]) -> list[tuple[int, int]]:
    """Missing ranges ``(first, last)`` below the highest of ``sequences`` (sorted)."""
    found: list[tuple[int, int]] = []
    previous = 0
    for sequence in sequences:
        if sequence - previous > 1:
            found.append((previous + 1, sequence - 1))
        previous = sequence
    return found


def _cursor(sequences: list[int], gaps: list[tuple[int, int]]) -> int:
    """The highest of ``sequences`` (sorted) with no gap below it, given their ``gaps``."""
    if gaps:
        return gaps[0][0] - 1
    return sequences[-1] if sequences else 0


def _summary(events: list[StoredEvent], gaps_per_run: int) -> RunSummary:
    """One run's summary from all its stored events."""
    sequences = sorted(e.sequence for e in events)
    gaps = _gap_ranges(sequences)
    first = events[0]
    return RunSummary(
        run_id=first.run_id,
        project_id=first.project_id,
        hub_project=first.hub_project,
        home_runtime_id=first.home_runtime_id,
        events=len(sequences),
        highest_sequence=sequences[-1],
        sync_cursor=_cursor(sequences, gaps),
        missing=sequences[-1] - len(sequences),
        gaps=tuple(gaps[:gaps_per_run]),
        last_received_at=max(e.received_at for e in events),
    )


def open_hub_store(url: str, *, create_schema: bool, busy_budget: float | None) -> HubStore:
    """The ``memory`` backend of ``hubstore.open_store``: a new, empty store per call.

    ``create_schema`` and ``busy_budget`` do not apply (a memory store has its
    tables from the start and is never locked by another process).
    """
    parts = urlsplit(url)
    if parts.netloc or parts.path or parts.query or parts.fragment:
        raise ConfigError(
            f"hub URL {url[:60]!r}: an in-memory store takes no name, path or options; "
            "write memory://"
        )
    return MemoryHubStore()


def migrate_hub_store(url: str, *, busy_budget: float | None) -> SchemaChange:
    """The ``memory`` backend of ``hubstore.migrate_store``: refused, there is nothing to keep."""
    raise ConfigError(
        f"hub URL {url[:60]!r}: an in-memory store is new and empty at every open, so it has "
        "no schema to migrate; give the URL of a persistent store (sqlite:///PATH)"
    )


__all__ = ["MemoryHubStore", "migrate_hub_store", "open_hub_store"]
