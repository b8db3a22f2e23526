"""Following one event with OpenTelemetry, from its commit to the hub and back to its ack.

The runtime appends inside a span of the SDK (its in-memory exporter); a real relay
process and a real consumer process export their spans to a file each
(``HUBSYNC_TRACES_FILE``). The relay's send span, the consumer's ingest span and the
relay's ack span each link to the runtime's span: one trace, followed across three
processes. An event appended outside any span is carried and ingested without a context.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hubsync.core import keys
from hubsync.processes import run_hubsync
from tests.helpers.consumer_support import consume_argv, count_rows
from tests.helpers.hub_double import stream_events
from tests.helpers.relay_support import make_runtime, open_hub_db

HUB_PROJECT = "acme"


def spans_in(path: Path) -> list[dict[str, Any]]:
    """The spans a daemon exported to ``path`` (one JSON object a line)."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [span for span in spans if span["name"] == name]


def linked_contexts(span: dict[str, Any]) -> list[tuple[str, str]]:
    """(trace id, span id) of each link of an exported span, as 32 and 16 hex digits."""
    return [
        (link["context"]["trace_id"][2:], link["context"]["span_id"][2:])
        for link in span.get("links", [])
    ]


def test_one_event_is_followed_from_its_commit_through_relay_and_consumer_to_its_ack(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    hub_db = tmp_path / "hub.db"
    hub = open_hub_db(hub_db)
    state_dir = tmp_path / "runtime" / "state"
    registry, (store,) = make_runtime(state_dir, [HUB_PROJECT], hub)
    hub.close()
    runtime_spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(runtime_spans))
    with provider.get_tracer("the application").start_as_current_span("commit build step"):
        store.append_event("run-1", "step.completed", {"step": "build", "ok": True})
    store.append_event("run-1", "step.completed", {"step": "test", "ok": True})  # no span
    store.close()
    registry.close()
    [commit] = runtime_spans.get_finished_spans()
    origin = (f"{commit.context.trace_id:032x}", f"{commit.context.span_id:016x}")

    relay_file, consumer_file = tmp_path / "relay.jsonl", tmp_path / "consumer.jsonl"
    relay_argv = ["relay", "--state-dir", str(state_dir), "--redis-url", redis_url, "--once"]
    relay_env = {"HUBSYNC_TRACES_FILE": str(relay_file), "OTEL_SERVICE_NAME": "relay-under-test"}
    sent = run_hubsync(relay_argv, env=relay_env)
    assert sent.returncode == 0, sent.stderr
    traced, untraced = stream_events(redis_client, HUB_PROJECT)
    assert traced["traceparent"].decode().split("-")[1:3] == list(origin)
    assert "traceparent" not in untraced

    consumed = run_hubsync(
        consume_argv(redis_url, hub_db, "--once", "--json"),
        env={"HUBSYNC_TRACES_FILE": str(consumer_file)},
    )
    assert consumed.returncode == 0, consumed.stderr
    assert count_rows(hub_db) == 2, "both events are stored, with a context or without"
    acked = run_hubsync(relay_argv, env=relay_env)
    assert acked.returncode == 0, acked.stderr

    relay_spans = spans_in(relay_file)
    [send] = named(relay_spans, "hubsync send")
    [ack] = named(relay_spans, "hubsync ack")
    ingests = named(spans_in(consumer_file), "hubsync ingest")
    [ingest] = [span for span in ingests if linked_contexts(span)]
    for span in (send, ingest, ack):
        assert linked_contexts(span) == [origin], span["name"]
    assert send["kind"] == "SpanKind.PRODUCER" and ingest["kind"] == "SpanKind.CONSUMER"
    stream = keys.events_stream(HUB_PROJECT, traced["runtime_id"].decode())
    assert ingest["attributes"] == {
        "messaging.system": "redis_streams",
        "messaging.operation": "process",
        "messaging.operation.type": "process",
        "messaging.batch.message_count": ingest["attributes"]["messaging.batch.message_count"],
        "messaging.destination.name": stream,
    }
    # every entry read was in a batch span; none was empty
    assert sorted(s["attributes"]["messaging.batch.message_count"] for s in ingests)[0] >= 1
    assert ack["attributes"]["messaging.destination.name"] == keys.acks_stream(
        HUB_PROJECT, traced["runtime_id"].decode()
    )
    assert send["resource"]["attributes"]["service.name"] == "relay-under-test"
    assert ingest["resource"]["attributes"]["service.name"] == "hubsync-consume"
