"""What following events with OpenTelemetry costs: the same stages with tracing off and on.

Each round runs two child processes, one per mode, in turn (paired: a noisy neighbour
hurts both alike; the median round counts):

* ``off``: no SDK configured, the API alone (what every hubsync runs without the
  ``otel`` extra's settings): capturing a context finds none, spans are non-recording;
* ``on``: the SDK configured by ``hubsync.telemetry`` as a daemon is, exporting every span
  as a JSON line to ``/dev/null`` (the cost of recording and encoding, not of a network);
  the events are appended inside an application's span, so each outbox row keeps a
  context, each entry carries a signed ``traceparent``, and every batch span is linked
  (the relay's backlog one span per event: as many distinct links as events per batch).

Each child times, on its own fresh runtime and hub: ``append_event`` (one transaction per
event, ``synchronous=NORMAL``), the relay's drain of a backlog (``Relay.run_once``) and
the consumer's ingest of what the relay sent (``HubConsumer``, every check included), on
the bench's private Redis, emptied before each child (each child's hub is a new one).
A process per mode because the SDK, once installed as the global tracer provider, cannot
be taken back.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hubsync.processes import child_environment, python_command

MODES = ("off", "on")

STAGES = {
    "append": "append_event_per_s",
    "relay": "relay_events_per_s",
    "consumer": "consumer_events_per_s",
}
"""The report's name of each stage -> a child's figure for it."""


def measure_tracing(url: str, events: int, rounds: int) -> dict[str, Any]:
    """Each stage's rate with tracing off and on (median of ``rounds`` paired rounds), and
    what tracing costs each (``on_cost_percent``: the time per event added, in percent)."""
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(rounds):
        for mode in MODES:
            runs[mode].append(_child(mode, url, events))
    result: dict[str, Any] = {
        "what": "the same stages with no OpenTelemetry SDK (off) and with the SDK recording "
        "and exporting every span (on); paired rounds in child processes, median",
        "events": events,
        "rounds": rounds,
    }
    for name, stage in STAGES.items():
        off = statistics.median(run[stage] for run in runs["off"])
        on = statistics.median(run[stage] for run in runs["on"])
        result[name] = {
            "off_events_per_s": round(off),
            "on_events_per_s": round(on),
            "on_cost_percent": round((off / on - 1) * 100, 1) if on else None,
        }
    return result


def _child(mode: str, url: str, events: int) -> dict[str, float]:
    from hubsync.core.connections import RedisTarget, connect

    # the bench's private server: each child's hub owns the namespace afresh
    client = connect(RedisTarget(url))
    try:
        client.flushdb()
    finally:
        client.close()
    done = subprocess.run(
        python_command(__name__, mode, str(events)),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=child_environment({"HUBSYNC_REDIS_URL": url}),
    )
    if done.returncode != 0:
        raise RuntimeError(f"the tracing bench's {mode} run failed: {done.stderr.strip()[-400:]}")
    return dict(json.loads(done.stdout))


def run_stages(mode: str, url: str, events: int, root: Path) -> dict[str, float]:
    """One child's measurements (see the module docstring)."""
    from opentelemetry import trace

    from consumers.stream.worker import HubConsumer
    from hubstore.factory import open_store
    from hubsync.benchmarks.stages import relay_drain_seconds
    from hubsync.benchmarks.workload import payload, runtime_with_backlog
    from hubsync.core.connections import RedisTarget, connect
    from hubsync.core.settings import ConsumerSettings
    from hubsync.telemetry import configure_tracing

    if mode == "on":
        tracing = configure_tracing("hubsync-bench", {"HUBSYNC_TRACES_FILE": os.devnull})
        assert tracing is not None
    application = trace.get_tracer("bench application")  # a no-op tracer when off
    registry, store = runtime_with_backlog(root, 0, synchronous="NORMAL")
    with application.start_as_current_span("workflow step"):
        started = time.perf_counter()
        for index in range(events):
            store.append_event(f"run-{index // 50:05d}", "step.completed", payload(index))
        append = events / (time.perf_counter() - started)
    # the relay's backlog (not timed): each event appended in a span of its own, so every
    # batch span links as many contexts as it has events
    for index in range(events, 2 * events):
        with application.start_as_current_span("workflow step"):
            store.append_event(f"run-{index // 50:05d}", "step.completed", payload(index))
    store.close()
    registry.close()
    relay_seconds, sent = relay_drain_seconds(url, root / "state")
    settings = ConsumerSettings(hub_db=root / "hub.db", redis_url=url, read_count=500)
    client = connect(RedisTarget(url))
    try:
        with open_store(settings.hub_url, create_schema=True) as hub:
            worker = HubConsumer(client, hub, settings, name=f"bench-{mode}")
            worker.refresh_streams()
            started = time.perf_counter()
            while worker.poll(block_ms=None):
                pass
            consumer_seconds = time.perf_counter() - started
            accepted = worker.stats.accepted
    finally:
        client.close()
    return {
        "append_event_per_s": append,
        "relay_events_per_s": sent / relay_seconds,
        "consumer_events_per_s": accepted / consumer_seconds,
    }


def main(argv: list[str]) -> int:
    """``python -m hubsync.benchmarks.tracing MODE EVENTS``: one child's measurements, as JSON."""
    mode, events = argv[0], int(argv[1])
    url = os.environ["HUBSYNC_REDIS_URL"]
    with tempfile.TemporaryDirectory(prefix=f"hubsync-bench-tracing-{mode}-") as tmp:
        print(json.dumps(run_stages(mode, url, events, Path(tmp))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
