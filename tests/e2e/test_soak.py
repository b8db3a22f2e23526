"""The chaos soak: the pipeline's invariants hold under crashes, stalls, restarts and forgeries.

Real processes on a private redis-server with AOF everysec: 3 runtimes
appending continuously (secrets planted in their payloads), one relay each,
3 hub consumers with a short reclaim time, and a seeded fault scheduler
(``tests.helpers.chaos``) that injects through ``hubsync.faults.inject`` (the demo's
injector). Once everything has drained, ``hubsync.faults.invariants`` (the demo's checks,
through ``tests.helpers.chaos_checks``) proves:
no loss, no duplicate, conflicts alerted, forged acks ignored, forgeries refused (dead-lettered as
unauthenticated, alerted, no runtime told), garbage dead-lettered, no secret
anywhere. The figures are printed (run with ``-s`` to see them).

``HUBSYNC_SOAK_SECONDS`` sets how long faults are injected (short version in
the normal suite: 45 s by default; the slow version: 600 s, run by
``scripts/soak.sh``); ``HUBSYNC_SOAK_SEED`` replays a fault schedule.
``HUBSYNC_SOAK_HUB=postgres`` puts the hub in PostgreSQL (the tests' server:
a private one, or ``HUBSYNC_TEST_POSTGRES_URL``'s) instead of a SQLite file,
and ``HUBSYNC_SOAK_REDIS=cluster`` the pipeline on a private Redis Cluster
(3 masters with a replica each; the Redis fault is then a master killed -9,
failed over, and brought back as a replica) instead of one redis-server.
The short soak of the normal suite runs on one redis-server and SQLite unless
those are set; its variant on PostgreSQL and a cluster is marked slow.
"""

from __future__ import annotations

import json
import os
import random
import time
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hubstore import open_store
from hubsync.core.connections import RedisTarget, connect
from hubsync.faults.inject import FaultInjector
from hubsync.faults.local import drained
from tests.helpers import chaos_checks as checks
from tests.helpers.chaos import FaultScheduler, SoakCluster, wait_for
from tests.helpers.support import require_redis_server

RECLAIM_IDLE = 3.0
RATE_PER_RUNTIME = 120.0
DRAIN_TIMEOUT = 180.0


def soak_seconds(default: float) -> float:
    """The fault window: ``HUBSYNC_SOAK_SECONDS`` or ``default``."""
    return float(os.environ.get("HUBSYNC_SOAK_SECONDS", default))


@dataclass(frozen=True)
class SoakSetup:
    """Where the soak's pipeline runs: its hub store and its Redis."""

    hub: str = "sqlite"
    """``sqlite`` (a file in the soak's dir) or ``postgres``."""
    redis: str = "single"
    """``single`` (one redis-server) or ``cluster``."""

    @classmethod
    def from_environment(cls) -> SoakSetup:
        """``HUBSYNC_SOAK_HUB`` and ``HUBSYNC_SOAK_REDIS``, checked."""
        setup = cls(
            os.environ.get("HUBSYNC_SOAK_HUB") or "sqlite",
            os.environ.get("HUBSYNC_SOAK_REDIS") or "single",
        )
        if setup.hub not in ("sqlite", "postgres") or setup.redis not in ("single", "cluster"):
            pytest.fail(
                f"HUBSYNC_SOAK_HUB={setup.hub!r} HUBSYNC_SOAK_REDIS={setup.redis!r}: expected "
                "sqlite or postgres, and single or cluster"
            )
        return setup


def soak_cluster(
    base: Path, seed: int, setup: SoakSetup, request: pytest.FixtureRequest
) -> SoakCluster:
    """The soak's processes and files in ``base``, on ``setup``'s hub store and Redis."""
    hub_url = ""
    hub_directories: tuple[Path, ...] = ()
    if setup.hub == "postgres":
        hub_url = request.getfixturevalue("postgres_url")
        server = request.getfixturevalue("postgres_server")
        hub_directories = (server.directory,) if server.directory is not None else ()
    return SoakCluster(
        base,
        seed,
        RATE_PER_RUNTIME,
        RECLAIM_IDLE,
        hub_url=hub_url,
        redis_cluster=setup.redis == "cluster",
        hub_directories=hub_directories,
    )


