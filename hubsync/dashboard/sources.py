"""What the dashboard's pages show and do, each through the code of the matching command.

``Sources`` keeps one Redis client and one hub store open (``StatusGatherer``,
the gatherer of ``hubsync status``) and serialises their use with a lock, so
the request threads and the sampler never share a connection mid-command.
Each page's data is read as its command reads it: the overview is a
``StatusReport`` plus ``read_alerts`` and the hub store's ``alerts``, live
leases from ``LeaseClient.list``, parked effects from ``list_effects`` (``hubsync effects
list --state blocked_uncertain``);
dead letters through ``DeadLetters``; runs and events through ``HubStore.runs`` and
``HubStore.events`` with the cursors of ``hubsync runs`` and ``hubsync events``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from consumers.stream.consumer_admin import Removal, remove_consumer
from consumers.views.alerts import StreamAlert, read_alerts
from consumers.views.dead_letters import DeadLetters, ListedDeadLetter, ReplayResult
from hubstore.leases import LeaseClient, LeaseInfo
from hubstore.leases.types import LeaseState
from hubstore.store import (
    AlertRecord,
    EventPosition,
    HubStore,
    RunPosition,
    RunSummary,
    StoredEvent,
)
from hubsync.cli.effects import opened_ledger
from hubsync.cli.runs import GAPS_PER_RUN
from hubsync.cli.status import StatusGatherer
from hubsync.cli.status_view import StatusReport
from hubsync.core.connections import RedisClient, RedisTarget
from hubsync.core.errors import ConfigError
from hubsync.dashboard.history import History
from producers.effects import EffectRefused, review

ALERTS_SHOWN = 20
"""Newest alerts shown per hub project (stream) and from the hub store."""
DEAD_LETTERS_SHOWN = 200
"""Most dead letters a drill-down lists (oldest first, as ``hubsync dead list``)."""
EFFECTS_SHOWN = 100
"""Most parked effects listed per ledger (newest claim first, as ``hubsync effects list``)."""
PAGE_ROWS = 50
"""Runs or events per page of the browsers."""

T = TypeVar("T")


@dataclass
class EffectsLedgerView:
    """A ledger named by ``--effects-ledger``: its parked attempts, or why it was not read."""

    path: Path
    blocked: list[review.EffectView] = field(default_factory=list)
    problem: str | None = None


@dataclass
class Overview:
    """Everything the main page shows, read in one go."""

    report: StatusReport
    alerts: list[StreamAlert] = field(default_factory=list)
    recorded_alerts: list[AlertRecord] | None = None
    """The hub store's ``sync_alerts`` (None without a hub store)."""
    leases: list[LeaseInfo] = field(default_factory=list)
    """Leases held now (live on Redis's clock)."""
    effects: list[EffectsLedgerView] = field(default_factory=list)


@dataclass(frozen=True)
class DeadLetterPage:
    """A hub project's dead letters as its drill-down lists them."""

    stream: str
    total: int
    by_reason: dict[str, int]
    """Reasons of the letters walked (up to ``DEAD_LETTERS_SHOWN`` of each listing)."""
    letters: list[ListedDeadLetter]


