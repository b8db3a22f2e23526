"""The chaos soak's cluster: real processes on a private Redis, and a fault scheduler.

``SoakCluster`` lays out 3 runtimes (each its own state dir, one project, an
appender process and a ``hubsync relay`` process), 3 ``hubsync consume``
processes sharing one hub store, and the Redis they meet on: a ``redis-server``
with AOF everysec (``SingleRedis``) or a private Redis Cluster of 3 masters
with a replica each, every node with AOF (``ClusterRedis``). The hub store is
a SQLite file in the soak's directory, or the PostgreSQL database a hub URL
names. ``FaultScheduler`` then, at seeded random times, kill -9s a relay or a
consumer and restarts it, SIGSTOPs one for longer than the reclaim time,
restarts redis-server (on a cluster: kill -9s a master that has a replica in
sync, waits until the replica serves its slots, and starts it again, back as
a replica), and has ``hubsync.faults.inject.FaultInjector`` (the demo's
injector too) write duplicates, conflicting bytes signed with a runtime's key,
unsigned or badly signed forgeries, forged acks and garbage entries. Every
runtime is enrolled on the hub store (``hubsync.provisioning``, what ``hubsync
hub init``, ``enroll`` and ``runtime join`` do) before any relay starts. The
end checks are ``hubsync.faults.invariants``' (``tests.helpers.chaos_checks``
gives them the soak's processes and files).
"""

from __future__ import annotations

import heapq
import itertools
import json
import random
import secrets
import sqlite3
import string
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hubstore import hub_url_from_path, open_store
from hubsync.core.signing import RuntimeKey
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.faults.inject import FaultInjector
from hubsync.faults.records import RuntimeUnderTest
from hubsync.faults.secrets import needles
from hubsync.processes import (
    Child,
    PipelineProcesses,
    hubsync_command,
    python_command,
    run_hubsync,
)
from hubsync.provisioning import enroll_runtime
from hubsync.servers.redis_cluster import RedisClusterProcesses
from producers.registry import RuntimeRegistry
from tests.helpers.postgres_server import dump_database, restore_database
from tests.helpers.support import wait_until

HUB_PROJECTS = ("chaos-a", "chaos-a", "chaos-b")
"""Hub project of each runtime: two runtimes share a stream, the third has its own."""
RELAY_ARGS = (
    "--resend-timeout", "5",
    "--resend-timeout-cap", "20",
    "--presence-interval", "2",
    "--health-ttl", "10",
)  # fmt: skip
"""Short resend and presence periods, so a lost ack or a restart shows within the soak."""


@dataclass(frozen=True)
class PlantedSecrets:
    """Secrets planted in payloads: an ``*_API_KEY`` environment value and a GitHub token."""

    api_key: str
    github_token: str

    @classmethod
    def generate(cls) -> PlantedSecrets:
        """Fresh random values, so no copy of them exists anywhere before the soak."""
        alphabet = string.ascii_letters + string.digits
        token = "ghp_" + "".join(secrets.choice(alphabet) for _ in range(36))
        return cls(api_key=f"sk-chaos-{secrets.token_hex(12)}", github_token=token)

    def needles(self) -> list[bytes]:
        """Byte strings none of which may appear anywhere: each secret and its random tail."""
        return needles([self.api_key, self.github_token])


@dataclass
class Runtime(RuntimeUnderTest):
    """One runtime of the soak: what the faults know of it, its index and its state dir."""

    index: int
    state_dir: Path


class SoakRedis(Protocol):
    """The soak's Redis: one server or a cluster, with the fault the scheduler injects on it."""

    directory: Path
    """Where its files are (AOF, RDB, logs), scanned for secrets at the end."""

    @property
    def url(self) -> str: ...

    def start(self) -> None: ...

    def fault(self, rng: random.Random) -> str | None:
        """Take Redis down and bring it back; what happened (None: not now)."""

    def stop(self) -> None:
        """Stop every server, keeping its files."""


