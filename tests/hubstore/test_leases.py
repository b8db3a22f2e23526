"""LeaseClient against a real private redis-server: the lease semantics of docs/contract.md."""

from __future__ import annotations

import dataclasses
import hashlib
import signal
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from hubstore.errors import (
    InvalidLeaseArgumentError,
    LeaseExpiredError,
    LeaseHeldError,
    LeaseMissingError,
    LeaseNotReplicatedError,
    LeaseStateCorruptError,
    LeaseSupersededError,
    LeaseUnavailableError,
)
from hubstore.leases import (
    Lease,
    LeaseClient,
    LeaseGranted,
    LeaseRefusal,
    LeaseRefused,
    LeaseState,
    LeaseTransition,
)
from hubstore.leases.client import refusal_error
from hubstore.redis_setup import prepare_redis
from hubsync.core import keys
from hubsync.demo.embedded_redis import RedisServerProcess
from tests.helpers.lease_support import expire_lease
from tests.helpers.support import wait_until

TTL = 30_000


@pytest.fixture
def leases(redis_client: redis.Redis) -> LeaseClient:
    return LeaseClient(redis_client)


def granted(result: object) -> Lease:
    assert isinstance(result, LeaseGranted), result
    return result.lease


def refused(result: object) -> LeaseRefused:
    assert isinstance(result, LeaseRefused), result
    return result


def test_acquire_on_a_free_resource_issues_token_one(leases: LeaseClient) -> None:
    result = leases.acquire("repo/main", "box-a", TTL)
    assert isinstance(result, LeaseGranted)
    assert result.transition is LeaseTransition.ACQUIRED
    assert result.lease.token == 1
    assert 0 < result.remaining_ms <= TTL


def test_another_holder_is_refused_held_while_the_lease_is_live(leases: LeaseClient) -> None:
    first = granted(leases.acquire("r", "box-a", TTL))
    result = refused(leases.acquire("r", "box-b", TTL))
    assert result.refusal is LeaseRefusal.HELD
    assert result.holder == "box-a"
    assert result.token == first.token
    with pytest.raises(LeaseHeldError) as info:
        leases.acquire_or_raise("r", "box-b", TTL)
    assert info.value.refusal == "held"


def test_the_holders_name_without_its_proof_is_refused_held(leases: LeaseClient) -> None:
    granted(leases.acquire("r", "box-a", TTL))
    assert refused(leases.acquire("r", "box-a", TTL)).refusal is LeaseRefusal.HELD
    wrong = granted(leases.acquire("other", "box-a", TTL))
    assert refused(leases.acquire("r", "box-a", TTL, proof=wrong.proof)).refusal == "held"


def test_own_live_lease_reacquired_with_proof_is_renewed_under_the_same_token(
    leases: LeaseClient,
) -> None:
    first = granted(leases.acquire("r", "box-a", TTL))
    again = leases.acquire("r", "box-a", 60_000, proof=first.proof)
    assert isinstance(again, LeaseGranted)
    assert again.transition is LeaseTransition.RENEWED
    assert again.lease.token == first.token
    assert again.lease.proof == first.proof
    assert again.lease.deadline_ms > first.deadline_ms


