"""Validation of the names that end up inside Redis keys and hub rows.

Project, run, runtime and hub-project ids travel in stream fields and in key
names such as ``hubsync:{P}:events``, where ``{`` and ``}`` would break the
cluster hash tag and control characters would make ``redis-cli`` output lie.
One rule for all of them keeps that in one place.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import StringConstraints

from hubsync.core.errors import ConfigError

MAX_NAME_LENGTH = 128
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]*")
EVENT_TYPE_PATTERN = re.compile(r"[a-z][a-z0-9_.-]{0,63}")


def validate_name(value: str, what: str = "name") -> str:
    """Return ``value`` if it is a usable id, else raise ``ConfigError`` saying why.

    The message never repeats the value: a refused id may be a pasted credential.
    """
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{what} must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise ConfigError(f"{what} is {len(value)} characters long; the limit is {MAX_NAME_LENGTH}")
    if not NAME_PATTERN.fullmatch(value):
        raise ConfigError(
            f"{what} may hold only letters, digits and . _ : @ / + = - "
            "and must start with a letter or digit"
        )
    return value


def validate_event_type(value: str) -> str:
    """Event types are short lowercase dotted words such as ``step.completed``.

    Like ``validate_name``, the message never repeats the value.
    """
    if not isinstance(value, str) or not EVENT_TYPE_PATTERN.fullmatch(value):
        raise ConfigError(
            "event type must be 1-64 lowercase letters, digits, '_', "
            "'.' or '-', starting with a letter"
        )
    return value


# The pydantic types below check the same rules as the functions above, but in
# pydantic-core's own regex engine: the hub validates every event it receives,
# and a Python callback per field would cost more than the rest of parsing.
Name = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=MAX_NAME_LENGTH, pattern=f"^{NAME_PATTERN.pattern}$"
    ),
]
"""A pydantic field type for ids that appear in keys and rows."""

EventType = Annotated[str, StringConstraints(pattern=f"^{EVENT_TYPE_PATTERN.pattern}$")]
"""A pydantic field type for event types."""
