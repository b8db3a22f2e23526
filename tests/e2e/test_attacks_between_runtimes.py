"""Attacks by the holder of one runtime's key on another runtime's project, replayed as the Redis
users ``hubsync acl`` prints, on a private ACL-enabled redis-server, against the real
``hubsync relay --once`` and ``hubsync consume --once``.

rt-a and rt-b are both enrolled for hub project acme; rt-b's project is rt-b's
since its first event. The attacker has rt-a's key and rt-a's Redis user: it
writes a fake ``approval.granted`` run into rt-b's project, squats the run id
rt-b will use next, and floods the stream with forgeries under thousands of
keys. None of it lands; rt-b hears nothing of it; rt-b's own events are
accepted and acknowledged and nothing of rt-b is parked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import entries, keys
from hubsync.core.wire import SyncEvent
from hubsync.processes import run_hubsync
from tests.helpers import acl_support as acl
from tests.helpers.acl_support import acl_redis  # noqa: F401  (a fixture)
from tests.helpers.consumer_support import consume_once
from tests.helpers.relay_player import entry_fields, sync_event

HUB_PROJECT = acl.HUB_PROJECT
SQUATTED = "nightly-2026-12-02"


class Runtime(acl.EnrolledRuntime):
    """One runtime, connecting as its own Redis user."""

    def relay_once(self) -> dict[str, Any]:
        done = run_hubsync(
            ["relay", "--state-dir", str(self.registry.state_dir), "--redis-url", self.url,
             "--once", "--json"]
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))


@dataclass
class Deployment:
    """The hub, its consumer's Redis user, an admin client, and the two runtimes."""

    hub_db: Path
    consumer_url: str
    admin: redis.Redis
    rt_a: Runtime
    rt_b: Runtime

    def consume_once(self) -> dict[str, Any]:
        return consume_once(self.consumer_url, self.hub_db)

    def outcomes_for(self, runtime: Runtime) -> list[entries.OutcomeRecord]:
        """Every outcome the hub sent ``runtime``, oldest first."""
        stream = keys.acks_stream(HUB_PROJECT, runtime.runtime_id)
        return [
            record
            for _, raw in self.admin.xrange(stream)
            for record in entries.parse_outcomes_entry(entries.decode_fields(raw))
        ]


@pytest.fixture
def deployment(acl_redis: tuple[str, redis.Redis], tmp_path: Path) -> Iterator[Deployment]:  # noqa: F811
    server_url, admin = acl_redis
    hub_db = tmp_path / "hub.db"
    with acl.two_runtime_users(Runtime, server_url, admin, tmp_path, hub_db) as (rt_a, rt_b, url):
        yield Deployment(hub_db, url, admin, rt_a, rt_b)


ALLOWLISTED_DATA: dict[str, dict[str, Any]] = {
    "approval.granted": {"approval_id": "appr-1", "decided_by": "mallory"},
    "step.completed": {"step_id": "s1", "status": "ok"},
}


def forged_by(runtime: Runtime, project_id: str, run_id: str, event_type: str) -> dict[str, Any]:
    """An event entry of ``project_id`` signed with ``runtime``'s genuine key (so it calls
    ``runtime`` its home, as a signed entry must)."""
    event = sync_event(1, run_id=run_id, project_id=project_id, runtime_id=runtime.runtime_id)
    data = ALLOWLISTED_DATA[event_type]  # what rt-a's own deriver would let cross
    event = event.model_copy(update={"event_type": event_type, "data": data})
    return dict(entry_fields(SyncEvent.model_validate(event.model_dump())))


