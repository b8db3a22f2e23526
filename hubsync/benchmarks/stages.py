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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

from consumers.stream.fast_reads import PairsEntry, read_group_pairs
from consumers.stream.worker import HubConsumer
from hubstore.factory import open_store
from hubsync.benchmarks import ceilings
from hubsync.benchmarks.ceilings import Ceiling, RedisUse, RedisWork
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


class Stopwatch:
    """What a stage times, exactly: the wall clock, this process's CPU (every thread: the
    stage runs in it) and, given a client, Redis's own work over the same window
    (``ceilings.RedisWork``: each command's time and the server's whole CPU)."""

    def __init__(self, client: Any = None) -> None:
        self._client = client
        self._work: RedisWork | None = None
        self._started = (0.0, 0.0)
        self.redis: RedisUse | None = None
        """Redis's work per entry over the last ``start``-``stop`` (given a client)."""
        self.cpu_us_per_event = {"client": 0.0, "redis": 0.0, "total": 0.0}
        """This process's and the redis-server's CPU per event over it, and their sum."""

    def start(self) -> None:
        self._work = RedisWork(self._client) if self._client is not None else None
        self._started = (time.process_time(), time.perf_counter())

    def stop(self, events: int) -> float:
        """Seconds since ``start``; the CPU per event of the ``events`` it moved."""
        wall, cpu = time.perf_counter(), time.process_time()
        cpu_started, wall_started = self._started
        self.redis = self._work.per_entry(events) if self._work is not None else None
        client = (cpu - cpu_started) / events * 1e6 if events else 0.0
        redis = self.redis.server_cpu_us if self.redis is not None else 0.0
        self.cpu_us_per_event = {
            "client": round(client, 1),
            "redis": round(redis, 1),
            "total": round(client + redis, 1),
        }
        return wall - wall_started


