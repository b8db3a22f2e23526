"""Several ``hubsync consume`` processes share one SQLite hub database: every event stored once,
none of them meets a locked database, each stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
from pathlib import Path

import redis

from consumers.views.queue_status import events_streams
from tests.helpers.consumer_support import Workers, count_rows, enroll_on
from tests.helpers.relay_player import send, sync_event
from tests.helpers.support import wait_until


def test_several_worker_processes_share_one_hub_database(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    hub_db = tmp_path / "hub.db"
    projects = ["alpha", "beta", "gamma"]
    enroll_on(hub_db, projects)
    for project in projects:
        for s in range(1, 401):
            send(redis_client, sync_event(s, project_id=f"p-{project}", hub_project=project))
    with Workers(tmp_path) as workers:
        procs = [workers.start(redis_url, hub_db, f"w{i}", "--batch-count", "50") for i in range(3)]
        wait_until(lambda: count_rows(hub_db) == 1200, timeout=60, interval=0.1, what="all rows")
        # on a loaded machine a worker may still be starting when the others are done;
        # SIGTERM before its handler is installed would kill it rather than stop it
        wait_until(lambda: all("started" in p.log_text() for p in procs), what="all started")
        for proc in procs:
            proc.signal(signal.SIGTERM)
        for proc in procs:
            assert proc.wait(timeout=20) == 0, proc.log_text()
            log = proc.log_text()
            assert "locked" not in log
            assert "stopped after" in log
    assert all(
        int(redis_client.xpending(stream, "hub")["pending"]) == 0
        for p in projects
        for stream in events_streams(redis_client, p)
    )
