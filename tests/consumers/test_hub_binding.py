"""One hub per Redis namespace: ``bind_namespace`` on real Redis, and a second hub's
``hubsync consume`` refused as a real process while the first hub loses nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from consumers.stream.hub_binding import NamespaceOwnedError, bind_namespace, release_namespace
from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import keys
from hubsync.processes import Child, PipelineProcesses
from tests.helpers.consumer_support import EVENTS, count_rows, enroll_on, pending_of, run_consume
from tests.helpers.relay_player import send, sync_event
from tests.helpers.support import wait_until

HUB_A = "hub-00000000000000aa"
HUB_B = "hub-00000000000000bb"


def owner(client: redis.Redis) -> str | None:
    value = client.get(keys.HUB_IDENTITY)
    return None if value is None else value.decode()


def hub_id_of(hub_db: Path) -> str:
    with SqliteHubStore(hub_db) as store:
        hub_id = store.hub_id()
    assert hub_id is not None
    return hub_id


# ----- the bind function -----


def test_a_free_namespace_is_bound_to_the_first_hub_and_kept_by_it(
    redis_client: redis.Redis,
) -> None:
    bind_namespace(redis_client, HUB_A)
    bind_namespace(redis_client, HUB_A)  # the same hub again: fine
    assert owner(redis_client) == HUB_A


def test_a_namespace_bound_to_another_hub_is_refused_and_left_as_it_is(
    redis_client: redis.Redis,
) -> None:
    bind_namespace(redis_client, HUB_A)
    with pytest.raises(NamespaceOwnedError) as refused:
        bind_namespace(redis_client, HUB_B)
    message = str(refused.value)
    assert HUB_A in message and HUB_B in message and "\n" not in message
    assert "point this consumer at that hub's store" in message
    assert owner(redis_client) == HUB_A


def test_a_read_only_check_neither_claims_nor_accepts_another_hub(
    redis_client: redis.Redis,
) -> None:
    bind_namespace(redis_client, HUB_A, claim=False)
    assert owner(redis_client) is None
    redis_client.set(keys.HUB_IDENTITY, HUB_B)
    with pytest.raises(NamespaceOwnedError):
        bind_namespace(redis_client, HUB_A, claim=False)


def test_an_owner_with_control_characters_is_shown_escaped(redis_client: redis.Redis) -> None:
    redis_client.set(keys.HUB_IDENTITY, "evil\x1b[2J\nline")
    with pytest.raises(NamespaceOwnedError) as refused:
        bind_namespace(redis_client, HUB_A)
    assert "\x1b" not in str(refused.value) and "\n" not in str(refused.value)


def test_release_removes_only_the_own_binding(redis_client: redis.Redis) -> None:
    bind_namespace(redis_client, HUB_A)
    assert release_namespace(redis_client, HUB_B) is False
    assert owner(redis_client) == HUB_A
    assert release_namespace(redis_client, HUB_A) is True
    assert owner(redis_client) is None
    assert release_namespace(redis_client, HUB_A) is False


# ----- hubsync consume as real processes -----


@pytest.mark.e2e
def test_a_second_hub_is_refused_and_the_first_hub_loses_nothing(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    first, other = tmp_path / "hub.db", tmp_path / "other.db"
    enroll_on(first)  # 'hub init' and 'enroll' of the runtime whose events are sent below
    started = run_consume(redis_url, first, "--once")  # binds the namespace to the first hub
    assert started.returncode == 0, started.stderr
    first_id = hub_id_of(first)
    assert owner(redis_client) == first_id
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
    assert owner(redis_client) == first_id
    assert redis_client.xlen(EVENTS) == 20 and pending_of(redis_client) == 0

    check = run_consume(redis_url, other, "--name", "x", "--check")
    assert check.returncode == 2 and first_id in check.stderr

    again = run_consume(redis_url, first, "--once", "--json")  # the owner starts as before
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["accepted"] == 20
    assert count_rows(first) == 20


@pytest.mark.e2e
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
    wait_until(lambda: owner(redis_client) is not None, timeout=30, what="the namespace bound")
    hub_id = hub_id_of(hub_db)
    assert owner(redis_client) == hub_id

    redis_client.delete(keys.HUB_IDENTITY)  # what a Redis restart without AOF does
    wait_until(lambda: owner(redis_client) == hub_id, timeout=20, what="the binding made again")
    send(redis_client, sync_event(1))
    wait_until(lambda: count_rows(hub_db) == 1, timeout=20, what="the event stored")

    redis_client.set(keys.HUB_IDENTITY, HUB_B)  # another hub took the namespace meanwhile
    assert worker.wait(timeout=20) == 2
    assert "owned by hub " + HUB_B in worker.log_text()
    assert owner(redis_client) == HUB_B
