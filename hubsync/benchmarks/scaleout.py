"""``hubsync bench --scale-out``: the end-to-end drain with 1 relay and N consumers, scaled out.

Three setups, each run with N = 1, 2 and 4 consumers (``Sizes.consumer_counts``),
the setups taken in turn at each N so that their ratios are measured side by
side on a machine whose load moves:

* ``single_sqlite``: one redis-server and a SQLite hub (the baseline);
* ``single_postgresql``: one redis-server and a PostgreSQL hub;
* ``cluster_sqlite``: a Redis Cluster (3 masters, a replica each) and a SQLite hub.

Every run is ``pipeline.measure_end_to_end`` (the same drain as the report's
end-to-end figure) over the same hub projects, picked so that they spread
evenly over the cluster's masters. Everything runs on private servers started
here, on free loopback ports in a temp dir, and stopped at the end: a
redis-server, a PostgreSQL server (``hubsync.servers.postgres``; its database
is the hub, each run in a schema of its own) and the cluster
(``hubsync.servers.redis_cluster``). Without PostgreSQL's binaries or psycopg
the PostgreSQL setup is reported skipped, with the reason; the same for the
cluster without ``redis-cli``. ``hub_url`` (``--hub-url``) runs the PostgreSQL
setup on that database instead of a private server (its CPU is then not counted).

Each run records events/s and CPU microseconds per event of every process:
the relay, the consumers (summed, and each), the redis-server(s) (a cluster's
masters and replicas apart) and PostgreSQL (the postmaster and every backend).
The ratios at the same N are PostgreSQL hub / SQLite hub and cluster / single
server, each against the target ``TARGET_RATIO``.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubsync.benchmarks.pipeline import measure_end_to_end
from hubsync.benchmarks.procs import cpu_seconds, process_tree_cpu_seconds
from hubsync.core import keys
from hubsync.core.errors import HubsyncError
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.servers.redis_cluster import RedisClusterError, RedisClusterProcesses

TARGET_RATIO = 0.7
"""PostgreSQL hub vs SQLite hub, and cluster vs single server, end to end at the same N."""
HUB_PROJECTS = 6
"""Hub projects the backlog is spread over: two per master of the cluster."""
POSTGRES_SETTINGS: Mapping[str, str] = {"fsync": "on", "synchronous_commit": "on"}
"""The private PostgreSQL's settings: its defaults, which a hub needs (a commit answered
``accepted`` must survive a crash of the server; docs/deploy.md), said explicitly."""
SETUPS = ("single_sqlite", "single_postgresql", "cluster_sqlite")
TITLES = {
    "single_sqlite": "redis-server + SQLite hub",
    "single_postgresql": "redis-server + PostgreSQL hub",
    "cluster_sqlite": "Redis Cluster + SQLite hub",
}


@dataclass(frozen=True)
class Sizes:
    """How much each scale-out run moves, with how many consumers, and how often."""

    events: int
    consumer_counts: tuple[int, ...] = (1, 2, 4)
    rounds: int = 1
    """Runs of each setup at each N (the setups in turn, round after round); the fastest
    is kept."""


FULL = Sizes(100_000, rounds=2)
QUICK = Sizes(40_000)
TINY = Sizes(300, (1, 2))
"""For tests of the section's shape: seconds per run."""


@dataclass
class _Setup:
    """Where one setup's runs go: its Redis URL, its hub, its servers' CPU."""

    redis_url: str
    hub_url: str | None
    server_cpu: Mapping[str, Callable[[], float]]
    facts: dict[str, Any]


