"""``hubsync status``: against a live pipeline it agrees with Redis and the hub database."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from consumers.stream.health import write_health
from hubsync.core import keys
from hubsync.core.entries import KIND_EVENT, decode_fields, entry_kind
from hubsync.core.redis_values import entry_id_ms, redis_now_ms
from hubsync.demo.embedded_redis import free_port
from hubsync.processes import Child, hubsync_command
from tests.helpers.operator_support import (
    HUB_PROJECT,
    NOT_A_DATABASE,
    LivePipeline,
    error_lines,
    run_cli,
)
from tests.helpers.support import wait_until


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[LivePipeline]:
    with LivePipeline(tmp_path, redis_url) as live:
        yield live


@pytest.fixture
def busy_pipeline(pipeline: LivePipeline) -> LivePipeline:
    """``LivePipeline.make_busy``: events stored, acked, conflicting, dead and in flight."""
    pipeline.make_busy()
    return pipeline


def status_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "status", "--json", *argv)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_status_json_agrees_with_redis_and_the_hub_database(
    capsys: pytest.CaptureFixture[str], busy_pipeline: LivePipeline
) -> None:
    p = busy_pipeline
    doc = status_json(capsys, *p.deployment_args)
    client = p.client
    [project] = doc["hub_projects"]
    assert project["hub_project"] == HUB_PROJECT
    assert project["length"] == client.xlen(p.events)
    [group_info] = client.xinfo_groups(p.events)
    summary = client.xpending(p.events, keys.CONSUMER_GROUP)
    group = project["group"]
    assert group["lag"] == group_info["lag"] and group["lag"] > 0
    assert group["entries_read"] == group_info["entries-read"]
    assert group["pending"] == summary["pending"] == 2
    assert group["oldest_pending_id"] == summary["min"].decode()
    assert group["oldest_pending_age_seconds"] >= 0
    consumers = {c["name"]: c["pending"] for c in group["consumers"]}
    assert consumers == {"ghost": 2, "hub-1": 0}
    [stream] = project["streams"]  # the hub's lag on each runtime's stream
    assert (stream["runtime_id"], stream["stream"]) == (p.runtime_id, p.events)
    assert stream["unstored"] == group["lag"] + group["pending"]
    assert stream["oldest_unstored_age_seconds"] >= group["oldest_pending_age_seconds"]
    assert project["dead_letters"] == client.xlen(keys.dead_stream(HUB_PROJECT)) == 1
    assert project["alerts"] == client.xlen(keys.alerts_stream(HUB_PROJECT)) == 1
    assert project["hub_db"] == {
        "events": p.hub_rows("sync_events"),
        "alerts": p.hub_rows("sync_alerts"),
    }
    assert project["hub_db"] == {"events": 6, "alerts": 1}
    [runtime] = project["runtimes"]
    assert (runtime["runtime_id"], runtime["stale"], runtime["source"]) == (
        p.runtime_id,
        False,
        "hub_db",
    )
    health = {(h["kind"], h["name"]) for h in doc["health"]}
    assert {("relay", p.runtime_id), ("consumer", "hub-1")} <= health
    [local] = doc["local"]["projects"]
    counts = p.store.outbox_counts()
    assert {k: local[k] for k in counts} == counts
    assert (local["acked"], local["pending"], local["attempted"]) == (6, 4, 4)
    assert local["oldest_pending_age_seconds"] >= 0
    assert doc["redis"]["reachable"] is True


def test_without_a_hub_database_runtimes_come_from_presence_beats_on_the_stream(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    pipeline.append("run-a", 2)
    pipeline.relay_once()  # events and a presence beat, not consumed yet
    doc = status_json(capsys, "--redis-url", pipeline.redis_url)
    [project] = doc["hub_projects"]
    [runtime] = project["runtimes"]
    assert runtime["runtime_id"] == pipeline.runtime_id
    assert runtime["source"] == "stream" and runtime["stale"] is False
    assert project["hub_db"] is None
    assert runtime["unstored"] is None, "no consumer has made group hub: Redis cannot tell"


def test_a_runtime_silent_longer_than_stale_after_is_flagged_stale(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    pipeline.relay_once()
    pipeline.consume_once()
    args = ["--redis-url", pipeline.redis_url, "--hub-db", str(pipeline.hub_db)]
    [fresh] = status_json(capsys, *args)["hub_projects"][0]["runtimes"]
    assert fresh["stale"] is False
    [stale] = status_json(capsys, *args, "--stale-after", "0")["hub_projects"][0]["runtimes"]
    assert stale["stale"] is True


def test_text_status_shows_every_section(
    capsys: pytest.CaptureFixture[str], busy_pipeline: LivePipeline
) -> None:
    p = busy_pipeline
    code, out, _ = run_cli(capsys, "status", *p.deployment_args)
    assert code == 0
    for title in (
        "hub projects",
        "consumers (group hub)",
        "runtimes",
        "health keys",
        "per runtime",
    ):
        assert title in out
    assert f"local outbox of runtime {p.runtime_id}" in out
    assert "ghost" in out


def test_state_dir_only_status_works_without_redis(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    pipeline.append("run-a", 3)
    code, out, _ = run_cli(
        capsys, "status", "--no-redis", "--state-dir", str(pipeline.state_dir), "--json"
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["redis"]["reachable"] is None and doc["hub_projects"] == []
    assert doc["local"]["projects"][0]["pending"] == 3


def test_unreachable_redis_prints_the_local_part_then_exits_3(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    pipeline.append("run-a", 1)
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    code, out, err = run_cli(
        capsys, "status", "--redis-url", nowhere, "--state-dir", str(pipeline.state_dir), "--json"
    )
    assert code == 3
    doc = json.loads(out)
    assert doc["redis"]["reachable"] is False and doc["local"]["projects"][0]["pending"] == 1
    code, out, err = run_cli(capsys, "status", "--redis-url", nowhere)
    assert code == 3 and out == ""
    assert len(err.strip().splitlines()) == 1 and "cannot reach Redis" in err


def test_redis_password_never_appears_in_status_output(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    nowhere = f"redis://operator:hunter2-secret@127.0.0.1:{free_port()}/0"
    code, out, err = run_cli(
        capsys, "status", "--redis-url", nowhere, "--state-dir", str(pipeline.state_dir), "--json"
    )
    assert code == 3
    assert "hunter2-secret" not in out + err


def test_watch_redraws_until_interrupted_and_exits_0(
    pipeline: LivePipeline, redis_client: redis.Redis, tmp_path: Path
) -> None:
    pipeline.relay_once()
    redis_client.config_resetstat()

    def redraws() -> int:
        stats = redis_client.info("commandstats").get("cmdstat_xinfo|stream", {})
        return int(stats.get("calls", 0))

    argv = hubsync_command(
        "status", "--watch", "--interval", "0.2", "--redis-url", pipeline.redis_url
    )
    watch = Child("status", argv, tmp_path / "status.log", stdout=tmp_path / "status.out").start()
    try:
        # One XINFO STREAM per snapshot: two mean the first table is drawn and it is redrawing.
        wait_until(lambda: redraws() >= 2, timeout=20, what="two snapshots")
        watch.signal(signal.SIGINT)
        code = watch.wait(timeout=20)
    finally:
        watch.kill()
    out, err = watch.output(), watch.log_text()
    assert code == 0, err
    assert "hub projects" in out and HUB_PROJECT in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--watch", "--json"],
        ["--watch", "--fail-on-stale"],
        ["--no-redis", "--state-dir", ".", "--fail-on-stale"],
        ["--interval", "0"],
        ["--interval", "soon"],
        ["--stale-after", "3 fortnights"],
        ["--hub-project", "bad{name}"],
        ["--hub-project", "never-seen"],
        ["--hub-db", "/nonexistent/hub.db"],
        ["--state-dir", "/nonexistent/state"],
        ["--no-redis"],
        ["--no-redis", "--state-dir", ".", "--hub-db", NOT_A_DATABASE],
        ["--hub-db", NOT_A_DATABASE],
    ],
)
def test_malformed_status_input_exits_2_with_one_error_line(
    capsys: pytest.CaptureFixture[str], redis_url: str, argv: list[str]
) -> None:
    code, out, err = run_cli(capsys, "status", "--redis-url", redis_url, *argv)
    assert code == 2, err
    assert out == ""
    assert len(error_lines(err)) == 1, err
    assert "Traceback" not in err


def row_of(out: str, *cells: str) -> str:
    """The one output line holding every one of ``cells``."""
    [row] = [line for line in out.splitlines() if all(cell in line for cell in cells)]
    return row


def test_the_backlog_of_a_runtime_is_labelled_with_the_age_of_the_beat_it_came_from(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    pipeline.append("run-a", 3)
    pipeline.relay_once()  # a beat while 3 wait to be sent
    pipeline.consume_once()
    pipeline.relay_once()  # the acks: the outbox has nothing pending now
    doc = status_json(capsys, *pipeline.deployment_args)
    [runtime] = doc["hub_projects"][0]["runtimes"]
    assert doc["local"]["projects"][0]["pending"] == 0

    code, out, _ = run_cli(capsys, "status", *pipeline.deployment_args)

    assert code == 0
    row = row_of(out, pipeline.runtime_id, "hub_db")
    assert re.search(rf"│ +{runtime['backlog']} \(\d+\.\ds ago\) │", row), row
    assert "backlog at beat" in out


def test_each_runtime_shows_the_hubs_lag_on_its_stream_beside_its_backlog(
    capsys: pytest.CaptureFixture[str], busy_pipeline: LivePipeline
) -> None:
    p = busy_pipeline  # run-c's 4 events and a beat on the stream: 2 pending in ghost, 3 unread
    before_ms = redis_now_ms(p.client)
    doc = status_json(capsys, *p.deployment_args)
    after_ms = redis_now_ms(p.client)

    [runtime] = doc["hub_projects"][0]["runtimes"]
    [group] = p.client.xinfo_groups(p.events)
    summary = p.client.xpending(p.events, keys.CONSUMER_GROUP)
    unread = p.client.xrange(p.events, min=f"({group['last-delivered-id'].decode()}")
    assert runtime["unstored"] == summary["pending"] + len(unread) == group["lag"] + 2 == 5
    # the oldest not stored is the oldest pending: everything before it was acked
    oldest_ms = entry_id_ms(summary["min"])
    age = runtime["oldest_unstored_age_seconds"]
    assert (before_ms - oldest_ms) / 1000 <= age <= (after_ms - oldest_ms) / 1000
    # the events among them are the rows the outbox waits for, and the hub store lacks
    unstored = [decode_fields(f) for _, f in p.client.xrange(p.events, min=summary["min"])]
    events = [f for f in unstored if entry_kind(f) == KIND_EVENT]
    appended = p.store.outbox_counts()["total"]
    assert len(events) == p.store.outbox_counts()["pending"] == 4
    assert appended - p.hub_rows("sync_events") == 4

    code, out, _ = run_cli(capsys, "status", *p.deployment_args)

    assert code == 0
    assert "unstored at hub" in out and "oldest unstored" in out
    row = row_of(out, p.runtime_id, "hub_db")
    backlog = runtime["backlog"]  # of the last beat the hub stored, before run-c
    assert re.search(rf"│ +{backlog} \([0-9.ms]+ ago\) │ +5 │ +[0-9.ms]+ │ +hub_db │", row), row


def test_consumers_are_counted_by_live_health_keys_and_members_without_one_are_dead(
    capsys: pytest.CaptureFixture[str], busy_pipeline: LivePipeline
) -> None:
    p = busy_pipeline  # hub-1 read and beat; ghost read and never beat
    write_health(p.client, "hub-2", ttl=60, stats={})  # started, has not read yet

    [project] = status_json(capsys, *p.deployment_args)["hub_projects"]

    assert project["live_consumers"] == ["hub-1", "hub-2"]
    alive = {c["name"]: c["alive"] for c in project["group"]["consumers"]}
    assert alive == {"ghost": False, "hub-1": True}
    code, out, _ = run_cli(capsys, "status", *p.deployment_args)
    assert code == 0  # reported, not judged, without --fail-on-stale
    assert "│ 2 live, 1 DEAD │" in row_of(out, f"│ {HUB_PROJECT} ", "│ 2 live")
    assert "│ DEAD " in row_of(out, "│ ghost ")
    assert "│ live " in row_of(out, "│ hub-1 ", "│ live")
    assert "│ live, no read yet │" in row_of(out, "│ hub-2 ", "no read yet")
    assert f"consumer ghost in group hub of {HUB_PROJECT}: dead" in out


def test_fail_on_stale_exits_1_for_a_stale_runtime_a_dead_consumer_or_no_consumer(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    args = ["status", *pipeline.deployment_args, "--fail-on-stale"]
    pipeline.relay_once()
    assert run_cli(capsys, *args).code == 1  # a project, and no consumer has ever run
    pipeline.consume_once()
    healthy = run_cli(capsys, *args)
    assert healthy.code == 0, healthy.out
    assert json.loads(run_cli(capsys, *args, "--json").out)["unhealthy"] == []

    stale = run_cli(capsys, *args, "--stale-after", "0", "--json")
    assert stale.code == 1
    [why] = json.loads(stale.out)["unhealthy"]
    assert why.startswith(f"runtime {pipeline.runtime_id} of hub project {HUB_PROJECT}: stale")

    pipeline.client.delete(keys.consumer_health("hub-1"))  # as a consumer that died leaves it
    dead = run_cli(capsys, *args)
    assert dead.code == 1
    assert f"consumer hub-1 in group hub of {HUB_PROJECT}: dead" in dead.out
    assert f"hub project {HUB_PROJECT}: no live consumer reads it" in dead.out


def test_piped_status_never_folds_a_cell_however_narrow_the_columns(
    capsys: pytest.CaptureFixture[str], busy_pipeline: LivePipeline
) -> None:
    p = busy_pipeline
    heartbeat = status_json(capsys, *p.deployment_args)["hub_projects"][0]["runtimes"][0]

    code, out, _ = run_cli(capsys, "status", *p.deployment_args, env={"COLUMNS": "50"})

    assert code == 0
    row = row_of(out, p.runtime_id, heartbeat["heartbeat"])  # the runtimes row, whole
    assert HUB_PROJECT in row and "hub_db" in row
    relay_row = row_of(out, "│ relay ", p.runtime_id)  # the health keys row, whole
    assert p.runtime_id in relay_row.split("│ relay ", 1)[1]  # on the row, after its role
    assert "┃ hub events ┃ hub alerts ┃" in out  # headers whole too
