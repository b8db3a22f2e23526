"""``hubsync consumers list|remove`` on a real Redis: a gone consumer's pending entries are
handed to a live one, which stores them; a running consumer is not removed without --force;
no entry is ever dropped from the pending list."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from consumers.stream.consumer_admin import ConsumerAdminError, list_consumers, remove_consumer
from consumers.stream.health import write_health
from hubsync.core import keys
from tests.helpers.operator_support import LivePipeline, run_cli
from tests.helpers.relay_player import RUNTIME, send, sync_event

ACME, BETA = keys.events_stream("acme", RUNTIME), keys.events_stream("beta", RUNTIME)


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[LivePipeline]:
    with LivePipeline(tmp_path, redis_url) as live:
        yield live


def read_as(client: redis.Redis, consumer: str, stream: str, count: int) -> None:
    client.xreadgroup(keys.CONSUMER_GROUP, consumer, {stream: ">"}, count=count)


@pytest.fixture
def two_streams(redis_client: redis.Redis) -> redis.Redis:
    """Two hub projects' streams: 'ghost' (no health key) holds 3 + 1 entries, 'live'
    (health key fresh) 1, 'idle' nothing."""
    for project in ("acme", "beta"):
        redis_client.sadd(keys.PROJECTS, project)
        for s in range(1, 6):
            send(redis_client, sync_event(s, hub_project=project))
        redis_client.xgroup_create(
            keys.events_stream(project, RUNTIME), keys.CONSUMER_GROUP, id="0"
        )
    read_as(redis_client, "ghost", ACME, 3)
    read_as(redis_client, "ghost", BETA, 1)
    read_as(redis_client, "live", ACME, 1)
    redis_client.xgroup_createconsumer(BETA, keys.CONSUMER_GROUP, "idle")
    write_health(redis_client, "live", 60, {})
    return redis_client


def pending(client: redis.Redis, stream: str, consumer: str) -> list[tuple[str, int]]:
    rows = client.xpending_range(stream, keys.CONSUMER_GROUP, "-", "+", 100, consumer)
    return [(p["message_id"].decode(), int(p["times_delivered"])) for p in rows]


def test_list_shows_each_name_over_every_stream_with_its_health(two_streams: redis.Redis) -> None:
    found = {c.name: c for c in list_consumers(two_streams)}
    assert set(found) == {"ghost", "live", "idle"}
    ghost, live = found["ghost"], found["live"]
    assert (ghost.pending, ghost.streams, ghost.healthy, ghost.health_age_seconds) == (
        4, 2, False, None,
    )  # fmt: skip
    assert live.pending == 1 and live.healthy and live.health_age_seconds is not None
    assert 0 <= live.health_age_seconds < 60


def test_removing_a_gone_consumer_hands_its_entries_to_the_freshest_healthy_one(
    two_streams: redis.Redis,
) -> None:
    before = pending(two_streams, ACME, "ghost") + pending(two_streams, BETA, "ghost")
    done = remove_consumer(two_streams, "ghost")
    assert (done.to, done.moved, done.streams) == ("live", 4, 2)
    # the same entries, delivered as often as before (handed over, not delivered again)
    now_live = pending(two_streams, ACME, "live") + pending(two_streams, BETA, "live")
    assert set(before) <= set(now_live) and len(now_live) == len(before) + 1
    names = {c["name"].decode() for s in (ACME, BETA)
             for c in two_streams.xinfo_consumers(s, keys.CONSUMER_GROUP)}  # fmt: skip
    assert "ghost" not in names
    summary = two_streams.xpending(ACME, keys.CONSUMER_GROUP)
    assert summary["pending"] == 4  # nothing dropped: 3 handed over + live's own


def test_a_member_of_a_name_no_consumer_may_have_is_listed_escaped_and_stops_nothing(
    capsys: pytest.CaptureFixture[str], two_streams: redis.Redis, redis_url: str
) -> None:
    hostile = "<b>\x1b[2J\u202e"  # anyone who can XREADGROUP names a member
    read_as(two_streams, hostile, ACME, 1)
    code, out, err = run_cli(capsys, "consumers", "list", "--redis-url", redis_url)
    assert code == 0, err
    assert "<b>\\x1b[2J\\u202e: 1 pending" in out and "no health key" in out
    assert "\x1b" not in out and "\u202e" not in out
    assert remove_consumer(two_streams, "ghost").moved == 4


def test_a_running_consumer_is_removed_only_with_force(two_streams: redis.Redis) -> None:
    with pytest.raises(ConsumerAdminError, match="fresh health key") as refused:
        remove_consumer(two_streams, "live")
    assert "--force" in str(refused.value)
    done = remove_consumer(two_streams, "live", to="idle", force=True)
    assert (done.to, done.moved) == ("idle", 1)
    assert len(pending(two_streams, ACME, "idle")) == 1


def test_pending_entries_with_no_one_to_take_them_are_refused(redis_client: redis.Redis) -> None:
    redis_client.sadd(keys.PROJECTS, "acme")
    send(redis_client, sync_event(1))
    redis_client.xgroup_create(ACME, keys.CONSUMER_GROUP, id="0")
    read_as(redis_client, "ghost", ACME, 1)
    with pytest.raises(ConsumerAdminError, match="no healthy consumer is there"):
        remove_consumer(redis_client, "ghost")
    assert pending(redis_client, ACME, "ghost")  # untouched
    assert remove_consumer(redis_client, "ghost", to="hub-9").moved == 1
    with pytest.raises(ConsumerAdminError, match="no consumer 'ghost'"):
        remove_consumer(redis_client, "ghost")


def test_a_ghosts_entries_handed_over_by_the_cli_are_stored_and_acked(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    p = pipeline
    p.make_busy()  # leaves two entries pending in "ghost", a consumer that died
    listed = run_cli(capsys, "consumers", "list", "--redis-url", p.redis_url, "--json")
    assert listed.code == 0, listed.err
    by_name = {c["name"]: c for c in json.loads(listed.out)["consumers"]}
    assert by_name["ghost"]["pending"] == 2 and not by_name["ghost"]["healthy"]
    assert by_name["hub-1"]["healthy"]  # its health key is fresh after run_once

    text = run_cli(capsys, "consumers", "list", "--redis-url", p.redis_url)
    assert "ghost: 2 pending" in text.out and "no health key (not running)" in text.out
    refused = run_cli(capsys, "consumers", "remove", "hub-1", "--redis-url", p.redis_url)
    assert refused.code == 2 and "fresh health key" in refused.err
    assert refused.err.count("\n") == 1

    removed = run_cli(capsys, "consumers", "remove", "ghost", "--redis-url", p.redis_url)
    assert removed.code == 0, removed.err
    assert (
        removed.out
        == "removed consumer ghost from 1 stream(s); 2 pending entries handed to hub-1\n"
    )
    p.consume_once("hub-1")  # a restarted hub-1 takes back its own pending list first
    p.relay_once()
    assert p.store.outbox_counts()["pending"] == 0
    assert p.client.xpending(p.events, keys.CONSUMER_GROUP)["pending"] == 0
