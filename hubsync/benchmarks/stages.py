"""Each stage of the pipeline against its own raw ceiling, measured side by side.

* relay drain (``Relay.run_once`` on an outbox backlog) vs raw XADD of the
  identical entries (same fields, same bytes, same batch size), packed and
  written as the relay packs and writes them; and, for reference, the same
  entries through redis-py's pipeline;
* consumer ingest (``HubConsumer``: validation, hash check, one
  ``HubStore.ingest`` per batch, outcomes, XACK) vs a raw loop of XREADGROUP,
  ``executemany`` INSERT of the same rows and XACK; and the two halves of
  that loop alone: raw XREADGROUP + XACK, and raw SQLite batch insert.

What each ceiling omits, and the floor the servers set (Redis's time per
entry around the stage, SQLite's CPU per row), are ``ceilings``'.
Rounds alternate between a stage and its ceilings; the best round of each counts.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from consumers.stream.fast_reads import read_group_pairs
from consumers.stream.worker import HubConsumer
from hubstore.factory import open_store
from hubsync.benchmarks import ceilings
from hubsync.benchmarks.ceilings import Ceiling, RedisUse, RedisWork
from hubsync.benchmarks.procs import redis_cpu_seconds
from hubsync.benchmarks.workload import (
    HUB_PROJECT,
    INSERT_ROW,
    enroll_bench_runtimes,
    entries,
    iter_rows,
    raw_hub_table,
    runtime_with_backlog,
)
from hubsync.core import keys
from hubsync.core.connections import RedisClient, RedisTarget, connect
from hubsync.core.redis_values import as_text
from hubsync.core.settings import ConsumerSettings, RelaySettings, hub_url_from_path
from hubsync.core.signing import RuntimeKey
from producers.relay import Relay
from producers.relay.sender import EntryBuilder
from producers.relay.split_pipeline import Command, WrittenCommands
from producers.store.event_store import OutboxRow, RunEventStore

BATCH = 500


def stream_of(fields: dict[str, str | bytes]) -> str:
    """The events stream of the bench runtime that signed ``fields``."""
    runtime = fields["runtime_id"]
    return keys.events_stream(
        HUB_PROJECT, runtime.decode() if isinstance(runtime, bytes) else runtime
    )


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


class _Best:
    """Each measure's fastest round, and the Redis use of the stage's fastest (its floor)."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.seconds: dict[str, float] = {}
        self.redis_use: RedisUse | None = None

    def keep(self, used: RedisUse, **seconds: float) -> None:
        """One round's seconds per measure, and what Redis did in the stage's."""
        if seconds[self.stage] < self.seconds.get(self.stage, float("inf")):
            self.redis_use = used
        for name, value in seconds.items():
            self.seconds[name] = min(self.seconds.get(name, float("inf")), value)

    def rates(self, events: int) -> tuple[dict[str, float], RedisUse]:
        """Events per second of each measure's best round, and the stage's Redis use."""
        assert self.redis_use is not None  # rounds >= 1
        return {name: _rate(events, s) for name, s in self.seconds.items()}, self.redis_use


class Stopwatch:
    """What a stage times, exactly: the wall clock, this process's CPU (every thread: the
    stage runs in it) and, given a client, the redis-server's (``INFO cpu``)."""

    def __init__(self, client: Any = None) -> None:
        self._client = client
        self._started = (0.0, 0.0, 0.0)
        self.used = {"client": 0.0, "redis": 0.0}
        """CPU seconds of the last ``start``-``stop``."""

    def _redis(self) -> float:
        return redis_cpu_seconds(self._client) if self._client is not None else 0.0

    def start(self) -> None:
        self._started = (self._redis(), time.process_time(), time.perf_counter())

    def stop(self) -> float:
        """Seconds since ``start``; its CPU in ``used``."""
        wall = time.perf_counter()
        cpu = time.process_time()
        redis_started, cpu_started, wall_started = self._started
        self.used = {"client": cpu - cpu_started, "redis": self._redis() - redis_started}
        return wall - wall_started


