#!/usr/bin/env python3
"""``HubStore.ingest`` alone, SQLite beside PostgreSQL: the consumer's hot path without Redis.

Each backend gets a new, empty store and the same validated entries
(``--events``, 10,000; runs of 100 events over 4 projects, 540-byte events),
ingested in batches of ``--batch`` (500) three ways:

* ``new``: every event new (the steady state of a consumer);
* ``again``: the same batches again, every event a duplicate (a redelivery);
* ``racing``: ``--writers`` (4) processes ingest the same events at once, each
  in its own order, into a new store; the rate counts each event once.

SQLite is a file in a temp dir; PostgreSQL is ``--hub-url`` or, without it, a
private cluster this script starts with initdb (``hubsync.servers.postgres``, through
``tests/helpers/postgres_server.py`` as the tests do). The median of
``--repeat`` (3) runs is printed; ``--json FILE`` (or ``-``) writes one JSON
document.

    python3 scripts/bench_hub_store.py
    python3 scripts/bench_hub_store.py --hub-url postgresql://hubsync@db/hubsync_bench
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hubstore import hub_url_from_path, open_store  # noqa: E402
from hubsync.benchmarks.workload import entries as workload_entries  # noqa: E402
from hubsync.core.entries import EventEntry, decode_fields, parse_event_entry  # noqa: E402


def make_entries(count: int) -> list[EventEntry]:
    """``count`` validated entries: runs of 100 events over 4 runtimes, 200-byte outputs."""
    fields = workload_entries(count, runtimes=4, payload_bytes=200)
    return [parse_event_entry(decode_fields(entry)) for entry in fields]


def batches(entries: list[EventEntry], size: int) -> list[list[EventEntry]]:
    return [entries[i : i + size] for i in range(0, len(entries), size)]


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def ingest_all(url: str, count: int, size: int, seed: int, start: object) -> float:
    """One racing writer: the entries in its own order, batch by batch; its seconds."""
    entries = make_entries(count)
    random.Random(seed).shuffle(entries)
    with open_store(url, create_schema=False) as store:
        start.wait()  # type: ignore[attr-defined]  # every writer ready: all go at once
        return timed(lambda: [store.ingest(b) for b in batches(entries, size)])


def measure(new_url: Callable[[], str], args: argparse.Namespace) -> dict[str, float]:
    entries = make_entries(args.events)
    rounds: dict[str, list[float]] = {"new": [], "again": [], "racing": []}
    for _ in range(args.repeat):
        with open_store(new_url(), create_schema=True) as store:
            parts = batches(entries, args.batch)
            rounds["new"].append(timed(lambda: [store.ingest(b) for b in parts]))  # noqa: B023
            rounds["again"].append(timed(lambda: [store.ingest(b) for b in parts]))  # noqa: B023
            assert store.count_events() == args.events
        url = new_url()
        open_store(url, create_schema=True).close()
        context = multiprocessing.get_context("spawn")
        with context.Manager() as manager, ProcessPoolExecutor(args.writers, context) as pool:
            start = manager.Barrier(args.writers)
            futures = [
                pool.submit(ingest_all, url, args.events, args.batch, seed, start)
                for seed in range(args.writers)
            ]
            rounds["racing"].append(max(f.result() for f in futures))
        with open_store(url, create_schema=False) as store:
            assert store.count_events() == args.events
    return {name: args.events / statistics.median(values) for name, values in rounds.items()}


@contextmanager
def sqlite_urls() -> Iterator[Callable[[], str]]:
    with tempfile.TemporaryDirectory(prefix="hubsync-bench-") as directory:
        counter = iter(range(1_000_000))
        yield lambda: hub_url_from_path(Path(directory) / f"hub-{next(counter)}.db")


@contextmanager
def postgres_urls(hub_url: str | None) -> Iterator[Callable[[], str]]:
    if hub_url is not None:
        import psycopg

        from hubstore.postgres.connection import postgres_target
        from hubstore.postgres.schema import TABLES, VERSION_TABLE

        def fresh() -> str:  # the same database, emptied
            with psycopg.connect(postgres_target(hub_url).conninfo, autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {', '.join((*TABLES, VERSION_TABLE))}")
            return hub_url

        yield fresh
        return
    from tests.helpers.postgres_server import PostgresCluster

    with PostgresCluster.start() as cluster:
        yield lambda: cluster.url(cluster.create_database())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hub-url", help="a PostgreSQL database to use (its hub tables dropped)")
    parser.add_argument("--json", help="write the results as JSON to this file (- for stdout)")
    args = parser.parse_args()
    results = {}
    with sqlite_urls() as urls:
        results["sqlite"] = measure(urls, args)
    with postgres_urls(args.hub_url) as urls:
        results["postgresql"] = measure(urls, args)
    print(
        f"{args.events} events in batches of {args.batch}, median of {args.repeat}:",
        file=sys.stderr,
    )
    print(f"{'events/s':<12}{'new':>10}{'again':>10}{'racing':>10}", file=sys.stderr)
    for backend, rates in results.items():
        print(
            f"{backend:<12}{rates['new']:>10,.0f}{rates['again']:>10,.0f}{rates['racing']:>10,.0f}",
            file=sys.stderr,
        )
    if args.json:
        document = json.dumps({"events": args.events, "batch": args.batch} | results, indent=2)
        if args.json == "-":
            print(document)
        else:
            Path(args.json).write_text(document + "\n")


if __name__ == "__main__":
    main()
