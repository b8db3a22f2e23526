"""One unreadable project never stops the others: the relay and status with real broken files."""

from __future__ import annotations

import json
import logging
import urllib.request
from pathlib import Path

import pytest
import redis

from hubsync.core import keys
from hubsync.core.metrics import RELAY_REGISTRY
from hubsync.demo.embedded_redis import free_port
from hubsync.processes import run_hubsync
from producers.registry import RuntimeRegistry
from producers.relay import Relay
from producers.relay.project_states import RETRY_CAP, ProjectStates
from producers.store.event_store import RunEventStore
from tests.helpers.broken_stores import BREAKERS, BrokenStore, garbage_bytes
from tests.helpers.clock import FakeClock
from tests.helpers.hub_double import ack_everything, stream_events
from tests.helpers.operator_support import run_cli
from tests.helpers.relay_support import make_runtime, relay_settings, start_relay_process
from tests.helpers.support import wait_until

STATES_LOGGER = "producers.relay.project_states"


def two_projects(
    state_dir: Path, healthy_events: int = 3
) -> tuple[RuntimeRegistry, RunEventStore, RunEventStore]:
    """A runtime with ``alpha`` (events appended, open) and ``beta`` (one event, closed)."""
    registry, (alpha, beta) = make_runtime(state_dir, ["alpha", "beta"])
    for index in range(healthy_events):
        alpha.append_event("run-0", "step.completed", {"step": f"s{index}"})
    beta.append_event("run-0", "step.completed", {"step": "waiting"})
    beta.close()
    return registry, alpha, beta


def unreadable_gauge(project_id: str) -> float | None:
    return RELAY_REGISTRY.get_sample_value(
        "hubsync_relay_project_unreadable", {"project": project_id}
    )


# ----- the retry schedule ---------------------------------------------------


def test_an_unreadable_project_is_retried_on_the_one_backoff_capped_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(start=1000.0)
    states = ProjectStates("relay rt-1", clock=clock)
    assert states.due("p1"), "a project never tried is due at once"
    with caplog.at_level(logging.INFO, logger=STATES_LOGGER):
        waits = []
        for _ in range(12):
            states.failed("p1", "schema version 99")
            assert not states.due("p1")
            waits.append(states.retry_in("p1"))
            clock.advance(RETRY_CAP)
            assert states.due("p1")
        assert waits[0] <= 1.0 and waits[1] <= 2.0
        assert max(waits) <= RETRY_CAP and waits[-1] >= RETRY_CAP / 2
        assert states.unreadable() == {"p1": "schema version 99"}
        assert unreadable_gauge("p1") == 1
        states.readable("p1")
        states.readable("p1")
    assert states.unreadable() == {} and states.due("p1")
    assert unreadable_gauge("p1") == 0
    lines = [r.getMessage() for r in caplog.records if r.name == STATES_LOGGER]
    assert len(lines) == 2, lines
    assert "p1" in lines[0] and "unreadable" in lines[0] and "schema version 99" in lines[0]
    assert "readable again" in lines[1]


def test_a_new_reason_for_an_unreadable_project_is_logged_once_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    states = ProjectStates("relay rt-1", clock=FakeClock())
    with caplog.at_level(logging.INFO, logger=STATES_LOGGER):
        states.failed("p1", "file is not a database")
        states.failed("p1", "file is not a database")
        states.failed("p1", "schema version 99")
    assert len([r for r in caplog.records if r.name == STATES_LOGGER]) == 2


# ----- the relay, in process ------------------------------------------------


