"""``hubsync hub``: the hub store itself (``hub migrate``: create or upgrade its schema and
give a new hub its identity; ``hub init``: the same, printing the hub id; ``hub backup``:
an online copy of a SQLite hub; ``hub restore``: make a restored store whole again, in
``hubsync.cli.hub_restore``; ``hub move-project``: give a project to another runtime).

Both migrate and init give a hub without an id its id, so either one is the single step
that makes a hub ready for ``hubsync enroll``. Given ``--redis-url`` (as the Redis
administrator), both also load hubsync's Redis functions there and move the
fences an older hubsync kept in lease hashes into their token counters
(``hubstore.redis_setup``).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

import click

from hubsync.cli.options import (
    admin_redis_options,
    hub_options,
    json_option,
    open_hub_store,
    required_hub_url,
    shown_store,
    valid_name,
)
from hubsync.core.clock import format_timestamp
from hubsync.core.errors import ConfigError, HubsyncError
from hubsync.core.migration import SchemaChange
from hubsync.core.settings import safe_url

F = TypeVar("F", bound=Callable[..., Any])


_admin_redis_options = admin_redis_options(
    "Also prepare this Redis (every master of a cluster): load hubsync's functions "
    "and move old lease fences into their counters. Log in as a user allowed FUNCTION "
    "LOAD, SCAN, GET, SET, HGET and HDEL on hubsync:lease:* (the administrator)."
)


def _prepare_redis(url: str | None, password_file: Path | None) -> dict[str, object] | None:
    """Run the Redis setup step when a URL was given; what it did, or None."""
    if url is None:
        return None
    from hubstore.redis_setup import prepare_redis
    from hubsync.core.connections import RedisTarget, probe

    client = probe(RedisTarget.of(url, password_file))
    try:
        return prepare_redis(client).as_dict()
    finally:
        client.close()


def _redis_sentence(url: str, done: dict[str, object]) -> str:
    line = (
        f"redis {safe_url(url)}: functions library {done['library']} version "
        f"{done['version']} loaded; {done['fences_moved']} old lease fence(s) moved into counters"
    )
    unreadable = done["unreadable"]
    if isinstance(unreadable, list) and unreadable:
        line += f"; unreadable fence or counter, left as is: {', '.join(unreadable)}"
    return line


class _Ready(NamedTuple):
    """What ``hub init`` and ``hub migrate`` both did: the store's URL and its schema change,
    the hub id and whether it was made now, and the Redis set up (URL and what was done) or
    None for each."""

    url: str
    change: SchemaChange
    hub_id: str
    created: bool
    redis_url: str | None
    redis_done: dict[str, object] | None


def _readied_hub(command: F) -> F:
    """``--hub-url``/``--hub-db`` and the administrator's ``--redis-url`` and
    ``--redis-password-file`` of ``hub init`` and ``hub migrate``.

    Before the command runs, the store's schema is created or upgraded, the hub given its
    id and the Redis prepared; the command gets what was done as ``ready``.
    """

    @functools.wraps(command)
    def with_ready(
        *args: Any,
        hub_url: str | None,
        hub_db: Path | None,
        redis_url: str | None,
        redis_password_file: Path | None,
        **kwargs: Any,
    ) -> Any:
        from hubstore import migrate_store

        url = required_hub_url(hub_url, hub_db)
        change = migrate_store(url)
        hub_id, created = _give_id(url)
        redis_done = _prepare_redis(redis_url, redis_password_file)
        ready = _Ready(url, change, hub_id, created, redis_url, redis_done)
        return command(*args, ready=ready, **kwargs)

    return cast(F, hub_options(_admin_redis_options(with_ready)))


PROGRESS_EVERY = 1.0
"""Seconds between two progress lines of ``hub backup`` (a copy done sooner prints none)."""


@click.group(
    epilog="""\b
