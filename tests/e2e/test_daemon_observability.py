"""A live relay and consumer (real processes, private Redis): /metrics over HTTP, JSON logs.

One pipeline run serves both tests: events produced through ``hubsync
produce`` with a unique marker planted in their allowlisted payload (the
runtime enrolled on the hub as ``hubsync enroll`` and ``runtime join`` do),
plus two malformed entries of another enrolled runtime and one unsigned entry,
all carrying the same marker, straight onto the stream, go through ``hubsync
relay`` and ``hubsync consume`` started with
``--metrics-port`` and ``--log-format json --log-level DEBUG``. The scraped
counters must equal what went through; the logs must be JSON lines that never
contain the marker (so no event bytes, valid or not, reach a log record).
"""

from __future__ import annotations

import json
import socket
import sqlite3
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from hubstore import hub_url_from_path, open_store
from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import keys
from hubsync.core.canonical import canonical_json, content_hash
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.processes import PipelineProcesses, hubsync_command, run_hubsync
from hubsync.provisioning import enroll_state_dir
from tests.helpers.support import require_redis_server
from tests.helpers.trust import enroll, signed_event

RUNS, PER_RUN = 3, 10
EVENTS = RUNS * PER_RUN

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def scrape(port: int) -> Samples:
    """Every sample of ``http://127.0.0.1:port/metrics``, keyed by name and labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@dataclass
class Pipeline:
    """What the run left: scrapes taken while both daemons were live, their logs, the counts."""

    marker: str
    project_id: str
    runtime_id: str
    hub_project: str
    relay_metrics: Samples
    consumer_metrics: Samples
    relay_log: str
    consumer_log: str
    hub_rows: int
    hub_rows_with_marker: int
    exit_codes: tuple[int | None, int | None]


def malformed_entries(hub_project: str, marker: str) -> list[dict[str, str | bytes]]:
    """Two bad entries of runtime ``rt-x`` whose bytes carry the marker: no JSON, and a
    wrong field type (unsigned: the caller signs them as the runtime)."""
    wrong_type = canonical_json(
        {
            "schema": "hubsync.sync-event.v1",
            "project_id": "proj-x",
            "hub_project": hub_project,
            "home_runtime_id": "rt-x",
            "run_id": "run-x",
            "sequence": f"not-a-number-{marker}",
            "event_type": "step.completed",
            "occurred_at": "2026-11-29T16:38:54.123456Z",
            "data": {"note": marker},
        }
    )
    base: dict[str, str | bytes] = {
        "kind": "event",
        "project_id": "proj-x",
        "hub_project": hub_project,
        "run_id": "run-x",
        "sequence": "1",
        "event_type": "step.completed",
        "runtime_id": "rt-x",
    }
    not_json = b'{"data":{"note":"' + marker.encode()
    return [
        base | {"content_hash": content_hash(not_json), "event": not_json},
        base | {"content_hash": content_hash(wrong_type), "event": wrong_type},
    ]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    require_redis_server()
    work = tmp_path_factory.mktemp("observability")
    server = RedisServerProcess(directory=work / "redis")
    server.directory.mkdir()
    server.start()
    try:
        with PipelineProcesses(server.url, work / "logs") as processes:
            yield run_pipeline(work, processes)
    finally:
        server.close()


def run_pipeline(work: Path, processes: PipelineProcesses) -> Pipeline:
    marker = f"obs-marker-{uuid.uuid4().hex}"
    state_dir, hub_db = work / "state", work / "hub.db"
    produced = run_hubsync(
        [
            "produce",
            "--state-dir",
            str(state_dir),
            "--project-root",
            str(work / "shop"),
            "--runs",
            str(RUNS),
            "--events-per-run",
            str(PER_RUN),
            "--plant",
            marker,
            "--json",
            "--create",
        ],
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr
    report = json.loads(produced.stdout)
    hub_project = report["hub_project"]
    with open_store(hub_url_from_path(hub_db), create_schema=True) as hub:
        enroll_state_dir(hub, state_dir, [hub_project])
        enroll(hub, "rt-x", [hub_project])  # signs the malformed entries below
    client = redis.Redis.from_url(processes.redis_url)
    bad = [signed_event(fields) for fields in malformed_entries(hub_project, marker)]
    unsigned = dict(malformed_entries(hub_project, marker)[0], run_id="run-unsigned")
    for fields in [*bad, unsigned]:
        client.xadd(keys.events_stream(hub_project, "rt-x"), fields)  # type: ignore[arg-type]

    relay_port, consumer_port = free_port(), free_port()
    logging_args = ("--log-format", "json", "--log-level", "DEBUG")
    relay = processes.relay(
        "relay",
        state_dir,
        "--metrics-port",
        str(relay_port),
        "--presence-interval",
        "0.2",
        *logging_args,
    )
    consumer = processes.start(
        "consumer",
        hubsync_command(
            "consume",
            "--hub-db",
            str(hub_db),
            "--name",
            "hub-obs",
            "--block-ms",
            "100",
            "--reclaim-interval",
            "0.2",
            *logging_args,
        ),
        env={"HUBSYNC_METRICS_PORT": str(consumer_port)},  # via the env var
    )

    runtime_id = report["runtime_id"]
    backlog_labels = {"project": report["project_id"], "runtime": runtime_id}
    lag_labels = frozenset({"hub_project": hub_project, "runtime": runtime_id}.items())

    def settled() -> tuple[Samples, Samples] | None:
        try:
            relay_now, consumer_now = scrape(relay_port), scrape(consumer_port)
        except OSError:
            return None  # not listening yet
        done = (
            value(relay_now, "hubsync_relay_outcomes_total", outcome="acked") == EVENTS
            and value(relay_now, "hubsync_outbox_backlog", **backlog_labels) == 0
            and ("hubsync_consumer_lag", lag_labels) in consumer_now
            and consumer_now[("hubsync_consumer_lag", lag_labels)] == 0
        )
        return (relay_now, consumer_now) if done else None

    relay_metrics, consumer_metrics = processes.wait_until(
        settled, timeout=60, interval=0.1, what="every event acked and the lag at 0"
    )
    stopped = processes.stop_all()
    codes = (stopped["relay"], stopped["consumer"])
    client.close()
    with SqliteHubStore(hub_db) as store:
        rows = store.count_events()
    with closing(sqlite3.connect(hub_db)) as db:
        (marked,) = db.execute(
            "SELECT count(*) FROM sync_events WHERE instr(CAST(record AS TEXT), ?) > 0", (marker,)
        ).fetchone()
    return Pipeline(
        marker=marker,
        project_id=report["project_id"],
        runtime_id=runtime_id,
        hub_project=hub_project,
        relay_metrics=relay_metrics,
        consumer_metrics=consumer_metrics,
        relay_log=relay.log_text(),
        consumer_log=consumer.log_text(),
        hub_rows=rows,
        hub_rows_with_marker=int(marked),
        exit_codes=codes,
    )


def test_scraped_metrics_equal_what_was_sent_and_ingested(pipeline: Pipeline) -> None:
    relay, consumer = pipeline.relay_metrics, pipeline.consumer_metrics
    assert pipeline.hub_rows == EVENTS
    assert value(relay, "hubsync_events_sent_total", kind="new") == EVENTS
    assert value(relay, "hubsync_events_sent_total", kind="resend") == 0
    assert value(relay, "hubsync_relay_outcomes_total", outcome="acked") == EVENTS
    assert value(relay, "hubsync_relay_outcomes_total", outcome="conflict") == 0
    backlog = {"project": pipeline.project_id, "runtime": pipeline.runtime_id}
    assert value(relay, "hubsync_outbox_backlog", **backlog) == 0

    assert value(consumer, "hubsync_events_ingested_total", outcome="accepted") == EVENTS
    assert value(consumer, "hubsync_events_ingested_total", outcome="duplicate") == 0
    assert value(consumer, "hubsync_dead_letters_total", reason="bad_json") == 1
    assert value(consumer, "hubsync_dead_letters_total", reason="invalid_event") == 1
    assert value(consumer, "hubsync_dead_letters_total", reason="unauthenticated") == 1
    assert value(consumer, "hubsync_end_to_end_latency_seconds_count") == EVENTS
    assert value(consumer, "hubsync_batch_ingest_seconds_count") >= 1
    per_runtime = {"hub_project": pipeline.hub_project, "runtime": pipeline.runtime_id}
    assert value(consumer, "hubsync_consumer_lag", **per_runtime) == 0
    assert value(consumer, "hubsync_oldest_pending_age_seconds", **per_runtime) == 0


def test_each_daemon_exports_its_own_roles_families_only(pipeline: Pipeline) -> None:
    relay = {name for name, _ in pipeline.relay_metrics}
    consumer = {name for name, _ in pipeline.consumer_metrics}
    assert "hubsync_events_sent_total" in relay and "hubsync_events_ingested_total" in consumer
    assert all(name.startswith("hubsync_") for name in relay | consumer)  # no process series
    assert not relay & consumer
    assert not any(
        name.startswith(("hubsync_events_ingested", "hubsync_consumer")) for name in relay
    )
    assert not any(name.startswith(("hubsync_events_sent", "hubsync_relay")) for name in consumer)


def test_json_logs_are_json_lines_without_event_bytes(pipeline: Pipeline) -> None:
    assert pipeline.exit_codes == (0, 0)
    # the marker did travel inside the events' bytes, through Redis, into the hub
    assert pipeline.hub_rows_with_marker > 0
    for name, text in (("relay", pipeline.relay_log), ("consumer", pipeline.consumer_log)):
        lines = text.splitlines()
        assert lines, f"the {name} logged nothing"
        records = [json.loads(line) for line in lines]  # every line is one JSON object
        assert all({"time", "level", "logger", "message"} <= record.keys() for record in records)
        assert pipeline.marker not in text, f"the {name}'s log contains event bytes"
    # The paths that handle bad bytes did log (so the marker check means something).
    messages = [json.loads(line)["message"] for line in pipeline.consumer_log.splitlines()]
    assert sum("dead-lettering" in m for m in messages) == 2
    assert sum("security: refusing" in m for m in messages) == 1
    assert any("metrics" in json.loads(line)["message"] for line in pipeline.relay_log.splitlines())


def test_the_shutdown_summary_is_one_line_with_its_figures_as_json_fields(
    pipeline: Pipeline,
) -> None:
    relay = [json.loads(line) for line in pipeline.relay_log.splitlines()]
    [relay_summary] = [record for record in relay if "summary" in record]
    assert relay_summary["message"].startswith("relay ")
    assert relay_summary["summary"]["sent"] == EVENTS
    assert relay_summary["summary"]["acked"] == EVENTS
    assert relay_summary["summary"]["pending"] == 0
    consumer = [json.loads(line) for line in pipeline.consumer_log.splitlines()]
    [consumer_summary] = [record for record in consumer if "summary" in record]
    assert "stopped after" in consumer_summary["message"]
    assert consumer_summary["summary"]["accepted"] == EVENTS
    assert consumer_summary["daemon"] == f"consumer {consumer_summary['summary']['consumer']}"
