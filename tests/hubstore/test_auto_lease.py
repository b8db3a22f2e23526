"""AutoRenewingLease on a real private Redis: renewals, loss notice, no renewal after release."""

from __future__ import annotations

import threading

import pytest
import redis

from hubstore.errors import LeaseHeldError, LeaseLostError
from hubstore.leases import AutoRenewingLease, LeaseClient, LeaseRefusal, LeaseState
from hubsync.core import keys
from hubsync.demo.embedded_redis import RedisServerProcess
from tests.helpers.lease_support import expire_lease
from tests.helpers.support import wait_until


@pytest.fixture
def leases(redis_client: redis.Redis) -> LeaseClient:
    return LeaseClient(redis_client)


def test_the_thread_keeps_the_lease_alive_beyond_its_ttl(leases: LeaseClient) -> None:
    with AutoRenewingLease.hold(leases, "r", "box-a", 300) as held:
        wait_until(lambda: held.renewals >= 4, timeout=10, what="four renewals")
        assert leases.show("r").state is LeaseState.LIVE
        assert held.ensure_held().token == 1
        assert held.lost is None
    assert not held.renewing
    assert leases.show("r").state is LeaseState.FREE


def test_a_refused_renewal_marks_lost_and_calls_the_owner_at_once(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    called = threading.Event()
    seen: list[LeaseLostError] = []

    def on_lost(error: LeaseLostError) -> None:
        seen.append(error)
        called.set()

    with AutoRenewingLease.hold(leases, "r", "box-a", 600, on_lost=on_lost) as held:
        expire_lease(redis_client, "r")
        taker = leases.acquire_or_raise("r", "box-b", 60_000)
        assert called.wait(5), "on_lost was not called"
        assert seen[0].refusal == LeaseRefusal.SUPERSEDED.value
        assert held.lost is seen[0]
        with pytest.raises(LeaseLostError):
            held.ensure_held()
        with pytest.raises(LeaseLostError):
            held.fenced_write("value", b"late")
        wait_until(lambda: not held.renewing, timeout=5, what="thread to end")
    assert len(seen) == 1
    assert leases.show("r").holder == "box-b"  # exit did not release the taker's lease
    assert taker.lease.token == 2


def test_ensure_held_catches_a_loss_the_thread_has_not_seen_yet(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    seen: list[LeaseLostError] = []
    with AutoRenewingLease.hold(leases, "r", "box-a", 60_000, on_lost=seen.append) as held:
        expire_lease(redis_client, "r")
        with pytest.raises(LeaseLostError) as info:
            held.ensure_held()
        assert info.value.refusal == "expired"
        assert seen == [info.value]


def test_no_renewal_after_release_and_the_thread_is_joined(
    leases: LeaseClient, redis_client: redis.Redis
) -> None:
    with AutoRenewingLease.hold(leases, "r", "box-a", 200) as held:
        wait_until(lambda: held.renewals >= 1, timeout=5, what="a renewal")
    # The thread was joined before the release, so no renewal can follow it.
    assert not held.renewing
    renewals = held.renewals
    log_length = redis_client.xlen(keys.lease_log("r"))
    events = [e["event"] for e in leases.history("r", count=1000)]
    assert events[-1] == "released"
    assert events.count("renewed") == renewals
    other = leases.acquire_or_raise("r", "box-b", 60_000)
    assert other.lease.token == 2
    assert redis_client.xlen(keys.lease_log("r")) == log_length + 1


def test_unreachable_redis_during_renewal_marks_the_lease_lost(
    private_redis: RedisServerProcess,
) -> None:
    client = redis.Redis.from_url(private_redis.url, socket_timeout=1, socket_connect_timeout=1)
    leases = LeaseClient(client)
    lost = threading.Event()
    held = AutoRenewingLease.hold(leases, "r", "box-a", 300, on_lost=lambda _e: lost.set())
    with held:
        private_redis.stop()
        assert lost.wait(10)
        assert held.lost is not None and held.lost.refusal == "unavailable"
        private_redis.start()
    client.close()


def test_hold_refuses_a_resource_someone_else_holds(leases: LeaseClient) -> None:
    leases.acquire_or_raise("r", "box-b", 60_000)
    with pytest.raises(LeaseHeldError):
        AutoRenewingLease.hold(leases, "r", "box-a", 1_000)
