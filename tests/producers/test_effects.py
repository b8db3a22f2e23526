"""Shared effects: the SQLite ledger, which kinds take a lease, claim/heartbeat/commit
under real Redis leases, and blocked_uncertain parking."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from hubstore.leases import LeaseClient
from hubsync.demo.embedded_redis import RedisServerProcess
from producers.effects import (
    AttemptState,
    EffectClaim,
    EffectCommitted,
    EffectKind,
    EffectRefusalCode,
    EffectRefused,
    EffectsLedger,
    EffectSpec,
    EffectStatus,
    SharedEffects,
    effect_key,
    lease_resource_for,
    requires_lease,
)
from producers.effects import ledger as ledger_module
from producers.effects.errors import InvalidEffectError
from tests.helpers.lease_support import expire_lease

HOOK = "https://hooks.example.test/deploy?env=prod"


def spec(
    kind: EffectKind = EffectKind.WEBHOOK, target: str = HOOK, attempt: str = "a1"
) -> EffectSpec:
    return EffectSpec("run-1", "step-1", attempt, kind, target, {"n": 1})


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[EffectsLedger]:
    led = EffectsLedger(tmp_path / "effects.db")
    yield led
    led.close()


@pytest.fixture
def leases(redis_client: redis.Redis) -> LeaseClient:
    return LeaseClient(redis_client)


def claimed(result: object) -> EffectClaim:
    assert isinstance(result, EffectClaim), result
    return result


def refused(result: object) -> EffectRefused:
    assert isinstance(result, EffectRefused), result
    return result


@pytest.mark.parametrize(
    ("kind", "target", "shared"),
    [
        (EffectKind.GIT_BRANCH, "hubsync/run-run-1", False),
        (EffectKind.GIT_COMMIT, "anything", False),
        (EffectKind.GIT_PUSH, "hubsync/run-run-1", False),
        (EffectKind.GIT_PUSH, "refs/heads/hubsync/run-run-1-fix", False),
        (EffectKind.GIT_PUSH, "refs/heads/main", True),
        (EffectKind.GIT_PUSH, "hubsync/run-run-10", True),
        (EffectKind.PR_CREATE, "org/repo#main", True),
        (EffectKind.TRACKER_ISSUE, "PROJ-1", True),
        (EffectKind.WEBHOOK, HOOK, True),
    ],
)
def test_which_kinds_need_a_lease(kind: EffectKind, target: str, shared: bool) -> None:
    assert requires_lease(kind, target, "run-1") is shared


def test_effect_key_is_a_sha256_prefix_of_run_step_kind_target() -> None:
    key = effect_key("run-1", "step-1", EffectKind.WEBHOOK, HOOK)
    assert key.startswith("eff_") and len(key) == 36
    assert key != effect_key("run-1", "step-2", EffectKind.WEBHOOK, HOOK)
    assert lease_resource_for(EffectKind.WEBHOOK, HOOK).startswith("effect:webhook:")


def test_ledger_claim_commit_and_refusals(ledger: EffectsLedger) -> None:
    key = ledger.claim(spec(EffectKind.GIT_COMMIT, "abc"))
    assert isinstance(key, str)
    assert (
        refused(ledger.claim(spec(EffectKind.GIT_COMMIT, "abc", "a2"))).code == "effect_in_flight"
    )
    assert isinstance(ledger.heartbeat(key, "a1"), str)
    assert refused(ledger.heartbeat(key, "other")).code == "effect_not_in_flight"
    record = ledger.commit(key, "a1", {"sha": "abc"})
    assert not isinstance(record, EffectRefused)
    assert record.status is EffectStatus.COMMITTED and record.receipt == {"sha": "abc"}
    again = refused(ledger.claim(spec(EffectKind.GIT_COMMIT, "abc", "a3")))
    assert again.code is EffectRefusalCode.ALREADY_COMMITTED
    assert refused(ledger.heartbeat("eff_none", "a1")).code == "effect_not_found"


def test_a_dead_attempt_may_be_reclaimed_but_a_blocked_one_never(tmp_path: Path) -> None:
    ledger = EffectsLedger(tmp_path / "e.db", stale_after=0)
    key = ledger.claim(spec(EffectKind.GIT_COMMIT, "x"))
    assert isinstance(key, str)
    assert ledger.claim(spec(EffectKind.GIT_COMMIT, "x", "a2")) == key
    assert ledger.get(key).attempt_id == "a2"  # type: ignore[union-attr]
    ledger.park_blocked(key, "a2", "timeout mid-request")
    blocked = refused(ledger.claim(spec(EffectKind.GIT_COMMIT, "x", "a3")))
    assert blocked.code is EffectRefusalCode.BLOCKED_UNCERTAIN
    assert blocked.attempt_state is AttemptState.BLOCKED_UNCERTAIN
    assert not blocked.retryable
    assert [r.effect_key for r in ledger.list_blocked()] == [key]
    ledger.close()


def test_retention_purge_drops_only_old_committed_rows(ledger: EffectsLedger) -> None:
    done = ledger.claim(spec(EffectKind.GIT_COMMIT, "done"))
    assert isinstance(done, str)
    ledger.commit(done, "a1", {})
    pending = ledger.claim(spec(EffectKind.GIT_COMMIT, "pending"))
    assert ledger.purge_committed(older_than=3600) == 0
    assert ledger.purge_committed(older_than=-1) == 1
    assert ledger.get(done) is None
    assert ledger.get(str(pending)) is not None


def test_bad_specs_are_refused_and_change_nothing(ledger: EffectsLedger) -> None:
    for bad in [
        EffectSpec("run{1}", "s", "a", EffectKind.WEBHOOK, HOOK),
        EffectSpec("r", "s", "a", EffectKind.WEBHOOK, ""),
        EffectSpec("r", "s", "a", EffectKind.WEBHOOK, "x\n"),
        EffectSpec("r", "s", "a", EffectKind.WEBHOOK, HOOK, {"x": float("nan")}),
        EffectSpec("r", "s", "a", "rm-rf", HOOK),  # type: ignore[arg-type]
    ]:
        with pytest.raises(InvalidEffectError):
            ledger.claim(bad)
    assert ledger.list_run("r") == []


def test_lease_free_kinds_take_no_lease(ledger: EffectsLedger, redis_client: redis.Redis) -> None:
    effects = SharedEffects(ledger, LeaseClient(redis_client), holder="box-a")
    claim = claimed(effects.claim(spec(EffectKind.GIT_PUSH, "hubsync/run-run-1")))
    assert claim.lease is None
    assert redis_client.dbsize() == 0
    assert isinstance(effects.commit(claim, {"pushed": True}), EffectCommitted)


def test_shared_claim_takes_the_lease_before_the_ledger_row(
    ledger: EffectsLedger, leases: LeaseClient
) -> None:
    effects = SharedEffects(ledger, leases, holder="box-a")
    claim = claimed(effects.claim(spec()))
    assert claim.lease is not None
    record = ledger.get(claim.effect_key)
    assert record is not None
    assert (record.lease_resource, record.fencing_token) == (
        claim.lease.resource,
        claim.lease.token,
    )
    assert leases.show(claim.lease.resource).holder == "box-a"


def test_a_held_lease_refuses_the_claim_and_writes_no_row(
    tmp_path: Path, leases: LeaseClient
) -> None:
    first = SharedEffects(EffectsLedger(tmp_path / "a.db"), leases, holder="box-a")
    second_ledger = EffectsLedger(tmp_path / "b.db")
    second = SharedEffects(second_ledger, leases, holder="box-b")
    claimed(first.claim(spec()))
    result = refused(second.claim(spec()))
    assert result.code is EffectRefusalCode.LEASE_HELD
    assert result.retryable
    assert second_ledger.list_run("run-1") == []


def test_unreachable_redis_refuses_the_claim_as_unavailable(ledger: EffectsLedger) -> None:
    effects = SharedEffects(
        ledger,
        LeaseClient(redis.Redis(port=1, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))),
    )
    assert refused(effects.claim(spec())).code is EffectRefusalCode.LEASE_UNAVAILABLE
    assert refused(SharedEffects(ledger, None).claim(spec())).code == "effect_lease_unavailable"
    assert ledger.list_run("run-1") == []


def test_a_ledger_refusal_gives_the_lease_back(ledger: EffectsLedger, leases: LeaseClient) -> None:
    effects = SharedEffects(ledger, leases, holder="box-a")
    claim = claimed(effects.claim(spec()))
    assert isinstance(effects.commit(claim, {"status": 200}), EffectCommitted)
    again = refused(effects.claim(spec(attempt="a2")))
    assert again.code is EffectRefusalCode.ALREADY_COMMITTED
    assert claim.lease is not None
    info = leases.show(claim.lease.resource)
    assert info.state == "free" and info.fence == 2  # taken for the refused claim, given back


def test_heartbeat_renews_the_lease_then_the_ledger(
    ledger: EffectsLedger, leases: LeaseClient
) -> None:
    effects = SharedEffects(ledger, leases, holder="box-a", lease_ttl_ms=1_000)
    claim = claimed(effects.claim(spec()))
    beat = effects.heartbeat(claim)
    assert beat.ok and beat.lease_deadline_ms is not None  # type: ignore[union-attr]
    assert claim.lease is not None
    assert leases.show(claim.lease.resource).remaining_ms > 500


def test_commit_after_a_takeover_parks_blocked_uncertain_and_nothing_retries(
    tmp_path: Path, leases: LeaseClient, redis_client: redis.Redis
) -> None:
    ledger = EffectsLedger(tmp_path / "a.db")
    effects = SharedEffects(ledger, leases, holder="box-a")
    claim = claimed(effects.claim(spec()))
    assert claim.lease is not None
    expire_lease(redis_client, claim.lease.resource)
    taker = leases.acquire_or_raise(claim.lease.resource, "box-b", 30_000)
    result = refused(effects.commit(claim, {"status": 200}))
    assert result.code is EffectRefusalCode.LEASE_SUPERSEDED
    assert result.attempt_state is AttemptState.BLOCKED_UNCERTAIN
    record = ledger.get(claim.effect_key)
    assert record is not None
    assert record.status is EffectStatus.IN_FLIGHT
    assert record.attempt_state is AttemptState.BLOCKED_UNCERTAIN
    assert taker.lease.token > claim.lease.token
    assert leases.show(claim.lease.resource).holder == "box-b"  # not released by the loser
    assert refused(effects.claim(spec(attempt="a2"))).code in {
        EffectRefusalCode.LEASE_HELD,
        EffectRefusalCode.BLOCKED_UNCERTAIN,
    }
    leases.release_or_raise(taker.lease)
    assert refused(effects.claim(spec(attempt="a3"))).code is EffectRefusalCode.BLOCKED_UNCERTAIN


def test_heartbeat_after_a_takeover_parks_blocked_uncertain(
    ledger: EffectsLedger, leases: LeaseClient, redis_client: redis.Redis
) -> None:
    effects = SharedEffects(ledger, leases, holder="box-a")
    claim = claimed(effects.claim(spec()))
    assert claim.lease is not None
    expire_lease(redis_client, claim.lease.resource)
    result = refused(effects.heartbeat(claim))
    assert result.code is EffectRefusalCode.LEASE_SUPERSEDED
    assert result.attempt_state is AttemptState.BLOCKED_UNCERTAIN


def test_commit_with_redis_unreachable_parks_blocked_uncertain(
    tmp_path: Path, private_redis: RedisServerProcess
) -> None:
    client = redis.Redis.from_url(private_redis.url, socket_timeout=1, socket_connect_timeout=1)
    ledger = EffectsLedger(tmp_path / "a.db")
    effects = SharedEffects(ledger, LeaseClient(client), holder="box-a")
    claim = claimed(effects.claim(spec()))
    private_redis.stop()
    result = refused(effects.commit(claim, {"status": 200}))
    assert result.code is EffectRefusalCode.LEASE_UNAVAILABLE
    assert result.attempt_state is AttemptState.BLOCKED_UNCERTAIN
    record = ledger.get(claim.effect_key)
    assert record is not None and record.status is EffectStatus.IN_FLIGHT
    private_redis.start()
    client.close()


def test_a_stale_token_is_refused_by_the_ledger_fence_even_if_redis_forgot(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    # Redis lost its dataset (no AOF) and tokens restart at 1: the ledger has seen
    # token 2 for this resource, so a claim under a smaller token is refused.
    leases = LeaseClient(redis_client)
    ledger = EffectsLedger(tmp_path / "a.db", stale_after=0)
    effects = SharedEffects(ledger, leases, holder="box-a")
    first = claimed(effects.claim(spec()))
    effects.abandon(first)
    second = claimed(effects.claim(spec(attempt="a2")))
    assert second.lease is not None and second.lease.token == 2
    effects.abandon(second)
    redis_client.flushall()
    third = refused(effects.claim(spec(attempt="a3")))
    assert third.code is EffectRefusalCode.LEASE_SUPERSEDED


def test_the_ledger_fence_refuses_the_same_token_from_another_holder(
    ledger: EffectsLedger,
) -> None:
    # Two holders under one token means the lease hash was rewritten: the first one stays.
    resource = "effect:webhook:abc"
    key = ledger.claim(spec(), lease_resource=resource, token=5, holder="box-a")
    assert isinstance(key, str)
    other = refused(
        ledger.claim(spec(target=HOOK + "&b"), lease_resource=resource, token=5, holder="box-b")
    )
    assert other.code is EffectRefusalCode.LEASE_SUPERSEDED and "not_holder" in other.message
    stolen = refused(ledger.commit(key, "a1", {"ok": True}, token=5, holder="box-b"))
    assert stolen.code is EffectRefusalCode.LEASE_SUPERSEDED
    record = ledger.commit(key, "a1", {"ok": True}, token=5, holder="box-a")
    assert not isinstance(record, EffectRefused) and record.status is EffectStatus.COMMITTED
    with pytest.raises(InvalidEffectError, match="holder"):
        ledger.claim(spec(attempt="a9"), lease_resource=resource, token=6)


def test_a_ledger_of_the_first_version_gains_the_fence_holder_and_keeps_its_fences(
    tmp_path: Path,
) -> None:
    path = tmp_path / "effects.db"
    conn = sqlite3.connect(path)
    conn.executescript(ledger_module.LEDGER_DDL.replace("    holder TEXT,\n", ""))
    conn.execute("INSERT INTO resource_fences VALUES ('effect:webhook:abc', 7, 'then')")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    upgraded = EffectsLedger(path)
    try:
        late = upgraded.claim(spec(), lease_resource="effect:webhook:abc", token=6, holder="b")
        assert refused(late).code is EffectRefusalCode.LEASE_SUPERSEDED
        assert isinstance(
            upgraded.claim(spec(), lease_resource="effect:webhook:abc", token=7, holder="b"), str
        )
    finally:
        upgraded.close()
