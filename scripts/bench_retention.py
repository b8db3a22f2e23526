#!/usr/bin/env python3
"""Benchmark: a store holding a million acked outbox rows prunes back while a writer appends.

1. Builds a runtime whose one project store holds ``--rows`` acked outbox rows
   (and their local events), two days old, written with ``executemany`` in one
   transaction (not through ``append_event``: that would take an hour).
2. A writer in another process (as a runtime's appender is) appends
   ``--rate`` events a second through ``append_event`` and times each call:
   first while nothing else touches the store (idle), then while the relay's
   ``Pruner`` prunes the store back with the default retention of one day.
3. After the pruning the writer appends ``--after`` more events, to show the
   freed pages are reused: the file stops growing.

Prints a table on stderr and one JSON document on stdout: append p50/p99 idle
and during pruning (target: during p99 at most 2x idle), rows pruned, pruning
time, and the file's size before and after (the main file, its WAL, and the
live part: pages not on SQLite's free list).

Usage: scripts/bench_retention.py [--rows 1000000] [--rate 200] [--idle-seconds 10]
       [--payload-bytes 600] [--after 20000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sqlite3
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from hubsync.core.settings import RelaySettings
from producers.registry import RuntimeRegistry
from producers.relay.pruner import Pruner

TARGET_RATIO = 2.0
DAY = 86_400.0
ROWS_PER_RUN = 1000


def build(state_dir: Path, rows: int, payload_bytes: int) -> Path:
    """A runtime with one project whose store holds ``rows`` acked rows, two days old."""
    with RuntimeRegistry(state_dir) as registry:
        root = state_dir.parent / "project"
        root.mkdir(parents=True, exist_ok=True)
        registration = registry.register_project(root, hub_project="bench")
        with registry.open_store(registration) as store:
            path = store.path
            project_id = store.project_id
    old = time.time() - 2 * DAY
    filler = "x" * payload_bytes
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA synchronous=OFF")
    connection.execute("BEGIN")
    for start in range(0, rows, 100_000):
        chunk = range(start, min(rows, start + 100_000))
        connection.executemany(
            "INSERT INTO run_events (run_id, sequence, event_type, occurred_at, recorded_at, "
            "payload) VALUES (?, ?, 'step.completed', '2020-01-01T00:00:00.000000Z', ?, ?)",
            (
                (f"run-{i // ROWS_PER_RUN}", i % ROWS_PER_RUN + 1, old, f'{{"f":"{filler}"}}')
                for i in chunk
            ),
        )
        # The store is new and empty: row i takes seq i + 1, as append_event would give it.
        connection.executemany(
            "INSERT INTO outbox (seq, run_id, sequence, event_type, content_hash, "
            "created_at, attempts, attempted_at, acked_at, outcome, outcome_at) "
            "VALUES (?, ?, ?, 'step.completed', ?, ?, 1, ?, ?, 'accepted', ?)",
            (
                (i + 1, f"run-{i // ROWS_PER_RUN}", i % ROWS_PER_RUN + 1, f"{i:064x}") + (old,) * 4
                for i in chunk
            ),
        )
        connection.executemany(
            "INSERT INTO outbox_payloads (seq, sync_event) VALUES (?, ?)",
            (
                (
                    i + 1,
                    f'{{"project_id":"{project_id}","data":{{"f":"{filler}"}},"i":{i}}}'.encode(),
                )
                for i in chunk
            ),
        )
    connection.execute("COMMIT")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return path


def sizes(path: Path) -> dict[str, int]:
    """The main file, its WAL, and the live bytes (pages not on the free list)."""
    wal = path.with_name(path.name + "-wal")
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    page_size, pages, free = (
        connection.execute(f"PRAGMA {name}").fetchone()[0]
        for name in ("page_size", "page_count", "freelist_count")
    )
    connection.close()
    return {
        "file_bytes": path.stat().st_size,
        "wal_bytes": wal.stat().st_size if wal.exists() else 0,
        "live_bytes": (pages - free) * page_size,
    }


def writer(state_dir: str, rate: float, stop: Event, out: Connection) -> None:
    """Append ``rate`` events a second until ``stop``; send back each call's seconds."""
    with RuntimeRegistry(state_dir, create=False) as registry:
        (registration,) = registry.projects()
        with registry.open_store(registration, environ={}) as store:
            latencies: list[float] = []
            interval = 1.0 / rate
            next_at = time.perf_counter()
            n = 0
            while not stop.is_set():
                started = time.perf_counter()
                store.append_event("live-run", "step.completed", {"step_id": f"s{n}", "ok": True})
                latencies.append(time.perf_counter() - started)
                n += 1
                next_at += interval
                time.sleep(max(0.0, next_at - time.perf_counter()))
    out.send(latencies)


