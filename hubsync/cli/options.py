"""Options, argument types and helpers every ``hubsync`` command shares.

Options of settings come from the settings classes (``options_from``): flag,
``HUBSYNC_<NAME>`` variable, type, bounds, help and shown default are each
spelled once, on the field. Bad values become usage errors (exit 2, one
line); an unreachable Redis becomes ``RedisUnavailableError`` (exit 3, one
line).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from pathlib import Path
from types import UnionType
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
)

import click
from click.core import ParameterSource
from pydantic import AliasChoices, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from hubsync.core.connections import RedisTarget
from hubsync.core.durations import is_duration, parse_duration
from hubsync.core.errors import ConfigError
from hubsync.core.names import validate_name
from hubsync.core.redis_credentials import url_password
from hubsync.core.settings import (
    SQLITE_URL_PREFIX,
    ClusterMode,
    CommonSettings,
    HubStoreSettings,
    RuntimeSettings,
    hub_url_of,
)

if TYPE_CHECKING:
    from hubstore.store import HubStore

F = TypeVar("F", bound=Callable[..., Any])


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


def bounded_duration_callback(
    at_most: float,
) -> Callable[[click.Context, click.Parameter, str | float | None], float | None]:
    """``duration_callback`` that also refuses more than ``at_most`` seconds (usage error)."""

    def callback(
        ctx: click.Context, param: click.Parameter, value: str | float | None
    ) -> float | None:
        seconds = duration_callback(ctx, param, value)
        if seconds is not None and seconds > at_most:
            raise click.BadParameter(
                f"{str(value)[:40]!r} is longer than the most it may be, {_shown(at_most)}",
                ctx,
                param,
            )
        return seconds

    return callback


def _shown(seconds: float) -> str:
    """A bound in the duration syntax: whole days as ``30d``, else seconds."""
    return f"{seconds / 86400:g}d" if seconds % 86400 == 0 else f"{seconds:g}s"


def _click_type(annotation: Any, metadata: list[Any]) -> Any:
    """The click type of a settings field: its Python type with its numeric bounds."""
    if get_origin(annotation) in (Union, UnionType):
        annotation = next(a for a in get_args(annotation) if a is not type(None))
    if get_origin(annotation) is Literal:
        return click.Choice([str(a) for a in get_args(annotation)], case_sensitive=False)
    if annotation is Path:
        return click.Path(path_type=Path)
    if annotation in (int, float):
        bounds: dict[str, Any] = {}
        for rule in metadata:
            for name, key, is_open in (("ge", "min", False), ("gt", "min", True),
                                       ("le", "max", False), ("lt", "max", True)):  # fmt: skip
                if getattr(rule, name, None) is not None:
                    bounds[key] = getattr(rule, name)
                    bounds[f"{key}_open"] = is_open
        if annotation is int:
            return click.IntRange(**bounds) if bounds else click.INT
        return click.FloatRange(**bounds) if bounds else click.FLOAT
    return click.STRING


def _is_duration_field(field: FieldInfo) -> bool:
    metadata = list(field.metadata)
    for member in get_args(field.annotation):  # an optional Duration keeps its marker here
        if get_origin(member) is Annotated:
            metadata.extend(get_args(member)[1:])
    return is_duration(metadata)


def setting_envvars(name: str, field: FieldInfo) -> list[str]:
    """The environment variables of a settings field, first one winning: HUBSYNC_<NAME>,
    or the upper-case names of its validation aliases (``redis_url``: also ``REDIS_URL``)."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [c for c in alias.choices if isinstance(c, str) and c.isupper()]
    return [f"HUBSYNC_{name.upper()}"]


def setting_option(
    settings: type[BaseSettings],
    name: str,
    *,
    required: bool | None = None,
    **click_attributes: Any,
) -> Any:
    """The click option of one settings field: ``--<name>``, its variables, type, help, default.

    A ``bool`` field is a ``--<name>/--no-<name>`` switch, a ``tuple[T, ...]`` field a
    repeatable option.
    Click applies the same precedence as the settings (command line, then the
    variables in order, then the field's default), so the value it hands the
    command is the setting's value. ``click_attributes`` go to ``click.option`` as they are.
    """
    field = settings.model_fields[name]
    default = None if field.default is PydanticUndefined else field.default
    # No default at all when there is none (or none to show, for a repeatable option):
    # click treats an explicit None as a value and would let a required option go missing.
    shown: dict[str, Any] = (
        {} if default in (None, ()) else {"default": default, "show_default": True}
    )
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    aliases = [str(alias) for alias in extra.get("cli_aliases", ())]  # type: ignore[union-attr]
    flag = "--" + name.replace("_", "-")
    kind: dict[str, Any] = {"type": _click_type(field.annotation, field.metadata)}
    if _is_duration_field(field):
        # text for click: the settings read "7d" as they read it from the environment,
        # and check the field's bounds in seconds
        kind = {"type": click.STRING, "metavar": "DURATION"}
    elif field.annotation is bool:  # a switch: --x/--no-x
        flag, kind = f"{flag}/--no-{flag[2:]}", {}
    elif get_origin(field.annotation) is tuple:  # tuple[T, ...]: a repeatable option
        kind = {"type": _click_type(get_args(field.annotation)[0], []), "multiple": True}
    envvars = setting_envvars(name, field)  # one is passed as a string: click's usage
    # error would quote a list of one as "'['HUBSYNC_X']'"
    return click.option(
        flag,
        *aliases,
        name,
        **kind,
        envvar=envvars[0] if len(envvars) == 1 else envvars,
        show_envvar=True,
        required=field.is_required() if required is None else required,
        help=field.description,
        **shown,
        **click_attributes,
    )


