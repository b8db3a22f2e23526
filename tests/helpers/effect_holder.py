"""A real holder process for the pause test: claims a shared effect, waits, then tries to commit.

Run as ``python -m tests.helpers.effect_holder REDIS_URL LEDGER TARGET WORKDIR``. It writes
``claimed.json`` once it holds the lease, waits for ``go`` to appear in WORKDIR,
then tries renew, commit and release and writes ``result.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from hubstore.leases import LeaseClient, LeaseRefused
from hubsync.core.connections import RedisTarget, connect
from producers.effects import EffectClaim, EffectKind, EffectRefused, EffectsLedger, EffectSpec
from producers.effects.shared import SharedEffects


def main(redis_url: str, ledger_path: str, target: str, workdir: str) -> None:
    work = Path(workdir)
    leases = LeaseClient(connect(RedisTarget(redis_url)))
    effects = SharedEffects(
        EffectsLedger(Path(ledger_path)), leases, holder="paused-box", lease_ttl_ms=600
    )
    spec = EffectSpec("run-1", "notify", "paused", EffectKind.WEBHOOK, target, {"n": 1})
    claim = effects.claim(spec)
    assert isinstance(claim, EffectClaim) and claim.lease is not None, claim
    keeper = effects.keep_alive(claim)
    assert keeper is not None
    keeper.start()
    (work / "claimed.json").write_text(json.dumps({"token": claim.lease.token}))
    while not (work / "go").exists():  # "executing": the parent pauses us here
        time.sleep(0.01)
    keeper.close(release=False)
    renew = leases.renew(claim.lease)
    commit = effects.commit(claim, {"done": True}, lost=keeper.lost)
    release = leases.release(claim.lease)
    result = {
        "renew": renew.refusal.value if isinstance(renew, LeaseRefused) else "renewed",
        "commit": commit.code.value if isinstance(commit, EffectRefused) else "committed",
        "attempt_state": commit.attempt_state.value
        if isinstance(commit, EffectRefused) and commit.attempt_state
        else None,
        "release": release.refusal.value if isinstance(release, LeaseRefused) else "released",
        "lost": keeper.lost.refusal if keeper.lost else None,
    }
    (work / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:5])
