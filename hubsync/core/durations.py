"""One duration syntax for every option and variable that holds seconds.

``90``, ``90s``, ``15m``, ``2h``, ``7d``, ``1w`` or a sum such as ``1h30m``:
the same text is accepted by ``--outbox-retention``, ``--stale-after``,
``HUBSYNC_RECLAIM_IDLE`` and every other duration, on the command line and in
the environment alike. A setting field typed ``Duration`` takes it; the CLI
shows such an option's value as ``DURATION``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

from hubsync.core.errors import ConfigError

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
MAX_SECONDS = 100 * 365 * 86400.0
"""No duration is longer (a date that far ahead is still a date); each option may set less."""
SYNTAX = "seconds or a number with s, m, h, d or w (90, 15m, 2h, 7d, 1h30m)"
"""What a duration may look like, as error messages and help say it."""


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``15m``, ``2h``, ``7d``, ``1w`` or a sum like ``1h30m``."""
    compact = text.strip().lower()
    total, position = 0.0, 0
    for match in _PART.finditer(compact):
        # A bare number means seconds only on its own: "1h30" is ambiguous, so refused.
        if match.start() != position or (match.group(2) == "" and match.start() != 0):
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not compact or position != len(compact):
        raise ConfigError(f"{text[:40]!r} is not a duration; use {SYNTAX}")
    if total > MAX_SECONDS:
        raise ConfigError(f"{text[:40]!r} is longer than any duration hubsync takes (100 years)")
    return total


def format_duration(seconds: float) -> str:
    """``4.2s``, ``3m07s``, ``2h05m``, ``3d04h``: how log lines and tables show a duration."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def _seconds(value: Any) -> Any:
    # Text is a duration; a number (a default, a Python caller) is seconds already.
    # pydantic then applies the field's bounds to the seconds.
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return value


class _DurationMarker(BeforeValidator):
    """The validator that makes a settings field a ``Duration`` (the CLI looks for it)."""


DURATION_VALIDATOR = _DurationMarker(_seconds)
Duration = Annotated[float, DURATION_VALIDATOR]
"""Seconds, given as a number or in the duration syntax (``7d``, ``15m``, ``1h30m``)."""


def is_duration(metadata: list[Any]) -> bool:
    """Whether a settings field's metadata makes it a ``Duration``."""
    return any(isinstance(rule, _DurationMarker) for rule in metadata)