def options_from(
    settings: type[BaseSettings],
    *,
    only: Collection[str] | None = None,
    exclude: Collection[str] = (),
    required: bool | None = None,
) -> Callable[[F], F]:
    """Decorate a command with one option per field of ``settings`` (``only`` those, if given).

    ``required`` overrides the fields' own (a command may make a setting optional).
    """
    names = [n for n in settings.model_fields if (only is None or n in only) and n not in exclude]
    unknown = set(only or ()) - set(names)
    if unknown:
        raise TypeError(f"{settings.__name__} has no field {sorted(unknown)}")

    def decorate(command: F) -> F:
        for name in reversed(names):
            command = setting_option(settings, name, required=required)(command)
        return command

    return decorate


def given_on_command_line(name: str) -> bool:
    """Whether the running command's parameter ``name`` was typed on its command line (not
    taken from a variable, a file or a default): where every user of the machine can read it."""
    context = click.get_current_context(silent=True)
    return context is not None and context.get_parameter_source(name) is ParameterSource.COMMANDLINE


def warn_secret_on_command_line(what: str, instead: str) -> None:
    """The one warning of a command about a secret typed on its command line: a
    ``warning:`` line on standard error, saying ``what`` it is and how to give it ``instead``
    (never the secret). A daemon's Redis password says the same in its log
    (``RedisTarget.of``), since a daemon's standard error is its log."""
    click.echo(
        f"warning: {what} on the command line can be read in the shell history and, while "
        f"this runs, by every user of this machine in the process list; {instead}",
        err=True,
    )


def secret_option_callback(
    what: str, instead: str
) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback for an option holding a secret: warns (``warn_secret_on_command_line``)
    when the value was typed on the command line rather than read from its variable."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        typed = param.name is not None and given_on_command_line(param.name)
        if value is not None and typed:
            warn_secret_on_command_line(what, instead)
        return value

    return callback


def redis_url_option(command: F) -> F:
    """``--redis-url``, ``--redis-password-file`` and ``--redis-cluster`` of a command that
    takes no other setting.

    The three become one ``RedisTarget`` (the password file read once) just
    before the command runs; the command gets it as ``redis``. A URL typed on
    the command line with a password in it is warned about
    (``warn_secret_on_command_line``).
    """

    @functools.wraps(command)
    def with_target(
        *args: Any,
        redis_url: str,
        redis_password_file: Path | None,
        redis_cluster: str | None,
        **kwargs: Any,
    ) -> Any:
        mode: ClusterMode = (
            "yes" if redis_cluster == "yes" else "no" if redis_cluster == "no" else "auto"
        )
        target = RedisTarget.of(redis_url, redis_password_file, mode)
        if url_password(redis_url) and given_on_command_line("redis_url"):
            warn_secret_on_command_line(
                "the password in --redis-url",
                "pass the URL in HUBSYNC_REDIS_URL, or the password in a file named by "
                "--redis-password-file",
            )
        return command(*args, redis=target, **kwargs)

    url_options = options_from(
        CommonSettings, only=["redis_url", "redis_password_file", "redis_cluster"]
    )
    return cast(F, url_options(with_target))


def admin_redis_options(url_help: str, *, required: bool = False) -> Callable[[F], F]:
    """``--redis-url`` (``url_help``) and ``--redis-password-file`` of the Redis an
    administrator's command works on; no environment variable, since the pipeline's own
    (HUBSYNC_REDIS_URL) is not the administrator's."""

    def decorate(command: F) -> F:
        command = click.option(
            "--redis-password-file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="File holding the Redis administrator's password, for a URL without one.",
        )(command)
        return click.option("--redis-url", required=required, metavar="URL", help=url_help)(command)

    return decorate


hub_options = options_from(HubStoreSettings, required=False)
"""``--hub-url`` and its shorthand ``--hub-db``; resolve them with ``settings.hub_url_of``."""


