"""``hubsync enroll``: let a runtime sync with this hub (a new key), re-key it, or revoke it.

The key is written once, inside the enrollment token: to the new file
``--output FILE`` names (mode 0600 from its creation, never an existing file),
or else on standard output. The summary and the next step go to standard
error. Nothing here logs.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hubstore.store import MAX_ROTATION_GRACE
from hubsync.cli.options import (
    duration_option,
    hub_options,
    json_option,
    open_hub_store,
    valid_name,
)
from hubsync.core.clock import format_timestamp
from hubsync.core.enrollment import encode_token, validate_hub_projects
from hubsync.core.errors import ConfigError
from hubsync.core.settings import hub_url_of
from hubsync.core.sqlite import new_private_file

if TYPE_CHECKING:
    from hubstore.store import HubStore


def _valid_hub_projects(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    if not value:
        return ()
    try:
        return validate_hub_projects(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


@click.command(
    epilog="""\b
Examples:
  hubsync enroll rt-build-1 --hub-db /var/lib/hubsync/hub.db --hub-project acme
  hubsync enroll rt-build-1 --hub-db hub.db --hub-project acme --hub-project beta --json
  hubsync enroll rt-build-1 --hub-db hub.db --hub-project acme --output rt-build-1.token
  hubsync enroll --revoke rt-build-1 --hub-db hub.db
