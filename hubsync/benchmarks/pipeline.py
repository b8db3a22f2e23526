"""The whole pipeline as real processes: 1 ``hubsync relay`` and 2 ``hubsync consume``.

* end-to-end drain: an outbox backlog goes outbox -> stream -> hub -> acked;
  timed from the first entry's stream id (the relay's first XADD, on Redis's
  clock, which is this machine's) to the moment no outbox row is pending; the
  peak RSS (``VmHWM``) of the relay and of the consumers is read at the end.
  CPU per event counts the drain only: the relay is started before its runtime
  joins the hub (so it sends nothing) and every process's CPU is read once all
  are up, just before the join, so no start-up is counted and ``--quick``
  (fewer events) gives the same figure as the full run;
* the hub both write to is a temp SQLite file, or a new schema of the PostgreSQL
  database ``hubsync bench --hub-url`` names (``hubs``);
* latency: this process commits events at a fixed offered rate (a small
  ``append_events`` transaction every 5 ms) and each event's latency is its
  hub row's ``received_at`` (the hub transaction's time) minus the moment its
  local commit returned.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hubstore.factory import open_store
from hubsync.benchmarks.hubs import bench_hub, hub_kind, hub_rows
from hubsync.benchmarks.procs import (
    BenchError,
    cpu_seconds,
    peak_rss_mb,
    percentiles,
    redis_cpu_seconds,
)
from hubsync.benchmarks.workload import (
    EVENTS_PER_RUN,
    HUB_PROJECT,
    join_bench_hub,
    payload,
    runtime_with_backlog,
    runtime_with_backlogs,
)
from hubsync.core import keys
from hubsync.core.clock import parse_timestamp
from hubsync.core.connections import RedisClient, RedisTarget, connect
from hubsync.processes import Child, PipelineProcesses, hubsync_command
from producers.store.event_store import NewEvent, RunEventStore

CONSUMERS = 2
TICK_SECONDS = 0.005
WARMUP_SECONDS = 1.0


def _start_consumers(pipeline: PipelineProcesses, hub_url: str, count: int) -> list[Child]:
    names = [f"bench-{i}" for i in range(count)]
    consumers = [
        # the hub URL (maybe with a password) in the environment, off the command line
        pipeline.start(
            name,
            hubsync_command("consume", "--name", name, "--block-ms", "100"),
            env={"HUBSYNC_HUB_URL": hub_url},
        )
        for name in names
    ]
    client = connect(RedisTarget(pipeline.redis_url))
    try:
        pipeline.wait_until(
            lambda: all(client.exists(keys.consumer_health(name)) for name in names),
            30,
            "the hub consumers to start",
        )
    finally:
        client.close()
    return consumers


def _start_relay(pipeline: PipelineProcesses, directory: Path) -> Child:
    return pipeline.relay("relay", directory / "state")


class _CpuUse:
    """CPU seconds the relay, each consumer and each server used since this was made: where
    the CPU went (the machine has few cores: it is the budget)."""

    def __init__(
        self, relay: Child, consumers: list[Child], servers: Mapping[str, Callable[[], float]]
    ) -> None:
        self.relay, self.consumers, self.servers = relay, consumers, servers
        self._relay = cpu_seconds(relay.pid)
        self._consumers = [cpu_seconds(c.pid) for c in consumers]
        self._servers = {name: used() for name, used in servers.items()}

    def since_start(self) -> tuple[dict[str, float], list[float]]:
        """Seconds used by the relay, the consumers together and each server; by each
        consumer."""
        each = [
            cpu_seconds(c.pid) - before
            for c, before in zip(self.consumers, self._consumers, strict=True)
        ]
        used = {"relay": cpu_seconds(self.relay.pid) - self._relay, "consumers": sum(each)}
        return used | {name: f() - self._servers[name] for name, f in self.servers.items()}, each


def measure_end_to_end(
    url: str,
    events: int,
    hub_url: str | None = None,
    *,
    consumers: int = CONSUMERS,
    hub_projects: Sequence[str] = (HUB_PROJECT,),
    server_cpu: Mapping[str, Callable[[], float]] | None = None,
) -> dict[str, Any]:
    """Drain ``events`` from a runtime's outbox to the hub and back (acked); rate and peak RSS.

    The hub is a temp SQLite file, or a new schema of the PostgreSQL database
    ``hub_url`` names (``hubs.bench_hub``). ``consumers`` hub consumers share
    the work; the backlog is spread over one project per hub project of
    ``hub_projects``; ``url`` may be a Redis Cluster node's. ``server_cpu``
    names the servers whose CPU is counted, each a function giving the CPU
    seconds it has used so far (default: the Redis server's, ``INFO cpu``).
    """
    client = connect(RedisTarget(url))
    client.flushall()
    streams = [keys.events_stream(hub_project) for hub_project in hub_projects]
    servers = server_cpu or {"redis": lambda: redis_cpu_seconds(client)}
    with (
        tempfile.TemporaryDirectory(prefix="hubsync-bench-e2e-") as tmp,
        bench_hub(Path(tmp), hub_url) as hub,
    ):
        directory = Path(tmp)
        # Not joined yet: the relay starts (imports, opens its stores) without sending, so
        # the CPU it uses from the join on is the drain's alone, as it is the consumers'.
        registry, stores = runtime_with_backlogs(
            directory, events, hub_projects, hub_url=hub, join=False
        )
        with PipelineProcesses(url, directory / "logs") as pipeline:
            hub_consumers = _start_consumers(pipeline, hub, consumers)
            relay = _start_relay(pipeline, directory)
            runtime = registry.runtime_id
            pipeline.wait_until(lambda: client.exists(keys.relay_health(runtime)), 30, "the relay")
            cpu = _CpuUse(relay, hub_consumers, servers)
            join_bench_hub(registry, hub, hub_projects)
            seconds = _drain_seconds(pipeline, client, streams, stores, events, directory)
            relay_rss = peak_rss_mb(relay.pid)
            consumer_rss = max(peak_rss_mb(c.pid) for c in hub_consumers)
            used, each = cpu.since_start()
            pipeline.stop_all()
        acked = sum(store.outbox_counts()["acked"] for store in stores)
        for store in stores:
            store.close()
        registry.close()
        stored = hub_rows(hub)
    client.flushall()
    client.close()
    if acked != events or stored != events:
        raise BenchError(f"end to end: {acked} acked, {stored} stored of {events}")
    return {
        "hub": hub_kind(hub_url),
        "events": events,
        "relays": 1,
        "consumers": consumers,
        "hub_projects": len(hub_projects),
        "seconds": round(seconds, 3),
        "events_per_s": round(events / seconds),
        "target_events_per_s": 25_000,
        "relay_peak_rss_mb": round(relay_rss, 1),
        "consumer_peak_rss_mb": round(consumer_rss, 1),
        "cpu_us_per_event": {name: round(cpu / events * 1e6, 1) for name, cpu in used.items()},
        "consumer_cpu_us_per_event_each": [round(cpu / events * 1e6, 1) for cpu in each],
    }


def _drain_seconds(
    pipeline: PipelineProcesses,
    client: RedisClient,
    streams: Sequence[str],
    stores: Sequence[RunEventStore],
    events: int,
    directory: Path,
) -> float:
    """Seconds from the first entry of any stream (the relay's first XADD, on Redis's clock)
    to the moment no outbox row of ``stores`` is pending."""
    first_ms: dict[str, int] = {}  # each stream's first entry
    deadline = time.monotonic() + 60 + events / 1000
    while True:
        pipeline.check()  # a dead daemon ends the benchmark with its log
        for stream in streams:
            head: Any = None if stream in first_ms else client.xrange(stream, count=1)
            if head:
                first_ms[stream] = int(head[0][0].split(b"-")[0])
        now = time.time()
        if len(first_ms) == len(streams) and all(
            store.oldest_pending_age(now) is None for store in stores
        ):
            return time.time() - min(first_ms.values()) / 1000
        if time.monotonic() > deadline:
            raise BenchError(f"end-to-end drain did not finish; see {directory}")
        time.sleep(0.005)


def _received(hub_url: str) -> dict[tuple[str, int], float]:
    """When the hub received each event: its row's ``received_at`` (the hub transaction's time)."""
    received: dict[tuple[str, int], float] = {}
    with open_store(hub_url, create_schema=False) as hub:
        after = None
        while page := hub.events(HUB_PROJECT, after=after, limit=10_000):
            for event in page:
                received[(event.run_id, event.sequence)] = parse_timestamp(
                    event.received_at
                ).timestamp()
            after = page[-1].position
    return received


def _offer(store: RunEventStore, rate: int, seconds: float) -> dict[tuple[str, int], float]:
    """Commit ``rate`` events/s for ``seconds``; each event's commit time."""
    per_tick = max(1, round(rate * TICK_SECONDS))
    tick = per_tick / rate
    committed: dict[tuple[str, int], float] = {}
    pace = threading.Event()
    index = 0
    next_at = time.perf_counter()
    deadline = next_at + seconds
    while next_at < deadline:
        batch = [
            NewEvent(
                f"lat-{(index + i) // EVENTS_PER_RUN:05d}", "step.completed", payload(index + i)
            )
            for i in range(per_tick)
        ]
        appended = store.append_events(batch)
        now = time.time()
        for event in appended:
            committed[(event.run_id, event.sequence)] = now
        index += per_tick
        next_at += tick
        delay = next_at - time.perf_counter()
        if delay > 0:
            pace.wait(delay)
    return committed


