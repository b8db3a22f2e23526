"""Resume cursors and the options and output ``hubsync events`` and ``hubsync runs`` share.

A cursor is an opaque, URL-safe token (base64url, no padding) of the
canonical JSON ``[kind, *position]``: ``["events", run_id, project_id,
sequence]`` or ``["runs", run_id, project_id]``. It names a row, not a page,
so a listing resumed from it returns every later row exactly once, whatever
was added meanwhile; the kind keeps a cursor of one listing out of the other.

Output is JSON lines on stdout, one object per row, each with the
``position`` to pass as ``--after`` to resume after that row; when rows
remain past ``--limit``, one line on stderr says so. ``--json`` prints one
document instead: ``{"<kind>": [rows], "next": cursor or null}``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import click

from hubstore.store import EventPosition, RunPosition, RunSummary, StoredEvent
from hubsync.core.canonical import canonical_json
from hubsync.core.errors import ConfigError
from hubsync.core.names import validate_name

F = TypeVar("F", bound=Callable[..., Any])

Kind = Literal["events", "runs"]

MAX_LIMIT = 10_000
MAX_CURSOR_LENGTH = 2048
"""Longer than any cursor hubsync prints (two ids of at most 128 characters, one number)."""


def encode_cursor(kind: Kind, position: EventPosition | RunPosition) -> str:
    """The opaque, URL-safe cursor of ``position`` in the ``kind`` listing."""
    raw = base64.urlsafe_b64encode(canonical_json([kind, *position]))
    return raw.rstrip(b"=").decode("ascii")


def decode_event_cursor(cursor: str) -> EventPosition:
    """The event position a cursor of ``hubsync events`` names; ``ConfigError`` otherwise."""
    match _decoded(cursor, "events"):
        case [str(run_id), str(project_id), int(sequence)] if sequence >= 1 and not isinstance(
            sequence, bool
        ):
            return EventPosition(_id(run_id, "events"), _id(project_id, "events"), sequence)
    raise _not_a_cursor("events")


def decode_run_cursor(cursor: str) -> RunPosition:
    """The run position a cursor of ``hubsync runs`` names; ``ConfigError`` otherwise."""
    match _decoded(cursor, "runs"):
        case [str(run_id), str(project_id)]:
            return RunPosition(_id(run_id, "runs"), _id(project_id, "runs"))
    raise _not_a_cursor("runs")


def after_option(kind: Kind) -> Callable[[F], F]:
    """``--after CURSOR``: resume the ``kind`` listing after the row that printed it."""
    decode = decode_event_cursor if kind == "events" else decode_run_cursor

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> object:
        if value is None:
            return None
        try:
            return decode(value)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None

    return click.option(
        "--after",
        metavar="CURSOR",
        callback=callback,
        help="Resume after the row whose `position` (or the `next` of --json) this is "
        "(no environment variable).",
    )


limit_option = click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    default=1000,
    show_default=True,
    help="Most rows printed (no environment variable).",
)


def _valid_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return validate_name(value, param.opts[0])
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


project_id_option = click.option(
    "--project-id",
    callback=_valid_id,
    help="Only this project (no environment variable).",
)
run_option = click.option(
    "--run",
    "run_id",
    callback=_valid_id,
    help="Only this run id (no environment variable).",
)


Row = TypeVar("Row", StoredEvent, RunSummary)


def print_page(
    kind: Kind, found: Sequence[Row], limit: int, line: Callable[[Row], str], *, as_json: bool
) -> None:
    """Print a page of ``found`` (fetched with ``limit + 1``, so one more row says more remain).

    JSON lines (and one stderr line naming the cursor when more remain), or with
    ``as_json`` one document. ``line`` serialises one row; the output is
    written as UTF-8 bytes whatever the locale.
    """
    page = found[:limit]
    rows = [line(row) for row in page]
    next_cursor = encode_cursor(kind, page[-1].position) if len(found) > limit else None
    if as_json:
        document = f'{{"{kind}":[{",".join(rows)}],"next":{json.dumps(next_cursor)}}}'
        click.echo(document.encode("utf-8"))
        return
    for row in rows:
        click.echo(row.encode("utf-8"))
    if next_cursor is not None:
        click.echo(f"more {kind} remain: resume with --after {next_cursor}", err=True)


def _decoded(cursor: str, kind: Kind) -> object:
    if not cursor or len(cursor) > MAX_CURSOR_LENGTH:
        raise _not_a_cursor(kind)
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        raise _not_a_cursor(kind) from None
    if not isinstance(value, list) or not value or value[0] != kind:
        raise _not_a_cursor(kind)
    return value[1:]


def _id(value: str, kind: Kind) -> str:
    try:
        return validate_name(value)
    except ConfigError:
        raise _not_a_cursor(kind) from None


def _not_a_cursor(kind: Kind) -> ConfigError:
    # The value is never echoed: whatever was pasted here may be anything.
    return ConfigError(
        f"not a cursor of `hubsync {kind}`; pass a `position` (or the `next` of --json) "
        f"that `hubsync {kind}` printed"
    )
