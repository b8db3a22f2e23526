"""Every Prometheus metric hubsync exports, and the HTTP server that exposes them.

Each daemon's families live in the registry of its role (``RELAY_REGISTRY``,
``CONSUMER_REGISTRY``), and its metrics server serves that registry only: a
relay's scrape holds no consumer family and a consumer's no relay family. The
lease families are the library's, used by whatever program holds a
``LeaseClient``, so they live in prometheus-client's default registry, which
such a program already serves with its own metrics. Counters are incremented once per batch with ``.inc(n)`` so the hot
path pays one lock per batch, not one per event. Label values come from closed
sets (outcomes, dead-letter and conflict reasons, refusal reasons) or from
project names, never from event contents, so the series count stays bounded
and no event byte ever reaches a scrape.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections import Counter as _Tally
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from hubsync.core.entries import ConflictReason, Outcome
from hubsync.core.errors import HubsyncError
from hubsync.core.metrics_server import MetricsServer, WsgiApp
from hubsync.core.settings import DEFAULT_METRICS_HOST, DaemonSettings

log = logging.getLogger(__name__)

DEFAULT_METRICS_ADDR = DEFAULT_METRICS_HOST
"""Where the metrics server listens by default: this host only (``--metrics-host`` widens it)."""
METRICS_PATH = "/metrics"
"""Where the Prometheus exposition is served."""
HEALTHZ_PATH = "/healthz"
"""Where the liveness answer is served: ``200 ok`` while the process serves HTTP."""
READYZ_PATH = "/readyz"
"""Where the readiness answer is served: ``200 ready`` while the daemon's work goes on."""

RELAY_REGISTRY = CollectorRegistry()
"""The relay's families: what ``hubsync relay`` serves."""
CONSUMER_REGISTRY = CollectorRegistry()
"""The hub consumer's families: what ``hubsync consume`` serves."""
LIBRARY_REGISTRY = REGISTRY
"""The families of library code any program may embed (leases): prometheus-client's default."""

# ----- relay -----

EVENTS_SENT = Counter(
    "hubsync_events_sent_total",
    "Outbox rows the relay XADDed to an events stream (kind=new: first send, resend: again).",
    ["kind"],
    registry=RELAY_REGISTRY,
)
RELAY_OUTCOMES = Counter(
    "hubsync_relay_outcomes_total",
    "Hub outcomes the relay applied to its outbox rows (acked = accepted or duplicate).",
    ["outcome"],
    registry=RELAY_REGISTRY,
)
OUTBOX_BACKLOG = Gauge(
    "hubsync_outbox_backlog",
    "Outbox rows of a local project of this runtime not yet acknowledged by the hub (pending "
    "+ attempted).",
    ["project", "runtime"],
    registry=RELAY_REGISTRY,
)
DRAIN_RATE = Gauge(
    "hubsync_relay_drain_rows_per_second",
    "Outbox rows the hub settled for this relay (acked, or parked as conflict or rejected) per "
    "second, over the last six progress intervals.",
    registry=RELAY_REGISTRY,
)
DRAIN_ETA = Gauge(
    "hubsync_relay_drain_eta_seconds",
    "Estimated seconds until this relay's outbox backlog (all its projects) is empty, at the "
    "pace it shrank over the last six progress intervals; 0 with no backlog, +Inf while it "
    "does not shrink.",
    registry=RELAY_REGISTRY,
)
PROJECT_UNREADABLE = Gauge(
    "hubsync_relay_project_unreadable",
    "1 while the relay cannot read a local project's store (the others keep syncing), else 0.",
    ["project"],
    registry=RELAY_REGISTRY,
)
SEND_FAILURES = Counter(
    "hubsync_relay_send_failures_total",
    "Batches or presence beats Redis refused on a hub project's events stream (an error reply "
    "to XADD); the project backs off and retries, the others go on.",
    ["hub_project"],
    registry=RELAY_REGISTRY,
)
PRUNED_ROWS = Counter(
    "hubsync_pruned_rows_total",
    "Rows the relay's retention deleted from its stores (table=outbox: acked rows past "
    "--outbox-retention; run_events: events of fully acked runs past --event-retention).",
    ["table"],
    registry=RELAY_REGISTRY,
)

# ----- consumer -----