def deployment_options(command: F) -> F:
    """``--redis-url``, ``--hub-url``/``--hub-db`` and an optional ``--state-dir``: the parts
    of a deployment an overview command (``status``, ``doctor``) looks at."""
    state_dir_option = options_from(RuntimeSettings, only=["state_dir"], required=False)
    return redis_url_option(hub_options(state_dir_option(command)))


def env_option(flag: str, *declarations: str, **attributes: Any) -> Callable[[F], F]:
    """A click option that is not a setting, read also from ``HUBSYNC_<FLAG>`` (shown in help).

    For what a settings field cannot say (a duration like ``15m``, a directory, a
    per-command choice); the variable is derived from the flag as for settings.
    """
    envvar = "HUBSYNC_" + flag.removeprefix("--").replace("-", "_").upper()
    return click.option(flag, *declarations, envvar=envvar, show_envvar=True, **attributes)


def duration_option(
    flag: str, *, at_most: float | None = None, **attributes: Any
) -> Callable[[F], F]:
    """An ``env_option`` holding a duration (``90``, ``15m``, ``2h``, ``7d``), handed over in
    seconds; with ``at_most``, a longer one is a usage error."""
    callback = duration_callback if at_most is None else bounded_duration_callback(at_most)
    return env_option(flag, type=str, metavar="DURATION", callback=callback, **attributes)


def count_option(listed: str) -> Callable[[F], F]:
    """``--count N`` (``HUBSYNC_COUNT``, default 50): how many ``listed`` a list command shows."""
    return env_option(
        "--count",
        type=click.IntRange(1, 100_000),
        default=50,
        show_default=True,
        help=f"Most {listed}.",
    )


json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document on stdout (no environment variable).",
)


def valid_name(what: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback checking a parameter's value (if given) as a ``what`` (an id)."""

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return validate_name(value, what)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None

    return check


_valid_hub_project = valid_name("hub project")


# An operator command's hub project picks what this one call looks at, so it
# reads no environment variable: HUBSYNC_HUB_PROJECT is produce's registration.
hub_project_required = click.option(
    "--hub-project",
    required=True,
    callback=_valid_hub_project,
    help="The hub project to work on (no environment variable).",
)
hub_project_filter = click.option(
    "--hub-project",
    callback=_valid_hub_project,
    help="Only this hub project [default: every project in hubsync:projects] "
    "(no environment variable).",
)


def required_hub_url(hub_url: str | None, hub_db: Path | None) -> str:
    """The hub store's URL from ``--hub-url``/``--hub-db``; a usage error without one."""
    url = hub_url_of(hub_url, hub_db)
    if url is None:
        raise click.UsageError("--hub-url: missing; give --hub-url or --hub-db (HUBSYNC_HUB_URL)")
    return url


def shown_store(hub_url: str) -> str:
    """A hub store as shown to people: a SQLite file's path, or the URL with its password masked."""
    from hubstore.factory import shown_url

    if hub_url.startswith(SQLITE_URL_PREFIX):
        return hub_url.removeprefix(SQLITE_URL_PREFIX)
    return shown_url(hub_url)


def open_hub_store(hub_url: str) -> HubStore:
    """The existing hub store at ``hub_url`` for reading, never creating it.

    A missing store, one without the hub schema or a foreign file is a usage
    error (exit 2); a busy one raises ``StoreBusyError`` (exit 1).
    """
    from hubstore import open_store
    from hubstore.errors import StoreError
    from hubsync.core.errors import SchemaVersionError

    try:
        return open_store(hub_url, create_schema=False, busy_budget=10.0)
    except (StoreError, SchemaVersionError) as exc:
        raise ConfigError(f"--hub-url: {exc}") from None


def redis_target(settings: CommonSettings) -> RedisTarget:
    """A daemon's ``RedisTarget``: ``--redis-url`` with the password of
    ``--redis-password-file`` (read now, after its logging is set up) and ``--redis-cluster``.

    Warns once, in the daemon's log, if the URL given on this command line carries a password.
    """
    return RedisTarget.from_settings(
        settings, url_on_command_line=given_on_command_line("redis_url")
    )


S = TypeVar("S", bound=BaseSettings)


def build_settings(cls: type[S], **options: Any) -> S:
    """Settings from the environment, overridden by the options the user gave.

    ``None`` means "not given on the command line"; a bad value becomes a
    ``ConfigError`` naming the option and its variable (exit code 2), not a
    pydantic traceback.
    """
    given = {name: value for name, value in options.items() if value is not None}
    try:
        return cls(**given)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        name = ".".join(str(part) for part in first["loc"]) or "settings"
        option = "--" + name.replace("_", "-")
        message = first["msg"].removeprefix("Value error, ")  # a validator's own words
        raise ConfigError(f"{option}: {message} (HUBSYNC_{name.upper()})") from None
