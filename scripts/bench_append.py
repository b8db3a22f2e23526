#!/usr/bin/env python3
"""Benchmark: ``append_event`` (derive + redact + hash + outbox) against a bare insert.

In the same run, on the same disk, with the same SQLite settings (WAL, the
same ``synchronous`` level), it times:

* ``bare``: one transaction per event inserting the event's JSON bytes into a
  table shaped like ``run_events`` (no derivation, no redaction, no outbox);
* ``append_event``: the real path, one transaction per event;
* ``bare_batch`` and ``append_events``: the same, ``--batch-size`` events per
  transaction.

Rounds alternate between the paths and the median round counts, so a noisy
neighbour hurts both sides alike. The target is ``append_event`` at most 1.5x
the bare insert's time per event. Prints a table on stderr and one JSON
document on stdout.

Usage: scripts/bench_append.py [--events 2000] [--rounds 5] [--payload-bytes 512]
       [--batch-size 100] [--synchronous FULL --synchronous NORMAL]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from producers.derivation import StoreIdentity
from producers.store.event_store import RUN_EVENTS_DDL, NewEvent, RunEventStore
from producers.synthetic import run_events

IDENTITY = StoreIdentity("bench-project", "bench", "rt-bench-00000000")
TARGET_RATIO = 1.5

BARE_INSERT = (
    "INSERT INTO run_events (run_id, sequence, event_type, occurred_at, recorded_at, payload) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


def workload(events: int, payload_bytes: int) -> list[tuple[str, str, dict[str, Any]]]:
    """``events`` (run_id, event_type, payload) of runs of 50 events."""
    rng = random.Random(7)
    items: list[tuple[str, str, dict[str, Any]]] = []
    run = 0
    while len(items) < events:
        run += 1
        for event_type, payload in run_events(50, payload_bytes, rng=rng):
            items.append((f"run-{run}", event_type, payload))
    return items[:events]


class Bare:
    """The baseline: the event's bytes into a run_events-shaped table, nothing else."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute(f"PRAGMA synchronous={synchronous}")
        self.connection.execute(RUN_EVENTS_DDL)
        self.sequence = 0

    def rows(self, items: list[tuple[str, str, str]]) -> list[tuple[Any, ...]]:
        rows = []
        for run_id, event_type, text in items:
            self.sequence += 1
            rows.append(
                (run_id, self.sequence, event_type, "2026-01-01T00:00:00.000000Z", 0.0, text)
            )
        return rows

    def insert_each(self, items: list[tuple[str, str, str]]) -> None:
        for row in self.rows(items):
            self.connection.execute("BEGIN IMMEDIATE")
            self.connection.execute(BARE_INSERT, row)
            self.connection.execute("COMMIT")

    def insert_batches(self, items: list[tuple[str, str, str]], size: int) -> None:
        rows = self.rows(items)
        for start in range(0, len(rows), size):
            self.connection.execute("BEGIN IMMEDIATE")
            self.connection.executemany(BARE_INSERT, rows[start : start + size])
            self.connection.execute("COMMIT")


def timed(action: Callable[[], None], count: int) -> float:
    started = time.perf_counter()
    action()
    return count / (time.perf_counter() - started)


def bench_mode(synchronous: str, args: argparse.Namespace) -> dict[str, Any]:
    items = workload(args.events, args.payload_bytes)
    texts = [
        (run_id, event_type, json.dumps(payload, ensure_ascii=False, separators=(",", ":")))
        for run_id, event_type, payload in items
    ]
    rates: dict[str, list[float]] = {
        k: [] for k in ("bare", "append_event", "bare_batch", "append_events")
    }
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        bare = Bare(directory / "bare.sqlite", synchronous)
        store = RunEventStore(
            directory / "store.sqlite", IDENTITY, environ={}, synchronous=synchronous
        )
        store.redactor.register("bench-registered-secret")  # a realistic redactor, not an empty one
        size = args.batch_size

        def append_each() -> None:
            for run_id, event_type, payload in items:
                store.append_event(run_id, event_type, payload)

        def append_batches() -> None:
            for start in range(0, len(items), size):
                store.append_events([NewEvent(*item) for item in items[start : start + size]])

        timed(lambda: bare.insert_each(texts[:100]), 100)  # warm both files up
        timed(lambda: store.append_events([NewEvent(*i) for i in items[:100]]), 100)
        for _ in range(args.rounds):
            rates["bare"].append(timed(lambda: bare.insert_each(texts), len(items)))
            rates["append_event"].append(timed(append_each, len(items)))
            rates["bare_batch"].append(timed(lambda: bare.insert_batches(texts, size), len(items)))
            rates["append_events"].append(timed(append_batches, len(items)))
        store.close()
        bare.connection.close()
    median = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "synchronous": synchronous,
        "events_per_round": len(items),
        "rounds": args.rounds,
        "batch_size": size,
        "events_per_second": {k: round(v, 1) for k, v in median.items()},
        "us_per_event": {k: round(1e6 / v, 1) for k, v in median.items()},
        "ratio_append_event_vs_bare": round(median["bare"] / median["append_event"], 3),
        "ratio_append_events_vs_bare_batch": round(
            median["bare_batch"] / median["append_events"], 3
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2000, help="events per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (median)")
    parser.add_argument("--payload-bytes", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument(
        "--synchronous",
        action="append",
        choices=["FULL", "NORMAL"],
        help="SQLite durability level(s) to measure [default: FULL and NORMAL]",
    )
    args = parser.parse_args()
    results = [bench_mode(mode, args) for mode in args.synchronous or ["FULL", "NORMAL"]]
    report = {
        "benchmark": "append",
        "payload_bytes": args.payload_bytes,
        "target_ratio": TARGET_RATIO,
        "modes": results,
    }
    header = f"{'sync':7} {'path':14} {'events/s':>10} {'us/event':>9} {'ratio':>6}"
    print(header, file=sys.stderr)
    for mode in results:
        rates, costs = mode["events_per_second"], mode["us_per_event"]
        ratios = {
            "append_event": mode["ratio_append_event_vs_bare"],
            "append_events": mode["ratio_append_events_vs_bare_batch"],
        }
        for path in ("bare", "append_event", "bare_batch", "append_events"):
            ratio = f"{ratios[path]:.2f}x" if path in ratios else ""
            print(
                f"{mode['synchronous']:7} {path:14} {rates[path]:>10.0f} {costs[path]:>9.1f} "
                f"{ratio:>6}",
                file=sys.stderr,
            )
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
