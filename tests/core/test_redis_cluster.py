"""Redis Cluster: clients by mode, reads split by hash slot, and leases across a failover.

Runs on a private cluster of 3 masters with a replica each (hubsync/servers/redis_cluster.py);
the failover test kills a master of a cluster of its own.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from rq import Queue

from consumers.jobs.job_connection import rq_target
from consumers.jobs.maintenance import run_maintenance
from hubstore.errors import FencedWriteRefusedError
from hubstore.leases import LeaseClient, LeaseGranted, LeaseRefusal, LeaseRefused
from hubstore.leases.fence import advance_fence, ensure_fence_table
from hubstore.redis_functions import library_loaded
from hubsync.core import keys
from hubsync.core.connections import RedisTarget, connect, is_cluster
from hubsync.core.errors import ConfigError, RedisUnavailableError
from hubsync.core.keys import EFFECTS_QUEUE
from hubsync.core.sqlite import Database
from hubsync.core.stream_reads import CLUSTER_BLOCK_MS, read_streams
from hubsync.processes import run_hubsync
from hubsync.servers.redis_cluster import RedisClusterProcesses

PROJECTS = [f"proj-{n}" for n in range(12)]


def cluster_client(url: str) -> RedisCluster:
    client = connect(RedisTarget(url))
    assert isinstance(client, RedisCluster)
    return client


def test_auto_detects_a_cluster_and_a_single_server_and_the_override_wins(
    cluster_url: str, redis_url: str
) -> None:
    cluster = connect(RedisTarget(cluster_url))
    single = connect(RedisTarget(redis_url))
    assert is_cluster(cluster) and not is_cluster(single)
    assert RedisTarget(cluster_url).server_is_cluster()
    assert not RedisTarget(redis_url).server_is_cluster()
    assert RedisTarget(cluster_url, cluster="no").server_is_cluster()  # asks whatever the mode
    forced_single = connect(RedisTarget(cluster_url, cluster="no"))
    assert not is_cluster(forced_single)
    with pytest.raises(RedisUnavailableError):  # a single server has no slot table to read
        connect(RedisTarget(redis_url, cluster="yes"))
    with pytest.raises(ConfigError, match="database 0"):
        connect(RedisTarget(cluster_url + "/3", cluster="yes"))
    forced_single.close()
    cluster.close()
    single.close()


def test_projects_spread_over_every_master(redis_cluster: RedisClusterProcesses) -> None:
    # The tests below mean something only if the projects' slots are on every node.
    masters = {redis_cluster.master_of(keys.events_stream(p)).port for p in PROJECTS}
    assert len(masters) == 3


def test_the_relays_pipeline_spans_slots_and_reads_come_back_from_every_slot(
    cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = cluster_client(cluster_url)
    pipe = client.pipeline(transaction=False)  # as the relay's: SADD + XADDs of many projects
    for project in PROJECTS:
        pipe.sadd(keys.PROJECTS, project)
        pipe.xadd(keys.events_stream(project), {"n": project})
    pipe.execute()
    streams = {keys.events_stream(p): "0-0" for p in PROJECTS}
    reply = read_streams(client, streams, count=10, block_ms=None)
    assert sorted(redis.client.str_if_bytes(key) for key, _ in reply) == sorted(streams)

    group = (keys.CONSUMER_GROUP, "c1")
    for stream in streams:
        client.xgroup_create(stream, keys.CONSUMER_GROUP, id="0")
    first = read_streams(client, dict.fromkeys(streams, ">"), count=10, block_ms=100, group=group)
    assert len(first) == len(PROJECTS)
    sent: list[tuple[object, ...]] = []  # the commands sent outside the pipeline
    send = client.execute_command

    def recorded(*args: object, **options: object) -> object:
        sent.append(args)
        return send(*args, **options)

    monkeypatch.setattr(client, "execute_command", recorded)
    empty = read_streams(client, dict.fromkeys(streams, ">"), count=10, block_ms=1000, group=group)
    assert empty == []
    # an empty cluster read blocks on one slot group, for CLUSTER_BLOCK_MS, not block_ms
    [blocking] = sent
    assert blocking[blocking.index("BLOCK") + 1] == CLUSTER_BLOCK_MS
    client.close()


def test_leases_grant_renew_release_and_list_across_slots(cluster_url: str) -> None:
    leases = LeaseClient(cluster_client(cluster_url))
    resources = [f"repo/{n}" for n in range(6)]
    granted = [leases.acquire_or_raise(r, "box-a", ttl_ms=5_000) for r in resources]
    assert [g.lease.token for g in granted] == [1] * 6
    renewed = leases.renew_or_raise(granted[0].lease)
    assert renewed.lease.token == 1
    assert isinstance(leases.acquire("repo/0", "box-b", ttl_ms=5_000), LeaseRefused)
    listed = leases.list()
    assert [info.resource for info in listed] == resources  # a MULTI would be CROSSSLOT here
    assert leases.show("repo/3").holder == "box-a"
    for g in granted:
        leases.release_or_raise(g.lease)
    again = leases.acquire_or_raise("repo/0", "box-b", ttl_ms=5_000)
    assert again.lease.token == 2, "the fence outlives the release"
    assert leases.fenced_write(again.lease, "head", b"abc").ok


def replica_of(cluster: RedisClusterProcesses, key: str) -> int:
    """The pid of the replica of ``key``'s master."""
    master = cluster.master_of(key)
    with cluster.node_client(master) as client:
        port = int(client.info("replication")["slave0"]["port"])
    node = next(n for n in cluster.nodes if n.port == port)
    assert node.process is not None
    return node.process.pid


