"""``hubsync bench``: every measurement in one run, one JSON document and one table.

The JSON's top-level keys are ``relay``, ``consumer``, ``end_to_end``,
``latency``, ``signature``, ``tracing``, ``peers`` and ``machine``; every throughput entry has
``events_per_s`` and, where a ceiling applies, ``ceiling_events_per_s``
measured in the same run, what the ceiling is (``ceiling``) and what it omits
(``ceiling_omits``); the relay and the consumer also have the ``floor`` their
servers set (``hubsync.benchmarks.ceilings``).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubsync.benchmarks import ceilings, hubs, peers, pipeline, signing, stages, tracing
from hubsync.benchmarks.procs import machine
from hubsync.benchmarks.workload import EVENT_BYTES
from hubsync.demo.embedded_redis import RedisServerProcess


@dataclass(frozen=True)
class Sizes:
    """How much each measurement moves."""

    relay_events: int
    consumer_events: int
    rounds: int
    end_to_end_events: int
    latency_rates: tuple[int, ...]
    latency_seconds: float
    naive_events: int
    rq_events: int
    jetstream_events: int
    signature_calls: int = 20_000
    tracing_events: int = 5_000
    tracing_rounds: int = 3


FULL = Sizes(100_000, 50_000, 3, 200_000, (1_000, 5_000), 15.0, 20_000, 10_000, 100_000)
QUICK = Sizes(20_000, 10_000, 1, 40_000, (1_000, 5_000), 4.0, 3_000, 2_000, 20_000, 5_000)
TINY = Sizes(600, 600, 1, 600, (500,), 1.5, 100, 60, 300, 200, 200, 1)
"""For tests of the report's shape: seconds, not minutes."""


def run(
    sizes: Sizes, progress: Callable[[str], None] = lambda _: None, hub_url: str | None = None
) -> dict[str, Any]:
    """Run every measurement on a private redis-server; the report.

    The end-to-end and latency consumers write to temp SQLite files, or, with
    ``hub_url`` (a ``postgresql://`` database), to new schemas of that
    database, one per measurement, dropped afterwards.
    """
    started = time.monotonic()
    # Other work on the machine moves absolute figures; the load says how busy it was.
    load_at_start = os.getloadavg()[0]
    with (
        tempfile.TemporaryDirectory(prefix="hubsync-bench-") as tmp,
        RedisServerProcess(directory=Path(tmp)) as server,
    ):
        url = server.url
        progress("relay drain vs raw XADD, packed as the relay packs")
        relay = stages.measure_relay(url, sizes.relay_events, sizes.rounds)
        progress("consumer ingest vs raw XREADGROUP + executemany + XACK")
        consumer = stages.measure_consumer(url, sizes.consumer_events, sizes.rounds)
        hub = hubs.hub_kind(hub_url)
        progress(f"end-to-end drain: 1 relay, 2 consumers, {hub} hub")
        end_to_end = pipeline.measure_end_to_end(url, sizes.end_to_end_events, hub_url)
        latency = {}
        for rate in sizes.latency_rates:
            progress(f"latency at {rate} events/s offered, {hub} hub")
            latency[f"at_{rate}_per_s"] = pipeline.measure_latency(
                url, rate, sizes.latency_seconds, hub_url
            )
        progress("tracing off and on: append, relay drain, consumer ingest")
        traced = tracing.measure_tracing(url, sizes.tracing_events, sizes.tracing_rounds)
        progress("peer: naive")
        naive = peers.measure_naive(url, sizes.naive_events)
        progress("peer: one RQ job per event")
        rq = peers.measure_rq(url, sizes.rq_events)
    progress("peer: NATS JetStream")
    jetstream = peers.measure_jetstream(sizes.jetstream_events)
    progress("signature check per event")
    signature = signing.measure_signing(sizes.signature_calls)
    end_to_end.update(ceilings.END_TO_END.describe())
    end_to_end["ceiling_events_per_s"] = min(
        relay["ceiling_events_per_s"], consumer["ceiling_events_per_s"]
    )
    end_to_end.update(cpu_above_raw_stages(relay, consumer, end_to_end))
    ours = end_to_end["events_per_s"]
    for peer in (naive, rq, jetstream):
        if "events_per_s" in peer:
            peer["hubsync_end_to_end_x"] = round(ours / peer["events_per_s"], 1)
    return {
        "relay": relay,
        "consumer": consumer,
        "end_to_end": end_to_end,
        "latency": latency,
        "signature": signature,
        "tracing": traced,
        "peers": {"naive": naive, "rq_job_per_event": rq, "jetstream": jetstream},
        "machine": machine()
        | {
            "event_bytes": EVENT_BYTES,
            "bench_seconds": round(time.monotonic() - started, 1),
            "load_average_1m_at_start": round(load_at_start, 2),
        },
    }


def cpu_above_raw_stages(
    relay: dict[str, Any], consumer: dict[str, Any], end_to_end: dict[str, Any]
) -> dict[str, float]:
    """The end to end's CPU per event (every process) beside the sum of the two raw stages'
    (client and redis-server, each stage's least over its rounds) and the sum of the two
    stages', and what it spends above the raw stages: the work each ceiling omits, and what
    only the whole pipeline does (outcomes applied to the outbox, polling, presence)."""
    raw = relay["cpu_us_per_event"]["ceiling"]["total"]
    raw += consumer["cpu_us_per_event"]["ceiling"]["total"]
    alone = relay["cpu_us_per_event"]["stage"]["total"]
    alone += consumer["cpu_us_per_event"]["stage"]["total"]
    total = sum(end_to_end["cpu_us_per_event"].values())
    return {
        "cpu_us_per_event_all_processes": round(total, 1),
        "raw_stages_cpu_us_per_event": round(raw, 1),
        "stages_alone_cpu_us_per_event": round(alone, 1),
        "above_raw_stages_us_per_event": round(total - raw, 1),
    }


