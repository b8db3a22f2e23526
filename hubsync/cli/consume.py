"""``hubsync consume``: one hub consumer worker."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hubsync.cli import exit_codes
from hubsync.cli.health_checks import reading_health
from hubsync.cli.options import build_settings, hub_options, options_from, redis_target
from hubsync.core import keys
from hubsync.core.connections import (
    RedisClient,
    RedisTarget,
    Role,
    connect,
    ping,
    wait_for_redis,
)
from hubsync.core.logs import configure_logging
from hubsync.core.names import validate_name
from hubsync.core.settings import ConsumerSettings, hub_url_of
from hubsync.telemetry import configure_tracing

if TYPE_CHECKING:
    from hubstore.store import HubStore

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
@options_from(ConsumerSettings, exclude=["hub_url", "hub_db"])
@hub_options
@click.option(
    "--once",
    is_flag=True,
    help="Do everything due now (read, ingest, reclaim), then exit 0 (no environment variable).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Exit 0 if consumer --name refreshed its health key recently, else 1 "
    "(no environment variable).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the final counts as one JSON document (no environment variable).",
)
@click.option(
    "--accept-restore",
    is_flag=True,
    help="This store is the hub's from now on, though it is older than what Redis saw the hub "
    "commit (restored from a backup): lower hubsync:hub:mark to its commit counter, then "
    "start. Events stored after the backup stay missing (no environment variable).",
)
def consume(
    hub_url: str | None,
    hub_db: Path | None,
    once: bool,
    check: bool,
    as_json: bool,
    accept_restore: bool,
    **options: Any,
) -> None:
    """Store every project's sync events in the hub database, exactly once.

    Reads group 'hub' on every stream in hubsync:projects (new projects are
    picked up while running), validates each entry and its hash, ingests a
    batch in one transaction, sends outcomes to hubsync:{P}:acks:{R}, conflicts
    to hubsync:{P}:alerts and bad entries to hubsync:{P}:dead, then XACKs.
    Entries idle too long in a dead worker are reclaimed; acknowledged entries
    are trimmed. At start the store gets its hub id (as 'hubsync hub init') and
    binds hubsync:hub to it; a Redis bound to another hub is refused (exit 2),
    and so is a --name whose health key another running consumer keeps fresh,
    and a store older than what Redis saw the hub commit (hubsync:hub:mark: a
    store restored from a backup, or a copy), unless --accept-restore.
    SIGTERM or SIGINT finishes the batch and exits 0 with a summary; a second
    signal exits at once.
    """
    url = hub_url_of(hub_url, hub_db)
    if url is None:
        raise click.UsageError("--hub-url: missing; give --hub-url or --hub-db (HUBSYNC_HUB_URL)")
    settings = build_settings(ConsumerSettings, hub_url=url, **options)
    configure_logging(settings.log_level, settings.log_format)
    target = redis_target(settings)
    if check and accept_restore:
        raise click.UsageError("--accept-restore starts a consumer; use it without --check")
    if check:
        if settings.name is None:
            raise click.UsageError("--check needs --name (the consumer to check)")
        raise SystemExit(_check(settings, target, validate_name(settings.name, "consumer name")))
    tracing = configure_tracing("hubsync-consume")  # spans only when OTEL_* asks for them
    try:
        _consume(settings, target, once, as_json, accept_restore)
    finally:
        if tracing is not None:
            tracing.shutdown()


def _consume(
    settings: ConsumerSettings,
    target: RedisTarget,
    once: bool,
    as_json: bool,
    accept_restore: bool,
) -> None:
    from consumers.stream.worker import HubConsumer
    from hubstore import open_store
    from hubsync.core.gc_tuning import tune_for_throughput
    from hubsync.core.metrics import CONSUMER_REGISTRY, serve_daemon_metrics  # prometheus_client

    if not once and not _wait_for_redis(target):
        return  # stopped by a signal before Redis answered
    client = connect(target, Role.BLOCKING, block_seconds=settings.block_ms / 1000)
    try:
        if once:
            ping(client, target)  # --once cannot wait: exit 3 now
        with open_store(settings.hub_url, create_schema=True) as store:
            if accept_restore:
                _accept_restore(client, store)
            worker = HubConsumer(client, store, settings, target=target)
            serve_daemon_metrics(settings, CONSUMER_REGISTRY, worker.readiness.problems)
            if once:
                stats = worker.run_once()
            else:
                tune_for_throughput()  # a daemon: the collector's settings for throughput
                stats = worker.run()
    finally:
        client.close()
    if as_json:
        click.echo(json.dumps({"consumer": worker.name} | asdict(stats), sort_keys=True))
    elif once:
        click.echo(f"consumer {worker.name}: {stats.summary()}")


def _accept_restore(client: RedisClient, store: HubStore) -> None:
    """Lower the namespace's mark to ``store``'s commit counter, in a namespace this hub owns."""
    from consumers.stream.hub_binding import accept_restore, bind_namespace

    hub_id = store.hub_id() or store.init_hub()
    bind_namespace(client, hub_id)  # another hub's namespace is refused, as at start
    before, counter = accept_restore(client, hub_id, store)
    if before is not None and before > counter:
        log.warning(
            "accepted a restored hub store: %s lowered from %d to %d commits; events stored "
            "after the backup are not in it",
            keys.HUB_MARK,
            before,
            counter,
        )


def _wait_for_redis(target: RedisTarget) -> bool:
    """Wait for a Redis down at start (logged once) before the worker's client is made:
    a cluster's client cannot be made while it is down, and ``--redis-cluster auto`` asks
    the server. False when SIGTERM or SIGINT came first."""
    from hubsync.core.daemon import Daemon

    waiting = Daemon("consumer")  # stopped as the worker would be, before the worker exists
    with waiting.stop_signals():
        return wait_for_redis(target, waiting.stop_event)


def _check(settings: ConsumerSettings, target: RedisTarget, name: str) -> int:
    from consumers.errors import ConsumerUnhealthyError
    from consumers.stream.health import check_health
    from consumers.stream.hub_binding import bind_namespace

    hub_id = _store_hub_id(settings.hub_url)
    client = connect(target, Role.PROBE)
    try:
        with reading_health(target, f"consumer {name}"):
            if hub_id is not None:  # the same rule as at start: another hub's namespace is exit 2
                bind_namespace(client, hub_id, claim=False)
            record = check_health(client, name)
    except ConsumerUnhealthyError as exc:
        click.echo(str(exc), err=True)
        return exit_codes.FAILURE
    finally:
        client.close()
    click.echo(f"consumer {name}: healthy (last beat {record.get('at', '?')})")
    return exit_codes.OK


def _store_hub_id(hub_url: str) -> str | None:
    """The hub id of the store ``hub_url`` names; None when it has none yet (or no store)."""
    from hubstore import open_store
    from hubsync.core.errors import SchemaVersionError

    try:
        with open_store(hub_url, create_schema=False) as store:
            return store.hub_id()
    except SchemaVersionError:
        return None  # no store yet: nothing to compare; a start would create it and bind
