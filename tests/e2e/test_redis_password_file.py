"""Daemons authenticate with a password kept off their command line.

A private redis-server with ``requirepass``: the relay and a consumer, each a
real process, get a URL without password and ``--redis-password-file``; the
pipeline drains, and neither process's ``/proc/<pid>/cmdline`` holds the
password, nor its log a word of it.
"""

from __future__ import annotations

from pathlib import Path

from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.processes import Child, hubsync_command
from tests.helpers.consumer_support import hub_rows
from tests.helpers.redis_auth import (
    PASSWORD,
    cmdline,
    requiring_password,
    write_password_file,
)
from tests.helpers.relay_support import append_many, make_runtime
from tests.helpers.support import wait_until


def test_relay_and_consumer_authenticate_from_a_password_file_kept_off_argv(
    tmp_path: Path, private_redis: RedisServerProcess
) -> None:
    password_file = write_password_file(tmp_path)
    with requiring_password(private_redis) as locked_redis:
        state_dir = tmp_path / "state"
        hub_db = tmp_path / "hub.db"
        registry, (store,) = make_runtime(state_dir, ["acme"], hub_db)
        append_many(store, runs=2, per_run=5)
        store.close()
        registry.close()
        secret = ["--redis-password-file", str(password_file)]
        relay = Child(
            "relay",
            hubsync_command(
                "relay", "--state-dir", str(state_dir), "--redis-url", locked_redis, *secret
            ),
            tmp_path / "relay.log",
        )
        consumer = Child(
            "consumer",
            hubsync_command("consume", "--hub-db", str(hub_db), "--name", "hub-1", *secret),
            tmp_path / "consumer.log",
            env={"HUBSYNC_REDIS_URL": locked_redis},
        )
        relay.start()
        consumer.start()
        try:
            wait_until(
                lambda: hub_rows(hub_db) == 10, timeout=60, what="the hub to store 10 events"
            )
            relay.check()
            consumer.check()
            for child in (relay, consumer):
                assert PASSWORD.encode() not in cmdline(child.pid)
                assert locked_redis.encode() in cmdline(child.pid) or child is consumer
        finally:
            relay.stop()
            consumer.stop()
        for child in (relay, consumer):
            assert PASSWORD not in child.log_text()
            assert "password" not in child.log_text().lower()  # no warning: nothing on argv
