"""Typed settings, read from the environment (prefix ``HUBSYNC_``) and the CLI.

Each field is spelled once, here: ``hubsync.cli.options.options_from`` turns
it into the command-line option ``--<field>`` reading ``HUBSYNC_<FIELD>``,
with the field's type, constraints, default and description. One variable has
one meaning in every command that reads it. The Redis URL also reads
``REDIS_URL``; ``HUBSYNC_REDIS_URL`` wins when both are set. Options given on
the command line win over the environment. Sizes are in bytes.

Durations follow one rule across the code and the settings: a duration is in
seconds, a ``float``, under a plain name (``resend_timeout``, ``reclaim_idle``,
``health_ttl``); a name ending in ``_ms`` holds whole milliseconds, an
``int``, and is kept for what Redis counts in milliseconds (``block_ms``,
``--ttl-ms``, ``PX``, ``TIME``-derived clocks and stream ids). Where no type
is visible (JSON fields, Prometheus metric names) seconds are spelled
``_seconds``. No other unit suffix (``_s``, ``_secs``, ``_millis``) is used,
and a value is converted at the one call that needs the other unit. A field
in seconds is typed ``Duration`` (``hubsync.core.durations``): people give it as
``90``, ``15m`` or ``7d``, on the command line and in the environment alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hubsync.core.durations import Duration
from hubsync.core.errors import ConfigError

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_METRICS_HOST = "127.0.0.1"
"""Where a daemon's metrics server listens unless told: this host only."""

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""The accepted ``--log-level`` names (any case)."""

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

ClusterMode = Literal["auto", "yes", "no"]
"""``--redis-cluster``: ask the server (``INFO cluster``), or say it is (not) a Redis Cluster."""

SQLITE_URL_PREFIX = "sqlite:///"


def hub_url_of(hub_url: str | None, hub_db: Path | str | None) -> str | None:
    """The hub store URL from ``--hub-url`` or its shorthand ``--hub-db F`` (= ``sqlite:///<abs F>``).

    Both at once (from the command line or the environment) is refused: which
    one was meant cannot be guessed.
    """
    if hub_url is not None and hub_db is not None:
        raise ConfigError(
            "--hub-db: give --hub-url (HUBSYNC_HUB_URL) or its shorthand --hub-db "
            "(HUBSYNC_HUB_DB), not both"
        )
    if hub_db is not None:
        return hub_url_from_path(hub_db)
    return hub_url


def hub_url_from_path(path: Path | str) -> str:
    """The hub URL of a SQLite file path (the ``--hub-db`` shorthand): ``sqlite:///`` + absolute."""
    return SQLITE_URL_PREFIX + str(Path(path).expanduser().absolute())


class HubsyncSettings(BaseSettings):
    """What every settings class shares: read from ``HUBSYNC_<NAME>`` variables, unknown ones
    ignored, frozen once read."""

    model_config = SettingsConfigDict(env_prefix="HUBSYNC_", extra="ignore", frozen=True)


class CommonSettings(HubsyncSettings):
    """What every hubsync process needs."""

    redis_url: str = Field(
        default=DEFAULT_REDIS_URL,
        # Order is precedence: HUBSYNC_REDIS_URL wins over REDIS_URL.
        validation_alias=AliasChoices("HUBSYNC_REDIS_URL", "REDIS_URL", "redis_url"),
        description="Redis URL of the pipeline (also read from REDIS_URL; HUBSYNC_REDIS_URL wins).",
    )
    redis_password_file: Path | None = Field(
        default=None,
        description="File holding the Redis password (surrounding whitespace dropped), for a "
        "URL without one: keeps the password off the command line, where ps shows it.",
    )
    redis_cluster: ClusterMode = Field(
        default="auto",
        description="Is the Redis of --redis-url a Redis Cluster: auto (ask it, INFO cluster), "
        "yes or no.",
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="Log format: text, or json (one object per line)."
    )
    log_level: LogLevel = Field(default="INFO", description="Log level (any case).")

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class EffectsWorkerSettings(CommonSettings):
    """``hubsync effects-worker``: the pipeline's Redis, and the one RQ's queue lives on."""

    rq_redis_url: str | None = Field(
        default=None,
        description="Redis URL of RQ's queue and registries: one Redis server, as RQ does not "
        "support Redis Cluster [default: --redis-url, unless that is a cluster].",
    )


class RuntimeSettings(HubsyncSettings):
    """Which runtime: its state directory and, optionally, its expected id."""

    state_dir: Path = Field(
        description="The runtime's state directory (registry.sqlite, stores/). Only "
        "hubsync runtime join (or hubsync produce --create) creates it; other commands refuse "
        "a missing one."
    )
    runtime_id: str | None = Field(
        default=None,
        description="Runtime id: given to a new state dir; any other id than the recorded "
        "one is refused [default: rt-<host>-<8 hex>, or the recorded one].",
    )


class EffectsLedgerSettings(HubsyncSettings):
    """Which effects ledger an operator command reads (``hubsync effects``)."""

    effects_ledger: Path = Field(
        description="The runtime's effects ledger (the SQLite file its effect jobs are given); "
        "a missing file is refused, never created."
    )


class ProduceSettings(HubsyncSettings):
    """What ``hubsync produce`` appends: how many synthetic runs, of what size."""

    hub_project: str | None = Field(
        default=None,
        description="Hub project of a new project registration [default: the project root's name].",
    )
    runs: int = Field(ge=1, le=10_000_000, description="Number of runs to produce.")
    events_per_run: int = Field(ge=1, le=1_000_000, description="Events in each run.")
    payload_bytes: int = Field(
        default=512,
        ge=64,
        le=200_000,
        description="Approximate size of each local payload (JSON bytes).",
    )
    plant: tuple[str, ...] = Field(
        default=(),
        description="Text to place in allowlisted payload strings and keys, NOT registered as a "
        "secret (repeatable; to test redaction from outside).",
    )
    batch: bool = Field(
        default=False,
        description="Append each run's events with append_events (one transaction per run, up "
        "to 500).",
    )
    seed: int | None = Field(
        default=None, description="Seed of the synthetic payloads (run ids stay unique)."
    )


class DemoSettings(HubsyncSettings):
    """How much ``hubsync demo`` produces."""

    runs_per_runtime: int = Field(
        default=4, ge=1, le=1000, description="Runs each of 3 runtimes appends."
    )
    events_per_run: int = Field(default=400, ge=2, le=100_000, description="Events in each run.")


class HubStoreSettings(HubsyncSettings):
    """Which hub store: a URL, or the path of a SQLite file as shorthand."""

    hub_url: str = Field(
        description="Hub store URL: sqlite:///PATH, or postgresql://user@host:port/database."
    )
    hub_db: Path | None = Field(
        default=None,
        description="Hub SQLite file: shorthand of --hub-url sqlite:///<absolute path>.",
    )

    @model_validator(mode="before")
    @classmethod
    def _hub_db_is_shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("hub_db") is not None:
            return data | {"hub_url": hub_url_of(data.get("hub_url"), data["hub_db"])}
        return data


class DaemonSettings(CommonSettings):
    """What every long-running daemon adds: a health key and a metrics port."""

    health_ttl: Duration = Field(
        default=30.0, gt=0, description="TTL of the health key, in seconds."
    )
    metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Serve Prometheus metrics on this port at /metrics (and a liveness "
        "answer at /healthz, a readiness answer at /readyz); 0 or unset = off.",
    )
    metrics_host: str = Field(
        default=DEFAULT_METRICS_HOST,
        min_length=1,
        description="Address the metrics server listens on (0.0.0.0 = every interface, as a "
        "container scraped from outside needs).",
    )


class RelaySettings(DaemonSettings, RuntimeSettings):
    """Settings of one runtime's relay daemon."""

    batch_count: int = Field(
        default=500, ge=1, le=100_000, description="Most events per XADD batch."
    )
    batch_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=64 * 1024 * 1024, description="Most bytes per batch."
    )
    resend_timeout: Duration = Field(
        default=30.0,
        gt=0,
        description="Seconds before an unacked row is resent; doubles per attempt.",
    )
    resend_timeout_cap: Duration = Field(
        default=600.0, gt=0, description="Cap of the doubled resend timeout, in seconds."
    )
    presence_interval: Duration = Field(
        default=10.0, gt=0, description="Seconds between presence heartbeats."
    )
    progress_interval: Duration = Field(
        default=5.0,
        gt=0,
        description="Seconds between two progress lines (rows left, rate, time left) while "
        "the relay drains a backlog; none while it keeps up.",
    )
    poll_interval: Duration = Field(
        default=0.002,
        gt=0,
        le=5,
        description="Seconds between looks at the outbox when idle.",
    )
    backoff_max: Duration = Field(
        default=30.0, gt=0, description="Cap of the Redis retry backoff, in seconds."
    )
    outbox_retention: Duration = Field(
        default=86_400.0,
        ge=0,
        description="Seconds an acked outbox row is kept before the relay prunes it "
        "(pending, conflict and rejected rows are never pruned).",
    )
    event_retention: Duration | None = Field(
        default=None,
        ge=0,
        description="Seconds a run's local events are kept once every outbox row of the run "
        "is acked (its last event stays); unset = keep the runtime's history for ever.",
    )
    prune_interval: Duration = Field(
        default=60.0, gt=0, description="Seconds between two pruning passes of the relay."
    )