EVENTS_INGESTED = Counter(
    "hubsync_events_ingested_total",
    "Events the hub store judged, by outcome (accepted, duplicate, conflict).",
    ["outcome"],
    registry=CONSUMER_REGISTRY,
)
DEAD_LETTERS = Counter(
    "hubsync_dead_letters_total",
    "Entries moved to a dead-letter stream, by reason.",
    ["reason"],
    registry=CONSUMER_REGISTRY,
)
CONFLICTS = Counter(
    "hubsync_conflicts_total",
    "Events refused as conflicts (security alerts), by reason.",
    ["reason"],
    registry=CONSUMER_REGISTRY,
)
RECLAIMED = Counter(
    "hubsync_reclaimed_total",
    "Pending entries taken back for processing: from an idle consumer (XAUTOCLAIM), or this "
    "consumer's own after a restart or a failed batch.",
    registry=CONSUMER_REGISTRY,
)
CONSUMER_LAG = Gauge(
    "hubsync_consumer_lag",
    "Entries of one runtime's events stream of a hub project not yet delivered to group 'hub' "
    "(sum by hub_project for the project's); runtime is empty for the shared stream of before "
    "per-runtime streams.",
    ["hub_project", "runtime"],
    registry=CONSUMER_REGISTRY,
)
OLDEST_PENDING_AGE = Gauge(
    "hubsync_oldest_pending_age_seconds",
    "Age (Redis clock) of the oldest entry of one runtime's events stream of a hub project "
    "delivered to group 'hub' but not acknowledged; 0 when there is none.",
    ["hub_project", "runtime"],
    registry=CONSUMER_REGISTRY,
)
RUNTIME_UNSTORED = Gauge(
    "hubsync_runtime_unstored_entries",
    "Entries of one runtime's events stream not yet stored at the hub (not yet delivered to "
    "group 'hub', or delivered and not acknowledged); runtime is empty for the shared stream "
    "of before per-runtime streams.",
    ["hub_project", "runtime"],
    registry=CONSUMER_REGISTRY,
)
RUNTIME_OLDEST_UNSTORED_AGE = Gauge(
    "hubsync_runtime_oldest_unstored_age_seconds",
    "Age (Redis clock) of the oldest entry of one runtime's events stream not yet stored at "
    "the hub; 0 when there is none.",
    ["hub_project", "runtime"],
    registry=CONSUMER_REGISTRY,
)
RUNTIME_HEARTBEAT_AGE = Gauge(
    "hubsync_runtime_heartbeat_age_seconds",
    "Seconds (hub clock) since the hub received an enrolled runtime's latest presence beat on "
    "a hub project; absent until its first beat. Over 60 the runtime is stale.",
    ["hub_project", "runtime"],
    registry=CONSUMER_REGISTRY,
)
RUNTIME_REPORTED_BACKLOG = Gauge(
    "hubsync_runtime_reported_backlog",
    "Outbox rows an enrolled runtime reported not yet acknowledged, in its latest presence "
    "beat on a hub project.",
    ["hub_project", "runtime"],
    registry=CONSUMER_REGISTRY,
)
STREAM_FAILURES = Counter(
    "hubsync_consumer_stream_failures_total",
    "Keys the consumer set aside or could not write (kind: events for an events stream it could "
    "not read or create its group on, acks, dead, alerts for a stream whose XADD failed); the "
    "other streams and projects go on.",
    ["kind", "hub_project"],
    registry=CONSUMER_REGISTRY,
)
STREAMS_SET_ASIDE = Gauge(
    "hubsync_consumer_streams_set_aside",
    "Events streams this consumer follows but cannot read now (wrong type, refused group).",
    registry=CONSUMER_REGISTRY,
)
BATCH_INGEST_SECONDS = Histogram(
    "hubsync_batch_ingest_seconds",
    "Wall time of one HubStore.ingest call (one transaction per batch).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
    registry=CONSUMER_REGISTRY,
)
END_TO_END_LATENCY_SECONDS = Histogram(
    "hubsync_end_to_end_latency_seconds",
    "Hub commit time minus the event's occurred_at, for accepted events.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
    registry=CONSUMER_REGISTRY,
)

# ----- leases -----

LEASE_REFUSALS = Counter(
    "hubsync_lease_refusals_total",
    "Lease operations Redis refused, by reason (held, superseded, expired, missing), and "
    "fenced writes refused (fenced_stale, fenced_superseded, fenced_unknown_token, "
    "fenced_not_holder).",
    ["reason"],
)


class MetricsServerError(HubsyncError):
    """The metrics HTTP server could not start (port taken, no permission)."""


def _initialise_label_sets() -> None:
    """Export zero for every known label value, so a rate() works from the first scrape."""
    for kind in ("new", "resend"):
        EVENTS_SENT.labels(kind)
    for applied in ("acked", "conflict", "rejected", "foreign", "contradicted", "unverified"):
        RELAY_OUTCOMES.labels(applied)
    for table in ("outbox", "run_events"):
        PRUNED_ROWS.labels(table)
    for outcome in (Outcome.ACCEPTED, Outcome.DUPLICATE, Outcome.CONFLICT):
        EVENTS_INGESTED.labels(outcome.value)
    for reason in ConflictReason:
        CONFLICTS.labels(reason.value)
    for refusal in ("held", "superseded", "expired", "missing"):
        LEASE_REFUSALS.labels(refusal)


