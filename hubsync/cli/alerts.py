"""``hubsync alerts list``: the conflicts the hub refused (security alerts)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from consumers.alerts import StreamAlert, read_alerts
from consumers.projects import known_hub_projects, require_hub_project
from hubstore.store import AlertRecord
from hubsync.cli.operator_options import (
    connect_redis,
    hub_db_option,
    hub_project_filter,
    json_option,
    redis_url_option,
)


@click.group(
    epilog="""\b
Examples:
  hubsync alerts list
  hubsync alerts list --hub-project acme --hub-db /var/lib/hubsync/hub.db --json
"""
)
def alerts() -> None:
    """Conflicts: the same (project, run, sequence) offered with other bytes, or from the
    wrong hub project or runtime. Each is refused, recorded and never acked as success."""


@alerts.command(
    "list",
    epilog="""\b
Examples:
  hubsync alerts list --hub-project acme --count 20
  hubsync alerts list --hub-db hub.db --json
""",
)
@hub_project_filter
@hub_db_option
@click.option(
    "--count",
    type=click.IntRange(1, 100_000),
    default=50,
    show_default=True,
    envvar="HUBSYNC_COUNT",
    show_envvar=True,
    help="Most alerts listed per project and source (newest first).",
)
@redis_url_option
@json_option
def list_alerts(
    hub_project: str | None, hub_db: Path | None, count: int, redis_url: str, as_json: bool
) -> None:
    """List alerts from hubsync:{P}:alerts (and the hub database's sync_alerts with --hub-db)."""
    client = connect_redis(redis_url)
    try:
        if hub_project is not None:
            projects = [require_hub_project(client, hub_project)]
        else:
            projects = known_hub_projects(client)
        streamed = [alert for p in projects for alert in read_alerts(client, p, count)]
    finally:
        client.close()
    recorded = _recorded(hub_db, projects if hub_project else None, count)
    if as_json:
        document: dict[str, Any] = {
            "hub_projects": projects,
            "stream": [alert.as_dict() for alert in streamed],
            "hub_db": None if recorded is None else [asdict(a) for a in recorded],
        }
        click.echo(json.dumps(document, sort_keys=True))
        return
    console = Console(highlight=False, soft_wrap=False)
    where = ", ".join(projects) if projects else "no hub project yet"
    if streamed:
        console.print(_stream_table(streamed))
    else:
        console.print(f"no alerts on the alert streams ({where})", markup=False)
    if recorded:
        console.print(_recorded_table(recorded))
    elif recorded is not None:
        console.print(f"no alerts in the hub database {hub_db}", markup=False)


def _recorded(
    hub_db: Path | None, projects: list[str] | None, count: int
) -> list[AlertRecord] | None:
    if hub_db is None:
        return None
    from hubstore.sqlite_store import SqliteHubStore

    with SqliteHubStore(hub_db, busy_budget=10.0) as store:
        if projects is None:
            return store.alerts(limit=count)
        return [a for p in projects for a in store.alerts(p, limit=count)]


def _short(digest: str) -> str:
    return digest[:12] if digest else "-"


def _stream_table(items: list[StreamAlert]) -> Table:
    table = Table(title=f"alert streams: {len(items)} alert(s)", title_justify="left")
    for column in ("id", "hub project", "reason", "key", "runtime", "existing", "offered", "at"):
        table.add_column(column, overflow="fold", no_wrap=column in ("id", "at"))
    for a in items:
        table.add_row(
            a.id,
            a.hub_project,
            a.reason,
            f"{a.project_id}/{a.run_id}/{a.sequence}",
            a.runtime_id,
            _short(a.existing_hash),
            _short(a.offered_hash),
            a.detected_at,
        )
    return table


def _recorded_table(items: list[AlertRecord]) -> Table:
    table = Table(title=f"hub database: {len(items)} alert(s)", title_justify="left")
    for column in ("id", "hub project", "reason", "key", "runtime", "times", "last seen"):
        table.add_column(column, overflow="fold")
    for a in items:
        table.add_row(
            str(a.alert_id),
            a.hub_project,
            a.reason.value,
            f"{a.project_id}/{a.run_id}/{a.sequence}",
            a.runtime_id,
            str(a.occurrences),
            a.last_detected_at,
        )
    return table
