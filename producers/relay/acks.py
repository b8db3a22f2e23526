"""The acknowledging half of the relay: hub outcomes back onto outbox rows.

The relay reads ``hubsync:{P}:acks:{R}`` for each hub project P its runtime R
syncs to. An outcomes entry is believed only when it is signed with this
runtime's key, names the hub the runtime joined (``hub_id``) and the hub
project of the stream it is on; anything else (a forger with write access to
Redis, a second hub) is counted as ``unverified``, logged once per kind, and
skipped. An outcome advances an outbox row only when it names the row's own
content hash; anything else under this runtime's key is someone else's bytes
(a forger, a buggy twin) and is logged as a security warning, never applied.
An acked row stays acked: a ``conflict`` or ``rejected`` for its own hash
contradicts the ack the hub gave those bytes, and is counted (``contradicted``)
and logged as a security warning, never applied.
The stream read position is stored in the outbox's own database, in the same
transaction as the outcomes it covers, so a crash re-reads at most one batch.

A store that cannot be read is reported through ``on_unreadable`` and
dropped; the other projects' outcomes are still applied. While no readable
store is left on an ack stream it is not read, so its outcomes wait there; an
outcome another project's read trims away meanwhile is made good by the resend
(the hub answers ``duplicate``, which acks).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hubsync.core import keys, metrics
from hubsync.core.connections import RedisClient
from hubsync.core.entries import Outcome, OutcomeRecord, decode_fields, parse_outcomes_entry
from hubsync.core.errors import WireError
from hubsync.core.redis_values import as_text, entry_id_order, printable
from hubsync.core.resync import KIND_RESYNC
from hubsync.core.signing import HUB_ID_FIELD, SIGNATURE_FIELD, verify_outcomes_entry
from hubsync.core.stream_reads import read_streams
from hubsync.core.tracing import SpanKind, batch_span, link_traceparents
from producers.relay.credentials import RelayCredentials
from producers.relay.resyncs import RelayResyncs, ResyncStats
from producers.store.event_store import RunEventStore
from producers.store.outbox_outcomes import OutcomeApplication
from producers.store.unreadable import UNREADABLE_STORE_ERRORS

log = logging.getLogger(__name__)

START_POSITION = "0-0"

_KIND_RESYNC = KIND_RESYNC.encode()

READ_INTERVAL = 0.02
"""Shortest time between two ack reads that brought entries. A blocking XREAD returns as
soon as one entry arrives, so in a drain each read brought one or two outcomes entries and
paid a round trip and a transaction for them; waiting this long lets a read take what the
consumers published meanwhile. An ack comes this much later at most, which nothing waits
on (a mark waits seconds for it)."""

TRIM_INTERVAL = 1.0
"""Seconds an ack stream's applied entries may wait for their XTRIM while entries keep
coming. Trimming after every read cost a round trip per read (reads in a drain bring one or
two entries); applied entries are never read again (the position moved past them), so a
later trim loses nothing. A read that finds nothing trims at once."""

_APPLIED_ACKED = metrics.RELAY_OUTCOMES.labels("acked")
_APPLIED_CONFLICT = metrics.RELAY_OUTCOMES.labels("conflict")
_APPLIED_REJECTED = metrics.RELAY_OUTCOMES.labels("rejected")
_APPLIED_FOREIGN = metrics.RELAY_OUTCOMES.labels("foreign")
_CONTRADICTED = metrics.RELAY_OUTCOMES.labels("contradicted")
_UNVERIFIED = metrics.RELAY_OUTCOMES.labels("unverified")


def position_name(hub_project: str) -> str:
    """Name of the ack-stream read position kept in a project's ``relay_state``."""
    return f"acks:{hub_project}"


