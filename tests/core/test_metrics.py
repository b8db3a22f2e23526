"""Metrics move with what the relay, the consumer and the leases really do (real private Redis).

Metrics live in process-wide registries (one per role, and the library's) and
other tests move them too, so each test reads a counter before acting and
checks the difference.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from consumers.stream.lag import read_lag
from consumers.stream.worker import HubConsumer
from hubstore.leases import LeaseClient
from hubstore.sqlite.store import SqliteHubStore
from hubsync.core import keys, metrics
from hubsync.core.canonical import content_hash
from hubsync.core.daemon import Readiness
from hubsync.core.entries import PresenceBeat
from hubsync.core.metrics_server import MetricsServer
from hubsync.core.settings import ConsumerSettings
from hubsync.core.signing import SIGNATURE_FIELD
from hubsync.processes import Child, hubsync_command, run_hubsync
from tests.helpers import relay_player
from tests.helpers.clock import FakeClock
from tests.helpers.hub_double import ack_everything
from tests.helpers.relay_support import relay_with_events
from tests.helpers.support import wait_until
from tests.helpers.trust import enroll, signed_event

PER_RUNTIME = {"hub_project": relay_player.HUB_PROJECT, "runtime": relay_player.RUNTIME}
"""The labels of the test runtime's series."""

REGISTRIES = (metrics.RELAY_REGISTRY, metrics.CONSUMER_REGISTRY, metrics.LIBRARY_REGISTRY)


def sample(name: str, **labels: str) -> float:
    """The current value of one exported sample, in whichever registry holds it (0 when it
    does not exist yet)."""
    found = (registry.get_sample_value(name, labels) for registry in REGISTRIES)
    return next((value for value in found if value is not None), 0.0)


def families(registry: CollectorRegistry) -> dict[str, str]:
    """The hubsync families ``registry`` exports: name -> type."""
    return {f.name: f.type for f in registry.collect() if f.name.startswith("hubsync_")}


def delta(name: str, **labels: str) -> Callable[[], float]:
    """Remember a sample now; the returned function gives how much it grew since."""
    start = sample(name, **labels)
    return lambda: sample(name, **labels) - start


