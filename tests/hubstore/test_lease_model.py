"""Model-based test: random acquire/renew/release/clock-advance sequences by several holders,
run against the real Lua scripts on a real Redis and compared with a reference model.

Redis TIME cannot be advanced, so a clock advance of D ms moves the stored deadline D ms
into the past (``tests.helpers.lease_support.age_lease``); the functions still compare with the
real TIME. TTLs and advances are multiples of 5 s, so the few milliseconds an example
really takes never move a deadline across "now".
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from hubstore.leases import Lease, LeaseClient, LeaseGranted, LeaseRefused, LeaseReleased
from tests.helpers.lease_support import age_lease

HOLDERS = st.sampled_from(["h0", "h1", "h2"])
TTLS = st.sampled_from([5_000, 10_000, 20_000])
ADVANCES = st.sampled_from([5_000, 10_000, 15_000])
_resources = itertools.count()


@dataclass
class Model:
    """The reference: what the lease on the resource should be."""

    holder: str | None = None
    token: int = 0
    fence: int = 0
    remaining_ms: int = 0

    @property
    def live(self) -> bool:
        return self.holder is not None and self.remaining_ms > 0


class LeaseMachine(RuleBasedStateMachine):
    def __init__(self, client: redis.Redis) -> None:
        super().__init__()
        self.redis = client
        self.leases = LeaseClient(client)
        self.resource = f"model-{next(_resources)}"
        self.model = Model()
        self.known: dict[str, Lease] = {}
        self.issued: list[int] = []

    def _expect_refusal(self, lease: Lease, *, check_expiry: bool) -> str | None:
        """The refusal renew (check_expiry) or release should give, or None if granted."""
        model = self.model
        if model.holder is None:
            return "superseded" if lease.token < model.fence else "missing"
        if lease.token != model.token:
            return "superseded"
        if lease.proof != self.known[model.holder].proof:
            return "held"  # the current token presented without its proof
        if check_expiry and not model.live:
            return "expired"
        return None

    def _record_new_token(self, token: int) -> None:
        assert token not in self.issued, f"token {token} issued twice"
        assert not self.issued or token > self.issued[-1]
        self.issued.append(token)

    @rule(holder=HOLDERS, ttl=TTLS, with_proof=st.booleans())
    def acquire(self, holder: str, ttl: int, with_proof: bool) -> None:
        mine = self.known.get(holder)
        proof = mine.proof if with_proof and mine is not None else None
        result = self.leases.acquire(self.resource, holder, ttl, proof=proof)
        model = self.model
        if model.live:
            own = holder == model.holder and proof is not None and mine is not None
            if own and mine is not None and mine.token == model.token:
                assert isinstance(result, LeaseGranted), result
                assert result.transition == "renewed"
                assert result.lease.token == model.token
                model.remaining_ms = ttl
                self.known[holder] = result.lease
            else:
                assert isinstance(result, LeaseRefused), result
                assert (result.refusal, result.holder, result.token) == (
                    "held",
                    model.holder,
                    model.token,
                )
            return
        assert isinstance(result, LeaseGranted), result
        assert result.transition == ("taken_over" if model.holder else "acquired")
        assert result.lease.token == model.fence + 1
        self._record_new_token(result.lease.token)
        model.holder, model.token, model.fence = holder, result.lease.token, result.lease.token
        model.remaining_ms = ttl
        self.known[holder] = result.lease

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data(), ttl=TTLS)
    def renew(self, data: st.DataObject, ttl: int) -> None:
        holder = data.draw(st.sampled_from(sorted(self.known)))
        lease = self.known[holder]
        expected = self._expect_refusal(lease, check_expiry=True)
        result = self.leases.renew(lease, ttl)
        if expected is None:
            assert isinstance(result, LeaseGranted), result
            assert result.lease.token == lease.token
            self.model.remaining_ms = ttl
            self.known[holder] = result.lease
        else:
            assert isinstance(result, LeaseRefused), result
            assert result.refusal == expected

    @precondition(lambda self: bool(self.known))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        holder = data.draw(st.sampled_from(sorted(self.known)))
        lease = self.known[holder]
        expected = self._expect_refusal(lease, check_expiry=False)
        result = self.leases.release(lease)
        if expected is None:
            assert isinstance(result, LeaseReleased), result
            self.model.holder = None
            self.model.remaining_ms = 0
        else:
            assert isinstance(result, LeaseRefused), result
            assert result.refusal == expected

    @precondition(lambda self: self.model.token > 0)
    @rule(holder=HOLDERS)
    def forged_renew(self, holder: str) -> None:
        """A holder name and the current token without the proof get nothing."""
        forged = Lease(self.resource, holder, self.model.token, "forged-proof", 0, 5_000)
        result = self.leases.renew(forged)
        assert isinstance(result, LeaseRefused), result
        if self.model.holder is None:
            assert result.refusal == "missing"
        else:
            assert result.refusal == "held"

    @rule(by_ms=ADVANCES)
    def advance_clock(self, by_ms: int) -> None:
        age_lease(self.redis, self.resource, by_ms)
        self.model.remaining_ms -= by_ms

    @invariant()
    def at_most_one_live_holder_and_it_is_the_models(self) -> None:
        current = [h for h, lease in self.known.items() if self.leases.check(lease).ok]
        assert len(current) <= 1, current
        expected = [self.model.holder] if self.model.live else []
        assert current == expected

    @invariant()
    def redis_agrees_on_holder_and_fence(self) -> None:
        info = self.leases.show(self.resource)
        assert info.fence == self.model.fence
        assert info.holder == self.model.holder


def test_leases_match_the_reference_model(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        run_state_machine_as_test(
            lambda: LeaseMachine(client),
            settings=settings(
                max_examples=60,
                stateful_step_count=30,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
    finally:
        client.close()
