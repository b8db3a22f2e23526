"""``hubsync relay``: the relay daemon of one runtime."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path
from types import FrameType

import click
import redis

from hubsync import keys
from hubsync.cli import exit_codes
from hubsync.cli.options import build_settings, daemon_options, ping_or_unreachable
from hubsync.logs import configure_logging
from hubsync.metrics import start_metrics_server
from hubsync.settings import RelaySettings

log = logging.getLogger(__name__)


@click.command(
    epilog="""\b
Examples:
  hubsync relay --state-dir ~/.hubsync                  run until SIGTERM
  hubsync relay --state-dir ~/.hubsync --once --json    send and read acks once (cron, tests)
  hubsync relay --state-dir ~/.hubsync --check          exit 0 if this runtime's relay is alive
"""
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    envvar="HUBSYNC_STATE_DIR",
    show_envvar=True,
    required=True,
    help="The runtime's state directory.",
)
@click.option(
    "--runtime-id",
    envvar="HUBSYNC_RUNTIME_ID",
    show_envvar=True,
    help="Expected runtime id; refused if the state dir belongs to another.",
)
@click.option(
    "--once", is_flag=True, help="Do everything due now (send, resend, acks), then exit 0."
)
@click.option(
    "--check",
    is_flag=True,
    help="Exit 0 if this runtime's relay refreshed its health key recently, else 1.",
)
@click.option(
    "--batch-count",
    type=int,
    envvar="HUBSYNC_BATCH_COUNT",
    show_envvar=True,
    help="Most events per batch [default: 500].",
)
@click.option(
    "--batch-bytes",
    type=int,
    envvar="HUBSYNC_BATCH_BYTES",
    show_envvar=True,
    help="Most bytes per batch [default: 1048576].",
)
@click.option(
    "--resend-timeout",
    type=float,
    envvar="HUBSYNC_RESEND_TIMEOUT",
    show_envvar=True,
    help="Seconds before an unacked row is resent; doubles per attempt [default: 30].",
)
@click.option(
    "--resend-timeout-cap",
    type=float,
    envvar="HUBSYNC_RESEND_TIMEOUT_CAP",
    show_envvar=True,
    help="Cap of the doubled resend timeout [default: 600].",
)
@click.option(
    "--presence-interval",
    type=float,
    envvar="HUBSYNC_PRESENCE_INTERVAL",
    show_envvar=True,
    help="Seconds between presence heartbeats [default: 10].",
)
@click.option(
    "--poll-interval",
    type=float,
    envvar="HUBSYNC_POLL_INTERVAL",
    show_envvar=True,
    help="Seconds between looks at the outbox when idle [default: 0.002].",
)
@daemon_options
@click.option(
    "--json", "as_json", is_flag=True, help="Print the final summary as one JSON document."
)
def relay(
    state_dir: Path,
    redis_url: str | None,
    runtime_id: str | None,
    once: bool,
    check: bool,
    batch_count: int | None,
    batch_bytes: int | None,
    resend_timeout: float | None,
    resend_timeout_cap: float | None,
    presence_interval: float | None,
    poll_interval: float | None,
    health_ttl: float | None,
    metrics_port: int | None,
    log_format: str | None,
    log_level: str | None,
    as_json: bool,
) -> None:
    """Move this runtime's outboxes onto Redis Streams and apply the hub's acks.

    At start the relay opens every project registered in the state dir (restart
    recovery) and picks up projects registered later. Rows leave within
    milliseconds of their commit, batched by count and bytes; a row is acked
    only when the hub reports accepted or duplicate for its own content hash.
    SIGTERM or SIGINT finishes the current batch and exits 0 with a summary; a
    second signal exits at once.
    """
    settings = build_settings(
        RelaySettings,
        state_dir=state_dir,
        redis_url=redis_url,
        runtime_id=runtime_id,
        batch_count=batch_count,
        batch_bytes=batch_bytes,
        resend_timeout=resend_timeout,
        resend_timeout_cap=resend_timeout_cap,
        presence_interval=presence_interval,
        poll_interval=poll_interval,
        health_ttl=health_ttl,
        metrics_port=metrics_port,
        log_format=log_format,
        log_level=log_level,
    )
    configure_logging(settings.log_level, settings.log_format)
    from producers.registry import RuntimeRegistry
    from producers.relay import Relay

    if check:
        raise SystemExit(_check(settings, RuntimeRegistry(settings.state_dir).runtime_id))
    daemon = Relay(settings)
    try:
        _require_redis(settings.redis_url)
        start_metrics_server(settings.metrics_port)
        if once:
            summary = daemon.run_once()
        else:
            _install_signal_handlers(daemon.request_stop)
            log.info("relay %s started (pid %d)", daemon.runtime_id, os.getpid())
            summary = daemon.run()
    finally:
        daemon.close()
    log.info("%s", summary.line())
    if as_json:
        click.echo(json.dumps(summary.as_dict(), sort_keys=True))
    elif once:
        click.echo(summary.line())


def _require_redis(url: str) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
    try:
        ping_or_unreachable(client, url)
    finally:
        client.close()


def _check(settings: RelaySettings, runtime_id: str) -> int:
    client = redis.Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=5)
    try:
        alive = client.exists(keys.relay_health(runtime_id))
    except (redis.ConnectionError, redis.TimeoutError):
        click.echo(f"relay {runtime_id}: cannot reach Redis", err=True)
        return exit_codes.REDIS_UNREACHABLE
    finally:
        client.close()
    click.echo(f"relay {runtime_id}: {'healthy' if alive else 'no recent heartbeat'}")
    return exit_codes.OK if alive else exit_codes.FAILURE


def _install_signal_handlers(request_stop: object) -> None:
    signals_seen = 0

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen > 1:
            os._exit(128 + signum)  # the operator asked twice: stop now, rows stay pending
        log.info("received %s; finishing the current batch", signal.Signals(signum).name)
        request_stop()  # type: ignore[operator]

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
