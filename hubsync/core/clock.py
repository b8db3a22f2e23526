"""Wall-clock helpers: one timestamp format everywhere (UTC, microseconds, ``Z``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

EpochClock = Callable[[], float]
"""A source of UNIX epoch seconds: ``time.time`` in production, a settable fake in tests."""

epoch_seconds: EpochClock = time.time


def utc_now() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


def format_timestamp(moment: datetime) -> str:
    """Render an aware datetime as ``2026-11-29T16:38:54.123456Z``."""
    if moment.tzinfo is None:
        raise ValueError("timestamp must be timezone-aware")
    # isoformat is several times cheaper than strftime, and the hub formats
    # every event's timestamp once to check its canonical form
    naive = moment.astimezone(UTC).replace(tzinfo=None)
    return naive.isoformat(timespec="microseconds") + "Z"


def utc_now_iso() -> str:
    """The current time in the canonical timestamp format."""
    return format_timestamp(utc_now())


def parse_timestamp(text: str) -> datetime:
    """Parse the canonical timestamp format back into an aware UTC datetime."""
    return datetime.strptime(text, TIMESTAMP_FORMAT).replace(tzinfo=UTC)
