"""The demo scenario: three runtimes, their relays and two hub consumers, under faults.

What it stages, in order: runtimes append synthetic runs carrying planted
secrets (an environment ``*_API_KEY`` value, a GitHub token, a registered
secret); relays and consumers run as real processes; one consumer is killed
with SIGKILL while it holds unacknowledged entries, which the other reclaims;
each runtime is enrolled on the hub (its entries are signed), and a duplicate,
a conflicting entry under a runtime's own key, an unsigned forgery, a forged
ack, a garbage entry and a run signed into another runtime's project are
injected, and a lease's proof read from Redis is replayed
(``hubsync.faults.inject``); two boxes
contend for one shared effect's lease and the stale one's commit is refused, and
a box stalled past its lease while pushing to a shared git branch is refused by the
remote itself (``hubsync.demo.shared_push``).
Then it waits for the drain and checks every invariant
(``hubsync.faults.invariants``, the chaos soak's checks too).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from consumers.stream.hub_binding import bind_namespace, release_namespace
from hubstore.factory import hub_url_from_path, open_store
from hubstore.redis_functions import load_library
from hubstore.store import HubStore
from hubsync.core import keys
from hubsync.core.connections import RedisTarget, connect
from hubsync.core.entries import ConflictReason, SecurityReason
from hubsync.core.settings import safe_url
from hubsync.core.signing import RuntimeKey
from hubsync.demo.lease_contention import lease_contention
from hubsync.demo.shared_push import shared_branch_push
from hubsync.faults.inject import FaultInjector
from hubsync.faults.invariants import Check, InvariantChecker, relay_told
from hubsync.faults.records import InjectedOffer, RuntimeUnderTest
from hubsync.faults.secrets import needles
from hubsync.processes import PipelineProcesses
from hubsync.provisioning import enroll_runtime
from producers.registry import RuntimeRegistry
from producers.store.event_store import NewEvent, RunEventStore
from producers.synthetic import run_events

HUB_PROJECT = "demo"
RECLAIM_IDLE_S = 2.0
PRODUCE_SECONDS = 2.0
"""Appends are spread over about this long, so faults land while events flow."""
DOOMED_BLOCK_MS = 1000
"""consumer-1's XREADGROUP block time: how long, frozen, it can still be handed entries."""
ENV_SECRET_NAME = "HUBSYNC_DEMO_DEPLOY_API_KEY"  # noqa: S105 - a name, not a value

Progress = Callable[[str, int, int, int], None]
"""``(step, in_hub, acked, total)``, called often while the demo works."""


@dataclass
class Invariant:
    """One check the demo makes, and whether it held."""

    name: str
    held: bool
    detail: str = ""

    @classmethod
    def of(cls, check: Check) -> Invariant:
        """A shared check's verdict: its failures, or its figures when it held."""
        figures = ", ".join(f"{name} {value}" for name, value in check.figures.items())
        return cls(check.name, check.held, "; ".join(check.failures) or figures)


@dataclass
class DemoResult:
    """Everything the summary shows."""

    redis_url: str
    workdir: Path
    produced: int = 0
    in_hub: int = 0
    acked: int = 0
    duplicates: int = 0
    conflicts: int = 0
    refused: int = 0
    dead_letters: int = 0
    reclaimed: int = 0
    secrets_found: list[str] = field(default_factory=list)
    lease: dict[str, Any] = field(default_factory=dict)
    shared_push: dict[str, Any] = field(default_factory=dict)
    invariants: list[Invariant] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether every invariant held."""
        return all(check.held for check in self.invariants)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "ok": self.ok,
            "redis_url": self.redis_url,
            "workdir": str(self.workdir),
            "events_produced": self.produced,
            "events_in_hub": self.in_hub,
            "outbox_acked": self.acked,
            "duplicates": self.duplicates,
            "conflicts": self.conflicts,
            "refused_unauthenticated": self.refused,
            "dead_letters": self.dead_letters,
            "reclaimed": self.reclaimed,
            "secrets_found": len(self.secrets_found),
            "lease": self.lease,
            "shared_push": self.shared_push,
            "invariants": [vars(check) for check in self.invariants],
            "seconds": round(self.seconds, 2),
        }


@dataclass
class Runtime:
    """One demo runtime: its registry, its project's store, and what the faults know of it."""

    name: str
    state_dir: Path
    registry: RuntimeRegistry
    store: RunEventStore
    under_test: RuntimeUnderTest


