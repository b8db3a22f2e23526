"""Entry point of the ``hubsync`` console script.

Exit codes (``hubsync.cli.exit_codes``): 0 ok, 1 failure, 2 usage error,
3 cannot reach Redis. Errors are one clear line on stderr, never a traceback
(set ``HUBSYNC_DEBUG=1`` to see one).
"""

from __future__ import annotations

import os
import sys

import click
import redis

from hubsync import __version__
from hubsync.cli import exit_codes
from hubsync.errors import ConfigError, HubsyncError, RedisUnavailableError


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Every option also reads HUBSYNC_<OPTION>; the Redis URL also reads REDIS_URL. "
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


def _register_commands() -> None:
    from hubsync.cli.alerts import alerts
    from hubsync.cli.bench import bench
    from hubsync.cli.consume import consume
    from hubsync.cli.dead import dead
    from hubsync.cli.demo import demo
    from hubsync.cli.effects_worker import effects_worker
    from hubsync.cli.lease import lease
    from hubsync.cli.produce import produce
    from hubsync.cli.relay import relay
    from hubsync.cli.status import status

    cli.add_command(alerts)
    cli.add_command(bench)
    cli.add_command(consume)
    cli.add_command(dead)
    cli.add_command(demo)
    cli.add_command(effects_worker)
    cli.add_command(lease)
    cli.add_command(produce)
    cli.add_command(relay)
    cli.add_command(status)


_register_commands()


def main(argv: list[str] | None = None) -> None:
    """Run the CLI, turning hubsync errors into one line and a documented exit code."""
    try:
        code = cli.main(args=argv, prog_name="hubsync", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        code = exit_codes.FAILURE
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except (RedisUnavailableError, redis.ConnectionError, redis.TimeoutError) as exc:
        _debug_reraise()
        click.echo(f"error: cannot reach Redis: {exc}", err=True)
        code = exit_codes.REDIS_UNREACHABLE
    except ConfigError as exc:
        _debug_reraise()
        click.echo(f"error: {exc}", err=True)
        code = exit_codes.USAGE
    except HubsyncError as exc:
        _debug_reraise()
        click.echo(f"error: {exc}", err=True)
        code = exit_codes.FAILURE
    sys.exit(code if isinstance(code, int) else exit_codes.OK)


def _debug_reraise() -> None:
    if os.environ.get("HUBSYNC_DEBUG"):
        raise


if __name__ == "__main__":
    main()
