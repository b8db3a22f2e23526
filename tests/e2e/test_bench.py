"""``hubsync bench``: the report's shape (not its numbers), at tiny sizes on private servers."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from hubsync.benchmarks import ceilings, pipeline, report, scaleout
from hubsync.benchmarks.procs import percentiles
from hubsync.benchmarks.workload import EVENT_BYTES, entries
from hubsync.cli.main import cli
from hubsync.servers.postgres import postgres_bindir
from tests.helpers.support import require_redis_server


def test_workload_events_are_about_540_bytes_of_canonical_json() -> None:
    sizes = {len(fields["event"]) for fields in entries(30)}
    assert all(abs(size - EVENT_BYTES) <= 10 for size in sizes), sizes


def test_percentiles_use_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentiles(values) == {"p50": 50.0, "p95": 95.0, "p99": 99.0}
    assert percentiles([]) == {"p50": 0.0, "p95": 0.0, "p99": 0.0}


def run_bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: ModuleType, *args: str
) -> tuple[dict[str, Any], str]:
    """``hubsync bench ARGS --quick``, ``module``'s quick sizes made tiny: its JSON report and
    what it printed."""
    require_redis_server()
    monkeypatch.setattr(module, "QUICK", module.TINY)
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(cli, ["bench", *args, "--quick", "--json", str(out)])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(out.read_text())
    return document, result.output


@pytest.mark.timeout(240)
def test_bench_writes_a_report_with_every_section_and_prints_its_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document, output = run_bench(tmp_path, monkeypatch, report)
    assert set(document) == {
        "relay", "consumer", "end_to_end", "latency", "signature", "tracing", "peers", "machine"
    }  # fmt: skip
    signature = document["signature"]
    assert signature["verify_us"] > 0 and signature["verify_during_rotation_us"] > 0
    assert signature["sign_us"] > 0 and signature["target_verify_us"] == 3.0
    for section in ("relay", "consumer", "end_to_end"):
        assert document[section]["events_per_s"] > 0
        assert document[section]["ceiling_events_per_s"] > 0
    consumer = document["consumer"]
    assert consumer["raw_xreadgroup_xack_events_per_s"] > 0
    assert consumer["raw_sqlite_batch_insert_events_per_s"] > 0
    check_ceilings_and_floors(document, output)
    check_cpu_per_event(document, output)
    assert document["end_to_end"]["relay_peak_rss_mb"] > 0
    assert document["end_to_end"]["consumer_peak_rss_mb"] > 0
    (latency,) = document["latency"].values()
    assert 0 < latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"]
    peers = document["peers"]
    assert set(peers) == {"naive", "rq_job_per_event", "jetstream"}
    assert peers["naive"]["events_per_s"] > 0 and peers["rq_job_per_event"]["events_per_s"] > 0
    assert "events_per_s" in peers["jetstream"] or "skipped" in peers["jetstream"]
    assert document["machine"]["cpus"] >= 1
    assert document["end_to_end"]["hub"] == latency["hub"] == "sqlite"
    assert "end to end (1 relay, 2 consumers, sqlite hub)" in output
    assert "peer: rq_job_per_event" in output
    assert "signature verify / sign (us per event)" in output
    tracing = document["tracing"]
    for stage, label in (
        ("append", "append_event"),
        ("relay", "relay drain"),
        ("consumer", "consumer ingest"),
    ):
        assert tracing[stage]["off_events_per_s"] > 0 and tracing[stage]["on_events_per_s"] > 0
        assert f"tracing off / on: {label}" in output


def check_ceilings_and_floors(document: dict[str, Any], output: str) -> None:
    """Every ceiling says what it is and omits, in the JSON and the table; the relay's is
    hiredis-packed, with redis-py's beside it; each stage has its servers' floor."""
    relay, consumer = document["relay"], document["consumer"]
    for section, ceiling in (
        (relay, ceilings.RELAY),
        (consumer, ceilings.CONSUMER),
        (document["end_to_end"], ceilings.END_TO_END),
    ):
        assert (section["ceiling"], section["ceiling_omits"]) == (ceiling.does, list(ceiling.omits))
        assert "; ".join(ceiling.omits) in output
    assert "hiredis" in relay["ceiling"] and "signature check" in consumer["ceiling_omits"]
    assert relay["redis_py_ceiling"]["ceiling"] == ceilings.RELAY_REDIS_PY.does
    assert relay["redis_py_ceiling_events_per_s"] > 0 and relay["redis_py_ratio"] > 0
    for section, commands in ((relay, ("xadd",)), (consumer, ("xreadgroup", "xack"))):
        floor = section["floor"]
        assert set(floor["redis_us_per_entry"]) == set(commands)
        assert all(floor["redis_all_commands_us_per_event"][name] > 0 for name in commands)
        assert floor["redis_server_cpu_us_per_event"] >= 0
        # the floor's commands, or the server's whole CPU when that is less (rounded to 0.001)
        assert 0 < floor["redis_us_per_event"] <= sum(floor["redis_us_per_entry"].values()) + 0.001
        assert floor["us_per_event"] > 0 and floor["events_per_s"] > 0
        assert floor["stage_ratio"] > 0
        assert "info" not in floor["redis_all_commands_us_per_event"]
    assert consumer["floor"]["sqlite_us_per_row"] > 0 and "sqlite_us_per_row" not in relay["floor"]
    assert "floor: Redis's XADD" in output and "what each ceiling omits:" in output


def check_cpu_per_event(document: dict[str, Any], output: str) -> None:
    """Each stage's CPU per event beside its raw ceiling's, and the end to end's beside the
    sum of the raw stages', with what it spends above them."""
    raw = 0.0
    for section in (document["relay"], document["consumer"]):
        for side in ("stage", "ceiling"):
            cpu = section["cpu_us_per_event"][side]
            assert cpu["client"] > 0 and cpu["redis"] > 0
            assert cpu["total"] == pytest.approx(cpu["client"] + cpu["redis"], abs=0.11)
        raw += section["cpu_us_per_event"]["ceiling"]["total"]
    e2e = document["end_to_end"]
    assert e2e["raw_stages_cpu_us_per_event"] == pytest.approx(raw, abs=0.11)
    total = sum(e2e["cpu_us_per_event"].values())
    assert e2e["cpu_us_per_event_all_processes"] == pytest.approx(total, abs=0.11)
    above = e2e["above_raw_stages_us_per_event"]
    assert above == pytest.approx(total - e2e["raw_stages_cpu_us_per_event"], abs=0.11)
    assert "end-to-end CPU us/event: all processes / raw stages" in output
    assert "consumer CPU us/event: stage / raw ceiling" in output


