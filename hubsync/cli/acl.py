"""``hubsync acl``: print ``ACL SETUSER`` lines for least-privilege Redis users (redis-cli pipeable).

The rules themselves are ``hubsync.core.acl_rules``; this command only picks the
users and the password, and with ``--hub-url``/``--hub-db`` takes a runtime's
hub projects from its enrollment on that hub, so a relay's user grants exactly
what the hub lets that runtime write. A password is read from a file, never from argv, and
printed only as its SHA-256.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from hubsync.cli.options import hub_options, open_hub_store
from hubsync.core import acl_rules
from hubsync.core.acl_rules import RedisUser
from hubsync.core.errors import ConfigError
from hubsync.core.settings import hub_url_of


def _password(path: Path | None) -> str | None:
    """The one line of ``path`` (its trailing newline dropped), or None without a file."""
    if path is None:
        return None
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read it ({type(exc).__name__})") from None
    password = text.removesuffix("\n").removesuffix("\r")
    if not password:
        raise click.BadParameter("it is empty; write the user's password in it")
    if "\n" in password or "\r" in password:
        raise click.BadParameter("it holds several lines; write only the password in it")
    return password


def _enrolled_projects(hub_url: str, runtime: str, asked: Sequence[str]) -> tuple[str, ...]:
    """The hub projects ``runtime`` is enrolled for on the hub (a subset, if some are asked)."""
    with open_hub_store(hub_url) as store:
        record = store.enrolled_runtime(runtime)
    if record is None or not record.key:
        state = "is not enrolled" if record is None else "is revoked"
        raise click.UsageError(
            f"--runtime: runtime {runtime} {state} on this hub, so it may write nowhere; "
            f"enroll it first (hubsync enroll {runtime} --hub-project P ...)"
        )
    outside = sorted(set(asked) - set(record.hub_projects))
    if outside:
        raise click.UsageError(
            f"--hub-project: runtime {runtime} is not enrolled for {', '.join(outside)} "
            f"(enrolled: {', '.join(record.hub_projects)})"
        )
    return tuple(asked) or record.hub_projects


def _users(
    runtime: str | None,
    hub_projects: Sequence[str],
    effects: Sequence[str],
    roles: dict[str, bool],
    prefix: str,
) -> list[RedisUser]:
    users: list[RedisUser] = []
    if runtime is not None:
        if not hub_projects:
            raise click.UsageError(
                f"--hub-project: missing; give the hub projects runtime {runtime} writes to "
                "(repeat --hub-project for each)"
            )
        users.append(acl_rules.runtime_user(runtime, hub_projects, effects=effects, prefix=prefix))
    elif hub_projects or effects:
        raise click.UsageError("--hub-project and --effects describe a runtime; give --runtime R")
    if roles["consumer"]:
        users.append(acl_rules.consumer_user(prefix=prefix))
    if roles["operator"]:
        users.append(acl_rules.operator_user(prefix=prefix))
    if roles["replayer"]:
        users.append(acl_rules.replayer_user(prefix=prefix))
    if not users:
        raise click.UsageError(
            "name a user to print: --runtime R --hub-project P, --consumer, --operator "
            "or --replayer"
        )
    return users


@click.command(
    epilog="""\b
Examples:
  hubsync acl --hub-db hub.db --runtime build-box-1 --password-file relay.pw | redis-cli
  hubsync acl --runtime build-box-1 --hub-project acme --password-file relay.pw | redis-cli
  hubsync acl --runtime build-box-1 --hub-project acme --effects 'effect:webhook:*'
  hubsync acl --consumer --password-file consumer.pw | redis-cli --user admin
  hubsync acl --consumer --operator --replayer        # review the rules; sets no password
"""
)
@click.option("--runtime", metavar="R", help="Print the user of runtime R (its relay).")
@hub_options
@click.option(
    "--hub-project",
    "hub_projects",
    multiple=True,
    metavar="P",
    help="A hub project the runtime writes to (repeat for each). With --hub-url/--hub-db "
    "the runtime's enrolled hub projects are the default, and any given must be among them.",
)
@click.option(
    "--effects",
    multiple=True,
    metavar="PATTERN",
    help="Let the runtime take leases on the resources matching PATTERN ('effect:webhook:*', "
    "or one resource), as its shared effects need (repeatable). Grant each runtime only the "
    "resources it contends for: whoever may take a lease may also hold it up.",
)
@click.option("--consumer", is_flag=True, help="Print the hub consumers' user.")
@click.option("--operator", is_flag=True, help="Print the read-only operator user.")
@click.option(
    "--replayer", is_flag=True, help="Print the operator user that may also run `dead replay`."
)
@click.option(
    "--user-prefix",
    default=acl_rules.DEFAULT_USER_PREFIX,
    show_default=True,
    help="What every user name starts with.",
)
@click.option(
    "--password-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file holding the user's password (one user per call). The lines carry only its "
    "SHA-256. Without it the lines set rules only and a new user stays off.",
)
def acl(
    runtime: str | None,
    hub_url: str | None,
    hub_db: Path | None,
    hub_projects: tuple[str, ...],
    effects: tuple[str, ...],
    consumer: bool,
    operator: bool,
    replayer: bool,
    user_prefix: str,
    password_file: Path | None,
) -> None:
    """Print ACL SETUSER lines for least-privilege Redis users.

    Pipe them to redis-cli as an administrator. Each user may run only what its role's code sends, on its own keys: a
    runtime appends to the events streams of its hub projects and reads its own
    acks, never deletes, trims or reads another's; the consumer has what hub
    consumers need; the operator only reads; the replayer reads and replays
    dead letters. Each user is two lines: the second allows CLIENT SETINFO,
    which Redis 7.0 and 7.1 refuse as unknown (harmless). Given the hub
    (--hub-url or --hub-db), a runtime's hub projects are read from its
    enrollment there. Reads no environment variable but the hub's.
    """
    roles = {"consumer": consumer, "operator": operator, "replayer": replayer}
    url = hub_url_of(hub_url, hub_db)
    if url is not None and runtime is not None:
        try:
            hub_projects = _enrolled_projects(url, runtime, hub_projects)
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from None
    try:
        users = _users(runtime, hub_projects, effects, roles, user_prefix)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if password_file is not None and len(users) > 1:
        raise click.UsageError(
            "--password-file: holds one user's password; print one user per call"
        )
    try:
        password = _password(password_file)
    except click.BadParameter as exc:
        raise click.UsageError(f"--password-file: {exc.message}") from None
    for user in users:
        for line in user.setuser_lines(password):
            click.echo(line)
    for pattern in effects:
        if pattern.rstrip("*") in ("", "effect:"):
            click.echo(
                f"note: --effects {pattern!r} lets runtime {runtime} hold up or break the lease "
                "of every shared effect; grant each runtime only the resources it shares "
                "('effect:pr-create:*', or one resource)",
                err=True,
            )
    if password is None:
        click.echo(
            "note: no --password-file, so these lines set rules only: an existing user keeps "
            "its passwords, a new one stays off until `ACL SETUSER <user> on >PASSWORD`",
            err=True,
        )
