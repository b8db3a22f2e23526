"""``hubsync consumers``: the members of consumer group ``hub`` (``list``; ``remove``: hand a
gone consumer's pending entries to a live one and delete it from the group)."""

from __future__ import annotations

import json

import click

from hubsync.cli.options import json_option, redis_url_option
from hubsync.core.connections import RedisTarget, probe
from hubsync.core.redis_values import printable


@click.group(
    epilog="""\b
Examples:
  hubsync consumers list
  hubsync consumers remove hub-2-4242
"""
)
def consumers() -> None:
    """The consumers of group hub: list them, remove one that is gone."""


@consumers.command(
    "list",
    epilog="""\b
Examples:
  hubsync consumers list
  hubsync consumers list --redis-url redis://redis.internal:6379/0 --json
""",
)
@redis_url_option
@json_option
def list_consumers(redis: RedisTarget, as_json: bool) -> None:
    """List each consumer of group hub: pending entries (over every events stream), idle time
    (since it last read) and the age of its health key (none: it is not running).

    A consumer stays in the group after it stops, with whatever it had read and
    not acknowledged; the running ones reclaim such entries after
    --reclaim-idle, and remove a member once it owns nothing and has been idle
    ten times that long. `hubsync consumers remove` does both at once.
    """
    from consumers.stream.consumer_admin import list_consumers as members

    client = probe(redis)
    try:
        found = members(client)
    finally:
        client.close()
    if as_json:
        click.echo(json.dumps({"consumers": [c.as_dict() for c in found]}, sort_keys=True))
        return
    if not found:
        click.echo("no consumer in group hub")
        return
    for c in found:
        health = (
            "no health key (not running)"
            if not c.healthy
            else "health key written "
            + ("at an unreadable time" if c.health_age_seconds is None else
               f"{c.health_age_seconds:.1f}s ago")
        )  # fmt: skip
        click.echo(
            printable(
                f"{c.name}: {c.pending} pending, idle {c.idle_seconds:.1f}s, "
                f"{c.streams} stream(s), {health}"
            )
        )


@consumers.command(
    "remove",
    epilog="""\b
Examples:
  hubsync consumers remove hub-2-4242
  hubsync consumers remove hub-2-4242 --to hub-1
  hubsync consumers remove hub-2-4242 --force --json
""",
)
@click.argument("name")
@click.option(
    "--to",
    help="The consumer to hand NAME's pending entries to [default: the healthy consumer that "
    "read most recently] (no environment variable).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Remove NAME even though its health key is fresh (it is running); what it reads "
    "meanwhile is handed over too (no environment variable).",
)
@redis_url_option
@json_option
def remove(name: str, to: str | None, force: bool, redis: RedisTarget, as_json: bool) -> None:
    """Hand consumer NAME's pending entries to a live consumer, then delete NAME from group hub
    on every events stream.

    No entry is dropped: NAME is deleted from a stream's group only once it owns
    nothing there (checked and deleted in one script). A consumer whose health
    key is fresh is running and is refused unless --force. With nothing
    pending, no live consumer is needed.
    """
    from consumers.stream.consumer_admin import remove_consumer
    from hubsync.core.names import validate_name

    consumer = validate_name(name, "consumer name")
    target = None if to is None else validate_name(to, "--to consumer name")
    client = probe(redis)
    try:
        done = remove_consumer(client, consumer, to=target, force=force)
    finally:
        client.close()
    if as_json:
        document = {"name": done.name, "to": done.to, "moved": done.moved, "streams": done.streams}
        click.echo(json.dumps(document, sort_keys=True))
        return
    handed = (
        f"{done.moved} pending entries handed to {done.to}" if done.moved else "nothing pending"
    )
    click.echo(f"removed consumer {done.name} from {done.streams} stream(s); {handed}")