_initialise_label_sets()


def count_by_label(counter: Counter, values: Iterable[str]) -> None:
    """Increment ``counter`` once per distinct label value (for small batches of reasons)."""
    for value, amount in _Tally(values).items():
        counter.labels(value).inc(amount)


def observe_many(histogram: Histogram, values: Sequence[float]) -> None:
    """What ``histogram.observe`` of each value does, at one increment per bucket hit and one
    of the sum: a batch of thousands of events observes its latencies in a few locked steps.

    prometheus-client has no batch form, so this counts into the histogram's own buckets
    (its ``_upper_bounds``, ``_buckets`` and ``_sum``); a histogram without them (another
    version, a labelled parent) gets one ``observe`` per value.
    """
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values:
            histogram.observe(value)
        return
    if not values:
        return
    # observe() counts a value in the first bucket whose bound is >= it; the last is +Inf.
    hits = _Tally(bisect_left(bounds, value) for value in values)
    total.inc(sum(values))
    for index, count in hits.items():
        if index < len(buckets):
            buckets[index].inc(count)


Problems = Callable[[], Sequence[str]]
"""What stops a daemon being ready now (``Daemon.readiness.problems``); empty when it is."""


def metrics_app(registry: CollectorRegistry, readiness: Problems) -> WsgiApp:
    """The WSGI app of the metrics server: ``/metrics`` (``registry``'s families),
    ``/healthz``, ``/readyz``, and 404 for the rest.

    The liveness answer is apart from the exposition so a probe polling it
    never renders every series; ``/readyz`` is 200 ``ready`` while
    ``readiness()`` finds nothing wrong, else 503 naming each problem. Any
    other path is refused rather than served the metrics (prometheus-client's
    own app answers every path).
    """
    exposition = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == METRICS_PATH:
            body: list[bytes] = exposition(environ, start_response)
            return body
        if path == HEALTHZ_PATH:
            return _text(start_response, "200 OK", "ok")
        if path == READYZ_PATH:
            problems = readiness()
            if problems:
                return _text(start_response, "503 Service Unavailable", _not_ready(problems))
            return _text(start_response, "200 OK", "ready")
        paths = f"{METRICS_PATH}, {HEALTHZ_PATH} and {READYZ_PATH}"
        return _text(start_response, "404 Not Found", f"not found: serves {paths}")

    return app


def _text(start_response: Callable[..., Any], status: str, line: str) -> list[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [f"{line}\n".encode()]


def _not_ready(problems: Sequence[str]) -> str:
    return "not ready: " + "; ".join(problems)


def serve_metrics(
    port: int, addr: str, registry: CollectorRegistry, readiness: Problems, **limits: Any
) -> MetricsServer:
    """Serve ``metrics_app(registry, readiness)`` on ``addr:port`` in one daemon thread, with
    bounded connections (``MetricsServer``; ``limits`` are its ``max_connections`` and
    ``timeout``); returns the server (to stop it)."""
    return MetricsServer(addr, port, metrics_app(registry, readiness), **limits).start()


def start_metrics_server(
    port: int | None,
    addr: str = DEFAULT_METRICS_ADDR,
    *,
    registry: CollectorRegistry,
    readiness: Problems,
) -> bool:
    """Serve ``/metrics`` (``registry``: the daemon's role's), ``/healthz`` and ``/readyz``
    (``readiness``) on ``addr:port`` in a daemon thread (one, however many connections:
    ``hubsync.core.metrics_server``); 0/None = off.

    Returns whether a server was started. A port that cannot be bound raises
    ``MetricsServerError`` naming it, so the daemon fails at start, not silently.
    """
    if not port:
        return False
    try:
        serve_metrics(port, addr, registry, readiness)
    except OSError as exc:
        raise MetricsServerError(
            f"cannot serve metrics on {addr}:{port} ({exc.strerror or exc}); choose another "
            "--metrics-port (HUBSYNC_METRICS_PORT) or --metrics-host (HUBSYNC_METRICS_HOST), "
            "or 0 to turn metrics off"
        ) from None
    log.info("serving Prometheus metrics on http://%s:%d%s", addr, port, METRICS_PATH)
    return True


def serve_daemon_metrics(
    settings: DaemonSettings, registry: CollectorRegistry, readiness: Problems
) -> bool:
    """``start_metrics_server`` on a daemon's ``--metrics-port`` and ``--metrics-host``."""
    return start_metrics_server(
        settings.metrics_port, settings.metrics_host, registry=registry, readiness=readiness
    )
