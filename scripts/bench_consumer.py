#!/usr/bin/env python3
"""Hub consumer ingest rate against its ceiling, measured in the same run.

Both sides start from the same entries pre-loaded on a private redis-server:

* ceiling: a raw loop of XREADGROUP (500), a plain executemany INSERT of the
  same rows into a fresh table of the same schema (one transaction per batch),
  and XACK; no validation, no dedupe, no outcomes.
* consumer: ``HubConsumer`` polling the same way (validation and hash check of
  every entry, one ``HubStore.ingest`` per batch, outcomes, XACK).

Then, per entry, out of Redis: the entry check alone (the consumer's,
``consumers.stream.fast_event_check.check_event_entry``, and the reference's,
``hubsync.core.entries.parse_event_entry``, whose pydantic model judges every event), and
authenticating and checking an entry as read, the general path beside the consumer's fast
path (``FastEventCheck``; ``lean_entry_check_us_per_event``).

Prints a table and, with ``--json FILE`` (or ``-`` for stdout), one JSON document.

    python3 scripts/bench_consumer.py --events 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from consumers.stream.authentication import RuntimeAuthenticator  # noqa: E402
from consumers.stream.fast_event_check import FastEventCheck, check_event_entry  # noqa: E402
from hubstore.factory import open_store  # noqa: E402
from hubsync.benchmarks.stages import BATCH, preload  # noqa: E402
from hubsync.benchmarks.stages import consumer_seconds as consumer  # noqa: E402
from hubsync.benchmarks.stages import raw_ingest_seconds as ceiling  # noqa: E402
from hubsync.benchmarks.workload import HUB_PROJECT, enroll_bench_runtimes  # noqa: E402
from hubsync.benchmarks.workload import entries as workload_entries  # noqa: E402
from hubsync.core.connections import RedisTarget, connect  # noqa: E402
from hubsync.core.entries import EventEntry, decode_fields, parse_event_entry  # noqa: E402
from hubsync.core.gc_tuning import tune_for_throughput  # noqa: E402
from hubsync.core.settings import hub_url_from_path  # noqa: E402
from hubsync.core.signing import RuntimeKey  # noqa: E402
from hubsync.demo.embedded_redis import RedisServerProcess  # noqa: E402

# The measuring loops (preload, ceiling, consumer) live in hubsync.benchmarks.stages,
# behind `hubsync bench` too; this script adds the entry's size (--payload-bytes), the
# number of runtimes (--runtimes) and the parse-cost figure.


def make_entries(
    count: int, payload_bytes: int, runtimes: int, hub_db: Path
) -> list[dict[str, str | bytes]]:
    """``count`` valid event entries over ``runtimes`` runtimes, each signed by its runtime,
    enrolled on the hub at ``hub_db``."""
    with open_store(hub_url_from_path(hub_db), create_schema=True) as hub:
        keys = enroll_bench_runtimes(hub, runtimes)
    return workload_entries(count, runtimes, keys, payload_bytes=payload_bytes)


def parse_cost(
    entries: list[dict[str, str | bytes]],
    check: Callable[[Mapping[str, bytes]], EventEntry] = check_event_entry,
) -> float:
    """Seconds per entry spent in ``check`` alone (validation + hash): the consumer's
    ``check_event_entry`` or the reference ``parse_event_entry`` (the pydantic model)."""
    decoded = [decode_fields(e) for e in entries[:5000]]
    started = time.perf_counter()
    for fields in decoded:
        check(fields)
    return (time.perf_counter() - started) / len(decoded)


def check_cost(entries: list[dict[str, str | bytes]], hub_db: Path, lean: bool) -> float:
    """Seconds per entry to authenticate and check an entry as redis-py reads it (bytes names
    and values): the general path (``decode_fields``, ``RuntimeAuthenticator.event``,
    ``check_event_entry``) or, with ``lean``, the consumer's fast path (``FastEventCheck``)
    over the same entries."""
    raws = [
        {
            name.encode(): value if isinstance(value, bytes) else value.encode()
            for name, value in entry.items()
        }
        for entry in entries[:5000]
    ]
    with open_store(hub_url_from_path(hub_db), create_schema=False) as hub:
        authenticator = RuntimeAuthenticator(hub)
        for raw in raws:  # each runtime's name and keys cached, as in a running consumer
            authenticator.event(decode_fields(raw), HUB_PROJECT)
        started = time.perf_counter()
        if lean:
            fast = FastEventCheck(authenticator)
            for raw in raws:
                if fast.prove(raw, HUB_PROJECT) is None:
                    raise SystemExit("the fast path declined a valid entry")
        else:
            for raw in raws:
                fields = decode_fields(raw)
                if not isinstance(authenticator.event(fields, HUB_PROJECT), RuntimeKey):
                    raise SystemExit("a valid entry did not authenticate")
                check_event_entry(fields)
        return (time.perf_counter() - started) / len(raws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--payload-bytes", type=int, default=200)
    parser.add_argument("--runtimes", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs of each side")
    parser.add_argument("--json", dest="json_out", help="write the JSON result here (- = stdout)")
    args = parser.parse_args()

    tune_for_throughput()  # what a consumer daemon runs with
    best_raw, best_hub = float("inf"), float("inf")
    with (
        tempfile.TemporaryDirectory(prefix="hubsync-bench-") as tmp,
        RedisServerProcess(directory=Path(tmp)) as server,
    ):
        client = connect(RedisTarget(server.url), cluster=False)
        for attempt in range(args.repeat):
            run_dir = Path(tmp) / f"run-{attempt}"
            run_dir.mkdir()
            # a new hub each round (its own keys), as the consumer's database is new
            entries = make_entries(
                args.events, args.payload_bytes, args.runtimes, run_dir / "hub.db"
            )
            preload(client, entries)
            raw_s, raw_rows = ceiling(client, run_dir)
            preload(client, entries)
            hub_s, hub_rows = consumer(client, server.url, run_dir)
            if raw_rows != args.events or hub_rows != args.events:
                raise SystemExit(f"row count mismatch: raw {raw_rows}, hub {hub_rows}")
            best_raw, best_hub = min(best_raw, raw_s), min(best_hub, hub_s)
        client.close()
        # the last round's hub, whose runtimes signed ``entries``
        per_check = min(check_cost(entries, run_dir / "hub.db", lean=False) for _ in range(3))
        per_lean = min(check_cost(entries, run_dir / "hub.db", lean=True) for _ in range(3))

    per_parse = min(parse_cost(entries) for _ in range(3))
    per_model = min(parse_cost(entries, parse_event_entry) for _ in range(3))
    result = {
        "events": args.events,
        "payload_bytes": args.payload_bytes,
        "batch": BATCH,
        "ceiling_events_per_s": round(args.events / best_raw),
        "consumer_events_per_s": round(args.events / best_hub),
        "ratio": round(best_raw / best_hub, 3),
        "target_ratio": 0.6,
        "parse_us_per_event": round(per_parse * 1e6, 1),
        "model_parse_us_per_event": round(per_model * 1e6, 1),
        "entry_check_us_per_event": round(per_check * 1e6, 1),
        "lean_entry_check_us_per_event": round(per_lean * 1e6, 1),
        "consumer_us_per_event": round(best_hub / args.events * 1e6, 1),
        "ceiling_us_per_event": round(best_raw / args.events * 1e6, 1),
    }
    print(f"{'measure':<28}{'value':>14}")
    for name, value in result.items():
        print(f"{name:<28}{value!s:>14}")
    if args.json_out == "-":
        print(json.dumps(result, sort_keys=True))
    elif args.json_out:
        Path(args.json_out).write_text(json.dumps(result, sort_keys=True, indent=2) + "\n")


if __name__ == "__main__":
    main()