def appender_figures(appenders: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """How much the appenders appended, how fast, and their slowest appends."""
    appended = sum(int(a["appended"]) for a in appenders)
    return {
        "appended": appended,
        "append_rate_per_s": round(appended / seconds),
        "append_p99_ms_worst": max(float(a["append_p99_ms"]) for a in appenders),
        "append_max_ms_worst": max(float(a["append_max_ms"]) for a in appenders),
    }


def run_soak(
    base: Path, seconds: float, setup: SoakSetup, request: pytest.FixtureRequest
) -> dict[str, Any]:
    """Run the whole soak in ``base``; the figures (raises AssertionError on a broken invariant,
    when nothing was appended, or when a kind of fault was never injected)."""
    require_redis_server()
    seed = int(os.environ.get("HUBSYNC_SOAK_SEED", random.randrange(10**6)))
    print(
        f"\nchaos soak: seed {seed}, {seconds:.0f}s of faults, {setup.hub} hub, "
        f"{setup.redis} Redis, in {base}"
    )
    rng = random.Random(seed)
    cluster = soak_cluster(base, seed, setup, request)
    scheduler: FaultScheduler | None = None
    stack = ExitStack()  # the Redis client and the hub store the injector and checks share
    figures: dict[str, Any] = {
        "seed": seed,
        "fault_seconds": seconds,
        "hub": setup.hub,
        "redis": setup.redis,
    }
    try:
        cluster.start()
        client = stack.enter_context(closing(connect(RedisTarget(cluster.redis_url))))
        hub = stack.enter_context(open_store(cluster.hub_url, create_schema=False))
        injector = FaultInjector(client, hub, cluster.hub_id, list(cluster.runtimes), rng)
        scheduler = FaultScheduler(cluster, injector, rng)
        started = time.monotonic()
        scheduler.run(seconds)
        # Restore first: a relay still SIGSTOPped may hold its project store's write lock,
        # which its appender would wait on past the time it is given to stop.
        scheduler.finish()
        appenders = cluster.stop_appending()
        cluster.ensure_running()
        drain_started = time.monotonic()
        wait_for(lambda: drained(client, cluster.runtimes), DRAIN_TIMEOUT, "the pipeline to drain")
        figures["drain_seconds"] = round(time.monotonic() - drain_started, 1)
        figures["total_seconds"] = round(time.monotonic() - started, 1)
        exits = cluster.stop_daemons()
        figures |= appender_figures(appenders, seconds)
        figures["faults"] = dict(sorted(scheduler.counts.items()))
        figures["duplicates_injected"] = injector.record.duplicated
        figures["restarts"] = {c.name: c.starts - 1 for c in cluster.children() if c.starts > 1}
        figures |= checks.check_everything(cluster, injector, client)
        assert figures["outbox_rows"] > 0, "nothing was appended"
        required = (*FaultInjector.KINDS, "exhaust_stream", "restore_hub")
        unused = [k for k in required if not scheduler.counts[k]]
        assert not unused, f"faults never injected: {unused}"
        stack.close()
        cluster.redis.stop()
        figures["redis_dir_bytes_scanned"] = checks.check_no_secret_on_disk_of_redis(cluster)
        # Killed processes exit -9; a clean SIGTERM stop is 0 for every live one.
        assert all(code == 0 for code in exits.values()), f"daemon exit codes: {exits}"
        return figures
    finally:
        for line in scheduler.log if scheduler is not None else ():
            print(f"  fault {line}")
        stack.close()
        cluster.teardown()
        print(json.dumps(figures, indent=1, sort_keys=True))


@pytest.mark.timeout(600)
def test_chaos_soak_short_loses_nothing_duplicates_nothing_and_leaks_nothing(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    run_soak(tmp_path, soak_seconds(45), SoakSetup.from_environment(), request)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_chaos_soak_short_on_postgres_and_a_cluster_loses_nothing_and_leaks_nothing(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    figures = run_soak(tmp_path, soak_seconds(45), SoakSetup("postgres", "cluster"), request)
    assert figures["faults"].get("restart_redis", 0) >= 1, "no master was failed over"


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_chaos_soak_long_loses_nothing_duplicates_nothing_and_leaks_nothing(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    run_soak(tmp_path, soak_seconds(600), SoakSetup.from_environment(), request)
