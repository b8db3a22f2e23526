"""``hubsync effects-worker``: an RQ worker on ``hubsync-effects`` with hubsync's logging, or its check."""

from __future__ import annotations

from typing import Any

import click
import redis

from hubsync.cli import exit_codes
from hubsync.cli.health_checks import reading_health
from hubsync.cli.options import build_settings, env_option, options_from, redis_target
from hubsync.core.connections import (
    RedisTarget,
    ping,
    probe,
)
from hubsync.core.keys import EFFECTS_QUEUE
from hubsync.core.logs import configure_logging
from hubsync.core.names import validate_name
from hubsync.core.settings import EffectsWorkerSettings


@click.command(
    "effects-worker",
    epilog=f"""\b
Examples:
  hubsync effects-worker --worker-name effects-1          run shared-effect jobs until SIGTERM
  hubsync effects-worker --burst                          run what is queued, then exit
  hubsync effects-worker --worker-name effects-1 --check  exit 0 if effects-1 is registered
  rq worker {EFFECTS_QUEUE} --with-scheduler --name effects-1   the same worker, rq's own CLI
""",
)
@options_from(EffectsWorkerSettings)
@env_option(
    "--worker-name",
    "--name",
    "worker_name",
    help="RQ worker name [default: rq's own]; with --check, the worker to look for "
    "(--name is the same option).",
)
@click.option(
    "--burst", is_flag=True, help="Run the jobs queued now, then exit 0 (no environment variable)."
)
@click.option(
    "--check",
    is_flag=True,
    help=f"Exit 0 if an RQ worker (named --worker-name, if given) is registered on "
    f"{EFFECTS_QUEUE}, else 1 (no environment variable).",
)
def effects_worker(worker_name: str | None, burst: bool, check: bool, **options: Any) -> None:
    """Run shared-effect jobs from the RQ queue hubsync-effects (with RQ's scheduler).

    Equivalent to `rq worker hubsync-effects --with-scheduler`, with hubsync's
    text or JSON logs. --check asks RQ's worker registry instead: a worker
    stays registered while it heartbeats (RQ's worker TTL), so a dead or
    wedged worker drops out and the check fails. RQ does not support Redis
    Cluster: with a cluster at --redis-url, RQ's queue lives on the Redis
    server of --rq-redis-url, and the jobs' leases and maintenance on the cluster.
    """
    from rq import Queue

    from consumers.jobs.job_connection import PipelineWorker, rq_connection, rq_target

    settings = build_settings(EffectsWorkerSettings, **options)
    name = worker_name
    if name is not None:
        validate_name(name, "worker name")
    configure_logging(settings.log_level, settings.log_format)
    pipeline = redis_target(settings)
    rq_redis = rq_target(pipeline, settings.rq_redis_url)
    # RQ raises the socket timeout above its own blocking dequeue by itself
    client = rq_connection(rq_redis)
    try:
        queue = Queue(EFFECTS_QUEUE, connection=client)
        if check:
            raise SystemExit(_check(client, rq_redis, queue, name))
        ping(client, rq_redis)
        _require_functions(pipeline)
        worker = PipelineWorker(
            [queue], connection=client, name=name, pipeline=pipeline, rq=rq_redis
        )
        worker.work(with_scheduler=True, burst=burst, logging_level=settings.log_level)
    finally:
        client.close()


def _require_functions(pipeline: RedisTarget) -> None:
    """Stop with one line now, not in every job, when the pipeline's Redis lacks hubsync's
    functions (the jobs' leases run them)."""
    from hubstore.redis_functions import require_library

    client = probe(pipeline)
    try:
        require_library(client)
    finally:
        client.close()


def _check(client: redis.Redis, rq_redis: RedisTarget, queue: Any, name: str | None) -> int:
    from rq import Worker

    with reading_health(rq_redis, f"effects worker {name or '*'}"):
        workers = Worker.all(connection=client, queue=queue)
    names = sorted(worker.name for worker in workers)
    alive = name in names if name is not None else bool(names)
    label = name or "any"
    if alive:
        click.echo(f"effects worker {label}: registered on {EFFECTS_QUEUE}")
        return exit_codes.OK
    click.echo(
        f"effects worker {label}: not registered on {EFFECTS_QUEUE} (found {names or 'none'})"
    )
    return exit_codes.FAILURE
