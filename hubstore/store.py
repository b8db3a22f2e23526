"""The hub store contract: what every hub database (SQLite today, PostgreSQL later) must do.

A store keeps three things: the sync events of every hub project (one row per
``(project_id, run_id, sequence)``, never overwritten), the latest presence beat
of every runtime, and the conflicts it refused (security alerts). Each project
id belongs to one hub project and one runtime, the first to write it, until an
operator moves it (``move_project``, recorded in ``project_moves``). It also holds
the hub's identity (its hub id, made once by ``init_hub``) and the runtimes it
enrolled, each with the key its entries are to be verified with. Its one hot
operation is ``ingest``: a whole batch decided in one transaction, so a crash
either stores the batch's verdicts or none of them, and a redelivery after the
crash is judged against exactly what was committed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from hubstore.pages import EventFilter, Page
from hubsync.core.clock import utc_now
from hubsync.core.closing import ClosesOnExit
from hubsync.core.enrollment import Enrollment
from hubsync.core.entries import (
    AlertReason,
    EventEntry,
    OutcomeRecord,
    PresenceBeat,
    SecurityReason,
)

if TYPE_CHECKING:
    from hubstore.resyncs import ResyncRecord
    from hubstore.revocations import KeyRevocation
    from hubsync.core.resync import ResyncReport

DEFAULT_STALE_AFTER = timedelta(seconds=60)
"""A runtime not heard from for this long is listed as stale."""

DEFAULT_ROTATION_GRACE = timedelta(hours=24)
"""How long a runtime's previous key stays valid after ``enroll`` gave it a new one."""

MAX_ROTATION_GRACE = timedelta(days=30)
"""The longest rotation grace: a key replaced because it leaked must not outlive that by
years (and a compromised runtime is revoked, then enrolled, for no grace at all)."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One row of ``sync_events``: an accepted event and its exact canonical bytes."""

    project_id: str
    run_id: str
    sequence: int
    hub_project: str
    home_runtime_id: str
    event_type: str
    content_hash: str
    received_at: str
    record: bytes

    @property
    def position(self) -> EventPosition:
        """Where a listing resumes after this event."""
        return EventPosition(self.run_id, self.project_id, self.sequence)


@dataclass(frozen=True, slots=True)
class PresenceRecord:
    """A runtime's latest presence as the hub knows it.

    ``heartbeat`` is when the hub received the latest beat (the hub's clock, so
    a runtime with a skewed clock cannot look alive after it died); ``beat`` is
    what the runtime said about itself.
    """

    runtime_id: str
    hub_project: str
    host: str
    heartbeat: str
    beat: PresenceBeat
    stale: bool


@dataclass(frozen=True, slots=True)
class AlertRecord:
    """One alert from ``sync_alerts``: a refused conflict, or an entry that did not authenticate.

    Repeats of the same conflict (same key, reason and offered bytes, e.g. a
    redelivery) are one alert whose ``occurrences`` grows. Refused entries are
    folded harder: one alert per hub project, claimed runtime and reason, whose
    key, offered hash and detail are those of the latest one
    (``detected_at`` is the first, ``last_detected_at`` the latest).
    """

    alert_id: int
    reason: AlertReason
    hub_project: str
    runtime_id: str
    project_id: str
    run_id: str
    sequence: int
    existing_hash: str | None
    offered_hash: str
    detail: str
    detected_at: str
    last_detected_at: str
    occurrences: int


@dataclass(frozen=True, slots=True)
class SecurityAlert:
    """An entry refused because it did not authenticate, to be kept as an alert.

    The ids are what the entry claimed (checked as names, else shown escaped),
    ``sequence`` 0 when it named none, and ``offered_hash`` the SHA-256 of the
    event bytes it carried: never the bytes themselves.
    """

    reason: SecurityReason
    hub_project: str
    runtime_id: str
    project_id: str
    run_id: str
    sequence: int
    offered_hash: str
    detail: str


@dataclass(frozen=True, slots=True)
class ProjectMove:
    """One move of a project to another runtime, as kept in ``sync_project_moves``.

    ``runs`` is how many of the project's runs were re-homed on the new runtime.
    """

    move_id: int
    project_id: str
    hub_project: str
    from_runtime_id: str
    to_runtime_id: str
    runs: int
    moved_at: datetime


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """How many rows a retention purge removed (events are never purged)."""

    alerts: int
    presence: int


