"""The operator's view of an effects ledger: list effects by state, show one, and give the
verdict on an effect parked ``blocked_uncertain``.

States are the ledger's own: a claim is written ``in-flight`` at once, and an
in-flight attempt that stopped heartbeating is ``stale`` (the next claim takes
it over); ``blocked_uncertain`` may have touched the world; ``committed``
landed. An attempt that failed or certainly did nothing has no row any more
(so it may run again); its history keeps why.

A verdict (``resolve_effect``) is accepted for a ``blocked_uncertain`` effect
only, and is audited in ``effect_history`` with who gave it, when and a note:
``committed`` marks the effect landed (nothing will run it again);
``not-executed`` deletes the row, so a retry claims it afresh. Targets are
shown with credentials replaced (``shown_target``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from hubsync.core.canonical import canonical_json
from hubsync.core.clock import format_timestamp, parse_timestamp, utc_now, utc_now_iso
from producers.effects.errors import InvalidEffectError
from producers.effects.history import (
    MAX_NOTE_LENGTH,
    EffectEvent,
    HistoryEntry,
    history_of,
    record_event,
)
from producers.effects.ledger import COLUMNS, EffectsLedger, read_record, record_of
from producers.effects.records import (
    AttemptState,
    EffectRecord,
    EffectRefusalCode,
    EffectRefused,
    EffectStatus,
)
from producers.redaction import credentials_redacted, credentials_redacted_value

MAX_ACTOR_LENGTH = 128

# Credentials only: a path in a target (a file:// remote) is the operator's own to see.


def shown_target(text: str) -> str:
    """``text`` (a target, a receipt value) with credentials replaced: URL userinfo,
    ``token=`` query values, known token formats."""
    return credentials_redacted(text)


class EffectState(StrEnum):
    """What ``hubsync effects list --state`` selects."""

    IN_FLIGHT = "in-flight"
    """Claimed, and its attempt heartbeats."""
    STALE = "stale"
    """Claimed, but its attempt stopped heartbeating: the next claim takes it over."""
    BLOCKED_UNCERTAIN = "blocked_uncertain"
    COMMITTED = "committed"


class Verdict(StrEnum):
    """The operator's verdict on a ``blocked_uncertain`` effect."""

    COMMITTED = "committed"
    NOT_EXECUTED = "not-executed"


@dataclass(frozen=True)
class EffectView:
    """One ledger row as the operator sees it."""

    record: EffectRecord
    state: EffectState
    age_seconds: float
    """Seconds since the attempt claimed it."""

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON object (target and receipt with credentials replaced)."""
        r = self.record
        return {
            "effect_key": r.effect_key,
            "kind": r.action_kind,
            "target": shown_target(r.target_ref),
            "run_id": r.run_id,
            "step_id": r.step_id,
            "attempt_id": r.attempt_id,
            "state": self.state.value,
            "lease_resource": r.lease_resource,
            "fencing_token": r.fencing_token,
            "age_seconds": round(self.age_seconds, 3),
            "claimed_at": r.claimed_at,
            "last_heartbeat_at": r.last_heartbeat_at,
            "committed_at": r.committed_at,
            "blocked_reason": r.blocked_reason,
            "receipt": credentials_redacted_value(r.receipt),
        }


@dataclass(frozen=True)
class EffectDetail:
    """One effect: its row (None once deleted) and its whole history."""

    effect_key: str
    view: EffectView | None
    history: list[HistoryEntry] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """As a JSON object; ``state`` is null when the ledger holds no row."""
        row = self.view.as_dict() if self.view else {"effect_key": self.effect_key, "state": None}
        return row | {"history": [entry.as_dict() for entry in self.history]}


@dataclass(frozen=True)
class EffectResolved:
    """A verdict taken: ``record`` is the committed row, None after ``not-executed``."""

    effect_key: str
    verdict: Verdict
    record: EffectRecord | None
    ok: Literal[True] = True


def state_of(record: EffectRecord, now: datetime, stale_after: timedelta) -> EffectState:
    """The operator's state of one row at ``now``."""
    if record.status is EffectStatus.COMMITTED:
        return EffectState.COMMITTED
    if record.attempt_state is AttemptState.BLOCKED_UNCERTAIN:
        return EffectState.BLOCKED_UNCERTAIN
    if now - parse_timestamp(record.last_heartbeat_at) >= stale_after:
        return EffectState.STALE
    return EffectState.IN_FLIGHT