Examples:
  hubsync hub init --hub-db /var/lib/hubsync/hub.db
  hubsync hub migrate --hub-db /var/lib/hubsync/hub.db
  hubsync hub migrate --hub-url sqlite:////var/lib/hubsync/hub.db --json
  hubsync hub migrate --hub-url postgresql://hubsync_admin@db.internal/hubsync
  hubsync hub migrate --hub-db hub.db --redis-url redis://admin@redis.internal:6379/0 \\
      --redis-password-file admin.pw
  hubsync hub backup --hub-db /var/lib/hubsync/hub.db --to /backup/hub-$(date +%F).db
  hubsync hub restore --hub-db /var/lib/hubsync/hub.db --redis-url redis://admin@redis:6379/0
  hubsync hub move-project shop-48ee17a7 --to rt-build-2 --hub-db /var/lib/hubsync/hub.db
"""
)
def hub() -> None:
    """The hub store itself: its schema (migrate), its id (init), its backup and restore, who owns a project."""


@hub.command(
    "init",
    epilog="""\b
Examples:
  hubsync hub init --hub-db /var/lib/hubsync/hub.db
  hubsync hub init --hub-url sqlite:////var/lib/hubsync/hub.db --json
""",
)
@_readied_hub
@json_option
def init(ready: _Ready, as_json: bool) -> None:
    """Give the hub its identity, a hub id made once; print it.

    Creates or upgrades the schema first, as `hubsync hub migrate` does. The
    id (hub-<16 hex>) never changes: running it again prints the same id.
    Runtimes are enrolled on the hub afterwards (hubsync enroll). With
    --redis-url it prepares that Redis as `hubsync hub migrate` does.
    """
    store_shown, change, hub_id = shown_store(ready.url), ready.change, ready.hub_id
    if as_json:
        document = {"hub_id": hub_id, "created": ready.created}
        _report_json(ready, document | {"schema": _document(store_shown, change)})
        return
    if change.action == "upgraded":
        click.echo(_sentence(store_shown, change))
    state = "created" if ready.created else "already set; unchanged"
    click.echo(f"hub store {store_shown}: hub id {hub_id} ({state})")
    _report_redis(ready)


@hub.command(
    "migrate",
    epilog="""\b
Examples:
  hubsync hub migrate --hub-db /var/lib/hubsync/hub.db
  HUBSYNC_HUB_URL=sqlite:////var/lib/hubsync/hub.db hubsync hub migrate --json
  HUBSYNC_HUB_URL=postgresql://hubsync_admin@db.internal/hubsync hubsync hub migrate
  hubsync hub migrate --hub-db hub.db --redis-url redis://admin@redis.internal:6379/0 \\
      --redis-password-file admin.pw
""",
)
@_readied_hub
@json_option
def migrate(ready: _Ready, as_json: bool) -> None:
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

    With --redis-url (as the Redis administrator) it also loads hubsync's
    functions library there, on every master of a cluster (the runtimes' and
    consumers' users may not load it; Redis keeps it in its RDB and AOF), and
    moves the fence an older hubsync kept in each lease hash into the lease's
    token counter, never lowering it. Run it on every upgrade of hubsync.
    """
    store_shown = shown_store(ready.url)
    if as_json:
        document = _document(store_shown, ready.change)
        _report_json(ready, document | {"hub_id": ready.hub_id, "hub_id_created": ready.created})
        return
    click.echo(_sentence(store_shown, ready.change))
    if ready.created:
        click.echo(f"hub store {store_shown}: hub id {ready.hub_id} (created)")
    _report_redis(ready)


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

    url = required_hub_url(hub_url, hub_db)
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
    url = required_hub_url(hub_url, hub_db)
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


def _report_json(ready: _Ready, document: dict[str, object]) -> None:
    """Print ``document`` as JSON, with what the Redis setup did under ``redis`` if it ran."""
    if ready.redis_done is not None:
        document["redis"] = ready.redis_done
    click.echo(json.dumps(document, sort_keys=True))


def _report_redis(ready: _Ready) -> None:
    """Print what the Redis setup did, if it ran."""
    if ready.redis_url is not None and ready.redis_done is not None:
        click.echo(_redis_sentence(ready.redis_url, ready.redis_done))


def _give_id(url: str) -> tuple[str, bool]:
    """The hub id of the store at ``url``, made now if it had none; and whether it was."""
    from hubstore import open_store

    with open_store(url, create_schema=False) as store:
        created = store.hub_id() is None
        return store.init_hub(), created


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


def _add_restore() -> None:
    from hubsync.cli.hub_restore import restore

    hub.add_command(restore)


_add_restore()
