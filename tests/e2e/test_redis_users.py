"""The whole pipeline with each process under its own Redis user, as ``hubsync acl`` writes it.

A private redis-server with the default user switched off: the relay, a
consumer and each operator command run as real processes under the user of
their role, and Redis refuses none of their commands but doctor's CONFIG GET;
the operator may not replay a dead letter, the replayer may; the dashboard reads
every page as the operator.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from hubstore.leases import LeaseClient
from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import keys
from hubsync.processes import PipelineProcesses, hubsync_command, run_hubsync
from producers.store.event_store import NewEvent
from tests.helpers import acl_support as acl
from tests.helpers.acl_support import acl_redis  # noqa: F401  (a fixture)
from tests.helpers.browser_support import http_status, served_dashboard
from tests.helpers.operator_support import garbage_event
from tests.helpers.relay_player import send_fields
from tests.helpers.relay_support import make_runtime


def test_each_daemon_and_operator_command_works_under_its_own_user(
    tmp_path: Path,
    acl_redis: tuple[str, redis.Redis],  # noqa: F811  (the fixture imported above)
) -> None:
    server_url, admin = acl_redis
    state_dir = tmp_path / "runtime" / "state"
    hub_db = tmp_path / "hub.db"
    registry, (store,) = make_runtime(state_dir, [acl.HUB_PROJECT], hub_db)
    runtime_id = registry.runtime_id
    store.append_events([NewEvent(f"run-{n % 3}", "step.completed", {"n": n}) for n in range(60)])
    roles = [["--runtime", runtime_id, "--hub-project", acl.HUB_PROJECT], ["--consumer"]]
    for argv in [*roles, ["--operator"], ["--replayer"]]:
        acl.apply_lines(admin, acl.hubsync_acl(tmp_path, *argv))
    runtime_url = acl.user_url(server_url, f"{acl.PREFIX}runtime-{runtime_id}")
    consumer_url = acl.user_url(server_url, f"{acl.PREFIX}consumer")
    operator_env = {"HUBSYNC_REDIS_URL": acl.user_url(server_url, f"{acl.PREFIX}operator")}
    replayer_env = {"HUBSYNC_REDIS_URL": acl.user_url(server_url, f"{acl.PREFIX}replayer")}
    # one unsigned entry, which the hub refuses: a dead letter (a forgery, never replayed) and
    # a security alert the consumer's user must be allowed to raise; and one signed entry
    # whose bytes are no JSON: a dead letter to replay
    send_fields(admin, acl.HUB_PROJECT, {"kind": "event", "note": "not an event"}, runtime_id)
    garbage = garbage_event(store.project_id, runtime_id, hub_project=acl.HUB_PROJECT)
    send_fields(admin, acl.HUB_PROJECT, garbage, runtime_id)
    LeaseClient(admin).acquire_or_raise("effect:pr:1", "box-1:1", 60_000)  # for lease list

    fast = ("--block-ms", "100", "--reclaim-interval", "0.5")
    with PipelineProcesses(runtime_url, tmp_path / "logs") as pipeline:
        pipeline.start("relay", hubsync_command("relay", "--state-dir", str(state_dir)))
        pipeline.start(
            "consumer",
            hubsync_command("consume", "--hub-db", str(hub_db), "--name", "hub-1", *fast),
            env={"HUBSYNC_REDIS_URL": consumer_url},
        )
        pipeline.wait_until(
            lambda: store.outbox_counts()["acked"] == 60, timeout=60, what="every row acked"
        )
        pipeline.wait_until(
            lambda: admin.xlen(keys.dead_stream(acl.HUB_PROJECT)) == 2,
            timeout=30,
            what="the letters",
        )
        status = run_hubsync(["status", "--json"], env=operator_env)
        dead_list = run_hubsync(
            ["dead", "list", "--hub-project", acl.HUB_PROJECT], env=operator_env
        )
        lease_list = run_hubsync(["lease", "list"], env=operator_env)
        alerts = run_hubsync(["alerts", "list"], env=operator_env)
        doctor = run_hubsync(["doctor"], env=operator_env)
        with served_dashboard(tmp_path, "--hub-db", str(hub_db), env=operator_env) as base:
            pages = [
                http_status(base + path)
                for path in ("/", "/live", f"/dead?project={acl.HUB_PROJECT}")
            ]
        # everything above ran within its grants: Redis refused only doctor's CONFIG GET
        refusals = {(e[b"username"], e[b"object"]) for e in admin.execute_command("ACL", "LOG")}
        assert refusals == {(b"t-operator", b"config|get")}

        replay_refused = run_hubsync(
            ["dead", "replay", "--hub-project", acl.HUB_PROJECT, "--all"], env=operator_env
        )
        replayed = run_hubsync(
            ["dead", "replay", "--hub-project", acl.HUB_PROJECT, "--all"], env=replayer_env
        )
        codes = pipeline.stop_all()
    assert codes == {"relay": 0, "consumer": 0}, codes

    with SqliteHubStore(hub_db) as hub:
        assert hub.count_events() == 60
    for done in (status, dead_list, lease_list, alerts):
        assert done.returncode == 0, done.stderr
    shown = json.loads(status.stdout)
    assert [p["dead_letters"] for p in shown["hub_projects"]] == [2]
    assert {h["kind"] for h in shown["health"]} == {"relay", "consumer"}
    assert "showing 2 of 2 dead letter(s)" in dead_list.stdout
    assert "effect:pr:1" in lease_list.stdout
    assert "1 alert(s)" in alerts.stdout and "unauthenticated" in alerts.stdout, alerts.stdout
    assert pages == [200, 200, 200]  # the dashboard reads what status, dead, alerts, lease do
    assert "ok   consumer-group" in doctor.stdout
    assert "NOPERM" not in doctor.stdout + doctor.stderr, doctor.stdout
    assert replay_refused.returncode == 1 and "no permissions" in replay_refused.stderr
    assert replay_refused.stderr.startswith("error: Redis refused a command")
    assert "Traceback" not in replay_refused.stderr
    assert replayed.returncode == 0 and "replayed 1" in replayed.stdout, replayed.stdout

    operator = redis.Redis.from_url(operator_env["HUBSYNC_REDIS_URL"])
    with pytest.raises(redis.exceptions.NoPermissionError):
        operator.xadd(keys.events_stream(acl.HUB_PROJECT, runtime_id), {"kind": "event"})
    operator.close()
    runtime = redis.Redis.from_url(runtime_url)
    with pytest.raises(redis.exceptions.NoPermissionError):
        runtime.xtrim(keys.events_stream(acl.HUB_PROJECT, runtime_id), maxlen=0)
    runtime.close()
