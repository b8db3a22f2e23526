"""``hubsync alerts list``: the conflicts the hub refused (security alerts)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from consumers.views.alerts import read_alerts
from consumers.views.projects import known_hub_projects, require_hub_project
from hubstore.store import AlertRecord
from hubsync.cli.options import (
    count_option,
    hub_options,
    hub_project_filter,
    json_option,
    open_hub_store,
    redis_url_option,
    shown_store,
)
from hubsync.core.connections import RedisTarget, probe
from hubsync.core.redis_values import printable
from hubsync.core.settings import hub_url_of


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
@hub_options
@count_option("alerts listed per project and source (newest first)")
@redis_url_option
@json_option
def list_alerts(
    hub_project: str | None,
    hub_url: str | None,
    hub_db: Path | None,
    count: int,
    redis: RedisTarget,
    as_json: bool,
) -> None:
    """List alerts from hubsync:{P}:alerts (and the hub database's sync_alerts with --hub-db)."""
    store_url = hub_url_of(hub_url, hub_db)
    client = probe(redis)
    try:
        if hub_project is not None:
            projects = [require_hub_project(client, hub_project)]
        else:
            projects = known_hub_projects(client)
        streamed = [alert for p in projects for alert in read_alerts(client, p, count)]
    finally:
        client.close()
    recorded = _recorded(store_url, projects if hub_project else None, count)
    if as_json:
        document: dict[str, Any] = {
            "hub_projects": projects,
            "stream": [alert.as_dict() for alert in streamed],
            "hub_db": None if recorded is None else [asdict(a) for a in recorded],
        }
        click.echo(json.dumps(document, sort_keys=True))
        return
    # Plain lines, not tables: keys and hashes must stay whole at any terminal width.
    # Every field came off Redis (a forger's included): each line is printed escaped.
    where = ", ".join(projects) if projects else "no hub project yet"
    _echo(f"alert streams ({where}): {len(streamed)} alert(s), newest first")
    for a in streamed:
        _echo(
            f"{a.id}  {a.hub_project}  {a.reason}  key {a.project_id}/{a.run_id}/{a.sequence}  "
            f"runtime {a.runtime_id}  existing {_short(a.existing_hash)}  "
            f"offered {_short(a.offered_hash)}  at {a.detected_at}"
        )
    if recorded is not None:
        _echo(f"hub store {shown_store(store_url or '')}: {len(recorded)} alert(s), newest first")
        for r in recorded:
            _echo(
                f"#{r.alert_id}  {r.hub_project}  {r.reason.value}  "
                f"key {r.project_id}/{r.run_id}/{r.sequence}  runtime {r.runtime_id}  "
                f"existing {_short(r.existing_hash or '')}  offered {_short(r.offered_hash)}  "
                f"seen {r.occurrences}x, last at {r.last_detected_at}"
            )


def _echo(line: str) -> None:
    click.echo(printable(line))


def _recorded(
    hub_url: str | None, projects: list[str] | None, count: int
) -> list[AlertRecord] | None:
    if hub_url is None:
        return None
    with open_hub_store(hub_url) as store:
        if projects is None:
            return store.alerts(limit=count)
        return [a for p in projects for a in store.alerts(p, limit=count)]


def _short(digest: str) -> str:
    return digest[:12] if digest else "-"
