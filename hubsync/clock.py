"""Wall-clock helpers: one timestamp format everywhere (UTC, microseconds, ``Z``)."""

from __future__ import annotations

from datetime import UTC, datetime

TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def utc_now() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


def format_timestamp(moment: datetime) -> str:
    """Render an aware datetime as ``2026-11-29T16:38:54.123456Z``."""
    if moment.tzinfo is None:
        raise ValueError("timestamp must be timezone-aware")
    return moment.astimezone(UTC).strftime(TIMESTAMP_FORMAT)


def utc_now_iso() -> str:
    """The current time in the canonical timestamp format."""
    return format_timestamp(utc_now())


def parse_timestamp(text: str) -> datetime:
    """Parse the canonical timestamp format back into an aware UTC datetime."""
    return datetime.strptime(text, TIMESTAMP_FORMAT).replace(tzinfo=UTC)
