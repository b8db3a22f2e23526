"""What each raw ceiling of ``hubsync bench`` leaves out, and the floor its servers set.

A ceiling is the fastest raw loop that moves the same entries as a stage:
what it omits is the work the stage does on top (checks, bookkeeping), named
here once, so the JSON and the table say the same thing.

A floor is the cost the servers themselves put on each event, whoever the
client: Redis's own time in each command (``INFO commandstats``, measured
around the stage on the bench's private redis-server: the command's execution,
not reading the request nor writing the reply; or the server's whole CPU over
the stage, ``INFO cpu``, when that is less, as it is on a busy machine whose
scheduler stretches commandstats' wall-clock timings), and SQLite's CPU per
row of a plain ``executemany`` into the hub's ``sync_events``. A stage cannot go faster
than its slowest server's floor allows: Redis runs commands one at a time,
and the hub has one SQLite writer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hubsync.benchmarks.procs import redis_cpu_seconds


@dataclass(frozen=True)
class Ceiling:
    """A raw loop a stage is compared to: what it does, and what the stage does that it omits."""

    does: str
    omits: tuple[str, ...]

    def describe(self) -> dict[str, Any]:
        """The report's ``ceiling`` and ``ceiling_omits`` fields."""
        return {"ceiling": self.does, "ceiling_omits": list(self.omits)}


_RELAY_OMITS = (
    "reading the outbox rows",
    "signing (the entries are signed before the clock starts)",
    "the batch's byte budget and size check",
    "marking rows attempted",
)
_CONSUMER_OMITS = (
    "signature check",
    "content hash",
    "event proof (schema, canonical bytes, flat fields against the bytes)",
    "dedupe lookups and verdicts",
    "the hub's project and run rows",
    "signed outcomes entries",
    "read budget and metrics",
)

RELAY = Ceiling(
    "raw XADD of the same entries (same fields and bytes), packed by hiredis as the relay "
    "packs them (producers.relay.split_pipeline), each batch written before the previous "
    "one's replies are read",
    _RELAY_OMITS,
)
RELAY_REDIS_PY = Ceiling(
    "raw redis-py pipeline of xadd calls of the same entries (redis-py's own packing, which "
    "the relay does not use)",
    _RELAY_OMITS,
)
CONSUMER = Ceiling(
    "raw XREADGROUP, read as the consumer reads (consumers.stream.fast_reads: each entry's "
    "fields as the reply's pairs), + executemany INSERT OR IGNORE into the hub's sync_events "
    "+ XACK of the same entries",
    _CONSUMER_OMITS,
)
END_TO_END = Ceiling(
    "the slower of the two raw stages above",
    (*_RELAY_OMITS, *_CONSUMER_OMITS, "applying the outcomes to the outbox"),
)

RELAY_FLOOR_COMMANDS = ("xadd",)
CONSUMER_FLOOR_COMMANDS = ("xreadgroup", "xack")


@dataclass(frozen=True)
class CommandStat:
    """One command's line of ``INFO commandstats``: calls so far and microseconds spent."""

    calls: int
    usec: int


def command_stats(client: Any) -> dict[str, CommandStat]:
    """Every command Redis has run since its start (or ``CONFIG RESETSTAT``), by lower-case
    name (``xadd``, ``xinfo|stream``)."""
    info: Mapping[str, Mapping[str, Any]] = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): CommandStat(int(line["calls"]), int(line["usec"]))
        for name, line in info.items()
    }


def usec_per_entry(
    before: Mapping[str, CommandStat], after: Mapping[str, CommandStat], entries: int
) -> dict[str, float]:
    """Each command's Redis time between two ``command_stats`` snapshots, per entry of the
    ``entries`` the stage moved (``usec_per_call`` / entries per call); the commands that
    ran in between only, ``info`` (the snapshots' own) left out."""
    spent = {}
    for name, stat in after.items():
        earlier = before.get(name, CommandStat(0, 0))
        if name != "info" and stat.calls > earlier.calls:
            spent[name] = round((stat.usec - earlier.usec) / entries, 3) if entries else 0.0
    return spent


class RedisWork:
    """Redis's own work around one stage: made just before it, ``per_entry`` just after."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._stats = command_stats(client)
        self._cpu = redis_cpu_seconds(client)

    def per_entry(self, entries: int) -> RedisUse:
        """Since this was made: each command's time per entry, and the server's whole CPU."""
        cpu = redis_cpu_seconds(self._client) - self._cpu
        return RedisUse(
            usec_per_entry(self._stats, command_stats(self._client), entries),
            round(cpu / entries * 1e6, 3) if entries else 0.0,
        )


@dataclass(frozen=True)
class RedisUse:
    """What ``RedisWork`` measured, per entry of the stage."""

    command_us: dict[str, float]
    """``usec_per_entry`` of every command that ran."""
    server_cpu_us: float
    """The redis-server's whole CPU (``INFO cpu``): commands, protocol, I/O, its own chores."""


def floor(
    redis: RedisUse,
    commands: tuple[str, ...],
    events_per_s: float,
    sqlite_us_per_row: float | None = None,
) -> dict[str, Any]:
    """The report's ``floor`` of a stage: the Redis time of the ``commands`` its ceiling sends
    too (or the server's whole CPU, when that is less), SQLite's CPU per row where the stage
    writes the hub, the slower server's cost, the rate it allows, and the stage's share of
    that rate."""
    redis_us = redis.command_us
    # commandstats times each command by the wall clock, which on a busy machine also
    # counts the moments the server was descheduled; its whole CPU is then the lower bound
    redis_floor = sum(redis_us.get(name, 0.0) for name in commands)
    if 0 < redis.server_cpu_us < redis_floor:
        redis_floor = redis.server_cpu_us
    result: dict[str, Any] = {
        "redis_us_per_entry": {name: redis_us.get(name, 0.0) for name in commands},
        "redis_us_per_event": round(redis_floor, 3),
        "redis_all_commands_us_per_event": dict(redis_us),
        "redis_server_cpu_us_per_event": redis.server_cpu_us,
    }
    slowest = redis_floor
    if sqlite_us_per_row is not None:
        result["sqlite_us_per_row"] = round(sqlite_us_per_row, 3)
        slowest = max(slowest, sqlite_us_per_row)
    floor_rate = 1e6 / slowest if slowest > 0 else 0.0
    result["us_per_event"] = round(slowest, 3)
    result["events_per_s"] = round(floor_rate)
    result["stage_ratio"] = round(events_per_s / floor_rate, 3) if floor_rate else 0.0
    return result
