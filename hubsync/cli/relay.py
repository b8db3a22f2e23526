"""``hubsync relay``: the relay daemon of one runtime."""

from __future__ import annotations

import json
import logging
from typing import Any

import click

from hubsync.cli import exit_codes
from hubsync.cli.health_checks import reading_health
from hubsync.cli.options import build_settings, options_from, redis_target
from hubsync.core import keys
from hubsync.core.connections import (
    RedisTarget,
    Role,
    connect,
    probe,
)
from hubsync.core.logs import configure_logging
from hubsync.core.settings import RelaySettings
from hubsync.telemetry import configure_tracing
from producers.errors import UnreadableStoreError

log = logging.getLogger(__name__)


@click.command(
    epilog="""\b
Examples:
  hubsync relay --state-dir ~/.hubsync                  run until SIGTERM
  hubsync relay --state-dir ~/.hubsync --once --json    send and read acks once (cron, tests)
  hubsync relay --state-dir ~/.hubsync --check          exit 0 if this runtime's relay is alive
\b
A project whose store cannot be read (another schema version, a corrupt or
missing file) is set aside and retried, up to every 60 s; the other projects
keep syncing. --once then exits 1 after sending the others, so cron notices.
"""
)
@options_from(RelaySettings)
@click.option(
    "--once",
    is_flag=True,
    help="Do everything due now (send, resend, acks), then exit 0, or 1 if a project's store "
    "could not be read (the others were still synced; no environment variable).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Exit 0 if this runtime's relay refreshed its health key recently, else 1; "
    "says how many projects it cannot read (no environment variable).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the final summary as one JSON document (no environment variable).",
)
def relay(once: bool, check: bool, as_json: bool, **options: Any) -> None:
    """Move this runtime's outboxes onto Redis Streams and apply the hub's acks.

    At start the relay opens every project registered in the state dir (restart
    recovery) and picks up projects registered later. Rows leave within
    milliseconds of their commit, batched by count and bytes; a row is acked
    only when the hub reports accepted or duplicate for its own content hash.
    SIGTERM or SIGINT finishes the current batch and exits 0 with a summary; a
    second signal exits at once. One relay runs per state dir: a second one
    (daemon or --once) exits 2, naming the pid that holds the state dir.
    """
    settings = build_settings(RelaySettings, **options)
    configure_logging(settings.log_level, settings.log_format)
    target = redis_target(settings)
    if check:
        from producers.registry import RuntimeRegistry

        with RuntimeRegistry(settings.state_dir, create=False) as registry:
            runtime_id = registry.runtime_id
        raise SystemExit(_check(target, runtime_id))
    from hubsync.core.gc_tuning import tune_for_throughput
    from hubsync.core.metrics import RELAY_REGISTRY, serve_daemon_metrics  # prometheus_client
    from producers.relay import Relay

    # SIGTERM and SIGINT stop the daemon (not --once) until it has closed: the first finishes
    # the current batch, a second exits at once
    tracing = configure_tracing("hubsync-relay")  # spans only when OTEL_* asks for them
    daemon = Relay(settings, target=target, handle_signals=not once)
    with daemon.stop_signals():
        try:
            serve_daemon_metrics(settings, RELAY_REGISTRY, daemon.readiness.problems)
            if once:
                probe(target).close()  # --once cannot wait: exit 3 now
                summary = daemon.run_once()
            else:
                # the daemon waits for an unreachable Redis (logging it) rather than exiting
                tune_for_throughput()
                summary = daemon.run()
        finally:
            daemon.close()
            if tracing is not None:
                tracing.shutdown()
    daemon.log_summary(summary.line(), summary.as_dict())
    if as_json:
        click.echo(json.dumps(summary.as_dict(), sort_keys=True))
    elif once:
        click.echo(summary.line())
    if once and summary.unreadable:
        raise UnreadableStoreError(_unreadable_line(summary.unreadable))


def _unreadable_line(unreadable: dict[str, str]) -> str:
    first, reason = sorted(unreadable.items())[0]
    if len(unreadable) == 1:
        return f"project {first} was not synced (the others were): {reason}"
    return (
        f"{len(unreadable)} projects were not synced ({', '.join(sorted(unreadable))}; the "
        f"others were); {first}: {reason}"
    )


def _check(target: RedisTarget, runtime_id: str) -> int:
    client = connect(target, Role.PROBE)
    try:
        with reading_health(target, f"relay {runtime_id}"):
            record = client.get(keys.relay_health(runtime_id))
    finally:
        client.close()
    if record is None:
        click.echo(f"relay {runtime_id}: no recent heartbeat")
        return exit_codes.FAILURE
    # A project it cannot read is that project's fault, not the relay's: still healthy.
    unreadable = int(json.loads(record).get("unreadable_projects", 0))
    noun = "project" if unreadable == 1 else "projects"
    note = f", {unreadable} {noun} unreadable (hubsync status --state-dir)" if unreadable else ""
    click.echo(f"relay {runtime_id}: healthy{note}")
    return exit_codes.OK
