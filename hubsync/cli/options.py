"""Pieces the commands share: building settings from options, one-line setting errors."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from hubsync.errors import ConfigError

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
