"""``hubsync runs``: the runs a hub store holds, with counts, sync cursor and gaps."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hubstore.store import RunPosition, RunSummary
from hubsync.cli.options import hub_options, hub_project_required, json_option, open_hub_store
from hubsync.cli.paging import (
    after_option,
    encode_cursor,
    limit_option,
    print_page,
    project_id_option,
)
from hubsync.core.settings import hub_url_of

GAPS_PER_RUN = 10
"""Gap ranges shown per run; `missing` counts them all."""


@click.command(
    epilog="""\b
Examples:
  hubsync runs --hub-db hub.db --hub-project shop
  hubsync runs --hub-db hub.db --hub-project shop | jq -c 'select(.missing > 0)'
  hubsync runs --hub-db hub.db --hub-project shop --after "$CURSOR" --json | jq -r .next
"""
)
@hub_options
@hub_project_required
@project_id_option
@after_option("runs")
@limit_option
@json_option
def runs(
    hub_url: str | None,
    hub_db: Path | None,
    hub_project: str,
    project_id: str | None,
    after: RunPosition | None,
    limit: int,
    as_json: bool,
) -> None:
    """List the runs the hub stored, as JSON lines: events, sync cursor, gaps, last received.

    In order of run then project; each line holds the `position` to resume
    after it with --after. Reads the hub store only; never creates it.
    """
    url = hub_url_of(hub_url, hub_db)
    if url is None:
        raise click.UsageError("--hub-url: missing; give --hub-url or --hub-db (HUBSYNC_HUB_URL)")
    with open_hub_store(url) as store:
        # One run more than asked says whether another page exists.
        found = store.runs(
            hub_project, after, limit + 1, project_id=project_id, gaps_per_run=GAPS_PER_RUN
        )
    print_page("runs", found, limit, run_line, as_json=as_json)


def run_line(run: RunSummary) -> str:
    """One run as a JSON object."""
    return json.dumps(
        {
            "run_id": run.run_id,
            "project_id": run.project_id,
            "hub_project": run.hub_project,
            "home_runtime_id": run.home_runtime_id,
            "events": run.events,
            "highest_sequence": run.highest_sequence,
            "sync_cursor": run.sync_cursor,
            "missing": run.missing,
            "gaps": [list(g) for g in run.gaps],
            "last_received_at": run.last_received_at,
            "position": encode_cursor("runs", run.position),
        },
        ensure_ascii=False,
    )