class SingleRedis:
    """One ``redis-server`` with AOF everysec; its fault is a restart."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.server = RedisServerProcess(directory=directory, appendonly=True)

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> None:
        self.server.start()

    def fault(self, rng: random.Random) -> str | None:
        started = time.monotonic()
        self.server.restart()
        return f"down {time.monotonic() - started:.2f}s"

    def stop(self) -> None:
        self.server.stop()


class ClusterRedis:
    """A Redis Cluster of 3 masters with a replica each, AOF on every node; its fault is a
    master killed -9 (its replica takes over), then started again (back as a replica)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.cluster = RedisClusterProcesses(directory, appendonly=True)

    @property
    def url(self) -> str:
        # one node's URL for every client: redis-py finds the others from it, and a daemon
        # (re)started while that node is down waits for it (daemons wait for Redis at start)
        return f"redis://127.0.0.1:{self.cluster.nodes[0].port}"

    def start(self) -> None:
        self.cluster.start()

    def fault(self, rng: random.Random) -> str | None:
        masters = self.cluster.masters_with_a_replica()
        if not masters:
            return None
        victim = rng.choice(masters)
        took_over, back = self.cluster.fail_over(victim, timeout=60)
        return (
            f"kill -9 master :{victim.port}, its replica served its slots after "
            f"{took_over:.1f}s, back as a replica {back:.1f}s later"
        )

    def stop(self) -> None:
        for node in self.cluster.nodes:
            node.stop()


