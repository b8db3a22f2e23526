"""``hubsync resync``: ask one runtime to resend a slice of its events (the operator's rewind).

The request is the one ``hubsync hub restore`` sends every runtime (docs/contract.md,
"Resync"): signed with the runtime's key, on its acks stream, kept in the hub store. Its
point is the hub store's own run cursors, or ``--since``. What the hub still holds comes
back ``duplicate``; nothing is stored twice. The helpers here (asking, following the
progress) are ``hub restore``'s too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hubsync.cli.options import (
    hub_options,
    json_option,
    open_hub_store,
    redis_url_option,
    required_hub_url,
    valid_name,
)
from hubsync.core.clock import format_timestamp, utc_now
from hubsync.core.connections import RedisTarget
from hubsync.core.durations import parse_duration
from hubsync.core.errors import ConfigError

if TYPE_CHECKING:
    from hubstore.resyncs import ResyncRecord

POLL_SECONDS = 1.0
"""Seconds between two progress lines of ``--wait``."""


def wait_option(command: click.decorators.FC) -> click.decorators.FC:
    """``--wait SECONDS``: follow the progress until every runtime is done, or that long."""
    return click.option(
        "--wait",
        "wait_seconds",
        type=click.FloatRange(min=0),
        default=None,
        metavar="SECONDS",
        help="Print the progress every second until every runtime asked is done, at most "
        "this long; exit 1 if they are not done by then (no environment variable).",
    )(command)


def since_time(value: str | None) -> str | None:
    """``--since``: an ISO-8601 time with its offset, or a duration ago (``90m``, ``2h``)."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is not None and moment.tzinfo is not None:
        return format_timestamp(moment)
    try:
        ago = parse_duration(value)
    except (ValueError, ConfigError):
        raise click.UsageError(
            "--since: give an ISO-8601 time with its UTC offset (2026-01-31T22:00:00Z) or a "
            "duration ago (90m, 2h, 1d)"
        ) from None
    return format_timestamp(utc_now() - timedelta(seconds=ago))


def follow(hub_url: str, group_id: str, wait_seconds: float) -> bool:
    """Print the group's progress on stderr every ``POLL_SECONDS`` until every runtime is
    done or ``wait_seconds`` passed; whether they are done."""
    from hubstore.resyncs import groups

    deadline = time.monotonic() + wait_seconds
    while True:
        with open_hub_store(hub_url) as store:
            mine = [r for r in store.resyncs() if r.group_id == group_id]
        found = groups(mine)
        if not found:
            return True  # the store lost them: nothing to follow
        click.echo(found[0].line(), err=True)
        if found[0].finished:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def asked_document(records: Sequence[ResyncRecord]) -> list[dict[str, object]]:
    """The requests published, for ``--json``."""
    return [
        {
            "runtime_id": r.runtime_id,
            "hub_project": r.hub_project,
            "request_id": r.request_id,
            "parts": r.parts,
        }
        for r in records
    ]


def report_asked(
    hub_url: str,
    group_id: str,
    wait_seconds: float | None,
    as_json: bool,
    document: Mapping[str, object],
    lines: Sequence[str],
) -> None:
    """The end of a command that asked for a resync: the group followed for ``wait_seconds``
    (``--wait``), then ``document`` printed with whether it is ``done`` (``--json``), or
    ``lines`` and how to follow the group; exit 1 when the wait ran out first."""
    from hubsync.cli.options import shown_store

    done = None if wait_seconds is None else follow(hub_url, group_id, wait_seconds)
    if as_json:
        click.echo(json.dumps({**document, "done": done}, sort_keys=True))
    else:
        for line in lines:
            click.echo(line)
        click.echo(
            f"follow it with: hubsync status --hub-url {shown_store(hub_url)} (resync "
            f"{group_id}); each runtime's relay resends as soon as it reads the request"
        )
    if done is False:
        raise SystemExit(1)


@click.command(
    epilog="""\b
Examples:
  hubsync resync --hub-db /var/lib/hubsync/hub.db --runtime rt-build-1
  hubsync resync --hub-db hub.db --runtime rt-build-1 --hub-project acme \\
      --project-id shop-48ee17a7 --run run-2041
  hubsync resync --hub-db hub.db --runtime rt-build-1 --since 2h --wait 600 --json
"""
)
@click.option(
    "--runtime",
    "runtime_id",
    required=True,
    callback=valid_name("runtime id"),
    help="The runtime to ask (no environment variable).",
)
@click.option(
    "--hub-project",
    callback=valid_name("hub project"),
    help="Only this hub project of the runtime [default: each of its hub projects] "
    "(no environment variable).",
)
@click.option(
    "--project-id",
    callback=valid_name("project id"),
    help="Only this project (no environment variable).",
)
@click.option(
    "--run",
    "run_id",
    callback=valid_name("run id"),
    help="Only this run (no environment variable).",
)
@click.option(
    "--since",
    help="Resend what the runtime recorded since this time (ISO-8601 with offset, or a "
    "duration ago: 2h) instead of what lies beyond the hub's run cursors (no environment "
    "variable).",
)
@hub_options
@redis_url_option
@wait_option
@json_option
def resync(
    runtime_id: str,
    hub_project: str | None,
    project_id: str | None,
    run_id: str | None,
    since: str | None,
    hub_url: str | None,
    hub_db: Path | None,
    redis: RedisTarget,
    wait_seconds: float | None,
    as_json: bool,
) -> None:
    """Ask one runtime to resend a slice of its events: a rewind.

    For a hub table damaged by hand, or a reader downstream that needs a
    replay. The runtime's relay (daemon or --once) puts its acked outbox rows
    beyond the hub store's run cursors (or recorded since --since) back to
    pending, derives the ones retention pruned again from its event store,
    and resends them; what the hub still holds comes back duplicate, so
    nothing is stored twice. Parked (conflict, rejected) rows stay parked.
    The request is signed with the runtime's key, so the runtime must be
    enrolled and active (exit 2 otherwise). Progress shows in hubsync status.
    """
    from consumers.stream.resync_requests import ResyncAsk, ask_resync
    from hubstore.store import RuntimeState
    from hubsync.core.connections import probe
    from hubsync.core.resync import ResyncScope

    url = required_hub_url(hub_url, hub_db)
    point = since_time(since)
    with open_hub_store(url) as store:
        hub_id = store.hub_id()
        runtime = store.enrolled_runtime(runtime_id)
        if hub_id is None or runtime is None or runtime.state is not RuntimeState.ACTIVE:
            raise ConfigError(f"--runtime: {runtime_id} is not an active runtime of this hub")
        projects = runtime.hub_projects if hub_project is None else (hub_project,)
        if hub_project is not None and hub_project not in runtime.hub_projects:
            raise ConfigError(f"--hub-project: {runtime_id} is not enrolled for {hub_project}")
        scope = ResyncScope(project_id, run_id)
        asks = [ResyncAsk(runtime, p, scope, point) for p in projects]
        client = probe(redis)
        try:
            group_id, records = ask_resync(client, store, hub_id, asks, reason="resync")
        finally:
            client.close()
    document = {
        "group_id": group_id,
        "runtime_id": runtime_id,
        "requests": asked_document(records),
        "scope": json.loads(scope.encoded()),
        "since": point,
    }
    lines = [
        f"asked runtime {runtime_id} to resync hub project {r.hub_project} from {r.point} "
        f"(request {r.request_id}, {r.parts} parts)"
        for r in records
    ]
    report_asked(url, group_id, wait_seconds, as_json, document, lines)
