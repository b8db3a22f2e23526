"""``EffectsLedger``: the runtime's SQLite record of external effects (``external_effects``).

A row is claimed ``in-flight`` by one attempt, heartbeated while it executes and
``committed`` with its receipt; an attempt whose outcome cannot be proven is
parked ``blocked_uncertain`` and stays in-flight, so nothing retries it until an
operator gives a verdict (``producers.effects.review``). Every transition is
also written to ``effect_history`` (``producers.effects.history``), in the
transition's own transaction.

Rows of fenced (shared) effects also advance ``resource_fences`` (see
``hubstore.leases.fence``) in the same transaction as the claim and the commit: a commit
under a token smaller than one another attempt on this ledger has already
claimed with is refused even if its Redis check passed just before a pause.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from hubstore.errors import FencedWriteRefusedError
from hubstore.leases.fence import FENCE_DDL, FENCE_HOLDER_COLUMN, advance_fence
from hubsync.core.canonical import canonical_json, content_hash
from hubsync.core.clock import format_timestamp, parse_timestamp, utc_now, utc_now_iso
from hubsync.core.errors import WireError
from hubsync.core.names import validate_name
from hubsync.core.sqlite import Database, Migration, split_statements
from producers.effects.errors import InvalidEffectError
from producers.effects.history import (
    HISTORY_DDL,
    EffectEvent,
    HistoryEntry,
    history_of,
    purge_history,
    record_event,
)
from producers.effects.kinds import EffectKind
from producers.effects.records import (
    AttemptState,
    EffectRecord,
    EffectRefusalCode,
    EffectRefused,
    EffectSpec,
    EffectStatus,
)

SCHEMA_VERSION = 3
"""``PRAGMA user_version`` of the ledger (``resource_fences`` and ``effect_history``
included): an older file is migrated at open (after a backup), a newer one refused."""
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "resource_fences keeps the holder of each resource's highest token",
        (FENCE_HOLDER_COLUMN,),
    ),
    Migration(
        2,
        "effect_history keeps each effect's transitions and the operator's verdicts",
        tuple(split_statements(HISTORY_DDL)),
    ),
)
"""Version N -> N+1 steps, oldest first (``hubsync.core.sqlite.Migration``)."""
MAX_TARGET_LENGTH = 2048
ATTEMPT_STALE_AFTER = 120.0
"""An in-flight row not heartbeated for this long belongs to a dead attempt and may be
re-claimed (unless it was parked blocked_uncertain)."""

LEDGER_DDL = f"""
CREATE TABLE IF NOT EXISTS external_effects (
    effect_key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    action_kind TEXT NOT NULL,
    target_ref TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('in-flight', 'committed')),
    attempt_state TEXT CHECK (attempt_state IS NULL OR attempt_state = 'blocked_uncertain'),
    payload_hash TEXT NOT NULL,
    receipt TEXT,
    claimed_at TEXT NOT NULL,
    last_heartbeat_at TEXT NOT NULL,
    committed_at TEXT,
    blocked_reason TEXT,
    lease_resource TEXT,
    fencing_token INTEGER
) STRICT;
CREATE INDEX IF NOT EXISTS external_effects_run ON external_effects (run_id);
CREATE INDEX IF NOT EXISTS external_effects_status ON external_effects (status, committed_at);
{FENCE_DDL};
"""

COLUMNS = (
    "effect_key, run_id, step_id, attempt_id, action_kind, target_ref, status, attempt_state, "
    "payload_hash, receipt, claimed_at, last_heartbeat_at, committed_at, blocked_reason, "
    "lease_resource, fencing_token"
)


def effect_key(run_id: str, step_id: str, kind: EffectKind, target: str) -> str:
    """``eff_`` + the first 32 hex of sha256(canonical [run, step, kind, target])."""
    digest = content_hash(canonical_json([run_id, step_id, kind.value, target]))
    return f"eff_{digest[:32]}"


def validate_spec(spec: EffectSpec) -> EffectSpec:
    """Check ids, kind, target and payload; raise ``InvalidEffectError`` saying what is wrong."""
    try:
        for value, what in [(spec.run_id, "run id"), (spec.step_id, "step id")]:
            validate_name(value, what)
        validate_name(spec.attempt_id, "attempt id")
        EffectKind(spec.kind)
    except (ValueError, TypeError) as exc:
        raise InvalidEffectError(str(exc)) from None
    target = spec.target
    if not isinstance(target, str) or not target or len(target) > MAX_TARGET_LENGTH:
        raise InvalidEffectError(f"effect target must be 1..{MAX_TARGET_LENGTH} characters")
    if not target.isprintable():
        raise InvalidEffectError("effect target must not contain control characters")
    try:
        canonical_json(spec.payload)
    except WireError as exc:
        raise InvalidEffectError(f"effect payload: {exc.detail}") from None
    return spec


def record_of(row: sqlite3.Row | tuple[Any, ...]) -> EffectRecord:
    """An ``EffectRecord`` of a row selected as ``COLUMNS``."""
    (key, run, step, attempt, kind, target, status, state, payload_hash, receipt, claimed,
     beat, committed, reason, resource, token) = row  # fmt: skip
    return EffectRecord(
        effect_key=key,
        run_id=run,
        step_id=step,
        attempt_id=attempt,
        action_kind=kind,
        target_ref=target,
        status=EffectStatus(status),
        attempt_state=AttemptState(state) if state else None,
        payload_hash=payload_hash,
        receipt=json.loads(receipt) if receipt else None,
        claimed_at=claimed,
        last_heartbeat_at=beat,
        committed_at=committed,
        blocked_reason=reason,
        lease_resource=resource,
        fencing_token=token,
    )


def read_record(conn: sqlite3.Connection, key: str) -> EffectRecord | None:
    """The row of ``key`` on ``conn`` (inside a transaction), or None."""
    row = conn.execute(f"SELECT {COLUMNS} FROM external_effects WHERE effect_key = ?", (key,))
    found = row.fetchone()
    return record_of(found) if found else None


class EffectsLedger:
    """The ``external_effects`` table of one runtime, in its own SQLite file."""

    def __init__(self, path: Path, *, stale_after: float = ATTEMPT_STALE_AFTER) -> None:
        self.path = Path(path)
        self.stale_after = timedelta(seconds=stale_after)
        self.db = Database(self.path)
        try:
            self.db.ensure_schema(
                SCHEMA_VERSION,
                split_statements(LEDGER_DDL + HISTORY_DDL),
                "hubsync effects ledger",
                MIGRATIONS,
            )
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        """Close the file."""
        self.db.close()

    # -- transitions ---------------------------------------------------------------------

    def claim(
        self,
        spec: EffectSpec,
        *,
        lease_resource: str | None = None,
        token: int | None = None,
        holder: str | None = None,
    ) -> str | EffectRefused:
        """Write the in-flight row of ``spec``'s attempt; return its effect key or a refusal.

        Refused when the effect is committed, parked blocked_uncertain, or in-flight
        under a live attempt. A dead attempt (no heartbeat for ``stale_after``) is
        replaced. A fenced claim whose token is smaller than one already seen on
        this ledger, or as large but from another holder, is refused
        ``effect_lease_superseded``.
        """
        validate_spec(spec)
        if token is not None and holder is None:
            raise InvalidEffectError("a fenced claim names the holder of its token")
        key = effect_key(spec.run_id, spec.step_id, spec.kind, spec.target)
        payload_hash = content_hash(canonical_json(spec.payload))

        def work(conn: sqlite3.Connection) -> str | EffectRefused:
            existing = read_record(conn, key)
            if existing is not None:
                refused = self._claim_refusal(existing)
                if refused is not None:
                    return refused
            if lease_resource is not None and token is not None:
                try:
                    advance_fence(conn, lease_resource, token, str(holder))
                except FencedWriteRefusedError as exc:
                    return EffectRefused(EffectRefusalCode.LEASE_SUPERSEDED, str(exc))
            now = utc_now_iso()
            taken_over = f"took over dead attempt {existing.attempt_id}; " if existing else ""
            fenced = f"under lease token {token}" if token is not None else "lease-free"
            record_event(
                conn, key, EffectEvent.CLAIMED, attempt_id=spec.attempt_id, actor=holder,
                note=taken_over + fenced,
            )  # fmt: skip
            conn.execute(
                f"""
                INSERT INTO external_effects ({COLUMNS})
                VALUES (?, ?, ?, ?, ?, ?, 'in-flight', NULL, ?, NULL, ?, ?, NULL, NULL, ?, ?)
                ON CONFLICT (effect_key) DO UPDATE SET
                    attempt_id = excluded.attempt_id, status = 'in-flight',
                    attempt_state = NULL, payload_hash = excluded.payload_hash, receipt = NULL,
                    claimed_at = excluded.claimed_at,
                    last_heartbeat_at = excluded.last_heartbeat_at, committed_at = NULL,
                    blocked_reason = NULL, lease_resource = excluded.lease_resource,
                    fencing_token = excluded.fencing_token
                """,
                (
                    key,
                    spec.run_id,
                    spec.step_id,
                    spec.attempt_id,
                    spec.kind.value,
                    spec.target,
                    payload_hash,
                    now,
                    now,
                    lease_resource,
                    token,
                ),
            )
            return key

        return self.db.write(work)

    def heartbeat(self, key: str, attempt_id: str) -> str | EffectRefused:
        """Refresh the row's heartbeat if it is still in-flight under ``attempt_id``."""
        now = utc_now_iso()

        def work(conn: sqlite3.Connection) -> str | EffectRefused:
            cursor = conn.execute(
                "UPDATE external_effects SET last_heartbeat_at = ? WHERE effect_key = ? AND "
                "attempt_id = ? AND status = 'in-flight' AND attempt_state IS NULL",
                (now, key, attempt_id),
            )
            if cursor.rowcount == 1:
                return now
            return self._not_in_flight(conn, key, attempt_id)

        return self.db.write(work)

    def commit(
        self,
        key: str,
        attempt_id: str,
        receipt: dict[str, Any],
        *,
        token: int | None = None,
        holder: str | None = None,
    ) -> EffectRecord | EffectRefused:
        """Mark the row committed with ``receipt``; a fenced row advances its fence first
        (``token`` and ``holder``: the lease it was committed under)."""
        receipt_text = canonical_json(receipt).decode("utf-8")
        if token is not None and holder is None:
            raise InvalidEffectError("a fenced commit names the holder of its token")

        def work(conn: sqlite3.Connection) -> EffectRecord | EffectRefused:
            existing = read_record(conn, key)
            if existing is None or existing.attempt_id != attempt_id:
                return self._not_in_flight(conn, key, attempt_id)
            if existing.status is EffectStatus.COMMITTED:
                return EffectRefused(
                    EffectRefusalCode.ALREADY_COMMITTED,
                    f"effect_already_committed: {key} was committed at {existing.committed_at}",
                    existing=existing,
                )
            if existing.attempt_state is AttemptState.BLOCKED_UNCERTAIN:
                return self._blocked(existing)
            if existing.lease_resource is not None:
                try:
                    advance_fence(conn, existing.lease_resource, token or 0, holder or "-")
                except FencedWriteRefusedError as exc:
                    return EffectRefused(EffectRefusalCode.LEASE_SUPERSEDED, str(exc))
            conn.execute(
                "UPDATE external_effects SET status = 'committed', receipt = ?, committed_at = ?"
                " WHERE effect_key = ?",
                (receipt_text, utc_now_iso(), key),
            )
            record_event(conn, key, EffectEvent.COMMITTED, attempt_id=attempt_id, actor=holder)
            record = read_record(conn, key)
            assert record is not None
            return record

        return self.db.write(work)

    def park_blocked(self, key: str, attempt_id: str, reason: str) -> EffectRecord | None:
        """Park the attempt ``blocked_uncertain`` (the row stays in-flight); None if gone."""

        def work(conn: sqlite3.Connection) -> EffectRecord | None:
            cursor = conn.execute(
                "UPDATE external_effects SET attempt_state = 'blocked_uncertain', "
                "blocked_reason = ? WHERE effect_key = ? AND attempt_id = ? AND "
                "status = 'in-flight'",
                (reason[:500], key, attempt_id),
            )
            if cursor.rowcount == 1:
                record_event(conn, key, EffectEvent.PARKED, attempt_id=attempt_id, note=reason)
            return read_record(conn, key)

        return self.db.write(work)

    def abandon(
        self, key: str, attempt_id: str, reason: str = "nothing executed", *, failed: bool = False
    ) -> bool:
        """Drop an in-flight row whose attempt certainly did nothing (so it may be retried);
        its history records it ``dropped``, or ``failed`` if the target refused it for good,
        with ``reason``."""

        def work(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "DELETE FROM external_effects WHERE effect_key = ? AND attempt_id = ? AND "
                "status = 'in-flight' AND attempt_state IS NULL",
                (key, attempt_id),
            )
            if cursor.rowcount == 1:
                event = EffectEvent.FAILED if failed else EffectEvent.DROPPED
                record_event(conn, key, event, attempt_id=attempt_id, note=reason)
            return cursor.rowcount == 1

        return self.db.write(work)

    def purge_committed(self, older_than: float) -> int:
        """Delete committed rows older than ``older_than``; return how many.

        In-flight and blocked rows are never purged: they are what an operator must see.
        History older than that goes too, except for effects still in-flight.
        """
        cutoff = format_timestamp(utc_now() - timedelta(seconds=older_than))

        def work(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(
                "DELETE FROM external_effects WHERE status = 'committed' AND committed_at < ?",
                (cutoff,),
            )
            purge_history(conn, cutoff)
            return cursor.rowcount

        return self.db.write(work)

    # -- reading -------------------------------------------------------------------------

    def get(self, key: str) -> EffectRecord | None:
        """The row of ``key``, or None."""
        return self.db.read(lambda conn: read_record(conn, key))

    def history(self, key: str) -> list[HistoryEntry]:
        """Every transition and verdict of ``key``, oldest first (also once its row is gone)."""
        return self.db.read(lambda conn: history_of(conn, key))

    def list_run(self, run_id: str) -> list[EffectRecord]:
        """Every row of one run, in claim order."""
        return self.db.read(
            lambda conn: [
                record_of(row)
                for row in conn.execute(
                    f"SELECT {COLUMNS} FROM external_effects WHERE run_id = ? ORDER BY claimed_at",
                    (run_id,),
                )
            ]
        )

    def list_blocked(self) -> list[EffectRecord]:
        """Every attempt parked blocked_uncertain (for the operator)."""
        return self.db.read(
            lambda conn: [
                record_of(row)
                for row in conn.execute(
                    f"SELECT {COLUMNS} FROM external_effects "
                    "WHERE attempt_state = 'blocked_uncertain' ORDER BY claimed_at"
                )
            ]
        )

    # -- helpers -------------------------------------------------------------------------

    def _claim_refusal(self, existing: EffectRecord) -> EffectRefused | None:
        if existing.status is EffectStatus.COMMITTED:
            return EffectRefused(
                EffectRefusalCode.ALREADY_COMMITTED,
                f"effect_already_committed: {existing.effect_key} was committed at "
                f"{existing.committed_at}",
                existing=existing,
            )
        if existing.attempt_state is AttemptState.BLOCKED_UNCERTAIN:
            return self._blocked(existing)
        if utc_now() - parse_timestamp(existing.last_heartbeat_at) < self.stale_after:
            return EffectRefused(
                EffectRefusalCode.IN_FLIGHT,
                f"effect_in_flight: {existing.effect_key} is executing under attempt "
                f"{existing.attempt_id} (last heartbeat {existing.last_heartbeat_at})",
                existing=existing,
            )
        return None

    @staticmethod
    def _blocked(existing: EffectRecord) -> EffectRefused:
        return EffectRefused(
            EffectRefusalCode.BLOCKED_UNCERTAIN,
            f"effect_blocked_uncertain: attempt {existing.attempt_id} of {existing.effect_key} "
            f"is parked ({existing.blocked_reason}); an operator must decide, nothing retries it",
            attempt_state=AttemptState.BLOCKED_UNCERTAIN,
            existing=existing,
        )

    def _not_in_flight(self, conn: sqlite3.Connection, key: str, attempt_id: str) -> EffectRefused:
        existing = read_record(conn, key)
        if existing is None:
            return EffectRefused(
                EffectRefusalCode.NOT_FOUND, f"effect_not_found: {key} has no ledger row"
            )
        return EffectRefused(
            EffectRefusalCode.NOT_IN_FLIGHT,
            f"effect_not_in_flight: {key} is {existing.status.value} under attempt "
            f"{existing.attempt_id}, not in-flight under {attempt_id}",
            attempt_state=existing.attempt_state,
            existing=existing,
        )
