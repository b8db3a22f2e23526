"""``hubsync demo``: the README's first command runs end to end and checks its invariants."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis

from hubsync.demo.embedded_redis import RedisServerProcess

DEMO = [sys.executable, "-m", "hubsync.cli.main", "demo"]


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSYNC_")}
    env.pop("REDIS_URL", None)
    return subprocess.run(
        [*DEMO, "--runs-per-runtime", "2", "--events-per-run", "60", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("embedded", ["redis-server", "fakeredis"])
def test_demo_runs_the_pipeline_end_to_end_and_every_invariant_holds(embedded: str) -> None:
    result = run_demo("--embedded", embedded, "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout)
    assert summary["ok"] is True
    assert summary["events_produced"] == summary["events_in_hub"] == 3 * 2 * 60
    assert summary["outbox_acked"] == summary["events_produced"]
    assert summary["conflicts"] == 1 and summary["dead_letters"] == 1
    assert summary["secrets_found"] == 0
    assert summary["lease"]["token_b"] > summary["lease"]["token_a"]
    assert summary["lease"]["stale_attempt_state"] == "blocked_uncertain"
    assert all(check["held"] for check in summary["invariants"])


def test_demo_prints_a_summary_table_and_the_redis_cli_commands() -> None:
    result = run_demo()
    assert result.returncode == 0, result.stderr[-2000:]
    assert "events in the hub" in result.stdout
    assert "secrets found in hub, Redis, state, logs" in result.stdout
    assert "redis-cli -u redis://127.0.0.1:" in result.stdout
    assert "FAIL" not in result.stdout


def test_demo_refuses_bad_arguments_with_a_usage_error() -> None:
    result = run_demo("--events-per-run", "0")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    keep_fake = run_demo("--embedded", "fakeredis", "--keep")
    assert keep_fake.returncode == 2 and "--keep needs a redis-server" in keep_fake.stderr


def test_demo_on_a_given_redis_keeps_its_password_out_of_output_and_command_lines(
    private_redis: RedisServerProcess,
) -> None:
    password = "demo-pass-" + "7" * 12
    redis.Redis.from_url(private_redis.url).config_set("requirepass", password)
    url = f"redis://:{password}@127.0.0.1:{private_redis.port}/0"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSYNC_")}
    env["HUBSYNC_REDIS_URL"] = url
    result = subprocess.run(
        [*DEMO, "--runs-per-runtime", "1", "--events-per-run", "30"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"127.0.0.1:{private_redis.port}" in result.stdout
    assert password not in result.stdout + result.stderr