def test_a_grant_no_replica_confirms_is_refused_and_given_back(
    cluster_url: str, redis_cluster: RedisClusterProcesses
) -> None:
    leases = LeaseClient(cluster_client(cluster_url), replica_wait_ms=200)
    replica = replica_of(redis_cluster, keys.lease("repo/x"))
    os.kill(replica, signal.SIGSTOP)
    try:
        refused = leases.acquire("repo/x", "box-a", ttl_ms=5_000)
    finally:
        os.kill(replica, signal.SIGCONT)
    assert isinstance(refused, LeaseRefused)
    assert refused.refusal is LeaseRefusal.NOT_REPLICATED
    assert "not replicated" in refused.describe()
    assert leases.show("repo/x").holder is None, "the unconfirmed grant was given back"
    granted = leases.acquire("repo/x", "box-b", ttl_ms=5_000)
    assert isinstance(granted, LeaseGranted) and granted.lease.token == 2


def test_no_token_is_granted_twice_across_a_failover_and_the_store_refuses_a_lost_one(
    private_redis_cluster: RedisClusterProcesses, tmp_path: Path
) -> None:
    cluster = private_redis_cluster
    leases = LeaseClient(cluster_client(cluster.url), replica_wait_ms=200)
    resource = "repo/main"
    reported: list[tuple[str, int]] = []  # (holder, token) of every grant reported to a holder

    first = leases.acquire_or_raise(resource, "box-a", ttl_ms=10_000)  # confirmed by a replica
    reported.append(("box-a", first.lease.token))
    ledger = Database(tmp_path / "ledger.db")  # a store written under the lease (hubstore/fence)
    ledger.write(ensure_fence_table)
    ledger.write(lambda conn: advance_fence(conn, resource, first.lease.token, first.lease.holder))
    leases.release_or_raise(first.lease)

    # The replica stops acknowledging: the next grant stays on the master alone.
    master = cluster.master_of(keys.lease(resource))
    replica = replica_of(cluster, keys.lease(resource))
    os.kill(replica, signal.SIGSTOP)
    try:
        unconfirmed = leases.acquire(resource, "box-b", ttl_ms=10_000)
        assert isinstance(unconfirmed, LeaseRefused)
        assert unconfirmed.refusal is LeaseRefusal.NOT_REPLICATED  # box-b never acts on it
        # The master is lost with what only it held; the replica takes over.
        master.kill()
    finally:
        os.kill(replica, signal.SIGCONT)
    killed = master
    cluster.wait_for_failover(keys.lease(resource), killed)

    after = _acquire_through_failover(leases, resource, "box-c")
    reported.append(("box-c", after.lease.token))
    tokens = [token for _, token in reported]
    assert len(tokens) == len(set(tokens)), f"a token was reported granted twice: {reported}"
    assert after.lease.token > first.lease.token

    # Had the new master's counter fallen behind a token a store has seen, the store
    # refuses the smaller one: the fence in the store covers a lost counter.
    ledger.write(lambda conn: advance_fence(conn, resource, after.lease.token, after.lease.holder))
    with pytest.raises(FencedWriteRefusedError):
        ledger.write(
            lambda conn: advance_fence(conn, resource, first.lease.token, first.lease.holder)
        )
    ledger.close()


