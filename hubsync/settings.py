"""Typed settings, read from the environment (prefix ``HUBSYNC_``) and the CLI.

Every field reads ``HUBSYNC_<FIELD>``; the Redis URL also reads ``REDIS_URL``.
The CLI passes the options a user gave explicitly as keyword arguments, which
win over the environment. Sizes are in bytes.

Durations follow one rule across the code and the settings: a duration is in
seconds, a ``float``, under a plain name (``resend_timeout``, ``reclaim_idle``,
``health_ttl``); a name ending in ``_ms`` holds whole milliseconds, an
``int``, and is kept for what Redis counts in milliseconds (``block_ms``,
``--ttl-ms``, ``PX``, ``TIME``-derived clocks and stream ids). Where no type
is visible (JSON fields, Prometheus metric names) seconds are spelled
``_seconds``. No other unit suffix (``_s``, ``_secs``, ``_millis``) is used,
and a value is converted at the one call that needs the other unit.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


class CommonSettings(BaseSettings):
    """What every hubsync process needs."""

    model_config = SettingsConfigDict(env_prefix="HUBSYNC_", extra="ignore", frozen=True)

    redis_url: str = Field(
        default=DEFAULT_REDIS_URL,
        validation_alias=AliasChoices("HUBSYNC_REDIS_URL", "REDIS_URL", "redis_url"),
        description="Redis URL (also read from REDIS_URL).",
    )
    log_format: str = Field(default="text", pattern="^(text|json)$", description="text or json")
    log_level: str = Field(default="INFO", description="stdlib logging level name")


class RelaySettings(CommonSettings):
    """Settings of one runtime's relay daemon."""

    state_dir: Path = Field(description="the runtime's state directory (registry and stores)")
    runtime_id: str | None = Field(
        default=None, description="runtime id; default: the one recorded in the state dir"
    )
    batch_count: int = Field(default=500, ge=1, le=100_000, description="max events per XADD batch")
    batch_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=64 * 1024 * 1024, description="max bytes per batch"
    )
    resend_timeout: float = Field(
        default=30.0, gt=0, description="resend an unacked row after this many seconds (doubles)"
    )
    resend_timeout_cap: float = Field(
        default=600.0, gt=0, description="upper bound of the doubled resend timeout"
    )
    presence_interval: float = Field(default=10.0, gt=0, description="heartbeat period")
    poll_interval: float = Field(
        default=0.002, gt=0, le=5, description="how often the outbox is checked for new commits"
    )
    backoff_max: float = Field(default=30.0, gt=0, description="cap of the Redis retry backoff")
    health_ttl: float = Field(default=30.0, gt=0, description="TTL of the relay's health key")
    metrics_port: int | None = Field(default=None, ge=0, le=65535, description="Prometheus port")


class ConsumerSettings(CommonSettings):
    """Settings of one hub consumer worker."""

    hub_db: Path = Field(description="path of the hub SQLite database")
    name: str | None = Field(default=None, description="consumer name; default host-pid")
    batch_count: int = Field(default=500, ge=1, le=100_000, description="entries per XREADGROUP")
    block_ms: int = Field(default=1000, ge=0, le=60_000, description="XREADGROUP block time")
    reclaim_idle: float = Field(
        default=60.0, gt=0, description="claim entries idle this many seconds in any consumer"
    )
    reclaim_interval: float = Field(default=15.0, gt=0, description="how often to reclaim")
    max_deliveries: int = Field(
        default=5, ge=1, description="dead-letter an entry delivered more often than this"
    )
    dead_maxlen: int = Field(default=100_000, ge=100, description="cap of the dead-letter stream")
    alerts_maxlen: int = Field(default=100_000, ge=100, description="cap of the alert stream")
    health_ttl: float = Field(default=30.0, gt=0, description="TTL of the consumer's health key")
    metrics_port: int | None = Field(default=None, ge=0, le=65535, description="Prometheus port")


def safe_url(url: str) -> str:
    """The URL without its user and password, for messages and JSON."""
    try:
        parts = urlsplit(url)
        port = parts.port or 6379
    except ValueError:
        return "<unparsable URL>"
    return f"{parts.scheme}://{parts.hostname or '?'}:{port}{parts.path}"
