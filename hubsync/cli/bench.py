"""``hubsync bench``: the benchmark report (throughput, ceilings, latency, RSS, peers)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hubsync.core.errors import ConfigError


def _postgresql_url(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    from hubsync.benchmarks.hubs import check_bench_hub_url

    if value is not None:
        try:
            check_bench_hub_url(value)
        except ConfigError as exc:
            raise click.BadParameter(str(exc).removeprefix("--hub-url ")) from None
    return value


@click.command(
    epilog="""\b
Examples:
  hubsync bench --quick                       about a minute, prints the table
  hubsync bench --json bench.json             the full run (a few minutes), JSON written too
  hubsync bench --quick --json - | jq .end_to_end
  PGPASSWORD=... hubsync bench --quick --hub-url postgresql://bench@db.internal/scratch
  hubsync bench --scale-out --quick           1 relay, 1/2/4 consumers: SQLite or PostgreSQL hub,
                                              one redis-server or a cluster (about 2 minutes)
"""
)
@click.option(
    "--quick",
    is_flag=True,
    help="Smaller sizes: about a minute instead of several (no environment variable).",
)
@click.option(
    "--json",
    "json_file",
    type=click.Path(path_type=Path, dir_okay=False, allow_dash=True),
    help="Write the report as JSON to this file ('-' = stdout, and the table goes to stderr; "
    "no environment variable).",
)
@click.option(
    "--hub-url",
    metavar="URL",
    callback=_postgresql_url,
    help="A PostgreSQL database (postgresql://...) for the end-to-end and latency hubs: each "
    "measurement makes a new schema in it and drops it afterwards (its role must be allowed "
    "to create schemas) [default: temp SQLite files] (no environment variable).",
)
@click.option(
    "--scale-out",
    is_flag=True,
    help="Run only the scale-out section instead: the end-to-end drain with 1 relay and 1, 2 "
    "and 4 consumers on one redis-server with a SQLite hub, the same with a PostgreSQL hub "
    "(a private server, or --hub-url), and a private Redis Cluster with a SQLite hub; events/s, "
    "CPU per event of every process, and the ratios (no environment variable).",
)
def bench(quick: bool, json_file: Path | None, hub_url: str | None, scale_out: bool) -> None:
    """Measure the pipeline against its ceilings and its peers, in one run.

    Starts its own redis-server (and nats-server, when installed) on free
    loopback ports; never touches a server this machine already runs. Measures
    relay drain vs raw XADD packed as the relay packs (and vs redis-py's
    pipeline), consumer ingest vs raw XREADGROUP + executemany + XACK, each
    ceiling with what it omits and the floor Redis and SQLite set (Redis's
    time per entry, INFO commandstats; SQLite's CPU per row), the end-to-end
    drain with 1 relay and 2 consumers, commit-to-hub latency at 1,000 and
    5,000 events/s offered, peak RSS, each stage with OpenTelemetry tracing off
    and on (the SDK recording every span), and the naive, RQ-per-event and NATS
    JetStream peers, all with ~540-byte events.
    The end-to-end and latency hubs are temp SQLite files, or PostgreSQL with
    --hub-url.

    With --scale-out it measures only the scaled-out forms instead, on a
    private redis-server, PostgreSQL server and Redis Cluster it starts and
    stops itself; without PostgreSQL's binaries that part is reported skipped.
    """
    from hubsync.benchmarks import report
    from hubsync.demo.embedded_redis import redis_server_binary

    if redis_server_binary() is None:
        raise ConfigError("hubsync bench needs redis-server (apt-get install -y redis-server)")
    to_stdout = json_file is not None and str(json_file) == "-"

    def progress(step: str) -> None:
        click.echo(f"... {step}", err=True)

    from hubsync.core.gc_tuning import tune_for_throughput

    tune_for_throughput()  # what the daemons run with: the in-process stages and their raw loops
    if scale_out:
        from hubsync.benchmarks import scaleout
        from hubsync.benchmarks.procs import machine

        section = scaleout.run(scaleout.QUICK if quick else scaleout.FULL, progress, hub_url)
        result = {"scale_out": section, "machine": machine()}
        click.echo(scaleout.table(section), err=to_stdout)
    else:
        result = report.run(report.QUICK if quick else report.FULL, progress, hub_url)
        click.echo(report.table(result), err=to_stdout)
    if json_file is not None:
        document = json.dumps(result, indent=2, sort_keys=True)
        if to_stdout:
            click.echo(document)
        else:
            json_file.write_text(document + "\n")
            click.echo(f"wrote {json_file}", err=True)
