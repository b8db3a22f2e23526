"""``hubsync dead list|replay|purge``: a hub project's dead letters, by hand."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from consumers.views.dead_letters import (
    DeadLetters,
    ListedDeadLetter,
    ReplayResult,
    validate_entry_id,
)
from hubsync.cli.options import (
    count_option,
    duration_option,
    env_option,
    hub_project_required,
    json_option,
    redis_url_option,
)
from hubsync.core.connections import RedisTarget, probe
from hubsync.core.errors import ConfigError
from hubsync.core.redis_values import printable

_project = hub_project_required


def _ids_argument(ctx: click.Context, param: click.Parameter, value: Sequence[str]) -> list[str]:
    try:
        return [validate_entry_id(v) for v in value]
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


_ids = click.argument("ids", nargs=-1, callback=_ids_argument)


def _emit(as_json: bool, document: dict[str, Any], line: str) -> None:
    click.echo(json.dumps(document, sort_keys=True) if as_json else line)


@click.group(
    epilog="""\b
Examples:
  hubsync dead list --hub-project acme
  hubsync dead list --hub-project acme --reason max_deliveries --json
  hubsync dead replay --hub-project acme 1700000000000-0 1700000000001-0
  hubsync dead replay --hub-project acme --all --reason max_deliveries
  hubsync dead purge --hub-project acme --older-than 7d
  hubsync dead purge --hub-project acme --all
"""
)
def dead() -> None:
    """Dead letters: entries the hub refused (bad bytes) or gave up on (max_deliveries).

    Each keeps its reason, the source entry id and the original fields. After
    fixing the cause, `replay` puts a letter back on hubsync:{P}:events (once,
    atomically) and deletes it; `purge` deletes letters you have dealt with.
    """


@dead.command(
    "list",
    epilog="""\b
Examples:
  hubsync dead list --hub-project acme --count 20
  hubsync dead list --hub-project acme --reason hash_mismatch --json
""",
)
@_project
@count_option("letters to list (oldest first)")
@env_option("--reason", help="Only letters of this reason.")
@redis_url_option
@json_option
def list_dead(
    hub_project: str, count: int, reason: str | None, redis: RedisTarget, as_json: bool
) -> None:
    """List dead letters: id, reason, detail, source entry, the key it named, when."""
    client = probe(redis)
    try:
        letters = DeadLetters(client, hub_project)
        total = letters.count()
        listed = letters.letters(count=count, reason=reason)
    finally:
        client.close()
    if as_json:
        document = {
            "hub_project": letters.hub_project,
            "stream": letters.stream,
            "total": total,
            "dead_letters": [item.as_dict() for item in listed],
        }
        click.echo(json.dumps(document, sort_keys=True))
        return
    _print_letters(letters, listed, total)


def _print_letters(letters: DeadLetters, listed: list[ListedDeadLetter], total: int) -> None:
    # Plain lines, not a table: ids must stay whole and copyable at any terminal width.
    click.echo(f"{letters.stream}: showing {len(listed)} of {total} dead letter(s)")
    for item in listed:
        key = item.key_fields()
        shown = "/".join(key[n] for n in ("project_id", "run_id", "sequence") if n in key)
        why = item.not_replayable_because
        state = "replayable" if why is None else f"{why} (not replayable)"
        click.echo(  # the key and detail came off Redis: escaped, never raw
            printable(
                f"{item.entry_id}  {item.letter.reason}  source {item.letter.source_id}  "
                f"key {shown or '-'}  {state}  dead at {item.letter.dead_at}"
            )
        )
        click.echo(f"    {printable(item.letter.detail)}")


@dead.command(
    epilog="""\b
Examples:
  hubsync dead replay --hub-project acme 1700000000000-0
  hubsync dead replay --hub-project acme --all --reason max_deliveries --json
""",
)
@_project
@_ids
@click.option(
    "--all",
    "replay_all",
    is_flag=True,
    help="Replay every replayable letter (no environment variable, like purge --all).",
)
@env_option("--reason", help="With --all: only letters of this reason.")
@redis_url_option
@json_option
def replay(
    hub_project: str,
    ids: list[str],
    replay_all: bool,
    reason: str | None,
    redis: RedisTarget,
    as_json: bool,
) -> None:
    """Put dead letters back on hubsync:{P}:events once their cause is fixed.

    Named ids are all-or-nothing: if one is missing or was truncated (only a
    preview of its fields was kept), nothing is replayed and the exit code is 1.
    With --all, truncated letters are skipped and listed; the rest go back.
    A replayed entry is judged afresh by the hub consumers (a duplicate of a
    stored event is answered `duplicate`, never stored twice).
    """
    if bool(ids) == replay_all:
        raise click.UsageError("give dead-letter ids or --all (not both)")
    if reason is not None and not replay_all:
        raise click.UsageError("--reason works with --all only")
    client = probe(redis)
    try:
        letters = DeadLetters(client, hub_project)
        result = letters.replay_all(reason) if replay_all else letters.replay(ids)
    finally:
        client.close()
    _emit(
        as_json,
        {"hub_project": letters.hub_project} | result.as_dict(),
        _replay_line(letters, result),
    )


def _replay_line(letters: DeadLetters, result: ReplayResult) -> str:
    onto = ", ".join(sorted(result.streams)) or f"the events streams of {letters.hub_project}"
    line = f"replayed {len(result.replayed)} dead letter(s) onto {onto}"
    if result.skipped:
        skipped = ", ".join(f"{dead_id} ({why})" for dead_id, why in result.skipped[:10])
        more = " ..." if len(result.skipped) > 10 else ""
        line += f"; skipped {len(result.skipped)}: {skipped}{more}"
    return line


@dead.command(
    epilog="""\b
Examples:
  hubsync dead purge --hub-project acme 1700000000000-0
  hubsync dead purge --hub-project acme --older-than 7d
  hubsync dead purge --hub-project acme --all --json
""",
)
@_project
@_ids
@click.option(
    "--all",
    "purge_all",
    is_flag=True,
    # deliberately no environment variable: a stray HUBSYNC_ALL must never
    # turn a bare purge into deleting every letter
    help="Delete every dead letter of the project.",
)
@duration_option(
    "--older-than",
    help="Delete letters dead-lettered longer ago than this (90s, 15m, 2h, 7d; Redis's clock).",
)
@redis_url_option
@json_option
def purge(
    hub_project: str,
    ids: list[str],
    purge_all: bool,
    older_than: float | None,
    redis: RedisTarget,
    as_json: bool,
) -> None:
    """Delete dead letters: named ids (all-or-nothing), --all, or --older-than."""
    if sum((bool(ids), purge_all, older_than is not None)) != 1:
        raise click.UsageError("give dead-letter ids, --all or --older-than (exactly one)")
    client = probe(redis)
    try:
        letters = DeadLetters(client, hub_project)
        if purge_all:
            removed = letters.purge_all()
        elif older_than is not None:
            removed = letters.purge_older_than(older_than)
        else:
            removed = letters.purge(ids)
    finally:
        client.close()
    _emit(
        as_json,
        {"hub_project": letters.hub_project, "purged": removed},
        f"purged {removed} dead letter(s) from {letters.stream}",
    )
