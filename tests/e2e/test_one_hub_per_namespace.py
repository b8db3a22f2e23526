"""One hub per Redis namespace, with ``hubsync consume`` as real processes: a second hub's
consumer is refused while the first hub loses nothing, and a running consumer binds the
namespace again after its key is lost, and stops once another hub holds it."""

from __future__ import annotations

import json
from pathlib import Path

import redis

from hubsync.core import keys
from hubsync.processes import Child, PipelineProcesses
from tests.helpers.consumer_support import (
    EVENTS,
    count_rows,
    enroll_on,
    hub_id_of,
    namespace_owner,
    pending_of,
    run_consume,
)
from tests.helpers.relay_player import send, sync_event
from tests.helpers.support import wait_until

ANOTHER_HUB = "hub-00000000000000bb"


def test_a_second_hub_is_refused_and_the_first_hub_loses_nothing(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    first, other = tmp_path / "hub.db", tmp_path / "other.db"
    enroll_on(first)  # 'hub init' and 'enroll' of the runtime whose events are sent below
    started = run_consume(redis_url, first, "--once")  # binds the namespace to the first hub
    assert started.returncode == 0, started.stderr
    first_id = hub_id_of(first)
    assert namespace_owner(redis_client) == first_id
    for s in range(1, 21):
        send(redis_client, sync_event(s))

    refused = run_consume(redis_url, other, "--once", "--json")
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert first_id in lines[0] and "owned by hub" in lines[0]
    assert refused.stdout == ""
    assert count_rows(other) == 0
    assert hub_id_of(other) != first_id
    assert namespace_owner(redis_client) == first_id
    assert redis_client.xlen(EVENTS) == 20 and pending_of(redis_client) == 0

    check = run_consume(redis_url, other, "--name", "x", "--check")
    assert check.returncode == 2 and first_id in check.stderr

    again = run_consume(redis_url, first, "--once", "--json")  # the owner starts as before
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["accepted"] == 20
    assert count_rows(first) == 20


def test_a_running_consumer_binds_again_after_the_key_is_lost_and_stops_for_another_hub(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    hub_db = tmp_path / "hub.db"
    enroll_on(hub_db)  # 'hub init' and 'enroll' of the runtime whose event is sent below
    with PipelineProcesses(redis_url, tmp_path / "logs") as pipeline:
        worker = pipeline.consumer("w1", hub_db, "--block-ms", "100")
        binds_again_then_stops_for_another_hub(redis_client, hub_db, worker)


def binds_again_then_stops_for_another_hub(
    redis_client: redis.Redis, hub_db: Path, worker: Child
) -> None:
    wait_until(
        lambda: namespace_owner(redis_client) is not None, timeout=30, what="the namespace bound"
    )
    hub_id = hub_id_of(hub_db)
    assert namespace_owner(redis_client) == hub_id

    redis_client.delete(keys.HUB_IDENTITY)  # what a Redis restart without AOF does
    wait_until(
        lambda: namespace_owner(redis_client) == hub_id, timeout=20, what="the binding made again"
    )
    send(redis_client, sync_event(1))
    wait_until(lambda: count_rows(hub_db) == 1, timeout=20, what="the event stored")

    redis_client.set(keys.HUB_IDENTITY, ANOTHER_HUB)  # another hub took the namespace meanwhile
    assert worker.wait(timeout=20) == 2
    assert "owned by hub " + ANOTHER_HUB in worker.log_text()
    assert namespace_owner(redis_client) == ANOTHER_HUB