def test_expired_lease_is_taken_over_with_a_larger_token(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    first = granted(leases.acquire("r", "box-a", TTL))
    expire_lease(redis_client, "r")
    taken = leases.acquire("r", "box-b", TTL)
    assert isinstance(taken, LeaseGranted)
    assert taken.transition is LeaseTransition.TAKEN_OVER
    assert taken.lease.token == first.token + 1


def test_own_expired_lease_is_never_resurrected_acquire_issues_a_new_token(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    first = granted(leases.acquire("r", "box-a", TTL))
    expire_lease(redis_client, "r")
    assert refused(leases.renew(first)).refusal is LeaseRefusal.EXPIRED
    with pytest.raises(LeaseExpiredError):
        leases.renew_or_raise(first)
    again = granted(leases.acquire("r", "box-a", TTL, proof=first.proof))
    assert again.token == first.token + 1
    assert again.proof != first.proof


def test_renew_keeps_the_token_and_moves_the_deadline(leases: LeaseClient) -> None:
    first = granted(leases.acquire("r", "box-a", 1_000))
    renewed = granted(leases.renew(first, 60_000))
    assert renewed.token == first.token
    assert renewed.deadline_ms > first.deadline_ms
    assert leases.show("r").remaining_ms > 30_000


def test_renew_refusals_missing_superseded_held(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    first = granted(leases.acquire("r", "box-a", TTL))
    forged = Lease("r", "box-a", first.token, "not-the-proof", 0, TTL)
    assert refused(leases.renew(forged)).refusal is LeaseRefusal.HELD
    assert refused(leases.renew(Lease("r", "box-z", 1, first.proof, 0, TTL))).refusal == "held"
    expire_lease(redis_client, "r")
    second = granted(leases.acquire("r", "box-b", TTL))
    assert refused(leases.renew(first)).refusal is LeaseRefusal.SUPERSEDED
    with pytest.raises(LeaseSupersededError):
        leases.renew_or_raise(first)
    assert granted(leases.renew(second)).token == second.token
    leases.release_or_raise(second)
    assert refused(leases.renew(second)).refusal is LeaseRefusal.MISSING
    assert refused(leases.renew(first)).refusal is LeaseRefusal.SUPERSEDED
    with pytest.raises(LeaseMissingError):
        leases.renew_or_raise(Lease("never", "box-a", 1, first.proof, 0, TTL))


def test_release_keeps_the_fence_so_the_next_token_is_larger(leases: LeaseClient) -> None:
    tokens = []
    for holder in ["a", "b", "a", "c"]:
        lease = granted(leases.acquire("r", holder, TTL))
        tokens.append(lease.token)
        leases.release_or_raise(lease)
    assert tokens == [1, 2, 3, 4]
    info = leases.show("r")
    assert info.state is LeaseState.FREE
    assert info.fence == 4


def test_release_needs_the_current_token_and_the_proof(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    first = granted(leases.acquire("r", "box-a", TTL))
    assert refused(leases.release(Lease("r", "box-a", 1, "wrong-proof"))).refusal == "held"
    expire_lease(redis_client, "r")
    second = granted(leases.acquire("r", "box-b", TTL))
    assert refused(leases.release(first)).refusal is LeaseRefusal.SUPERSEDED
    assert leases.show("r").holder == "box-b"
    assert leases.release(second).ok


def test_check_confirms_only_the_current_live_lease(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    first = granted(leases.acquire("r", "box-a", TTL))
    assert leases.check(first).ok
    assert refused(leases.check(Lease("r", "box-a", 1, "x"))).refusal is LeaseRefusal.HELD
    expire_lease(redis_client, "r")
    assert refused(leases.check(first)).refusal is LeaseRefusal.EXPIRED


@pytest.mark.parametrize("garbage", [b"", b"soon", b"inf", b"-5", b"1e99", b"12.5"])
def test_a_deadline_redis_cannot_read_counts_as_expired(
    leases: LeaseClient, redis_client: redis.Redis, garbage: bytes
) -> None:
    first = granted(leases.acquire("r", "box-a", TTL))
    redis_client.hset(keys.lease("r"), "deadline_ms", garbage)
    assert leases.show("r").state is LeaseState.EXPIRED
    assert refused(leases.renew(first)).refusal is LeaseRefusal.EXPIRED
    taken = granted(leases.acquire("r", "box-b", TTL))
    assert taken.token == 2


def test_missing_deadline_counts_as_expired(leases: LeaseClient, redis_client: redis.Redis) -> None:
    granted(leases.acquire("r", "box-a", TTL))
    redis_client.hdel(keys.lease("r"), "deadline_ms")
    assert granted(leases.acquire("r", "box-b", TTL)).token == 2


def test_an_unreadable_counter_refuses_rather_than_risk_a_repeated_token(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    lease = granted(leases.acquire("r", "box-a", TTL))
    leases.release_or_raise(lease)
    redis_client.set(keys.lease_counter("r"), "garbage")
    with pytest.raises(LeaseStateCorruptError, match="unreadable token counter"):
        leases.acquire("r", "box-b", TTL)


def test_rewriting_or_deleting_the_lease_hash_never_lowers_the_next_token(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    first = granted(leases.acquire("r", "box-a", TTL))
    redis_client.delete(keys.lease("r"))
    assert granted(leases.acquire("r", "box-b", TTL)).token == first.token + 1
    redis_client.hset(keys.lease("r"), mapping={"token": 1, "fence": 1, "deadline_ms": 1})
    assert granted(leases.acquire("r", "box-c", TTL)).token == first.token + 2


def test_a_fence_of_an_older_hubsync_refuses_until_hub_migrate_moves_it(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    redis_client.hset(keys.lease("old"), mapping={"fence": 41, "released_ms": 1})
    with pytest.raises(LeaseStateCorruptError, match="hubsync hub migrate"):
        leases.acquire("old", "box-a", TTL)
    assert leases.show("old").fence == 41
    assert prepare_redis(redis_client).fences_moved == 1
    assert granted(leases.acquire("old", "box-a", TTL)).token == 42
    assert prepare_redis(redis_client).fences_moved == 0  # nothing left to move


def test_redis_keeps_only_the_sha1_of_the_proof_computed_from_the_secret(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    lease = granted(leases.acquire("r", "box-a", TTL))
    stored = redis_client.hgetall(keys.lease("r"))
    assert stored[b"proof"] == hashlib.sha1(lease.proof.encode()).hexdigest().encode()
    everything = b"".join(
        b"".join(k + v for k, v in redis_client.hgetall(key).items())
        if redis_client.type(key) == b"hash"
        else repr(redis_client.xrange(key)).encode()
        if redis_client.type(key) == b"stream"
        else redis_client.get(key) or b""
        for key in redis_client.keys("*")
    )
    assert lease.proof.encode() not in everything
    assert lease.proof not in repr(lease)


def test_every_transition_lands_in_the_capped_audit_stream(
    redis_client: redis.Redis,
) -> None:
    leases = LeaseClient(redis_client, log_maxlen=10)
    lease = granted(leases.acquire("r", "box-a", TTL))
    lease = granted(leases.renew(lease))
    leases.release_or_raise(lease)
    first = granted(leases.acquire("r", "box-b", TTL))
    expire_lease(redis_client, "r")
    granted(leases.acquire("r", "box-c", TTL))
    refused(leases.renew(first))  # refusals are not transitions
    events = [(e["event"], e["holder"], e["token"]) for e in leases.history("r")]
    assert events == [
        ("acquired", "box-a", "1"),
        ("renewed", "box-a", "1"),
        ("released", "box-a", "1"),
        ("acquired", "box-b", "2"),
        ("taken_over", "box-c", "3"),
    ]
    assert leases.history("r")[-1]["previous_holder"] == "box-b"
    for _ in range(300):
        lease = granted(leases.renew(granted(leases.acquire("cap", "h", TTL))))
        leases.release_or_raise(lease)
    # MAXLEN ~ trims by whole macro-nodes: the stream stays near the cap, far below 900.
    assert redis_client.xlen(keys.lease_log("cap")) < 300


def test_show_and_list_read_every_lease_without_the_proof(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    alpha = granted(leases.acquire("alpha", "box-a", TTL))
    beta = granted(leases.acquire("beta", "box-b", TTL))
    leases.release_or_raise(beta)
    granted(leases.acquire("gamma", "box-c", TTL))
    expire_lease(redis_client, "gamma")
    assert leases.fenced_write(alpha, "value", b"x").ok
    listed = leases.list()
    assert [(i.resource, i.state) for i in listed] == [
        ("alpha", LeaseState.LIVE),
        ("beta", LeaseState.FREE),
        ("gamma", LeaseState.EXPIRED),
    ]
    assert listed[1].fence == 1
    assert "proof" not in listed[0].as_dict()
    assert leases.show("nothing-here").state is LeaseState.FREE
    assert leases.show("nothing-here").fence == 0


@pytest.mark.parametrize(
    ("resource", "holder", "ttl_ms"),
    [
        ("", "h", TTL),
        ("a{b}", "h", TTL),
        ("x" * 129, "h", TTL),
        ("r", "", TTL),
        ("r", "h\x00", TTL),
        ("r", "h\n", TTL),
        ("r", "{h}", TTL),
        ("r", "h" * 129, TTL),
        ("r", "h", 0),
        ("r", "h", 49),
        ("r", "h", 86_400_001),
        ("r", "h", True),
    ],
)
def test_bad_arguments_are_refused_before_reaching_redis(
    leases: LeaseClient, redis_client: redis.Redis, resource: str, holder: str, ttl_ms: int
) -> None:
    with pytest.raises(InvalidLeaseArgumentError):
        leases.acquire(resource, holder, ttl_ms)
    assert redis_client.dbsize() == 0


def test_bad_proof_is_refused_without_echoing_it(leases: LeaseClient) -> None:
    with pytest.raises(InvalidLeaseArgumentError) as info:
        leases.renew(Lease("r", "h", 1, "secret value with spaces"))
    assert "secret value" not in str(info.value)


def test_scripts_reload_after_script_flush(leases: LeaseClient, redis_client: redis.Redis) -> None:
    first = granted(leases.acquire("r", "box-a", TTL))
    redis_client.script_flush()
    assert granted(leases.renew(first)).token == first.token
    redis_client.script_flush()
    leases.release_or_raise(first)
    redis_client.script_flush()
    second = granted(leases.acquire("r", "box-b", TTL))
    assert second.token == 2
    redis_client.script_flush()
    assert leases.fenced_write(second, "v", b"ok").ok


def test_leases_and_fences_survive_a_redis_restart_with_aof(
    private_redis: RedisServerProcess,
) -> None:
    client = redis.Redis.from_url(private_redis.url)
    leases = LeaseClient(client)
    live = granted(leases.acquire("live", "box-a", 120_000))
    released = granted(leases.acquire("gone", "box-a", 120_000))
    leases.release_or_raise(released)
    assert leases.fenced_write(live, "v", b"one").ok
    client.config_set("appendfsync", "always")
    private_redis.restart()
    client = redis.Redis.from_url(private_redis.url)
    leases = LeaseClient(client)
    assert leases.check(live).ok
    assert granted(leases.renew(live)).token == live.token
    assert refused(leases.acquire("live", "box-b", TTL)).refusal is LeaseRefusal.HELD
    assert granted(leases.acquire("gone", "box-b", TTL)).token == released.token + 1
    assert leases.read_fenced("live", "v") == (b"one", live.token)
    ahead = dataclasses.replace(live, token=live.token + 1)
    assert leases.fenced_write(ahead, "v", b"x").status == "unknown_token"
    client.close()


def test_unreachable_redis_raises_lease_unavailable() -> None:
    client = redis.Redis(
        port=1, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )  # nothing listens on port 1
    leases = LeaseClient(client)
    with pytest.raises(LeaseUnavailableError, match="Redis did not answer about lease 'r'"):
        leases.acquire("r", "box-a", TTL)


def test_a_fence_at_2_53_minus_1_grants_no_further_token(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    last = 2**53 - 1
    redis_client.set(keys.lease_counter("edge"), last - 1)
    assert granted(leases.acquire("edge", "box-a", TTL)).token == last
    redis_client.hset(keys.lease("edge"), "deadline_ms", 1)  # box-a's lease expires
    for holder in ("box-b", "box-c"):  # before: both were handed 2^53
        with pytest.raises(LeaseStateCorruptError, match=f"{last}.*no larger token"):
            leases.acquire("edge", holder, TTL)
    assert int(redis_client.hget(keys.lease("edge"), "token") or 0) == last


@pytest.mark.parametrize("fence", ["100000000000000000000", "9007199254740992", "1e20"])
def test_an_oversized_counter_is_refused_as_corrupt_not_wrapped_to_a_negative_token(
    leases: LeaseClient, redis_client: redis.Redis, fence: str
) -> None:
    redis_client.set(keys.lease_counter("huge"), fence)
    with pytest.raises(LeaseStateCorruptError, match="unreadable token counter"):
        leases.acquire("huge", "box-a", TTL)
    assert redis_client.hget(keys.lease("huge"), "token") is None


def test_a_single_server_with_a_replica_waits_for_it_and_refuses_what_it_did_not_confirm(
    private_redis: RedisServerProcess, tmp_path: Path
) -> None:
    replica_dir = tmp_path / "replica"
    replica_dir.mkdir()
    replica = RedisServerProcess(
        directory=replica_dir, extra_args=("--replicaof", "127.0.0.1", str(private_redis.port))
    ).start()
    master = redis.Redis.from_url(private_redis.url)
    try:
        wait_until(
            lambda: master.info("replication").get("slave0", {}).get("state") == "online",
            what="the replica in sync",
        )
        # A grant the replica can confirm gets all the time a loaded machine may need (WAIT
        # returns as soon as it has); one it cannot (stopped) is refused after 200 ms.
        patient = LeaseClient(master, replica_wait_ms=10_000)
        leases = LeaseClient(master, replica_wait_ms=200)
        granted = patient.acquire_or_raise("repo/a", "box-a", ttl_ms=30_000)  # confirmed
        assert granted.lease.token == 1
        assert replica.process is not None
        replica.process.send_signal(signal.SIGSTOP)
        try:
            refused = leases.renew(granted.lease)
            taken = leases.acquire("repo/b", "box-b", ttl_ms=5_000)
        finally:
            replica.process.send_signal(signal.SIGCONT)
        assert isinstance(refused, LeaseRefused) and isinstance(taken, LeaseRefused)
        assert refused.refusal is taken.refusal is LeaseRefusal.NOT_REPLICATED
        assert isinstance(refusal_error(taken), LeaseNotReplicatedError)
        assert leases.show("repo/b").state is LeaseState.FREE, "the unconfirmed grant went back"
        again = patient.acquire_or_raise("repo/b", "box-b", ttl_ms=30_000)
        assert again.lease.token == 2
    finally:
        master.close()
        replica.close()
