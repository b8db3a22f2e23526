"""``hubsync hub``: the hub store itself (``hub migrate``: create or upgrade its schema)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hubsync.cli.options import hub_options, json_option, shown_store
from hubsync.settings import hub_url_of
from hubsync.sqlite import SchemaChange


@click.group(
    epilog="""\b
Examples:
  hubsync hub migrate --hub-db /var/lib/hubsync/hub.db
  hubsync hub migrate --hub-url sqlite:////var/lib/hubsync/hub.db --json
"""
)
def hub() -> None:
    """The hub store itself: create or upgrade its schema (migrate)."""


@hub.command(
    "migrate",
    epilog="""\b
Examples:
  hubsync hub migrate --hub-db /var/lib/hubsync/hub.db
  HUBSYNC_HUB_URL=sqlite:////var/lib/hubsync/hub.db hubsync hub migrate --json
""",
)
@hub_options
@json_option
def migrate(hub_url: str | None, hub_db: Path | None, as_json: bool) -> None:
    """Create or upgrade the hub store's schema.

    Prints what was done: created, upgraded from version X to Y (and each
    step), or already current. A SQLite file of an older schema version is
    first copied to <file>.v<old>.bak beside it (mode 0600), then upgraded
    step by step in one transaction: it ends at the current version or stays
    as it was. Running it again does nothing. A newer version is refused and
    left untouched (exit 1). Stop the consumers first on a large database:
    they wait for the upgrade.
    """
    from hubstore import migrate_store

    url = hub_url_of(hub_url, hub_db)
    if url is None:
        raise click.UsageError("--hub-url: missing; give --hub-url or --hub-db (HUBSYNC_HUB_URL)")
    change = migrate_store(url)
    if as_json:
        click.echo(json.dumps(_document(shown_store(url), change), sort_keys=True))
    else:
        click.echo(_sentence(shown_store(url), change))


def _document(store: str, change: SchemaChange) -> dict[str, object]:
    return {
        "store": store,
        "action": change.action,
        "from_version": change.from_version,
        "to_version": change.to_version,
        "backup": None if change.backup is None else str(change.backup),
        "steps": list(change.steps),
    }


def _sentence(store: str, change: SchemaChange) -> str:
    if change.action == "current":
        return f"hub store {store}: already at schema version {change.to_version}; nothing to do"
    if change.action == "created":
        return f"hub store {store}: created at schema version {change.to_version}"
    steps = "".join(f"\n  {change.from_version + i} -> {change.from_version + i + 1}: {s}"
                    for i, s in enumerate(change.steps))  # fmt: skip
    return (
        f"hub store {store}: upgraded from schema version {change.from_version} to "
        f"{change.to_version}; the file as it was is kept at {change.backup}{steps}"
    )
