"""``hubsync hub``: the hub store itself (``hub migrate``: create or upgrade its schema and
give a new hub its identity; ``hub init``: the same, printing the hub id; ``hub backup``:
an online copy of a SQLite hub).

Both give a hub without an id its id, so either one is the single step that
makes a hub ready for ``hubsync enroll``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from hubsync.cli.options import hub_options, json_option, shown_store
from hubsync.core.errors import ConfigError, HubsyncError
from hubsync.core.migration import SchemaChange
from hubsync.core.settings import hub_url_of

PROGRESS_EVERY = 1.0
"""Seconds between two progress lines of ``hub backup`` (a copy done sooner prints none)."""


@click.group(
    epilog="""\b
Examples:
  hubsync hub init --hub-db /var/lib/hubsync/hub.db
  hubsync hub migrate --hub-db /var/lib/hubsync/hub.db
  hubsync hub migrate --hub-url sqlite:////var/lib/hubsync/hub.db --json
  hubsync hub migrate --hub-url postgresql://hubsync_admin@db.internal/hubsync
  hubsync hub backup --hub-db /var/lib/hubsync/hub.db --to /backup/hub-$(date +%F).db
"""
)
def hub() -> None:
    """The hub store itself: its schema (migrate), its id (init) and its backup."""


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
    "backup",
    epilog="""\b
Examples:
  hubsync hub backup --hub-db /var/lib/hubsync/hub.db --to /backup/hub-$(date +%F).db
  hubsync hub backup --hub-db hub.db --to /backup/hub.db --force --json
""",
)
@hub_options
@click.option(
    "--to",
    "to",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file to write the copy to (mode 0600; no environment variable).",
)
@click.option("--force", is_flag=True, help="Replace --to if it exists (no environment variable).")
@json_option
def backup(hub_url: str | None, hub_db: Path | None, to: Path, force: bool, as_json: bool) -> None:
    """Copy a SQLite hub store to --to while the consumers go on writing it.

    The copy is consistent (the store as of one commit) and made with SQLite's
    online backup API: a file mode 0600, written beside --to and renamed into
    place when complete. An existing --to is refused unless --force. Progress
    goes to stderr about once a second while the copy runs. A PostgreSQL hub
    is backed up with PostgreSQL's own tools (pg_dump, or base backups with
    WAL archiving: docs/deploy.md); this refuses it (exit 2). A store restored
    from a copy is noticed by the consumers (docs/operations.md, "Backup and
    restore").
    """
    from hubstore.factory import url_scheme
    from hubstore.sqlite.store import SqliteHubStore, sqlite_path

    url = _required_url(hub_url, hub_db)
    scheme = url_scheme(url)
    if scheme != "sqlite":
        raise ConfigError(_not_copied_here(scheme, shown_store(url)))
    path = sqlite_path(url)
    SqliteHubStore(path, create_schema=False).close()  # a hub database, at this version
    started = time.monotonic()
    pages = _copy(path, to, force=force)
    size = to.stat().st_size
    elapsed = time.monotonic() - started
    if as_json:
        document = {"store": shown_store(url), "to": str(to), "pages": pages, "bytes": size}
        click.echo(json.dumps(document | {"seconds": round(elapsed, 3)}, sort_keys=True))
        return
    click.echo(
        f"hub store {shown_store(url)}: backed up to {to} ({size} bytes, {pages} pages, "
        f"{elapsed:.1f}s)"
    )


def _not_copied_here(scheme: str, store: str) -> str:
    if scheme == "memory":
        return f"hub store {store} lives in one process's memory: there is nothing to back up"
    return (
        f"hub store {store} is a PostgreSQL database: back it up with PostgreSQL's tools "
        "(pg_dump --format=custom, or pg_basebackup with WAL archiving; docs/deploy.md)"
    )


def _copy(path: Path, to: Path, *, force: bool) -> int:
    """``copy_database`` with progress on stderr; its failures as one line each."""
    import sqlite3

    from hubsync.core.sqlite import copy_database

    shown = [time.monotonic()]

    def progress(copied: int, total: int) -> None:
        now = time.monotonic()
        if now - shown[0] >= PROGRESS_EVERY and copied < total:
            shown[0] = now
            click.echo(f"backing up {path}: {copied} of {total} pages", err=True)

    try:
        return copy_database(path, to, replace=force, progress=progress)
    except FileExistsError as exc:
        exists = Path(exc.filename or to)
        raise ConfigError(
            f"--to: {exists} exists; give --force to replace it"
            if exists == to
            else f"--to: {exists} exists (left by a backup that did not finish?); remove it"
        ) from None
    except OSError as exc:
        raise HubsyncError(f"cannot write the backup {to}: {exc.strerror or exc}") from None
    except sqlite3.Error as exc:
        raise HubsyncError(f"backing up {path} to {to} failed: {exc}") from None


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
