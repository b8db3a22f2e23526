"""The relay daemon of one runtime: every registered project's outbox onto Redis Streams.

Two threads, each with its own SQLite connections and Redis client:

* the sender watches every project's outbox (``PRAGMA data_version``, a local
  read with no I/O, every ``poll_interval``) so a commit leaves within
  milliseconds; it also re-sends overdue rows, beats presence, refreshes the
  health key and follows the backlog's drain (``producers.relay.progress``);
* the ack reader blocks on the ack streams and applies the hub's outcomes.

When Redis is unreachable both back off with jitter and keep every row
pending; appends never touch Redis, so they neither block nor fail.

Nothing is sent before the runtime has joined its hub, and every entry (and
presence beat) is signed with the runtime's key; only outcomes signed with it
by the hub the runtime joined are applied (``producers.relay.credentials``).

A project whose store cannot be read (``producers.store.unreadable``) is set aside,
never the relay: every thread drops its connection to it, the others keep
syncing, and it is tried again on ``ProjectStates``'s schedule.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from hubsync.core import keys, metrics
from hubsync.core.backoff import Backoff
from hubsync.core.clock import EpochClock, epoch_seconds, utc_now_iso
from hubsync.core.connections import (
    UNAVAILABLE_ERRORS,
    RedisClient,
    RedisTarget,
    Role,
    connect,
    wait_for_redis,
)
from hubsync.core.daemon import Daemon, HealthKey, MonotonicClock, Periodic, RedisOutages
from hubsync.core.errors import ConfigError
from hubsync.core.settings import RelaySettings
from hubsync.core.version import __version__
from producers.registry import ProjectRegistration, RuntimeRegistry
from producers.relay.acks import AckReader, AckStats
from producers.relay.credentials import RelayCredentials
from producers.relay.marker import AttemptMarker
from producers.relay.presence import PresenceBeats
from producers.relay.progress import DrainProgress, project_backlog, settled_rows
from producers.relay.project_states import ProjectStates
from producers.relay.pruner import Pruner
from producers.relay.resyncs import ResyncStats
from producers.relay.sender import OutboxSender, SenderStats
from producers.relay.state_lock import StateDirLock
from producers.relay.summary import RelaySummary
from producers.store.event_store import RunEventStore
from producers.store.outbox import BOOKKEEPING_SYNCHRONOUS
from producers.store.unreadable import UNREADABLE_STORE_ERRORS, unreadable_reason

log = logging.getLogger(__name__)

PROJECT_REFRESH_SECONDS = 1.0
RESEND_CHECK_SECONDS = 0.5
ACK_BLOCK_MS = 1000


class Relay(Daemon):
    """Moves every registered project's outbox to Redis and applies the hub's acks.

    A ``hubsync.core.daemon.Daemon``: ``request_stop`` (or a first SIGTERM or SIGINT
    while ``run`` runs, unless ``handle_signals`` is False) finishes the current batch.
    """

    def __init__(
        self,
        settings: RelaySettings,
        registry: RuntimeRegistry | None = None,
        clock: EpochClock = epoch_seconds,
        project_states: ProjectStates | None = None,
        target: RedisTarget | None = None,
        *,
        handle_signals: bool = True,
        monotonic: MonotonicClock = time.monotonic,
    ) -> None:
        self.settings = settings
        # the Redis of the settings (their password file read once), unless the command built it
        self.target = target or RedisTarget.from_settings(settings)
        self.clock = clock  # when rows were attempted and when their resend falls due
        self.registry = registry or RuntimeRegistry(settings.state_dir, create=False)
        self._owns_registry = registry is None  # opened here, so closed by close()
        self.runtime_id = self.registry.runtime_id
        if settings.runtime_id and settings.runtime_id != self.runtime_id:
            raise ConfigError(
                f"state dir {settings.state_dir} belongs to runtime {self.runtime_id!r}, "
                f"not {settings.runtime_id!r}"
            )
        super().__init__(
            f"relay {self.runtime_id}",
            handle_signals=handle_signals,
            monotonic=monotonic,
            heartbeat_timeout=settings.health_ttl + settings.backoff_max,  # + an outage's wait
        )
        self.credentials = RelayCredentials(self.registry)
        self.sender_stats = SenderStats()
        self.ack_stats = AckStats()
        self.resync_stats = ResyncStats()
        self.outages = RedisOutages(
            self.label,
            down="Redis unavailable ({error}); rows stay pending, retrying with backoff",
            up="Redis reachable again after {seconds:.1f}s; draining pending rows",
        )
        self.readiness.require("Redis unreachable", lambda: self.outages.up)
        self.health_key = HealthKey(keys.relay_health(self.runtime_id), settings.health_ttl)
        self.progress = DrainProgress(self.label, settings.progress_interval, monotonic)
        self.project_states = project_states or ProjectStates(self.label)
        self._senders: dict[str, OutboxSender] = {}
        self._registrations: dict[str, ProjectRegistration] = {}
        self._registrations_lock = threading.Lock()
        self.host = socket.gethostname()
        self.presence = PresenceBeats(
            self.runtime_id, self.host, self.credentials, settings.presence_interval
        )
        # One relay per state dir, held until close or exit (kill -9 included); taken before
        # the marker starts its thread, so a refused relay has nothing else to stop.
        try:
            self.lock = StateDirLock(self.registry.state_dir)
        except BaseException:
            if self._owns_registry:
                self.registry.close()
            raise
        self.marker = AttemptMarker(
            self._open_marker_store,
            settings.resend_timeout,
            settings.resend_timeout_cap,
            self._unreadable_elsewhere,
        )
        self.pruner = Pruner(settings, self.registry, clock)  # retention, in its own thread

    # -- lifecycle -------------------------------------------------------

    def run(self) -> RelaySummary:
        """Run until ``request_stop`` (or a first SIGTERM or SIGINT); return the summary.

        A Redis unreachable at start is waited for (logged once), not a failure.
        """
        with self.stop_signals():
            log.info("relay %s started (pid %d)", self.runtime_id, os.getpid())
            return self._run()

    def _run(self) -> RelaySummary:
        self.refresh_projects()
        # before the clients the threads keep: a cluster's cannot be made while it is down
        if not wait_for_redis(self.target, self.stop_event):
            return self.summary()
        if not self._senders and not self.project_states.unreadable():
            # not an error (projects registered later are picked up), but a
            # mistyped --state-dir looks exactly like this, so say it
            log.warning(
                "relay %s: no project is registered in %s yet; waiting for one",
                self.runtime_id,
                self.settings.state_dir,
            )
        acks = threading.Thread(target=self._ack_loop, name="relay-acks", daemon=True)
        acks.start()
        pruner = self.pruner.start(self.stop_event)
        try:
            self._send_loop()
        finally:
            self.request_stop()
            acks.join(timeout=ACK_BLOCK_MS / 1000 + 6)
            pruner.join(timeout=10)
        return self.summary()

    def run_once(self) -> RelaySummary:
        """Do everything due now (send, resend, read acks, beat), then return."""
        # One pass, flushed at its end: a mark waiting for an ack would only be written
        # after the last batch instead of beside the next ones.
        self.marker.delay = 0.0
        self.refresh_projects()
        client = connect(self.target)
        reader = self._ack_reader()
        try:
            self._open_new_ack_stores(reader, {})
            self._each_project(lambda sender: self._drain(sender, client))
            self.marker.flush()
            applied = self.resync_stats.applied
            while reader.read(client, block_ms=None, count=500):
                pass
            if self.resync_stats.applied != applied:  # rows put back: they leave in this pass
                self._each_project(lambda sender: self._drain(sender, client))
                self.marker.flush()
            reader.report_resyncs(client, force=True)
            self._beat_presence(client, force=True)
            self._write_health(client)
            self.pruner.prune_once()
        finally:
            for store in reader.stores.values():
                store.close()
            client.close()
        return self.summary()

    def _drain(self, sender: OutboxSender, client: RedisClient) -> int:
        sent = 0
        while batch := sender.send_unsent(client):
            sent += batch
        while batch := sender.send_due_resends(client, self.clock()):
            sent += batch
        return sent

    def summary(self) -> RelaySummary:
        """Counters so far, the outbox backlog now, and the projects that could not be read."""
        pending = self._each_project(lambda sender: sender.store.pending_count())
        return RelaySummary(
            runtime_id=self.runtime_id,
            projects=len(self._senders),
            sender=self.sender_stats,
            acks=self.ack_stats,
            outages=self.outages.count,
            seconds=self.elapsed(),
            pending=pending,
            unreadable=self.project_states.unreadable(),
            extra=self.pruner.stats.as_dict(),
        )

    def close(self) -> None:
        """Finish marking, close every store, let go of the state dir's lock, and close the
        registry if the relay opened it."""
        self.marker.close()
        self.pruner.close()
        for sender in self._senders.values():
            sender.store.close()
        self._senders.clear()
        self.lock.close()
        if self._owns_registry:
            self.registry.close()

    # -- projects --------------------------------------------------------

    def refresh_projects(self) -> None:
        """Open every project registered to this runtime that is not open yet.

        A store that cannot be opened sets its project aside until its retry
        falls due; one another thread found unreadable is closed here too. The
        enrollment is read again too, so a join takes effect without a restart.
        """
        self.credentials.refresh()
        for registration in self.registry.projects():
            project_id = registration.project_id
            if project_id in self._senders:
                if not self.project_states.is_unreadable(project_id):
                    continue
                self._close_project(project_id)
            if not self.project_states.due(project_id):
                continue
            try:
                store = self.registry.open_store(registration)
            except UNREADABLE_STORE_ERRORS as exc:
                reason = unreadable_reason(exc, registration.store_path)
                self.project_states.failed(project_id, reason)
                continue
            self.project_states.readable(project_id)
            self._senders[registration.project_id] = OutboxSender(
                store,
                self.settings,
                self.sender_stats,
                self.marker,
                self.credentials,
                self.clock,
                self.monotonic,
            )
            with self._registrations_lock:
                self._registrations[registration.project_id] = registration
            log.info(
                "relay %s: syncing project %s to hub project %s",
                self.runtime_id,
                registration.project_id,
                registration.hub_project,
            )

    def _each_project(self, work: Callable[[OutboxSender], int]) -> int:
        """Sum of ``work`` over the open projects; one whose store fails is set aside."""
        done = 0
        for project_id, sender in list(self._senders.items()):
            try:
                done += work(sender)
            except UNAVAILABLE_ERRORS:
                raise  # Redis, not this project: the caller backs off
            except UNREADABLE_STORE_ERRORS as exc:
                self._close_project(project_id)
                self.project_states.failed(project_id, unreadable_reason(exc, sender.store.path))
        return done

    def _close_project(self, project_id: str) -> None:
        """Stop syncing ``project_id`` and close every connection to its store."""
        sender = self._senders.pop(project_id, None)
        with self._registrations_lock:
            self._registrations.pop(project_id, None)
        if sender is not None:
            sender.store.close()
        self.marker.forget(project_id)
        with contextlib.suppress(KeyError):  # an unreadable backlog is unknown, not stale
            metrics.OUTBOX_BACKLOG.remove(project_id, self.runtime_id)  # its home runtime

    def _unreadable_elsewhere(self, project_id: str, exc: BaseException) -> None:
        """The marker or ack thread could not read a store: the sender closes it next."""
        with self._registrations_lock:
            registration = self._registrations.get(project_id)
        if registration is not None:  # else it is set aside already
            reason = unreadable_reason(exc, registration.store_path)
            self.project_states.failed(project_id, reason)

    def _open_marker_store(self, project_id: str) -> RunEventStore | None:
        with self._registrations_lock:
            registration = self._registrations.get(project_id)
        if registration is None:
            return None
        return self.registry.open_store(registration, synchronous=BOOKKEEPING_SYNCHRONOUS)

    # -- the sender thread -------------------------------------------------

    def _send_loop(self) -> None:
        client = connect(self.target)
        backoff = Backoff(cap=self.settings.backoff_max)
        refresh = Periodic(PROJECT_REFRESH_SECONDS, self.monotonic)
        resend = Periodic(RESEND_CHECK_SECONDS, self.monotonic)
        health = Periodic(self.settings.health_ttl / 3, self.monotonic)
        progress = Periodic(self.settings.progress_interval, self.monotonic)

        def resend_due() -> int:
            return self._each_project(lambda sender: sender.send_due_resends(client, self.clock()))

        try:
            while not self.stopping:
                self.readiness.beat()
                refresh.run(self.refresh_projects)
                try:
                    if not self.outages.up:
                        client.ping()  # proves Redis is back before we say so
                    worked = self._send_new(client)
                    worked += resend.run(resend_due) or 0
                    progress.run(self._sample_progress)
                    self._beat_presence(client)
                    health.run(lambda: self._write_health(client))
                except UNAVAILABLE_ERRORS as exc:
                    self.outages.failed(exc)
                    self.wait(backoff.next_delay())
                    continue
                self.outages.succeeded()
                backoff.reset()
                if not worked:
                    self.wait(self.settings.poll_interval)
            self.health_key.clear(client)  # a clean stop: said at once, not when the TTL runs out
        finally:
            client.close()
            self.marker.flush()  # the summary's counts include the last batch

    def _send_new(self, client: RedisClient) -> int:
        def send(sender: OutboxSender) -> int:
            # A sender that is behind keeps sending; one that caught up waits for
            # a commit by another connection before querying again.
            if sender.has_news() or not sender.caught_up or not self.outages.up:
                return sender.send_unsent(client)
            return 0

        return self._each_project(send)

    def _sample_progress(self) -> None:
        backlog = self._each_project(lambda sender: project_backlog(sender.store))
        self.progress.sample(backlog, settled_rows(self.ack_stats, self.sender_stats))

    def _beat_presence(self, client: RedisClient, force: bool = False) -> None:
        now = self.monotonic()
        backlogs: dict[str, int] = {}

        def count(sender: OutboxSender) -> int:
            hub_project = sender.store.hub_project
            if force or self.presence.due(hub_project, now):
                backlogs[hub_project] = backlogs.get(hub_project, 0) + project_backlog(sender.store)
            return 0

        self._each_project(count)
        self.presence.send(client, backlogs, now)

    def _write_health(self, client: RedisClient) -> None:
        record = {
            "runtime_id": self.runtime_id,
            "host": self.host,
            "pid": os.getpid(),
            "version": __version__,
            "projects": len(self._senders),
            "unreadable_projects": len(self.project_states.unreadable()),
            "sent": self.sender_stats.sent,
            "acked": self.ack_stats.acked,
            "at": utc_now_iso(),
        }
        self.health_key.write(client, json.dumps(record, sort_keys=True))

    # -- the ack thread ----------------------------------------------------

    def _ack_loop(self) -> None:
        client = connect(self.target, Role.BLOCKING, block_seconds=ACK_BLOCK_MS / 1000)
        reader = self._ack_reader()
        opened_at: dict[str, int] = {}  # project id -> its failure count when opened here
        backoff = Backoff(cap=self.settings.backoff_max)
        try:
            while not self.stopping:
                self._open_new_ack_stores(reader, opened_at)
                try:
                    reader.read(client, block_ms=ACK_BLOCK_MS, count=500)
                except UNAVAILABLE_ERRORS as exc:
                    self.outages.failed(exc)
                    self.wait(backoff.next_delay())
                    continue
                if reader.stores:
                    self.outages.succeeded()
                backoff.reset()
                if not reader.stores:
                    self.wait(0.05)
        except Exception:
            log.exception("relay %s: ack reader failed; stopping the relay", self.runtime_id)
            self.request_stop()
        finally:
            for store in reader.stores.values():
                store.close()
            client.close()

    def _ack_reader(self) -> AckReader:
        return AckReader(
            self.runtime_id,
            self.ack_stats,
            self.credentials,
            on_unreadable=self._unreadable_elsewhere,
            set_aside=self.project_states.is_unreadable,
            resync_stats=self.resync_stats,
        )

    def _open_new_ack_stores(self, reader: AckReader, opened_at: dict[str, int]) -> None:
        """Mirror the sender's open projects; a store opened before a failure is reopened."""
        states = self.project_states
        with self._registrations_lock:
            registrations = dict(self._registrations)
        for project_id in list(reader.stores):
            if opened_at.get(project_id) != states.failures(project_id):
                reader.remove_store(project_id)
        for project_id, registration in registrations.items():
            if project_id in reader.stores or states.is_unreadable(project_id):
                continue
            failures = states.failures(project_id)  # read first: a failure meanwhile reopens
            try:
                reader.add_store(
                    self.registry.open_store(registration, synchronous=BOOKKEEPING_SYNCHRONOUS)
                )
            except UNREADABLE_STORE_ERRORS as exc:
                self._unreadable_elsewhere(project_id, exc)
                continue
            opened_at[project_id] = failures
