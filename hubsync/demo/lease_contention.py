"""Two boxes contend for one shared effect's lease, and the stale holder's commit is refused.

Box A claims a ``git-push`` to ``refs/heads/main`` with a short lease and stalls past its
deadline; box B, refused while A held it, then takes over with a larger fencing token and
commits; A's late commit is refused and its attempt parked.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hubstore.leases import LeaseClient
from hubsync.core.connections import RedisTarget, connect
from producers.effects.kinds import EffectKind
from producers.effects.ledger import EffectsLedger
from producers.effects.records import EffectClaim, EffectCommitted, EffectRefused, EffectSpec
from producers.effects.shared import SharedEffects


def lease_contention(redis_target: RedisTarget, workdir: Path) -> dict[str, Any]:
    """Stage the contention on ``redis_target`` (the boxes' ledgers in ``workdir``); the
    tokens and verdicts the summary shows."""
    leases = LeaseClient(connect(redis_target))
    ledger_a = EffectsLedger(workdir / "box-a-effects.sqlite")
    ledger_b = EffectsLedger(workdir / "box-b-effects.sqlite")
    box_a = SharedEffects(ledger_a, leases, holder="box-a", lease_ttl_ms=300)
    box_b = SharedEffects(ledger_b, leases, holder="box-b", lease_ttl_ms=5_000)
    spec = dict(run_id="demo-run", step_id="push", kind=EffectKind.GIT_PUSH,
                target="refs/heads/main", payload={"sha": "0" * 40})  # fmt: skip
    try:
        claim_a = box_a.claim(EffectSpec(attempt_id="attempt-a", **spec))  # type: ignore[arg-type]
        assert isinstance(claim_a, EffectClaim) and claim_a.lease is not None
        refused_b = box_b.claim(EffectSpec(attempt_id="attempt-b0", **spec))  # type: ignore[arg-type]
        # box A now stalls (a GC pause, a frozen VM) past its lease deadline
        resource = claim_a.lease.resource
        deadline = time.monotonic() + 10
        while leases.show(resource).state.value != "expired" and time.monotonic() < deadline:
            time.sleep(0.02)
        claim_b = box_b.claim(EffectSpec(attempt_id="attempt-b", **spec))  # type: ignore[arg-type]
        assert isinstance(claim_b, EffectClaim) and claim_b.lease is not None
        committed_b = box_b.commit(claim_b, {"pushed": "refs/heads/main"})
        stale_a = box_a.commit(claim_a, {"pushed": "refs/heads/main"})
        return {
            "resource": resource,
            "token_a": claim_a.lease.token,
            "token_b": claim_b.lease.token,
            "b_refused_while_a_held": isinstance(refused_b, EffectRefused)
            and refused_b.code.value == "effect_lease_held",
            "b_committed": isinstance(committed_b, EffectCommitted),
            "stale_commit_refused": isinstance(stale_a, EffectRefused),
            "stale_commit_code": getattr(stale_a, "code", None) and stale_a.code.value,  # type: ignore[union-attr]
            "stale_attempt_state": getattr(stale_a, "attempt_state", None)
            and stale_a.attempt_state.value,  # type: ignore[union-attr]
        }
    finally:
        ledger_a.close()
        ledger_b.close()
        leases.redis.close()
