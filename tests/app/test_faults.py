"""The shared fault injector and invariant checker against a real relay and hub consumer.

Every fault kind is injected once on a private redis-server and judged by real ``hubsync
relay --once`` (two runtimes of one hub project) and ``hubsync consume --once`` processes; every check of the drained
pipeline then holds. A record of a fault that never happened, or a planted secret left in
Redis, breaks its check, and the failure names keys and places, never event bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import redis

from hubstore.store import HubStore
from hubsync.core.signing import RuntimeKey
from hubsync.faults.garbage import GARBAGE
from hubsync.faults.inject import FaultInjector
from hubsync.faults.invariants import InvariantBroken, InvariantChecker, expect_all
from hubsync.faults.local import drained, outbox_pending
from hubsync.faults.records import (
    InjectedCrossRuntime,
    InjectedGarbage,
    InjectedLeaseReplay,
    RuntimeUnderTest,
)
from hubsync.faults.secrets import needles
from hubsync.processes import run_hubsync
from tests.helpers.consumer_support import run_consume
from tests.helpers.relay_support import append_many, make_runtime, open_hub_db
from tests.helpers.support import wait_until
from tests.helpers.trust import enrollment_of

HUB_PROJECT = "alpha"


@dataclass
class Pipeline:
    """Two runtimes of one hub project with committed events, a hub store, and the real
    daemons run once each."""

    redis_url: str
    hub_db: Path
    state_dirs: list[Path]
    hub: HubStore
    runtimes: list[RuntimeUnderTest]
    relay_logs: dict[str, str]

    @property
    def runtime(self) -> RuntimeUnderTest:
        """The first runtime."""
        return self.runtimes[0]

    def relay_once(self) -> None:
        for state_dir, runtime in zip(self.state_dirs, self.runtimes, strict=True):
            argv = ["relay", "--state-dir", str(state_dir), "--redis-url", self.redis_url]
            done = run_hubsync([*argv, "--resend-timeout", "1", "--once"])
            assert done.returncode == 0, done.stderr[-2000:]
            self.relay_logs[runtime.runtime_id] += done.stderr

    def consume_once(self) -> None:
        done = run_consume(self.redis_url, self.hub_db, "--once")
        assert done.returncode == 0, done.stderr[-2000:]

    def round_trip(self) -> None:
        """Send, judge, and bring the outcomes home."""
        self.relay_once()
        self.consume_once()
        self.relay_once()

    def drain(self) -> None:
        """Round trips until no outbox row is pending (rows whose entries were deleted are
        resent once their resend timeout is due), then one last read of the hub's."""
        wait_until(
            lambda: outbox_pending(self.runtimes) == 0 or self.round_trip(),
            timeout=60,
            interval=0.5,
            what="every outbox row acked or parked",
        )
        self.consume_once()  # the relays' last presence beats: the streams settle


def runtime_under_test(state_dir: Path, hub_db: Path) -> RuntimeUnderTest:
    """A runtime of ``HUB_PROJECT`` enrolled on ``hub_db``, with 24 committed events."""
    registry, (store,) = make_runtime(state_dir, [HUB_PROJECT], hub_db)
    append_many(store, runs=3, per_run=8)
    enrollment = enrollment_of(registry.runtime_id)
    assert enrollment is not None
    runtime = RuntimeUnderTest(
        registry.runtime_id, store.project_id, HUB_PROJECT, store.path,
        RuntimeKey(enrollment.key),
    )  # fmt: skip
    store.close()
    registry.close()
    return runtime


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[Pipeline]:
    hub_db = tmp_path / "hub.db"
    state_dirs = [tmp_path / name / "state" for name in ("a", "b")]
    runtimes = [runtime_under_test(state_dir, hub_db) for state_dir in state_dirs]
    logs = {r.runtime_id: "" for r in runtimes}
    with open_hub_db(hub_db) as hub:
        yield Pipeline(redis_url, hub_db, state_dirs, hub, runtimes, logs)