@pytest.mark.parametrize("how", sorted(BREAKERS))
def test_once_sends_every_healthy_project_then_exits_1_naming_the_unreadable_one(
    how: str, tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    _, _alpha, beta = two_projects(state_dir)
    BrokenStore(beta.path, how)
    result = run_hubsync(
        ["relay", "--state-dir", str(state_dir), "--redis-url", redis_url, "--once", "--json"]
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert len(stream_events(redis_client, "alpha")) == 3, "the healthy project was sent"
    assert stream_events(redis_client, "beta") == []
    summary = json.loads(result.stdout)
    assert summary["sent"] == 3 and summary["projects"] == 1
    assert list(summary["unreadable"]) == [beta.project_id]
    assert str(beta.path) in summary["unreadable"][beta.project_id]
    error = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(error) == 1 and beta.project_id in error[0]


def test_acks_for_a_healthy_project_are_applied_beside_an_unreadable_one(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    registry, alpha, beta = two_projects(state_dir)
    BrokenStore(beta.path, "other_schema_version")
    relay = Relay(relay_settings(state_dir, redis_url), registry)
    relay.run_once()
    ack_everything(redis_client, "alpha")
    summary = relay.run_once()
    relay.close()
    assert alpha.outbox_counts()["acked"] == 3 and alpha.outbox_counts()["pending"] == 0
    assert relay.ack_stats.acked == 3 and relay.ack_stats.unknown == 0
    assert set(summary.unreadable) == {beta.project_id}
    assert unreadable_gauge(beta.project_id) == 1
    assert unreadable_gauge(alpha.project_id) == 0


def test_a_store_that_turns_to_garbage_while_open_is_set_aside_and_the_rest_keep_syncing(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    registry, alpha, beta = two_projects(state_dir)
    relay = Relay(relay_settings(state_dir, redis_url), registry)
    assert relay.run_once().unreadable == {}
    assert len(stream_events(redis_client, "beta")) == 1
    garbage_bytes(beta.path)
    alpha.append_event("run-1", "step.completed", {"step": "after"})
    summary = relay.run_once()
    relay.close()
    assert len(stream_events(redis_client, "alpha")) == 4
    assert set(summary.unreadable) == {beta.project_id}


def test_a_fixed_store_is_picked_up_when_its_retry_falls_due_without_a_restart(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    state_dir = tmp_path / "state"
    registry, _alpha, beta = two_projects(state_dir)
    broken = BrokenStore(beta.path, "garbage_bytes")
    clock = FakeClock()
    states = ProjectStates(f"relay {registry.runtime_id}", clock=clock)
    relay = Relay(relay_settings(state_dir, redis_url), registry, project_states=states)
    with caplog.at_level(logging.INFO, logger=STATES_LOGGER):
        assert set(relay.run_once().unreadable) == {beta.project_id}
        broken.restore()
        assert set(relay.run_once().unreadable) == {beta.project_id}, "not retried before due"
        clock.advance(1.0)
        assert relay.run_once().unreadable == {}
    relay.close()
    assert len(stream_events(redis_client, "beta")) == 1
    lines = [r.getMessage() for r in caplog.records if r.name == STATES_LOGGER]
    assert len(lines) == 2 and "readable again" in lines[1], lines


# ----- status ---------------------------------------------------------------


@pytest.mark.parametrize("how", sorted(BREAKERS))
def test_status_without_redis_shows_the_healthy_project_and_the_unreadable_one_with_its_reason(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = tmp_path / "state"
    _, alpha, beta = two_projects(state_dir)
    BrokenStore(beta.path, how)
    code, out, err = run_cli(
        capsys, "status", "--no-redis", "--state-dir", str(state_dir), "--json"
    )
    assert code == 0, err
    projects = {p["project_id"]: p for p in json.loads(out)["local"]["projects"]}
    healthy, broken = projects[alpha.project_id], projects[beta.project_id]
    assert healthy["state"] == "ok" and healthy["pending"] == 3 and healthy["reason"] is None
    assert broken["state"] == "unreadable" and str(beta.path) in broken["reason"]
    counts = ("pending", "attempted", "acked", "conflict", "rejected", "total")
    assert all(broken[name] is None for name in counts), "never shown as empty"

    code, out, err = run_cli(capsys, "status", "--no-redis", "--state-dir", str(state_dir))
    assert code == 0, err
    flat = " ".join(out.split())
    assert "unreadable" in flat and beta.project_id in flat


def test_status_says_a_store_not_created_yet_has_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = RuntimeRegistry(tmp_path / "state")
    root = tmp_path / "project"
    root.mkdir()
    registration = registry.register_project(root, hub_project="alpha")
    registry.close()
    code, out, _ = run_cli(
        capsys, "status", "--no-redis", "--state-dir", str(tmp_path / "state"), "--json"
    )
    assert code == 0
    [project] = json.loads(out)["local"]["projects"]
    assert project["project_id"] == registration.project_id
    assert project["state"] == "no_store" and project["total"] == 0


# ----- the daemon -----------------------------------------------------------


def test_a_running_relay_syncs_beside_a_broken_project_and_picks_it_up_once_fixed(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    registry, alpha, beta = two_projects(state_dir, healthy_events=1)
    broken = BrokenStore(beta.path, "other_schema_version")
    port = free_port()
    process = start_relay_process(
        state_dir, redis_url, "--metrics-port", str(port), "--presence-interval", "3600"
    )
    log = state_dir / "relay.log"
    try:
        wait_until(lambda: len(stream_events(redis_client, "alpha")) == 1, what="alpha synced")
        alpha.append_event("run-0", "step.completed", {"step": "while beta is broken"})
        wait_until(lambda: len(stream_events(redis_client, "alpha")) == 2, what="a new commit")
        wait_until(lambda: "unreadable" in log.read_text(), what="the unreadable project logged")
        health = wait_until(
            lambda: json.loads(
                redis_client.get(keys.relay_health(registry.runtime_id)) or "{}"
            ).get("unreadable_projects"),
            what="the health key counting the unreadable project",
        )
        assert health == 1
        check = run_hubsync(
            ["relay", "--state-dir", str(state_dir), "--redis-url", redis_url, "--check"]
        )
        assert check.returncode == 0, "the daemon is healthy; the project is what is bad"
        assert "1 project unreadable" in check.stdout
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            scrape = response.read().decode()
        assert f'hubsync_relay_project_unreadable{{project="{beta.project_id}"}} 1.0' in scrape
        status = run_hubsync(["status", "--no-redis", "--state-dir", str(state_dir), "--json"])
        states = {
            p["project_id"]: p["state"] for p in json.loads(status.stdout)["local"]["projects"]
        }
        assert states == {alpha.project_id: "ok", beta.project_id: "unreadable"}

        broken.restore()
        wait_until(
            lambda: len(stream_events(redis_client, "beta")) == 1,
            timeout=30,
            what="the fixed project synced without a restart",
        )
        assert process.alive
        wait_until(lambda: "readable again" in log.read_text(), what="the recovery logged")
    finally:
        assert process.stop(timeout=30) == 0
    text = log.read_text()
    assert text.count(f"project {beta.project_id} unreadable") == 1, text
    assert text.count(f"project {beta.project_id} readable again") == 1, text
