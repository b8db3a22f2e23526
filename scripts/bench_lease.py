#!/usr/bin/env python3
"""Benchmark: lease acquire+release pairs per second, hubsync vs redis-py's ``Lock``.

Both run against the same private redis-server (started here, never the
machine's 6379), on one connection each, in the same run, interleaved in rounds
so that drift in the machine's load hits both alike. Ours also keeps the fence,
writes the audit entry and checks the proof; the target is at least 0.7x Lock.

    python3 scripts/bench_lease.py [--pairs 5000] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import redis

from hubsync.benchmarks.report_file import print_report
from hubsync.core.connections import RedisTarget, connect
from hubsync.demo.embedded_redis import RedisServerProcess


def _ours(client: redis.Redis, pairs: int) -> float:
    from hubstore.leases import LeaseClient

    leases = LeaseClient(client)
    started = time.perf_counter()
    for i in range(pairs):
        granted = leases.acquire_or_raise(f"bench-{i % 64}", "bench-holder", 30_000)
        leases.release_or_raise(granted.lease)
    return pairs / (time.perf_counter() - started)


def _redis_py_lock(client: redis.Redis, pairs: int) -> float:
    started = time.perf_counter()
    for i in range(pairs):
        lock = client.lock(f"bench-lock-{i % 64}", timeout=30)
        if not lock.acquire(blocking=False):
            raise RuntimeError("redis-py Lock unexpectedly held")
        lock.release()
    return pairs / (time.perf_counter() - started)


def run(url: str, pairs: int, rounds: int) -> dict[str, object]:
    """Measure both, ``rounds`` times each, interleaved; report the medians."""
    client = connect(RedisTarget(url), cluster=False)
    contenders: dict[str, Callable[[redis.Redis, int], float]] = {
        "hubsync_lease": _ours,
        "redis_py_lock": _redis_py_lock,
    }
    for bench in contenders.values():  # warm-up: script load, connection, allocator
        bench(client, min(pairs, 200))
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, bench in contenders.items():
            samples[name].append(bench(client, pairs))
    client.close()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "benchmark": "lease acquire+release pairs per second",
        "pairs_per_round": pairs,
        "rounds": rounds,
        "pairs_per_second": {name: round(value, 1) for name, value in medians.items()},
        "samples": {name: [round(v, 1) for v in values] for name, values in samples.items()},
        "ratio_vs_redis_py_lock": round(medians["hubsync_lease"] / medians["redis_py_lock"], 3),
        "target_ratio": 0.7,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run on a private redis-server (or --redis-url), print JSON and a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5000, help="pairs per round per contender")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", dest="json_path", help="also write the JSON report here")
    parser.add_argument("--redis-url", help="use this Redis instead of a private one")
    args = parser.parse_args(argv)
    if args.redis_url:
        report = run(args.redis_url, args.pairs, args.rounds)
    else:
        with RedisServerProcess() as server:
            report = run(server.url, args.pairs, args.rounds)
    print_report(report, args.json_path)
    rates = report["pairs_per_second"]
    assert isinstance(rates, dict)
    print(f"\n{'contender':<16} {'pairs/s':>10}", file=sys.stderr)
    for name, rate in rates.items():
        print(f"{name:<16} {rate:>10.1f}", file=sys.stderr)
    print(f"{'ratio':<16} {report['ratio_vs_redis_py_lock']:>10} (target >= 0.7)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
