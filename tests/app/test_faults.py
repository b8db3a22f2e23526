"""The shared fault injector and invariant checker against a real relay and hub consumer.

Every fault kind is injected once on a private redis-server and judged by real ``hubsync
relay --once`` and ``hubsync consume --once`` processes; every check of the drained
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
from hubsync.faults.records import InjectedGarbage, RuntimeUnderTest
from hubsync.faults.secrets import needles
from hubsync.processes import run_hubsync
from tests.helpers.consumer_support import run_consume
from tests.helpers.relay_support import append_many, make_runtime, open_hub_db
from tests.helpers.support import wait_until
from tests.helpers.trust import enrollment_of

HUB_PROJECT = "alpha"


@dataclass
class Pipeline:
    """One runtime with committed events, a hub store, and the real daemons run once."""

    redis_url: str
    hub_db: Path
    state_dir: Path
    hub: HubStore
    runtime: RuntimeUnderTest
    relay_log: str = ""

    def relay_once(self) -> None:
        argv = ["relay", "--state-dir", str(self.state_dir), "--redis-url", self.redis_url]
        done = run_hubsync([*argv, "--resend-timeout", "1", "--once"])
        assert done.returncode == 0, done.stderr[-2000:]
        self.relay_log += done.stderr

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
            lambda: outbox_pending([self.runtime]) == 0 or self.round_trip(),
            timeout=60,
            interval=0.5,
            what="every outbox row acked or parked",
        )
        self.consume_once()  # the relay's last presence beat: the streams settle


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[Pipeline]:
    hub_db, state_dir = tmp_path / "hub.db", tmp_path / "state"
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
    with open_hub_db(hub_db) as hub:
        yield Pipeline(redis_url, hub_db, state_dir, hub, runtime)


def test_every_fault_kind_has_exactly_its_effect_on_a_real_relay_and_consumer(
    pipeline: Pipeline, redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    hub_id = pipeline.hub.hub_id()
    assert hub_id is not None
    injector = FaultInjector(client, pipeline.hub, hub_id, [pipeline.runtime], random.Random(7))
    made_of_entries, made_of_hub_events = (
        ("duplicates", "forged_ack", "garbage"),
        ("conflict", "forgery"),
    )
    assert {*made_of_entries, *made_of_hub_events} == set(FaultInjector.KINDS)
    pipeline.relay_once()
    for kind in made_of_entries:  # before the hub consumes (and trims) them
        assert injector.inject(kind), f"{kind}: nothing to make it of"
    pipeline.consume_once()
    for kind in made_of_hub_events:
        assert injector.inject(kind), f"{kind}: nothing to make it of"
    injector.forgery("wrong_key" if injector.record.forgeries[0].how == "unsigned" else "unsigned")
    pipeline.drain()
    assert drained(client, [pipeline.runtime])

    done = injector.record
    assert {g.kind for g in done.garbage} == set(GARBAGE)
    assert len(done.conflicts) == 1 and len(done.forgeries) == 2 and done.forged_acks
    checker = InvariantChecker(
        pipeline.hub,
        client,
        [pipeline.runtime],
        done,
        {pipeline.runtime.runtime_id: pipeline.relay_log},
    )
    figures = expect_all(checker.standard())
    assert figures["hub_rows"] == figures["outbox_rows"] == 24
    # the conflict's alert, and one folding both forgeries and the garbage no key signed as
    # it is (one hub project, one claimed runtime)
    assert len({g.alert for g in done.garbage if g.alert is not None}) >= 4
    assert figures["alerts"] == 2 and figures["conflicts_told_to_relays"] == 1
    assert figures["dead_letters"] == len(GARBAGE) + 2
    client.close()


def test_a_fault_that_had_no_effect_or_a_leaked_secret_breaks_its_check_naming_no_bytes(
    pipeline: Pipeline, redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    pipeline.round_trip()
    hub_id = pipeline.hub.hub_id()
    assert hub_id is not None
    injector = FaultInjector(client, pipeline.hub, hub_id, [pipeline.runtime], random.Random(3))
    conflict = injector.conflict()
    assert conflict is not None
    never_written = InjectedGarbage(HUB_PROJECT, "bad_json", "bad_json", "1-1", None)
    injector.record.garbage.append(never_written)
    injector.record.conflicts.append(replace(conflict, forged_hash="0" * 64))
    injector.record.forgeries.append(replace(conflict, forged_hash="1" * 64, how="unsigned"))
    secret = "sk-faults-" + "9" * 24
    client.set("left-behind", f"token {secret}")
    checker = InvariantChecker(pipeline.hub, client, [pipeline.runtime], injector.record, {})

    broken = [c for c in checker.standard() if not c.held]
    assert {c.name for c in broken} == {
        "every conflicting entry was refused and alerted",  # neither offer was judged yet
        "every forgery was refused unread and alerted",  # one never even written
        "every garbage entry and forgery was dead-lettered with its reason",
        "no relay was told of a forgery",
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