def _acquire_through_failover(leases: LeaseClient, resource: str, holder: str) -> LeaseGranted:
    """Acquire, retrying while the client finds the new master (each try re-reads the slots)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return leases.acquire_or_raise(resource, holder, ttl_ms=10_000)
        except (redis.RedisError, RedisUnavailableError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_rq_needs_a_single_server(cluster_url: str, redis_url: str) -> None:
    single, cluster = RedisTarget(redis_url), RedisTarget(cluster_url)
    assert rq_target(single, None) is single
    with pytest.raises(ConfigError, match="--rq-redis-url"):
        rq_target(cluster, None)
    with pytest.raises(ConfigError, match="not a cluster"):
        rq_target(cluster, cluster_url)
    assert rq_target(cluster, redis_url) == RedisTarget(redis_url)


def test_the_effects_worker_refuses_a_cluster_without_an_rq_redis_in_one_line(
    cluster_url: str,
) -> None:
    result = run_hubsync(["effects-worker", "--check"], env={"HUBSYNC_REDIS_URL": cluster_url})
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "--rq-redis-url" in result.stderr


def test_rq_jobs_queue_on_their_own_redis_and_work_on_the_cluster(
    cluster_url: str, redis_url: str, redis_client: redis.Redis
) -> None:
    # An idle consumer with nothing pending on a project's stream in the cluster: the
    # maintenance job removes it only if it reaches the cluster, not RQ's Redis.
    cluster = cluster_client(cluster_url)
    stream = keys.events_stream("acme")
    cluster.sadd(keys.PROJECTS, "acme")
    cluster.xadd(stream, {"kind": "presence"})
    cluster.xgroup_create(stream, keys.CONSUMER_GROUP, id="0")
    cluster.xgroup_createconsumer(stream, keys.CONSUMER_GROUP, "gone-1")
    queue = Queue(EFFECTS_QUEUE, connection=redis_client)
    job = queue.enqueue(run_maintenance, dead_consumer_idle=0.0)
    result = run_hubsync(
        ["effects-worker", "--burst", "--rq-redis-url", redis_url],
        env={"HUBSYNC_REDIS_URL": cluster_url},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    job.refresh()
    assert job.return_value() == {
        "purged_effects": 0,
        "purged_alerts": 0,
        "purged_presence": 0,
        "removed_consumers": {"acme": ["gone-1"]},
    }
    assert cluster.xinfo_consumers(stream, keys.CONSUMER_GROUP) == []
    assert not redis_client.exists(stream), "nothing of the pipeline landed on RQ's Redis"
    cluster.close()


def test_hub_migrate_loads_the_functions_on_every_master_and_leases_work_on_each_slot(
    redis_cluster: RedisClusterProcesses, cluster_url: str, tmp_path: Path
) -> None:
    masters = redis_cluster.masters_now()
    for node in masters:
        with redis_cluster.node_client(node) as client:
            client.function_flush()
            assert not library_loaded(client)
    done = run_hubsync(
        ["hub", "migrate", "--hub-db", str(tmp_path / "hub.db"), "--redis-url", cluster_url]
    )
    assert done.returncode == 0, done.stderr
    assert "functions library hubsync version" in done.stdout
    for node in masters:
        with redis_cluster.node_client(node) as client:
            assert library_loaded(client)
    leases = LeaseClient(cluster_client(cluster_url))
    tokens = [leases.acquire_or_raise(f"r-{n}", "box-a", 30_000).lease.token for n in range(12)]
    assert tokens == [1] * 12  # twelve resources, spread over the three masters' slots