def run(
    sizes: Sizes, progress: Callable[[str], None] = lambda _: None, hub_url: str | None = None
) -> dict[str, Any]:
    """Start the servers, run every setup at every N, stop them; the ``scale_out`` section."""
    started = time.monotonic()
    load_at_start = os.getloadavg()[0]
    setups: dict[str, _Setup] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="hubsync-bench-scaleout-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        progress("scale-out: starting a redis-server, PostgreSQL and a Redis Cluster")
        (directory / "redis").mkdir()
        single = stack.enter_context(RedisServerProcess(directory=directory / "redis"))
        single_cpu = {"redis": _pid_cpu(single)}
        setups["single_sqlite"] = _Setup(single.url, None, single_cpu, {"redis": "one server"})
        try:
            postgres = stack.enter_context(_postgres(hub_url))
        except _Skipped as exc:
            skipped["single_postgresql"] = str(exc)
        else:
            setups["single_postgresql"] = postgres(single)
        try:
            cluster = stack.enter_context(_cluster(directory / "cluster"))
        except _Skipped as exc:
            skipped["cluster_sqlite"] = str(exc)
            projects = [f"bench-{index}" for index in range(HUB_PROJECTS)]
        else:
            projects = spread_hub_projects(cluster, HUB_PROJECTS)
            setups["cluster_sqlite"] = _cluster_setup(cluster, projects)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in setups}
        for consumers in sizes.consumer_counts:
            tried: dict[str, list[dict[str, Any]]] = {name: [] for name in setups}
            for round_ in range(sizes.rounds):  # the setups in turn, round after round
                for name, setup in setups.items():
                    progress(
                        f"scale-out: {TITLES[name]}, 1 relay + {_consumers(consumers)}"
                        + (f" (round {round_ + 1} of {sizes.rounds})" if sizes.rounds > 1 else "")
                    )
                    tried[name].append(_run(setup, sizes.events, consumers, projects))
            for name, results in tried.items():
                runs[name].append(_shaped(max(results, key=lambda r: r["events_per_s"])))
    section: dict[str, Any] = {
        "events": sizes.events,
        "relays": 1,
        "consumer_counts": list(sizes.consumer_counts),
        "hub_projects": projects,
        "rounds": sizes.rounds,
        "setups": {},
        "target_ratio": TARGET_RATIO,
        "load_average_1m_at_start": round(load_at_start, 2),
        "seconds": 0.0,
    }
    for name in SETUPS:
        if name in skipped:
            section["setups"][name] = {"title": TITLES[name], "skipped": skipped[name]}
        else:
            facts = setups[name].facts
            section["setups"][name] = {"title": TITLES[name], **facts, "runs": runs[name]}
    section["ratios"] = _ratios(section["setups"], sizes.consumer_counts)
    section["seconds"] = round(time.monotonic() - started, 1)
    # other work on the machine takes cores from the runs: how busy it was, before and after
    section["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    return section


class _Skipped(HubsyncError):
    """A setup cannot run on this machine; the message says why."""


def _pid_cpu(server: RedisServerProcess) -> Callable[[], float]:
    process = server.process
    assert process is not None, "a started server has a process"
    return lambda: cpu_seconds(process.pid)


@contextmanager
def _postgres(hub_url: str | None) -> Iterator[Callable[[RedisServerProcess], _Setup]]:
    """A PostgreSQL hub: a private server (its CPU counted), or the database ``hub_url``."""
    if (
        importlib.util.find_spec("psycopg") is None
        or importlib.util.find_spec("psycopg_pool") is None
    ):
        raise _Skipped("psycopg is not installed (pip install 'hubsync[postgres]')")
    if hub_url is not None:

        def external(single: RedisServerProcess) -> _Setup:
            facts = {
                "redis": "one server",
                "postgres": "the database --hub-url names (CPU not counted)",
            }
            return _Setup(single.url, hub_url, {"redis": _pid_cpu(single)}, facts)

        yield external
        return
    from hubsync.servers.postgres import PostgresServer, PostgresUnavailable

    try:
        server = PostgresServer.start(POSTGRES_SETTINGS)
    except PostgresUnavailable as exc:
        raise _Skipped(str(exc)) from None
    with server:
        facts = {
            "redis": "one server",
            "postgres": server.version(),
            "postgres_settings": dict(POSTGRES_SETTINGS),
        }

        def private(single: RedisServerProcess) -> _Setup:
            def postgres_cpu() -> float:
                pid = server.pid
                return process_tree_cpu_seconds(pid) if pid is not None else 0.0

            probes = {"redis": _pid_cpu(single), "postgres": postgres_cpu}
            return _Setup(single.url, server.url(), probes, facts)

        yield private


@contextmanager
def _cluster(directory: Path) -> Iterator[RedisClusterProcesses]:
    """A private Redis Cluster of 3 masters with a replica each."""
    try:
        cluster = RedisClusterProcesses(directory)
    except RedisClusterError as exc:
        raise _Skipped(str(exc)) from None
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def _cluster_setup(cluster: RedisClusterProcesses, projects: list[str]) -> _Setup:
    masters = {node.port for node in cluster.masters_now()}

    def cpu_of(replicas: bool) -> Callable[[], float]:
        pids = [pid for port, pid in cluster.pids().items() if (port in masters) != replicas]
        return lambda: sum(cpu_seconds(pid) for pid in pids)

    used = {cluster.master_of(keys.events_stream(project)).port for project in projects}
    facts = {
        "redis": f"cluster: {cluster.masters} masters, {cluster.replicas} replica each",
        "masters_used": len(used),
    }
    probes = {"redis_masters": cpu_of(False), "redis_replicas": cpu_of(True)}
    return _Setup(cluster.url, None, probes, facts)


def spread_hub_projects(cluster: RedisClusterProcesses, count: int) -> list[str]:
    """``count`` hub project names whose streams spread evenly over the cluster's masters."""
    by_master: dict[int, list[str]] = {node.port: [] for node in cluster.masters_now()}
    per_master = -(-count // len(by_master))
    index = 0
    while sum(len(names) for names in by_master.values()) < count and index < 10_000:
        name = f"bench-{index}"
        names = by_master[cluster.master_of(keys.events_stream(name)).port]
        if len(names) < per_master:
            names.append(name)
        index += 1
    rounds = zip(*(names for names in by_master.values()), strict=False)
    ordered = [name for group in rounds for name in group]
    leftover = [name for names in by_master.values() for name in names if name not in ordered]
    return (ordered + leftover)[:count]


def _run(setup: _Setup, events: int, consumers: int, projects: list[str]) -> dict[str, Any]:
    """One end-to-end drain of ``setup`` with ``consumers`` consumers."""
    return measure_end_to_end(
        setup.redis_url,
        events,
        setup.hub_url,
        consumers=consumers,
        hub_projects=projects,
        server_cpu=setup.server_cpu,
    )


def _shaped(result: dict[str, Any]) -> dict[str, Any]:
    """A run as the section shows it: CPU per process, and in all."""
    cpu = dict(result["cpu_us_per_event"])
    if "redis_masters" in cpu:
        cpu["redis"] = round(cpu["redis_masters"] + cpu["redis_replicas"], 1)
    cpu["consumer_each"] = result["consumer_cpu_us_per_event_each"]
    cpu["total"] = round(
        sum(v for k, v in cpu.items() if k in ("relay", "consumers", "redis", "postgres")), 1
    )
    return {
        "consumers": result["consumers"],
        "events": result["events"],
        "seconds": result["seconds"],
        "events_per_s": result["events_per_s"],
        "cpu_us_per_event": cpu,
        "relay_peak_rss_mb": result["relay_peak_rss_mb"],
        "consumer_peak_rss_mb": result["consumer_peak_rss_mb"],
    }


def _ratios(setups: dict[str, Any], counts: tuple[int, ...]) -> list[dict[str, Any]]:
    """At each N: PostgreSQL hub / SQLite hub and cluster / single server (None if skipped),
    by events/s, and by CPU per event (``..._cpu``: the baseline's CPU per event over the
    setup's, what the ratio of rates becomes when the cores are the bottleneck; steadier than
    the rates on a machine other work shares)."""

    def run(name: str, index: int) -> dict[str, Any] | None:
        runs = setups[name].get("runs")
        return None if not runs else dict(runs[index])

    out = []
    for index, consumers in enumerate(counts):
        base = run("single_sqlite", index)
        entry: dict[str, Any] = {"consumers": consumers}
        for key, name in (
            ("postgresql_vs_sqlite", "single_postgresql"),
            ("cluster_vs_single", "cluster_sqlite"),
        ):
            other = run(name, index)
            if other is None or base is None:
                entry[key] = entry[f"{key}_cpu"] = None
                continue
            entry[key] = round(other["events_per_s"] / base["events_per_s"], 2)
            used = other["cpu_us_per_event"]["total"]
            entry[f"{key}_cpu"] = (
                round(base["cpu_us_per_event"]["total"] / used, 2) if used else None
            )
        out.append(entry)
    return out


TABLE_HEADER = (
    "scale-out (1 relay)",
    "events/s",
    "relay",
    "consumers (each)",
    "redis",
    "postgres",
    "total us/event",
)


def table(section: dict[str, Any]) -> str:
    """The section as plain-text lines: one per setup and N, then the ratios."""
    rows = _table_rows(section)
    measured = [TABLE_HEADER, *(row for row in rows if row[1] != "skipped")]
    widths = [max(len(row[i]) for row in measured) for i in range(len(TABLE_HEADER))]
    lines = []
    for row in [TABLE_HEADER, *rows]:
        if row[1] == "skipped":
            lines.append(f"{row[0].ljust(widths[0])}  skipped: {row[2]}")
            continue
        lines.append(
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += _ratio_lines(section)
    lines.append(
        f"{section['events']:,} events per run over {len(section['hub_projects'])} hub projects, "
        f"best of {section['rounds']}; load average {section['load_average_1m_at_start']} at the "
        f"start, {section['load_average_1m_at_end']} at the end; {section['seconds']}s"
    )
    return "\n".join(lines)


def _table_rows(section: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per setup and N (one ``skipped`` row for a setup that did not run)."""
    rows: list[tuple[str, ...]] = []
    for name in SETUPS:
        setup = section["setups"][name]
        if "skipped" in setup:
            rows.append((setup["title"], "skipped", setup["skipped"], "", "", "", ""))
            continue
        for run in setup["runs"]:
            cpu = run["cpu_us_per_event"]
            each = "/".join(f"{v:.0f}" for v in cpu["consumer_each"])
            redis = f"{cpu['redis']:.1f}"
            if "redis_replicas" in cpu:
                redis += f" ({cpu['redis_replicas']:.1f} replicas)"
            rows.append(
                (
                    f"{setup['title']}, {_consumers(run['consumers'])}",
                    f"{run['events_per_s']:,}",
                    f"{cpu['relay']:.1f}",
                    f"{cpu['consumers']:.1f} ({each})",
                    redis,
                    f"{cpu['postgres']:.1f}" if "postgres" in cpu else "-",
                    f"{cpu['total']:.1f}",
                )
            )
    return rows


def _ratio_lines(section: dict[str, Any]) -> list[str]:
    """One line per ratio and N, with its verdict against the target."""
    target = section["target_ratio"]
    lines = []
    for ratio in section["ratios"]:
        for key, what in (
            ("postgresql_vs_sqlite", "PostgreSQL hub / SQLite hub"),
            ("cluster_vs_single", "Redis Cluster / one redis-server"),
        ):
            value, by_cpu = ratio[key], ratio[f"{key}_cpu"]
            verdict = "n/a" if value is None else ("met" if value >= target else "MISSED")
            shown = "skipped" if value is None else f"{value}x"
            if by_cpu is not None:
                shown += f" (by CPU per event: {by_cpu}x)"
            lines.append(
                f"ratio {what}, {_consumers(ratio['consumers'])}: {shown} (>= {target}x: {verdict})"
            )
    return lines


def _consumers(count: int) -> str:
    return f"{count} consumer{'s' * (count != 1)}"