@dataclass
class SoakCluster:
    """Every process of the soak, and where their files are.

    ``hub_url`` is the hub store the consumers share (default: a SQLite file
    under ``BASE/hub``; a PostgreSQL database's URL, the same for every process);
    ``redis_cluster`` puts the pipeline on a Redis Cluster instead of one
    redis-server.
    """

    base: Path
    seed: int
    rate_per_runtime: float
    reclaim_idle: float
    hub_url: str = ""
    redis_cluster: bool = False
    hub_directories: tuple[Path, ...] = ()
    """Where the hub's database keeps its files besides ``BASE/hub`` (a private PostgreSQL
    server's directory), scanned for secrets at the end."""
    planted: PlantedSecrets = field(default_factory=PlantedSecrets.generate)
    runtimes: list[Runtime] = field(default_factory=list)
    appenders: list[Child] = field(default_factory=list)
    relays: list[Child] = field(default_factory=list)
    consumers: list[Child] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.logs = self.base / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.base / "hub").mkdir(parents=True, exist_ok=True)
        if not self.hub_url:
            self.hub_url = hub_url_from_path(self.base / "hub" / "hub.db")
        self.stop_file = self.base / "stop-appending"
        self.redis: SoakRedis = (
            ClusterRedis(self.base / "redis-cluster")
            if self.redis_cluster
            else SingleRedis(self.base / "redis")
        )
        self.processes = PipelineProcesses(self.redis.url, self.logs)
        self.hub_id = ""  # set when the runtimes are enrolled

    @property
    def redis_url(self) -> str:
        """URL of the soak's private Redis (a cluster's: one of its nodes)."""
        return self.redis.url

    def children(self) -> Iterator[Child]:
        """Every child process."""
        yield from itertools.chain(self.appenders, self.relays, self.consumers)

    def start(self, consumers: int = 3) -> None:
        """Start redis, register and enroll the runtimes, then every appender, relay and
        consumer."""
        self.redis.start()
        self.enroll_runtimes()
        for runtime in self.runtimes:
            appender_env = {
                "CHAOS_API_KEY": self.planted.api_key,
                "CHAOS_PLANTED": f"{self.planted.api_key} {self.planted.github_token}",
            }
            appender = python_command(
                "tests.helpers.chaos_appender",
                str(runtime.state_dir),
                runtime.project_id,
                str(self.rate_per_runtime),
                str(self.seed * 10 + runtime.index),
                str(self.stop_file),
                str(self.summary_path(runtime.index)),
            )
            self.appenders.append(
                self.processes.start(f"appender-{runtime.index}", appender, env=appender_env)
            )
            self.relays.append(
                self.processes.relay(f"relay-{runtime.index}", runtime.state_dir, *RELAY_ARGS)
            )
        consumer_args = (
            "--block-ms", "200",
            "--reclaim-idle", str(self.reclaim_idle),
            "--reclaim-interval", "1",
            "--health-ttl", "10",
        )  # fmt: skip
        for index in range(consumers):
            name = f"hub-{index}"
            consume = hubsync_command("consume", "--name", name, *consumer_args)
            # the hub URL (a PostgreSQL one has a password) in the environment, off the command line
            self.consumers.append(
                self.processes.start(name, consume, env={"HUBSYNC_HUB_URL": self.hub_url})
            )

    def enroll_runtimes(self) -> None:
        """Register each runtime's project and enroll the runtime on the hub store for
        its hub project, as an operator does before the relays run."""
        with open_store(self.hub_url, create_schema=True) as hub:
            for index, hub_project in enumerate(HUB_PROJECTS):
                state_dir = self.base / f"runtime-{index}" / "state"
                root = self.base / f"runtime-{index}" / f"shop-{index}"
                root.mkdir(parents=True)
                with RuntimeRegistry(state_dir, runtime_id=f"rt-chaos-{index}") as registry:
                    registration = registry.register_project(root, hub_project=hub_project)
                    enrollment = enroll_runtime(hub, registry, [hub_project])
                    self.hub_id = enrollment.hub_id
                self.runtimes.append(
                    Runtime(
                        registry.runtime_id,
                        registration.project_id,
                        hub_project,
                        registration.store_path,
                        RuntimeKey(enrollment.key),
                        index=index,
                        state_dir=state_dir,
                    )
                )

    def back_up_hub(self) -> Path:
        """A backup of the hub store, taken while the consumers write it: ``hubsync hub
        backup`` of a SQLite file, ``pg_dump`` of a PostgreSQL database. Under ``BASE/hub``,
        so the end's scan for secrets reads it too."""
        if self.hub_url.startswith("sqlite"):
            backup = self.base / "hub" / "backup.db"
            done = run_hubsync(["hub", "backup", "--hub-url", self.hub_url, "--to", str(backup)])
            assert done.returncode == 0, done.stderr
        else:
            backup = self.base / "hub" / "backup.dump"
            dump_database(self.hub_url, backup)
        return backup

    def put_back_hub(self, backup: Path) -> None:
        """Put ``backup`` back in place of the hub store (no consumer may run). A SQLite file
        is written through SQLite's backup API, so a connection still open on it (the
        soak's own) reads the restored pages, not a file unlinked under it."""
        if not self.hub_url.startswith("sqlite"):
            restore_database(self.hub_url, backup)
            return
        database = self.base / "hub" / "hub.db"
        with closing(sqlite3.connect(backup)) as source, closing(sqlite3.connect(database)) as hub:
            source.backup(hub)

    def restore_hub(self) -> int:
        """``hubsync hub restore`` on the put-back store; how many runtimes it asked."""
        done = run_hubsync(
            ["hub", "restore", "--redis-url", self.redis_url, "--json"],
            env={"HUBSYNC_HUB_URL": self.hub_url},  # a PostgreSQL URL has a password
        )
        assert done.returncode == 0, done.stderr
        return len({ask["runtime_id"] for ask in json.loads(done.stdout)["asked"]})

    def relay_logs(self) -> dict[str, str]:
        """Each runtime's relay's log text, by runtime id."""
        return {r.runtime_id: self.processes[f"relay-{r.index}"].log_text() for r in self.runtimes}

    def secret_places(self) -> list[Path]:
        """Where no planted secret may be while Redis runs: the hub's files, the logs and the
        runtimes' state dirs (the Redis files are read once it stopped)."""
        state_dirs = [r.state_dir for r in self.runtimes]
        return [self.base / "hub", *self.hub_directories, self.logs, *state_dirs]

    def summary_path(self, index: int) -> Path:
        """Where appender ``index`` writes its JSON summary when it stops."""
        return self.base / f"appender-{index}.json"

    def stop_appending(self, timeout: float = 60.0) -> list[dict[str, object]]:
        """Tell every appender to stop; their summaries."""
        self.stop_file.touch()
        for child in self.appenders:
            code = child.wait(timeout=timeout)
            assert code == 0, f"{child.name} exited {code}; see {child.log}"
        return [json.loads(self.summary_path(r.index).read_text()) for r in self.runtimes]

    def ensure_running(self) -> None:
        """Continue every paused process and start every dead relay or consumer."""
        for child in itertools.chain(self.relays, self.consumers):
            if child.paused:
                child.resume()
            if not child.alive:
                child.start()

    def stop_daemons(self) -> dict[str, int | None]:
        """SIGTERM every relay and consumer (each finishes its batch); their exit codes."""
        return {c.name: c.stop() for c in itertools.chain(self.relays, self.consumers)}

    def teardown(self) -> None:
        """kill -9 whatever still runs and stop redis (a failed test leaves nothing behind)."""
        self.stop_file.touch()
        self.processes.kill_all()
        self.redis.stop()


