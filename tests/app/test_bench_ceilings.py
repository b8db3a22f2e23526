"""The benchmark's ceilings and floors: Redis's own time per entry read from a real
redis-server's ``INFO commandstats``, and the floor a stage's servers set."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from hubsync.benchmarks import ceilings
from hubsync.benchmarks.ceilings import (
    CommandStat,
    RedisUse,
    RedisWork,
    command_stats,
    usec_per_entry,
)

ENTRIES = 300


def add_and_read(client: redis.Redis, entries: int = ENTRIES) -> None:
    """``entries`` XADDs to one stream, then one XREADGROUP of all of them and one XACK."""
    pipe = client.pipeline(transaction=False)
    for n in range(entries):
        pipe.xadd("bench:stats", {"n": n, "event": "x" * 500})
    pipe.execute()
    client.xgroup_create("bench:stats", "hub", id="0")
    reply: Any = client.xreadgroup("hub", "raw", {"bench:stats": ">"}, count=entries)
    ((_, got),) = reply
    client.xack("bench:stats", "hub", *[entry_id for entry_id, _ in got])


def test_command_stats_count_every_call_by_lower_case_name(redis_client: redis.Redis) -> None:
    before = command_stats(redis_client)
    add_and_read(redis_client)
    after = command_stats(redis_client)
    calls = {
        name: after[name].calls - before.get(name, CommandStat(0, 0)).calls
        for name in ("xadd", "xreadgroup", "xack", "xgroup|create")
    }
    assert calls == {"xadd": ENTRIES, "xreadgroup": 1, "xack": 1, "xgroup|create": 1}
    assert after["xadd"].usec > before.get("xadd", CommandStat(0, 0)).usec


def test_time_per_entry_counts_only_the_commands_run_in_between(
    redis_client: redis.Redis,
) -> None:
    redis_client.set("before", 1)
    before = command_stats(redis_client)
    add_and_read(redis_client)
    after = command_stats(redis_client)
    spent = usec_per_entry(before, after, ENTRIES)
    # ``set`` ran before, ``info`` is the snapshots' own: neither is the stage's
    assert set(spent) == {"xadd", "xreadgroup", "xack", "xgroup|create"}
    # one XREADGROUP call of 300 entries: its usec_per_call spread over the entries it returned
    read = after["xreadgroup"].usec - before.get("xreadgroup", CommandStat(0, 0)).usec
    assert spent["xreadgroup"] == round(read / ENTRIES, 3) > 0
    assert spent["xadd"] > 0


def test_redis_work_adds_the_servers_whole_cpu(redis_client: redis.Redis) -> None:
    work = RedisWork(redis_client)
    add_and_read(redis_client)
    used = work.per_entry(ENTRIES)
    assert used.command_us["xadd"] > 0 and used.server_cpu_us > 0


def test_the_floor_is_the_slower_server_and_the_stage_is_measured_against_it() -> None:
    redis_use = RedisUse({"xreadgroup": 3.0, "xack": 0.5, "xadd": 0.2}, server_cpu_us=6.0)
    floor = ceilings.floor(redis_use, ceilings.CONSUMER_FLOOR_COMMANDS, 10_000, 5.0)
    assert floor["redis_us_per_entry"] == {"xreadgroup": 3.0, "xack": 0.5}
    assert floor["redis_us_per_event"] == 3.5  # the outcomes' xadd is not the ceiling's work
    assert (floor["sqlite_us_per_row"], floor["us_per_event"]) == (5.0, 5.0)
    assert (floor["events_per_s"], floor["stage_ratio"]) == (200_000, 0.05)
    assert floor["redis_all_commands_us_per_event"]["xadd"] == 0.2


def test_a_busy_servers_whole_cpu_bounds_commandstats_wall_clock_timings() -> None:
    stretched = RedisUse({"xadd": 9.0}, server_cpu_us=4.0)
    floor = ceilings.floor(stretched, ceilings.RELAY_FLOOR_COMMANDS, 50_000)
    assert (floor["redis_us_per_event"], floor["events_per_s"]) == (4.0, 250_000)
    assert "sqlite_us_per_row" not in floor
    unmeasured = RedisUse({"xadd": 2.0}, server_cpu_us=0.0)
    assert ceilings.floor(unmeasured, ("xadd",), 50_000)["us_per_event"] == 2.0


@pytest.mark.parametrize(
    ("ceiling", "omitted"),
    [
        (ceilings.RELAY, "signing (the entries are signed before the clock starts)"),
        (ceilings.RELAY_REDIS_PY, "reading the outbox rows"),
        (ceilings.CONSUMER, "signature check"),
        (ceilings.END_TO_END, "dedupe lookups and verdicts"),
        (ceilings.END_TO_END, "marking rows attempted"),
    ],
)
def test_every_ceiling_says_what_it_omits(ceiling: ceilings.Ceiling, omitted: str) -> None:
    described = ceiling.describe()
    assert described["ceiling"] == ceiling.does
    assert omitted in described["ceiling_omits"]