"""
)
@click.argument("runtime_id", callback=valid_name("runtime id"))
@hub_options
@click.option(
    "--hub-project",
    "hub_projects",
    multiple=True,
    callback=_valid_hub_projects,
    help="A hub project the runtime may write to (repeatable; at least one unless --revoke; "
    "replaces the runtime's earlier list; no environment variable).",
)
@click.option(
    "--revoke",
    is_flag=True,
    help="Revoke the runtime instead: its keys are deleted (no environment variable).",
)
@duration_option(
    "--rotation-grace",
    default="24h",
    show_default=True,
    at_most=MAX_ROTATION_GRACE.total_seconds(),
    help="How long the runtime's previous key stays valid after a re-key (90s, 15m, 2h, 1d; "
    "at most 30d). A runtime whose key leaked gets none: --revoke it, then enroll it.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the token to this new file, created mode 0600 (an existing file is never "
    "overwritten: exit 2), instead of standard output (no environment variable).",
)
@json_option
def enroll(
    runtime_id: str,
    hub_url: str | None,
    hub_db: Path | None,
    hub_projects: tuple[str, ...],
    revoke: bool,
    rotation_grace: float,
    output: Path | None,
    as_json: bool,
) -> None:
    """Enroll a runtime on this hub, or give it a new key: print its enrollment token once.

    The token (hubsync-enroll-v1.<...>) carries the hub id, the runtime id, the
    hub projects and the runtime's new 256-bit key: it is a secret, written
    once and never logged: to the file --output names (created mode 0600;
    with --json the document names the file), or else on standard output
    (with --json, as the field "token"). Pass it to the runtime over a private
    channel and run `hubsync runtime join --state-dir DIR - < FILE` there.
    Enrolling an enrolled runtime again gives it a new key and replaces its
    hub projects; its previous key stays valid for --rotation-grace. The hub
    needs an id first (hubsync hub migrate or hub init give it). With
    --revoke, the runtime's keys are deleted.
    """
    url = hub_url_of(hub_url, hub_db)
    if url is None:
        raise click.UsageError("--hub-url: missing; give --hub-url or --hub-db (HUBSYNC_HUB_URL)")
    if revoke and hub_projects:
        raise click.UsageError("--hub-project: not used with --revoke (a revoked runtime has none)")
    if not revoke and not hub_projects:
        raise click.UsageError(
            "--hub-project: missing; give each hub project the runtime may write to"
        )
    if revoke and output is not None:
        raise click.UsageError("--output: not used with --revoke (no token is made)")
    if revoke:
        with open_hub_store(url) as store:
            _revoke(store, runtime_id, as_json)
        return
    # The file first: a name that cannot be had stops the command before the hub changes.
    with _token_file(output) as token_file, open_hub_store(url) as store:
        grace = timedelta(seconds=rotation_grace)
        _enroll(store, runtime_id, hub_projects, grace, as_json, token_file)


@contextlib.contextmanager
def _token_file(path: Path | None) -> Iterator[tuple[Path, int] | None]:
    """The new, empty file ``--output`` names (created mode 0600) and its descriptor; removed
    again if the enrollment fails, so a failed command leaves nothing behind."""
    if path is None:
        yield None
        return
    try:
        fd = new_private_file(path)
    except FileExistsError:
        raise ConfigError(
            f"--output {path}: the file exists; a token file is never overwritten: remove it "
            "(shred -u: it may hold a key) or name a new file"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"--output {path}: cannot create it ({exc.strerror or type(exc).__name__})"
        ) from None
    try:
        yield path, fd
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)


def _write_token(fd: int, token: str) -> None:
    data = f"{token}\n".encode()
    while data:
        data = data[os.write(fd, data) :]
    os.fsync(fd)


def _enroll(
    store: HubStore,
    runtime_id: str,
    hub_projects: tuple[str, ...],
    grace: timedelta,
    as_json: bool,
    token_file: tuple[Path, int] | None,
) -> None:
    from hubstore.store import RuntimeState

    before = store.enrolled_runtime(runtime_id)
    enrollment = store.enroll(runtime_id, hub_projects, rotation_grace=grace)
    record = store.enrolled_runtime(runtime_id)
    if before is None:
        action = "enrolled"
    elif before.state is RuntimeState.ACTIVE:
        action = "rotated"
    else:
        action = "re-enrolled"
    until = None
    if record is not None and record.previous_valid_until is not None:
        until = format_timestamp(record.previous_valid_until)
    token = encode_token(enrollment)
    if token_file is not None:
        _write_token(token_file[1], token)
    if as_json:
        document = {
            "action": action,
            "hub_id": enrollment.hub_id,
            "runtime_id": runtime_id,
            "hub_projects": list(enrollment.hub_projects),
            "previous_key_valid_until": until,
        }
        if token_file is None:
            document["token"] = token
        else:
            document["token_file"] = str(token_file[0])
        click.echo(json.dumps(document, sort_keys=True))
    elif token_file is None:
        click.echo(token)
    projects = ", ".join(enrollment.hub_projects)
    summary = (
        f"{action} runtime {runtime_id} on hub {enrollment.hub_id} for hub projects {projects}"
    )
    if until is not None:
        summary += f"; its previous key stays valid until {until}"
    click.echo(summary, err=True)
    if token_file is None:
        click.echo(
            f"The token (on standard output) is shown once and holds the runtime's key: on "
            f"runtime {runtime_id}, run `hubsync runtime join --state-dir DIR -` and paste it "
            "(or pipe it in).",
            err=True,
        )
        return
    shown = token_file[0]
    click.echo(
        f"The token is in {shown} (mode 0600) and nowhere else; it holds the runtime's key: "
        f"carry it to runtime {runtime_id} over a private channel, run `hubsync runtime join "
        f"--state-dir DIR - < {shown.name}` there, then delete it (shred -u).",
        err=True,
    )


def _revoke(store: HubStore, runtime_id: str, as_json: bool) -> None:
    before = store.enrolled_runtime(runtime_id)
    record = store.revoke(runtime_id)
    already = before is not None and before.revoked_at is not None
    revoked_at = format_timestamp(record.revoked_at) if record.revoked_at else None
    if as_json:
        document = {
            "action": "already_revoked" if already else "revoked",
            "runtime_id": runtime_id,
            "revoked_at": revoked_at,
        }
        click.echo(json.dumps(document, sort_keys=True))
    elif already:
        click.echo(f"runtime {runtime_id} was already revoked at {revoked_at}; nothing changed")
    else:
        click.echo(f"revoked runtime {runtime_id}: its keys are deleted from the hub store")
