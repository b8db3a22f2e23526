"""The whole pipeline on a Redis Cluster, as real processes; and a master killed mid-drain.

Hub projects are spread over every master, so the relay's send pipeline, the
consumer's reads and the relay's ack reads all span hash slots. The failover
run proves the stream side of a failover: entries only the killed master held
were never acknowledged, so the relay resends them and the hub still ends with
each event exactly once; leases granted meanwhile never repeat a token.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import threading
from collections import Counter
from pathlib import Path

import pytest
import redis
from redis.exceptions import RedisClusterException

from hubstore.errors import LeaseUnavailableError
from hubstore.leases import LeaseClient, LeaseGranted
from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import keys
from hubsync.core.connections import RedisTarget, connect
from hubsync.core.errors import HubsyncError
from hubsync.processes import PipelineProcesses
from hubsync.servers.redis_cluster import RedisClusterProcesses
from producers.store.event_store import RunEventStore
from tests.helpers.relay_support import make_runtime

HUB_PROJECTS = [f"acme-{n}" for n in range(6)]
CONSUMER_ARGS = ("--block-ms", "100", "--reclaim-idle", "2", "--reclaim-interval", "0.5")

Key = tuple[str, str, int]


def local_keys(stores: list[RunEventStore]) -> set[Key]:
    """Every committed event's key, from the runtimes' own outboxes."""
    found: set[Key] = set()
    for store in stores:
        db = sqlite3.connect(f"file:{store.path}?mode=ro", uri=True, timeout=10)
        try:
            found |= {
                (store.project_id, r, s)
                for r, s in db.execute("SELECT run_id, sequence FROM outbox")
            }
        finally:
            db.close()
    return found


def hub_keys(hub_db: Path) -> Counter[Key]:
    """How often each key is in the hub (exactly once each, or the pipeline is broken)."""
    if not hub_db.exists():
        return Counter()
    db = sqlite3.connect(f"file:{hub_db}?mode=ro", uri=True, timeout=10)
    try:
        return Counter(db.execute("SELECT project_id, run_id, sequence FROM sync_events"))
    except sqlite3.OperationalError:
        return Counter()  # no schema yet
    finally:
        db.close()


def all_acked(stores: list[RunEventStore]) -> bool:
    return all(store.outbox_counts()["pending"] == 0 for store in stores)


def runtimes(tmp_path: Path, count: int, hub_db: Path) -> list[tuple[Path, list[RunEventStore]]]:
    """``count`` runtimes with a project per hub project, enrolled on the hub at ``hub_db``."""
    made = []
    with SqliteHubStore(hub_db) as hub:
        for index in range(count):
            state_dir = tmp_path / f"runtime-{index}" / "state"
            _registry, stores = make_runtime(state_dir, HUB_PROJECTS, hub)
            made.append((state_dir, stores))
    return made


def append(stores: list[RunEventStore], per_store: int, run: str = "run-0") -> None:
    for store in stores:
        for n in range(per_store):
            store.append_event(run, "step.completed", {"step": f"s{n}", "ok": True})


def test_the_pipeline_on_a_cluster_stores_every_projects_events_exactly_once(
    tmp_path: Path, cluster_url: str, redis_cluster: RedisClusterProcesses
) -> None:
    masters = {redis_cluster.master_of(keys.shared_events_stream(p)).port for p in HUB_PROJECTS}
    assert len(masters) == 3, "the projects must be spread over every master"
    hub_db = tmp_path / "hub.db"
    made = runtimes(tmp_path, 2, hub_db)
    stores = [store for _, project_stores in made for store in project_stores]
    append(stores, 200)  # a backlog before anything runs
    with PipelineProcesses(cluster_url, tmp_path / "logs") as pipeline:
        pipeline.consumer("hub-1", hub_db, *CONSUMER_ARGS)
        pipeline.consumer("hub-2", hub_db, *CONSUMER_ARGS)
        for index, (state_dir, _) in enumerate(made):
            pipeline.relay(f"relay-{index}", state_dir)
        append(stores, 50, run="run-1")  # and events committed while it runs
        expected = local_keys(stores)
        pipeline.wait_until(lambda: len(hub_keys(hub_db)) == len(expected), 90, "the hub")
        pipeline.wait_until(lambda: all_acked(stores), 60, "every outbox row acked")
        codes = pipeline.stop_all()
    assert all(code == 0 for code in codes.values()), codes
    found = hub_keys(hub_db)
    assert set(found) == expected and set(found.values()) == {1}


class LeaseChurn(threading.Thread):
    """Acquires and releases a few leases in a loop; records every grant reported to a holder."""

    def __init__(self, url: str) -> None:
        super().__init__(name="lease-churn", daemon=True)
        self.leases = LeaseClient(connect(RedisTarget(url)), replica_wait_ms=200)
        self.stop = threading.Event()
        self.granted: list[tuple[str, int]] = []
        self.refused = Counter[str]()

    def run(self) -> None:
        round_ = 0
        while not self.stop.is_set():
            round_ += 1
            for resource in (f"effect:chaos-{n}" for n in range(6)):
                try:
                    result = self.leases.acquire(resource, f"holder-{round_}", ttl_ms=2_000)
                    if isinstance(result, LeaseGranted):
                        self.granted.append((resource, result.lease.token))
                        self.leases.release(result.lease)
                    else:
                        self.refused[result.refusal.value] += 1
                except (redis.RedisError, RedisClusterException, HubsyncError) as exc:
                    self.refused[type(exc).__name__] += 1  # mid-failover: try again
            self.stop.wait(0.01)


class Appender(threading.Thread):
    """Commits events to every store at a steady pace until stopped."""

    def __init__(self, stores: list[RunEventStore]) -> None:
        super().__init__(name="appender", daemon=True)
        self.stores = stores
        self.stop = threading.Event()
        self.appended = 0

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            for store in self.stores:
                store.append_event("run-live", "step.completed", {"step": f"s{n}", "ok": True})
                self.appended += 1
            self.stop.wait(0.02)


def test_a_master_killed_mid_drain_loses_nothing_and_repeats_no_token(
    tmp_path: Path, private_redis_cluster: RedisClusterProcesses
) -> None:
    cluster = private_redis_cluster
    hub_db = tmp_path / "hub.db"
    (state_dir, stores) = runtimes(tmp_path, 1, hub_db)[0]
    append(stores, 300)
    victim_project = HUB_PROJECTS[0]
    victim_stream = keys.events_stream(victim_project, stores[0].home_runtime_id)
    master = cluster.master_of(victim_stream)
    churn = LeaseChurn(cluster.url)
    appender = Appender(stores)
    with PipelineProcesses(cluster.url, tmp_path / "logs") as pipeline:
        consumer = pipeline.consumer("hub-1", hub_db, *CONSUMER_ARGS)
        relay = pipeline.relay(
            "relay-0", state_dir, "--resend-timeout", "2", "--resend-timeout-cap", "4",
            "--backoff-max", "1",
        )  # fmt: skip
        churn.start()
        appender.start()
        pipeline.wait_until(lambda: len(hub_keys(hub_db)) > 500, 60, "the drain under way")

        # What only the master holds from now on: its replica stops and loses its link, the
        # consumer stops, so what the relay sends to the victim's stream is neither
        # replicated nor read (asynchronous replication behind when the master dies).
        with cluster.node_client(master) as admin:
            replica_port = int(admin.info("replication")["slave0"]["port"])
            replica = next(n for n in cluster.nodes if n.port == replica_port)
            consumer.pause()
            assert replica.process is not None
            replica.process.send_signal(signal.SIGSTOP)
            try:
                # cut the replication link too, or what the master already wrote to the
                # stopped replica's socket would reach it after all: the replica lags behind
                admin.client_kill_filter(_type="replica")
                length = int(admin.xlen(victim_stream))
                pipeline.wait_until(
                    lambda: int(admin.xlen(victim_stream)) >= length + 20, 20, "unreplicated sends"
                )
                lost = [entry_id for entry_id, _ in admin.xrevrange(victim_stream, count=10)]
                master.kill()  # kill -9: those entries die with it
            finally:
                replica.process.send_signal(signal.SIGCONT)
        consumer.resume()
        cluster.wait_for_failover(victim_stream, master)
        with cluster.node_client(cluster.master_of(victim_stream)) as new_master:
            assert all(not new_master.xrange(victim_stream, i, i) for i in lost), (
                "the entries sent while the replica was stopped died with the master"
            )

        appended = appender.appended
        pipeline.wait_until(lambda: appender.appended > appended + 300, 30, "appends after it")
        appender.stop.set()
        appender.join()
        expected = local_keys(stores)
        pipeline.wait_until(lambda: len(hub_keys(hub_db)) == len(expected), 120, "every event")
        pipeline.wait_until(lambda: all_acked(stores), 60, "every outbox row acked")
        churn.stop.set()
        churn.join()
        codes = pipeline.stop_all()
    assert all(code == 0 for code in codes.values()), codes

    found = hub_keys(hub_db)
    assert set(found) == expected, "every committed event is in the hub"
    assert set(found.values()) == {1}, "and each exactly once"
    resent = re.search(r"\(resent (\d+)\)", relay.log_text())
    assert resent is not None and int(resent.group(1)) > 0, (
        "the entries lost with the master were never acknowledged, so the relay resent them"
    )
    assert churn.granted, "leases were granted during the run"
    tokens = Counter(churn.granted)
    assert max(tokens.values()) == 1, f"a token was granted twice: {tokens.most_common(3)}"


def test_the_daemons_ride_out_a_cluster_that_answers_clusterdown(
    tmp_path: Path, private_redis_cluster: RedisClusterProcesses
) -> None:
    # A master dies and its replica is stopped, so no one serves its slots: with
    # cluster-require-full-coverage (Redis's default) every node answers CLUSTERDOWN to
    # every keyed command until the replica is back and takes over. The relay and the
    # consumer must wait that out as they wait out an unreachable Redis, not exit.
    cluster = private_redis_cluster
    victim_stream = keys.shared_events_stream(HUB_PROJECTS[0])  # the slot of all its keys
    master = cluster.master_of(victim_stream)
    # the runtime's projects live on the other masters: what it sends and reads goes to
    # live nodes, which answer CLUSTERDOWN (not a refused connection) while the cluster is down
    served = [
        p for p in HUB_PROJECTS if cluster.master_of(keys.shared_events_stream(p)) is not master
    ]
    hub_db = tmp_path / "hub.db"
    with SqliteHubStore(hub_db) as hub:
        state_dir = tmp_path / "runtime" / "state"
        _registry, stores = make_runtime(state_dir, served, hub)
    append(stores, 100)
    appender = Appender(stores)
    leases = LeaseClient(connect(RedisTarget(cluster.url)))
    resource = next(
        name
        for name in (f"effect:live-{n}" for n in range(100))
        if cluster.master_of(keys.lease(name)) is not master
    )
    with PipelineProcesses(cluster.url, tmp_path / "logs") as pipeline:
        pipeline.consumer("hub-1", hub_db, *CONSUMER_ARGS)
        pipeline.relay("relay-0", state_dir, "--resend-timeout", "2", "--backoff-max", "1")
        appender.start()
        pipeline.wait_until(lambda: len(hub_keys(hub_db)) >= 400, 60, "the drain under way")
        with cluster.node_client(master) as admin:
            replica_port = int(admin.info("replication")["slave0"]["port"])
        replica = next(n for n in cluster.nodes if n.port == replica_port)
        other = next(n for n in cluster.masters_now() if n is not master)
        assert replica.process is not None
        replica.process.send_signal(signal.SIGSTOP)
        try:
            master.kill()
            with cluster.node_client(other) as probe:

                def refusals() -> int:
                    """CLUSTERDOWN replies the live nodes gave so far (their error counts)."""
                    total = 0
                    for node in cluster.live_nodes():
                        if node is replica:
                            continue  # stopped: it cannot answer
                        with cluster.node_client(node) as client:
                            stats = client.info("errorstats").get("errorstat_CLUSTERDOWN", {})
                            total += int(stats.get("count", 0))
                    return total

                def refused() -> bool:
                    try:
                        probe.get("{" + served[0] + "}:x")  # a live node's key: the whole cluster
                    except redis.exceptions.ClusterDownError:
                        return True
                    except redis.exceptions.ResponseError:  # MOVED: still served
                        return False
                    return False

                pipeline.wait_until(refused, 30, "the cluster to answer CLUSTERDOWN")
                # a lease is unavailable then, as when Redis does not answer: never granted
                with pytest.raises(LeaseUnavailableError):
                    leases.acquire(resource, "holder", ttl_ms=5_000)
                before = refusals()
                # the daemons keep asking and keep being refused, and keep running
                pipeline.wait_until(lambda: refusals() >= before + 20, 30, "their retries")
                pipeline.check()
        finally:
            replica.process.send_signal(signal.SIGCONT)
        cluster.wait_for_failover(victim_stream, master)
        appender.stop.set()
        appender.join()
        expected = local_keys(stores)
        pipeline.wait_until(lambda: len(hub_keys(hub_db)) == len(expected), 120, "every event")
        pipeline.wait_until(lambda: all_acked(stores), 60, "every outbox row acked")
        codes = pipeline.stop_all()
    assert codes == {"hub-1": 0, "relay-0": 0}, codes
    assert set(hub_keys(hub_db).values()) == {1}