PROCESS_FAULTS = (
    "kill_relay",
    "kill_consumer",
    "pause",
    "restart_redis",
    "exhaust_stream",
    "restore_hub",
)
"""The soak's own faults, each a ``_fault_KIND`` method of the scheduler; the others are
``FaultInjector.KINDS``."""
FAULT_KINDS = PROCESS_FAULTS + FaultInjector.KINDS
LATE_KINDS = ("conflict", "forgery", "forged_ack", "cross_runtime", "exhaust_stream")
"""Faults made of what the hub or the streams hold: first tried last, and made sure of."""
_WEIGHTS = {
    "kill_relay": 3,
    "kill_consumer": 3,
    "pause": 2,
    "restart_redis": 1,
    "exhaust_stream": 1,
    "duplicates": 3,
    "conflict": 2,
    "forgery": 2,
    "forged_ack": 2,
    "garbage": 3,
}
ONCE_KINDS = ("restore_hub",)
"""Faults made once, in the first round before the late kinds: a restore loses what the hub
stored since its backup, alerts included, so the conflicts and forgeries come after it."""
REDIS_RESTART_SPACING = 10.0
"""At least this many seconds between two redis restarts, so work gets done in between."""


class FaultScheduler:
    """Injects faults at seeded random times; restores (restart, SIGCONT) later on a timeline."""

    def __init__(self, cluster: SoakCluster, injector: FaultInjector, rng: random.Random) -> None:
        self.cluster = cluster
        self.injector = injector
        self.rng = rng
        self.counts: Counter[str] = Counter()
        self.log: list[str] = []
        self._timeline: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._busy: set[str] = set()  # children with a restore pending
        self._last_redis_restart = 0.0
        self._pace = threading.Event()  # never set: a wait with a timeout paces the faults

    def run(self, seconds: float) -> None:
        """Inject faults for ``seconds``: every kind once first (seeded order), then at random;
        at the end, once more each kind a first try had to skip (nothing to act on then)."""
        first = list(FAULT_KINDS)
        self.rng.shuffle(first)
        for late in LATE_KINDS:
            first.remove(late)
            first.append(late)  # the hub has rows to forge by then
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            kind = first.pop(0) if first else self._pick()
            self._inject(kind)
            next_at = time.monotonic() + self.rng.uniform(0.8, 2.2)
            while time.monotonic() < min(next_at, deadline):
                self._restore_due()
                self._pace.wait(0.05)
        for kind in (*LATE_KINDS, *FAULT_KINDS):  # each kind at least once, a skipped one too
            if not self.counts[kind]:
                self._inject(kind)

    def finish(self) -> None:
        """Do every pending restore now (restart the killed, continue the stopped)."""
        while self._timeline:
            _, _, action = heapq.heappop(self._timeline)
            action()

    def _pick(self) -> str:
        kinds = [k for k in _WEIGHTS if k not in ONCE_KINDS]
        return self.rng.choices(kinds, weights=[_WEIGHTS[k] for k in kinds])[0]

    def _later(self, delay: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._timeline, (time.monotonic() + delay, next(self._order), action))

    def _restore_due(self) -> None:
        while self._timeline and self._timeline[0][0] <= time.monotonic():
            _, _, action = heapq.heappop(self._timeline)
            action()

    def _target(self, pool: list[Child]) -> Child | None:
        ready = [c for c in pool if c.alive and not c.paused and c.name not in self._busy]
        if pool is self.cluster.consumers and len(ready) < 2:
            return None  # keep at least one hub worker untouched
        return self.rng.choice(ready) if ready else None

    def _inject(self, kind: str) -> None:
        if kind in PROCESS_FAULTS:
            done = getattr(self, f"_fault_{kind}")()
        else:
            done = self.injector.inject(kind)
        if done:
            self.counts[kind] += 1
            self.log.append(f"{time.strftime('%H:%M:%S')} {kind}: {done}")
        else:
            self.counts[f"{kind}_skipped"] += 1

    def _kill(self, pool: list[Child]) -> str | None:
        child = self._target(pool)
        if child is None:
            return None
        child.kill()
        self._busy.add(child.name)

        def restart() -> None:
            child.start()
            self._busy.discard(child.name)

        self._later(self.rng.uniform(0.2, 2.0), restart)
        return child.name

    def _fault_kill_relay(self) -> str | None:
        return self._kill(self.cluster.relays)

    def _fault_kill_consumer(self) -> str | None:
        return self._kill(self.cluster.consumers)

    def _fault_pause(self) -> str | None:
        pool = self.cluster.consumers if self.rng.random() < 0.7 else self.cluster.relays
        child = self._target(pool)
        if child is None:
            return None
        child.pause()
        self._busy.add(child.name)
        hold = self.cluster.reclaim_idle + self.rng.uniform(1.0, 2.5)

        def resume() -> None:
            child.resume()
            self._busy.discard(child.name)

        self._later(hold, resume)
        return f"{child.name} for {hold:.1f}s"

    def _fault_restart_redis(self) -> str | None:
        if time.monotonic() - self._last_redis_restart < REDIS_RESTART_SPACING:
            return None
        done = self.cluster.redis.fault(self.rng)
        self._last_redis_restart = time.monotonic()
        return done

    def _fault_exhaust_stream(self) -> str | None:
        """A runtime's own stream used up, as its Redis user could; an operator deletes it a
        second or three later, before any other fault (that runtime's relay is refused
        meanwhile and holds its rows, then resends them)."""
        exhausted = self.injector.stream_exhaustion()
        if exhausted is None:
            return None
        self._pace.wait(self.rng.uniform(1.0, 3.0))
        self.injector.repair_stream(exhausted)
        return str(exhausted)

    def _fault_restore_hub(self) -> str | None:
        """The hub store put back from a backup taken a few seconds earlier, while the
        runtimes went on syncing (what it acknowledged since is gone from it), then
        ``hubsync hub restore``: the consumers start again on it and the relays resend
        what it lacks."""
        self.finish()  # every consumer running and none pending: they all stop for the swap
        backup = self.cluster.back_up_hub()
        held = self.rng.uniform(2.0, 4.0)
        self._pace.wait(held)  # acked meanwhile: what the restore loses
        for consumer in self.cluster.consumers:
            consumer.stop()
        self.cluster.put_back_hub(backup)
        asked = self.cluster.restore_hub()
        for consumer in self.cluster.consumers:
            consumer.start()
        return f"backup of {held:.1f}s before put back; {asked} runtime(s) asked to resync"


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    """``wait_until`` with a coarser poll, for conditions that query several stores."""
    wait_until(condition, timeout=timeout, interval=0.25, what=what)