class DemoScenario:
    """Runs the demo against ``redis_url`` in ``workdir`` (see the module docstring)."""

    def __init__(
        self,
        redis_url: str,
        workdir: Path | None = None,
        runtimes: int = 3,
        runs_per_runtime: int = 4,
        events_per_run: int = 400,
        payload_bytes: int = 540,
        progress: Progress | None = None,
    ) -> None:
        self.redis_url = redis_url
        self.redis = RedisTarget(redis_url)  # its daemons get the URL in their environment
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="hubsync-demo-"))
        self.runtime_count = runtimes
        self.runs = runs_per_runtime
        self.events_per_run = events_per_run
        self.payload_bytes = payload_bytes
        self.progress = progress or (lambda step, hub, acked, total: None)
        self.total = runtimes * runs_per_runtime * events_per_run
        self.client = connect(self.redis)
        self.hub_db = self.workdir / "hub.db"
        self.logs = self.workdir / "logs"
        self.secrets = self._make_secrets()
        self.runtimes: list[Runtime] = []
        self.daemons = PipelineProcesses(redis_url, self.logs)
        self._stop_producing = threading.Event()
        self.result = DemoResult(redis_url=safe_url(redis_url), workdir=self.workdir)

    # -- the whole run ---------------------------------------------------------

    def run(self) -> DemoResult:
        """Stage everything, wait for the drain, check the invariants."""
        started = time.monotonic()
        self.logs.mkdir(parents=True, exist_ok=True)
        hub = open_store(
            hub_url_from_path(self.hub_db), create_schema=True
        )  # created here so polling can start at once
        producer = threading.Thread(target=self._produce, name="demo-produce", daemon=True)
        hub_id = hub.init_hub()
        bound = False
        try:
            # Before any key is touched: a Redis whose consumer group another hub
            # owns is refused (exit 2), or the demo's consumers would take its events.
            load_library(self.client)  # the hub's setup step (hub migrate --redis-url)
            bind_namespace(self.client, hub_id)
            bound = True
            self._clean_redis()
            self._open_runtimes(hub)
            self._start_daemons()
            self._wait_until_ready(hub)
            injector = FaultInjector(
                self.client, hub, hub_id, [r.under_test for r in self.runtimes], random.Random()
            )
            producer.start()
            # made of entries on the stream: while they flow, before the hub trims them
            step = "injecting: a duplicate, a forged ack"
            self._inject(hub, step, [lambda: injector.duplicates(1), injector.forged_ack])
            self._kill_one_consumer(hub)
            step = "injecting: a conflict, a forgery, garbage, a run in another's project"
            self._inject(hub, step, [injector.conflict, lambda: injector.forgery("unsigned"),
                                     lambda: injector.garbage("bad_json"),
                                     injector.cross_runtime, injector.lease_replay])  # fmt: skip
            self.result.lease = lease_contention(self.redis, self.workdir)
            self.result.shared_push = shared_branch_push(self.redis, self.workdir)
            producer.join()
            self._wait_for_drain(hub, injector)
            self.daemons.stop_all()
            self._collect(hub)
            self._check(hub, injector)
        finally:
            self._stop_producing.set()  # a dead daemon ends the run early: stop appending first
            if producer.is_alive():
                producer.join()
            self.daemons.kill_all()
            if bound:  # give the namespace back (only if it still names this demo's hub)
                release_namespace(self.client, hub_id)
            for runtime in self.runtimes:
                runtime.store.close()
                runtime.registry.close()
            hub.close()
            os.environ.pop(ENV_SECRET_NAME, None)
        self.result.seconds = time.monotonic() - started
        self._check_lease()
        self.client.close()
        return self.result

    # -- steps -------------------------------------------------------------------

    def _make_secrets(self) -> dict[str, str]:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return {
            "environment": "demo-" + secrets.token_hex(16),
            "github": "ghp_" + "".join(secrets.choice(alphabet) for _ in range(36)),
            "registered": "registered-" + secrets.token_hex(12),
        }

    def _clean_redis(self) -> None:
        for key in self.client.scan_iter(match="hubsync:*{" + HUB_PROJECT + "}*", count=1000):
            self.client.delete(key)
        self.client.srem(keys.PROJECTS, HUB_PROJECT)

    def _open_runtimes(self, hub: HubStore) -> None:
        # The store registers the environment's secrets when it opens, so the
        # variable is set first, as a real deployment's would be.
        os.environ[ENV_SECRET_NAME] = self.secrets["environment"]
        for index in range(self.runtime_count):
            state_dir = self.workdir / f"runtime-{index + 1}"
            registry = RuntimeRegistry(state_dir, runtime_id=demo_runtime_id(index + 1))
            root = self.workdir / f"project-{index + 1}"
            root.mkdir(exist_ok=True)
            registration = registry.register_project(
                root, hub_project=HUB_PROJECT, project_id=f"demo-project-{index + 1}"
            )
            store = registry.open_store(registration)
            store.redactor.register(self.secrets["registered"], "registered")
            # hub enroll + runtime join, as an operator would: the relay signs with this key
            enrollment = enroll_runtime(hub, registry, [HUB_PROJECT])
            under_test = RuntimeUnderTest(registry.runtime_id, store.project_id, HUB_PROJECT,
                                          store.path, RuntimeKey(enrollment.key))  # fmt: skip
            name = f"runtime-{index + 1}"
            self.runtimes.append(Runtime(name, state_dir, registry, store, under_test))

    def _start_daemons(self) -> None:
        for index in (1, 2):
            block_ms = DOOMED_BLOCK_MS if index == 1 else 100
            self.daemons.consumer(
                f"consumer-{index}", self.hub_db,
                "--batch-count", "50", "--block-ms", str(block_ms),
                "--reclaim-idle", str(RECLAIM_IDLE_S), "--reclaim-interval", "0.5", "--json",
                separate_stdout=True,
            )  # fmt: skip
        for runtime in self.runtimes:
            self.daemons.relay(
                f"relay-{runtime.name}", runtime.state_dir,
                "--presence-interval", "1", "--resend-timeout", "3", "--json",
                separate_stdout=True,
            )  # fmt: skip

    def _streams(self) -> list[str]:
        """The events stream of each runtime of the demo."""
        return [keys.events_stream(HUB_PROJECT, r.registry.runtime_id) for r in self.runtimes]

    def _wait_until_ready(self, hub: HubStore) -> None:
        """Until every relay beats and both consumers read the group (Python starts slowly)."""
        relays = [keys.relay_health(r.registry.runtime_id) for r in self.runtimes]

        def ready() -> bool:
            # a worker joins a stream's group with the first entry it reads there
            try:
                names = {
                    c["name"]
                    for stream in self._streams()
                    for c in self.client.xinfo_consumers(stream, keys.CONSUMER_GROUP)
                }
            except redis.ResponseError:  # no stream or no group yet
                return False
            return {b"consumer-1", b"consumer-2"} <= names and self.client.exists(*relays) == len(
                relays
            )

        # five interpreters start at once: a loaded two-core box can take more than 30 s,
        # and a healthy one returns as soon as they are up
        self._wait("starting: 3 relays and 2 consumers", ready, 90, hub)

    def _produce(self) -> None:
        plant = list(self.secrets.values())
        streams = []
        for runtime in self.runtimes:
            for run in range(self.runs):
                events = run_events(self.events_per_run, self.payload_bytes, plant=plant)
                streams.append((runtime.store, f"run-{runtime.name}-{run + 1}", events))
        # interleave small batches from every run, spread over a couple of
        # seconds whatever the size, so the pipeline works while runs go on
        pause = max(0.005, PRODUCE_SECONDS / max(1, self.events_per_run // 10))
        while streams and not self._stop_producing.is_set():
            for item in list(streams):
                store, run_id, events = item
                batch = [
                    NewEvent(run_id, t, p) for _, (t, p) in zip(range(10), events, strict=False)
                ]
                if batch:
                    store.append_events(batch)
                if len(batch) < 10:
                    streams.remove(item)
            self._stop_producing.wait(pause)

    def _kill_one_consumer(self, hub: HubStore) -> None:
        """SIGKILL consumer-1 while it holds delivered, unacknowledged entries.

        consumer-1 spends most of its time blocked in XREADGROUP. Frozen there
        (SIGSTOP), it still receives: Redis assigns the next entries to it (they
        enter its pending list) and writes them to a socket it will never read.
        Once that has happened it is killed, exactly like a worker that crashed
        holding a batch. If nothing arrived within its block time it resumes and
        is tried again.
        """
        doomed = self.daemons["consumer-1"]

        def pending_of_doomed() -> bool:
            try:
                return any(
                    self.client.xpending_range(
                        stream, keys.CONSUMER_GROUP, "-", "+", 1, "consumer-1"
                    )
                    for stream in self._streams()
                )
            except redis.ResponseError:  # the group is not there yet
                return False

        def caught_holding_entries() -> bool:
            doomed.pause()
            frozen_until = time.monotonic() + DOOMED_BLOCK_MS / 1000 + 0.2
            while time.monotonic() < frozen_until:
                if pending_of_doomed():
                    doomed.kill()  # SIGKILL ends a stopped process too
                    return True
                time.sleep(0.01)
            doomed.resume()
            return False

        self._wait("running: killing consumer-1 mid-batch", caught_holding_entries, 30, hub)
        if doomed.alive:
            doomed.kill()

    def _inject(self, hub: HubStore, step: str, faults: list[Callable[[], object]]) -> None:
        """Each of ``faults`` in turn, each tried again until it finds something to be made of
        (an entry on the stream, an event in the hub)."""

        def injected() -> bool:
            while faults and faults[0]():
                faults.pop(0)
            return not faults

        self._wait(step, injected, 30, hub)

    def _wait_for_drain(self, hub: HubStore, injector: FaultInjector) -> None:
        done = injector.record
        alerted = len(done.conflicts) + len(done.forgeries) + len(done.cross_runtime)
        dead = len(done.garbage) + len(done.forgeries)

        def drained() -> bool:
            pending = sum(
                int(self.client.xpending(stream, keys.CONSUMER_GROUP)["pending"])
                for stream in self._streams()
            )
            return (
                hub.count_events() == self.total
                and self._acked() == self.total
                and pending == 0
                and self.client.xlen(keys.alerts_stream(HUB_PROJECT)) >= alerted
                and self.client.xlen(keys.dead_stream(HUB_PROJECT)) >= dead
                and self._relays_told_of(injector.record.conflicts)
            )

        self._wait("draining: every event to the hub, every ack home", drained, 45, hub)

    def _collect(self, hub: HubStore) -> None:
        result = self.result
        result.produced = sum(r.store.outbox_counts()["total"] for r in self.runtimes)
        result.in_hub = hub.count_events()
        result.acked = self._acked()
        alerts = hub.alerts(HUB_PROJECT)
        result.conflicts = sum(isinstance(a.reason, ConflictReason) for a in alerts)
        result.refused = sum(a.reason is SecurityReason.UNAUTHENTICATED for a in alerts)
        result.dead_letters = int(self.client.xlen(keys.dead_stream(HUB_PROJECT)))
        for name in ("consumer-1", "consumer-2"):
            stats = _last_json(self.daemons[name].output())
            result.duplicates += int(stats.get("duplicate", 0))
            result.reclaimed += int(stats.get("reclaimed", 0))

    def _relay_logs(self) -> dict[str, str]:
        return {
            r.under_test.runtime_id: self.daemons[f"relay-{r.name}"].log_text()
            for r in self.runtimes
        }

    def _relays_told_of(self, conflicts: list[InjectedOffer]) -> bool:
        """Whether the relays heard the hub's verdict on each conflicting offer (the checks
        look for it, and the relays are stopped once the pipeline has drained)."""
        logs = "\n".join(self._relay_logs().values())
        return all(relay_told(logs, conflict.key) for conflict in conflicts)

    def _check(self, hub: HubStore, injector: FaultInjector) -> None:
        """The shared checks: the pipeline, every injected fault, and the secrets."""
        runtimes = [r.under_test for r in self.runtimes]
        checker = InvariantChecker(hub, self.client, runtimes, injector.record, self._relay_logs())
        places = [self.hub_db.parent / p for p in os.listdir(self.hub_db.parent)
                  if p.startswith("hub.db")]  # fmt: skip
        places += [r.state_dir for r in self.runtimes] + [self.logs]
        no_secret = checker.no_secret(needles(self.secrets.values()), places)
        self.result.secrets_found = list(no_secret.failures)
        checks = [*checker.standard(), no_secret]
        self.result.invariants += [Invariant.of(check) for check in checks]

    def _check_lease(self) -> None:
        """The lease's invariants (the pipeline's are ``_check``'s)."""
        lease = self.result.lease
        checks = [
            ("the stale lease holder's commit was refused", bool(lease.get("stale_commit_refused")),
             str(lease.get("stale_commit_code"))),
            ("fencing tokens grew on takeover", lease.get("token_b", 0) > lease.get("token_a", 0),
             f"{lease.get('token_a')} -> {lease.get('token_b')}"),
        ]  # fmt: skip
        push = self.result.shared_push
        if "skipped" not in push:
            checks += [
                ("the stalled holder's push was refused by the remote",
                 bool(push.get("a_refused_by_remote")), str(push.get("a_refusal"))),
                ("the shared branch holds only the new holder's commit",
                 bool(push.get("main_holds_only_b")), str(push.get("main"))),
            ]  # fmt: skip
        self.result.invariants += [
            Invariant(name, bool(held), detail) for name, held, detail in checks
        ]

    # -- helpers -----------------------------------------------------------------

    def _acked(self) -> int:
        return sum(r.store.outbox_counts()["acked"] for r in self.runtimes)

    def _wait(
        self, step: str, condition: Callable[[], bool], timeout: float, hub: HubStore
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.progress(step, hub.count_events(), self._acked(), self.total)
            # a daemon that died (a bad install, a crash) ends the demo now, with its log
            self.daemons.check()
            if condition():
                return
            if time.monotonic() > deadline:
                self.result.invariants.append(Invariant(f"timed out: {step}", False))
                return
            time.sleep(0.05)


def demo_runtime_id(number: int) -> str:
    """The id of the demo's runtime ``number`` (from 1)."""
    return f"demo-rt-{number}"


def _last_json(text: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}