@pytest.mark.timeout(300)
def test_bench_scale_out_reports_every_setup_at_every_consumer_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document, output = run_bench(tmp_path, monkeypatch, scaleout, "--scale-out")
    assert set(document) == {"scale_out", "machine"}
    section = document["scale_out"]
    counts = list(scaleout.TINY.consumer_counts)
    assert (section["events"], section["relays"], section["consumer_counts"]) == (300, 1, counts)
    assert len(section["hub_projects"]) == scaleout.HUB_PROJECTS
    setups = section["setups"]
    assert set(setups) == {"single_sqlite", "single_postgresql", "cluster_sqlite"}
    postgres_here = postgres_bindir() is not None
    for name, setup in setups.items():
        if name == "single_postgresql" and not postgres_here:
            assert "initdb" in setup["skipped"]  # the reason, not figures
            continue
        assert "skipped" not in setup, (name, setup)
        assert [run["consumers"] for run in setup["runs"]] == counts
        for run in setup["runs"]:
            assert run["events"] == 300 and run["events_per_s"] > 0
            cpu = run["cpu_us_per_event"]
            assert len(cpu["consumer_each"]) == run["consumers"]
            assert cpu["consumers"] == pytest.approx(sum(cpu["consumer_each"]), abs=0.5)
            # CPU is counted in clock ticks (10 ms): at tiny sizes a server may show none
            assert cpu["relay"] > 0
            parts = cpu["relay"] + cpu["consumers"] + cpu["redis"] + cpu.get("postgres", 0.0)
            assert cpu["total"] == pytest.approx(parts, abs=0.2)  # every process counted once
            if "redis_replicas" in cpu:
                assert cpu["redis"] == pytest.approx(
                    cpu["redis_masters"] + cpu["redis_replicas"], abs=0.2
                )
            assert ("postgres" in cpu) == (name == "single_postgresql")
            assert ("redis_replicas" in cpu) == (name == "cluster_sqlite")
    assert setups["cluster_sqlite"]["masters_used"] == 3
    if postgres_here:
        settings = setups["single_postgresql"]["postgres_settings"]
        assert settings == {"fsync": "on", "synchronous_commit": "on"}
    assert [ratio["consumers"] for ratio in section["ratios"]] == counts
    for ratio in section["ratios"]:
        assert ratio["cluster_vs_single"] > 0 and ratio["cluster_vs_single_cpu"] > 0
        assert (ratio["postgresql_vs_sqlite"] is None) == (not postgres_here)
        assert (ratio["postgresql_vs_sqlite_cpu"] is None) == (not postgres_here)
    assert section["target_ratio"] == 0.7
    for title in (
        "redis-server + SQLite hub, 1 consumer",
        "Redis Cluster + SQLite hub, 2 consumers",
    ):
        assert title in output
    assert "ratio Redis Cluster / one redis-server, 2 consumers:" in output


def test_bench_help_names_its_options_which_read_no_environment_variable() -> None:
    result = CliRunner().invoke(cli, ["bench", "--help"])
    assert result.exit_code == 0
    for text in ("--quick", "--json", "--scale-out", "no environment variable", "Examples"):
        assert text in result.output
    assert "HUBSYNC_JSON" not in result.output


@pytest.mark.timeout(240)
def test_the_end_to_end_and_latency_runs_can_use_a_postgresql_hub(
    redis_url: str, postgres_url: str
) -> None:
    end_to_end = pipeline.measure_end_to_end(redis_url, 600, hub_url=postgres_url)
    assert (end_to_end["hub"], end_to_end["events"]) == ("postgresql", 600)
    assert end_to_end["events_per_s"] > 0
    latency = pipeline.measure_latency(redis_url, 500, 1.5, hub_url=postgres_url)
    assert latency["hub"] == "postgresql"
    assert 0 < latency["p50_ms"] <= latency["p99_ms"]
    # each run had a schema of its own, and dropped it: the database is as it was
    with psycopg.connect(postgres_url) as conn:
        schemas = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'hubsync_bench%'"
        ).fetchall()
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        assert (schemas, tables.fetchall()) == ([], [])


def test_bench_refuses_malformed_arguments_with_a_usage_error() -> None:
    for args in (
        ["bench", "--bogus"],
        ["bench", "--json"],
        ["bench", "--quick=maybe"],
        ["bench", "--hub-url", "sqlite:///hub.db"],
        ["bench", "--hub-url", "nonsense"],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output
