"""``hubsync hub``: the hub store itself (``hub migrate``: create or upgrade its schema and
give a new hub its identity; ``hub init``: the same, printing the hub id; ``hub
move-project``: give a project to another runtime).

Both migrate and init give a hub without an id its id, so either one is the single step
that makes a hub ready for ``hubsync enroll``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from hubsync.cli.options import hub_options, json_option, open_hub_store, shown_store, valid_name
from hubsync.core.clock import format_timestamp
from hubsync.core.migration import SchemaChange
from hubsync.core.settings import hub_url_of


@click.group(
    epilog="""\b
Examples:
  hubsync hub init --hub-db /var/lib/hubsync/hub.db
  hubsync hub migrate --hub-db /var/lib/hubsync/hub.db
  hubsync hub migrate --hub-url sqlite:////var/lib/hubsync/hub.db --json
  hubsync hub migrate --hub-url postgresql://hubsync_admin@db.internal/hubsync
  hubsync hub move-project shop-48ee17a7 --to rt-build-2 --hub-db /var/lib/hubsync/hub.db
"""
)
def hub() -> None:
    """The hub store itself: its schema (migrate), its id (init), who owns a project."""


@hub.command(
    "init",
    epilog="""\b
Examples:
  hubsync hub init --hub-db /var/lib/hubsync/hub.db
  hubsync hub init --hub-url sqlite:////var/lib/hubsync/hub.db --json
""",
)
@hub_options
@json_option
def init(hub_url: str | None, hub_db: Path | None, as_json: bool) -> None:
    """Give the hub its identity, a hub id made once; print it.

    Creates or upgrades the schema first, as `hubsync hub migrate` does. The
    id (hub-<16 hex>) never changes: running it again prints the same id.
    Runtimes are enrolled on the hub afterwards (hubsync enroll).
    """
    from hubstore import migrate_store

    url = _required_url(hub_url, hub_db)
    change = migrate_store(url)
    hub_id, created = _give_id(url)
    store_shown = shown_store(url)
    if as_json:
        document = {"hub_id": hub_id, "created": created, "schema": _document(store_shown, change)}
        click.echo(json.dumps(document, sort_keys=True))
        return
    if change.action == "upgraded":
        click.echo(_sentence(store_shown, change))
    state = "created" if created else "already set; unchanged"
    click.echo(f"hub store {store_shown}: hub id {hub_id} ({state})")


@hub.command(
    "migrate",
    epilog="""\b
Examples:
  hubsync hub migrate --hub-db /var/lib/hubsync/hub.db
  HUBSYNC_HUB_URL=sqlite:////var/lib/hubsync/hub.db hubsync hub migrate --json
  HUBSYNC_HUB_URL=postgresql://hubsync_admin@db.internal/hubsync hubsync hub migrate
""",
)
@hub_options
@json_option
def migrate(hub_url: str | None, hub_db: Path | None, as_json: bool) -> None:
    """Create or upgrade the hub store's schema, and give a new hub its id.

    Prints what was done: created, upgraded from version X to Y (and each
    step), or already current; and the hub id when this made it (a hub
    without one gets it here, as with `hubsync hub init`, so runtimes can be
    enrolled next; an existing id never changes). A SQLite file of an older schema version is
    first copied to <file>.v<old>.bak beside it (mode 0600), then upgraded
    step by step in one transaction: it ends at the current version or stays
    as it was. A PostgreSQL schema is upgraded in one transaction too; run
    this as a role allowed to create tables (the consumers need not be).
    Running it again does nothing. A newer version is refused and left
    untouched (exit 1). Stop the consumers first on a large database: they
    wait for the upgrade.
    """
    from hubstore import migrate_store

    url = _required_url(hub_url, hub_db)
    change = migrate_store(url)
    hub_id, created = _give_id(url)
    if as_json:
        document = _document(shown_store(url), change) | {
            "hub_id": hub_id,
            "hub_id_created": created,
        }
        click.echo(json.dumps(document, sort_keys=True))
        return
    click.echo(_sentence(shown_store(url), change))
    if created:
        click.echo(f"hub store {shown_store(url)}: hub id {hub_id} (created)")


@hub.command(
    "move-project",
    epilog="""\b
Examples:
  hubsync hub move-project shop-48ee17a7 --to rt-build-2 --hub-db /var/lib/hubsync/hub.db
  hubsync hub move-project shop-48ee17a7 --to rt-build-2 --hub-url sqlite:////var/lib/hubsync/hub.db --json
""",
)
@click.argument("project_id", callback=valid_name("project id"))
@click.option(
    "--to",
    "runtime_id",
    required=True,
    metavar="RUNTIME",
    callback=valid_name("runtime id"),
    help="The runtime the project is given to (no environment variable).",
)
@hub_options
@json_option
def move_project(
    project_id: str, runtime_id: str, hub_url: str | None, hub_db: Path | None, as_json: bool
) -> None:
    """Give a project, and every run of it, to another runtime (a machine replaced).

    A project belongs to the runtime that first wrote it: only that runtime's
    key may add events to it; another runtime's are refused (conflict
    not_owner). After this, only the runtime named by --to may, and the one it
    had is refused. Stored events are never changed. The runtime must be
    enrolled, not revoked, and enrolled for the project's hub project; an
    unknown project, or one that already belongs to it, is refused (exit 2)
    and nothing changes. The move is recorded in the hub store
    (sync_project_moves) and logged.
    """
    url = _required_url(hub_url, hub_db)
    with open_hub_store(url) as store:
        move = store.move_project(project_id, runtime_id)
    if as_json:
        document = {
            "action": "moved",
            "move_id": move.move_id,
            "project_id": move.project_id,
            "hub_project": move.hub_project,
            "from_runtime_id": move.from_runtime_id,
            "to_runtime_id": move.to_runtime_id,
            "runs": move.runs,
            "moved_at": format_timestamp(move.moved_at),
        }
        click.echo(json.dumps(document, sort_keys=True))
        return
    click.echo(
        f"moved project {move.project_id} (hub project {move.hub_project}) from runtime "
        f"{move.from_runtime_id} to runtime {move.to_runtime_id}: {move.runs} runs re-homed "
        f"(move {move.move_id}); only {move.to_runtime_id}'s key may write it now"
    )


def _give_id(url: str) -> tuple[str, bool]:
    """The hub id of the store at ``url``, made now if it had none; and whether it was."""
    from hubstore import open_store

    with open_store(url, create_schema=False) as store:
        created = store.hub_id() is None
        return store.init_hub(), created


def _required_url(hub_url: str | None, hub_db: Path | None) -> str:
    url = hub_url_of(hub_url, hub_db)
    if url is None:
        raise click.UsageError("--hub-url: missing; give --hub-url or --hub-db (HUBSYNC_HUB_URL)")
    return url


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
    kept = "" if change.backup is None else f"; the file as it was is kept at {change.backup}"
    return (
        f"hub store {store}: upgraded from schema version {change.from_version} to "
        f"{change.to_version}{kept}{steps}"
    )
