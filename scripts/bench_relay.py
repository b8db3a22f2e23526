#!/usr/bin/env python3
"""Relay benchmark: drain rate against raw XADD packed as the relay packs, RSS on a big backlog, latency.

Everything runs on a private redis-server started here, side by side in one
run, so the ratios hold on a noisy machine even when the absolute figures move.

* drain: the relay drains an outbox of N events (``Relay.run_once``); the
  ceiling is ``hubsync bench``'s: the identical entries (same fields, same
  bytes) XADDed in batches of the same size, packed and written as the relay
  packs and writes them, with no outbox work (``hubsync.benchmarks.ceilings``).
* rss: peak RSS of a ``hubsync relay`` process draining a large backlog.
* latency: commit -> XADD at a fixed offered load, p50/p95/p99.

Prints a table and one JSON document (``--json FILE`` also writes it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

from hubsync.benchmarks.stages import raw_xadd_seconds, relay_drain_seconds
from hubsync.benchmarks.workload import HUB_PROJECT, join_bench_hub
from hubsync.core import keys
from hubsync.core.clock import parse_timestamp
from hubsync.core.connections import RedisTarget, connect
from hubsync.core.entries import decode_fields, entry_kind
from hubsync.core.settings import RelaySettings, hub_url_from_path
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.processes import Child, hubsync_command
from producers.registry import RuntimeRegistry
from producers.relay import Relay
from producers.store.event_store import NewEvent, RunEventStore

PAYLOAD = {
    "step": "build",
    "status": "ok",
    "duration_ms": 1234,
    "attempt": 1,
    "message": "compiled 42 modules, linked 3 artifacts, all checks green " * 4,
}


def make_store(root: Path, events: int, runs: int = 10) -> tuple[RuntimeRegistry, RunEventStore]:
    """A runtime enrolled on a hub at ``ROOT/hub.db`` (a relay sends nothing before), whose
    project's outbox holds ``events`` rows."""
    registry = RuntimeRegistry(root / "state")
    join_bench_hub(registry, hub_url_from_path(root / "hub.db"))
    registration = registry.register_project(root / "project", hub_project=HUB_PROJECT)
    store = registry.open_store(registration)
    batch: list[NewEvent] = []
    for index in range(events):
        batch.append(NewEvent(f"run-{index % runs}", "step.completed", PAYLOAD))
        if len(batch) == 5_000:
            store.append_events(batch)
            batch.clear()
    if batch:
        store.append_events(batch)
    return registry, store


def raw_xadd_rate(client: redis.Redis, store: RunEventStore, batch: int) -> float:
    """The ceiling: the store's rows XADDed as raw batches, packed as the relay packs
    (``hubsync.benchmarks``)."""
    seconds, count = raw_xadd_seconds(client, store, batch)
    return count / seconds


def relay_rate(url: str, state_dir: Path, batch: int) -> float:
    """``Relay.run_once`` draining the backlog (``hubsync.benchmarks``), events/s."""
    seconds, sent = relay_drain_seconds(url, state_dir, batch)
    return sent / seconds


def measure_drain(url: str, events: int, batch: int, rounds: int) -> dict[str, float]:
    client = connect(RedisTarget(url), cluster=False)
    relay_rates, ceiling_rates = [], []
    for _ in range(rounds):
        client.flushall()
        with tempfile.TemporaryDirectory() as tmp:
            registry, store = make_store(Path(tmp), events)
            ceiling_rates.append(raw_xadd_rate(client, store, batch))
            store.close()
            registry.close()
            relay_rates.append(relay_rate(url, Path(tmp) / "state", batch))
    client.close()
    relay_best, ceiling_best = max(relay_rates), max(ceiling_rates)
    return {
        "events": events,
        "events_per_s": round(relay_best),
        "ceiling_events_per_s": round(ceiling_best),
        "ratio": round(relay_best / ceiling_best, 3),
    }