def test_every_fault_kind_has_exactly_its_effect_on_a_real_relay_and_consumer(
    pipeline: Pipeline, redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    hub_id = pipeline.hub.hub_id()
    assert hub_id is not None
    injector = FaultInjector(client, pipeline.hub, hub_id, pipeline.runtimes, random.Random(7))
    made_of_entries, made_of_hub_events, made_of_nothing = (
        ("duplicates", "forged_ack", "garbage"),
        ("conflict", "forgery", "cross_runtime"),
        ("lease_replay",),
    )
    assert {*made_of_entries, *made_of_hub_events, *made_of_nothing} == set(FaultInjector.KINDS)
    pipeline.relay_once()
    for kind in (*made_of_entries, *made_of_nothing):  # before the hub consumes (and trims)
        assert injector.inject(kind), f"{kind}: nothing to make it of"
    pipeline.consume_once()
    for kind in made_of_hub_events:
        assert injector.inject(kind), f"{kind}: nothing to make it of"
    injector.forgery("wrong_key" if injector.record.forgeries[0].how == "unsigned" else "unsigned")
    pipeline.drain()
    assert drained(client, pipeline.runtimes)

    done = injector.record
    assert {g.kind for g in done.garbage} == set(GARBAGE)
    assert len(done.conflicts) == 1 and len(done.forgeries) == 2 and done.forged_acks
    assert len(done.cross_runtime) == 1 and len(done.lease_replays) == 1
    checker = InvariantChecker(pipeline.hub, client, pipeline.runtimes, done, pipeline.relay_logs)
    figures = expect_all(checker.standard())
    assert figures["hub_rows"] == figures["outbox_rows"] == 48
    assert figures["cross_runtime_injected"] == 1 and figures["lease_replay_attempts"] >= 9
    # the conflict's alert, the cross-runtime write's, and per claimed runtime one folding
    # the forgeries and the garbage no key signed as it is
    refused = [g.alert for g in done.garbage if g.alert is not None]
    assert len(set(refused)) >= 4
    claimed = {key[0] for key in [*(f.key for f in done.forgeries), *refused]}
    assert figures["alerts"] == 2 + len(claimed) and figures["conflicts_told_to_relays"] == 1
    assert figures["dead_letters"] == len(GARBAGE) + 2
    client.close()


def test_a_fault_that_had_no_effect_or_a_leaked_secret_breaks_its_check_naming_no_bytes(
    pipeline: Pipeline, redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    pipeline.round_trip()
    hub_id = pipeline.hub.hub_id()
    assert hub_id is not None
    injector = FaultInjector(client, pipeline.hub, hub_id, pipeline.runtimes, random.Random(3))
    conflict = injector.conflict()
    assert conflict is not None
    never_written = InjectedGarbage(HUB_PROJECT, "bad_json", "bad_json", "1-1", None)
    injector.record.garbage.append(never_written)
    injector.record.conflicts.append(replace(conflict, forged_hash="0" * 64))
    injector.record.forgeries.append(replace(conflict, forged_hash="1" * 64, how="unsigned"))
    victim = pipeline.runtimes[1].runtime_id
    squat = InjectedCrossRuntime(HUB_PROJECT, "rt-x", victim, ("p", "r", 1), "2" * 64, "1-2")
    injector.record.cross_runtime.append(squat)  # never written: never alerted
    injector.record.lease_replays.append(InjectedLeaseReplay("effect:x", 9, 8, True))
    secret = "sk-faults-" + "9" * 24
    client.set("left-behind", f"token {secret}")
    checker = InvariantChecker(pipeline.hub, client, pipeline.runtimes, injector.record, {})

    broken = [c for c in checker.standard() if not c.held]
    assert {c.name for c in broken} == {
        "every conflicting entry was refused and alerted",  # neither offer was judged yet
        "every forgery was refused unread and alerted",  # one never even written
        "every garbage entry and forgery was dead-lettered with its reason",
        "no relay was told of a forgery",
        "no runtime wrote into another's project",
        "no lease proof read from Redis was accepted",
    }
    leak = checker.no_secret(needles([secret]), [])
    assert leak.failures == ("a planted secret is in Redis key left-behind",)
    with pytest.raises(InvariantBroken) as raised:
        expect_all([*broken, leak])
    message = str(raised.value)
    assert "bad_json entry 1-1 was not dead-lettered as bad_json" in message
    assert str(conflict.key) in message
    assert secret not in message and "forged" not in message  # keys and places, no bytes
    client.close()