class _LeastCpu:
    """Each measure's least CPU per event over the rounds (``Stopwatch.used``)."""

    def __init__(self) -> None:
        self.least: dict[str, dict[str, float]] = {}

    def keep(self, name: str, watch: Stopwatch, events: int) -> None:
        if not events:
            return
        per_event = {part: round(cpu / events * 1e6, 1) for part, cpu in watch.used.items()}
        per_event["total"] = round(per_event["client"] + per_event["redis"], 1)
        if per_event["total"] < self.least.get(name, {}).get("total", float("inf")):
            self.least[name] = per_event


def _ratio(rate: float, of: float) -> float:
    return round(rate / of, 3) if of else 0.0


def _against(
    events: int, rate: float, ceiling_rate: float, ceiling: Ceiling, target: float
) -> dict[str, Any]:
    """What every stage reports: its events and batch, its rate beside its ceiling's, what
    that omits, the target."""
    return {
        "events": events,
        "batch": BATCH,
        "events_per_s": round(rate),
        **ceiling.describe(),
        "ceiling_events_per_s": round(ceiling_rate),
        "ratio": _ratio(rate, ceiling_rate),
        "target_ratio": target,
    }


# ----- relay -----


def _ceiling_rows(store: RunEventStore) -> tuple[str, EntryBuilder, list[OutboxRow]]:
    """The stream the relay sends the store's rows to (the ceilings delete it afterwards),
    the relay's builder of their signed entries, and the rows."""
    stream = keys.events_stream(store.hub_project, store.home_runtime_id)
    return stream, EntryBuilder(store, RuntimeKey.generate()), store.unsent(0, 10**9)


def raw_xadd_seconds(
    client: RedisClient, store: RunEventStore, batch: int = BATCH, watch: Stopwatch | None = None
) -> tuple[float, int]:
    """Seconds to XADD the store's outbox rows as the relay's ceiling (``ceilings.RELAY``):
    each batch packed and written by the relay's own ``WrittenCommands``, the next one
    written before the previous one's replies are read, so Redis is never left waiting."""
    stream, builder, rows = _ceiling_rows(store)  # signed before the clock starts
    commands: list[Command] = [("XADD", stream, "*", *builder.pairs(row)) for row in rows]
    watch = watch or Stopwatch()
    watch.start()
    in_flight: WrittenCommands | None = None
    for start in range(0, len(commands), batch):
        written = WrittenCommands(client, commands[start : start + batch])
        if in_flight is not None:
            in_flight.read_replies()
        in_flight = written
    if in_flight is not None:
        in_flight.read_replies()
    elapsed = watch.stop()
    client.delete(stream)
    return elapsed, len(commands)


def redis_py_xadd_seconds(
    client: RedisClient, store: RunEventStore, batch: int = BATCH
) -> tuple[float, int]:
    """Seconds to XADD the same entries through redis-py's pipeline and ``xadd``
    (``ceilings.RELAY_REDIS_PY``, redis-py's own packing)."""
    stream, builder, rows = _ceiling_rows(store)
    fields = list(map(builder.fields, rows))
    started = time.perf_counter()
    for start in range(0, len(fields), batch):
        pipe = client.pipeline(transaction=False)
        for entry in fields[start : start + batch]:
            pipe.xadd(stream, entry)  # type: ignore[arg-type]
        pipe.execute()
    elapsed = time.perf_counter() - started
    client.delete(stream)
    return elapsed, len(fields)


def relay_drain_seconds(
    url: str, state_dir: Path, batch: int = BATCH, watch: Stopwatch | None = None
) -> tuple[float, int]:
    """Seconds for ``Relay.run_once`` to send the whole backlog; rows sent."""
    relay = Relay(RelaySettings(state_dir=state_dir, redis_url=url, batch_count=batch))
    watch = watch or Stopwatch()
    try:
        watch.start()
        summary = relay.run_once()
        elapsed = watch.stop()
    finally:
        relay.close()
        relay.registry.close()
    return elapsed, summary.sender.sent


