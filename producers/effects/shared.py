"""Shared effects under fenced leases: claim, heartbeat, commit.

* claim takes the lease *before* writing the ledger row, so a claim that cannot be
  fenced never becomes a claim; ``effect_lease_held`` / ``effect_lease_unavailable``
  mean nothing executes. If the ledger then refuses, the lease is given back.
* heartbeat renews the lease first, then the ledger row.
* commit re-presents the token (a Lua check) before the ledger commit. If the token
  was superseded, or Redis cannot be reached to confirm it, the effect stays
  in-flight and the attempt is parked ``blocked_uncertain``: the write may or may
  not have landed, and re-running it is how a second writer lands it twice.
  After a commit the lease is released.

Lease-free kinds (``git-branch``, ``git-commit``, a push to the run's own branch)
go straight to the ledger.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from hubstore.errors import LeaseUnavailableError
from hubstore.leases import AutoRenewingLease, LeaseClient, LeaseRefused, LostCallback
from hubsync.core.errors import HubsyncError
from producers.effects.kinds import lease_resource_for, requires_lease
from producers.effects.ledger import EffectsLedger, validate_spec
from producers.effects.records import (
    AttemptState,
    EffectBeat,
    EffectClaim,
    EffectCommitted,
    EffectRefusalCode,
    EffectRefused,
    EffectSpec,
)

log = logging.getLogger(__name__)

DEFAULT_LEASE_TTL_MS = 30_000
"""Lease TTL of a shared effect; the heartbeat renews it at a third of that."""


def default_holder() -> str:
    """``host:pid``: names this process in ``hubsync lease show``."""
    return f"{socket.gethostname()[:80]}:{os.getpid()}"


class SharedEffects:
    """Claim, heartbeat and commit effects on one ledger, under leases from ``leases``.

    ``leases`` may be None on a runtime without Redis: lease-free kinds still
    work, shared kinds are refused ``effect_lease_unavailable``.
    """

    def __init__(
        self,
        ledger: EffectsLedger,
        leases: LeaseClient | None,
        *,
        holder: str | None = None,
        lease_ttl_ms: int = DEFAULT_LEASE_TTL_MS,
    ) -> None:
        self.ledger = ledger
        self.leases = leases
        self.holder = holder or default_holder()
        self.lease_ttl_ms = lease_ttl_ms

    # -- claim ---------------------------------------------------------------------------

    def claim(self, spec: EffectSpec) -> EffectClaim | EffectRefused:
        """Take the lease (shared kinds), then the ledger row; refusals execute nothing."""
        validate_spec(spec)
        if not requires_lease(spec.kind, spec.target, spec.run_id):
            key = self.ledger.claim(spec)
            if isinstance(key, EffectRefused):
                return key
            return EffectClaim(key, spec, None)

        resource = lease_resource_for(spec.kind, spec.target)
        if self.leases is None:
            return EffectRefused(
                EffectRefusalCode.LEASE_UNAVAILABLE,
                f"effect_lease_unavailable: {spec.kind.value} is shared and no lease client "
                "is bound",
            )
        try:
            granted = self.leases.acquire(resource, self.holder, self.lease_ttl_ms)
        except LeaseUnavailableError as exc:
            return EffectRefused(
                EffectRefusalCode.LEASE_UNAVAILABLE, f"effect_lease_unavailable: {exc}"
            )
        if isinstance(granted, LeaseRefused):
            return EffectRefused(
                EffectRefusalCode.LEASE_HELD,
                f"effect_lease_held: {resource} is held by {granted.holder!r}; nothing executed",
            )
        lease = granted.lease
        key = self.ledger.claim(
            spec, lease_resource=resource, token=lease.token, holder=lease.holder
        )
        if isinstance(key, EffectRefused):
            # The ledger refused after the lease was taken: give it back now rather
            # than parking the resource until its TTL runs out.
            self._release_quietly(lease_client=self.leases, claim=EffectClaim("", spec, lease))
            return key
        return EffectClaim(key, spec, lease)

    # -- heartbeat -----------------------------------------------------------------------

    def heartbeat(self, claim: EffectClaim) -> EffectBeat | EffectRefused:
        """Renew the lease under the same token, then refresh the ledger row."""
        deadline_ms: int | None = None
        if claim.lease is not None:
            if self.leases is None:
                return EffectRefused(
                    EffectRefusalCode.LEASE_UNAVAILABLE,
                    "effect_lease_unavailable: no lease client is bound",
                )
            try:
                renewed = self.leases.renew(claim.lease)
            except LeaseUnavailableError as exc:
                return EffectRefused(
                    EffectRefusalCode.LEASE_UNAVAILABLE, f"effect_lease_unavailable: {exc}"
                )
            if isinstance(renewed, LeaseRefused):
                return self._park(
                    claim,
                    EffectRefusalCode.LEASE_SUPERSEDED,
                    f"lease {renewed.refusal.value} at heartbeat: {renewed.describe()}",
                )
            deadline_ms = renewed.lease.deadline_ms
        beat = self.ledger.heartbeat(claim.effect_key, claim.spec.attempt_id)
        if isinstance(beat, EffectRefused):
            return beat
        return EffectBeat(claim.effect_key, beat, deadline_ms)

    def keep_alive(
        self, claim: EffectClaim, *, on_lost: LostCallback | None = None
    ) -> AutoRenewingLease | None:
        """A not-yet-started auto-renewer for a fenced claim (None for lease-free ones).

        Each renewal is followed by the ledger heartbeat (lease first, then ledger);
        a refused renewal marks the lease lost at once.
        """
        if claim.lease is None or self.leases is None:
            return None

        def touch_ledger(_lease: Any) -> None:
            beat = self.ledger.heartbeat(claim.effect_key, claim.spec.attempt_id)
            if isinstance(beat, EffectRefused):
                raise HubsyncError(beat.message)

        return AutoRenewingLease(self.leases, claim.lease, on_lost=on_lost, on_renewed=touch_ledger)

    # -- commit --------------------------------------------------------------------------

    def commit(
        self, claim: EffectClaim, receipt: dict[str, Any], *, lost: HubsyncError | None = None
    ) -> EffectCommitted | EffectRefused:
        """Re-present the token, then commit the ledger row, then release the lease.

        ``lost`` is the loss an auto-renewer already saw (its ``.lost``); a lost lease
        refuses without asking Redis.
        """
        if claim.lease is not None:
            refused = self._confirm_token(claim, lost)
            if refused is not None:
                return refused
        token, holder = (claim.lease.token, claim.lease.holder) if claim.lease else (None, None)
        record = self.ledger.commit(
            claim.effect_key, claim.spec.attempt_id, receipt, token=token, holder=holder
        )
        if isinstance(record, EffectRefused):
            if record.code is EffectRefusalCode.LEASE_SUPERSEDED:
                return self._park(claim, record.code, record.message)
            return record
        if claim.lease is not None and self.leases is not None:
            self._release_quietly(self.leases, claim)
        return EffectCommitted(record)

    def abandon(
        self, claim: EffectClaim, reason: str = "nothing executed", *, failed: bool = False
    ) -> None:
        """The executor certainly did nothing: drop the row (its history says ``reason``, and
        ``failed`` when the target refused it for good) and give the lease back."""
        self.ledger.abandon(claim.effect_key, claim.spec.attempt_id, reason, failed=failed)
        if claim.lease is not None and self.leases is not None:
            self._release_quietly(self.leases, claim)

    def park(self, claim: EffectClaim, reason: str) -> EffectRefused:
        """The outcome is unknown (e.g. a timeout mid-request): park blocked_uncertain."""
        return self._park(claim, EffectRefusalCode.EXECUTION_UNCERTAIN, reason)

    # -- helpers -------------------------------------------------------------------------

    def _confirm_token(self, claim: EffectClaim, lost: HubsyncError | None) -> EffectRefused | None:
        assert claim.lease is not None
        if lost is not None:
            code = (
                EffectRefusalCode.LEASE_UNAVAILABLE
                if getattr(lost, "refusal", "") == "unavailable"
                else EffectRefusalCode.LEASE_SUPERSEDED
            )
            return self._park(claim, code, f"lease lost before commit: {lost}")
        if self.leases is None:
            return self._park(
                claim, EffectRefusalCode.LEASE_UNAVAILABLE, "no lease client to confirm the token"
            )
        try:
            checked = self.leases.check(claim.lease)
        except LeaseUnavailableError as exc:
            return self._park(
                claim,
                EffectRefusalCode.LEASE_UNAVAILABLE,
                f"the token could not be confirmed before commit: {exc}",
            )
        if isinstance(checked, LeaseRefused):
            return self._park(
                claim,
                EffectRefusalCode.LEASE_SUPERSEDED,
                f"token {claim.lease.token} was {checked.refusal.value} before commit",
            )
        return None

    def _park(self, claim: EffectClaim, code: EffectRefusalCode, reason: str) -> EffectRefused:
        record = self.ledger.park_blocked(claim.effect_key, claim.spec.attempt_id, reason)
        log.warning(
            "effect %s attempt %s parked blocked_uncertain: %s",
            claim.effect_key,
            claim.spec.attempt_id,
            reason,
        )
        return EffectRefused(
            code,
            f"{code.value}: {reason}; the effect stays in-flight and is parked "
            "blocked_uncertain (nothing retries it)",
            attempt_state=AttemptState.BLOCKED_UNCERTAIN,
            existing=record,
        )

    @staticmethod
    def _release_quietly(lease_client: LeaseClient, claim: EffectClaim) -> None:
        # A failed release is nothing the caller can act on: the deadline frees it.
        if claim.lease is None:
            return
        try:
            lease_client.release(claim.lease)
        except HubsyncError as exc:
            log.warning("lease %s: release failed: %s", claim.lease.resource, exc)
