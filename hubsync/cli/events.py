"""``hubsync events``: the events a hub store holds, as JSON lines with a resume cursor."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hubstore.store import EventPosition, StoredEvent
from hubsync.cli.options import hub_options, hub_project_required, json_option, open_hub_store
from hubsync.cli.paging import (
    after_option,
    encode_cursor,
    limit_option,
    print_page,
    project_id_option,
    run_option,
)
from hubsync.core.settings import hub_url_of

_LINE_BREAKS_ESCAPED = {c: f"\\u{c:04x}" for c in (0x85, 0x2028, 0x2029)}
"""NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR: ``str.splitlines`` breaks at these."""


@click.command(
    epilog="""\b
Examples:
  hubsync events --hub-db hub.db --hub-project shop --run run-7 --limit 100
  hubsync events --hub-db hub.db --hub-project shop | jq -c '{run_id, sequence, event_type}'
  hubsync events --hub-db hub.db --hub-project shop --after "$CURSOR" --json | jq -r .next
"""
)
@hub_options
@hub_project_required
@project_id_option
@run_option
@after_option("events")
@limit_option
@json_option
def events(
    hub_url: str | None,
    hub_db: Path | None,
    hub_project: str,
    project_id: str | None,
    run_id: str | None,
    after: EventPosition | None,
    limit: int,
    as_json: bool,
) -> None:
    """List the events the hub stored, as JSON lines, in order of run, project and sequence.

    Each line holds the event's row fields, its stored record (the canonical
    event, as a JSON value) and the `position` to resume after it with
    --after. Reads the hub store only; never creates it.
    """
    url = hub_url_of(hub_url, hub_db)
    if url is None:
        raise click.UsageError("--hub-url: missing; give --hub-url or --hub-db (HUBSYNC_HUB_URL)")
    with open_hub_store(url) as store:
        # One row more than asked says whether another page exists.
        found = store.events(hub_project, run_id, after, limit + 1, project_id=project_id)
    print_page("events", found, limit, event_line, as_json=as_json)


def event_line(event: StoredEvent) -> str:
    """One event as a JSON object; its record is spliced in as the exact stored bytes."""
    fields = json.dumps(
        {
            "project_id": event.project_id,
            "run_id": event.run_id,
            "sequence": event.sequence,
            "hub_project": event.hub_project,
            "home_runtime_id": event.home_runtime_id,
            "event_type": event.event_type,
            "content_hash": event.content_hash,
            "received_at": event.received_at,
            "position": encode_cursor("events", event.position),
        },
        ensure_ascii=False,
    )
    # The record is canonical JSON (valid JSON, no newline), embedded as stored rather than
    # re-serialised; only the characters some line splitters break at (they can stand in
    # its strings alone) become \u escapes, which leaves the JSON value the same.
    record = event.record.decode("utf-8").translate(_LINE_BREAKS_ESCAPED)
    return f'{fields[:-1]}, "record": {record}}}'
