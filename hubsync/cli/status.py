"""``hubsync status``: streams, lag, pending, dead letters, alerts, presence, outbox states."""

from __future__ import annotations

import contextlib
import json
import time
from datetime import timedelta
from pathlib import Path

import click
import redis

from consumers.views.projects import known_hub_projects, require_hub_project
from consumers.views.queue_status import health_keys, mark_liveness, project_status
from hubstore.resyncs import ResyncGroup, groups
from hubstore.store import DEFAULT_STALE_AFTER, HubStore
from hubsync.cli import exit_codes
from hubsync.cli.options import (
    deployment_options,
    duration_option,
    env_option,
    hub_project_filter,
    json_option,
    open_hub_store,
    shown_store,
)
from hubsync.cli.status_view import StatusReport, render, unwrapped_console
from hubsync.core.clock import utc_now_iso
from hubsync.core.connections import RedisClient, RedisTarget, probe
from hubsync.core.errors import RedisUnavailableError
from hubsync.core.redis_values import redis_now_ms
from hubsync.core.settings import hub_url_of
from producers.store.outbox_status import local_status

stale_after_option = duration_option(
    "--stale-after",
    default=str(int(DEFAULT_STALE_AFTER.total_seconds())),
    show_default=True,
    help="A runtime silent this long (seconds, or 90s, 2m, ...) is flagged stale.",
)
"""``--stale-after``: when a runtime's presence is flagged stale (status, dashboard)."""


@click.command(
    epilog="""\b
Examples:
  hubsync status                                   every hub project in Redis
  hubsync status --hub-db /var/lib/hubsync/hub.db  add hub DB counts and presence
  hubsync status --state-dir ~/.hubsync --json     add this runtime's outbox, as JSON
  hubsync status --state-dir ~/.hubsync --no-redis the outbox only (no Redis needed)
  hubsync status --watch --interval 5              refresh until Ctrl-C
  hubsync status --hub-db hub.db --fail-on-stale   exit 1 if a daemon is stale or dead
\b
Exit codes: 0 ok, 1 Redis refused the password or, with --fail-on-stale,
something is listed under "unhealthy", 2 bad arguments, 3 Redis unreachable
(the local part, if asked for, is still printed first).
"""
)
@deployment_options
@hub_project_filter
@stale_after_option
@env_option(
    "--no-redis",
    is_flag=True,
    help="Do not contact Redis: show the --state-dir outbox only.",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Redraw every --interval seconds until Ctrl-C (not with --json; no environment variable).",
)
@click.option(
    "--fail-on-stale",
    is_flag=True,
    help="Exit 1 when a runtime is stale (no presence beat for --stale-after), a member of "
    "group hub has no live health key (dead), or a hub project has no live consumer: what "
    "the output lists under 'unhealthy'. For monitoring; not with --watch (no environment "
    "variable).",
)
@duration_option(
    "--interval",
    default="2",
    show_default=True,
    help="Seconds between redraws with --watch.",
)
@json_option
def status(
    redis: RedisTarget,
    hub_url: str | None,
    hub_db: Path | None,
    state_dir: Path | None,
    hub_project: str | None,
    stale_after: float,
    no_redis: bool,
    fail_on_stale: bool,
    watch: bool,
    interval: float,
    as_json: bool,
) -> int:
    """Show the pipeline: per hub project its stream, group lag and pending, consumers,
    dead letters, alerts and runtimes; per local project its outbox.

    Ages on the hub side are measured on Redis's clock; outbox ages on this
    machine's. Without --hub-db, runtimes come from the newest presence beats
    still on the stream (acknowledged entries are trimmed, so a quiet project
    may show none).
    """
    if watch and as_json:
        raise click.UsageError("--watch redraws tables; use --json without --watch")
    if watch and fail_on_stale:
        raise click.UsageError("--fail-on-stale judges one snapshot; use it without --watch")
    if no_redis and fail_on_stale:
        raise click.UsageError("--fail-on-stale judges the daemons in Redis (drop --no-redis)")
    if interval <= 0:
        raise click.UsageError("--interval must be more than 0 seconds")
    url = hub_url_of(hub_url, hub_db)
    if no_redis and (url is not None or hub_project is not None):
        raise click.UsageError("--hub-db, --hub-url and --hub-project need Redis (drop --no-redis)")
    if no_redis and state_dir is None:
        raise click.UsageError("--no-redis shows the local outbox only: give --state-dir")
    gather = StatusGatherer(redis, url, state_dir, hub_project, stale_after, no_redis)
    with gather:
        if watch:
            _watch(gather, interval)
            return exit_codes.OK
        report = gather.report()
    unreachable = report.redis_reachable is False
    if as_json:
        click.echo(json.dumps(report.as_dict(), sort_keys=True))
    elif report.local is not None or not unreachable:
        unwrapped_console().print(render(report))
    if unreachable:
        # main() prints the one error line and exits 3, after whatever local part was shown.
        raise RedisUnavailableError(f"{report.redis_url}: {report.redis_error}")
    if fail_on_stale and report.unhealthy():
        return exit_codes.FAILURE
    return exit_codes.OK


