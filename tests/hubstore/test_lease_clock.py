"""Deadlines follow Redis TIME, never the client's clock: a skewed client gets the same results."""

from __future__ import annotations

import time

import pytest
import redis

from hubstore.leases import LeaseClient, LeaseGranted, LeaseRefused
from hubsync.core import clock
from hubsync.core.redis_values import redis_now_ms
from tests.helpers.lease_support import age_lease


def _scenario(client: redis.Redis, resource: str) -> list[object]:
    """acquire, a rival refused, renew, time passes, the rival takes over, the old one refused."""
    leases = LeaseClient(client)
    outcomes: list[object] = []
    first = leases.acquire(resource, "box-a", 10_000)
    assert isinstance(first, LeaseGranted)
    # The deadline is Redis's now + TTL, within the few ms of this call.
    assert abs(first.lease.deadline_ms - (redis_now_ms(client) + 10_000)) < 1_000
    outcomes.append((first.transition, first.lease.token))
    rival = leases.acquire(resource, "box-b", 10_000)
    assert isinstance(rival, LeaseRefused)
    outcomes.append(rival.refusal)
    renewed = leases.renew(first.lease)
    assert isinstance(renewed, LeaseGranted)
    outcomes.append((renewed.transition, renewed.lease.token))
    age_lease(client, resource, 9_000)
    outcomes.append(leases.acquire(resource, "box-b", 10_000).ok)
    age_lease(client, resource, 2_000)
    taken = leases.acquire(resource, "box-b", 10_000)
    assert isinstance(taken, LeaseGranted)
    outcomes.append((taken.transition, taken.lease.token))
    late = leases.renew(renewed.lease)
    assert isinstance(late, LeaseRefused)
    outcomes.append(late.refusal)
    return outcomes


@pytest.mark.parametrize("skew_s", [-7_200.0, 86_400.0 * 365])
def test_a_client_with_a_skewed_clock_gets_the_same_results(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, skew_s: float
) -> None:
    honest = _scenario(redis_client, "honest")
    real_time, real_time_ns = time.time, time.time_ns
    monkeypatch.setattr(time, "time", lambda: real_time() + skew_s)
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + int(skew_s * 1e9))
    monkeypatch.setattr(
        clock, "utc_now", lambda: clock.datetime.fromtimestamp(time.time(), clock.UTC)
    )
    assert abs(time.time() - real_time()) > 3_000  # the skew is really in effect
    skewed = _scenario(redis_client, "skewed")
    assert skewed == honest