def table(report: dict[str, Any]) -> str:
    """The report as a plain-text table (one line per figure, ceiling beside it)."""
    relay, consumer, e2e = report["relay"], report["consumer"], report["end_to_end"]
    rows: list[tuple[str, str, str, str]] = [
        ("relay drain (ceiling: raw XADD packed as the relay packs)", _n(relay["events_per_s"]), _n(relay["ceiling_events_per_s"]), f"{relay['ratio']}x (>= {relay['target_ratio']}x)"),
        ("  against redis-py's pipeline of xadd instead", "", _n(relay["redis_py_ceiling_events_per_s"]), f"{relay['redis_py_ratio']}x"),
        _floor_row("  floor: Redis's XADD", relay["floor"]),
        ("consumer ingest", _n(consumer["events_per_s"]), _n(consumer["ceiling_events_per_s"]), f"{consumer['ratio']}x (>= {consumer['target_ratio']}x)"),
        ("  raw XREADGROUP + XACK", _n(consumer["raw_xreadgroup_xack_events_per_s"]), "", ""),
        ("  raw SQLite batch insert", _n(consumer["raw_sqlite_batch_insert_events_per_s"]), "", ""),
        _floor_row("  floor: Redis's XREADGROUP + XACK, SQLite's insert", consumer["floor"]),
        (f"end to end (1 relay, 2 consumers, {e2e['hub']} hub)", _n(e2e["events_per_s"]), _n(e2e["ceiling_events_per_s"]), ">= 25,000/s"),
    ]  # fmt: skip
    for name, peer in report["peers"].items():
        if "events_per_s" in peer:
            rows.append(
                (
                    f"peer: {name}",
                    _n(peer["events_per_s"]),
                    "",
                    f"hubsync {peer['hubsync_end_to_end_x']}x",
                )
            )
        else:
            rows.append((f"peer: {name}", "skipped", "", str(peer.get("skipped", ""))))
    for name, lat in report["latency"].items():
        rows.append(
            (
                f"latency {name.removeprefix('at_').replace('_per_s', '/s')} (p50/p95/p99 ms)",
                f"{lat['p50_ms']}/{lat['p95_ms']}/{lat['p99_ms']}",
                "",
                f"achieved {_n(lat['achieved_events_per_s'])}/s",
            )
        )
    signature = report["signature"]
    rows.append(
        (
            "signature verify / sign (us per event)",
            f"{signature['verify_us']}/{signature['sign_us']}",
            "",
            f"verify <= {signature['target_verify_us']} us",
        )
    )
    traced = report["tracing"]
    for stage, label in (
        ("append", "append_event"),
        ("relay", "relay drain"),
        ("consumer", "consumer ingest"),
    ):
        figures = traced[stage]
        rows.append(
            (
                f"tracing off / on: {label}",
                f"{_n(figures['off_events_per_s'])}/{_n(figures['on_events_per_s'])}",
                "",
                f"on costs {figures['on_cost_percent']}%",
            )
        )
    rows.append(_cpu_row("relay CPU us/event: stage / raw ceiling", relay))
    rows.append(_cpu_row("consumer CPU us/event: stage / raw ceiling", consumer))
    rows.append(
        (
            "end-to-end CPU us/event: all processes / raw stages",
            f"{e2e['cpu_us_per_event_all_processes']}/{e2e['raw_stages_cpu_us_per_event']}",
            "",
            f"{e2e['above_raw_stages_us_per_event']} us above the raw stages "
            f"(the stages alone: {e2e['stages_alone_cpu_us_per_event']})",
        )
    )
    rows.append(("relay peak RSS (MB)", str(e2e["relay_peak_rss_mb"]), "", ""))
    rows.append(("consumer peak RSS (MB)", str(e2e["consumer_peak_rss_mb"]), "", ""))
    header = ("measure", "events/s", "ceiling/s", "note")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = [
        "  ".join(
            cell.ljust(w) if i in (0, 3) else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("what each ceiling omits:")
    for name, section in (("relay", relay), ("consumer", consumer), ("end to end", e2e)):
        lines.append(f"  {name}: {'; '.join(section['ceiling_omits'])}")
    facts = report["machine"]
    lines.append(
        f"machine: {facts['cpus']} x {facts['cpu']}, {facts['memory_gb']} GB, {facts['os']}, Python {facts['python']}"
    )
    return "\n".join(lines)


def _floor_row(name: str, floor: dict[str, Any]) -> tuple[str, str, str, str]:
    """A stage's ``floor`` as a table row: the rate its servers allow, their cost per event,
    and the stage's share of that rate."""
    cost = f"Redis {floor['redis_us_per_event']} us/entry"
    if "sqlite_us_per_row" in floor:
        cost += f", SQLite {floor['sqlite_us_per_row']} us/row"
    return (name, "", _n(floor["events_per_s"]), f"{cost}; stage at {floor['stage_ratio']}x")


def _cpu_row(name: str, section: dict[str, Any]) -> tuple[str, str, str, str]:
    """A stage's CPU per event beside its raw ceiling's, each client + redis-server."""
    stage, ceiling = section["cpu_us_per_event"]["stage"], section["cpu_us_per_event"]["ceiling"]
    note = f"client {stage['client']} + redis {stage['redis']} / {ceiling['client']} + {ceiling['redis']}"
    return (name, f"{stage['total']}/{ceiling['total']}", "", note)


def _n(value: int | float) -> str:
    return f"{value:,.0f}"