def test_one_runtimes_key_cannot_write_squat_or_park_another_runtimes_project(
    deployment: Deployment,
) -> None:
    rt_a, rt_b = deployment.rt_a, deployment.rt_b
    rt_b.store.append_event("run-0", "step.completed", {"step": "s0"})
    rt_b.relay_once()
    assert deployment.consume_once()["accepted"] == 1  # rt-b's project is rt-b's from now on

    # As rt-a's Redis user, with rt-a's key: a fake approval in rt-b's project, and the run id
    # rt-b will use next, taken first.
    attacker = redis.Redis.from_url(rt_a.url)
    for run_id, event_type in (("run-fake", "approval.granted"), (SQUATTED, "step.completed")):
        attacker.xadd(rt_a.events, forged_by(rt_a, rt_b.project_id, run_id, event_type))
    attacker.close()
    stats = deployment.consume_once()
    assert (stats["accepted"], stats["refused"]) == (0, 0)

    with SqliteHubStore(deployment.hub_db) as hub:
        assert hub.count_events(project_id=rt_b.project_id) == 1
        assert hub.count_events(run_id="run-fake") == hub.count_events(run_id=SQUATTED) == 0
        refused = hub.alerts()
        assert {(a.reason, a.runtime_id, a.run_id) for a in refused} == {
            (entries.ConflictReason.NOT_OWNER, rt_a.runtime_id, "run-fake"),
            (entries.ConflictReason.NOT_OWNER, rt_a.runtime_id, SQUATTED),
        }
    # the sender hears of its own rows; the owner hears nothing of them
    assert {(o.run_id, o.outcome, o.reason) for o in deployment.outcomes_for(rt_a)} == {
        ("run-fake", entries.Outcome.CONFLICT, "not_owner"),
        (SQUATTED, entries.Outcome.CONFLICT, "not_owner"),
    }
    assert [(o.run_id, o.outcome) for o in deployment.outcomes_for(rt_b)] == [
        ("run-0", entries.Outcome.ACCEPTED)
    ]
    streamed = deployment.admin.xrange(keys.alerts_stream(HUB_PROJECT))
    assert [entries.decode_fields(raw)["reason"] for _, raw in streamed] == [b"not_owner"] * 2

    # rt-b runs the squatted run id as its own: accepted, acknowledged, nothing parked
    for step in range(3):
        rt_b.store.append_event(SQUATTED, "step.completed", {"step": f"s{step}"})
    rt_b.relay_once()
    assert deployment.consume_once()["accepted"] == 3
    assert rt_b.relay_once()["acked"] == 3
    assert rt_b.store.outbox_counts() == {
        "pending": 0, "attempted": 0, "acked": 4, "conflict": 0, "rejected": 0, "total": 4,
    }  # fmt: skip
    with SqliteHubStore(deployment.hub_db) as hub:
        assert hub.sync_cursor(rt_b.project_id, SQUATTED) == 3
        [run] = [r for r in hub.runs(HUB_PROJECT) if r.run_id == SQUATTED]
        assert (run.project_id, run.home_runtime_id) == (rt_b.project_id, rt_b.runtime_id)


def test_forgeries_under_thousands_of_keys_are_one_alert(deployment: Deployment) -> None:
    rt_a, rt_b = deployment.rt_a, deployment.rt_b
    rt_b.store.append_event("run-0", "step.completed", {"step": "s0"})
    rt_b.relay_once()
    assert deployment.consume_once()["accepted"] == 1
    forgeries = 3000
    attacker = redis.Redis.from_url(rt_a.url)
    with attacker.pipeline(transaction=False) as pipe:
        for n in range(1, forgeries + 1):
            # unsigned, each under another key, each claiming to be rt-b
            event = sync_event(n, run_id=f"run-{n}", project_id=rt_b.project_id,
                               runtime_id=rt_b.runtime_id)  # fmt: skip
            data, digest = event.encoded()
            pipe.xadd(rt_a.events, entries.event_entry_fields(event, data, digest))  # type: ignore[arg-type]
        pipe.execute()
    attacker.close()
    assert deployment.consume_once()["refused"] == forgeries

    with SqliteHubStore(deployment.hub_db) as hub:
        [alert] = hub.alerts(limit=10_000)
        assert (alert.reason, alert.hub_project, alert.runtime_id, alert.occurrences) == (
            entries.SecurityReason.UNAUTHENTICATED,
            HUB_PROJECT,
            rt_b.runtime_id,
            forgeries,
        )
        assert hub.count_events() == 1
    # nobody is told anything about a forgery
    assert [o.run_id for o in deployment.outcomes_for(rt_b)] == ["run-0"]

    rt_b.store.append_event("run-1", "step.completed", {"step": "s0"})
    rt_b.relay_once()
    assert deployment.consume_once()["accepted"] == 1
    rt_b.relay_once()
    counts = rt_b.store.outbox_counts()
    assert (counts["acked"], counts["conflict"], counts["rejected"]) == (2, 0, 0)