def measure_latency(
    url: str, rate: int, seconds: float, hub_url: str | None = None
) -> dict[str, Any]:
    """Local commit -> hub commit latency at ``rate`` events/s offered (p50/p95/p99 in ms)."""
    client = connect(RedisTarget(url))
    client.flushall()
    with (
        tempfile.TemporaryDirectory(prefix="hubsync-bench-latency-") as tmp,
        bench_hub(Path(tmp), hub_url) as hub,
    ):
        directory = Path(tmp)
        registry, store = runtime_with_backlog(directory, 0, hub_url=hub)
        with PipelineProcesses(url, directory / "logs") as pipeline:
            _start_consumers(pipeline, hub, CONSUMERS)
            _start_relay(pipeline, directory)
            runtime = registry.runtime_id
            pipeline.wait_until(lambda: client.exists(keys.relay_health(runtime)), 30, "the relay")
            started = time.perf_counter()
            committed = _offer(store, rate, seconds)
            offered_for = time.perf_counter() - started
            pipeline.wait_until(lambda: hub_rows(hub) >= len(committed), 60, "the hub")
            pipeline.stop_all()
        store.close()
        registry.close()
        received = _received(hub)
    client.flushall()
    client.close()
    first = min(committed.values())
    latencies_ms = [
        (received[key] - at) * 1000 for key, at in committed.items() if at - first >= WARMUP_SECONDS
    ]
    figures = percentiles(latencies_ms)
    return {
        "hub": hub_kind(hub_url),
        "offered_events_per_s": rate,
        "achieved_events_per_s": round(len(committed) / offered_for),
        "events_measured": len(latencies_ms),
        "p50_ms": figures["p50"],
        "p95_ms": figures["p95"],
        "p99_ms": figures["p99"],
        "max_ms": round(max(latencies_ms), 3) if latencies_ms else 0.0,
    }
