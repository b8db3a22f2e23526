"""``hubsync consume``: one hub consumer worker."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

import click
import redis

from hubsync.cli import exit_codes
from hubsync.cli.options import build_settings, daemon_options, ping_or_unreachable
from hubsync.logs import configure_logging
from hubsync.metrics import start_metrics_server
from hubsync.names import validate_name
from hubsync.settings import ConsumerSettings

log = logging.getLogger(__name__)


@click.command(
    epilog="""\b
Examples:
  hubsync consume --hub-db /var/lib/hubsync/hub.db --name hub-1    run until SIGTERM
  hubsync consume --hub-db hub.db --once --json                    drain what is there, then exit
  hubsync consume --hub-db hub.db --name hub-1 --check             exit 0 if hub-1 is alive
  HUBSYNC_RECLAIM_IDLE=5 hubsync consume --hub-db hub.db           take over stuck entries sooner
"""
)
@click.option(
    "--hub-db",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="HUBSYNC_HUB_DB",
    show_envvar=True,
    required=True,
    help="The hub SQLite database (created on first use; shared by every worker).",
)
@click.option(
    "--name",
    envvar="HUBSYNC_NAME",
    show_envvar=True,
    help="Consumer name in group 'hub' [default: <host>-<pid>]. Required with --check.",
)
@click.option(
    "--once", is_flag=True, help="Do everything due now (read, ingest, reclaim), then exit 0."
)
@click.option(
    "--check",
    is_flag=True,
    help="Exit 0 if consumer --name refreshed its health key recently, else 1.",
)
@click.option(
    "--batch-count",
    type=int,
    envvar="HUBSYNC_BATCH_COUNT",
    show_envvar=True,
    help="Most entries read per stream per batch [default: 500].",
)
@click.option(
    "--block-ms",
    type=int,
    envvar="HUBSYNC_BLOCK_MS",
    show_envvar=True,
    help="How long one read waits for new entries, in ms [default: 1000].",
)
@click.option(
    "--reclaim-idle",
    type=float,
    envvar="HUBSYNC_RECLAIM_IDLE",
    show_envvar=True,
    help="Take over entries pending this many seconds in any consumer [default: 60].",
)
@click.option(
    "--reclaim-interval",
    type=float,
    envvar="HUBSYNC_RECLAIM_INTERVAL",
    show_envvar=True,
    help="Seconds between reclaim and trim passes [default: 15].",
)
@click.option(
    "--max-deliveries",
    type=int,
    envvar="HUBSYNC_MAX_DELIVERIES",
    show_envvar=True,
    help="Dead-letter an entry delivered more often than this [default: 5].",
)
@click.option(
    "--dead-maxlen",
    type=int,
    envvar="HUBSYNC_DEAD_MAXLEN",
    show_envvar=True,
    help="Approximate cap of each dead-letter stream [default: 100000].",
)
@click.option(
    "--alerts-maxlen",
    type=int,
    envvar="HUBSYNC_ALERTS_MAXLEN",
    show_envvar=True,
    help="Approximate cap of each alert stream [default: 100000].",
)
@daemon_options
@click.option(
    "--json", "as_json", is_flag=True, help="Print the final counts as one JSON document."
)
def consume(
    hub_db: Path,
    redis_url: str | None,
    name: str | None,
    once: bool,
    check: bool,
    batch_count: int | None,
    block_ms: int | None,
    reclaim_idle: float | None,
    reclaim_interval: float | None,
    max_deliveries: int | None,
    dead_maxlen: int | None,
    alerts_maxlen: int | None,
    health_ttl: float | None,
    metrics_port: int | None,
    log_format: str | None,
    log_level: str | None,
    as_json: bool,
) -> None:
    """Store every project's sync events in the hub database, exactly once.

    Reads group 'hub' on every stream in hubsync:projects (new projects are
    picked up while running), validates each entry and its hash, ingests a
    batch in one transaction, sends outcomes to hubsync:{P}:acks:{R}, conflicts
    to hubsync:{P}:alerts and bad entries to hubsync:{P}:dead, then XACKs.
    Entries idle too long in a dead worker are reclaimed; acknowledged entries
    are trimmed. SIGTERM or SIGINT finishes the batch and exits 0 with a
    summary; a second signal exits at once.
    """
    settings = build_settings(
        ConsumerSettings,
        hub_db=hub_db,
        redis_url=redis_url,
        name=name,
        batch_count=batch_count,
        block_ms=block_ms,
        reclaim_idle=reclaim_idle,
        reclaim_interval=reclaim_interval,
        max_deliveries=max_deliveries,
        dead_maxlen=dead_maxlen,
        alerts_maxlen=alerts_maxlen,
        health_ttl=health_ttl,
        metrics_port=metrics_port,
        log_format=log_format,
        log_level=log_level,
    )
    configure_logging(settings.log_level, settings.log_format)
    if check:
        if settings.name is None:
            raise click.UsageError("--check needs --name (the consumer to check)")
        raise SystemExit(_check(settings, validate_name(settings.name, "consumer name")))

    from consumers.worker import HubConsumer
    from hubstore.sqlite_store import SqliteHubStore

    # The socket timeout must outlast a blocking read, or every idle read would
    # look like a dead connection.
    client = redis.Redis.from_url(
        settings.redis_url,
        socket_connect_timeout=5,
        socket_timeout=settings.block_ms / 1000 + 10,
    )
    try:
        ping_or_unreachable(client, settings.redis_url)
        start_metrics_server(settings.metrics_port)
        with SqliteHubStore(settings.hub_db) as store:
            worker = HubConsumer(client, store, settings)
            stats = worker.run_once() if once else worker.run()
    finally:
        client.close()
    if as_json:
        click.echo(json.dumps({"consumer": worker.name} | asdict(stats), sort_keys=True))
    elif once:
        click.echo(f"consumer {worker.name}: {stats.summary()}")


def _check(settings: ConsumerSettings, name: str) -> int:
    from consumers.errors import ConsumerUnhealthyError
    from consumers.health import check_health

    client = redis.Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=5)
    try:
        record = check_health(client, name)
    except (redis.ConnectionError, redis.TimeoutError):
        click.echo(f"consumer {name}: cannot reach Redis", err=True)
        return exit_codes.REDIS_UNREACHABLE
    except ConsumerUnhealthyError as exc:
        click.echo(str(exc), err=True)
        return exit_codes.FAILURE
    finally:
        client.close()
    click.echo(f"consumer {name}: healthy (last beat {record.get('at', '?')})")
    return exit_codes.OK
