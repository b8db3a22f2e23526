#!/usr/bin/env python3
"""Instructions per event of each stage and of its ceiling, counted by callgrind.

Rates on a shared machine move by a factor of two between runs minutes apart;
the instructions a process executes do not. Each part below runs in its own
Python process under ``valgrind --tool=callgrind`` (every thread counted),
twice, with ``--small`` and ``--large`` events, against a private
redis-server this script starts; the difference of the two totals over the
difference of the events is the part's cost per event, start-up and imports
cancelled out. The parts are the functions ``hubsync bench`` times
(``hubsync.benchmarks.stages``):

* ``relay``: ``Relay.run_once`` draining the backlog (reading, signing, sending, marks);
* ``relay-prepare``: reading the outbox rows and building the signed entries, alone;
* ``relay-ceiling``: the honest ceiling (``raw_xadd_seconds``), its rows read and
  signed first: less ``relay-prepare``, its send loop;
* ``consumer``: ``HubConsumer`` draining the stream into a new hub, every check made;
* ``consumer-ceiling``: raw XREADGROUP + executemany + XACK (``raw_ingest_seconds``);
* ``consumer-reads``: raw XREADGROUP + XACK alone (the ceiling without SQLite);
* ``consumer-checks``: the same reads, each entry proven by the consumer's fast path
  (``FastEventCheck.prove_pairs``: signature, hash, event proof) instead of acked:
  less ``consumer-reads``, what the checks add.

    python3 scripts/count_instructions.py                # every part, 1,000 and 5,000 events
    python3 scripts/count_instructions.py --parts consumer consumer-ceiling --json counts.json

valgrind must be installed (Debian's ``valgrind``). Python runs 50 to 100 times
slower under it: the default sizes take several minutes of one core.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from consumers.stream.authentication import RuntimeAuthenticator  # noqa: E402
from consumers.stream.fast_event_check import FastEventCheck  # noqa: E402
from consumers.stream.fast_reads import fields_of  # noqa: E402
from hubstore.factory import open_store  # noqa: E402
from hubsync.benchmarks.report_file import print_report  # noqa: E402
from hubsync.benchmarks.stages import (  # noqa: E402
    _ceiling_rows,
    bench_streams,
    consumer_seconds,
    preload,
    raw_ingest_seconds,
    raw_xadd_seconds,
    read_batches,
    relay_drain_seconds,
    signed_batch,
)
from hubsync.benchmarks.workload import HUB_PROJECT, runtime_with_backlog  # noqa: E402
from hubsync.core.connections import RedisTarget, connect  # noqa: E402
from hubsync.core.entries import decode_fields  # noqa: E402
from hubsync.core.gc_tuning import tune_for_throughput  # noqa: E402
from hubsync.core.settings import hub_url_from_path  # noqa: E402
from hubsync.demo.embedded_redis import RedisServerProcess  # noqa: E402
from producers.registry import RuntimeRegistry  # noqa: E402
from producers.store.event_store import RunEventStore  # noqa: E402

RELAY_PARTS = ("relay", "relay-prepare", "relay-ceiling")
CONSUMER_PARTS = ("consumer", "consumer-ceiling", "consumer-reads", "consumer-checks")
_TOTAL = re.compile(rb"^(?:summary|totals): (\d+)", re.MULTILINE)


# ----- one part, in the process callgrind counts -----


def _backlog_store(directory: Path) -> RunEventStore:
    """The event store of the one project ``runtime_with_backlog`` left in ``directory``."""
    registry = RuntimeRegistry(directory / "state")
    (registration,) = registry.projects()
    return registry.open_store(registration)


def run_part(part: str, url: str, directory: Path) -> int:
    """Run ``part`` once on the prepared ``directory``; the events it moved."""
    tune_for_throughput()  # what the daemons run with
    if part == "relay":  # the relay makes its own client, as the daemon does
        return relay_drain_seconds(url, directory / "state")[1]
    if part == "relay-prepare":
        _, builder, rows = _ceiling_rows(_backlog_store(directory))
        return len([builder.pairs(row) for row in rows])
    with closing(connect(RedisTarget(url), cluster=False)) as client:
        if part == "relay-ceiling":
            return raw_xadd_seconds(client, _backlog_store(directory))[1]
        if part == "consumer":
            return consumer_seconds(client, url, directory)[1]
        if part == "consumer-ceiling":
            return raw_ingest_seconds(client, directory)[1]
        if part == "consumer-reads":
            return raw_ingest_seconds(client, directory, with_sqlite=False)[1]
        return _checked(client, directory)


def _checked(client: redis.Redis, directory: Path) -> int:
    """Read the stream as ``consumer-reads`` does and prove each entry instead of acking."""
    with open_store(hub_url_from_path(directory / "hub.db"), create_schema=False) as hub:
        fast = FastEventCheck(RuntimeAuthenticator(hub))
        proven = 0
        for _, got in read_batches(client, bench_streams(client), "checks"):
            for _, pairs in got:
                if fast.prove_pairs(pairs, HUB_PROJECT) is None:
                    # a runtime's first entry: the general path caches its keys
                    fast.authenticator.event(decode_fields(fields_of(pairs)), HUB_PROJECT)
                    if fast.prove_pairs(pairs, HUB_PROJECT) is None:
                        raise SystemExit("the fast path declined a valid entry")
                proven += 1
        return proven


# ----- the driver -----


def prepare(client: redis.Redis, part: str, directory: Path, events: int) -> None:
    """A fresh ``directory`` and database for one run of ``part`` with ``events`` events."""
    if part in RELAY_PARTS:
        registry, store = runtime_with_backlog(directory, events)
        store.close()
        registry.close()
        client.flushall()
    else:
        directory.mkdir()
        preload(client, signed_batch(directory, events))


def count(part: str, url: str, directory: Path, events: int) -> int:
    """Instructions callgrind counted for one run of ``part``."""
    out = directory / "callgrind.out"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        __file__,
        "--run-part",
        part,
        url,
        str(directory),
        str(events),
    ]
    done = subprocess.run(command, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    if done.returncode != 0:
        raise SystemExit(f"{part} failed: {done.stderr.decode(errors='replace')[-2000:]}")
    found = _TOTAL.search(out.read_bytes())
    if found is None:
        raise SystemExit(f"no total in {out}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=RELAY_PARTS + CONSUMER_PARTS)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=5_000)
    parser.add_argument("--json", dest="json_out", help="write the JSON report to this file too")
    parser.add_argument("--run-part", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_part:
        part, url, directory, events = args.run_part
        if part not in RELAY_PARTS + CONSUMER_PARTS:
            raise SystemExit(f"unknown part {part!r}")
        moved = run_part(part, url, Path(directory))
        if moved != int(events):
            raise SystemExit(f"{part} moved {moved} of {events} events")
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt install valgrind)")
    parts = args.parts or [*RELAY_PARTS, *CONSUMER_PARTS]
    result: dict[str, float] = {}
    with (
        tempfile.TemporaryDirectory(prefix="hubsync-count-") as tmp,
        RedisServerProcess(directory=Path(tmp)) as server,
        closing(connect(RedisTarget(server.url), cluster=False)) as client,
    ):
        for part in parts:
            totals = []
            for events in (args.small, args.large):
                directory = Path(tmp) / f"{part}-{events}"
                prepare(client, part, directory, events)
                totals.append(count(part, server.url, directory, events))
            result[part] = round((totals[1] - totals[0]) / (args.large - args.small))
            print(f"{part:18} {result[part]:>9,} instructions per event", file=sys.stderr)
    differences = {
        "relay-ceiling send loop": ("relay-ceiling", "relay-prepare"),
        "consumer checks": ("consumer-checks", "consumer-reads"),
    }
    derived = {
        name: result[whole] - result[less]
        for name, (whole, less) in differences.items()
        if whole in result and less in result
    }
    for name, value in derived.items():
        print(f"{name:18} {value:>9,} instructions per event", file=sys.stderr)
    print_report({"parts": result, "derived": derived}, args.json_out)


if __name__ == "__main__":
    main()