def measure_relay(url: str, events: int, rounds: int) -> dict[str, Any]:
    """Relay drain rate beside the raw XADD ceilings of the same entries (best of ``rounds``),
    with Redis's own time per XADD measured around the relay's drain."""
    client = connect(RedisTarget(url))
    best = _Best("relay")
    cpu, watch = _LeastCpu(), Stopwatch(client)
    event_bytes = 0
    try:
        for _ in range(rounds):
            client.flushall()
            with tempfile.TemporaryDirectory(prefix="hubsync-bench-relay-") as tmp:
                registry, store = runtime_with_backlog(Path(tmp), events)
                event_bytes = len(store.unsent(0, 1)[0].sync_event)
                raw_s, raw_n = raw_xadd_seconds(client, store, watch=watch)
                cpu.keep("ceiling", watch, raw_n)
                redis_py_s, redis_py_n = redis_py_xadd_seconds(client, store)
                store.close()
                registry.close()
                work = RedisWork(client)
                relay_s, sent = relay_drain_seconds(url, Path(tmp) / "state", watch=watch)
                cpu.keep("stage", watch, sent)
                used = work.per_entry(sent)
            if {sent, raw_n, redis_py_n} != {events}:
                raise ValueError(
                    f"relay sent {sent}, ceilings {raw_n} and {redis_py_n}, of {events}"
                )
            best.keep(used, relay=relay_s, raw=raw_s, redis_py=redis_py_s)
    finally:
        client.close()
    rates, redis_use = best.rates(events)
    return {
        **_against(events, rates["relay"], rates["raw"], ceilings.RELAY, 0.9),
        "event_bytes": event_bytes,
        "redis_py_ceiling": ceilings.RELAY_REDIS_PY.describe(),
        "redis_py_ceiling_events_per_s": round(rates["redis_py"]),
        "redis_py_ratio": _ratio(rates["relay"], rates["redis_py"]),
        "floor": ceilings.floor(redis_use, ceilings.RELAY_FLOOR_COMMANDS, rates["relay"]),
        "cpu_us_per_event": cpu.least,
    }


# ----- consumer -----


def preload(client: RedisClient, batch: list[dict[str, str | bytes]]) -> None:
    """A fresh database holding ``batch`` on the bench stream, group ``hub`` at 0."""
    # Each round's consumer is a new hub (a new hub.db): the flush also drops the
    # previous round's hubsync:hub binding, which would otherwise refuse it.
    client.flushall()
    pipe = client.pipeline(transaction=False)
    streams = set()
    for n, fields in enumerate(batch, 1):
        streams.add(stream_of(fields))
        pipe.xadd(stream_of(fields), fields)  # type: ignore[arg-type]
        if n % 1000 == 0:
            pipe.execute()
    pipe.execute()
    for stream in streams:
        client.xgroup_create(stream, keys.CONSUMER_GROUP, id="0")


def raw_ingest_seconds(
    client: redis.Redis, directory: Path, with_sqlite: bool = True, watch: Stopwatch | None = None
) -> tuple[float, int]:
    """Raw XREADGROUP (+ ``executemany`` INSERT, one transaction per batch) + XACK; seconds, rows.

    The entries are read by the consumer's own reader (``consumers.stream.fast_reads``: the
    same function, not a copy), their fields left as the reply's pairs."""
    db = raw_hub_table(directory / "raw.db") if with_sqlite else None
    rows = 0
    streams = dict.fromkeys(
        (as_text(key) for key in client.scan_iter(match=keys.events_stream_pattern(HUB_PROJECT))),
        ">",
    )
    group = (keys.CONSUMER_GROUP, "raw")
    watch = watch or Stopwatch()
    watch.start()
    while True:
        # read as the consumer reads: each entry's fields as the reply's pairs, no mapping
        reply = read_group_pairs(client, streams, count=BATCH, block_ms=None, group=group)
        if not reply:
            break
        for stream, got in reply:
            if db is not None:
                batch = [
                    dict(zip(map(bytes.decode, f[0::2]), f[1::2], strict=True)) for _, f in got
                ]
                db.execute("BEGIN IMMEDIATE")
                db.executemany(INSERT_ROW, iter_rows(batch))
                db.execute("COMMIT")
            client.xack(stream, keys.CONSUMER_GROUP, *[entry_id for entry_id, _ in got])
            rows += len(got)
    elapsed = watch.stop()
    if db is not None:
        db.close()
    return elapsed, rows


