"""A private Redis Cluster: 3 masters with one replica each, on free loopback ports.

The tests, the chaos soak and ``hubsync bench --scale-out`` start it. Each
node is a ``RedisServerProcess`` (own port, own directory, AOF if asked)
started with ``--cluster-enabled yes``; ``redis-cli --cluster create ...
--cluster-replicas 1`` joins them, and ``start`` returns once every node
reports ``cluster_state:ok``, every slot is served by a live master and every
master has its replicas. ``wait_for_failover`` waits until a killed master's
replica serves a key's slot; ``fail_over`` kill -9s a master picked by the
caller, waits for its replica to take over and brings it back as a replica. Nothing here touches the machine's Redis on 6379.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import redis
from redis.crc import key_slot

from hubstore.redis_functions import load_library
from hubsync.core.connections import RedisTarget, Role, connect
from hubsync.demo.embedded_redis import RedisServerProcess, free_port

SLOTS = 16384
BUS_PORT_OFFSET = 10000
"""A node's cluster bus listens on its port + 10000."""
NODE_TIMEOUT_MS = 1000
"""``cluster-node-timeout``: a master silent this long is failed over (about 2 s in all)."""


class RedisClusterError(RuntimeError):
    """The private cluster could not be formed or did not heal in time."""


class RedisClusterProcesses:
    """``masters`` masters with ``replicas`` replicas each, as child processes."""

    def __init__(
        self, directory: Path, masters: int = 3, replicas: int = 1, appendonly: bool = False
    ) -> None:
        """``appendonly``: every node keeps an AOF (everysec), as a production node would."""
        if shutil.which("redis-cli") is None:
            raise RedisClusterError("redis-cli is not installed (it comes with redis-server)")
        self.directory = directory
        self.masters = masters
        self.replicas = replicas
        self.nodes: list[RedisServerProcess] = []
        taken: set[int] = set()
        for index in range(masters * (1 + replicas)):
            node_dir = directory / f"node-{index}"
            node_dir.mkdir(parents=True, exist_ok=True)
            self.nodes.append(
                RedisServerProcess(
                    directory=node_dir,
                    port=_node_port(taken),
                    appendonly=appendonly,
                    extra_args=(
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        str(node_dir / "nodes.conf"),
                        "--cluster-node-timeout",
                        str(NODE_TIMEOUT_MS),
                        # a replica takes over however long ago it last heard its master
                        "--cluster-replica-validity-factor",
                        "0",
                        # a replica's first sync starts at once (the default waits 5 s)
                        "--repl-diskless-sync-delay",
                        "0",
                        # CLUSTER SLOTS lists a replica once it has an offset: ping it often
                        "--repl-ping-replica-period",
                        "1",
                    ),
                )
            )

    @property
    def url(self) -> str:
        """A URL of one live node (a cluster client finds the others from it)."""
        node = next(n for n in self.nodes if n.process is not None)
        return f"redis://127.0.0.1:{node.port}"

    def start(self, timeout: float = 30.0) -> Self:
        """Start every node, join them, and wait until the cluster serves every slot."""
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        created = subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *addresses,
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if created.returncode != 0:
            raise RedisClusterError(f"redis-cli --cluster create failed: {created.stdout[-2000:]}")
        self.wait_until_healthy(timeout)
        return self

    def wait_until_healthy(self, timeout: float = 30.0) -> None:
        """Every live node says ``cluster_state:ok``, agrees every slot is served, and every
        master has its replicas attached."""
        deadline = time.monotonic() + timeout
        while not self._healthy():
            if time.monotonic() > deadline:
                raise RedisClusterError(f"the cluster did not become healthy within {timeout}s")
            time.sleep(0.05)

    def _healthy(self) -> bool:
        live = {node.port for node in self.live_nodes()}
        try:
            for node in self.live_nodes():
                with self.node_client(node) as client:
                    if client.cluster("info").get("cluster_state") != "ok":
                        return False
                    slots = client.cluster("slots")
                    covered = sum(int(end) - int(start) + 1 for start, end, *_ in _ranges(slots))
                    if covered != SLOTS:
                        return False
                    for *_, owners in _owners(slots):
                        # a killed master still listed: its replica has not taken over yet
                        if owners[0] not in live or len(owners) < 1 + self._expected_replicas():
                            return False
        except redis.RedisError:
            return False
        return True

    def _expected_replicas(self) -> int:
        # after a failover without the old master back, a shard has one replica fewer
        return self.replicas if all(node.process is not None for node in self.nodes) else 0

    def live_nodes(self) -> list[RedisServerProcess]:
        """The nodes whose process runs."""
        return [node for node in self.nodes if node.process is not None]

    @contextlib.contextmanager
    def node_client(self, node: RedisServerProcess) -> Iterator[redis.Redis]:
        """A plain client of that one node (not of the cluster it belongs to)."""
        client = connect(RedisTarget(node.url), Role.PROBE, cluster=False)
        try:
            yield client
        finally:
            client.close()

    def master_of(self, key: str) -> RedisServerProcess:
        """The live node serving ``key``'s slot as master now."""
        slot = key_slot(key.encode())
        for node in self.live_nodes():
            with self.node_client(node) as client:
                try:
                    slots = client.cluster("slots")
                except redis.RedisError:
                    continue  # a stopped or failing node: ask another
                for start, end, owners in _owners(slots):
                    if start <= slot <= end:
                        port = owners[0]
                        return next(n for n in self.nodes if n.port == port)
        raise RedisClusterError(f"no live node serves slot {slot}")

    def masters_now(self) -> list[RedisServerProcess]:
        """The live nodes that are masters now."""
        found = []
        for node in self.live_nodes():
            with self.node_client(node) as client:
                role = client.execute_command("ROLE")[0]  # type: ignore[no-untyped-call]
                if role in (b"master", "master"):
                    found.append(node)
        return found

    def wait_for_failover(
        self, key: str, killed: RedisServerProcess, timeout: float = 30.0
    ) -> None:
        """Wait until a live node other than ``killed`` serves ``key``'s slot and the cluster is ok."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.master_of(key) is not killed:
                    self.wait_until_healthy(max(1.0, deadline - time.monotonic()))
                    return
            except (RedisClusterError, redis.RedisError, StopIteration):
                pass
            if time.monotonic() > deadline:
                raise RedisClusterError(f"no replica took over {key!r} within {timeout}s")
            time.sleep(0.05)

    def masters_with_a_replica(self) -> list[RedisServerProcess]:
        """The masters now that have a replica in sync (one that could take over at once)."""
        found = []
        for node in self.masters_now():
            with self.node_client(node) as client:
                replication = client.info("replication")
            replicas = [value for name, value in replication.items() if name.startswith("slave")]
            if any(isinstance(r, dict) and r.get("state") == "online" for r in replicas):
                found.append(node)
        return found

    def fail_over(self, master: RedisServerProcess, timeout: float = 30.0) -> tuple[float, float]:
        """kill -9 ``master``, wait until its replica serves its slots, then start it again (it
        comes back as that replica's replica) and wait until every master has its replica.

        Returns the seconds until the replica took over and until the old master was back.
        """
        started = time.monotonic()
        master.kill()
        self.wait_until_healthy(timeout)  # every slot served by a live master
        took_over = time.monotonic() - started
        master.start()
        self.wait_until_healthy(timeout)  # and every master has its replica again
        return took_over, time.monotonic() - started - took_over

    def pids(self) -> dict[int, int]:
        """``port -> pid`` of every running node."""
        return {node.port: node.process.pid for node in self.nodes if node.process is not None}

    def flush(self) -> None:
        """Empty every master (replicas follow) and every node's script cache; every master
        has hubsync's functions again (whatever was done to them)."""
        for node in self.live_nodes():
            with self.node_client(node) as client:
                if node in self.masters_now():
                    client.flushall()
                    load_library(client)
                client.script_flush()

    def close(self) -> None:
        """Stop every node and remove their directories."""
        for node in self.nodes:
            node.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def _node_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (port + 10000) is free too, unlike any in ``taken``."""
    for _ in range(200):
        port = free_port()
        if port + BUS_PORT_OFFSET > 65535 or {port, port + BUS_PORT_OFFSET} & taken:
            continue
        if port_is_free(port + BUS_PORT_OFFSET):
            taken.update((port, port + BUS_PORT_OFFSET))
            return port
    raise RedisClusterError("no free port pair for a cluster node")


def port_is_free(port: int) -> bool:
    """Whether ``port`` on 127.0.0.1 can be bound now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _owners(slots: object) -> list[tuple[int, int, list[int]]]:
    """``(start, end, [master port, replica ports...])`` of each range of a CLUSTER SLOTS reply."""
    out = []
    for start, end, owners in _ranges(slots):
        ports = [int(str(node[1])) for node in owners]
        out.append((int(start), int(end), ports))
    return out


def _ranges(slots: object) -> list[tuple[int, int, list[list[object]]]]:
    """CLUSTER SLOTS as redis-py returns it (a dict ``(start, end)`` -> primary/replicas, or
    the raw list), as ``(start, end, [node, ...])`` with each node ``[host, port, ...]``."""
    out: list[tuple[int, int, list[list[object]]]] = []
    if isinstance(slots, dict):
        for (start, end), owners in slots.items():
            nodes = [owners["primary"], *owners.get("replicas", [])]
            out.append((int(start), int(end), [list(node) for node in nodes]))
        return out
    for item in slots:  # type: ignore[attr-defined]
        start, end, *nodes = item
        out.append((int(start), int(end), [list(node) for node in nodes]))
    return out
