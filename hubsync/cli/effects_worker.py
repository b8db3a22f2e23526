"""``hubsync effects-worker``: an RQ worker on ``hubsync-effects`` with hubsync's logging, or its check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import redis

from hubsync.cli import exit_codes
from hubsync.cli.options import env_option, options_from, use_redis_credentials
from hubsync.connections import CREDENTIAL_ERRORS, UNREACHABLE_ERRORS, connect, ping
from hubsync.keys import EFFECTS_QUEUE
from hubsync.logs import configure_logging
from hubsync.names import validate_name
from hubsync.settings import CommonSettings


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
@options_from(CommonSettings)
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
def effects_worker(
    redis_url: str,
    redis_password_file: Path | None,
    worker_name: str | None,
    burst: bool,
    check: bool,
    log_format: str,
    log_level: str,
) -> None:
    """Run shared-effect jobs from the RQ queue hubsync-effects (with RQ's scheduler).

    Equivalent to `rq worker hubsync-effects --with-scheduler`, with hubsync's
    text or JSON logs. --check asks RQ's worker registry instead: a worker
    stays registered while it heartbeats (RQ's worker TTL), so a dead or
    wedged worker drops out and the check fails.
    """
    from rq import Queue, Worker

    url = redis_url
    name = worker_name
    if name is not None:
        validate_name(name, "worker name")
    configure_logging(log_level, log_format)
    use_redis_credentials(CommonSettings(redis_url=url, redis_password_file=redis_password_file))
    # RQ raises the socket timeout above its own blocking dequeue by itself
    client = connect(url)
    try:
        queue = Queue(EFFECTS_QUEUE, connection=client)
        if check:
            raise SystemExit(_check(client, queue, name))
        ping(client, url)
        worker = Worker([queue], connection=client, name=name)
        worker.work(with_scheduler=True, burst=burst, logging_level=log_level)
    finally:
        client.close()


def _check(client: redis.Redis, queue: Any, name: str | None) -> int:
    from rq import Worker

    try:
        workers = Worker.all(connection=client, queue=queue)
    except CREDENTIAL_ERRORS:
        raise  # a wrong user or password is a refusal (exit 1), not an outage
    except UNREACHABLE_ERRORS:
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