class StatusGatherer:
    """Takes snapshots with connections kept open between redraws."""

    def __init__(
        self,
        redis: RedisTarget,
        hub_url: str | None,
        state_dir: Path | None,
        hub_project: str | None,
        stale_after: float,
        no_redis: bool,
    ) -> None:
        self.redis = redis
        self.hub_url = hub_url
        self.state_dir = state_dir
        self.hub_project = hub_project
        self.stale_after = timedelta(seconds=stale_after)
        self.no_redis = no_redis
        self._client: RedisClient | None = None
        self._store: HubStore | None = None

    def __enter__(self) -> StatusGatherer:
        if self.hub_url is not None:
            self._store = open_hub_store(self.hub_url)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._store is not None:
            self._store.close()
        if self._client is not None:
            self._client.close()

    def report(self) -> StatusReport:
        """One snapshot; an unreachable Redis is recorded in it, not raised."""
        report = StatusReport(
            generated_at=utc_now_iso(),
            redis_url=self.redis.shown,
            redis_reachable=None if self.no_redis else False,
            hub_db=None if self.hub_url is None else shown_store(self.hub_url),
        )
        # The local part first: it needs no network, so it shows even when Redis is down.
        if self.state_dir is not None:
            report.local = local_status(self.state_dir)
        if self._store is not None:
            report.resyncs = shown_resyncs(self._store)
        if self.no_redis:
            return report
        try:
            client = self.connect()
            projects = (
                [require_hub_project(client, self.hub_project)]
                if self.hub_project is not None
                else known_hub_projects(client)
            )
            now_ms = redis_now_ms(client)
            report.hub_projects = [
                project_status(client, p, now_ms, self._store, self.stale_after) for p in projects
            ]
            report.health = health_keys(client)  # after the groups: see mark_liveness
            for project in report.hub_projects:
                mark_liveness(project, report.health)
            report.redis_reachable = True
        except RedisUnavailableError as exc:
            report.redis_error = str(exc).partition(": ")[2] or str(exc)
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as exc:
            self.drop_client()
            report.redis_error = type(exc).__name__
        return report

    @property
    def store(self) -> HubStore | None:
        """The hub store opened on entry (None without a hub URL)."""
        return self._store

    def connect(self) -> RedisClient:
        """The Redis client snapshots use, connected (and PINGed) on first use."""
        if self._client is None:
            self._client = probe(self.redis)
        return self._client

    def drop_client(self) -> None:
        """Close the Redis client after an outage; the next use connects afresh."""
        if self._client is not None:
            with contextlib.suppress(redis.RedisError):
                self._client.close()
            self._client = None


def shown_resyncs(store: HubStore) -> list[ResyncGroup]:
    """The resyncs in progress, and the latest one when it is done."""
    found = groups(store.resyncs())
    latest = found[-1:] if found and found[-1].finished else []
    return [g for g in found if not g.finished] + latest


def _watch(gather: StatusGatherer, interval: float) -> None:
    """Redraw in place until Ctrl-C, which ends the command with exit code 0."""
    from rich.live import Live

    with (
        contextlib.suppress(KeyboardInterrupt),
        Live(render(gather.report()), auto_refresh=False, screen=False) as live,
    ):
        while True:
            time.sleep(interval)
            live.update(render(gather.report()), refresh=True)
