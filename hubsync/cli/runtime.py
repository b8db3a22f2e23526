"""``hubsync runtime``: this runtime's side of enrollment (``runtime join``: keep the hub's token).

``join`` reads the token from its argument or, given ``-``, from standard
input, so that it stays out of shell history and ``/proc/<pid>/cmdline``; a
token given as the argument works, with one warning saying so. It never
prints, logs or echoes the token, and refuses one made for another runtime or
by another hub (exit 2).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from hubsync.cli.options import json_option, options_from, warn_secret_on_command_line
from hubsync.core.enrollment import decode_token
from hubsync.core.private_files import file_mode
from hubsync.core.settings import RuntimeSettings
from producers.registry import REGISTRY_FILE, JoinAction, RuntimeRegistry

_MAX_STDIN_CHARS = 65_536  # far above any token; a pasted file is refused, not read whole


@click.group(
    epilog="""\b
Examples:
  hubsync runtime join --state-dir /var/lib/hubsync/runtime - < rt-build-1.token
"""
)
def runtime() -> None:
    """This runtime's enrollment on its hub: keep the token hubsync enroll printed (join)."""


@runtime.command(
    "join",
    epilog="""\b
Examples:
  hubsync runtime join --state-dir /var/lib/hubsync/runtime -     (then paste the token)
  hubsync runtime join --state-dir /var/lib/hubsync/runtime - < rt-build-1.token
  ssh hub hubsync enroll rt-build-1 --hub-db hub.db --hub-project acme \\
      | hubsync runtime join --state-dir /var/lib/hubsync/runtime - --json
""",
)
@options_from(RuntimeSettings, only=["state_dir"])
@click.argument("token", metavar="TOKEN")
@json_option
def join(state_dir: Path, token: str, as_json: bool) -> None:
    """Keep the enrollment token of this runtime in its registry (a private file, mode 0600).

    TOKEN is the line `hubsync enroll` printed, or - to read it from standard
    input (piped, redirected from the file `enroll --output` wrote, or pasted
    at the prompt without echo): prefer -, which keeps the token (it holds
    the runtime's key) out of the shell history and the process list; a
    token given as TOKEN works, with one warning on standard error. A state
    dir that does not exist yet is created for the token's runtime id. A
    token for another runtime id, or from another hub than the one this
    runtime joined, is refused (exit 2).
    Joining again with a newer token of the same hub replaces the key and hub
    projects.
    """
    on_command_line = token != "-"  # noqa: S105 - "-" is standard input
    text = token if on_command_line else _read_stdin()
    enrollment = decode_token(text)
    created = not os.path.lexists(state_dir.expanduser() / REGISTRY_FILE)
    with RuntimeRegistry(
        state_dir, enrollment.runtime_id if created else None, create=created
    ) as registry:
        action = registry.join(enrollment)
        path = registry.path
    mode = file_mode(path)  # the file's, as it is now: never a claimed one
    if on_command_line:
        # Once joined: a refused token's one line on stderr stays its error alone.
        warn_secret_on_command_line(
            "the enrollment token (it holds the runtime's key)",
            "pass - and give it on standard input instead "
            "(hubsync runtime join --state-dir DIR - < FILE)",
        )
    projects = ", ".join(enrollment.hub_projects)
    if as_json:
        document = {
            "action": action.value,
            "created_state_dir": created,
            "hub_id": enrollment.hub_id,
            "hub_projects": list(enrollment.hub_projects),
            "registry": str(path),
            "registry_mode": f"{mode:04o}",
            "runtime_id": enrollment.runtime_id,
        }
        click.echo(json.dumps(document, sort_keys=True))
        return
    if created:
        click.echo(f"created the state dir {path.parent} for runtime {enrollment.runtime_id}")
    said = {
        JoinAction.JOINED: "joined",
        JoinAction.UPDATED: "took a new key from",
        JoinAction.UNCHANGED: "already held this enrollment of",
    }[action]
    click.echo(
        f"runtime {enrollment.runtime_id} {said} hub {enrollment.hub_id}, for hub projects {projects} "
        f"(kept in {path}, mode {mode:04o})"
    )


def _read_stdin() -> str:
    if sys.stdin.isatty():
        # Pasted at a terminal: read one line, not echoed, so the key never shows on screen.
        return str(click.prompt("enrollment token", hide_input=True, err=True))
    text = sys.stdin.read(_MAX_STDIN_CHARS + 1)
    if not text.strip():
        raise click.UsageError(
            "TOKEN: - reads the token from standard input, which was empty; pipe or paste the "
            "line hubsync enroll printed"
        )
    return text
