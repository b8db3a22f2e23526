"""Options, argument types and helpers every ``hubsync`` command shares.

Bad values become usage errors (exit 2, one line); an unreachable Redis
becomes ``RedisUnavailableError`` (exit 3, one line).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import redis
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from hubstore.errors import StoreError
from hubstore.factory import hub_url_from_path, open_store
from hubsync.connections import probe
from hubsync.errors import ConfigError, SchemaVersionError
from hubsync.names import validate_name
from hubsync.settings import DEFAULT_REDIS_URL

if TYPE_CHECKING:
    from hubstore.store import HubStore

F = TypeVar("F", bound=Callable[..., Any])

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``15m``, ``2h``, ``7d``, ``1w`` or a sum like ``1h30m``."""
    compact = text.strip().lower()
    total, position = 0.0, 0
    for match in _DURATION_PART.finditer(compact):
        # A bare number means seconds only on its own: "1h30" is ambiguous, so refused.
        if match.start() != position or (match.group(2) == "" and match.start() != 0):
            break
        if match.group(2) == "" and match.end() != len(compact):
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not compact or position != len(compact):
        raise ConfigError(
            f"{text[:40]!r} is not a duration; use seconds or a number with s, m, h, d or w "
            "(90, 15m, 2h, 7d, 1h30m)"
        )
    return total


def duration_callback(
    ctx: click.Context, param: click.Parameter, value: str | float | None
) -> float | None:
    """Click callback turning a duration option into seconds (usage error if malformed)."""
    if value is None or isinstance(value, float | int):
        return None if value is None else float(value)
    try:
        return parse_duration(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


redis_url_option = click.option(
    "--redis-url",
    envvar=["HUBSYNC_REDIS_URL", "REDIS_URL"],
    show_envvar=True,
    default=DEFAULT_REDIS_URL,
    show_default=True,
    help="Redis URL of the pipeline.",
)
json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    envvar="HUBSYNC_JSON",
    show_envvar=True,
    help="Print one JSON document on stdout.",
)


health_ttl_option = click.option(
    "--health-ttl",
    type=float,
    envvar="HUBSYNC_HEALTH_TTL",
    show_envvar=True,
    help="TTL of the health key in seconds [default: 30].",
)
metrics_port_option = click.option(
    "--metrics-port",
    type=int,
    envvar="HUBSYNC_METRICS_PORT",
    show_envvar=True,
    help="Serve Prometheus metrics on this port at /metrics; 0 = off [default: off].",
)
log_format_option = click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    envvar="HUBSYNC_LOG_FORMAT",
    show_envvar=True,
    help="Log format [default: text].",
)
log_level_option = click.option(
    "--log-level", envvar="HUBSYNC_LOG_LEVEL", show_envvar=True, help="Log level [default: INFO]."
)


def daemon_options(command: F) -> F:
    """The options every daemon has: Redis URL, health TTL, metrics port, log format and level."""
    for option in reversed(
        [redis_url_option, health_ttl_option, metrics_port_option, log_format_option,
         log_level_option]
    ):  # fmt: skip
        command = option(command)
    return command


def _valid_hub_project(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return validate_name(value, "hub project")
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


hub_db_option = click.option(
    "--hub-db",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    envvar="HUBSYNC_HUB_DB",
    show_envvar=True,
    help="Hub database (read only here; must exist).",
)
hub_project_required = click.option(
    "--hub-project",
    envvar="HUBSYNC_HUB_PROJECT",
    show_envvar=True,
    required=True,
    callback=_valid_hub_project,
    help="The hub project to work on.",
)
hub_project_filter = click.option(
    "--hub-project",
    envvar="HUBSYNC_HUB_PROJECT",
    show_envvar=True,
    callback=_valid_hub_project,
    help="Only this hub project [default: every project in hubsync:projects].",
)


def open_hub_store(path: Path) -> HubStore:
    """The hub database at ``path`` for reading, never creating it; a database that is not
    one (or has no schema) is a usage error (2)."""
    try:
        return open_store(hub_url_from_path(path), create_schema=False, busy_budget=10.0)
    except (StoreError, SchemaVersionError) as exc:
        raise ConfigError(f"--hub-db (HUBSYNC_HUB_DB): {exc}") from None


def connect_redis(url: str) -> redis.Redis:
    """A client of ``url`` that answered PING (``hubsync.connections.probe``).

    Exit 3 (one line) if Redis cannot be reached, exit 2 if the URL is malformed.
    """
    return probe(url)


S = TypeVar("S", bound=BaseSettings)


def build_settings(cls: type[S], **options: Any) -> S:
    """Settings from the environment, overridden by the options the user gave.

    ``None`` means "not given on the command line"; a bad value becomes a
    ``ConfigError`` naming the option (exit code 2), not a pydantic traceback.
    """
    given = {name: value for name, value in options.items() if value is not None}
    try:
        return cls(**given)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        name = ".".join(str(part) for part in first["loc"]) or "settings"
        option = "--" + name.replace("_", "-")
        raise ConfigError(f"{option} (HUBSYNC_{name.upper()}): {first['msg']}") from None
