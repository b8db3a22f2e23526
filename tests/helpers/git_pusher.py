"""A real runtime process pushing one run's branch to ``main`` of a shared remote.

Run as ``python -m tests.helpers.git_pusher MODE REDIS_URL LEDGER RUN_ID REMOTE WORKDIR``
with ``HUBSYNC_GIT_REPOSITORY`` and ``HUBSYNC_GIT_WORKSPACE`` naming its clone. It waits
for ``go`` in WORKDIR when ``wait`` is in MODE, then:

* ``run``: the effect job itself (``run_effect`` with the ``git-push`` executor);
* ``stall``: claims (lease TTL 600 ms, kept alive), records its token on the remote's
  fence, checks its lease (it passes), writes ``fenced.json`` and waits for ``go``
  (the parent pauses it there), then makes the atomic push.

It writes ``result.json``: ``status`` (``committed``, or the error's class name),
``message`` and, for ``stall``, the tokens.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from consumers.jobs.effect_jobs import run_effect
from hubstore.leases import LeaseClient
from hubsync.core.connections import RedisTarget, connect
from producers.effects import EffectClaim, EffectKind, EffectsLedger, EffectSpec, SharedEffects
from producers.effects.git.executors import GitSettings
from producers.effects.git.push import claim_fence


def wait_for(path: Path) -> None:
    while not path.exists():  # the parent releases (or pauses) us here
        time.sleep(0.01)


def stall(redis_url: str, ledger: Path, spec: EffectSpec, work: Path) -> dict[str, Any]:
    leases = LeaseClient(connect(RedisTarget(redis_url)))
    effects = SharedEffects(EffectsLedger(ledger), leases, holder="stalled-box", lease_ttl_ms=600)
    claim = effects.claim(spec)
    assert isinstance(claim, EffectClaim) and claim.lease is not None, claim
    keeper = effects.keep_alive(claim)
    assert keeper is not None
    keeper.start()
    workspace = GitSettings().workspace()  # the fields come from the environment
    worktree = workspace.worktree(spec.run_id)
    commit = workspace.commit_of(workspace.branch(spec.run_id))
    remote = str(spec.payload["remote"])
    fenced = claim_fence(worktree, remote, "refs/heads/main", commit, claim.lease.token,
                         claim.lease.holder)  # fmt: skip
    checked = leases.check(claim.lease).ok
    (work / "fenced.json").write_text(json.dumps({"token": claim.lease.token}))
    wait_for(work / "go")
    keeper.close(release=False)
    result: dict[str, Any] = {"token": claim.lease.token, "checked_before_pause": checked}
    try:
        fenced.push()
    except Exception as exc:
        effects.abandon(claim)  # what the job does with an error that executed nothing
        return result | {"status": type(exc).__name__, "message": str(exc)}
    return result | {"status": "pushed", "lost": str(keeper.lost)}


def main(mode: str, redis_url: str, ledger: str, run_id: str, remote: str, workdir: str) -> None:
    work = Path(workdir)
    spec = EffectSpec(run_id, "push", f"push-{int(time.time() * 1000)}", EffectKind.GIT_PUSH,
                      "main", {"remote": remote})  # fmt: skip
    if "wait" in mode:
        wait_for(work / "go")
    result: dict[str, Any]
    if "stall" in mode:
        result = stall(redis_url, Path(ledger), spec, work)
    else:
        fields = {"run_id": run_id, "step_id": "push", "attempt_id": spec.attempt_id,
                  "kind": "git-push", "target": "main", "payload": spec.payload}  # fmt: skip
        try:
            done = run_effect(fields, ledger, executor="git-push", lease_ttl_ms=5_000,
                              redis_url=redis_url)  # fmt: skip
            result = {"status": done["status"], "receipt": done.get("receipt"),
                      "token": done.get("token")}  # fmt: skip
        except Exception as exc:
            result = {"status": type(exc).__name__, "message": str(exc)}
    (work / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:7])
