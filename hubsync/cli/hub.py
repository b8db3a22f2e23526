"""``hubsync hub``: the hub store itself (``hub migrate``: create or upgrade its schema and
give a new hub its identity; ``hub init``: the same, printing the hub id).

Both give a hub without an id its id, so either one is the single step that
makes a hub ready for ``hubsync enroll``. Given ``--redis-url`` (as the Redis
administrator), both also load hubsync's Redis functions there and move the
fences an older hubsync kept in lease hashes into their token counters
(``hubstore.redis_setup``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from hubsync.cli.options import hub_options, json_option, shown_store
from hubsync.core.migration import SchemaChange
from hubsync.core.settings import hub_url_of, safe_url

F = TypeVar("F", bound=Callable[..., Any])


def _admin_redis_options(command: F) -> F:
    """``--redis-url`` and ``--redis-password-file`` of the Redis to prepare; no environment
    variable, since the pipeline's own (HUBSYNC_REDIS_URL) is not the administrator's."""
    command = click.option(
        "--redis-password-file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="File holding the Redis administrator's password, for a URL without one.",
    )(command)
    return click.option(
        "--redis-url",
        default=None,
        metavar="URL",
        help="Also prepare this Redis (every master of a cluster): load hubsync's functions "
        "and move old lease fences into their counters. Log in as a user allowed FUNCTION "
        "LOAD, SCAN, GET, SET, HGET and HDEL on hubsync:lease:* (the administrator).",
    )(command)


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


@click.group(
    epilog="""\b
Examples:
  hubsync hub init --hub-db /var/lib/hubsync/hub.db
  hubsync hub migrate --hub-db /var/lib/hubsync/hub.db
  hubsync hub migrate --hub-url sqlite:////var/lib/hubsync/hub.db --json
  hubsync hub migrate --hub-url postgresql://hubsync_admin@db.internal/hubsync
  hubsync hub migrate --hub-db hub.db --redis-url redis://admin@redis.internal:6379/0 \\
      --redis-password-file admin.pw
"""
)
def hub() -> None:
    """The hub store itself: its schema (migrate) and its id (init)."""


@hub.command(
    "init",
    epilog="""\b
Examples:
  hubsync hub init --hub-db /var/lib/hubsync/hub.db
  hubsync hub init --hub-url sqlite:////var/lib/hubsync/hub.db --json
""",
)
@hub_options
@_admin_redis_options
@json_option
def init(
    hub_url: str | None,
    hub_db: Path | None,
    redis_url: str | None,
    redis_password_file: Path | None,
    as_json: bool,
) -> None:
    """Give the hub its identity, a hub id made once; print it.

    Creates or upgrades the schema first, as `hubsync hub migrate` does. The
    id (hub-<16 hex>) never changes: running it again prints the same id.
    Runtimes are enrolled on the hub afterwards (hubsync enroll). With
    --redis-url it prepares that Redis as `hubsync hub migrate` does.
    """
    from hubstore import migrate_store

    url = _required_url(hub_url, hub_db)
    change = migrate_store(url)
    hub_id, created = _give_id(url)
    redis_done = _prepare_redis(redis_url, redis_password_file)
    store_shown = shown_store(url)
    if as_json:
        document = {"hub_id": hub_id, "created": created, "schema": _document(store_shown, change)}
        if redis_done is not None:
            document["redis"] = redis_done
        click.echo(json.dumps(document, sort_keys=True))
        return
    if change.action == "upgraded":
        click.echo(_sentence(store_shown, change))
    state = "created" if created else "already set; unchanged"
    click.echo(f"hub store {store_shown}: hub id {hub_id} ({state})")
    if redis_url is not None and redis_done is not None:
        click.echo(_redis_sentence(redis_url, redis_done))


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
@hub_options
@_admin_redis_options
@json_option
def migrate(
    hub_url: str | None,
    hub_db: Path | None,
    redis_url: str | None,
    redis_password_file: Path | None,
    as_json: bool,
) -> None:
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
    from hubstore import migrate_store

    url = _required_url(hub_url, hub_db)
    change = migrate_store(url)
    hub_id, created = _give_id(url)
    redis_done = _prepare_redis(redis_url, redis_password_file)
    if as_json:
        document = _document(shown_store(url), change) | {
            "hub_id": hub_id,
            "hub_id_created": created,
        }
        if redis_done is not None:
            document["redis"] = redis_done
        click.echo(json.dumps(document, sort_keys=True))
        return
    click.echo(_sentence(shown_store(url), change))
    if created:
        click.echo(f"hub store {shown_store(url)}: hub id {hub_id} (created)")
    if redis_url is not None and redis_done is not None:
        click.echo(_redis_sentence(redis_url, redis_done))


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