class ConsumerSettings(DaemonSettings, HubStoreSettings):
    """Settings of one hub consumer worker."""

    name: str | None = Field(
        default=None,
        description="Consumer name in group 'hub' [default: <host>-<pid>]. Required with --check.",
    )
    read_count: int = Field(
        default=500,
        ge=1,
        le=100_000,
        description="Most entries read per stream per XREADGROUP (--batch-count is an older "
        "spelling; HUBSYNC_BATCH_COUNT is the relay's).",
        json_schema_extra={"cli_aliases": ["--batch-count"]},
    )
    read_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024 * 1024,
        le=1024 * 1024 * 1024,
        description="Bytes one read should stay under: after a larger one, reads ask for fewer "
        "entries (down to 1) until batches fit again.",
    )
    block_ms: int = Field(
        default=1000, ge=0, le=60_000, description="How long one read waits for new entries, in ms."
    )
    reclaim_idle: Duration = Field(
        default=60.0,
        gt=0,
        description="Take over entries pending this many seconds in any consumer.",
    )
    reclaim_interval: Duration = Field(
        default=15.0, gt=0, description="Seconds between reclaim and trim passes."
    )
    max_deliveries: int = Field(
        default=5, ge=1, description="Dead-letter an entry delivered more often than this."
    )
    dead_maxlen: int = Field(
        default=100_000, ge=100, description="Approximate cap of each dead-letter stream."
    )
    alerts_maxlen: int = Field(
        default=100_000, ge=100, description="Approximate cap of each alert stream."
    )
    max_projects: int = Field(
        default=1_000,
        ge=1,
        le=100_000,
        description="Most hub projects one consumer follows (of the hub projects its enrolled "
        "runtimes sync to); the rest are ignored, with one warning.",
    )
    acks_maxlen: int = Field(
        default=10_000,
        ge=100,
        description="Approximate cap of each runtime's ack stream, in entries (one entry: one "
        "batch's outcomes); an outcome trimmed unread is made good by the relay's resend.",
    )


def safe_url(url: str) -> str:
    """The URL without its user and password, for messages and JSON."""
    try:
        parts = urlsplit(url)
        port = parts.port or 6379
    except ValueError:
        return "<unparsable URL>"
    return f"{parts.scheme}://{parts.hostname or '?'}:{port}{parts.path}"
