"""``hubsync effects-worker``: an RQ worker on ``hubsync-effects`` with hubsync's logging, or its check."""

from __future__ import annotations

from typing import Any

import click
import redis

from hubsync.cli import exit_codes
from hubsync.connections import connect, ping
from hubsync.keys import EFFECTS_QUEUE
from hubsync.logs import configure_logging
from hubsync.names import validate_name
from hubsync.settings import DEFAULT_REDIS_URL


@click.command(
    "effects-worker",
    epilog=f"""\b
Examples:
  hubsync effects-worker --name effects-1                 run shared-effect jobs until SIGTERM
  hubsync effects-worker --burst                          run what is queued, then exit
  hubsync effects-worker --name effects-1 --check         exit 0 if effects-1 is registered
  rq worker {EFFECTS_QUEUE} --with-scheduler --name effects-1   the same worker, rq's own CLI
""",
)
@click.option(
    "--redis-url",
    envvar=["HUBSYNC_REDIS_URL", "REDIS_URL"],
    show_envvar=True,
    help=f"Redis URL [default: {DEFAULT_REDIS_URL}].",
)
@click.option(
    "--name",
    envvar="HUBSYNC_NAME",
    show_envvar=True,
    help="Worker name [default: rq's own]; with --check, the worker to look for.",
)
@click.option("--burst", is_flag=True, help="Run the jobs queued now, then exit 0.")
@click.option(
    "--check",
    is_flag=True,
    help=f"Exit 0 if an RQ worker (named --name, if given) is registered on {EFFECTS_QUEUE}, else 1.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    envvar="HUBSYNC_LOG_FORMAT",
    show_envvar=True,
    help="Log format [default: text].",
)
@click.option(
    "--log-level", envvar="HUBSYNC_LOG_LEVEL", show_envvar=True, help="Log level [default: INFO]."
)
def effects_worker(
    redis_url: str | None,
    name: str | None,
    burst: bool,
    check: bool,
    log_format: str | None,
    log_level: str | None,
) -> None:
    """Run shared-effect jobs from the RQ queue hubsync-effects (with RQ's scheduler).

    Equivalent to `rq worker hubsync-effects --with-scheduler`, with hubsync's
    text or JSON logs. --check asks RQ's worker registry instead: a worker
    stays registered while it heartbeats (RQ's worker TTL), so a dead or
    wedged worker drops out and the check fails.
    """
    from rq import Queue, Worker

    url = redis_url or DEFAULT_REDIS_URL
    if name is not None:
        validate_name(name, "worker name")
    configure_logging(log_level or "INFO", log_format or "text")
    # RQ raises the socket timeout above its own blocking dequeue by itself
    client = connect(url)
    try:
        queue = Queue(EFFECTS_QUEUE, connection=client)
        if check:
            raise SystemExit(_check(client, queue, name))
        ping(client, url)
        worker = Worker([queue], connection=client, name=name)
        worker.work(with_scheduler=True, burst=burst, logging_level=(log_level or "INFO").upper())
    finally:
        client.close()


def _check(client: redis.Redis, queue: Any, name: str | None) -> int:
    from rq import Worker

    try:
        workers = Worker.all(connection=client, queue=queue)
    except (redis.ConnectionError, redis.TimeoutError):
        click.echo(f"effects worker {name or '*'}: cannot reach Redis", err=True)
        return exit_codes.REDIS_UNREACHABLE
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