def signed_batch(directory: Path, events: int) -> list[dict[str, str | bytes]]:
    """``events`` entries signed by the bench runtimes, enrolled on the hub at ``DIR/hub.db``."""
    with open_store(hub_url_from_path(directory / "hub.db"), create_schema=True) as hub:
        return entries(events, keys=enroll_bench_runtimes(hub))


def consumer_seconds(
    client: RedisClient, url: str, directory: Path, watch: Stopwatch | None = None
) -> tuple[float, int]:
    """Seconds for ``HubConsumer`` to drain the stream into ``DIR/hub.db``; accepted rows.

    Every check the consumer makes is timed: signature, schema, canonical bytes, hash.
    """
    settings = ConsumerSettings(hub_db=directory / "hub.db", redis_url=url, read_count=BATCH)
    with open_store(settings.hub_url, create_schema=True) as store:
        worker = HubConsumer(client, store, settings, name="bench")
        worker.refresh_streams()
        watch = watch or Stopwatch()
        watch.start()
        while worker.poll(block_ms=None):
            pass
        return watch.stop(), worker.stats.accepted


def raw_sqlite_seconds(batch: list[dict[str, str | bytes]], directory: Path) -> tuple[float, float]:
    """Seconds for a plain ``executemany`` of the rows into the hub's schema, one transaction
    per 500 (no Redis), and the CPU seconds this thread spent on it (SQLite's, as it runs
    in the caller's thread)."""
    db = raw_hub_table(directory / "sqlite-only.db")
    rows = list(iter_rows(batch))
    started, cpu_started = time.perf_counter(), time.thread_time()
    for start in range(0, len(rows), BATCH):
        db.execute("BEGIN IMMEDIATE")
        db.executemany(INSERT_ROW, rows[start : start + BATCH])
        db.execute("COMMIT")
    elapsed, cpu = time.perf_counter() - started, time.thread_time() - cpu_started
    db.close()
    return elapsed, cpu


def measure_consumer(url: str, events: int, rounds: int) -> dict[str, Any]:
    """Consumer ingest beside raw XREADGROUP+executemany+XACK and its two halves, with
    Redis's own time per entry measured around the consumer's drain."""
    best = _Best("hub")
    sqlite_cpu = float("inf")
    client = connect(RedisTarget(url), cluster=False)
    cpu, watch = _LeastCpu(), Stopwatch(client)
    try:
        for attempt in range(rounds):
            with tempfile.TemporaryDirectory(prefix="hubsync-bench-consumer-") as tmp:
                directory = Path(tmp)
                batch = signed_batch(directory, events)  # a new hub each round: new keys
                preload(client, batch)
                raw_s, raw_n = raw_ingest_seconds(client, directory, watch=watch)
                cpu.keep("ceiling", watch, raw_n)
                preload(client, batch)
                work = RedisWork(client)
                hub_s, hub_n = consumer_seconds(client, url, directory, watch)
                cpu.keep("stage", watch, hub_n)
                used = work.per_entry(hub_n)
                preload(client, batch)
                redis_s, _ = raw_ingest_seconds(client, directory, with_sqlite=False)
                sqlite_s, sqlite_cpu_s = raw_sqlite_seconds(batch, directory)
            if raw_n != events or hub_n != events:
                raise ValueError(f"round {attempt}: raw {raw_n}, hub {hub_n} rows of {events}")
            sqlite_cpu = min(sqlite_cpu, sqlite_cpu_s)
            best.keep(used, hub=hub_s, raw=raw_s, redis=redis_s, sqlite=sqlite_s)
        client.flushall()
    finally:
        client.close()
    rates, redis_use = best.rates(events)
    return {
        **_against(events, rates["hub"], rates["raw"], ceilings.CONSUMER, 0.7),
        "raw_xreadgroup_xack_events_per_s": round(rates["redis"]),
        "raw_sqlite_batch_insert_events_per_s": round(rates["sqlite"]),
        "floor": ceilings.floor(
            redis_use, ceilings.CONSUMER_FLOOR_COMMANDS, rates["hub"], sqlite_cpu / events * 1e6
        ),
        "cpu_us_per_event": cpu.least,
    }
