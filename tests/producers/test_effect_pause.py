"""A holder process paused (SIGSTOP) past its deadline loses to a taker: it cannot renew,
release or commit, its effect parks blocked_uncertain, and the taker's token is larger."""

from __future__ import annotations

import json
from pathlib import Path

import redis

from hubstore.leases import Lease, LeaseClient, LeaseState
from hubsync.processes import Child, python_command
from producers.effects import (
    AttemptState,
    EffectKind,
    EffectsLedger,
    EffectStatus,
    lease_resource_for,
)
from tests.helpers.support import wait_until

TARGET = "https://hooks.example.test/deploy"


def test_a_paused_holder_cannot_act_after_a_takeover_and_parks_blocked_uncertain(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    ledger_path = tmp_path / "effects.db"
    argv = python_command(
        "tests.helpers.effect_holder", redis_url, str(ledger_path), TARGET, str(tmp_path)
    )
    holder = Child("effect-holder", argv, tmp_path / "holder.log").start()
    try:
        claimed = tmp_path / "claimed.json"
        wait_until(claimed.exists, timeout=30, what="the holder to claim")
        old_token = json.loads(claimed.read_text())["token"]
        holder.pause()

        leases = LeaseClient(redis_client)
        resource = lease_resource_for(EffectKind.WEBHOOK, TARGET)
        wait_until(
            lambda: leases.show(resource).state is LeaseState.EXPIRED,
            timeout=10,
            what="the paused holder's lease to expire on Redis's clock",
        )
        taker = leases.acquire_or_raise(resource, "box-b", 60_000)
        assert taker.lease.token > old_token

        holder.resume()
        (tmp_path / "go").touch()
        assert holder.wait(timeout=30) == 0, holder.tail()
    finally:
        holder.kill()

    result = json.loads((tmp_path / "result.json").read_text())
    assert result["renew"] == "superseded"
    assert result["release"] == "superseded"
    assert result["commit"] == "effect_lease_superseded"
    assert result["attempt_state"] == "blocked_uncertain"
    ledger = EffectsLedger(ledger_path)
    [record] = ledger.list_run("run-1")
    assert record.status is EffectStatus.IN_FLIGHT
    assert record.attempt_state is AttemptState.BLOCKED_UNCERTAIN
    assert record.fencing_token == old_token
    ledger.close()
    info = leases.show(resource)
    assert (info.holder, info.token, info.state) == ("box-b", taker.lease.token, LeaseState.LIVE)
    # refused for its token, before holder and proof are even compared
    stale = Lease(resource, "box-a", old_token, "not-the-holders-proof")
    assert leases.fenced_write(stale, "deploy", b"late").status == "superseded"
