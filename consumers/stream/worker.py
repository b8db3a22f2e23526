"""``HubConsumer``: one hub worker in consumer group ``hub`` over every runtime's events streams.

A batch goes: XREADGROUP -> judge each entry (``consumers.stream.judging.EntryJudge``:
its signature under an enrolled runtime's key, refused ones becoming dead
letters and security alerts; then its validity, bad ones becoming dead
letters) -> ONE ``HubStore.ingest`` for the valid events -> signed outcomes
(one entry per runtime), alerts and dead letters published -> XACK. A crash
anywhere before the XACK leaves the entries pending; they come back (to this
worker after a restart, or to another one after ``reclaim_idle``) and dedupe
answers ``duplicate``. Presence beats update ``runtime_presence``.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import TypeVar

import redis

from consumers.stream.authentication import RuntimeAuthenticator
from consumers.stream.consumer_stats import ConsumerStats
from consumers.stream.fast_reads import read_group_pairs
from consumers.stream.health import claim_name, write_health
from consumers.stream.hub_binding import check_binding, queue_binding
from consumers.stream.judging import EntryJudge, StreamBatch, traceparents_of
from consumers.stream.lag import export_lag
from consumers.stream.presence_gauges import export_presence
from consumers.stream.publishing import MAX_DELIVERIES_REASON, Publication
from consumers.stream.read_budget import ReadBudget, reply_bytes
from consumers.stream.reclaim import reclaim_stream, remove_idle_consumers
from consumers.stream.revocation_check import RevocationCheck
from consumers.stream.streams import FollowedStreams, key_refused
from consumers.stream.trim import trim_acknowledged
from hubstore.errors import StoreError
from hubstore.redis_functions import functions_for
from hubstore.store import HubStore
from hubsync.core import keys, metrics
from hubsync.core.backoff import Backoff
from hubsync.core.connections import (
    UNREACHABLE_ERRORS,
    RedisClient,
    RedisTarget,
    wait_until_reachable,
)
from hubsync.core.daemon import Daemon, HealthKey, Periodic, RedisOutages
from hubsync.core.entries import decode_fields
from hubsync.core.errors import StoreBusyError
from hubsync.core.names import validate_name
from hubsync.core.redis_values import RawEntry, as_text, stream_entries
from hubsync.core.settings import ConsumerSettings
from hubsync.core.stream_reads import read_streams
from hubsync.core.tracing import Span, SpanKind, batch_span, link_traceparents

log = logging.getLogger(__name__)


_T = TypeVar("_T")

_BACKOFF_BASE = 0.1
_BACKOFF_CAP = 10.0
_ONCE_MAX_BATCHES = 10_000


def default_consumer_name() -> str:
    """``<host>-<pid>``: unique per process, readable in XINFO CONSUMERS."""
    host = "".join(c if c.isalnum() or c in ".-" else "-" for c in socket.gethostname())
    return f"{host.strip('.-') or 'hub'}-{os.getpid()}"


class HubConsumer(Daemon):
    """One hub consumer worker; ``run`` until stopped (the daemon skeleton's signals and
    ``request_stop`` let it finish its batch first), or ``run_once``."""

    def __init__(
        self,
        client: RedisClient,
        store: HubStore,
        settings: ConsumerSettings,
        name: str | None = None,
        target: RedisTarget | None = None,
        *,
        handle_signals: bool = True,
    ) -> None:
        self.client = client
        self.target = target or RedisTarget.from_settings(settings)  # where ``client`` goes
        self.store = store
        self.settings = settings
        self.name = validate_name(name or settings.name or default_consumer_name(), "consumer name")
        super().__init__(
            f"consumer {self.name}",
            handle_signals=handle_signals,
            # a pass may block on a read, or wait out an outage for the backoff's cap, on purpose
            heartbeat_timeout=settings.health_ttl + settings.block_ms / 1000 + _BACKOFF_CAP,
        )
        self.stats = ConsumerStats()
        self.functions = functions_for(client)
        self.followed = FollowedStreams(client, settings.max_projects)
        self._recover_own = True
        self._refresh = Periodic(1.0, self.monotonic)
        self._reclaim = Periodic(settings.reclaim_interval, self.monotonic)
        self._health = Periodic(min(5.0, settings.health_ttl / 3), self.monotonic)
        self.health_key = HealthKey(keys.consumer_health(self.name), settings.health_ttl)
        self._holds_name = False  # the health key is ours to refresh and, at the end, delete
        self.outages = RedisOutages(self.label)
        self._store_failing = False  # the last step the hub store took part in failed
        self.readiness.require("Redis unreachable", lambda: self.outages.up)
        self.readiness.require("hub store failing", lambda: not self._store_failing)
        self._backoff = Backoff(base=_BACKOFF_BASE, cap=_BACKOFF_CAP)
        self.hub_id: str | None = None
        self.revocations = RevocationCheck(client, store)
        self.authenticator = RuntimeAuthenticator(store, revocations=self.revocations)
        self.judge = EntryJudge(self.authenticator)
        self.read_budget = ReadBudget(settings.read_count, settings.read_bytes)

    # ----- lifecycle -----

    def run(self) -> ConsumerStats:
        """Work until ``request_stop`` (or a first SIGTERM or SIGINT); a second signal exits
        at once."""
        with self.stop_signals():
            try:
                # a Redis unreachable at start is waited for (logged once), not a failure
                wait_until_reachable(self.client, self.target, self.stop_event)
                while not self.stopping:
                    self.readiness.beat()
                    self._guarded(self._iteration)
            finally:
                self._final_health()
        self._log_stats(f"stopped after {self.elapsed():.1f}s")
        return self.stats

    def run_once(self) -> ConsumerStats:
        """Do everything due now (read what is there, ingest, reclaim, trim), then return."""
        self.claim_name()
        self.refresh_streams(force=True)
        self.recover_own_pending()
        for _ in range(_ONCE_MAX_BATCHES):
            if self.poll(block_ms=None) == 0:
                break
        self.reclaim()
        self.maintain()
        self._export_gauges()
        self._write_health()
        self._log_stats("ran once")
        return self.stats

    def _log_stats(self, what: str) -> None:
        """Log ``consumer NAME WHAT: <its stats>``, the stats also as structured fields."""
        self.log_summary(
            f"consumer {self.name} {what}: {self.stats.summary()}",
            {"consumer": self.name} | asdict(self.stats),
        )

    def _iteration(self) -> None:
        if not self._holds_name:  # first thing, and again after an outage interrupted it
            self.claim_name()
            log.info("consumer %s started (group %s)", self.name, keys.CONSUMER_GROUP)
        self._refresh.run(self.refresh_streams)
        if self._recover_own:
            self.recover_own_pending()
        self._reclaim.run(self._reclaim_and_maintain)
        self._health.run(self._write_health)
        if not self.streams:
            self.wait(self.settings.block_ms / 1000)
            return
        self.poll(block_ms=self.settings.block_ms)

    def _reclaim_and_maintain(self) -> None:
        self.reclaim()
        self.maintain()
        self._export_gauges()

    def _export_gauges(self) -> None:
        """The lag of every stream read (Redis) and every enrolled runtime's presence (store)."""
        export_lag(self.client, self.streams)
        export_presence(self.store, set(self._enrolled_streams()))

    def _guarded(self, step: Callable[[], object]) -> None:
        """Run one step; ride out Redis outages and a busy or failing hub store."""
        try:
            step()
        except UNREACHABLE_ERRORS as exc:
            self.outages.failed(exc)
            self._after_failure()
            return
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # The group vanished (Redis lost its data, or someone destroyed it):
            # create it again rather than spin on the error.
            log.warning("consumer group missing (%s); recreating it", exc)
            self.followed.forget()
            self._after_failure()
            return
        except (StoreError, StoreBusyError) as exc:
            log.error("hub store failed (%s); the batch stays pending and will be retried", exc)
            self._store_failing = True
            self._after_failure()
            return
        self._store_failing = False  # the pass after a failure refreshes first: it read the store
        self.outages.succeeded()
        self._backoff.reset()

    def _after_failure(self) -> None:
        # Whatever was read but not acked is in our own pending list: pick it up
        # again first thing, without waiting for reclaim_idle.
        self._recover_own = True
        self._refresh.reset()
        self.wait(self._backoff.next_delay())

    # ----- streams and reading -----

    @property
    def streams(self) -> list[str]:
        """The events streams read now (``consumers.stream.streams``)."""
        return self.followed.ready

    def refresh_streams(self, force: bool = False) -> list[str]:
        """Follow every enrolled runtime's events stream of each of its hub projects (from the
        hub store, read each refresh: a runtime enrolled meanwhile is followed within a
        second), and the shared streams still to drain; ``consumers.stream.streams``.

        First it binds the namespace to this hub (as ``bind_namespace``): before
        the first read, and again on every refresh, so a binding a Redis restart
        lost is made again; another hub's id there stops the worker with
        ``NamespaceOwnedError``, and a store behind the namespace's mark with
        ``StoreBehindError``. ``force`` makes every group again (after a read
        found one missing).
        """
        hub_id = self._store_hub_id()
        pipe = self.client.pipeline(transaction=False)
        queue_binding(pipe, hub_id)
        *_, owner, mark = pipe.execute()
        check_binding(owner, mark, hub_id, self.store)
        if force:
            self.followed.forget()
        return self.followed.refresh(self._enrolled_streams())

    def _enrolled_streams(self) -> list[tuple[str, str]]:
        """(hub project, runtime) of every active runtime of this hub and each of its projects."""
        return [
            (hub_project, runtime.runtime_id)
            for runtime in self.store.enrolled_runtimes()
            if runtime.key is not None
            for hub_project in runtime.hub_projects
        ]

    def _store_hub_id(self) -> str:
        """The store's hub id (given one if it has none), read once per worker."""
        if self.hub_id is None:
            # a read first: a store that has its id needs no write lock to start
            self.hub_id = self.store.hub_id() or self.store.init_hub()
        return self.hub_id

    def poll(self, block_ms: int | None) -> int:
        """One XREADGROUP over every stream (``None``: do not block); processes it; entry count.

        On a single server the entries keep their fields as the reply's pairs
        (``consumers.stream.fast_reads``); on a cluster, one read per hash slot:
        ``hubsync.core.stream_reads`` (each project has its slot).
        """
        if not self.streams:
            return 0
        streams = dict.fromkeys(self.streams, ">")
        group = (keys.CONSUMER_GROUP, self.name)
        count = self.read_budget.count
        batch: StreamBatch
        try:
            if isinstance(self.client, redis.Redis):  # fields kept as the reply's pairs
                batch = read_group_pairs(
                    self.client, streams, count=count, block_ms=block_ms, group=group
                )
            else:
                reply = read_streams(
                    self.client, streams, count=count, block_ms=block_ms, group=group
                )
                batch = [(as_text(s), stream_entries(entries)) for s, entries in reply]
        except redis.ResponseError as exc:
            # one stream Redis refuses fails the read of all: set it aside, read the rest
            if not key_refused(exc) or not self.followed.diagnose():
                raise  # not one stream's trouble (an outage, a user that may not read)
            return 0
        return self.process(batch, largest=self._observe_bytes(batch))

    def _observe_bytes(self, batch: StreamBatch) -> int:
        """Tell the read budget what this batch weighs; the size of its largest entry."""
        total = largest = 0
        for _, entries in batch:
            size, big = reply_bytes(entries)
            total += size
            largest = max(largest, big)
        self.read_budget.observe(total, largest)
        return largest

    def recover_own_pending(self) -> int:
        """Take back what this consumer read but never acked (after a restart or a failure)."""
        total = 0
        for stream in list(self.streams):
            while True:
                found = self._on_stream(
                    stream,
                    lambda s: reclaim_stream(
                        self.client,
                        s,
                        self.name,
                        min_idle_ms=0,
                        max_deliveries=self.settings.max_deliveries,
                        count=self.read_budget.count,
                        owner=self.name,
                    ),
                )
                if found is None:
                    break
                total += self._handle_reclaimed(stream, found.retry, found.poison)
                if not found.retry and not found.poison:
                    break
        self._recover_own = False
        return total

    def _on_stream(self, stream: str, work: Callable[[str], _T]) -> _T | None:
        """``work(stream)``; None, with the stream set aside, when Redis refuses it."""
        try:
            return work(stream)
        except redis.ResponseError as exc:
            if not key_refused(exc):
                raise
            self.followed.refused(stream, exc)
            return None

    def reclaim(self) -> int:
        """Claim entries idle longer than ``reclaim_idle`` in any consumer; dead-letter poison."""
        idle_ms = int(self.settings.reclaim_idle * 1000)
        total = 0
        for stream in list(self.streams):
            found = self._on_stream(
                stream,
                lambda s: reclaim_stream(
                    self.client,
                    s,
                    self.name,
                    min_idle_ms=idle_ms,
                    max_deliveries=self.settings.max_deliveries,
                    count=self.read_budget.count,
                ),
            )
            if found is not None:
                total += self._handle_reclaimed(stream, found.retry, found.poison)
        return total

    def maintain(self) -> None:
        """Remove long-idle consumers with nothing pending, trim acknowledged entries, and
        publish the store's key revocations."""
        self.revocations.publish()
        idle_ms = int(self.settings.reclaim_idle * 10 * 1000)
        for stream in list(self.streams):
            removed = self._on_stream(
                stream,
                lambda s: remove_idle_consumers(self.client, self.functions, s, self.name, idle_ms),
            )
            for name in removed or []:
                log.info("removed idle consumer %s from %s (nothing pending)", name, stream)
            trimmed = self._on_stream(stream, lambda s: trim_acknowledged(self.functions, s))
            self.stats.trimmed += trimmed.removed if trimmed is not None else 0

    def _handle_reclaimed(
        self,
        stream: str,
        retry: Sequence[RawEntry],
        poison: Sequence[tuple[str, dict[bytes, bytes] | None, int]],
    ) -> int:
        if poison:
            pub = self._publication()
            for entry_id, raw, deliveries in poison:
                log.warning(
                    "entry %s of %s delivered %s times; dead-lettering it",
                    entry_id,
                    stream,
                    deliveries,
                )
                pub.dead(
                    stream,
                    entry_id,
                    decode_fields(raw or {}),
                    MAX_DELIVERIES_REASON,
                    f"delivered {deliveries} times without being acknowledged "
                    f"(limit {self.settings.max_deliveries})",
                    deliveries=deliveries,
                )
            pub.send(self.client)
            self.stats.dead += pub.dead_count
            metrics.DEAD_LETTERS.labels(MAX_DELIVERIES_REASON).inc(pub.dead_count)
        if retry:
            self.stats.reclaimed += len(retry)
            metrics.RECLAIMED.inc(len(retry))
            largest = self._observe_bytes([(stream, retry)])
            self.process([(stream, retry)], largest=largest)
        return len(retry) + len(poison)

    # ----- one batch -----

    def process(self, batch: StreamBatch, largest: int | None = None) -> int:
        """Judge, ingest, publish and acknowledge one batch; its entry count.

        ``largest``: the size of the batch's largest entry (names and values), when measured.
        """
        count = sum(len(entries) for _, entries in batch)
        if not count:
            return self._process(batch, largest, None)  # nothing read: no span
        destination = batch[0][0] if len(batch) == 1 else None
        kind = SpanKind.CONSUMER
        with batch_span(
            "hubsync ingest", destination, count, kind=kind, operation="process"
        ) as span:
            return self._process(batch, largest, span)

    def _process(self, batch: StreamBatch, largest: int | None, span: Span | None) -> int:
        pub = self._publication()
        verdicts = self.judge.judge(batch, pub, largest)  # refusals and dead letters on pub
        if span is not None and span.is_recording():
            link_traceparents(span, traceparents_of(batch, verdicts))
        if verdicts.valid:
            started = time.perf_counter()
            outcomes = self.store.ingest(verdicts.valid)
            metrics.BATCH_INGEST_SECONDS.observe(time.perf_counter() - started)
            pub.outcomes_to(verdicts.answer_to, outcomes)
            pub.mark = self.store.committed  # raised before any outcome goes out
            for stream, ids in verdicts.valid_ids.items():
                pub.ack_many(stream, ids)  # after every outcome, as one XACK per stream
            self.stats.count_ingested(verdicts.valid, outcomes)
        if verdicts.beats:
            self.store.record_presence(verdicts.beats)
        if verdicts.reports:
            self.store.record_resync_reports(verdicts.reports)
        if pub.security_alerts:
            # kept before anything is acknowledged: a crash here redelivers the entries
            self.store.record_security_alerts(pub.security_alerts)
        pub.send(self.client)
        self.stats.count_batch(verdicts, pub)
        return verdicts.count

    def _publication(self) -> Publication:
        return Publication(
            consumer=self.name,
            hub_id=self._store_hub_id(),
            dead_maxlen=self.settings.dead_maxlen,
            alerts_maxlen=self.settings.alerts_maxlen,
            acks_maxlen=self.settings.acks_maxlen,
        )

    # ----- health -----

    def claim_name(self) -> None:
        """Take this worker's name (its health key); ``ConsumerNameTakenError`` (exit 2) while
        another live consumer holds it. Two workers of one name would share one pending
        list, each recovering the other's in-flight entries as its own."""
        claim_name(self.client, self.name, self.settings.health_ttl, asdict(self.stats))
        self._holds_name = True

    def _write_health(self) -> None:
        write_health(self.client, self.name, self.settings.health_ttl, asdict(self.stats))

    def _final_health(self) -> None:
        # A stopped worker is not healthy: drop the key rather than let it linger. Only
        # its own: a worker refused its name leaves the holder's key alone.
        if self._holds_name:
            self.health_key.clear(self.client, ignore=(redis.RedisError,))