def measure_rss(url: str, events: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        registry, store = make_store(Path(tmp), events)
        store.close()
        registry.close()
        argv = hubsync_command(
            "relay", "--state-dir", str(Path(tmp) / "state"), "--redis-url", url, "--once"
        )
        relay = Child("relay", argv, Path(tmp) / "relay.log").start()
        samples = []
        while relay.alive:
            try:
                status = Path(f"/proc/{relay.pid}/status").read_text()
            except FileNotFoundError:
                break
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    samples.append(int(line.split()[1]) / 1024)
            time.sleep(0.2)
        relay.wait()
    return {
        "events": events,
        "peak_rss_mb": round(max(samples, default=0.0), 1),
        "first_rss_mb": round(samples[0], 1) if samples else 0.0,
    }


def measure_latency(url: str, rate: int, seconds: float) -> dict[str, float]:
    client = connect(RedisTarget(url), cluster=False)
    client.flushall()
    with tempfile.TemporaryDirectory() as tmp:
        registry, store = make_store(Path(tmp), 0)
        relay = Relay(RelaySettings(state_dir=Path(tmp) / "state", redis_url=url), registry)
        runner = threading.Thread(target=relay.run, daemon=True)
        runner.start()
        latencies: list[float] = []
        stream = keys.events_stream("bench", registry.runtime_id)
        done = threading.Event()

        def read() -> None:
            last = "0-0"
            reader = connect(RedisTarget(url), cluster=False)
            while not done.is_set():
                reply = reader.xread({stream: last}, block=200, count=1000)
                for _, entries in reply or []:
                    for entry_id, raw in entries:
                        last = entry_id
                        fields = decode_fields(raw)
                        if entry_kind(fields) != "event":
                            continue
                        body = json.loads(fields["event"])
                        sent_at = parse_timestamp(body["occurred_at"]).timestamp()
                        latencies.append(time.time() - sent_at)
            reader.close()

        reader_thread = threading.Thread(target=read, daemon=True)
        reader_thread.start()
        interval = 1.0 / rate
        next_at = time.perf_counter()
        deadline = next_at + seconds
        index = 0
        while next_at < deadline:
            store.append_event(f"run-{index % 10}", "step.completed", PAYLOAD)
            index += 1
            next_at += interval
            pause = next_at - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        time.sleep(0.5)
        done.set()
        reader_thread.join()
        relay.request_stop()
        runner.join()
        relay.close()
        store.close()
        registry.close()
    client.close()
    latencies.sort()
    pick = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 2)  # noqa: E731
    return {
        "offered_events_per_s": rate,
        "events": len(latencies),
        "p50_ms": pick(0.50),
        "p95_ms": pick(0.95),
        "p99_ms": pick(0.99),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 2) if latencies else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rss-events", type=int, default=1_000_000)
    parser.add_argument("--latency-rate", type=int, default=1_000)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="small sizes, about a minute")
    parser.add_argument("--json", dest="json_file", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.events, args.rounds, args.rss_events, args.latency_seconds = 20_000, 2, 100_000, 5.0

    with RedisServerProcess() as server:
        result = {
            "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
            "drain": measure_drain(server.url, args.events, args.batch, args.rounds),
            "latency": measure_latency(server.url, args.latency_rate, args.latency_seconds),
            "rss": measure_rss(server.url, args.rss_events),
        }
    drain, latency, rss = result["drain"], result["latency"], result["rss"]
    print(f"{'measure':<38}{'value':>14}")
    print(f"{'relay drain (events/s)':<38}{drain['events_per_s']:>14,}")
    print(f"{'raw XADD ceiling (events/s)':<38}{drain['ceiling_events_per_s']:>14,}")
    print(f"{'relay / ceiling':<38}{drain['ratio']:>14}")
    print(f"{'commit->XADD p50 / p99 (ms)':<38}{latency['p50_ms']:>7} /{latency['p99_ms']:>5}")
    print(
        f"{'relay peak RSS, ' + str(rss['events']) + ' backlog (MB)':<38}{rss['peak_rss_mb']:>14}"
    )
    print(json.dumps(result, indent=2))
    if args.json_file:
        args.json_file.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
