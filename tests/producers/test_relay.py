"""The relay daemon against a real private redis-server, with a stand-in hub."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import redis

from hubsync.core import keys
from hubsync.core.entries import Outcome, OutcomeRecord, outcomes_entry_fields
from hubsync.core.signing import HUB_ID_FIELD, SIGNATURE_FIELD, RuntimeKey, sign_outcomes_entry
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.processes import Child, hubsync_command, run_hubsync
from producers.registry import RuntimeRegistry
from producers.relay import Relay
from producers.relay.acks import AckReader, AckStats
from producers.relay.credentials import RelayCredentials
from producers.store.event_store import RunEventStore
from tests.helpers.clock import FakeClock
from tests.helpers.hub_double import ack_everything, stream_events
from tests.helpers.operator_support import run_cli
from tests.helpers.relay_support import (
    append_many,
    make_runtime,
    relay_settings,
    relay_with_events,
    start_relay_process,
)
from tests.helpers.support import wait_until
from tests.helpers.trust import enrollment_of, signed_outcomes


def keys_on_stream(client: redis.Redis, hub_project: str) -> list[tuple[str, str, int]]:
    return [
        (f["project_id"].decode(), f["run_id"].decode(), int(f["sequence"]))
        for f in stream_events(client, hub_project)
    ]


def test_ten_thousand_events_over_three_projects_arrive_in_order_and_ack_to_zero_pending(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    registry, stores = make_runtime(state_dir, ["alpha", "beta", "gamma"])
    for store, runs in zip(stores, (3, 4, 5), strict=True):
        append_many(store, runs=runs, per_run=10_000 // 12)
    expected = sum(s.outbox_counts()["total"] for s in stores)

    relay = Relay(relay_settings(state_dir, redis_url), registry)
    relay.run_once()
    seen = 0
    for store in stores:
        on_stream = keys_on_stream(redis_client, store.hub_project)
        seen += len(on_stream)
        assert len(on_stream) == len(set(on_stream)), "a first drain sends each row once"
        per_run: dict[str, list[int]] = {}
        for _, run_id, sequence in on_stream:
            per_run.setdefault(run_id, []).append(sequence)
        for sequences in per_run.values():
            assert sequences == list(range(1, len(sequences) + 1))
        assert store.outbox_counts()["attempted"] == store.outbox_counts()["total"]
    assert seen == expected == 10_000 // 12 * 12
    runtime = registry.runtime_id
    for name in ("alpha", "beta", "gamma"):  # its own stream of each hub project, nothing shared
        assert redis_client.exists(keys.events_stream(name, runtime))
    assert not redis_client.exists(keys.PROJECTS, *map(keys.shared_events_stream, ["alpha"]))

    for store in stores:
        ack_everything(redis_client, store.hub_project)
    relay.run_once()
    relay.close()
    for store in stores:
        counts = store.outbox_counts()
        assert counts["pending"] == 0 and counts["acked"] == counts["total"]
        ack_key = keys.acks_stream(store.hub_project, registry.runtime_id)
        assert redis_client.xlen(ack_key) <= 1, "consumed ack entries are trimmed"


def test_applied_ack_entries_are_trimmed_after_a_read_that_finds_nothing_more(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    registry, (store,) = make_runtime(tmp_path / "state", ["alpha"])
    append_many(store, runs=1, per_run=3)
    credentials = RelayCredentials(registry)
    assert credentials.refresh() is not None
    stats = AckStats()
    # No trim for an hour while entries keep coming: only a read that finds none trims.
    reader = AckReader(registry.runtime_id, stats, credentials, trim_interval=3600.0)
    reader.add_store(store)
    acks = keys.acks_stream("alpha", registry.runtime_id)
    rows = store.outbox_for_run("run-0")

    def ack(*sequences: int) -> None:
        records = [
            OutcomeRecord(store.project_id, "run-0", s, Outcome.ACCEPTED, rows[s - 1].content_hash)
            for s in sequences
        ]
        redis_client.xadd(
            acks, signed_outcomes(registry.runtime_id, outcomes_entry_fields("alpha", records))
        )

    # XTRIM MINID keeps the last entry applied: the stream holds at least it.
    ack(1)
    ack(2)
    assert reader.read(redis_client, block_ms=None) == 2
    assert redis_client.xlen(acks) == 1, "the first applied entries are trimmed at once"
    ack(3)
    assert reader.read(redis_client, block_ms=None) == 1
    assert redis_client.xlen(acks) == 2, "applied, its trim waits for the interval"
    assert reader.read(redis_client, block_ms=None) == 0
    assert redis_client.xlen(acks) == 1
    assert stats.acked == 3 and store.outbox_counts()["acked"] == 3
    assert store.relay_position("acks:alpha") is not None
    reader.remove_store(store.project_id)
    registry.close()


def test_a_restarted_relay_does_not_resend_acked_rows(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    registry, store, first = relay_with_events(state_dir, redis_url, runs=2, per_run=50)
    first.run_once()
    ack_everything(redis_client, "alpha")
    first.run_once()
    first.close()
    assert store.outbox_counts()["acked"] == 100

    stream_length = redis_client.xlen(keys.events_stream("alpha", registry.runtime_id))
    second = Relay(relay_settings(state_dir, redis_url), registry)
    summary = second.run_once()
    second.close()
    assert summary.sender.sent == 0 and summary.sender.resent == 0
    assert len(stream_events(redis_client, "alpha")) == 100
    # only a presence beat was added
    assert redis_client.xlen(keys.events_stream("alpha", registry.runtime_id)) == stream_length + 1


def relayed_once(
    tmp_path: Path, redis_url: str, events: int, resend_timeout_cap: float
) -> tuple[FakeClock, RunEventStore, Relay]:
    """One run of ``events`` events, relayed once, resends due after 5 s on a fake clock."""
    clock = FakeClock()
    overrides = {"resend_timeout": 5, "resend_timeout_cap": resend_timeout_cap}
    _, store, relay = relay_with_events(
        tmp_path / "state", redis_url, 1, events, clock, **overrides
    )
    relay.run_once()
    return clock, store, relay


def test_conflict_and_rejected_rows_are_counted_and_never_resent(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    clock, store, relay = relayed_once(tmp_path, redis_url, events=6, resend_timeout_cap=5)

    def judge(project_id: str, run_id: str, sequence: int) -> tuple[Outcome, str | None]:
        if sequence == 2:
            return Outcome.CONFLICT, "sequence_reused"
        if sequence == 3:
            return Outcome.REJECTED, "max_deliveries"
        if sequence == 4:
            return Outcome.DUPLICATE, None
        return Outcome.ACCEPTED, None

    ack_everything(redis_client, "alpha", judge)
    relay.run_once()
    counts = store.outbox_counts()
    assert counts["acked"] == 4 and counts["conflict"] == 1 and counts["rejected"] == 1
    assert counts["pending"] == 0
    assert relay.ack_stats.conflict == 1 and relay.ack_stats.rejected == 1

    # past the resend timeout: pending rows would be due now, these must not be
    clock.advance(60)
    summary = relay.run_once()
    relay.close()
    assert summary.sender.resent == 0
    assert len(stream_events(redis_client, "alpha")) == 6


def one_event_relayed(
    tmp_path: Path, redis_url: str
) -> tuple[RuntimeRegistry, RunEventStore, Relay]:
    """A runtime with one event (``run-0``, sequence 1) on ``alpha``, relayed once."""
    state_dir = tmp_path / "state"
    registry, (store,) = make_runtime(state_dir, ["alpha"])
    store.append_event("run-0", "step.completed", {"step": "one"})
    relay = Relay(relay_settings(state_dir, redis_url), registry)
    relay.run_once()
    return registry, store, relay


def test_an_outcome_for_other_bytes_under_our_key_leaves_the_row_alone(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    registry, store, relay = one_event_relayed(tmp_path, redis_url)
    forged = OutcomeRecord(
        store.project_id, "run-0", 1, Outcome.CONFLICT, "f" * 64, "sequence_reused", "e" * 64
    )
    # signed as the hub signs: the hub judged other bytes under this runtime's key
    redis_client.xadd(
        keys.acks_stream("alpha", registry.runtime_id),
        signed_outcomes(registry.runtime_id, outcomes_entry_fields("alpha", [forged])),
    )
    with caplog.at_level("WARNING", logger="producers.relay.acks"):
        relay.run_once()
    relay.close()
    counts = store.outbox_counts()
    assert counts["conflict"] == 0 and counts["pending"] == 1
    assert relay.ack_stats.foreign == 1
    assert any(
        r.name == "producers.relay.acks" and "security" in r.getMessage() for r in caplog.records
    )


def test_outcomes_not_signed_by_our_hub_for_this_stream_are_ignored(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    registry, store, relay = one_event_relayed(tmp_path, redis_url)
    [sent] = stream_events(redis_client, "alpha")
    accepted = OutcomeRecord(
        store.project_id, "run-0", 1, Outcome.ACCEPTED, sent["content_hash"].decode()
    )
    runtime_id = registry.runtime_id
    enrollment = enrollment_of(runtime_id)
    assert enrollment is not None
    key = RuntimeKey(enrollment.key)

    def signed_by(signer: RuntimeKey, hub_id: str) -> dict[str, str]:
        fields = outcomes_entry_fields("alpha", [accepted])
        fields[HUB_ID_FIELD] = hub_id
        fields[SIGNATURE_FIELD] = sign_outcomes_entry(signer, fields, runtime_id=runtime_id)
        return fields

    untrusted = {
        "unsigned": outcomes_entry_fields("alpha", [accepted]),
        "bad_signature": signed_by(RuntimeKey.generate(), enrollment.hub_id),
        "other_hub": signed_by(key, "another-hub"),
        # genuinely signed, but for another hub project's stream
        "wrong_stream": signed_outcomes(runtime_id, outcomes_entry_fields("beta", [accepted])),
    }
    acks = keys.acks_stream("alpha", runtime_id)
    for fields in [*untrusted.values(), *untrusted.values()]:
        redis_client.xadd(acks, fields)  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="producers.relay.acks"):
        relay.run_once()
    assert relay.ack_stats.unverified == 2 * len(untrusted)
    assert relay.ack_stats.acked == 0 and store.outbox_counts()["pending"] == 1
    warnings = [r.getMessage() for r in caplog.records if r.name == "producers.relay.acks"]
    assert sorted(w.split("(")[1].split(")")[0] for w in warnings) == sorted(untrusted)

    ack_everything(redis_client, "alpha")  # the hub's own, signed outcome
    relay.run_once()
    relay.close()
    assert relay.ack_stats.acked == 1 and store.outbox_counts()["acked"] == 1


def test_a_rejected_for_an_acked_rows_own_bytes_is_counted_and_the_row_stays_acked(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    registry, store, relay = one_event_relayed(tmp_path, redis_url)
    [sent] = stream_events(redis_client, "alpha")
    ack_everything(redis_client, "alpha")
    relay.run_once()
    assert store.outbox_counts()["acked"] == 1
    # the hub's own signature, naming the row and its hash: it contradicts the ack
    rejected = OutcomeRecord(
        store.project_id, "run-0", 1, Outcome.REJECTED, sent["content_hash"].decode(), "bad_json"
    )
    acks = keys.acks_stream("alpha", registry.runtime_id)
    redis_client.xadd(
        acks, signed_outcomes(registry.runtime_id, outcomes_entry_fields("alpha", [rejected]))
    )  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="producers.relay.acks"):
        summary = relay.run_once()
    relay.close()
    assert (summary.acks.contradicted, summary.acks.rejected) == (1, 0)
    assert summary.as_dict()["contradicted"] == 1
    assert store.outbox_counts()["acked"] == 1 and store.outbox_counts()["rejected"] == 0
    assert "security: a hub outcome contradicts the ack" in caplog.text


def test_rows_left_unacked_past_the_resend_timeout_are_sent_again(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    clock, store, relay = relayed_once(tmp_path, redis_url, events=3, resend_timeout_cap=100)
    assert len(stream_events(redis_client, "alpha")) == 3
    assert relay.run_once().sender.resent == 0  # not due before the timeout

    clock.advance(5)
    assert relay.run_once().sender.resent == 3
    relay.close()
    assert len(stream_events(redis_client, "alpha")) == 6
    # the timeout doubled: the next resend is due 10 s after the last, not sooner
    assert store.due_resends(clock() + 9.9, 10) == []
    due = store.due_resends(clock() + 10, 10)
    assert len(due) == 3 and all(row.attempts == 2 for row in due)


def test_kill_minus_nine_mid_drain_then_restart_delivers_everything(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    registry, (store,) = make_runtime(state_dir, ["alpha"])
    append_many(store, runs=4, per_run=1_000)
    total = store.outbox_counts()["total"]

    # small batches keep the drain long next to the moment between seeing 500
    # entries (XLEN, cheap) and freezing the relay, so the kill lands mid-drain
    process = start_relay_process(state_dir, redis_url, "--batch-count", "50")
    stream = keys.events_stream("alpha", registry.runtime_id)
    wait_until(lambda: redis_client.xlen(stream) > 500, timeout=30, interval=0.001)
    process.pause()
    assert redis_client.xlen(stream) < total, "frozen before the drain finished"
    process.kill()

    restarted = start_relay_process(state_dir, redis_url, "--resend-timeout", "1")
    try:
        wait_until(
            lambda: len({tuple(k) for k in keys_on_stream(redis_client, "alpha")}) == total,
            timeout=60,
            what="every row on the stream at least once",
        )
        ack_everything(redis_client, "alpha")
        wait_until(lambda: store.outbox_counts()["pending"] == 0, timeout=30, what="all acked")
    finally:
        assert restarted.stop(timeout=30) == 0
    assert store.outbox_counts()["acked"] == total


def test_redis_outage_while_appending_loses_nothing_and_never_blocks_appends(
    tmp_path: Path, private_redis: RedisServerProcess
) -> None:
    state_dir = tmp_path / "state"
    _registry, (store,) = make_runtime(state_dir, ["alpha"])
    client = redis.Redis.from_url(private_redis.url)
    process = start_relay_process(state_dir, private_redis.url)
    try:
        store.append_event("run-0", "step.completed", {"step": "warm-up"})
        wait_until(lambda: len(stream_events(client, "alpha")) == 1, timeout=10)

        private_redis.stop()
        # Every append below completes while Redis is down, so none of them waits
        # on Redis: had one blocked on it, this loop would hang until the restart.
        for index in range(1_000):
            store.append_event(f"run-{index % 3}", "step.completed", {"step": f"s{index}"})
        log = state_dir / "relay.log"
        wait_until(lambda: "Redis unavailable" in log.read_text(), what="the relay noticed")
        private_redis.start()

        wait_until(
            lambda: len(stream_events(client, "alpha")) >= 1_001, timeout=60,
            what="the backlog drained after Redis came back",
        )  # fmt: skip
        ack_everything(client, "alpha")
        wait_until(lambda: store.outbox_counts()["pending"] == 0, timeout=30)
    finally:
        exit_code = process.stop(timeout=30)
        client.close()
    assert exit_code == 0
    assert store.outbox_counts()["acked"] == 1_001
    assert log.read_text().count("Redis unavailable") == 1, "one line per change of state"


def test_a_running_relay_sends_new_commits_and_reports_health(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    registry, (store,) = make_runtime(state_dir, ["alpha"])
    process = start_relay_process(state_dir, redis_url, "--presence-interval", "3600")
    try:
        store.append_event("run-0", "step.completed", {"step": "one"})
        wait_until(lambda: len(stream_events(redis_client, "alpha")) == 1, timeout=10)
        health = wait_until(lambda: redis_client.get(keys.relay_health(registry.runtime_id)))
        assert json.loads(health)["runtime_id"] == registry.runtime_id
        check = run_hubsync(
            ["relay", "--state-dir", str(state_dir), "--redis-url", redis_url, "--check"]
        )
        assert check.returncode == 0
    finally:
        assert process.stop(timeout=30) == 0
    assert not redis_client.exists(keys.relay_health(registry.runtime_id)), "a clean stop says so"
    assert b"sent 1" in (state_dir / "relay.log").read_bytes()


def test_a_relay_started_while_redis_is_down_waits_for_it_then_delivers(
    tmp_path: Path, private_redis: RedisServerProcess
) -> None:
    private_redis.stop()  # its port now has nothing listening
    state_dir = tmp_path / "state"
    _, (store,) = make_runtime(state_dir, ["alpha"])
    store.append_event("run-0", "step.completed", {"step": "one"})
    log = state_dir / "relay.log"
    process = start_relay_process(state_dir, private_redis.url)
    client = redis.Redis.from_url(private_redis.url)
    try:
        unreachable = f"Redis unreachable at {private_redis.url}"
        wait_until(lambda: unreachable in log.read_text(), what="the outage logged")
        assert process.alive, "a daemon waits for Redis rather than exiting 3"
        private_redis.start()
        wait_until(lambda: len(stream_events(client, "alpha")) == 1, timeout=30, what="delivery")
    finally:
        exit_code = process.stop(timeout=30)
        client.close()
    assert exit_code == 0
    text = log.read_text()
    assert text.count("Redis unreachable") == 1, "one line per change of state, not per retry"
    assert f"Redis reachable at {private_redis.url}" in text


def test_check_fails_without_a_live_relay_and_bad_arguments_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, redis_url: str
) -> None:
    state_dir = tmp_path / "state"
    make_runtime(state_dir, ["alpha"])
    base = ["relay", "--state-dir", str(state_dir)]
    check = run_cli(capsys, *base, "--redis-url", redis_url, "--check")
    assert check.code == 1
    bad = run_cli(capsys, *base, "--batch-count", "0", "--once")
    assert bad.code == 2
    assert "--batch-count" in bad.err and "Traceback" not in bad.err
    # a real process: the daemon's own exit on a dead Redis
    down = run_hubsync([*base, "--redis-url", "redis://127.0.0.1:1/0", "--once"])
    assert down.returncode == 3 and "cannot reach Redis" in down.stderr


def test_a_second_relay_on_the_same_state_dir_is_refused_until_the_first_dies(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    state_dir = tmp_path / "state"
    registry, (store,) = make_runtime(state_dir, ["alpha"])
    lock = state_dir / "relay.lock"

    def held_by(child: Child) -> bool:
        return lock.is_file() and lock.read_text().startswith(f"{child.pid} ")

    first = start_relay_process(state_dir, redis_url)
    second = Child(
        "second relay",
        hubsync_command("relay", "--state-dir", str(state_dir), "--redis-url", redis_url),
        tmp_path / "second.log",
    )
    try:
        wait_until(lambda: redis_client.get(keys.relay_health(registry.runtime_id)))
        store.append_event("run-0", "step.completed", {"step": "one"})
        wait_until(lambda: len(stream_events(redis_client, "alpha")) == 1, what="delivery")

        second.start()  # a daemon: it must exit at once, not run beside the first
        assert second.wait(timeout=30) == 2
        once = run_hubsync(
            ["relay", "--state-dir", str(state_dir), "--redis-url", redis_url, "--once"]
        )
        assert once.returncode == 2
        for err in (second.log_text(), once.stderr):
            assert "Traceback" not in err
            [line] = err.splitlines()
            assert line.startswith("error: another relay (pid ")
            assert f"pid {first.pid} on host " in line and str(state_dir) in line
        check = run_hubsync(
            ["relay", "--state-dir", str(state_dir), "--redis-url", redis_url, "--check"]
        )
        assert check.returncode == 0, check.stderr  # --check only reads: it works beside the relay
        assert len(stream_events(redis_client, "alpha")) == 1, "nothing was sent twice"
        assert held_by(first)

        first.kill()  # kill -9: the kernel drops the lock, no stale file blocks the next relay
        replacement = start_relay_process(state_dir, redis_url)
        wait_until(lambda: held_by(replacement), what="the new relay's lock")
        store.append_event("run-0", "step.completed", {"step": "two"})
        wait_until(
            lambda: ("run-0", 2) in {key[1:] for key in keys_on_stream(redis_client, "alpha")},
            what="delivery by the new relay",
        )
        assert replacement.stop(timeout=30) == 0
    finally:
        for child in (first, second):
            child.stop(timeout=30)


def test_a_lock_file_the_relay_cannot_open_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, redis_url: str
) -> None:
    state_dir = tmp_path / "state"
    make_runtime(state_dir, ["alpha"])
    (state_dir / "relay.lock").mkdir()  # a directory where the lock file should be

    result = run_cli(
        capsys, "relay", "--state-dir", str(state_dir), "--redis-url", redis_url, "--once"
    )

    assert result.code == 2
    assert "Traceback" not in result.err
    [line] = result.err.splitlines()
    assert line.startswith(f"error: cannot open the relay's lock file {state_dir / 'relay.lock'} (")


def test_a_second_signal_exits_the_relay_at_once(tmp_path: Path, redis_url: str) -> None:
    state_dir = tmp_path / "state"
    make_runtime(state_dir, ["alpha"])
    log = state_dir / "relay.log"
    process = start_relay_process(state_dir, redis_url)
    try:
        # its handlers are installed once it syncs a project
        wait_until(lambda: "syncing project" in log.read_text(), what="the relay running")
        # Both signals wait in the kernel while it is stopped, so they arrive together:
        # the second comes before the warm stop the first asked for can finish.
        process.pause()
        process.signal(signal.SIGINT)
        process.signal(signal.SIGTERM)
        process.resume()
        # Which of the two its handlers see second is the kernel's and the interpreter's
        # choice (a signal may reach a thread other than the main one, or land inside the
        # first's handler): either way the second exits at once, with 128 + its number
        # (tests/core/test_daemon.py pins that rule), not through the warm stop's exit 0.
        assert process.wait(timeout=20) in (128 + signal.SIGINT, 128 + signal.SIGTERM)
    finally:
        process.kill()
    text = log.read_text()
    # (the first signal's own line may not be written: the second can cut its handler short)
    assert "second signal, exiting now" in text
    assert "Redis outages" not in text, "exited at once, before any summary"