@dataclass
class AckStats:
    """What the acknowledging half did since start."""

    acked: int = 0
    """Rows the hub answered ``accepted`` or ``duplicate``: stored, so marked acked."""
    conflict: int = 0
    """Rows parked by a ``conflict`` (other bytes under their key at the hub)."""
    rejected: int = 0
    """Rows parked by a ``rejected`` (the hub refused their content for good)."""
    foreign: int = 0
    """Outcomes on bytes this runtime never sent under that key: left alone."""
    contradicted: int = 0
    """``conflict`` or ``rejected`` outcomes for a row acked under the same hash: ignored."""
    unknown: int = 0
    """Outcomes naming a project this runtime does not sync there, or a key no outbox row
    has (pruned since): ignored."""
    malformed: int = 0
    """Outcomes entries that could not be read: skipped."""
    unverified: int = 0
    """Outcomes entries (and resync requests) skipped because they were not signed by this
    runtime's hub for this runtime."""


class AckReader:
    """Reads the ack streams of a set of project stores and applies their outcomes."""

    def __init__(
        self,
        runtime_id: str,
        stats: AckStats,
        credentials: RelayCredentials,
        on_unreadable: Callable[[str, BaseException], None] | None = None,
        set_aside: Callable[[str], bool] = lambda project_id: False,
        trim_interval: float = TRIM_INTERVAL,
        resync_stats: ResyncStats | None = None,
    ) -> None:
        """``set_aside(project_id)`` tells a project of this runtime that is unreadable
        now (its outcomes are skipped quietly) from one this runtime does not sync."""
        self.runtime_id = runtime_id
        self.stats = stats
        self.credentials = credentials
        self.resyncs = RelayResyncs(runtime_id, credentials, resync_stats or ResyncStats())
        self._said_unverified: set[str] = set()
        self._on_unreadable = on_unreadable
        self._set_aside = set_aside
        self._stores: dict[str, RunEventStore] = {}  # project_id -> store
        self._positions: dict[str, str] = {}  # ack stream key -> last id read
        self._trim_interval = trim_interval
        self._untrimmed: dict[str, str] = {}  # ack stream key -> last id applied, not trimmed
        self._trimmed_at = float("-inf")  # time.monotonic() of the last trim
        self._read_at = float("-inf")  # time.monotonic() of the last read that brought entries

    @property
    def stores(self) -> Mapping[str, RunEventStore]:
        """The stores whose outcomes this reader applies, by project id."""
        return self._stores

    def add_store(self, store: RunEventStore) -> None:
        """Start applying outcomes for ``store``; resume from its saved position."""
        self._stores[store.project_id] = store
        key = keys.acks_stream(store.hub_project, self.runtime_id)
        saved = store.relay_position(position_name(store.hub_project)) or START_POSITION
        # Several local projects may sync to one hub project and share its ack
        # stream; resume from the earliest position any of them saved, since
        # re-applying an outcome is harmless and skipping one is not.
        current = self._positions.get(key)
        if current is None or entry_id_order(saved) < entry_id_order(current):
            self._positions[key] = saved

    def remove_store(self, project_id: str) -> None:
        """Stop applying outcomes for ``project_id`` and close its store."""
        store = self._stores.pop(project_id, None)
        if store is None:
            return
        store.close()
        if not any(s.hub_project == store.hub_project for s in self._stores.values()):
            key = keys.acks_stream(store.hub_project, self.runtime_id)
            self._positions.pop(key, None)
            self._untrimmed.pop(key, None)

    def read(self, client: RedisClient, block_ms: int | None, count: int = 100) -> int:
        """Read and apply what is on the ack streams; return how many entries were read.

        One XREAD over them all; on a cluster, one per hash slot (``hubsync.core.stream_reads``).
        Applied entries are trimmed after a read that found nothing, else at most every
        ``TRIM_INTERVAL`` seconds.
        """
        if not self._positions:
            return 0
        pause = self._read_at + READ_INTERVAL - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        reply = read_streams(client, dict(self._positions), count=count, block_ms=block_ms)
        entries = 0
        for raw_key, raw_entries in reply:
            key = as_text(raw_key)
            last_id = self._apply_entries(key, raw_entries)
            entries += len(raw_entries)
            if last_id is not None and key in self._positions:  # not if its last store went
                self._positions[key] = last_id
                self._untrimmed[key] = last_id
        if entries:
            self._read_at = time.monotonic()
        self.report_resyncs(client)
        if self._untrimmed and (
            not entries or time.monotonic() - self._trimmed_at >= self._trim_interval
        ):
            self._trim(client)
        return entries

    def _trim(self, client: RedisClient) -> None:
        """Drop the applied entries: only this relay reads its ack streams."""
        for key, last_id in self._untrimmed.items():
            client.xtrim(key, minid=last_id, approximate=False)
        self._untrimmed.clear()
        self._trimmed_at = time.monotonic()

    def _apply_entries(
        self, key: str, raw_entries: Iterable[tuple[bytes, Mapping[bytes, bytes]]]
    ) -> str | None:
        by_project: dict[str, list[OutcomeRecord]] = defaultdict(list)
        last_id: str | None = None
        hub_project = keys.hub_project_of(key)
        for raw_id, raw_fields in raw_entries:
            last_id = as_text(raw_id)
            fields = decode_fields(raw_fields)
            if fields.get("kind") == _KIND_RESYNC:
                self._resync(key, last_id, fields, hub_project)
                continue
            problem = self._unverified(fields, hub_project)
            if problem is not None:
                self._skip_unverified(key, last_id, problem)
                continue
            try:
                records = parse_outcomes_entry(fields)
            except WireError as exc:
                self.stats.malformed += 1
                log.warning("%s: skipped malformed ack entry %s (%s)", key, last_id, exc.reason)
                continue
            for record in records:
                by_project[record.project_id].append(record)
        if last_id is None:
            return None
        now = time.time()
        for project_id, records in by_project.items():
            store = self._stores.get(project_id)
            if store is None and self._set_aside(project_id):
                continue  # resent once readable again; the hub then answers duplicate
            if store is None or store.hub_project != hub_project:
                self.stats.unknown += len(records)
                log.warning(
                    "security: %d outcomes on %s name project %s, which this runtime does not "
                    "sync to that hub project; ignored",
                    len(records),
                    key,
                    project_id,
                )
                continue
            self._isolated(store, self._apply, records, now, last_id)
        # Stores sharing this stream that received no outcome still move on.
        for store in list(self._stores.values()):
            if store.hub_project == hub_project and store.project_id not in by_project:
                self._isolated(store, self._move_on, hub_project, last_id)
        return last_id

    def _unverified(self, fields: dict[str, bytes], hub_project: str) -> str | None:
        """Why an outcomes entry is not to be believed, or None when it is."""
        current = self.credentials.current
        if current is None:
            return "not_enrolled"  # this runtime sent nothing, so nothing is owed to it
        if SIGNATURE_FIELD not in fields:
            return "unsigned"
        if verify_outcomes_entry([current.key], fields, runtime_id=self.runtime_id) is None:
            return "bad_signature"
        if fields.get(HUB_ID_FIELD) != current.hub_id.encode():
            return "other_hub"
        if fields.get("hub_project") != hub_project.encode():
            return "wrong_stream"
        return None

    def _resync(self, key: str, entry_id: str, fields: dict[str, bytes], hub_project: str) -> None:
        """Apply a resync request part to this hub project's stores, once it verifies."""
        problem = self.resyncs.unverified(fields, hub_project)
        if problem is not None:
            self._skip_unverified(key, entry_id, problem)
            return
        request = self.resyncs.parsed(fields)
        if request is None:
            self.stats.malformed += 1
            return
        now, applied = time.time(), list[bool]()

        def apply(store: RunEventStore) -> None:
            applied.append(store.apply_resync(request, now))

        for store in [s for s in self._stores.values() if s.hub_project == hub_project]:
            self._isolated(store, apply)
        self.resyncs.applied(request, sum(applied))

    def report_resyncs(self, client: RedisClient, force: bool = False) -> None:
        """Report the progress of the open resync requests (when due, or ``force``d)."""
        self.resyncs.report(client, list(self._stores.values()), force)

    def _skip_unverified(self, key: str, entry_id: str, problem: str) -> None:
        self.stats.unverified += 1
        _UNVERIFIED.inc()
        if problem in self._said_unverified:
            return
        self._said_unverified.add(problem)
        log.warning(
            "security: ignored outcomes entry %s on %s (%s): it is not signed with this "
            "runtime's key by the hub it joined; the rows it names stay pending and are resent "
            "(further entries like it are counted as unverified, not logged)",
            printable(entry_id),
            printable(key),
            problem,
        )

    @staticmethod
    def _move_on(store: RunEventStore, hub_project: str, last_id: str) -> None:
        store.set_relay_position(position_name(hub_project), last_id)

    def _isolated(self, store: RunEventStore, work: Callable[..., object], *args: Any) -> None:
        """Run ``work(store, *args)``; an unreadable store is dropped, not the whole batch."""
        try:
            work(store, *args)
        except UNREADABLE_STORE_ERRORS as exc:
            if self._on_unreadable is None:
                raise
            self.remove_store(store.project_id)
            self._on_unreadable(store.project_id, exc)

    def _apply(
        self, store: RunEventStore, records: list[OutcomeRecord], now: float, last_id: str
    ) -> None:
        with batch_span(
            "hubsync ack",
            keys.acks_stream(store.hub_project, self.runtime_id),
            len(records),
            kind=SpanKind.CONSUMER,
            operation="process",
        ) as span:
            if span.is_recording():  # the acked rows' contexts, read before pruning can
                link_traceparents(
                    span, store.traceparents([(r.run_id, r.sequence) for r in records])
                )
            result = store.apply_outcomes(
                records, now, position=(position_name(store.hub_project), last_id)
            )
        self.stats.acked += result.acked
        self.stats.conflict += result.conflict
        self.stats.rejected += result.rejected
        self.stats.foreign += len(result.foreign)
        self.stats.contradicted += len(result.contradicted)
        self.stats.unknown += result.unknown
        _APPLIED_ACKED.inc(result.acked)
        if result.conflict or result.rejected or result.foreign or result.contradicted:
            _APPLIED_CONFLICT.inc(result.conflict)
            _APPLIED_REJECTED.inc(result.rejected)
            _APPLIED_FOREIGN.inc(len(result.foreign))
            _CONTRADICTED.inc(len(result.contradicted))
            _log_verdicts(store, records, result)


def _log_verdicts(
    store: RunEventStore, records: list[OutcomeRecord], result: OutcomeApplication
) -> None:
    """One line per row a verdict parked, contradicted an ack, or named other bytes."""
    contradicted = set(result.contradicted)
    if result.conflict or result.rejected:
        for r in records:
            if (
                r.outcome in (Outcome.CONFLICT, Outcome.REJECTED)
                and (r.run_id, r.sequence) not in contradicted
            ):
                log.warning(
                    "hub %s project %s run %s sequence %d (%s); the row will not be resent",
                    r.outcome.value,
                    r.project_id,
                    r.run_id,
                    r.sequence,
                    r.reason or "no reason given",
                )
    for run_id, sequence in result.contradicted:
        log.warning(
            "security: a hub outcome contradicts the ack of project %s run %s sequence %d "
            "(same bytes); the row stays acked",
            store.project_id,
            run_id,
            sequence,
        )
    for run_id, sequence in result.foreign:
        log.warning(
            "security: the hub judged other bytes under this runtime's key "
            "project %s run %s sequence %d; the outbox row is left alone",
            store.project_id,
            run_id,
            sequence,
        )