def _view(record: EffectRecord, now: datetime, stale_after: timedelta) -> EffectView:
    age = (now - parse_timestamp(record.claimed_at)).total_seconds()
    return EffectView(record, state_of(record, now, stale_after), max(0.0, age))


_STATE_SQL = {
    EffectState.COMMITTED: "status = 'committed'",
    EffectState.BLOCKED_UNCERTAIN: "attempt_state = 'blocked_uncertain'",
    EffectState.IN_FLIGHT: "status = 'in-flight' AND attempt_state IS NULL "
    "AND last_heartbeat_at > :stale_before",
    EffectState.STALE: "status = 'in-flight' AND attempt_state IS NULL "
    "AND last_heartbeat_at <= :stale_before",
}


def list_effects(
    ledger: EffectsLedger,
    *,
    states: tuple[EffectState, ...] = (),
    run_id: str | None = None,
    limit: int = 50,
    now: datetime | None = None,
) -> list[EffectView]:
    """The ledger's effects in ``states`` (all if none), of ``run_id`` if given, newest
    claim first, at most ``limit``."""
    moment = now or utc_now()
    where = " OR ".join(f"({_STATE_SQL[s]})" for s in dict.fromkeys(states)) or "1"
    params: dict[str, Any] = {
        "stale_before": format_timestamp(moment - ledger.stale_after),
        "run_id": run_id,
        "limit": limit,
    }
    query = (
        f"SELECT {COLUMNS} FROM external_effects WHERE ({where}) "
        "AND (:run_id IS NULL OR run_id = :run_id) "
        "ORDER BY claimed_at DESC, effect_key LIMIT :limit"
    )
    rows = ledger.db.read(lambda conn: conn.execute(query, params).fetchall())
    return [_view(record_of(row), moment, ledger.stale_after) for row in rows]


def show_effect(
    ledger: EffectsLedger, key: str, *, now: datetime | None = None
) -> EffectDetail | None:
    """One effect with its receipt and history; None if the ledger never heard of ``key``."""
    moment = now or utc_now()

    def read(conn: sqlite3.Connection) -> EffectDetail | None:
        record = read_record(conn, key)
        history = history_of(conn, key)
        if record is None and not history:
            return None
        view = _view(record, moment, ledger.stale_after) if record else None
        return EffectDetail(key, view, history)

    return ledger.db.read(read)


def _checked_text(value: str, what: str, limit: int) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not text or len(text) > limit or not text.isprintable():
        raise InvalidEffectError(f"{what} must be 1..{limit} printable characters")
    return text


def resolve_effect(
    ledger: EffectsLedger, key: str, verdict: Verdict, *, note: str, actor: str
) -> EffectResolved | EffectRefused:
    """The operator's verdict on the ``blocked_uncertain`` effect ``key``, audited.

    Refused (``effect_not_found``, ``effect_not_blocked``) for anything else,
    changing nothing. Raises ``InvalidEffectError`` for an empty or unprintable
    note or actor.
    """
    note = _checked_text(note, "the note", MAX_NOTE_LENGTH)
    actor = _checked_text(actor, "the actor", MAX_ACTOR_LENGTH)
    verdict = Verdict(verdict)

    def work(conn: sqlite3.Connection) -> EffectResolved | EffectRefused:
        record = read_record(conn, key)
        if record is None:
            return EffectRefused(
                EffectRefusalCode.NOT_FOUND, f"effect_not_found: {key} has no ledger row"
            )
        if record.attempt_state is not AttemptState.BLOCKED_UNCERTAIN:
            state = state_of(record, utc_now(), ledger.stale_after).value
            return EffectRefused(
                EffectRefusalCode.NOT_BLOCKED,
                f"effect_not_blocked: {key} is {state}; only a blocked_uncertain effect "
                "takes a verdict",
                existing=record,
            )
        if verdict is Verdict.NOT_EXECUTED:
            conn.execute("DELETE FROM external_effects WHERE effect_key = ?", (key,))
            event = EffectEvent.RESOLVED_NOT_EXECUTED
        else:
            receipt = canonical_json({"resolved_by": actor, "note": note}).decode("utf-8")
            conn.execute(
                "UPDATE external_effects SET status = 'committed', attempt_state = NULL, "
                "receipt = ?, committed_at = ? WHERE effect_key = ?",
                (receipt, utc_now_iso(), key),
            )
            event = EffectEvent.RESOLVED_COMMITTED
        record_event(conn, key, event, attempt_id=record.attempt_id, actor=actor, note=note)
        return EffectResolved(key, verdict, read_record(conn, key))

    return ledger.db.write(work)
