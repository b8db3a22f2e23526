"""``hubsync dashboard``: serve the pipeline's overview, drill-downs and confirmed actions over HTTP."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import click

from hubsync.cli.options import duration_option, env_option, hub_options, redis_url_option
from hubsync.cli.status import stale_after_option
from hubsync.core.connections import RedisTarget
from hubsync.core.daemon import STOP_SIGNALS, swap_signal_handlers
from hubsync.core.errors import ConfigError
from hubsync.core.settings import hub_url_of

DEFAULT_PORT = 8472


@click.command(
    epilog="""\b
Examples:
  hubsync dashboard --hub-db /var/lib/hubsync/hub.db      http://127.0.0.1:8472, read-only
  hubsync dashboard --hub-db hub.db --allow-actions       confirmed replay, purge, remove, resolve
  hubsync dashboard --host 0.0.0.0 --token-file /etc/hubsync/dashboard.token
\b
Exit codes: 0 stopped by Ctrl-C or SIGTERM, 2 bad arguments (binding beyond this
machine without --token-file, among others).
"""
)
@redis_url_option
@hub_options
@env_option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but a loopback address needs --token-file.",
)
@env_option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="TCP port to listen on.",
)
@env_option(
    "--token-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="File holding a bearer token (16 characters or more): every request must send "
    "'Authorization: Bearer <token>'. Required to listen beyond loopback.",
)
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Offer dead-letter replay and purge, consumer removal and verdicts on parked effects, "
    "each after a confirmation page (no environment variable: read-only unless asked on the "
    "command line).",
)
@env_option(
    "--effects-ledger",
    type=click.Path(path_type=Path, dir_okay=False),
    multiple=True,
    help="An effects ledger whose attempts parked blocked_uncertain are listed (repeatable).",
)
@stale_after_option
@duration_option(
    "--amber-after",
    default="60",
    show_default=True,
    help="Oldest pending entry shown amber from this age.",
)
@duration_option(
    "--red-after",
    default="300",
    show_default=True,
    help="Oldest pending entry shown red from this age.",
)
@duration_option(
    "--refresh",
    default="5",
    show_default=True,
    help="Seconds between the main page's live updates and between the dashboard's samples "
    "of ingest rate and lag (kept 15 minutes).",
)
def dashboard(
    redis: RedisTarget,
    hub_url: str | None,
    hub_db: Path | None,
    host: str,
    port: int,
    token_file: Path | None,
    allow_actions: bool,
    effects_ledger: tuple[Path, ...],
    stale_after: float,
    amber_after: float,
    red_after: float,
    refresh: float,
) -> None:
    """Serve the pipeline in a browser: security alerts, a card per hub project with its
    sparklines, runtimes, consumers, leases and parked effects, and drill-downs into dead
    letters, runs and events.

    It reads what status, dead, alerts, runs, events, lease and consumers read,
    through their code. Read-only and on 127.0.0.1 unless told otherwise.
    """
    try:
        import uvicorn

        from hubsync.dashboard.app import Dashboard, DashboardConfig
        from hubsync.dashboard.guard import is_loopback, read_token_file
        from hubsync.dashboard.history import History
        from hubsync.dashboard.sources import Sources
    except ImportError as exc:
        raise ConfigError(
            f"the dashboard needs the web extra ({exc.name} is missing): pip install 'hubsync[web]'"
        ) from None
    if refresh <= 0:
        raise click.UsageError("--refresh must be more than 0 seconds")
    if red_after < amber_after:
        raise click.UsageError("--red-after must be at least --amber-after")
    token = None if token_file is None else read_token_file(token_file)
    if token is None and not is_loopback(host):
        raise click.UsageError(
            f"--host {host} listens beyond this machine: give --token-file (a bearer token), "
            "or keep the default 127.0.0.1"
        )
    config = DashboardConfig(host, token, allow_actions, amber_after, red_after, refresh)
    history = History(time.monotonic)
    url = hub_url_of(hub_url, hub_db)
    with Sources(redis, url, stale_after, effects_ledger, history) as sources:
        app = Dashboard(sources, config).app()
        mode = "actions allowed" if allow_actions else "read-only"
        shown_host = f"[{host}]" if ":" in host else host
        click.echo(f"hubsync dashboard on http://{shown_host}:{port}/ ({mode}); Ctrl-C stops it")
        with _stop_signals_end_quietly():
            uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


@contextlib.contextmanager
def _stop_signals_end_quietly() -> Iterator[None]:
    """Exit 0 on SIGINT or SIGTERM. uvicorn stops serving on the first one, puts back the
    handlers it found and raises the signal again once stopped; the handlers found are
    these, which take that repeat as done."""
    restore = swap_signal_handlers(STOP_SIGNALS, lambda *_: None)
    try:
        yield
    finally:
        restore()
