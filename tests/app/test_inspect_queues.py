"""``scripts/inspect-queues.sh`` run with REDIS_URL against a populated pipeline."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hubstore.leases import LeaseClient
from hubsync.core import keys
from hubsync.core.connections import RedisTarget, connect
from hubsync.demo.embedded_redis import free_port
from hubsync.processes import child_environment
from tests.helpers.operator_support import HUB_PROJECT, LivePipeline
from tests.helpers.support import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "inspect-queues.sh"

pytestmark = pytest.mark.skipif(shutil.which("redis-cli") is None, reason="needs redis-cli")


def inspect(
    redis_url: str | None, *args: str, hubsync_redis_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = child_environment()
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
    if hubsync_redis_url is not None:
        env["HUBSYNC_REDIS_URL"] = hubsync_redis_url
    return subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[LivePipeline]:
    with LivePipeline(tmp_path, redis_url) as live:
        live.make_busy()
        yield live


def test_it_shows_stream_group_consumers_pending_dead_letters_alerts_and_a_lease(
    pipeline: LivePipeline,
) -> None:
    leases = LeaseClient(connect(RedisTarget(pipeline.redis_url)))
    leases.acquire("repo/main", "box-a", ttl_ms=60_000)
    result = inspect(pipeline.redis_url, HUB_PROJECT, "repo/main")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for command in (
        f"XINFO STREAM {pipeline.events}",
        f"XINFO GROUPS {pipeline.events}",
        f"XINFO CONSUMERS {pipeline.events} hub",
        f"XPENDING {pipeline.events} hub",
        f"XPENDING {pipeline.events} hub - + 1",
        f"XRANGE {keys.dead_stream(HUB_PROJECT)} - + COUNT 10",
        f"XRANGE {keys.alerts_stream(HUB_PROJECT)} - + COUNT 10",
        f"HGETALL {keys.lease('repo/main')}",
        f"XREVRANGE {keys.lease_log('repo/main')} + - COUNT 10",
    ):
        assert f"> redis-cli -u {pipeline.redis_url} {command}\n" in out, command
    lines = out.splitlines()
    assert "ghost" in lines and "hub-1" in lines  # XINFO CONSUMERS and the oldest pending entry
    assert "entries-read" in lines and "lag" in lines
    assert "bad_json" in lines  # the dead letter's reason
    assert "sequence_reused" in lines  # the alert's reason
    assert "box-a" in lines  # the lease holder
    oldest = lines.index(
        f"> redis-cli -u {pipeline.redis_url} XPENDING {pipeline.events} hub - + 1"
    )
    assert lines[oldest + 2] == "ghost"  # id, consumer, idle ms, deliveries


def test_bad_arguments_exit_2_and_an_unreachable_redis_exits_3(redis_url: str) -> None:
    assert inspect(redis_url).returncode == 2
    bad = inspect(redis_url, "bad{name}")
    assert bad.returncode == 2 and bad.stdout == "" and "invalid hub project" in bad.stderr
    down = inspect(f"redis://user:hunter2-secret@127.0.0.1:{free_port()}/0", HUB_PROJECT)
    assert down.returncode == 3
    assert "cannot reach Redis" in down.stderr and "hunter2-secret" not in down.stderr


def test_hubsync_redis_url_wins_over_redis_url_as_in_the_cli(redis_url: str) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    result = inspect(dead, HUB_PROJECT, hubsync_redis_url=redis_url)
    assert result.returncode == 0, result.stderr
    assert f"> redis-cli -u {redis_url} SISMEMBER hubsync:projects {HUB_PROJECT}\n" in result.stdout
    assert dead not in result.stdout


def test_echoed_commands_carry_the_url_with_its_password_masked(redis_url: str) -> None:
    # the session's server has no password, so AUTH as "default" with any password succeeds
    with_password = redis_url.replace("redis://", "redis://default:hunter2-secret@")
    result = inspect(with_password, HUB_PROJECT)
    assert result.returncode == 0, result.stderr
    masked = redis_url.replace("redis://", "redis://default:****@")
    assert f"> redis-cli -u {masked} XLEN {keys.dead_stream(HUB_PROJECT)}\n" in result.stdout
    assert "hunter2-secret" not in result.stdout + result.stderr