@pytest.fixture
def worker(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[HubConsumer]:
    settings = ConsumerSettings(
        hub_db=tmp_path / "hub.db", redis_url=redis_url, block_ms=50, reclaim_interval=0.05
    )
    with SqliteHubStore(settings.hub_db) as store:
        enroll(store, relay_player.RUNTIME, [relay_player.HUB_PROJECT])
        yield HubConsumer(redis_client, store, settings, name="w1")


def test_each_role_registry_holds_its_own_families_with_their_types() -> None:
    relay = {
        "hubsync_events_sent": "counter",
        "hubsync_relay_outcomes": "counter",
        "hubsync_outbox_backlog": "gauge",
        "hubsync_relay_project_unreadable": "gauge",
        "hubsync_relay_send_failures": "counter",
        "hubsync_pruned_rows": "counter",
    }
    consumer = {
        "hubsync_events_ingested": "counter",
        "hubsync_dead_letters": "counter",
        "hubsync_conflicts": "counter",
        "hubsync_reclaimed": "counter",
        "hubsync_consumer_lag": "gauge",
        "hubsync_oldest_pending_age_seconds": "gauge",
        "hubsync_runtime_unstored_entries": "gauge",
        "hubsync_runtime_oldest_unstored_age_seconds": "gauge",
        "hubsync_runtime_heartbeat_age_seconds": "gauge",
        "hubsync_runtime_reported_backlog": "gauge",
        "hubsync_consumer_stream_failures": "counter",
        "hubsync_consumer_streams_set_aside": "gauge",
        "hubsync_batch_ingest_seconds": "histogram",
        "hubsync_end_to_end_latency_seconds": "histogram",
    }
    relay_exported = families(metrics.RELAY_REGISTRY)
    consumer_exported = families(metrics.CONSUMER_REGISTRY)
    assert {name: relay_exported.get(name) for name in relay} == relay
    assert {name: consumer_exported.get(name) for name in consumer} == consumer
    assert not relay_exported.keys() & consumer_exported.keys()
    library = families(metrics.LIBRARY_REGISTRY)
    assert library.get("hubsync_lease_refusals") == "counter"
    assert not library.keys() & (relay_exported.keys() | consumer_exported.keys())


def test_every_metric_of_the_module_belongs_to_one_registry() -> None:
    """A family made without ``registry=`` would land in the library's registry, which no
    daemon serves: each one is in exactly one registry, and only leases are the library's."""
    made = {
        value._name: value
        for value in vars(metrics).values()
        if isinstance(value, MetricWrapperBase)
    }
    homes = {name: [r for r in REGISTRIES if name in families(r)] for name in made}
    assert all(len(found) == 1 for found in homes.values()), homes
    in_library = {name for name, found in homes.items() if found == [metrics.LIBRARY_REGISTRY]}
    assert in_library == {"hubsync_lease_refusals"}


def test_relay_counts_new_sends_resends_applied_outcomes_and_backlog(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    sent = delta("hubsync_events_sent_total", kind="new")
    resent = delta("hubsync_events_sent_total", kind="resend")
    acked = delta("hubsync_relay_outcomes_total", outcome="acked")
    clock = FakeClock()
    _, store, relay = relay_with_events(
        tmp_path / "state", redis_url, 2, 5, clock, resend_timeout=5, resend_timeout_cap=5
    )
    try:
        relay.run_once()
        assert sent() == 10 and acked() == 0
        assert (
            sample("hubsync_outbox_backlog", project=store.project_id, runtime=relay.runtime_id)
            == 10
        )

        clock.advance(5)  # past the resend timeout every row goes out again, once
        relay.run_once()
        assert resent() == 10

        ack_everything(redis_client, "alpha")
        relay.run_once()
    finally:
        relay.close()
    assert acked() == 10
    assert sample("hubsync_outbox_backlog", project=store.project_id, runtime=relay.runtime_id) == 0


def test_consumer_counts_outcomes_conflicts_dead_letters_latency_and_ingest_time(
    redis_client: redis.Redis, worker: HubConsumer
) -> None:
    accepted = delta("hubsync_events_ingested_total", outcome="accepted")
    duplicate = delta("hubsync_events_ingested_total", outcome="duplicate")
    conflict = delta("hubsync_events_ingested_total", outcome="conflict")
    reused = delta("hubsync_conflicts_total", reason="sequence_reused")
    bad_json = delta("hubsync_dead_letters_total", reason="bad_json")
    refused = delta("hubsync_dead_letters_total", reason="unauthenticated")
    latencies = delta("hubsync_end_to_end_latency_seconds_count")
    ingests = delta("hubsync_batch_ingest_seconds_count")

    for sequence in (1, 2, 3):
        relay_player.send(redis_client, relay_player.sync_event(sequence))
    relay_player.send(redis_client, relay_player.sync_event(1))  # same bytes again: duplicate
    other_bytes = relay_player.sync_event(2, data={"status": "other bytes"})  # same key
    relay_player.send(redis_client, other_bytes)
    # signed after spoiling: the runtime's own bad content, judged as such
    tampered = relay_player.entry_fields(relay_player.sync_event(4)) | {
        "event": b"{not json",
        "content_hash": content_hash(b"{not json"),
    }
    relay_player.send_fields(redis_client, relay_player.HUB_PROJECT, signed_event(tampered))
    unsigned = {
        k: v
        for k, v in relay_player.entry_fields(relay_player.sync_event(5)).items()
        if k != SIGNATURE_FIELD
    }
    relay_player.send_fields(redis_client, relay_player.HUB_PROJECT, unsigned)
    worker.run_once()

    assert (accepted(), duplicate(), conflict()) == (3, 1, 1)
    assert reused() == 1
    assert bad_json() == 1
    assert refused() == 1
    assert latencies() == 3  # accepted events only
    assert ingests() >= 1
    # occurred_at is in 2026-11; whatever the clock says, a latency is never negative
    assert sample("hubsync_end_to_end_latency_seconds_sum") >= 0


def test_lag_and_oldest_pending_age_follow_the_group(
    redis_client: redis.Redis, worker: HubConsumer
) -> None:
    for sequence in range(1, 6):
        relay_player.send(redis_client, relay_player.sync_event(sequence))
    worker.refresh_streams(force=True)
    stream = relay_player.EVENTS
    (before,) = read_lag(redis_client, [stream])
    assert (before.lag, before.pending, before.oldest_pending_age_seconds) == (5, 0, 0.0)

    # Another consumer reads two entries and dies before acking them.
    redis_client.xreadgroup(keys.CONSUMER_GROUP, "gone", {stream: ">"}, count=2)
    (stuck,) = read_lag(redis_client, [stream])
    assert (stuck.lag, stuck.pending) == (3, 2)
    assert stuck.oldest_pending_age_seconds >= 0
    assert (stuck.runtime_id, stuck.unstored) == (relay_player.RUNTIME, 5)
    assert stuck.oldest_unstored_age_seconds == stuck.oldest_pending_age_seconds

    worker.run_once()
    assert sample("hubsync_consumer_lag", **PER_RUNTIME) == 0
    assert sample("hubsync_runtime_unstored_entries", **PER_RUNTIME) == 2  # the dead one's
    assert sample("hubsync_runtime_oldest_unstored_age_seconds", **PER_RUNTIME) >= 0
    # The dead consumer's two entries stay pending (reclaim_idle is 60 s): the
    # gauge holds their age as of the run, which a later reading can only exceed.
    exported = sample("hubsync_oldest_pending_age_seconds", **PER_RUNTIME)
    (later,) = read_lag(redis_client, [stream])
    assert later.pending == 2
    assert 0 <= exported <= later.oldest_pending_age_seconds

    stuck_ids = redis_client.xpending_range(stream, keys.CONSUMER_GROUP, "-", "+", 10)
    redis_client.xack(stream, keys.CONSUMER_GROUP, *[e["message_id"] for e in stuck_ids])
    worker.run_once()
    assert sample("hubsync_oldest_pending_age_seconds", **PER_RUNTIME) == 0
    assert sample("hubsync_runtime_unstored_entries", **PER_RUNTIME) == 0
    assert sample("hubsync_runtime_oldest_unstored_age_seconds", **PER_RUNTIME) == 0


def test_an_entry_never_delivered_counts_as_unstored_with_its_age(
    redis_client: redis.Redis, worker: HubConsumer
) -> None:
    worker.refresh_streams(force=True)
    stream = relay_player.EVENTS
    relay_player.send(redis_client, relay_player.sync_event(1))
    (waiting,) = read_lag(redis_client, [stream])
    assert (waiting.lag, waiting.pending, waiting.unstored) == (1, 0, 1)
    assert waiting.oldest_pending_age_seconds == 0.0
    assert waiting.oldest_unstored_age_seconds >= 0


def test_each_enrolled_runtimes_presence_is_exported_from_the_hub_store(
    redis_client: redis.Redis, worker: HubConsumer
) -> None:
    beat = PresenceBeat(relay_player.RUNTIME, relay_player.HUB_PROJECT, "box", 7, "0.1.0", 12,
                        "2026-11-29T16:38:54Z")  # fmt: skip
    relay_player.send_presence(redis_client, beat)
    worker.run_once()
    assert sample("hubsync_runtime_reported_backlog", **PER_RUNTIME) == 12
    age = sample("hubsync_runtime_heartbeat_age_seconds", **PER_RUNTIME)
    assert 0 <= age < 60  # the hub's clock at receipt, not the beat's own heartbeat field

    worker.store.revoke(relay_player.RUNTIME)
    worker.run_once()
    assert (
        metrics.CONSUMER_REGISTRY.get_sample_value(
            "hubsync_runtime_heartbeat_age_seconds", PER_RUNTIME
        )
        is None
    )  # a revoked runtime's series go away


def test_reclaimed_entries_are_counted(redis_client: redis.Redis, worker: HubConsumer) -> None:
    reclaimed = delta("hubsync_reclaimed_total")
    for sequence in range(1, 4):
        relay_player.send(redis_client, relay_player.sync_event(sequence))
    worker.refresh_streams(force=True)
    stream = relay_player.EVENTS
    redis_client.xreadgroup(keys.CONSUMER_GROUP, "gone", {stream: ">"}, count=3)
    worker.settings = worker.settings.model_copy(update={"reclaim_idle": 0.001})
    # a pass may come within the 1 ms of idleness Redis requires; the next one claims them
    wait_until(lambda: worker.run_once() and reclaimed() >= 3, timeout=5, interval=0.005)
    assert reclaimed() == 3
    assert worker.stats.accepted == 3


def test_lease_refusals_are_counted_by_reason(redis_client: redis.Redis) -> None:
    held = delta("hubsync_lease_refusals_total", reason="held")
    superseded = delta("hubsync_lease_refusals_total", reason="superseded")
    stale_write = delta("hubsync_lease_refusals_total", reason="fenced_superseded")
    leases = LeaseClient(redis_client)
    first = leases.acquire_or_raise("repo-main", "box-a", 60_000).lease
    assert not leases.acquire("repo-main", "box-b", 60_000).ok
    redis_client.hset(keys.lease("repo-main"), "deadline_ms", 1)  # first's lease expires
    second = leases.acquire_or_raise("repo-main", "box-b", 60_000).lease
    assert second.token > first.token
    assert not leases.renew(first).ok
    assert not leases.fenced_write(first, "ref", b"late").ok
    assert (held(), superseded(), stale_write()) == (1, 1, 1)


def no_problems() -> list[str]:
    """A readiness that finds nothing wrong."""
    return []


def start_consumer_metrics(port: int | None, **addr: str) -> bool:
    """``start_metrics_server`` of the consumer's registry, always ready."""
    return metrics.start_metrics_server(
        port, registry=metrics.CONSUMER_REGISTRY, readiness=no_problems, **addr
    )


def test_metrics_server_is_off_for_port_zero_and_a_taken_port_is_a_clear_error() -> None:
    assert start_consumer_metrics(0) is False
    assert start_consumer_metrics(None) is False
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(metrics.MetricsServerError, match=f"--metrics-port.*{port}|{port}"):
            start_consumer_metrics(port, addr="127.0.0.1")


def test_metrics_server_serves_its_registry_only_over_http() -> None:
    port = free_port()
    assert start_consumer_metrics(port, addr="127.0.0.1") is True
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    assert "# TYPE hubsync_events_ingested_total counter" in body
    assert 'hubsync_events_ingested_total{outcome="accepted"}' in body
    assert "hubsync_events_sent_total" not in body  # the relay's
    assert "hubsync_lease_refusals_total" not in body  # the library's
    assert "python_gc_objects_collected_total" not in body  # the default registry's


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_metrics_server_answers_healthz_apart_and_refuses_other_paths() -> None:
    port = free_port()
    assert start_consumer_metrics(port) is True  # the default address: loopback
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
        assert (response.status, response.read()) == (200, b"ok\n")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/anything", timeout=5)
    refused.value.close()
    assert refused.value.code == 404


def get(port: int, path: str) -> tuple[int, bytes]:
    """Status and body of ``GET path`` on the metrics port (an error status too)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, refused.read()


def test_readyz_follows_the_loop_heartbeat_and_the_conditions_while_healthz_stays_ok(
    server_clock: FakeClock,
) -> None:
    readiness = Readiness(stale_after=30.0, monotonic=server_clock)
    redis_up = [True]
    readiness.require("Redis unreachable", lambda: redis_up[0])
    server = metrics.serve_metrics(0, "127.0.0.1", metrics.RELAY_REGISTRY, readiness.problems)
    port = server.address[1]
    try:
        assert get(port, "/readyz") == (503, b"not ready: loop not started\n")
        readiness.beat()
        assert get(port, "/readyz") == (200, b"ready\n")
        server_clock.advance(30.0)
        assert get(port, "/readyz") == (200, b"ready\n")  # stale only past stale_after
        server_clock.advance(12.0)
        assert get(port, "/readyz") == (503, b"not ready: loop stalled: no pass for 42s\n")
        assert get(port, "/healthz") == (200, b"ok\n")  # liveness is not readiness
        readiness.beat()
        redis_up[0] = False
        assert get(port, "/readyz") == (503, b"not ready: Redis unreachable\n")
        redis_up[0] = True
        assert get(port, "/readyz") == (200, b"ready\n")
    finally:
        server.close()


def test_metrics_listen_on_loopback_unless_told_otherwise() -> None:
    assert metrics.DEFAULT_METRICS_ADDR == "127.0.0.1"
    assert ConsumerSettings(hub_url="sqlite:///x").metrics_host == "127.0.0.1"


@pytest.mark.parametrize(("host", "expected"), [(None, "127.0.0.1"), ("0.0.0.0", "0.0.0.0")])
def test_a_daemon_listens_for_metrics_on_loopback_unless_given_a_metrics_host(
    redis_url: str, tmp_path: Path, host: str | None, expected: str
) -> None:
    port = free_port()
    env = {"HUBSYNC_REDIS_URL": redis_url} | ({"HUBSYNC_METRICS_HOST": host} if host else {})
    child = Child(
        "consumer",
        hubsync_command(
            "consume", "--hub-db", str(tmp_path / "hub.db"), "--metrics-port", str(port)
        ),
        tmp_path / "consume.log",
        env=env,
    ).start()
    try:
        wait_until(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), timeout=30)
        child.check()
        listening = _listening_addresses(child.pid, port)
    finally:
        child.stop()
    assert listening == {expected}


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _listening_addresses(pid: int, port: int) -> set[str]:
    """The IPv4 addresses a process listens on at ``port`` (from /proc/net/tcp, by inode)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed while we looked
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, port_hex = fields[1].split(":")
        if fields[3] == "0A" and int(port_hex, 16) == port and fields[9] in inodes:
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_hubsync(args, timeout=60)


@pytest.mark.parametrize("port", ["70000", "-1", "nine"])
@pytest.mark.parametrize("command", ["relay", "consume"])
def test_a_bad_metrics_port_is_a_one_line_usage_error(
    command: str, port: str, tmp_path: Path
) -> None:
    place = (
        ["--state-dir", str(tmp_path)] if command == "relay" else ["--hub-db", str(tmp_path / "h")]
    )
    result = run_cli(command, *place, "--metrics-port", port)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.lower().startswith("error")]
    assert len(errors) == 1 and "--metrics-port" in errors[0]


def test_a_taken_metrics_port_stops_the_daemon_at_start(redis_url: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = run_cli(
            "consume",
            "--hub-db",
            str(tmp_path / "hub.db"),
            "--redis-url",
            redis_url,
            "--metrics-port",
            port,
            "--once",
        )
    assert result.returncode == 1
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


# ----- the server's bounds: one thread, so many connections, each for so long -----


def many(wanted: int) -> int:
    """``wanted`` sockets, or as many as this process may open with room to spare (its soft
    limit raised to the hard one first)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if resource.RLIM_INFINITY not in (soft, hard) and hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return wanted if soft == resource.RLIM_INFINITY else min(wanted, soft - 256)


def idle_sockets(port: int, count: int, first_bytes: bytes = b"") -> list[socket.socket]:
    """``count`` connections to the metrics port that send ``first_bytes`` and then nothing."""
    opened = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if first_bytes:
            sock.sendall(first_bytes)
        opened.append(sock)
    return opened


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (a read sees the end, or a reset)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def http(port: int, request: bytes) -> bytes:
    """The whole answer of the server to ``request``, read until it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.fixture
def server_clock() -> FakeClock:
    """The monotonic clock of ``bounded_server``, moved by the test."""
    return FakeClock(0.0)


@pytest.fixture
def bounded_server(server_clock: FakeClock) -> Iterator[MetricsServer]:
    """A metrics server of at most 32 connections, each given 10 s of ``server_clock``."""
    server = metrics.serve_metrics(
        0,
        "127.0.0.1",
        metrics.CONSUMER_REGISTRY,
        no_problems,
        max_connections=32,
        timeout=10.0,
        clock=server_clock,
    )
    try:
        yield server
    finally:
        server.close()


def test_many_idle_connections_take_no_thread_and_metrics_still_answer(
    bounded_server: MetricsServer,
) -> None:
    port = bounded_server.address[1]
    threads = threading.active_count()
    idle = idle_sockets(port, many(1500) - 200)
    idle += idle_sockets(port, 200, b"GET /metrics HTTP/1.1\r\n")
    try:
        wait_until(lambda: closed_by_server(idle[-33]), what="the oldest connections closed")
        assert threading.active_count() <= threads
        assert bounded_server.open_connections <= 32
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert response.status == 200
            assert b"# TYPE hubsync_events_ingested_total counter" in response.read()
        assert threading.active_count() <= threads
    finally:
        for sock in idle:
            sock.close()


def test_an_idle_connection_is_closed_at_its_deadline_only(
    bounded_server: MetricsServer, server_clock: FakeClock
) -> None:
    port = bounded_server.address[1]
    clock = server_clock
    [silent, halfway] = idle_sockets(port, 1) + idle_sockets(port, 1, b"GET /metr")
    try:
        wait_until(lambda: bounded_server.open_connections == 2, what="both connections open")
        clock.advance(9.9)
        assert http(port, b"GET /healthz HTTP/1.1\r\n\r\n").endswith(b"\r\n\r\nok\n")
        assert not closed_by_server(silent) and not closed_by_server(halfway)
        clock.advance(0.2)
        wait_until(lambda: closed_by_server(silent) and closed_by_server(halfway), what="closed")
        assert bounded_server.open_connections == 0
    finally:
        silent.close()
        halfway.close()


def test_the_server_answers_head_refuses_other_methods_and_an_endless_head(
    bounded_server: MetricsServer,
) -> None:
    port = bounded_server.address[1]
    head = http(port, b"HEAD /metrics HTTP/1.1\r\nAccept: text/plain\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")
    assert b"Content-Length: 0\r\n" not in head
    assert http(port, b"POST /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 ")
    assert http(port, b"nonsense\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    endless = b"GET /metrics HTTP/1.1\r\n" + b"X-Filler: " + b"a" * 10_000
    assert http(port, endless).startswith(b"HTTP/1.1 431 ")
    assert bounded_server.open_connections == 0


def test_a_daemon_serving_metrics_keeps_its_threads_under_many_idle_connections(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    child = Child(
        "consumer",
        hubsync_command(
            "consume", "--hub-db", str(tmp_path / "hub.db"), "--metrics-port", str(port)
        ),
        tmp_path / "consume.log",
        env={"HUBSYNC_REDIS_URL": redis_url},
    ).start()
    idle: list[socket.socket] = []
    try:
        wait_until(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), timeout=30)
        threads = _threads(child.pid)
        idle = idle_sockets(port, many(1500))
        assert _answers(f"http://127.0.0.1:{port}/metrics")
        assert _threads(child.pid) <= threads
        child.check()
    finally:
        for sock in idle:
            sock.close()
        child.stop()


def _threads(pid: int) -> int:
    """The number of threads of process ``pid`` (from /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Threads:")).split()[1])
