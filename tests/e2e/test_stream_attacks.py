"""What an enrolled runtime's own Redis user can do to its stream harms only its own delivery.

Two runtimes, rt-a and rt-b, sync to one hub project; every process runs as
the user ``hubsync acl`` prints for its role, in a private ACL-enabled
redis-server. rt-a's user exhausts its stream's ids and trims it with MAXLEN,
and is refused everything that would touch rt-b's entries or acks; rt-b's
events all reach the hub and are acked, rt-a's relay and the consumer go on
without a traceback. Then an operator's mistakes (keys of the wrong type, an
ack stream at the largest id) stop no consumer, running or restarted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from hubstore import hub_url_from_path, open_store
from hubsync.core import keys
from hubsync.processes import PipelineProcesses, hubsync_command, run_hubsync
from tests.helpers import acl_support as acl
from tests.helpers.acl_support import acl_redis  # noqa: F401  (a fixture)
from tests.helpers.relay_support import append_many

LAST_ID = "18446744073709551615-18446744073709551615"
"""The largest stream id: once a stream's last entry has it, no XADD can add another."""


class Runtime(acl.EnrolledRuntime):
    """One runtime, connecting as its own Redis user."""

    def relay_once(self) -> tuple[dict[str, Any], str]:
        """``hubsync relay --once`` as this runtime's user: its summary and its stderr."""
        done = run_hubsync(
            ["relay", "--state-dir", str(self.registry.state_dir), "--once", "--json",
             "--resend-timeout", "0.01"],
            env={"HUBSYNC_REDIS_URL": self.url},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout), done.stderr


@dataclass
class Site:
    server_url: str
    admin: redis.Redis
    hub_db: Path
    rt_a: Runtime
    rt_b: Runtime
    consumer_url: str

    def consume_once(self) -> dict[str, Any]:
        done = run_hubsync(
            ["consume", "--hub-db", str(self.hub_db), "--once", "--json", "--name", "hub-1"],
            env={"HUBSYNC_REDIS_URL": self.consumer_url},
        )
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        return dict(json.loads(done.stdout))

    def hub_events(self) -> int:
        with open_store(hub_url_from_path(self.hub_db), create_schema=False) as hub:
            return hub.count_events()


@pytest.fixture
def site(tmp_path: Path, acl_redis: tuple[str, redis.Redis]) -> Iterator[Site]:  # noqa: F811
    server_url, admin = acl_redis
    hub_db = tmp_path / "hub.db"
    with acl.two_runtime_users(Runtime, server_url, admin, tmp_path, hub_db) as (rt_a, rt_b, url):
        yield Site(server_url, admin, hub_db, rt_a, rt_b, url)


def refused(call: Any) -> bool:
    with pytest.raises(redis.exceptions.NoPermissionError):
        call()
    return True


def test_rt_a_exhausting_and_trimming_its_stream_harms_only_its_own_delivery(site: Site) -> None:
    rt_a, rt_b = site.rt_a, site.rt_b
    append_many(rt_b.store, runs=2, per_run=10)
    append_many(rt_a.store, runs=1, per_run=5)
    assert rt_b.relay_once()[0]["sent"] == 20
    assert site.consume_once()["accepted"] == 20

    attacker = redis.Redis.from_url(rt_a.url)
    # rt-b's entries and acks are out of its reach, and so is every stream they share
    assert refused(lambda: attacker.xadd(rt_b.events, {"kind": "junk"}, maxlen=1))
    assert refused(lambda: attacker.xadd(rt_b.events, {"kind": "junk"}, id=LAST_ID))
    assert refused(lambda: attacker.xtrim(rt_b.events, maxlen=0))
    assert refused(lambda: attacker.xadd(keys.shared_events_stream(acl.HUB_PROJECT), {"k": "v"}))
    assert refused(lambda: attacker.execute_command("XSETID", rt_a.events, LAST_ID))
    assert refused(lambda: attacker.sadd(keys.PROJECTS, "squat"))
    acks_b = keys.acks_stream(acl.HUB_PROJECT, rt_b.runtime_id)
    assert refused(lambda: attacker.xtrim(acks_b, maxlen=0))
    # what it can do, it does to its own stream
    attacker.xadd(rt_a.events, {"kind": "junk"}, maxlen=1, approximate=False)
    attacker.xadd(rt_a.events, {"kind": "junk"}, id=LAST_ID)
    attacker.close()

    summary, stderr = rt_a.relay_once()  # its own relay: one line, no traceback, rows pending
    assert summary["sent"] == 0 and summary["pending"] == 5
    assert stderr.count("refused the relay's entries") == 1

    append_many(rt_b.store, runs=1, per_run=10)  # rt-b goes on after the attack
    assert rt_b.relay_once()[0]["sent"] == 10
    assert site.consume_once()["accepted"] == 10
    rt_b.relay_once()
    assert rt_b.store.outbox_counts()["acked"] == 30
    assert site.hub_events() == 30  # every one of rt-b's, none of rt-a's
    assert rt_a.store.outbox_counts()["pending"] == 5


def test_keys_of_the_wrong_type_and_an_exhausted_ack_stream_stop_no_consumer(
    site: Site, tmp_path: Path
) -> None:
    rt_a, rt_b = site.rt_a, site.rt_b
    admin = site.admin
    admin.set(keys.PROJECTS, "not a set")
    admin.set(rt_a.events, "not a stream")
    admin.xadd(keys.acks_stream(acl.HUB_PROJECT, rt_b.runtime_id), {"x": "1"}, id=LAST_ID)
    append_many(rt_b.store, runs=1, per_run=10)
    rt_b.relay_once()

    fast = ("--block-ms", "100", "--reclaim-interval", "0.2", "--name", "hub-1")
    consume = hubsync_command("consume", "--hub-db", str(site.hub_db), *fast)
    env = {"HUBSYNC_REDIS_URL": site.consumer_url}
    with PipelineProcesses(rt_b.url, tmp_path / "logs") as pipeline:
        pipeline.start("consumer", consume, env=env)
        pipeline.wait_until(lambda: site.hub_events() == 10, timeout=60, what="rt-b's events")
        alerts_key = keys.alerts_stream(acl.HUB_PROJECT)
        pipeline.wait_until(lambda: admin.xlen(alerts_key) >= 2, timeout=30, what="the alerts")
        assert pipeline.stop_all() == {"consumer": 0}
        reasons = {fields[b"reason"] for _, fields in admin.xrange(alerts_key)}
        assert reasons == {b"stream_unreadable", b"acks_unwritable"}

        append_many(rt_b.store, runs=1, per_run=5)
        rt_b.relay_once()
        pipeline.start("consumer-again", consume, env=env)  # restarted: no crash loop
        pipeline.wait_until(lambda: site.hub_events() == 15, timeout=60, what="the new events")
        assert pipeline.stop_all()["consumer-again"] == 0
    # rt-b's outcomes never reached it (its ack stream is full): its rows are sent again,
    # answered ``duplicate`` and still stored once
    assert site.hub_events() == 15