def timed_appends(state_dir: Path, rate: float, during: Any) -> tuple[list[float], Any]:
    """Run the writer process while ``during()`` runs; its latencies and what ``during`` returned."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=writer, args=(str(state_dir), rate, stop, send))
    process.start()
    time.sleep(1.0)  # the writer's start-up is not an append
    try:
        result = during()
    finally:
        stop.set()
    latencies = receive.recv()[int(rate) :]  # drop the first second (imports, first open)
    process.join()
    return latencies, result


def percentiles(latencies: list[float]) -> dict[str, float]:
    """p50 and p99 in milliseconds."""
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "appends": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(p99 * 1000, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=200.0, help="appends a second")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--payload-bytes", type=int, default=600)
    parser.add_argument("--after", type=int, default=20_000, help="appends after pruning")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hubsync-retention-") as tmp:
        state_dir = Path(tmp) / "state"
        started = time.monotonic()
        path = build(state_dir, args.rows, args.payload_bytes)
        build_seconds = time.monotonic() - started
        before = sizes(path)

        idle, _ = timed_appends(state_dir, args.rate, lambda: time.sleep(args.idle_seconds))

        def prune() -> dict[str, float]:
            with RuntimeRegistry(state_dir, create=False) as registry:
                pruner = Pruner(RelaySettings(state_dir=state_dir), registry)
                begun = time.monotonic()
                total = 0
                while True:  # a pass stops after MAX_CHUNKS_PER_PASS chunks: run passes to the end
                    pruned = pruner.prune_once().outbox_rows
                    if pruned == total:
                        break
                    total = pruned
                pruner.close()
                return {"pruned_rows": total, "seconds": round(time.monotonic() - begun, 2)}

        during, pruning = timed_appends(state_dir, args.rate, prune)
        pruned = sizes(path)

        with RuntimeRegistry(state_dir, create=False) as registry:
            (registration,) = registry.projects()
            with registry.open_store(registration, environ={}) as store:
                for n in range(args.after):
                    store.append_event("after-run", "step.completed", {"step_id": f"s{n}"})
        after = sizes(path)

    report = {
        "rows": args.rows,
        "build_seconds": round(build_seconds, 1),
        "rate_per_second": args.rate,
        "idle": percentiles(idle),
        "during_pruning": percentiles(during),
        "pruning": pruning,
        "size_before": before,
        "size_after_pruning": pruned,
        "size_after_more_appends": {**after, "appends": args.after},
    }
    ratio = report["during_pruning"]["p99_ms"] / max(report["idle"]["p99_ms"], 1e-9)
    report["p99_ratio"] = round(ratio, 2)
    report["target_ratio"] = TARGET_RATIO
    report["ok"] = ratio <= TARGET_RATIO

    mb = 1024 * 1024
    lines = [
        f"{'':24}{'appends':>9}{'p50 ms':>9}{'p99 ms':>9}",
        *(
            f"{name:24}{r['appends']:>9}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}"
            for name, r in (("idle", report["idle"]), ("during pruning", report["during_pruning"]))
        ),
        f"p99 during / idle: {ratio:.2f} (target <= {TARGET_RATIO})",
        f"pruned {pruning['pruned_rows']} rows in {pruning['seconds']}s",
        f"{'':24}{'file MB':>9}{'wal MB':>9}{'live MB':>9}",
        *(
            f"{name:24}{s['file_bytes'] / mb:>9.1f}{s['wal_bytes'] / mb:>9.1f}"
            f"{s['live_bytes'] / mb:>9.1f}"
            for name, s in (
                ("before", before),
                ("after pruning", pruned),
                (f"after {args.after} appends", after),
            )
        ),
    ]
    print("\n".join(lines), file=sys.stderr)
    print(json.dumps(report, sort_keys=True))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