class _Best:
    """Each measure's fastest round and least CPU per event, and the Redis use of the stage's
    fastest round (its floor)."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.seconds: dict[str, float] = {}
        self.redis_use: RedisUse | None = None
        self.cpu: dict[str, dict[str, float]] = {}
        """Per measure timed by a ``Stopwatch``: its round of least CPU per event."""

    def keep(self, stage: Stopwatch, watched: dict[str, Stopwatch], **seconds: float) -> None:
        """One round's seconds per measure, what Redis did in the stage's (``stage``), and
        the CPU of the measures ``watched`` timed (the stage's under ``"stage"``)."""
        if seconds[self.stage] < self.seconds.get(self.stage, float("inf")):
            self.redis_use = stage.redis
        for name, value in seconds.items():
            self.seconds[name] = min(self.seconds.get(name, float("inf")), value)
        for name, watch in {"stage": stage, **watched}.items():
            per_event = watch.cpu_us_per_event
            if per_event["total"] < self.cpu.get(name, {}).get("total", float("inf")):
                self.cpu[name] = per_event

    def rates(self, events: int) -> tuple[dict[str, float], RedisUse]:
        """Events per second of each measure's best round, and the stage's Redis use."""
        assert self.redis_use is not None  # rounds >= 1, each with the stage's client
        return {name: _rate(events, s) for name, s in self.seconds.items()}, self.redis_use


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
    elapsed = watch.stop(len(commands))
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
        elapsed = watch.stop(summary.sender.sent)
    finally:
        relay.close()
        relay.registry.close()
    return elapsed, summary.sender.sent


def measure_relay(url: str, events: int, rounds: int) -> dict[str, Any]:
    """Relay drain rate beside the raw XADD ceilings of the same entries (best of ``rounds``),
    with Redis's own time per XADD measured around the relay's drain."""
    client = connect(RedisTarget(url))
    best = _Best("relay")
    event_bytes = 0
    try:
        for _ in range(rounds):
            client.flushall()
            with tempfile.TemporaryDirectory(prefix="hubsync-bench-relay-") as tmp:
                registry, store = runtime_with_backlog(Path(tmp), events)
                event_bytes = len(store.unsent(0, 1)[0].sync_event)
                ceiling, stage = Stopwatch(client), Stopwatch(client)
                raw_s, raw_n = raw_xadd_seconds(client, store, watch=ceiling)
                redis_py_s, redis_py_n = redis_py_xadd_seconds(client, store)
                store.close()
                registry.close()
                relay_s, sent = relay_drain_seconds(url, Path(tmp) / "state", watch=stage)
            if {sent, raw_n, redis_py_n} != {events}:
                raise ValueError(
                    f"relay sent {sent}, ceilings {raw_n} and {redis_py_n}, of {events}"
                )
            best.keep(stage, {"ceiling": ceiling}, relay=relay_s, raw=raw_s, redis_py=redis_py_s)
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
        "cpu_us_per_event": best.cpu,
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


def bench_streams(client: redis.Redis) -> dict[str, str]:
    """The bench's event streams, each to be read from the group's start (``">"``)."""
    pattern = keys.events_stream_pattern(HUB_PROJECT)
    return dict.fromkeys((as_text(key) for key in client.scan_iter(match=pattern)), ">")


def read_batches(
    client: redis.Redis, streams: dict[str, str], consumer: str
) -> Iterator[tuple[str, list[PairsEntry]]]:
    """Each stream's batches of up to ``BATCH`` entries, read for the group's ``consumer`` until
    none is left, as the consumer reads them: by its own reader (``consumers.stream.fast_reads``:
    the same function, not a copy), each entry's fields the reply's pairs, no mapping made."""
    group = (keys.CONSUMER_GROUP, consumer)
    while reply := read_group_pairs(client, streams, count=BATCH, block_ms=None, group=group):
        yield from reply


def raw_ingest_seconds(
    client: redis.Redis, directory: Path, with_sqlite: bool = True, watch: Stopwatch | None = None
) -> tuple[float, int]:
    """Raw XREADGROUP (+ ``executemany`` INSERT, one transaction per batch) + XACK; seconds, rows.

    The entries are read as the consumer reads them (``read_batches``)."""
    db = raw_hub_table(directory / "raw.db") if with_sqlite else None
    rows = 0
    streams = bench_streams(client)
    watch = watch or Stopwatch()
    watch.start()
    for stream, got in read_batches(client, streams, "raw"):
        if db is not None:
            batch = [dict(zip(map(bytes.decode, f[0::2]), f[1::2], strict=True)) for _, f in got]
            db.execute("BEGIN IMMEDIATE")
            db.executemany(INSERT_ROW, iter_rows(batch))
            db.execute("COMMIT")
        client.xack(stream, keys.CONSUMER_GROUP, *[entry_id for entry_id, _ in got])
        rows += len(got)
    elapsed = watch.stop(rows)
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
        return watch.stop(worker.stats.accepted), worker.stats.accepted


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
    try:
        for attempt in range(rounds):
            with tempfile.TemporaryDirectory(prefix="hubsync-bench-consumer-") as tmp:
                directory = Path(tmp)
                batch = signed_batch(directory, events)  # a new hub each round: new keys
                preload(client, batch)
                ceiling, stage = Stopwatch(client), Stopwatch(client)
                raw_s, raw_n = raw_ingest_seconds(client, directory, watch=ceiling)
                preload(client, batch)
                hub_s, hub_n = consumer_seconds(client, url, directory, stage)
                preload(client, batch)
                redis_s, _ = raw_ingest_seconds(client, directory, with_sqlite=False)
                sqlite_s, sqlite_cpu_s = raw_sqlite_seconds(batch, directory)
            if raw_n != events or hub_n != events:
                raise ValueError(f"round {attempt}: raw {raw_n}, hub {hub_n} rows of {events}")
            sqlite_cpu = min(sqlite_cpu, sqlite_cpu_s)
            best.keep(
                stage, {"ceiling": ceiling}, hub=hub_s, raw=raw_s, redis=redis_s, sqlite=sqlite_s
            )
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
        "cpu_us_per_event": best.cpu,
    }