class Sources:
    """The deployment the dashboard looks at: Redis, the hub store, the effects ledgers."""

    def __init__(
        self,
        redis: RedisTarget,
        hub_url: str | None,
        stale_after: float,
        effects_ledgers: Sequence[Path],
        history: History,
    ) -> None:
        self.status = StatusGatherer(redis, hub_url, None, None, stale_after, no_redis=False)
        self.effects_ledgers = list(effects_ledgers)
        self.history = history
        self.stale_after = timedelta(seconds=stale_after)
        self._lock = threading.Lock()

    def __enter__(self) -> Sources:
        self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.status.__exit__(*exc)

    @property
    def has_hub_store(self) -> bool:
        """Whether a hub store was given (runs, events and stored alerts need one)."""
        return self.status.store is not None

    def drop_redis(self) -> None:
        """Forget the Redis client after an outage: the next reading connects afresh."""
        with self._lock:
            self.status.drop_client()

    def sample(self) -> StatusReport:
        """One status snapshot, recorded in the history (what the sampler calls)."""
        with self._lock:
            report = self.status.report()
        self.history.record(report)
        return report

    def overview(self) -> Overview:
        """The main page: the status snapshot (sampled too), alerts, leases, parked effects."""
        overview = Overview(self.sample())
        with self._lock:
            if overview.report.redis_reachable:
                client = self.status.connect()
                overview.alerts = [
                    alert
                    for project in overview.report.hub_projects
                    for alert in read_alerts(client, project.hub_project, ALERTS_SHOWN)
                ]
                overview.leases = [
                    info for info in LeaseClient(client).list() if info.state is LeaseState.LIVE
                ]
            if self.status.store is not None:
                overview.recorded_alerts = self.status.store.alerts(limit=ALERTS_SHOWN)
        overview.effects = [_blocked_effects(path) for path in self.effects_ledgers]
        return overview

    def dead_letters(self, hub_project: str, reason: str | None) -> DeadLetterPage:
        """``hub_project``'s dead letters (of ``reason``), oldest first, as ``dead list``."""
        with self._redis() as client:
            letters = DeadLetters(client, hub_project)
            walked = letters.letters(count=DEAD_LETTERS_SHOWN)
            by_reason: dict[str, int] = {}
            for item in walked:
                by_reason[item.letter.reason] = by_reason.get(item.letter.reason, 0) + 1
            listed = (
                walked if reason is None else letters.letters(DEAD_LETTERS_SHOWN, reason=reason)
            )
            return DeadLetterPage(letters.stream, letters.count(), by_reason, listed)

    def dead_letter(self, hub_project: str, entry_id: str) -> ListedDeadLetter | None:
        """One letter (None if it is gone); ``ConfigError`` for an id that is not one."""
        with self._redis() as client:
            return DeadLetters(client, hub_project).get([entry_id]).get(entry_id)

    def replay(self, hub_project: str, ids: Sequence[str]) -> ReplayResult:
        """``hubsync dead replay``: all or nothing, whole letters only."""
        with self._redis() as client:
            return DeadLetters(client, hub_project).replay(ids)

    def purge(self, hub_project: str, ids: Sequence[str]) -> int:
        """``hubsync dead purge`` of named letters: all or nothing."""
        with self._redis() as client:
            return DeadLetters(client, hub_project).purge(ids)

    def remove_consumer(self, name: str) -> Removal:
        """``hubsync consumers remove NAME``: refused while NAME runs (no ``--force`` here)."""
        with self._redis() as client:
            return remove_consumer(client, name)

    def effect(self, ledger: int, key: str) -> review.EffectView | None:
        """The parked effect ``key`` of the ``ledger``-th ledger, as listed; None if it is not
        parked there (``ConfigError`` for a ledger number the dashboard was not given)."""
        path = self._ledger_path(ledger)
        with opened_ledger(path) as opened:
            states = (review.EffectState.BLOCKED_UNCERTAIN,)
            found = review.list_effects(opened, states=states, limit=EFFECTS_SHOWN)
        return next((view for view in found if view.record.effect_key == key), None)

    def resolve_effect(
        self, ledger: int, key: str, verdict: review.Verdict, note: str, actor: str
    ) -> review.EffectResolved | EffectRefused:
        """``hubsync effects resolve KEY --committed|--not-executed --note NOTE``."""
        with opened_ledger(self._ledger_path(ledger)) as opened:
            return review.resolve_effect(opened, key, verdict, note=note, actor=actor)

    def _ledger_path(self, ledger: int) -> Path:
        if not 0 <= ledger < len(self.effects_ledgers):
            raise ConfigError("no such effects ledger: name one the dashboard lists")
        return self.effects_ledgers[ledger]

    def runs(self, hub_project: str, after: RunPosition | None, limit: int) -> list[RunSummary]:
        """A page of ``hubsync runs`` (one row more than ``limit``: says whether more remain)."""
        return self._stored(
            lambda store: store.runs(hub_project, after, limit + 1, gaps_per_run=GAPS_PER_RUN)
        )

    def events(
        self, hub_project: str, run_id: str | None, after: EventPosition | None, limit: int
    ) -> list[StoredEvent]:
        """A page of ``hubsync events`` (one row more than ``limit``)."""
        return self._stored(lambda store: store.events(hub_project, run_id, after, limit + 1))

    @contextmanager
    def _redis(self) -> Iterator[RedisClient]:
        with self._lock:
            yield self.status.connect()

    def _stored(self, read: Callable[[HubStore], T]) -> T:
        with self._lock:
            store = self.status.store
            if store is None:
                raise ConfigError("no hub store: start the dashboard with --hub-db or --hub-url")
            return read(store)


def _blocked_effects(path: Path) -> EffectsLedgerView:
    """The attempts parked ``blocked_uncertain`` in the ledger at ``path``, never creating it."""
    view = EffectsLedgerView(path)
    try:
        with opened_ledger(path) as ledger:
            states = (review.EffectState.BLOCKED_UNCERTAIN,)
            view.blocked = review.list_effects(ledger, states=states, limit=EFFECTS_SHOWN)
    except ConfigError:
        view.problem = "no such file"
    return view
