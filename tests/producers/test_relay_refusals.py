"""An events stream that refuses the relay's XADDs sets that hub project aside, never the relay."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import redis

from hubsync.core import keys
from hubsync.core.metrics import RELAY_REGISTRY
from producers.relay import Relay
from tests.helpers.clock import FakeClock
from tests.helpers.hub_double import ack_everything
from tests.helpers.relay_support import (
    append_many,
    make_runtime,
    relay_settings,
    relay_with_events,
)

LAST_ID = "18446744073709551615-18446744073709551615"
"""The largest stream id: after it, no XADD can add anything."""


def refusals(hub_project: str) -> float:
    value = RELAY_REGISTRY.get_sample_value(
        "hubsync_relay_send_failures_total", {"hub_project": hub_project}
    )
    return value or 0.0


def test_an_exhausted_stream_sets_its_project_aside_with_backoff_and_the_others_go_on(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    state_dir = tmp_path / "state"
    registry, (blocked, free) = make_runtime(state_dir, ["alpha", "beta"])
    runtime = registry.runtime_id
    append_many(blocked, runs=1, per_run=5)
    append_many(free, runs=1, per_run=5)
    stream = keys.events_stream("alpha", runtime)
    redis_client.xadd(stream, {"kind": "junk"}, id=LAST_ID)  # as the runtime's own user may
    before = refusals("alpha")
    clock = FakeClock()
    relay = Relay(relay_settings(state_dir, redis_url), registry)
    relay.monotonic = clock

    with caplog.at_level(logging.INFO, logger="producers.relay"):
        summary = relay.run_once()  # no exception: that project's failure alone
        assert relay.run_once().sender.sent == summary.sender.sent  # backing off: not tried
    assert summary.sender.sent == 5  # beta's
    assert redis_client.xlen(keys.events_stream("beta", runtime)) >= 5
    assert blocked.outbox_counts()["pending"] == 5 and blocked.outbox_counts()["attempted"] == 0
    assert refusals("alpha") - before >= 1
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len([line for line in lines if stream in line]) == 1  # said once, however often
    assert all(r.exc_info is None for r in caplog.records)  # never a traceback

    redis_client.delete(stream)  # the operator repairs it
    clock.advance(120)  # past the longest backoff
    with caplog.at_level(logging.INFO, logger="producers.relay"):
        assert relay.run_once().sender.sent == 10
    assert any("takes the relay's entries again" in r.getMessage() for r in caplog.records)
    ack_everything(redis_client, "alpha")
    ack_everything(redis_client, "beta")
    relay.run_once()
    relay.close()
    assert blocked.outbox_counts()["acked"] == 5 and free.outbox_counts()["acked"] == 5


def test_a_stream_of_another_type_is_refused_the_same_way(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    registry, store, relay = relay_with_events(tmp_path / "state", redis_url, runs=1, per_run=3)
    redis_client.set(keys.events_stream("alpha", registry.runtime_id), "not a stream")
    summary = relay.run_once()
    relay.close()
    assert summary.sender.sent == 0 and store.outbox_counts()["pending"] == 3


def test_a_refused_presence_beat_is_counted_each_time_and_logged_once(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    registry, _, relay = relay_with_events(tmp_path / "state", redis_url, runs=1, per_run=1)
    redis_client.set(keys.events_stream("alpha", registry.runtime_id), "not a stream")
    before = refusals("alpha")
    with caplog.at_level(logging.ERROR, logger="producers.relay"):
        relay.run_once()
        relay.run_once()
    relay.close()
    logged = [r for r in caplog.records if "refused a presence beat" in r.getMessage()]
    assert len(logged) == 1
    assert refusals("alpha") - before >= 2  # the beats, and the batches refused beside them
