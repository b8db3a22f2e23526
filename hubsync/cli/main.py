"""Entry point of the ``hubsync`` console script.

Exit codes (``hubsync.cli.exit_codes``): 0 ok, 1 failure, 2 usage error,
3 cannot reach Redis. Errors are one clear line on stderr, never a traceback
(set ``HUBSYNC_DEBUG=1`` to see one); a usage error reads
``error: --option: what was wrong``.

Subcommands load lazily: ``hubsync --version`` or ``hubsync relay --check``
imports only what it runs, not rich, the demo or the benchmarks.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from hubsync.cli import exit_codes
from hubsync.core.errors import ConfigError, HubsyncError, RedisUnavailableError
from hubsync.core.version import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "acl": ("hubsync.cli.acl:acl", "Print ACL SETUSER lines for least-privilege Redis users."),
    "alerts": (
        "hubsync.cli.alerts:alerts",
        "Conflicts: the same (project, run, sequence) offered with other bytes, or from the "
        "wrong hub project or runtime.",
    ),
    "bench": (
        "hubsync.cli.bench:bench",
        "Measure the pipeline against its ceilings and its peers, in one run.",
    ),
    "consume": (
        "hubsync.cli.consume:consume",
        "Store every project's sync events in the hub database, exactly once.",
    ),
    "consumers": (
        "hubsync.cli.consumers:consumers",
        "The consumers of group hub: list them, remove one that is gone.",
    ),
    "dashboard": (
        "hubsync.cli.dashboard:dashboard",
        "Serve the pipeline in a browser: security alerts, a card per hub project with its "
        "sparklines, runtimes, consumers, leases and parked effects, and drill-downs into dead "
        "letters, runs and events.",
    ),
    "dead": (
        "hubsync.cli.dead:dead",
        "Dead letters: entries the hub refused (bad bytes) or gave up on (max_deliveries).",
    ),
    "demo": (
        "hubsync.cli.demo:demo",
        "Run the whole pipeline end to end and check its invariants.",
    ),
    "doctor": (
        "hubsync.cli.doctor:doctor",
        "Check a deployment: Redis's version, eviction policy, AOF and consumer groups, the hub "
        "store's schema and the runtime's state dir, one line per check.",
    ),
    "effects": (
        "hubsync.cli.effects:effects",
        "A runtime's shared effects: list them by state, show one, give the verdict on one "
        "parked blocked_uncertain.",
    ),
    "effects-worker": (
        "hubsync.cli.effects_worker:effects_worker",
        "Run shared-effect jobs from the RQ queue hubsync-effects (with RQ's scheduler).",
    ),
    "enroll": (
        "hubsync.cli.enroll:enroll",
        "Enroll a runtime on this hub, or give it a new key: print its enrollment token once.",
    ),
    "events": (
        "hubsync.cli.events:events",
        "List the events the hub stored, as JSON lines, in order of run, project and sequence.",
    ),
    "hub": (
        "hubsync.cli.hub:hub",
        "The hub store itself: its schema (migrate), its id (init), its backup and restore, who "
        "owns a project.",
    ),
    "lease": (
        "hubsync.cli.lease:lease",
        "Fenced leases: tokens only grow, deadlines follow Redis TIME, Redis keeps a proof digest.",
    ),
    "outbox": (
        "hubsync.cli.outbox:outbox",
        "This runtime's outbox: put parked rows back to pending (retry).",
    ),
    "produce": (
        "hubsync.cli.produce:produce",
        "Append synthetic workflow-run events to a project's outbox.",
    ),
    "relay": (
        "hubsync.cli.relay:relay",
        "Move this runtime's outboxes onto Redis Streams and apply the hub's acks.",
    ),
    "resync": (
        "hubsync.cli.resync:resync",
        "Ask one runtime to resend a slice of its events: a rewind.",
    ),
    "runtime": (
        "hubsync.cli.runtime:runtime",
        "This runtime's enrollment on its hub: keep the token hubsync enroll printed (join).",
    ),
    "runs": (
        "hubsync.cli.runs:runs",
        "List the runs the hub stored, as JSON lines: events, sync cursor, gaps, last received.",
    ),
    "status": (
        "hubsync.cli.status:status",
        "Show the pipeline: per hub project its stream, group lag and pending, consumers, "
        "dead letters, alerts and runtimes; per local project its outbox.",
    ),
}
"""Each subcommand: where it lives (``module:attribute``) and the first sentence of its help,
which ``hubsync --help`` lists without importing it (a test checks they agree)."""


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand is used.

    ``--help`` lists the subcommands from their recorded short help, without
    importing them (click's "Lazily Loading Subcommands" pattern).
    """

    def __init__(self, *args: object, lazy: dict[str, tuple[str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand name, loaded or not, sorted."""
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand ``cmd_name``, importing its module on first use."""
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module_name, attribute = self.lazy[cmd_name][0].split(":")
            command = getattr(importlib.import_module(module_name), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy[cmd_name][0]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, from the recorded short help (nothing imported)."""
        names = self.list_commands(ctx)
        if not names:
            return
        # click's own width rule, so the listing is the same loaded or not
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            loaded = self.commands.get(name)
            if loaded is not None and loaded.hidden:
                continue
            # an unloaded subcommand's recorded help is shortened by click's own public rule
            command = loaded if loaded is not None else click.Command(name, help=self.lazy[name][1])
            short = command.get_short_help_str(limit)
            rows.append((name, short))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Options read HUBSYNC_<OPTION> (each --help shows the variable), except the "
    "flags that choose what one call does (--json, --once, --check, --all, --burst, --create, "
    "--watch, --quick, --keep, --allow-actions), the --hub-project of status, dead and alerts, and what "
    "events and runs list (--hub-project, --project-id, --run, --after, --limit). "
    "Nor do what effects list and resolve take (--state, --run, --committed, --not-executed, "
    "--note), nor whom resync asks and from when (--runtime, --hub-project, --project-id, "
    "--run, --since, --wait). "
    "HUBSYNC_REDIS_URL wins over REDIS_URL. "
    "Exit codes: 0 ok, 1 failure, 2 usage error, 3 cannot reach Redis.",
)
@click.version_option(__version__, prog_name="hubsync")
def cli() -> None:
    """hubsync: every run event from every runtime reaches the hub exactly once.

    Runtimes append events to a local SQLite outbox (produce); a relay moves
    them onto Redis Streams (relay); hub consumers verify, dedupe and store them
    and acknowledge back (consume). Shared side effects run under fenced leases
    (lease).
    """


def usage_line(error: click.UsageError) -> str:
    """A usage error as one line: ``--option: what was wrong``."""
    if isinstance(error, click.MissingParameter) and error.param is not None:
        name = _param_name(error.param)
        envvar = getattr(error.param, "envvar", None)
        where = f" or set {envvar[0] if isinstance(envvar, list | tuple) else envvar}"
        return f"{name}: missing; give {name}{where if envvar else ''}"
    if isinstance(error, click.BadParameter) and error.param is not None:
        line = f"{_param_name(error.param)}: {error.message}"
    elif isinstance(error, click.NoSuchOption):
        similar = sorted(error.possibilities or ())
        hint = f" (did you mean {', '.join(similar)}?)" if similar else ""
        line = f"{error.option_name}: no such option{hint}"
    else:
        line = error.message
    return " ".join(line.split())


def _param_name(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and param.opts:
        return param.opts[0]  # the primary spelling, which names the variable
    return param.human_readable_name


def main(argv: list[str] | None = None) -> None:
    """Run the CLI, turning hubsync errors into one line and a documented exit code."""
    try:
        code = cli.main(args=argv, prog_name="hubsync", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        # `hubsync` or `hubsync dead` alone: the help, as --help prints it; exit 2, since no
        # command ran
        click.echo(exc.ctx.get_help())
        code = exit_codes.USAGE
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        code = exit_codes.FAILURE
    except click.UsageError as exc:
        code = _error(usage_line(exc), exit_codes.USAGE)
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except RedisUnavailableError as exc:
        code = _error(f"cannot reach Redis: {exc}", exit_codes.REDIS_UNREACHABLE)
    except ConfigError as exc:
        code = _error(str(exc), exit_codes.USAGE)
    except HubsyncError as exc:
        code = _error(str(exc), exit_codes.FAILURE)
    except Exception as exc:
        # refusal first: redis-py's AuthenticationError is a ConnectionError subclass
        if _is_redis_refusal(exc):
            code = _error(
                f"Redis refused a command: {exc} (check the Redis user's ACL: "
                "hubsync acl prints what each role needs)",
                exit_codes.FAILURE,
            )
        elif _is_redis_outage(exc):
            code = _error(f"cannot reach Redis: {exc}", exit_codes.REDIS_UNREACHABLE)
        else:
            raise
    sys.exit(code if isinstance(code, int) else exit_codes.OK)


def _is_redis_outage(exc: Exception) -> bool:
    # redis is imported only by the commands that talk to it; none did if it is not loaded.
    redis = sys.modules.get("redis")
    return redis is not None and isinstance(exc, redis.ConnectionError | redis.TimeoutError)


def _is_redis_refusal(exc: Exception) -> bool:
    # NOPERM (an ACL user without the right) and wrong credentials (connections'
    # CREDENTIAL_ERRORS; read off the loaded module so the CLI never imports redis
    # itself), as one line, not a traceback
    redis = sys.modules.get("redis")
    return redis is not None and isinstance(
        exc,
        redis.exceptions.NoPermissionError
        | redis.exceptions.AuthenticationError
        | redis.exceptions.AuthorizationError,
    )


def _error(message: str, code: int) -> int:
    """Print ``error: message`` (one line) on stderr and return ``code``; with HUBSYNC_DEBUG set,
    re-raise the exception being handled instead, for its traceback."""
    if os.environ.get("HUBSYNC_DEBUG"):
        raise  # the exception main is handling
    click.echo(f"error: {message}", err=True)
    return code


if __name__ == "__main__":
    main()