class EventPosition(NamedTuple):
    """A position in a hub project's event listing, unique per event.

    Events are listed in this order: run, then project (two projects of one
    hub project may use the same run id), then sequence. ``project_id`` must be
    part of the position, or a page ending inside one project's run would skip
    the other project's rows of that run id.
    """

    run_id: str
    project_id: str
    sequence: int


class RunPosition(NamedTuple):
    """A position in a hub project's run listing: runs are listed by run, then project."""

    run_id: str
    project_id: str


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run of a hub project as stored: how many events, how far it is complete, what is missing.

    ``sync_cursor`` is the highest sequence with no gap below it; ``missing``
    counts every absent sequence below ``highest_sequence``; ``gaps`` holds the
    first missing ranges ``(first, last)`` (inclusive), at most the
    ``gaps_per_run`` asked for, so one badly holed run cannot swell a listing.
    """

    run_id: str
    project_id: str
    hub_project: str
    home_runtime_id: str
    events: int
    highest_sequence: int
    sync_cursor: int
    missing: int
    gaps: tuple[tuple[int, int], ...]
    last_received_at: str

    @property
    def position(self) -> RunPosition:
        """Where a listing resumes after this run."""
        return RunPosition(self.run_id, self.project_id)


class RuntimeState(StrEnum):
    """Whether an enrolled runtime may sync: ``active``, or ``revoked`` (no key is valid)."""

    ACTIVE = "active"
    REVOKED = "revoked"


@dataclass(frozen=True, slots=True)
class EnrolledRuntime:
    """A runtime the hub enrolled: its keys, its hub projects, its state and when each changed.

    What the consumer verifies a runtime's entries against; it may keep the
    record for a while (``keys_at`` takes the time). ``previous_key`` is the
    key before the latest rotation, valid until ``previous_valid_until`` so
    that entries signed just before the rotation still verify. A revoked
    runtime keeps no key at all. Keys are left out of the ``repr``.
    """

    runtime_id: str
    state: RuntimeState
    hub_projects: tuple[str, ...]
    enrolled_at: datetime
    rotated_at: datetime | None
    revoked_at: datetime | None
    previous_valid_until: datetime | None
    key: bytes | None = field(repr=False)
    previous_key: bytes | None = field(repr=False)

    def keys_at(self, now: datetime) -> tuple[bytes, ...]:
        """The keys an entry of this runtime may be signed with at ``now``: current first."""
        if self.state is not RuntimeState.ACTIVE or self.key is None:
            return ()
        if (
            self.previous_key is not None
            and self.previous_valid_until is not None
            and now < self.previous_valid_until
        ):
            return (self.key, self.previous_key)
        return (self.key,)

    def may_write(self, hub_project: str) -> bool:
        """Whether this runtime is active and enrolled for ``hub_project``."""
        return self.state is RuntimeState.ACTIVE and hub_project in self.hub_projects


class HubStore(ClosesOnExit, ABC):
    """The hub's persistence of sync events, runtime presence and conflicts, and of its own
    identity and the runtimes it enrolled.

    Implementations must be safe to share between processes (several consumer
    workers on one database) and must never surface a transient lock as an
    error before their retry budget is spent. ``events``, ``runs``, ``count_events``,
    ``presence`` and ``enroll`` fill in their defaults here, once, for the backend's hooks.
    """

    @abstractmethod
    def create_schema(self) -> None:
        """Create the store's tables if they do not exist, or upgrade an older schema (idempotent).

        Opening a store never creates or upgrades its schema unless asked to
        (``open_store(url, create_schema=True)``); a store opened without one,
        or with an older one, refuses with ``SchemaVersionError``.
        """

    @abstractmethod
    def ingest(self, batch: Sequence[EventEntry]) -> list[OutcomeRecord]:
        """Decide every event of ``batch`` in one transaction; one outcome per entry, in order.

        Every entry is authenticated: its ``runtime_id`` signed it.
        ``accepted``: stored; a project id not seen before now belongs to the
        entry's hub project and runtime. ``duplicate``: the same bytes are
        already stored (earlier, or earlier in this batch). ``conflict``:
        refused and recorded in the alerts with reason ``not_owner`` (the
        project belongs to another runtime), ``sequence_reused`` (other bytes
        hold the key), ``project_mismatch`` (the project belongs to another hub
        project) or ``home_runtime_mismatch`` (the run is homed on another
        runtime: only runs stored before projects had owners). The verdicts are
        ``hubstore.decide``'s. A stored row is never changed.

        The same transaction raises the commit counter by one (one statement
        per batch); ``committed`` is then the value this batch committed.
        """

    committed: int = 0
    """The commit counter the latest ``ingest`` through this object committed (0 before any)."""

    @abstractmethod
    def commit_counter(self) -> int:
        """The store's commit counter as committed now: how many ingest batches it ever
        committed (0 for a store that never ingested). It only grows."""

    @abstractmethod
    def sync_cursor(self, project_id: str, run_id: str) -> int:
        """The run's highest sequence with no gap below it (0 when sequence 1 is missing)."""

    @abstractmethod
    def gaps(self, project_id: str, run_id: str, limit: int = 1000) -> list[tuple[int, int]]:
        """Missing sequence ranges ``(first, last)``, inclusive, below the run's highest one."""

    def events(
        self,
        hub_project: str,
        run_id: str | None = None,
        after: EventPosition | None = None,
        limit: int = 1000,
        *,
        project_id: str | None = None,
    ) -> list[StoredEvent]:
        """Events of a hub project (of one run, one project, if given) after ``after``.

        Ordered by ``EventPosition``: run, project, sequence. Keyset paging:
        pass the last event's ``position`` as ``after`` to get the next page;
        every row comes exactly once whatever the page size.
        """
        return self._list_events(Page(EventFilter(hub_project, project_id, run_id), after, limit))

    @abstractmethod
    def _list_events(self, page: Page[EventPosition]) -> list[StoredEvent]:
        """The events of ``page``, in ``EventPosition`` order."""

    def runs(
        self,
        hub_project: str,
        after: RunPosition | None = None,
        limit: int = 1000,
        *,
        project_id: str | None = None,
        gaps_per_run: int = 10,
    ) -> list[RunSummary]:
        """The runs of a hub project (of one project, if given) after ``after``, by run then project.

        Keyset paging as ``events``. A backend computes a page in a bounded
        number of queries, however many runs or events the hub holds.
        """
        page = Page(EventFilter(hub_project, project_id), after, limit)
        return self._list_runs(page, gaps_per_run)

    @abstractmethod
    def _list_runs(self, page: Page[RunPosition], gaps_per_run: int) -> list[RunSummary]:
        """The runs of ``page``, in ``RunPosition`` order, with their first ``gaps_per_run`` gaps."""

    def count_events(
        self,
        hub_project: str | None = None,
        project_id: str | None = None,
        run_id: str | None = None,
    ) -> int:
        """How many events are stored, optionally for one hub project, project or run."""
        return self._count_events(EventFilter(hub_project, project_id, run_id))

    @abstractmethod
    def _count_events(self, of: EventFilter) -> int:
        """How many stored events ``of`` takes."""

    @abstractmethod
    def record_presence(self, beats: Sequence[PresenceBeat]) -> None:
        """Upsert the latest presence of each beat's runtime, stamped with the hub's clock."""

    def presence(
        self,
        hub_project: str | None = None,
        stale_after: timedelta = DEFAULT_STALE_AFTER,
        now: datetime | None = None,
    ) -> list[PresenceRecord]:
        """Known runtimes (of one hub project, or all), each flagged stale when silent too long."""
        return self._list_presence(hub_project, (now or utc_now()) - stale_after)

    @abstractmethod
    def _list_presence(self, hub_project: str | None, cutoff: datetime) -> list[PresenceRecord]:
        """Known runtimes (of one hub project, or all); stale: last heard from before ``cutoff``."""

    @abstractmethod
    def alerts(self, hub_project: str | None = None, limit: int = 100) -> list[AlertRecord]:
        """Recorded alerts (conflicts and refused entries), newest first (by when each was first
        recorded: a repeat counted into an alert does not move it)."""

    @abstractmethod
    def record_security_alerts(self, alerts: Sequence[SecurityAlert]) -> None:
        """Keep alerts about entries that did not authenticate, in one transaction.

        One alert per (hub project, claimed runtime, reason): a repeat, whatever
        key and bytes it claims, counts an occurrence of the alert already kept
        and makes its key, offered hash and detail the latest ones, so a flood
        of forgeries stays one row.
        """

    @abstractmethod
    def move_project(
        self, project_id: str, runtime_id: str, *, now: datetime | None = None
    ) -> ProjectMove:
        """Give ``project_id`` and all its runs to ``runtime_id``, in one transaction; the move.

        From then on only ``runtime_id`` may write the project; the runtime it
        had is refused ``not_owner``. Stored events are not changed. The move
        is recorded (``project_moves``). Raises ``ProjectMoveRefusedError`` for
        a project the hub never stored, a runtime never enrolled, revoked, or
        not enrolled for the project's hub project, or the runtime the project
        already belongs to; nothing changes then.
        """

    @abstractmethod
    def project_moves(self, project_id: str | None = None) -> list[ProjectMove]:
        """Every move recorded (of one project, if given), oldest first; never purged."""

    @abstractmethod
    def purge(self, retention: timedelta, now: datetime | None = None) -> PurgeResult:
        """Remove alerts and presence older than ``retention``; events are kept for ever."""

    @abstractmethod
    def init_hub(self) -> str:
        """Give this hub its id (``hub-`` and 16 random hex digits) unless it has one; return it.

        Idempotent: the id is made once and never changes.
        """

    @abstractmethod
    def hub_id(self) -> str | None:
        """This hub's id, or None before ``init_hub``."""

    def enroll(
        self,
        runtime_id: str,
        hub_projects: Sequence[str],
        *,
        now: datetime | None = None,
        rotation_grace: timedelta = DEFAULT_ROTATION_GRACE,
    ) -> Enrollment:
        """Enroll ``runtime_id`` for ``hub_projects`` with a fresh key, or give it a new key.

        The hub projects replace those it had. An active runtime's key becomes
        its previous key, valid until ``now + rotation_grace`` (at most
        ``MAX_ROTATION_GRACE``, else ``ValueError``); a revoked
        runtime comes back active with only the new key. The keys it retires get
        their revocations (``key_revocations``). Returns what the
        runtime must be told (the key included). Raises
        ``HubNotInitializedError`` before ``init_hub`` and ``ConfigError`` for
        an invalid runtime id or hub project, or none.
        """
        return self._enroll(runtime_id, hub_projects, now or utc_now(), rotation_grace)

    @abstractmethod
    def _enroll(
        self, runtime_id: str, hub_projects: Sequence[str], now: datetime, rotation_grace: timedelta
    ) -> Enrollment:
        """``enroll`` at ``now``, in one transaction."""

    @abstractmethod
    def revoke(self, runtime_id: str, *, now: datetime | None = None) -> EnrolledRuntime:
        """Revoke ``runtime_id``: from now on no key of it is valid (both are deleted, each
        leaving its signed revocation in ``key_revocations``).

        Idempotent (a revoked runtime keeps its first ``revoked_at``). Raises
        ``RuntimeNotEnrolledError`` for a runtime never enrolled.
        """

    @abstractmethod
    def enrolled_runtime(self, runtime_id: str) -> EnrolledRuntime | None:
        """The enrollment of ``runtime_id``, revoked or not; None if it was never enrolled.

        One lookup by primary key: the consumer calls it for each runtime it
        has not cached.
        """

    @abstractmethod
    def enrolled_runtimes(self) -> list[EnrolledRuntime]:
        """Every runtime ever enrolled, revoked ones too, by runtime id."""

    @abstractmethod
    def key_revocations(self) -> list[KeyRevocation]:
        """A signed revocation of every key ``enroll`` or ``revoke`` retired, by fingerprint.

        Written in the transaction that retired the key (``hubstore.revocations``):
        a key revoked, or replaced with no grace left, is revoked at that moment;
        one kept as the previous key, at the end of its grace. The consumers
        publish them to Redis, where they outlive a restore of the store.
        """

    @abstractmethod
    def record_resyncs(self, records: Sequence[ResyncRecord]) -> None:
        """Keep requests to resync as they are published, in one transaction (a request id
        kept already is left as it is)."""

    @abstractmethod
    def record_resync_reports(self, reports: Sequence[ResyncReport]) -> int:
        """Apply verified progress reports to their requests (``hubstore.resyncs.reported``:
        only the asked runtime's, for its hub project, newest first, never after done);
        how many counted."""

    @abstractmethod
    def resyncs(self, *, open_only: bool = False) -> list[ResyncRecord]:
        """The requests to resync kept (those not done, if ``open_only``), oldest first."""

    @abstractmethod
    def close(self) -> None:
        """Release the database connection."""
