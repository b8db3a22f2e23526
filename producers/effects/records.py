"""What the effects ledger stores and what claim/heartbeat/commit return."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from hubstore.leases import Lease
from producers.effects.kinds import EffectKind


class EffectStatus(StrEnum):
    """Status of a ledger row."""

    IN_FLIGHT = "in-flight"
    COMMITTED = "committed"


class AttemptState(StrEnum):
    """The attempt state of an effect whose outcome cannot be proven."""

    BLOCKED_UNCERTAIN = "blocked_uncertain"
    """The effect may have touched the world and its lease was lost or unconfirmable:
    it stays in-flight and nothing retries it; an operator decides."""


class EffectRefusalCode(StrEnum):
    """Why a claim, heartbeat or commit did not go ahead."""

    LEASE_HELD = "effect_lease_held"
    """Another box holds the target's lease right now; nothing executed (safe to retry)."""
    LEASE_UNAVAILABLE = "effect_lease_unavailable"
    """Redis could not be reached (or no lease client is bound)."""
    LEASE_SUPERSEDED = "effect_lease_superseded"
    """The token this attempt holds has been superseded (or expired, or released)."""
    ALREADY_COMMITTED = "effect_already_committed"
    IN_FLIGHT = "effect_in_flight"
    """Another live attempt is executing it."""
    BLOCKED_UNCERTAIN = "effect_blocked_uncertain"
    """An earlier attempt parked blocked_uncertain; nothing may retry it."""
    NOT_IN_FLIGHT = "effect_not_in_flight"
    """The row is not in-flight under this attempt any more."""
    NOT_FOUND = "effect_not_found"
    NOT_BLOCKED = "effect_not_blocked"
    """An operator's verdict names an effect that is not parked blocked_uncertain."""
    EXECUTION_UNCERTAIN = "effect_execution_uncertain"
    """The executor could not tell whether the effect landed (e.g. a timeout mid-request)."""


@dataclass(frozen=True)
class EffectSpec:
    """One external effect a run step wants to perform."""

    run_id: str
    step_id: str
    attempt_id: str
    kind: EffectKind
    target: str
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EffectRecord:
    """One row of ``external_effects``."""

    effect_key: str
    run_id: str
    step_id: str
    attempt_id: str
    action_kind: str
    target_ref: str
    status: EffectStatus
    attempt_state: AttemptState | None
    payload_hash: str
    receipt: dict[str, Any] | None
    claimed_at: str
    last_heartbeat_at: str
    committed_at: str | None
    blocked_reason: str | None
    lease_resource: str | None
    fencing_token: int | None


@dataclass(frozen=True)
class EffectClaim:
    """A granted claim: the ledger row is in-flight under this attempt.

    ``lease`` (with its proof, kept in memory only) is set for shared kinds; the
    ledger records its resource and token, which commit presents again.
    """

    effect_key: str
    spec: EffectSpec
    lease: Lease | None
    ok: Literal[True] = True

    @property
    def fenced(self) -> bool:
        """Whether this effect runs under a lease."""
        return self.lease is not None


@dataclass(frozen=True)
class EffectRefused:
    """A refusal. ``attempt_state`` is ``blocked_uncertain`` when the effect may already
    have touched the outside world: the attempt is parked and must not be retried."""

    code: EffectRefusalCode
    message: str
    attempt_state: AttemptState | None = None
    existing: EffectRecord | None = None
    ok: Literal[False] = False

    @property
    def retryable(self) -> bool:
        """Safe to try the whole effect again later: nothing executed under this attempt."""
        return self.attempt_state is None and self.code in {
            EffectRefusalCode.LEASE_HELD,
            EffectRefusalCode.LEASE_UNAVAILABLE,
            EffectRefusalCode.IN_FLIGHT,
        }


@dataclass(frozen=True)
class EffectBeat:
    """A good heartbeat: the lease (if any) renewed, then the ledger row."""

    effect_key: str
    last_heartbeat_at: str
    lease_deadline_ms: int | None
    ok: Literal[True] = True


@dataclass(frozen=True)
class EffectCommitted:
    """The effect is committed in the ledger (and its lease released)."""

    record: EffectRecord
    ok: Literal[True] = True
